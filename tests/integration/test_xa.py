"""XA transactions, against a real server of each flavor and the worker as a process: one committed in one phase
is captured like any transaction; one committed in two phases (XA PREPARE, then XA COMMIT) stops the worker with
one line naming it, before anything of it or after it is written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mysqlcapture_dev.embedded.server import PrivateServer

from tests.support import manifest, read_changelog, run_cli, write_manifest


def test_one_phase_xa_is_captured_and_two_phase_xa_is_refused_by_name(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(88)
    start = srv.binlog_status()
    conn = srv.connect()
    with conn.cursor() as cur:
        for sql in (
            "CREATE DATABASE xa",
            "CREATE TABLE xa.t (id INT PRIMARY KEY, v VARCHAR(20))",
            "XA START 'one'",
            "INSERT INTO xa.t VALUES (1, 'one phase'), (2, 'one phase')",
            "XA END 'one'",
            "XA COMMIT 'one' ONE PHASE",
            "INSERT INTO xa.t VALUES (3, 'plain')",
            "XA START 'two'",
            "INSERT INTO xa.t VALUES (4, 'two phases')",
            "XA END 'two'",
            "XA PREPARE 'two'",
            "XA COMMIT 'two'",
            "INSERT INTO xa.t VALUES (5, 'after')",
        ):
            cur.execute(sql)
    conn.close()
    uri = str(tmp_path / "xa")
    doc = manifest(
        "xa",
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "position", "binlogFile": start.file, "binlogPosition": start.pos},
        tables={"include": ["xa.*"]},
    )
    result = run_cli("run", str(write_manifest(tmp_path / "xa.yaml", doc)), "--exit-at-end", "--plain-logs")
    assert result.returncode == 1, result.stderr[-3000:]
    said = result.stderr.strip().splitlines()[-1]
    assert "is a two-phase XA transaction (XA PREPARE of xid 'two' at " in said, said
    assert "XA COMMIT ... ONE PHASE" in said and "Traceback" not in result.stderr
    rows = [r for r in read_changelog(uri) if r["type"] == "insert"]
    assert [(r["data"], r["commit"]) for r in rows] == [
        ('{"id":1,"v":"one phase"}', False),
        ('{"id":2,"v":"one phase"}', True),
        ('{"id":3,"v":"plain"}', True),
    ]
