"""Transactions of unusual shapes, against a real server of each flavor and the worker as a process:
- XA: one committed in one phase is captured like any transaction; one committed in two phases (XA PREPARE, then
  XA COMMIT) stops the worker with one line naming it, before anything of it or after it is written;
- CREATE TABLE ... SELECT, which MySQL 8.0.21+ and MariaDB log as one transaction: the statement (MySQL adds
  `START TRANSACTION` to it), the new table's rows, the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.delta import DeltaSink

from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import manifest, read_changelog, run_cli, write_manifest


def _run(srv: PrivateServer, start: Any, name: str, tmp_path: Path, **spec: Any) -> tuple[Any, str]:
    """`mysqlcapture run --exit-at-end` of database `name` from `start` into a Delta change log: (result, its uri)."""
    uri = str(tmp_path / name)
    doc = manifest(
        name,
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "position", "binlogFile": start.file, "binlogPosition": start.pos},
        tables={"include": [f"{name}.*"]},
        **spec,
    )
    return run_cli("run", str(write_manifest(tmp_path / f"{name}.yaml", doc)), "--exit-at-end", "--plain-logs"), uri


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
    result, uri = _run(srv, start, "xa", tmp_path)
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


def test_create_table_select_is_one_transaction_of_its_statement_and_rows(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(89)
    start = srv.binlog_status()
    conn = srv.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE ct")
        cur.execute("CREATE TABLE ct.src (id INT PRIMARY KEY, v VARCHAR(20), d DECIMAL(8,2))")
        cur.execute("INSERT INTO ct.src VALUES " + ", ".join(f"({i}, 'v{i}', {i}.25)" for i in range(1, 2501)))
        cur.execute("CREATE TABLE ct.copy (PRIMARY KEY (id)) AS SELECT id, v, d * 2 AS d2 FROM ct.src WHERE id % 2 = 0")
        cur.execute("CREATE TABLE ct.empty AS SELECT * FROM ct.src WHERE id < 0")
        cur.execute("INSERT INTO ct.copy VALUES (5001, 'after', 1.5)")
    end = srv.binlog_status()
    # The copy's 1,250 rows in several chunks: positions inside the transaction.
    result, uri = _run(srv, start, "ct", tmp_path, flush={"maxEvents": 500})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_changelog(uri)
    copy = [r for r in rows if r["table"] == "copy"]
    create, *inserts = copy
    assert create["type"] == "table-create" and '"name":"d2"' in create["data"]
    assert [r["type"] for r in inserts] == ["insert"] * 1251
    # The statement and its 1,250 rows are one transaction: one start, one commit, the last row's.
    ctas = [create, *inserts[:-1]]
    assert {r["binlog_pos"] for r in ctas} == {create["binlog_pos"]} and [r["commit"] for r in ctas].count(True) == 1
    assert ctas[-1]["commit"] and inserts[-1]["binlog_pos"] != create["binlog_pos"]
    assert [r["type"] for r in rows if r["table"] == "empty"] == ["table-create"]
    replayed = replay([r for r in rows if r["database"] == "ct"])
    assert_replay_equals_source(replayed, source_tables(srv.connect(), ["ct"]))
    ckpt = DeltaSink(uri, app_id="mysqlcapture-ct").load_checkpoint()
    assert ckpt is not None and (ckpt.coordinate.file, ckpt.coordinate.pos) == (end.file, end.pos)
