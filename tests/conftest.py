"""Suite-wide fixtures: the Kubernetes tier's control plane is defined once and shared by every tier."""

pytest_plugins = ["tests.k8s.fixtures"]
