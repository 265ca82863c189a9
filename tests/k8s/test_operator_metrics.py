"""The operator's /metrics and /healthz against a real API server: every replica serves them from start, the
acting one says it acts, and each capture's phase, the reconciles and the compaction runs are what the cluster
shows (the ScheduledSparkApplication's status is written here as the Spark operator would: none runs here)."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from mysqlcapture_dev.embedded.mariadb import free_port
from mysqlcapture_operator.metrics import PHASES
from prometheus_client.parser import text_string_to_metric_families

from tests.k8s.fixtures import Cluster
from tests.k8s.processes import OperatorProcess, wait_for
from tests.k8s.test_operator import CAPTURES, TEST_OPERATOR_ENV, capture_doc, condition, password_secret, status_of
from tests.support import wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
SPARK = ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication")


def scrape(url: str) -> Samples:
    """Every sample of {url}/metrics: (name, sorted labels) -> value."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def unix(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def mx_namespace(cluster: Cluster) -> str:
    """Created before the operators start: kopf can miss a namespace created while it starts, for a minute."""
    return cluster.new_namespace("mx")


@pytest.fixture
def replicas(cluster: Cluster, tmp_path: Path, mx_namespace: str) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    """Two operator replicas sharing one Lease: the first leads, the second stands by."""
    env = {**TEST_OPERATOR_ENV, "MYSQLCAPTURE_LEASE_NAME": "mx-tests", "MYSQLCAPTURE_LEASE_SECONDS": "4"}
    first = OperatorProcess(cluster, tmp_path / "a.log", namespaces=["mx-*"], env={**env, "POD_NAME": "op-mx-a"})
    second = None
    try:
        wait_until(lambda: "starting the operator" in first.log_text(), timeout=30, what="the first to lead")
        second = OperatorProcess(cluster, tmp_path / "b.log", namespaces=["mx-*"], env={**env, "POD_NAME": "op-mx-b"})
        wait_until(lambda: "waiting to lead" in second.log_text(), timeout=30, what="the second to wait")
        yield first, second
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_every_replica_serves_health_and_metrics_and_the_leader_says_it_acts(
    cluster: Cluster, replicas: tuple[OperatorProcess, OperatorProcess], mx_namespace: str
) -> None:
    leader, standby = replicas
    leader_url, standby_url = leader.http_url(), standby.http_url()
    with urllib.request.urlopen(f"{standby_url}/healthz", timeout=5) as resp:
        assert (resp.status, resp.read()) == (200, b"ok\n")
    assert value(scrape(standby_url), "mysqlcapture_operator_leader") == 0.0
    assert value(scrape(leader_url), "mysqlcapture_operator_leader") == 1.0

    ns = mx_namespace
    password_secret(cluster, ns)
    cluster.kube.apply(capture_doc("metered", ns, port=free_port()))

    # No worker runs: the capture is Pending, and the phase gauge says so (1 for it, 0 for the others).
    def pending_and_reconciled() -> Samples | None:
        s = scrape(leader_url)
        pending = value(s, "mysqlcapture_capture_phase", namespace=ns, capture="metered", phase="Pending")
        reconciled = value(s, "mysqlcapture_operator_reconciles_total", result="ok") or 0
        return s if pending == 1.0 and reconciled >= 1 else None

    samples = wait_until(pending_and_reconciled, timeout=30, what="the Pending phase gauge and a counted reconcile")
    phases = {p: value(samples, "mysqlcapture_capture_phase", namespace=ns, capture="metered", phase=p) for p in PHASES}
    assert phases == {p: float(p == "Pending") for p in PHASES}
    assert status_of(cluster, "metered", ns)["phase"] == "Pending"
    assert value(samples, "mysqlcapture_operator_reconciles_total", result="failed") == 0.0
    # The standby reconciles nothing and observes no capture.
    idle = scrape(standby_url)
    assert value(idle, "mysqlcapture_operator_reconciles_total", result="ok") == 0.0
    assert not [k for k in idle if k[0] == "mysqlcapture_capture_phase"]

    # Compaction: the operator baselines the runs the status already lists, then counts what finishes after.
    wait_for(cluster, *SPARK, "metered-compaction", ns)
    runs = {"namespace": ns, "capture": "metered"}

    def compaction(samples: Samples) -> tuple[float | None, float | None, float | None]:
        return (
            value(samples, "mysqlcapture_compaction_runs_total", **runs, result="succeeded"),
            value(samples, "mysqlcapture_compaction_runs_total", **runs, result="failed"),
            value(samples, "mysqlcapture_compaction_last_success_timestamp_seconds", **runs),
        )

    wait_until(lambda: compaction(scrape(leader_url)) == (0.0, 0.0, None), timeout=30, what="zero runs, no success")
    steps = [
        # (the status the Spark operator writes, expected (succeeded, failed, last success))
        (
            {
                "lastRun": "2026-11-23T10:15:00Z",
                "lastRunName": "metered-compaction-2",
                "pastSuccessfulRunNames": ["metered-compaction-2"],
                "pastFailedRunNames": ["metered-compaction-1"],
            },
            (1.0, 1.0, unix("2026-11-23T10:15:00Z")),
        ),
        (
            {
                "lastRun": "2026-11-23T10:30:00Z",
                "lastRunName": "metered-compaction-3",
                "pastSuccessfulRunNames": ["metered-compaction-3", "metered-compaction-2"],
            },
            (2.0, 1.0, unix("2026-11-23T10:30:00Z")),
        ),
        # A failed run: lastRun moves, the last success does not.
        (
            {
                "lastRun": "2026-11-23T10:45:00Z",
                "lastRunName": "metered-compaction-4",
                "pastFailedRunNames": ["metered-compaction-4", "metered-compaction-1"],
            },
            (2.0, 2.0, unix("2026-11-23T10:30:00Z")),
        ),
    ]
    for status, expected in steps:
        cluster.kube.patch_status(*SPARK, "metered-compaction", ns, status)
        wait_until(
            lambda expected=expected: compaction(scrape(leader_url)) == expected,  # type: ignore[misc]
            timeout=30,
            what=f"compaction metrics {expected} after status {status}",
        )
    compacted = condition(status_of(cluster, "metered", ns), "Compacted")
    assert (compacted["status"], compacted["reason"]) == ("True", "Succeeded")
    assert status_of(cluster, "metered", ns)["lastCompaction"] == "2026-11-23T10:30:00Z"

    # A capture whose worker the API server refuses (a negative limit): each reconcile is a retry, the phase is Error.
    cluster.kube.apply(capture_doc("locked", ns, port=free_port(), resources={"limits": {"memory": "-1"}}))
    wait_until(
        lambda: (
            value(s := scrape(leader_url), "mysqlcapture_capture_phase", namespace=ns, capture="locked", phase="Error")
            == 1.0
            and (value(s, "mysqlcapture_operator_reconciles_total", result="retry") or 0) >= 1
        ),
        timeout=30,
        what="the Error phase and a counted retry",
    )

    # A deleted capture's series go away.
    assert cluster.kube.delete(*CAPTURES, "locked", ns)
    wait_until(
        lambda: not [k for k in scrape(leader_url) if ("capture", "locked") in k[1]],
        timeout=30,
        what="the deleted capture's series to go",
    )

    # The leader stops cleanly (releasing the Lease): the standby acts and says so.
    leader.stop()
    wait_until(
        lambda: value(scrape(standby_url), "mysqlcapture_operator_leader") == 1.0,
        timeout=30,
        what="the standby to report leading",
    )
