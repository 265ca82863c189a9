"""The worker as a process against a real MariaDB: a random workload replays to exactly the source tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from mysqlcapture_worker.embedded.mariadb import MariaDBServer, start_server

from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest
from tests.workload import Workload

pytestmark = pytest.mark.mariadb


@pytest.fixture(scope="module")
def server() -> MariaDBServer:
    srv = start_server(21)
    yield srv
    srv.stop()


def _caught_up(server: MariaDBServer, uri: str) -> bool:
    from mysqlcapture_worker.sinks.delta import DeltaSink

    file, pos = server.query("SHOW MASTER STATUS")[0][:2]
    ckpt = DeltaSink(uri, app_id="mysqlcapture-e2e").load_checkpoint()
    return ckpt is not None and (ckpt.binlog_file, ckpt.binlog_pos) >= (str(file), int(pos))


def test_random_workload_replays_to_source(server: MariaDBServer, tmp_path: Path) -> None:
    conn = server.connect()
    workload = Workload(conn, "e2e", seed=7, ddl=False)
    workload.setup(n_tables=3)
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "e2e",
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 200},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "e2e.yaml", doc))
    try:
        wait_until(
            lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        for _ in range(400):
            workload.step()
        wait_until(lambda: _caught_up(server, uri), timeout=120, what="the change log to reach the binlog's end")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    assert len(rows) > 400
    identities = [(r["server_id"], r["binlog_file"], r["binlog_pos"], r["row_index"]) for r in rows]
    assert len(identities) == len(set(identities)), "an event was written twice"
    assert [r["order_key"] for r in rows] == sorted({r["order_key"] for r in rows})
    assert_replay_equals_source(replay(rows), source_tables(conn, ["e2e"]))
    conn.close()


def test_statement_format_is_refused_with_the_fix(tmp_path: Path) -> None:
    srv = start_server(22, binlog_format="STATEMENT")
    try:
        doc = manifest("neg", port=srv.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "x")}})
        result = run_cli("check", str(write_manifest(tmp_path / "neg.yaml", doc)))
    finally:
        srv.stop()
    assert result.returncode == 3
    assert "binlog_format is STATEMENT on the source: set binlog_format=ROW" in result.stderr


def test_missing_grants_are_named(server: MariaDBServer, tmp_path: Path) -> None:
    server.execute(
        "CREATE OR REPLACE USER 'weak'@'127.0.0.1' IDENTIFIED BY 'pw'", "GRANT SELECT ON *.* TO 'weak'@'127.0.0.1'"
    )
    doc = manifest("weak", port=server.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "x")}})
    doc["spec"]["source"]["user"] = "weak"
    result = run_cli("check", str(write_manifest(tmp_path / "weak.yaml", doc)), password="pw")
    assert result.returncode == 3
    assert "user 'weak' lacks REPLICATION SLAVE, REPLICATION CLIENT" in result.stderr


def test_invalid_manifest_names_the_field(tmp_path: Path) -> None:
    doc = manifest("bad", port=70000, sink={"type": "delta", "delta": {"uri": str(tmp_path / "x")}})
    result = run_cli("run", str(write_manifest(tmp_path / "bad.yaml", doc)))
    assert result.returncode == 2
    assert "spec.source.port: Input should be less than or equal to 65535" in result.stderr
