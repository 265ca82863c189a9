"""Fixtures of the Kubernetes tier: one real control plane per test session, with every CRD installed.

Registered for the whole suite by tests/conftest.py (`pytest_plugins`), so every tier that needs the
control plane (tests/k8s, tests/monitoring) shares the one session-scoped instance.

`cluster` (session scope) is a `Cluster`:

- `cluster.kubeconfig`: Path of an admin kubeconfig (client certificate in system:masters); export it as
  KUBECONFIG for subprocesses (kopf, helm, kubectl-like tools).
- `cluster.server`: the API server's URL (https://127.0.0.1:PORT).
- `cluster.api`: a `kubernetes.client.ApiClient` for the typed APIs (`kubernetes.client.AppsV1Api(cluster.api)`).
- `cluster.kube`: a `mysqlcapture_operator.kube.Kube`: `apply(obj, dry_run=True)` (server-side apply, strict
  field validation; raises `KubeError` with the server's message), `get`, `list`, `delete`, `create`,
  `request(method, path, ...)`, `serves(api_version, kind)`.
- `cluster.apply_yaml(text, namespace=None, dry_run=False)`: server-side apply of every document of a YAML
  stream (a namespace is filled in for namespaced kinds that have none); returns the applied objects.
- `cluster.new_namespace(prefix)`: a fresh namespace's name.

Installed before the first test: crds/ (MySQLCapture) and the third-party CRDs pinned in
thirdparty-crds.pins (Spark operator's SparkApplication and ScheduledSparkApplication, Prometheus operator's
ServiceMonitor, PodMonitor and PrometheusRule; `tests.k8s.thirdparty` fetches them from their Go modules into the
cache), so server-side dry runs validate against their real schemas. `namespace` (function scope)
is a fresh namespace per test. Every test under tests/k8s/ not marked `unit` is marked `k8s`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from mysqlcapture_operator.kube import Kube, KubeError, load_api_client

from tests.k8s import thirdparty
from tests.k8s.controlplane import ControlPlane
from tests.support import REPO, wait_until

OWN_CRDS = REPO / "crds"


@dataclass
class Cluster:
    """A running test control plane; see the module docstring."""

    kubeconfig: Path
    server: str
    api: client.ApiClient
    kube: Kube
    _names: Iterator[int] = field(default_factory=itertools.count)

    def apply_yaml(self, text: str, *, namespace: str | None = None, dry_run: bool = False) -> list[dict[str, Any]]:
        applied = []
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            meta = doc.setdefault("metadata", {})
            if namespace and "namespace" not in meta:
                res = (self.kube.resources(doc["apiVersion"]) or {}).get(doc["kind"])
                if res is None or res.namespaced:
                    meta["namespace"] = namespace
            applied.append(self.kube.apply(doc, dry_run=dry_run))
        return applied

    def new_namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{next(self._names)}"
        self.kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name


def own_crds() -> list[Path]:
    """crds/: the MySQLCapture CRD."""
    return sorted(OWN_CRDS.glob("*.yaml"))


def install_crds(kube: Kube, paths: list[Path]) -> None:
    """Server-side apply each CRD file (the Spark ones exceed client-side apply's annotation limit)."""
    names = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                kube.apply(doc)
                names.append(doc["metadata"]["name"])

    def established() -> bool:
        for name in names:
            crd = kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) or {}
            conditions = (crd.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_until(established, timeout=60, what=f"CRDs {names} to be established", interval=0.2)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    crds = own_crds() + thirdparty.crd_files()  # before the control plane starts: a failed fetch fails at once
    with ControlPlane() as cp:
        api = load_api_client(str(cp.kubeconfig))
        kube = Kube(api, field_manager="mysqlcapture-tests")
        install_crds(kube, crds)
        try:
            yield Cluster(kubeconfig=cp.kubeconfig, server=cp.server, api=api, kube=kube)
        finally:
            api.close()


@pytest.fixture
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> str:
    """A fresh namespace for one test (left in place: the session's control plane goes away at the end)."""
    prefix = request.node.name.split("[")[0].replace("_", "-").lower()[:40].strip("-")
    return cluster.new_namespace(prefix)


__all__ = ["Cluster", "KubeError", "cluster", "install_crds", "namespace", "own_crds"]
