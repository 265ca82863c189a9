"""The capture's status follows a real worker (run from the operator's pod template) through streaming,
a failover to a promoted replica, and a binlog purge up to the file it reads (no risk: the source writes it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_dev.embedded.server import PrivateServer, free_port
from mysqlcapture_worker.gtid import GtidSet

from tests.k8s.fixtures import Cluster
from tests.k8s.processes import LocalPod, OperatorProcess, run_pod_template, wait_for
from tests.k8s.test_operator import TEST_OPERATOR_ENV, capture_doc, condition, password_secret, status_where
from tests.proxy import SwitchableProxy


@pytest.fixture
def st_namespace(cluster: Cluster) -> str:
    """Created before the operator starts: kopf can miss a namespace created while it starts, for a minute."""
    return cluster.new_namespace("st")


@pytest.fixture
def status_operator(cluster: Cluster, tmp_path: Path, st_namespace: str) -> Iterator[OperatorProcess]:
    env = {**TEST_OPERATOR_ENV, "MYSQLCAPTURE_LEASE_NAME": "st-tests", "POD_NAME": "op-status"}
    proc = OperatorProcess(cluster, tmp_path / "operator.log", namespaces=["st-*"], env=env)
    yield proc
    proc.stop()


def _status_where(cluster: Cluster, ns: str, what: str, pod: LocalPod, check: Callable[[dict[str, Any]], bool]) -> Any:
    return status_where(cluster, "follow", ns, pod, what, check)


def test_status_follows_streaming_failover_and_purge_risk(
    cluster: Cluster,
    status_operator: OperatorProcess,
    st_namespace: str,
    start_source: Callable[..., PrivateServer],
    tmp_path: Path,
) -> None:
    primary = start_source(61)
    replica = start_source(62, log_slave_updates="ON")
    replica.make_replica_of(primary)
    for _ in range(3):  # whole binlog files before the replica's current one: headroom once it is the source
        replica.execute("FLUSH BINARY LOGS")
    proxy = SwitchableProxy(primary.port)
    ns = st_namespace
    password_secret(cluster, ns, password=primary.root_password)
    doc = capture_doc(
        "follow",
        ns,
        port=proxy.port,
        start={"from": "latest"},
        sink={"type": "delta", "delta": {"uri": str(tmp_path / "changelog")}},
        flush={"maxIntervalMs": 200},
        failover={"mode": "gtid"},
        heartbeat={"intervalSeconds": 1},
        metrics={"port": free_port()},
    )
    cluster.kube.apply(doc)
    deployment = wait_for(cluster, "apps/v1", "Deployment", "follow-worker", ns)
    pod = run_pod_template(cluster, deployment, tmp_path / "pod")
    try:
        streaming = _status_where(
            cluster,
            ns,
            "Streaming with a GTID set from server 61",
            pod,
            lambda s: s.get("phase") == "Streaming" and s.get("serverId") == 61 and bool(s.get("gtidSet")),
        )
        assert condition(streaming, "Ready")["status"] == "True"
        assert condition(streaming, "Streaming")["status"] == "True"
        assert condition(streaming, "FailedOver")["reason"] == "NoFailover"
        assert streaming["binlogFile"].startswith("mysql-bin.") and streaming["binlogPosition"] > 4
        ready_since = condition(streaming, "Ready")["lastTransitionTime"]

        primary.execute("CREATE DATABASE k", "CREATE TABLE k.t (id INT PRIMARY KEY)")
        primary.execute(*(f"INSERT INTO k.t VALUES ({i})" for i in range(50)))
        replica.wait_replica_caught_up(primary)
        written = primary.gtid_executed()
        # Heartbeats keep adding transactions: the checkpoint holds the writes once its set contains them.
        _status_where(
            cluster,
            ns,
            f"the checkpoint to reach {written}",
            pod,
            lambda s: GtidSet.parse(s.get("gtidSet") or None).contains(written),
        )

        replica.wait_replica_caught_up(primary)  # heartbeats written since: a GTID failover needs them all
        primary.stop()
        replica.promote()
        replica.execute("SET GLOBAL read_only = 0")
        proxy.switch(replica.port)
        replica.execute(*(f"INSERT INTO k.t VALUES ({i})" for i in range(50, 80)))
        failed_over = _status_where(
            cluster,
            ns,
            "Streaming from server 62 after the failover",
            pod,
            lambda s: s.get("serverId") == 62 and s.get("phase") == "Streaming" and s.get("failovers") == 1,
        )
        fo = condition(failed_over, "FailedOver")
        assert (fo["status"], fo["reason"]) == ("True", "FailedOver") and "server_id 62" in fo["message"]

        # The checkpoint is in the file the new source is writing: no purge can remove it, whatever is before it.
        calm = _status_where(
            cluster,
            ns,
            "BinlogPurgeRisk False on the new source",
            pod,
            lambda s: condition(s, "BinlogPurgeRisk").get("status") == "False",
        )
        assert condition(calm, "BinlogPurgeRisk")["reason"] == "ReadingActiveFile", calm
        # Purging every file before it leaves none (what a fresh server looks like): still no risk, no Event.
        replica.execute(f"PURGE BINARY LOGS TO '{calm['binlogFile']}'")
        purged = _status_where(
            cluster,
            ns,
            "the headroom measured after the purge",
            pod,
            lambda s: "0 whole file(s) before it" in condition(s, "BinlogPurgeRisk").get("message", ""),
        )
        risk = condition(purged, "BinlogPurgeRisk")
        assert (risk["status"], risk["reason"]) == ("False", "ReadingActiveFile"), risk
        assert purged["purgeHeadroomBytes"] >= 0
        # Ready stayed True through the purge, its lastTransitionTime too.
        assert condition(purged, "Ready")["status"] == "True"
        assert condition(purged, "Ready")["lastTransitionTime"] == condition(calm, "Ready")["lastTransitionTime"]
        assert condition(purged, "Ready")["lastTransitionTime"] >= ready_since
        events = {e["reason"]: e for e in cluster.kube.list("v1", "Event", ns)}
        assert events["FailedOver"]["type"] == "Warning" and "was server_id 61" in events["FailedOver"]["message"]
        assert "BinlogPurgeRisk" not in events, events["BinlogPurgeRisk"]
    finally:
        code = pod.stop()
        proxy.close()
    assert code == 0, pod.log_text()[-3000:]
