"""A cluster without the Prometheus and Spark operators' CRDs, then with them, on a real control plane.

The session's cluster has every CRD installed, so this test starts a second control plane with only crds/ (our
MySQLCapture) and runs the real operator against it: the capture gets no ServiceMonitor or PrometheusRule, a CronJob
for compaction, and conditions saying so with the fix. The pinned third-party CRDs are then installed into that same
control plane, and the operator notices at its next resync after discovery: a ScheduledSparkApplication replaces the
CronJob, the monitoring children appear, both conditions flip True.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_dev.embedded.mariadb import free_port
from mysqlcapture_operator.kube import Kube, load_api_client

from tests.k8s import thirdparty
from tests.k8s.controlplane import ControlPlane
from tests.k8s.fixtures import Cluster, install_crds, own_crds
from tests.k8s.processes import OperatorProcess, wait_for
from tests.k8s.test_operator import CAPTURES, TEST_OPERATOR_ENV, capture_doc, condition, password_secret, status_of
from tests.support import wait_until

MONITORING = "monitoring.coreos.com/v1"
SPARK = "sparkoperator.k8s.io/v1beta2"
# Short intervals: CRDs installed later are seen within the discovery interval, used at the next resync.
ENV = {
    **TEST_OPERATOR_ENV,
    "MYSQLCAPTURE_LEASE_NAME": "bare",
    "POD_NAME": "op-bare",
    "MYSQLCAPTURE_RESYNC_INTERVAL": "3",
    "MYSQLCAPTURE_DISCOVERY_INTERVAL": "2",
}


@pytest.fixture
def bare_cluster() -> Iterator[Cluster]:
    """A control plane of its own with only crds/ installed."""
    with ControlPlane() as cp:
        api = load_api_client(str(cp.kubeconfig))
        kube = Kube(api, field_manager="mysqlcapture-tests")
        install_crds(kube, own_crds())
        try:
            yield Cluster(kubeconfig=cp.kubeconfig, server=cp.server, api=api, kube=kube)
        finally:
            api.close()


def optional_conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        kind: (c["status"], c["reason"], c["message"])
        for kind in ("Monitoring", "CompactionScheduler")
        if (c := condition(status, kind))
    }


def test_without_the_operators_crds_the_capture_says_so_and_notices_when_they_come(
    bare_cluster: Cluster, tmp_path: Path
) -> None:
    cluster, kube = bare_cluster, bare_cluster.kube
    assert not kube.serves(MONITORING, "ServiceMonitor") and not kube.serves(MONITORING, "PrometheusRule")
    assert not kube.serves(SPARK, "ScheduledSparkApplication")
    ns = cluster.new_namespace("bare")
    password_secret(cluster, ns)
    uid = kube.apply(capture_doc("orders", ns, port=free_port()))["metadata"]["uid"]
    # Cluster-wide (no --namespace): the capture exists before the operator starts, so its first listing has it.
    operator = OperatorProcess(cluster, tmp_path / "operator.log", namespaces=[], env=ENV)
    try:
        cron = wait_for(cluster, "batch/v1", "CronJob", "orders-compaction", ns, timeout=120)
        assert [(r["kind"], r["uid"]) for r in cron["metadata"]["ownerReferences"]] == [("MySQLCapture", uid)]
        applied = wait_until(
            lambda: next((ln for ln in operator.log_text().splitlines() if f"reconciled {ns}/orders:" in ln), None),
            timeout=30,
            what="the operator's log line naming what it applied",
        )
        assert applied.split(": ", 2)[-1] == (
            "ConfigMap/orders-config, Deployment/orders-worker, Service/orders-worker, NetworkPolicy/orders-worker, "
            "CronJob/orders-compaction"
        )
        missing = wait_until(
            lambda: optional_conditions(status_of(cluster, "orders", ns)),
            timeout=60,
            what="the Monitoring and CompactionScheduler conditions",
        )
        assert missing == {
            "Monitoring": (
                "False",
                "PrometheusOperatorMissing",
                "the cluster does not serve ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1): no scrape "
                "config (ServiceMonitor) and no alert rules (PrometheusRule) were created for this capture. Fix: "
                "install the Prometheus operator's CRDs (tested with v0.93.0); the operator creates both within its "
                "discovery and resync intervals",
            ),
            "CompactionScheduler": (
                "False",
                "SparkOperatorMissing",
                "the cluster does not serve ScheduledSparkApplication (sparkoperator.k8s.io/v1beta2): compaction runs "
                "as CronJob orders-compaction (spark-submit), which reports no failed runs. To run it with the Spark "
                "operator, install its CRDs (tested with v2.5.2) and the operator: a ScheduledSparkApplication "
                "replaces the CronJob within this operator's discovery and resync intervals",
            ),
        }

        def missing_events() -> dict[str, tuple[str, str]]:
            found = {e.get("reason", ""): (e["type"], e.get("message", "")) for e in kube.list("v1", "Event", ns)}
            return {reason: found[reason] for reason in found if reason.endswith("Missing")}

        events = wait_until(
            lambda: len(missing_events()) == 2 and missing_events(),
            timeout=30,
            what="an Event for each missing operator",
        )
        assert events == {
            "PrometheusOperatorMissing": ("Warning", missing["Monitoring"][2]),
            "SparkOperatorMissing": ("Normal", missing["CompactionScheduler"][2]),
        }
        before = {c["type"]: c["lastTransitionTime"] for c in status_of(cluster, "orders", ns)["conditions"]}

        install_crds(kube, thirdparty.crd_files())

        def converged() -> dict[str, Any] | None:
            status = status_of(cluster, "orders", ns)
            found = {kind: c[:2] for kind, c in optional_conditions(status).items()}
            if found != {
                "Monitoring": ("True", "PrometheusOperator"),
                "CompactionScheduler": ("True", "SparkOperator"),
            }:
                return None
            children = (
                kube.get(SPARK, "ScheduledSparkApplication", "orders-compaction", ns),
                kube.get(MONITORING, "ServiceMonitor", "orders-worker", ns),
                kube.get(MONITORING, "PrometheusRule", "orders-alerts", ns),
            )
            gone = kube.get("batch/v1", "CronJob", "orders-compaction", ns) is None
            return status if gone and all(children) else None

        # Generous: discovery (2 s here) plus a resync (3 s here) plus a status read (1 s), on a loaded machine.
        status = wait_until(converged, timeout=120, what="the operator to use the CRDs installed later", interval=0.5)
        assert optional_conditions(status) == {
            "Monitoring": (
                "True",
                "PrometheusOperator",
                "ServiceMonitor orders-worker and PrometheusRule orders-alerts applied: Prometheus scrapes the worker "
                "and alerts on it",
            ),
            "CompactionScheduler": (
                "True",
                "SparkOperator",
                "compaction runs as ScheduledSparkApplication orders-compaction (the Spark operator)",
            ),
        }
        after = {c["type"]: c["lastTransitionTime"] for c in status["conditions"]}
        # Flipped after the CRDs came (seconds after they were False); Ready did not flip, so did not move.
        assert (
            after["Monitoring"] > before["Monitoring"] and after["CompactionScheduler"] > before["CompactionScheduler"]
        )
        assert after["Ready"] == before["Ready"]
        for api_version, kind, name in (
            (SPARK, "ScheduledSparkApplication", "orders-compaction"),
            (MONITORING, "ServiceMonitor", "orders-worker"),
            (MONITORING, "PrometheusRule", "orders-alerts"),
        ):
            obj = kube.get(api_version, kind, name, ns) or {}
            assert [r["uid"] for r in obj["metadata"]["ownerReferences"]] == [uid], kind
        assert kube.get(*CAPTURES, "orders", ns) is not None
    finally:
        operator.stop()
        print(operator.log_text()[-4000:])
