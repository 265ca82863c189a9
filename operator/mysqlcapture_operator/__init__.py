"""The Kubernetes operator (kopf) reconciling MySQLCapture resources into workers; built under issue 5."""
