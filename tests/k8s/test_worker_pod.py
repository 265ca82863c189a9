"""The worker pod as the operator builds it, run by the kubelet stand-in against real servers: its password
comes from a mounted Secret the operator never reads, and what stops it shows in the capture's status."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path

import pymysql
import pytest
from mysqlcapture_dev.embedded.server import PrivateServer, free_port

from tests.k8s.fixtures import Cluster
from tests.k8s.processes import OperatorProcess, run_pod_template, wait_for
from tests.k8s.test_operator import TEST_OPERATOR_ENV, capture_doc, condition, status_where
from tests.support import wait_until

UNKNOWN_THREAD = 1094  # KILL of a connection that is gone

# The README's grants, exactly (the heartbeat database's too): the worker pod runs as this user, not root.
GRANTS = "REPLICATION SLAVE, REPLICATION CLIENT, SELECT"  # no RELOAD: the snapshot takes no lock


@pytest.fixture
def wp_namespace(cluster: Cluster) -> str:
    """Created before the operator starts: kopf can miss a namespace created while it starts, for a minute."""
    return cluster.new_namespace("wp")


@pytest.fixture
def pod_operator(cluster: Cluster, tmp_path: Path, wp_namespace: str) -> Iterator[OperatorProcess]:
    env = {**TEST_OPERATOR_ENV, "MYSQLCAPTURE_LEASE_NAME": "wp-tests", "POD_NAME": "op-worker-pod"}
    proc = OperatorProcess(cluster, tmp_path / "operator.log", namespaces=["wp-*"], env=env)
    yield proc
    proc.stop()


def _secret(cluster: Cluster, namespace: str, name: str, password: str) -> None:
    cluster.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"password": base64.b64encode(password.encode()).decode()},
        }
    )


def _heartbeats(server: PrivateServer) -> int:
    """The heartbeat rows on the server (0 before the worker made its table)."""
    made = (
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE table_schema = 'mysqlcapture' "
        "AND table_name = 'heartbeats'"
    )
    if not server.query(made)[0][0]:
        return 0
    return int(server.query("SELECT COUNT(*) FROM mysqlcapture.heartbeats")[0][0])


def _user(server: PrivateServer, password: str) -> None:
    plugin = " WITH caching_sha2_password" if server.flavor == "mysql" else ""
    server.execute(
        "DROP USER IF EXISTS 'capture'@'%'",
        f"CREATE USER 'capture'@'%' IDENTIFIED{plugin} BY '{password}'",
        f"GRANT {GRANTS} ON *.* TO 'capture'@'%'",
        "GRANT CREATE, INSERT, UPDATE ON mysqlcapture.* TO 'capture'@'%'",
    )


def test_password_from_a_mounted_secret_missing_then_created_then_rotated(
    cluster: Cluster,
    pod_operator: OperatorProcess,
    wp_namespace: str,
    start_source: Callable[..., PrivateServer],
    tmp_path: Path,
) -> None:
    """The capture names a Secret that does not exist yet: the Deployment is created anyway (the operator does not
    look), the worker stays up and says which Secret is missing, and the capture shows it (PasswordNotFound). The
    Secret is created: the worker streams, as a user with exactly the README's grants. The password is rotated
    on the server and in the Secret, and the worker's connection cut: it reconnects with the new password, read
    from the file the kubelet updated, without a restart."""
    server = start_source(64)
    _user(server, "first")
    ns = wp_namespace
    doc = capture_doc(
        "pw",
        ns,
        port=server.port,
        secret="capture-password",
        start={"from": "latest"},
        sink={"type": "delta", "delta": {"uri": str(tmp_path / "changelog")}},
        flush={"maxIntervalMs": 200},
        heartbeat={"intervalSeconds": 1},
        metrics={"port": free_port()},
    )
    doc["spec"]["source"]["user"] = "capture"
    cluster.kube.apply(doc)
    deployment = wait_for(cluster, "apps/v1", "Deployment", "pw-worker", ns)
    pod = run_pod_template(cluster, deployment, tmp_path / "pod")
    try:
        missing = status_where(
            cluster,
            "pw",
            ns,
            pod,
            "PasswordNotFound",
            lambda s: condition(s, "Ready").get("reason") == "PasswordNotFound",
        )
        ready = condition(missing, "Ready")
        assert missing["phase"] == "Error" and ready["status"] == "False", missing
        assert "Secret 'capture-password' with key 'password'" in ready["message"], ready
        assert "kubectl create secret generic capture-password" in ready["message"], ready
        events = cluster.kube.list("v1", "Event", ns)
        assert any(e["type"] == "Warning" and "capture-password" in e["message"] for e in events), events

        _secret(cluster, ns, "capture-password", "first")
        pod.sync_volumes()  # the kubelet's periodic sync
        streaming = status_where(cluster, "pw", ns, pod, "Streaming", lambda s: s.get("phase") == "Streaming")
        assert condition(streaming, "Ready")["status"] == "True"

        # Every connection the worker keeps is open before the rotation (the heartbeat writer's comes last): a new
        # one opened between the server's change and the Secret's would be refused, and say so, before retrying.
        wait_until(
            lambda: _heartbeats(server) > 0,
            timeout=120,
            interval=0.5,
            what="the worker's first heartbeat",
        )
        server.execute("ALTER USER 'capture'@'%' IDENTIFIED BY 'second'")
        _secret(cluster, ns, "capture-password", "second")
        pod.sync_volumes()
        rotated = len(pod.log_text())  # from here on the file holds the server's password
        ids = [row[0] for row in server.query("SELECT id FROM information_schema.PROCESSLIST WHERE user = 'capture'")]
        assert ids, "the worker holds no connection as its user"
        for thread in ids:  # a connection may have closed since it was listed (unknown thread id)
            try:
                server.execute(f"KILL {thread}")
            except pymysql.err.OperationalError as exc:
                if exc.args[0] != UNKNOWN_THREAD:
                    raise
        server.execute("CREATE DATABASE rotated", "CREATE TABLE rotated.t (id INT PRIMARY KEY)")
        after = server.binlog_status()
        status_where(
            cluster,
            "pw",
            ns,
            pod,
            "the checkpoint past the rotation",
            lambda s: (
                s.get("phase") == "Streaming"
                and (s.get("binlogFile"), s.get("binlogPosition") or 0) >= (after.file, after.pos)
            ),
        )
        log = pod.log_text()[rotated:]
        assert "replication connection lost" in log, log[-3000:]
        assert "AccessDenied" not in log and "1045" not in log, log[-3000:]
    finally:
        code = pod.stop()
    assert code == 0, pod.log_text()[-3000:]
    assert "secret" not in pod_operator.log_text().lower().replace("capture-password", ""), pod_operator.log_text()
