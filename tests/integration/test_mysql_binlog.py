"""What only MySQL writes: compressed transactions (TRANSACTION_PAYLOAD), tagged GTIDs, partial JSON updates.

Each against a real MySQL 9.7 server and the worker as a process.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.delta import DeltaSink

from tests import servers
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import (
    WorkerProcess,
    manifest,
    read_changelog,
    run_cli,
    run_worker_to_end,
    wait_until,
    write_manifest,
)
from tests.workload import Workload

pytestmark = pytest.mark.mysql


@pytest.fixture(scope="module")
def mysql() -> Iterator[PrivateServer]:
    with servers.running("mysql", 81) as srv:
        yield srv


def _run_to_end(server: PrivateServer, tmp_path: Path, name: str, **spec: Any) -> list[dict[str, Any]]:
    """`mysqlcapture run --exit-at-end` of the server's whole binlog, filtered to database `name`."""
    uri = str(tmp_path / name)
    doc = manifest(name, port=server.port, sink={"type": "delta", "delta": {"uri": uri}}, **spec)
    result = run_cli("run", str(write_manifest(tmp_path / f"{name}.yaml", doc)), "--exit-at-end", "--plain-logs")
    assert result.returncode == 0, result.stderr[-3000:]
    return read_changelog(uri)


def _payloads(server: PrivateServer) -> int:
    return sum(
        1
        for name, *_ in server.query("SHOW BINARY LOGS")
        for event in server.query(f"SHOW BINLOG EVENTS IN '{name}'")
        if event[2] == "Transaction_payload"
    )


def _rows_of(rows: list[dict[str, Any]], database: str) -> list[tuple[Any, ...]]:
    """The database's events, its name taken out (DDL events name their database in `data` and `old`)."""
    name = f'"database":"{database}"'
    return [
        (r["table"], r["type"], (r["data"] or "").replace(name, ""), (r["old"] or "").replace(name, ""))
        for r in rows
        if r["database"] == database
    ]


def test_compressed_transactions_render_as_uncompressed_ones(mysql: PrivateServer, tmp_path: Path) -> None:
    """The same random workload, once with binlog_transaction_compression=ON, once OFF: the same events."""
    logs: dict[str, list[tuple[Any, ...]]] = {}
    for database, compressed in (("zplain", "OFF"), ("zcomp", "ON")):
        conn = mysql.connect()
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_transaction_compression = {compressed}")
        workload = Workload(conn, database, seed=83, ddl=True)
        workload.setup(n_tables=3)
        for _ in range(300):
            workload.step()
        conn.close()
    assert _payloads(mysql) > 100
    status = mysql.binlog_status()
    rows = _run_to_end(mysql, tmp_path, "zz", tables={"include": ["zplain.*", "zcomp.*"]})
    for database in ("zplain", "zcomp"):
        logs[database] = _rows_of(rows, database)
    assert len(logs["zcomp"]) > 300
    assert logs["zcomp"] == logs["zplain"], "a compressed transaction rendered differently"
    # Positions: a row event carries its transaction's start (Maxwell's position), the boundary before the GTID
    # event that precedes the payload; the checkpoint is the binlog's end, exactly.
    comp = [r for r in rows if r["database"] == "zcomp" and r["type"] in ("insert", "update", "delete")]
    gtid_starts = {(e[0], int(e[1])) for name, *_ in mysql.query("SHOW BINARY LOGS")
                   for e in [(name, *ev[1:]) for ev in mysql.query(f"SHOW BINLOG EVENTS IN '{name}'")]
                   if e[2] == "Gtid"}  # fmt: skip
    starts = {(r["binlog_file"], r["binlog_pos"]) for r in comp}
    assert starts <= gtid_starts and len(starts) > 100
    ckpt = DeltaSink(str(tmp_path / "zz"), app_id="mysqlcapture-zz").load_checkpoint()
    assert ckpt is not None and ckpt.coordinate == Coordinate(status.file, status.pos)
    conn = mysql.connect()
    assert_replay_equals_source(replay([r for r in rows if r["database"] == "zcomp"]), source_tables(conn, ["zcomp"]))
    conn.close()


@pytest.mark.slow
def test_a_million_row_compressed_transaction_stays_bounded(tmp_path: Path) -> None:
    """One INSERT ... SELECT of 1,000,000 rows, compressed: committed whole, in memory that does not grow with it."""
    with servers.running("mysql", 82, binlog_transaction_compression="ON", max_allowed_packet="1G") as srv:
        srv.execute(
            "CREATE DATABASE big",
            "CREATE TABLE big.t (id INT PRIMARY KEY, a BIGINT, s VARCHAR(40), d DECIMAL(12,2), ts DATETIME(3))",
        )
        conn = srv.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION cte_max_recursion_depth = 2000000")
            cur.execute(
                "INSERT INTO big.t WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) "
                "SELECT i, i * 7, CONCAT('row ', i), i / 100, '2024-01-02 03:04:05.678' FROM n"
            )
        conn.close()
        events = srv.query("SHOW BINLOG EVENTS IN 'mysql-bin.000001'")
        payload = max(int(e[4]) - int(e[1]) for e in events if e[2] == "Transaction_payload")
        uri = str(tmp_path / "big")
        doc = manifest(
            "big", port=srv.port, sink={"type": "delta", "delta": {"uri": uri}}, tables={"include": ["big.*"]}
        )
        path = write_manifest(tmp_path / "big.yaml", doc)
        started = time.monotonic()
        code, peak, err = run_worker_to_end(path)
        elapsed = time.monotonic() - started
    assert code == 0, err[-3000:]
    from deltalake import DeltaTable

    kinds = Counter(DeltaTable(uri).to_pyarrow_table(columns=["type"]).column("type").to_pylist())
    assert kinds["insert"] == 1_000_000
    mib = peak / 2**20
    print(
        f"1,000,000-row compressed transaction: payload {payload / 2**20:.1f} MiB compressed, "
        f"{1_000_000 / elapsed:,.0f} rows/s end to end, worker peak RSS {mib:.0f} MiB"
    )
    # The uncompressed transaction is ~100 MiB of row events and its Maxwell JSON ~170 MiB: a worker holding
    # either would pass 1 GiB with Arrow's copies. Bounded: the transaction spills to disk past flush.maxEvents.
    assert mib < 900, f"peak RSS {mib:.0f} MiB"


def _status(worker: WorkerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/status", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def test_tagged_gtids_in_events_checkpoint_status_and_restart(mysql: PrivateServer, tmp_path: Path) -> None:
    """`SET gtid_next='AUTOMATIC:tag'`: uuid:tag:n in each event, the checkpoint's set and /status; a capture
    started by that GTID set resumes exactly after it."""
    mysql.execute("CREATE DATABASE tagged", "CREATE TABLE tagged.t (id INT PRIMARY KEY, v VARCHAR(10))")
    uri = str(tmp_path / "tagged")
    doc = manifest(
        "tagged",
        port=mysql.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        tables={"include": ["tagged.*"]},
        flush={"maxIntervalMs": 100},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "tagged.yaml", doc))
    sink = DeltaSink(uri, app_id="mysqlcapture-tagged")
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
        conn = mysql.connect()
        with conn.cursor() as cur:
            cur.execute("INSERT INTO tagged.t VALUES (1, 'plain')")
            cur.execute("SET gtid_next = 'AUTOMATIC:orders'")
            cur.execute("INSERT INTO tagged.t VALUES (2, 'tag1')")
            cur.execute("UPDATE tagged.t SET v = 'tag2' WHERE id = 1")
            cur.execute("SET gtid_next = 'AUTOMATIC:batch_2'")
            cur.execute("DELETE FROM tagged.t WHERE id = 2")
            cur.execute("SET gtid_next = 'AUTOMATIC'")
        conn.close()
        executed = mysql.gtid_executed()
        wait_until(
            lambda: worker.running() and (c := sink.load_checkpoint()) is not None and c.gtid_set == str(executed),
            timeout=60,
            what=f"the checkpoint's GTID set to reach {executed}",
        )
        # /status follows the commit by a moment (the committer records the position once the sink returns).
        status = wait_until(
            lambda: next((s for s in [_status(worker)] if s["gtid_set"] == str(executed)), None),
            timeout=30,
            what="/status to show the committed GTID set",
        )
    finally:
        assert worker.stop() == 0, worker.log_text()
    uuid = str(mysql.query("SELECT @@server_uuid")[0][0])
    rows = [r for r in read_changelog(uri) if r["type"] in ("insert", "update", "delete")]
    assert [(r["type"], re.sub(r":\d+$", ":n", r["gtid"])) for r in rows] == [
        ("insert", f"{uuid}:n"),
        ("insert", f"{uuid}:orders:n"),
        ("update", f"{uuid}:orders:n"),
        ("delete", f"{uuid}:batch_2:n"),
    ]
    assert ":orders:" in status["gtid_set"] and ":batch_2:" in status["gtid_set"], status
    assert status["gtid_set"] == str(executed)
    # A new capture from the GTID set without the batch_2 transaction (the last) reads exactly that one.
    text = re.sub(r":batch_2:\d+", "", str(executed))
    again = _run_to_end(
        mysql, tmp_path, "again", start={"from": "gtid", "gtidSet": text}, tables={"include": ["tagged.*"]}
    )
    assert [(r["type"], r["gtid"].split(":")[1]) for r in again if r["table"] == "t"] == [("delete", "batch_2")]


def test_partial_json_is_refused_by_name(tmp_path: Path) -> None:
    """binlog_row_value_options=PARTIAL_JSON: `check` refuses the server; a session that turns it on later stops the
    worker with one line naming the setting, and nothing before it is lost."""
    with servers.running("mysql", 84, binlog_row_value_options="PARTIAL_JSON") as srv:
        _partial_json(srv, tmp_path)


def _partial_json(srv: PrivateServer, tmp_path: Path) -> None:
    doc = manifest("pj", port=srv.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "pj")}})
    refused = run_cli("check", str(write_manifest(tmp_path / "pj.yaml", doc)))
    assert refused.returncode == 3, refused.stderr
    assert refused.stderr.strip().count("\n") == 0 and "Traceback" not in refused.stderr
    assert "binlog_row_value_options is PARTIAL_JSON on the source" in refused.stderr
    assert "set binlog_row_value_options=''" in refused.stderr

    srv.execute(
        "SET GLOBAL binlog_row_value_options = ''",
        "CREATE DATABASE pj",
        "CREATE TABLE pj.t (id INT PRIMARY KEY, j JSON)",
        """INSERT INTO pj.t VALUES (1, '{"a": 1, "b": "x"}')""",
    )
    uri = str(tmp_path / "pj2")
    doc = manifest("pj2", port=srv.port, sink={"type": "delta", "delta": {"uri": uri}}, tables={"include": ["pj.*"]})
    worker = WorkerProcess(write_manifest(tmp_path / "pj2.yaml", doc))
    try:
        wait_until(lambda: any(r["type"] == "insert" for r in _safe_rows(uri)), timeout=60, what="the insert")
        conn = srv.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
            cur.execute("UPDATE pj.t SET j = JSON_SET(j, '$.a', 2) WHERE id = 1")
        conn.close()
        wait_until(lambda: not worker.alive(), timeout=60, what="the worker to stop on the partial update")
    finally:
        code = worker.stop()
    log = worker.log_text()
    assert code == 1, log[-3000:]
    assert "Traceback" not in log
    assert "PARTIAL_UPDATE_ROWS event at" in log and "set binlog_row_value_options=''" in log
    assert [r["type"] for r in read_changelog(uri) if r["table"] == "t" and r["sql"] is None] == ["insert"]


def _safe_rows(uri: str) -> list[dict[str, Any]]:
    return read_changelog(uri) if Path(uri, "_delta_log").exists() else []
