"""The test control plane itself: every CRD served, server-side validation, garbage collection."""

from __future__ import annotations

import pytest
from mysqlcapture_operator.kube import KubeError

from tests.k8s.fixtures import Cluster
from tests.support import wait_until


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("cdc.mysqlcapture.io/v1alpha1", "MySQLCapture"),
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
        ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
        ("monitoring.coreos.com/v1", "PrometheusRule"),
        ("apps/v1", "Deployment"),
    ],
    ids=lambda v: v,
)
def test_kinds_are_served(cluster: Cluster, api_version: str, kind: str) -> None:
    assert cluster.kube.serves(api_version, kind)


def test_garbage_collector_removes_dependents(cluster: Cluster, namespace: str) -> None:
    owner = cluster.kube.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": namespace}}
    )
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    cluster.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "child", "namespace": namespace, "ownerReferences": [ref]},
        }
    )
    assert cluster.kube.delete("v1", "ConfigMap", "owner", namespace)
    wait_until(
        lambda: cluster.kube.get("v1", "ConfigMap", "child", namespace) is None,
        timeout=30,
        what="the garbage collector to delete the owned ConfigMap",
    )


def test_strict_field_validation_names_the_field(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(KubeError) as err:
        cluster.kube.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": namespace}, "dta": {}},
            dry_run=True,
        )
    # Server-side apply answers 500 for a field the schema does not declare; the message names it.
    assert ".dta: field not declared in schema" in err.value.message, err.value.message
