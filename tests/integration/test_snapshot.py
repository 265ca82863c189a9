"""Consistent snapshots on real MariaDB and MySQL servers: initial, resumed after SIGKILL, keyless tables, on request,
after a purge."""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.positions import SnapshotJob
from mysqlcapture_worker.sinks.delta import DeltaSink
from mysqlcapture_worker.snapshot.fast import TextRenderer
from mysqlcapture_worker.source.dialect import Flavor

from tests import servers
from tests.fidelity_corpus import cases_for
from tests.integration.test_worker_kill import _Background
from tests.proxy import SwitchableProxy
from tests.replay import _loads, _pk, assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest
from tests.workload import Workload


@pytest.fixture(scope="module")
def server(flavor: Flavor) -> Iterator[PrivateServer]:
    with servers.running(flavor, 71) as srv:
        yield srv


def _purge_history(server: PrivateServer) -> None:
    """Leave the binlog without the server's beginning: a capture from `earliest` must snapshot."""
    server.flush_and_purge()  # retried: MariaDB keeps a file until its binlog checkpoint passes


def _statements_executed(server: PrivateServer) -> int:
    return int(server.query("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'")[0][1])


def _doc(name: str, server: PrivateServer, uri: str, database: str, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"snapshot": {"chunkRows": extra.pop("chunk_rows", 50)}}
    spec.update(extra)
    return manifest(
        name,
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        tables={"include": [f"{database}.*"]},
        flush={"maxIntervalMs": 200, "maxEvents": 200},
        extra_spec=spec,
    )


def _snapshot_job(sink: DeltaSink, worker: WorkerProcess) -> SnapshotJob | None:
    """The snapshot job of the last checkpoint, None when no snapshot is under way (fails if the worker died)."""
    worker.running()
    ckpt = sink.load_checkpoint()
    return SnapshotJob.from_json(ckpt.snapshot) if ckpt is not None and ckpt.snapshot else None


def _snapshot_done(sink: DeltaSink, worker: WorkerProcess) -> bool:
    return worker.running() and (c := sink.load_checkpoint()) is not None and c.snapshot is None


def _streaming(
    name: str, server: PrivateServer, tmp_path: Path
) -> tuple[str, DeltaSink, dict[str, Any], WorkerProcess]:
    """A capture of database `name` from the binlog's end, once it has made its first commit: (its change log's
    uri, its sink, its manifest, the worker)."""
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id=f"mysqlcapture-{name}")
    doc = _doc(name, server, uri, name, start={"from": "latest"})
    worker = WorkerProcess(write_manifest(tmp_path / f"{name}.yaml", doc))
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
    except BaseException:
        worker.kill()
        raise
    return uri, sink, doc, worker


def _caught_up(server: PrivateServer, sink: DeltaSink, worker: WorkerProcess) -> bool:
    worker.running()
    status = server.binlog_status()
    ckpt = sink.load_checkpoint()
    return ckpt is not None and ckpt.snapshot is None and ckpt.coordinate >= Coordinate(status.file, status.pos)


def _assert_exactly_once(rows: list[dict[str, Any]]) -> None:
    identities = Counter((r["server_id"], r["binlog_file"], r["binlog_pos"], r["row_index"]) for r in rows)
    assert max(identities.values()) == 1, "an event was written twice"
    assert [r["order_key"] for r in rows] == sorted({r["order_key"] for r in rows})


def assert_no_stale_bootstrap(rows: list[dict[str, Any]]) -> int:
    """Every bootstrap-insert of a key the stream changed since its table's bootstrap-start carries the state that
    change left (the snapshot's reads are merged with the stream, never older than it); the number checked."""
    state: dict[tuple[str, str, str], Any] = {}
    checked = 0
    for r in rows:
        kind, table = r["type"], (r["database"], r["table"])
        if kind == "bootstrap-start":
            for key in [k for k in state if k[:2] == table]:
                del state[key]
        elif kind in ("insert", "update", "delete"):
            data, cols = _loads(r["data"]), _loads(r["primary_key_columns"])
            if kind == "update" and r["old"]:
                state[(*table, _pk({**data, **_loads(r["old"])}, cols))] = None
            state[(*table, _pk(data, cols))] = None if kind == "delete" else data
        elif kind == "bootstrap-insert":
            data = _loads(r["data"])
            key = (*table, _pk(data, _loads(r["primary_key_columns"])))
            if key in state:
                checked += 1
                assert state[key] is not None, f"bootstrap-insert of {key} after the stream removed it"
                assert data == state[key], f"stale bootstrap-insert of {key}: {data} after {state[key]}"
    return checked


def _kinds(rows: list[dict[str, Any]], table: str) -> Counter[str]:
    return Counter(r["type"] for r in rows if r["table"] == table)


def _workload(server: PrivateServer, database: str, *, seed: int, rows: int) -> tuple[Workload, Any]:
    conn = server.connect()
    workload = Workload(conn, database, seed=seed, ddl=False)
    workload.setup(n_tables=3)
    for table in workload.tables.values():
        workload.insert(table, rows)
    return workload, conn


def test_initial_snapshot_while_writing_replays_to_source(server: PrivateServer, tmp_path: Path) -> None:
    """Rows existing before the capture arrive as bootstrap-inserts, writes during the snapshot as binlog events."""
    workload, conn = _workload(server, "snap1", seed=5, rows=300)
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap1")
    worker = WorkerProcess(write_manifest(tmp_path / "snap1.yaml", _doc("snap1", server, uri, "snap1")))
    background = _Background(workload)
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
        # The phase follows the first commit by a moment: read it once it has left Pending.
        status = wait_until(
            lambda: (lambda s: s if s["phase"] != "Pending" else None)(
                json.loads(urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/status").read())
            ),
            timeout=30,
            what="the worker's phase to leave Pending",
        )
        wait_until(
            lambda: _snapshot_done(sink, worker),
            timeout=60,
            what="the snapshot to complete",
        )
        wait_until(lambda: background.steps >= 100, timeout=60, what="100 workload steps")
        background.join()
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the stream to reach the binlog's end")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/metrics").read().decode()
    finally:
        background.join()
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    source = source_tables(conn, ["snap1"])
    for name in workload.tables:
        kinds = _kinds(rows, name)
        assert kinds["bootstrap-start"] == 1 and kinds["bootstrap-complete"] == 1, kinds
        # The workload starts with the worker, so a few of the 300 rows may be gone before their range is read;
        # rows the stream inserts while a range is read may come in both ways (the read is merged with it).
        assert kinds["bootstrap-insert"] > 200, kinds
        assert (
            f'mysqlcapture_snapshot_rows_total{{capture="snap1",table="snap1.{name}"}} {kinds["bootstrap-insert"]}.0'
            in metrics
        )
        assert f'mysqlcapture_snapshot_percent{{capture="snap1",table="snap1.{name}"}} 100.0' in metrics
        pattern = rf'mysqlcapture_snapshot_chunks_total{{capture="snap1",table="snap1.{name}"}} (\d+)'
        chunks = re.search(pattern, metrics)
        # Ranges of 50 keys, a read taking at most two ranges' worth: at least one chunk per 100 rows.
        assert chunks is not None and int(chunks[1]) >= kinds["bootstrap-insert"] / 100, metrics
    if status["phase"] == "Snapshotting":  # each table being read (none between two tables), with its figures
        tables = status["snapshot_tables"]
        assert isinstance(tables, list) and all(t["table"].startswith("snap1.") for t in tables), status
        assert all(t["chunks"] <= t["chunks_estimated"] and t["rows"] <= t["rows_estimated"] for t in tables), status
    else:
        assert status["snapshot_tables"] is None, status
    # The stream went on while the snapshot read: binlog events sit between its chunks, none stale after them.
    assert_no_stale_bootstrap(rows)
    assert status["phase"] in ("Snapshotting", "Streaming"), status
    assert 'mysqlcapture_snapshots_total{capture="snap1",reason="initial"} 1.0' in metrics
    assert_replay_equals_source(replay(rows), source)
    conn.close()


def test_sigkill_mid_snapshot_resumes_from_last_chunk(server: PrivateServer, tmp_path: Path) -> None:
    workload, conn = _workload(server, "snap2", seed=6, rows=2000)
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap2")
    path = write_manifest(tmp_path / "snap2.yaml", _doc("snap2", server, uri, "snap2", chunk_rows=100))
    background = _Background(workload)
    first = WorkerProcess(path)
    second: WorkerProcess | None = None
    try:

        def mid_snapshot() -> SnapshotJob | None:
            job = _snapshot_job(sink, first)
            return job if job is not None and (job.index > 0 or job.rows >= 500) else None

        killed_at = wait_until(
            mid_snapshot, timeout=60, what="a checkpoint in the middle of the snapshot", interval=0.02
        )
        first.kill()
        assert not killed_at.done
        second = WorkerProcess(path)
        wait_until(
            lambda: _snapshot_done(sink, second),
            timeout=90,
            what="the resumed snapshot to complete",
        )
        background.join()
        wait_until(lambda: _caught_up(server, sink, second), timeout=60, what="the stream to reach the binlog's end")
    finally:
        background.join()
        first.kill()
        code = second.stop() if second is not None else None
    assert second is not None and code == 0, second.log_text() if second is not None else ""
    assert "resuming after" in second.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    sent = Counter((r["table"], r["primary_key"]) for r in rows if r["type"] == "bootstrap-insert")
    # Not from zero: no row was snapshotted twice, the second run started after the last committed key.
    assert max(sent.values()) == 1, [key for key, n in sent.items() if n > 1][:5]
    assert {t for t, _ in sent} == set(workload.tables)
    print(f"killed at table {killed_at.index} row {killed_at.rows}: {sum(sent.values())} bootstrap-inserts")
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snap2"]))
    conn.close()


def test_connection_dropped_mid_snapshot_resumes_in_process(server: PrivateServer, tmp_path: Path) -> None:
    """The snapshot's connection is cut mid-chunk (the compiled path is reading the result set off the socket):
    the worker reconnects, opens a new view and goes on after the last chunk it read, nothing lost or twice."""
    workload, conn = _workload(server, "snap6", seed=9, rows=3000)
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap6")
    proxy = SwitchableProxy(server.port)
    doc = _doc("snap6", server, uri, "snap6", chunk_rows=100)
    doc["spec"]["source"]["port"] = proxy.port
    worker = WorkerProcess(write_manifest(tmp_path / "snap6.yaml", doc))
    background = _Background(workload)
    try:

        def mid_snapshot() -> SnapshotJob | None:
            job = _snapshot_job(sink, worker)
            # In the second table: the workload's first has columns only the reference path renders.
            return job if job is not None and job.index == 1 and job.rows >= 500 else None

        cut_at = wait_until(mid_snapshot, timeout=60, what="a checkpoint in the middle of the snapshot", interval=0.02)
        proxy.drop_connections()
        wait_until(
            lambda: _snapshot_done(sink, worker),
            timeout=90,
            what="the snapshot to complete after the cut",
        )
        background.join()
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the stream to reach the binlog's end")
    finally:
        background.join()
        code = worker.stop()
        proxy.close()
    assert code == 0, worker.log_text()
    assert not cut_at.done
    log = worker.log_text()
    assert "replication connection lost" in log
    table = sorted(workload.tables)[1]
    assert f"snapshot of snap6.{table}: compiled text path" in log
    assert re.search(rf"snapshot of snap6\.{table}: \d+ rows estimated, resuming after \d+", log), log[-3000:]
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    sent = Counter((r["table"], r["primary_key"]) for r in rows if r["type"] == "bootstrap-insert")
    assert max(sent.values()) == 1, [key for key, n in sent.items() if n > 1][:5]
    assert {t for t, _ in sent} == set(workload.tables)
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snap6"]))
    conn.close()


def _ddl_tables(server: PrivateServer, database: str, *, big: int) -> None:
    """t1 large enough that its snapshot is still running when the test alters the other tables."""
    server.execute(
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.t1 (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE {database}.t2 (id INT PRIMARY KEY, a INT, b VARCHAR(20))",
        f"CREATE TABLE {database}.t3 (id INT PRIMARY KEY, a INT, c VARCHAR(20))",
        *(
            f"INSERT INTO {database}.t1 VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(n, n + 1000))
            for n in range(1, big + 1, 1000)
        ),
        f"INSERT INTO {database}.t2 VALUES " + ", ".join(f"({i}, {i * 7}, 'b{i}')" for i in range(1, 201)),
        f"INSERT INTO {database}.t3 VALUES " + ", ".join(f"({i}, {i * 3}, 'c{i}')" for i in range(1, 201)),
    )


def test_tables_altered_while_the_snapshot_reads_are_read_again_after_the_change(
    server: PrivateServer, tmp_path: Path
) -> None:
    """DDL lands while the snapshot reads t1, and on tables it has not read yet. t1 starts again from a new
    bootstrap-start (a range read before the change cannot be merged with rows after it); t2 and t3 are read with
    their new definitions, the stream having applied the DDL before their first range. Nothing fails, nothing is
    lost."""
    _ddl_tables(server, "snap7", big=20000)
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap7")
    worker = WorkerProcess(write_manifest(tmp_path / "snap7.yaml", _doc("snap7", server, uri, "snap7")))
    try:
        wait_until(
            lambda: (job := _snapshot_job(sink, worker)) is not None and job.index == 0 and job.rows >= 1000,
            timeout=60,
            what="the snapshot in the middle of t1",
            interval=0.02,
        )
        server.execute(
            "ALTER TABLE snap7.t1 ADD COLUMN extra INT NOT NULL DEFAULT 7",  # the table being read
            "ALTER TABLE snap7.t2 MODIFY a BIGINT",  # a rebuild: 1412 on both servers
            "UPDATE snap7.t2 SET a = a + 10000000000 WHERE id <= 20",
            "ALTER TABLE snap7.t3 DROP COLUMN a",  # instant on MariaDB: 1054 there, 1412 on MySQL
            "UPDATE snap7.t3 SET c = 'changed' WHERE id <= 20",
            "DELETE FROM snap7.t1 WHERE id > 19900",
            "UPDATE snap7.t1 SET v = 'late' WHERE id <= 10",
        )
        wait_until(lambda: _caught_up(server, sink, worker), timeout=120, what="the snapshot and the stream")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    log = worker.log_text()
    assert "snapshot of snap7.t1: the table changed (DDL or TRUNCATE) while it was read" in log, log[-3000:]
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert _kinds(rows, "t1")["bootstrap-start"] == 2, _kinds(rows, "t1")
    assert_no_stale_bootstrap(rows)
    kinds = _kinds(rows, "t2")
    assert kinds["bootstrap-complete"] == 1 and kinds["bootstrap-insert"] >= 200, kinds
    conn = server.connect()
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snap7"]))
    conn.close()


def test_resumed_snapshot_reads_tables_altered_while_the_worker_was_down(server: PrivateServer, tmp_path: Path) -> None:
    """The worker dies in t1's snapshot; t2 is renamed a column and t3 changed type before it restarts. The new
    view holds the new definitions: the stream applies the DDL up to the view's frontier before a row is read, so
    the SELECT names the new columns and renders the new types."""
    _ddl_tables(server, "snap8", big=20000)
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap8")
    path = write_manifest(tmp_path / "snap8.yaml", _doc("snap8", server, uri, "snap8"))
    first = WorkerProcess(path)
    killed_at = wait_until(
        lambda: (job := _snapshot_job(sink, first)) is not None and job.index == 0 and job.rows >= 1000 and job,
        timeout=60,
        what="the snapshot in the middle of t1",
        interval=0.02,
    )
    first.kill()
    server.execute(
        "ALTER TABLE snap8.t2 CHANGE a a2 BIGINT",
        "UPDATE snap8.t2 SET a2 = a2 + 10000000000 WHERE id <= 20",
        "ALTER TABLE snap8.t3 MODIFY a VARCHAR(20)",
        "UPDATE snap8.t3 SET a = CONCAT('x', a) WHERE id <= 20",
        "UPDATE snap8.t1 SET v = 'late' WHERE id <= 10",
    )
    second = WorkerProcess(path)
    try:
        wait_until(lambda: _caught_up(server, sink, second), timeout=120, what="the resumed snapshot and the stream")
    finally:
        code = second.stop()
    assert code == 0, second.log_text()
    assert re.search(r"snapshot of snap8\.t1: \d+ rows estimated, resuming after \d+", second.log_text())
    assert not isinstance(killed_at, bool) and not killed_at.done
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    t2 = [r for r in rows if r["table"] == "t2" and r["type"] == "bootstrap-insert"]
    assert len(t2) == 200 and all("a2" in json.loads(r["data"]) for r in t2)
    t3 = {
        json.loads(r["data"])["id"]: json.loads(r["data"])["a"]
        for r in rows
        if r["table"] == "t3" and r["type"] == "bootstrap-insert"
    }
    assert t3[1] == "x3" and t3[21] == "63", t3
    conn = server.connect()
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snap8"]))
    conn.close()


def test_tables_without_primary_key(server: PrivateServer, tmp_path: Path) -> None:
    server.execute(
        "CREATE DATABASE snap3",
        "CREATE TABLE snap3.uk (code VARCHAR(20) NOT NULL, n INT, UNIQUE KEY (code), UNIQUE KEY nullable (n))",
        "CREATE TABLE snap3.bare (a INT, b VARCHAR(10))",
        "INSERT INTO snap3.uk VALUES " + ", ".join(f"('c{i}', {i})" for i in range(1, 231)),
        "INSERT INTO snap3.bare VALUES " + ", ".join(f"({i % 7}, 'b{i}')" for i in range(1, 131)),
    )
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap3")
    worker = WorkerProcess(write_manifest(tmp_path / "snap3.yaml", _doc("snap3", server, uri, "snap3")))
    try:
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the snapshot to complete")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    log = worker.log_text()
    assert "snapshot of snap3.uk: no primary key, chunking by unique key (code)" in log
    assert "snapshot of snap3.bare: no primary key and no unique key of NOT NULL columns, reading it in one scan" in log
    rows = read_changelog(uri)
    assert _kinds(rows, "uk")["bootstrap-insert"] == 230
    assert _kinds(rows, "bare")["bootstrap-insert"] == 130
    conn = server.connect()
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snap3"]))
    conn.close()


def test_a_generated_invisible_primary_key_hidden_from_information_schema_is_read_as_the_binlog_has_it(
    server: PrivateServer, tmp_path: Path
) -> None:
    """MySQL 8.0.30+ gives a table created without a primary key an invisible `my_row_id` key
    (sql_generate_invisible_primary_key) and can hide it from information_schema
    (show_gipk_in_create_table_and_information_schema=OFF) while the binlog's row images hold it. The snapshot reads
    the table by that key with the column in every row, as the binlog's inserts have it, and the change log replays
    to the table. (MariaDB has no generated keys.)"""
    if server.flavor != "mysql":
        pytest.skip("MariaDB generates no invisible primary keys")
    server.execute(
        "CREATE DATABASE gipk",
        "SET SESSION sql_generate_invisible_primary_key = ON",
        "CREATE TABLE gipk.t (a INT, b VARCHAR(10))",
        "INSERT INTO gipk.t (a, b) VALUES " + ", ".join(f"({i % 9}, 'r{i}')" for i in range(1, 181)),
    )
    _purge_history(server)
    server.execute("SET GLOBAL show_gipk_in_create_table_and_information_schema = OFF")
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-gipk")
    worker = WorkerProcess(write_manifest(tmp_path / "gipk.yaml", _doc("gipk", server, uri, "gipk")))
    try:
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the snapshot to complete")
        server.execute(
            "SET SESSION sql_generate_invisible_primary_key = ON",
            "INSERT INTO gipk.t (a, b) VALUES (100, 'after')",
            "UPDATE gipk.t SET b = 'moved' WHERE a = 3",
            "DELETE FROM gipk.t WHERE a = 5",
        )
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the writes after it")
    finally:
        code = worker.stop()
        server.execute("SET GLOBAL show_gipk_in_create_table_and_information_schema = ON")
    assert code == 0, worker.log_text()
    assert "snapshot of gipk.t: no primary key" not in worker.log_text()
    rows = read_changelog(uri)
    inserts = [_loads(r["data"]) for r in rows if r["type"] == "bootstrap-insert"]
    assert len(inserts) == 180
    assert sorted(d["my_row_id"] for d in inserts) == list(range(1, 181))
    assert {r["primary_key"] for r in rows if r["type"] == "bootstrap-insert"} == {f"[{i}]" for i in range(1, 181)}
    conn = server.connect()
    try:
        with conn.cursor() as cur:  # the key shown, as the change log has it
            cur.execute("SET SESSION show_gipk_in_create_table_and_information_schema = ON")
        source = source_tables(conn, ["gipk"])
    finally:
        conn.close()
    assert len(source[("gipk", "t")]) == 180 + 1 - 20  # 20 rows with a = 5 deleted
    assert_replay_equals_source(replay(rows), source)


def test_resnapshot_command_while_streaming(server: PrivateServer, tmp_path: Path) -> None:
    workload, conn = _workload(server, "snap4", seed=7, rows=200)
    _purge_history(server)  # a capture from earliest then starts with a snapshot, whatever ran before
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap4")
    path = write_manifest(
        tmp_path / "snap4.yaml",
        _doc("snap4", server, uri, "snap4", heartbeat={"intervalSeconds": 1}),
    )
    worker = WorkerProcess(path)
    background = _Background(workload)
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
        one = run_cli("resnapshot", str(path), "--table", "snap4.t1")
        assert one.returncode == 0, one.stderr
        assert "resnapshot request" in one.stdout and "snap4.t1" in one.stdout

        def completes(table: str, count: int) -> bool:
            worker.running()
            return _kinds(read_changelog(uri), table)["bootstrap-complete"] >= count

        wait_until(lambda: completes("t1", 2), timeout=60, what="the requested snapshot of t1")
        every = run_cli("resnapshot", str(path))
        assert every.returncode == 0, every.stderr
        wait_until(lambda: all(completes(t, 2) for t in ("t2", "t3")), timeout=60, what="a snapshot of every table")
        background.join()
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the stream to reach the binlog's end")
    finally:
        background.join()
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert _kinds(rows, "t1")["bootstrap-start"] == 3  # the initial snapshot and the two requests
    assert _kinds(rows, "t2")["bootstrap-start"] == 2
    done = server.query("SELECT COUNT(*) FROM mysqlcapture.snapshot_requests WHERE done_at IS NOT NULL")
    assert done[0][0] == 2
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snap4"]))
    conn.close()


def test_a_resnapshot_asked_of_a_resumed_streaming_worker_is_served_at_every_start(
    server: PrivateServer, tmp_path: Path
) -> None:
    """A request made while a resumed worker streams is served, at each of three starts. The worker starts its
    request poller after its reader thread, and the stream used to look the poller up once, when it connected: a
    stream that connected first never served a request. The Kafka exactly-once test lost that race in about one
    run of three on a loaded machine (a debug line showed the poller unset at connect); here, with the Delta sink,
    the race is lost less often, so this test guards the behaviour more than it reproduces the race."""
    _, conn = _workload(server, "snap9", seed=9, rows=50)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snap9")
    doc = _doc("snap9", server, uri, "snap9", start={"from": "latest"}, heartbeat={"intervalSeconds": 1})
    path = write_manifest(tmp_path / "snap9.yaml", doc)
    for start in range(1, 4):  # each start is its own race between the stream and the poller
        worker = WorkerProcess(path, log_path=tmp_path / f"start{start}.log")
        try:
            before = sink.load_checkpoint()
            wait_until(
                lambda w=worker, b=before: w.running() and sink.load_checkpoint() != b,
                timeout=60,
                what="a commit of this start (it streams)",
            )
            done = _kinds(read_changelog(uri), "t1")["bootstrap-complete"]
            asked = run_cli("resnapshot", str(path), "--table", "snap9.t1")
            assert asked.returncode == 0, asked.stderr
            wait_until(
                lambda w=worker, n=done: w.running() and _kinds(read_changelog(uri), "t1")["bootstrap-complete"] > n,
                timeout=60,
                what=f"the snapshot asked of start {start}",
            )
        finally:
            assert worker.stop() == 0, worker.log_text()
    kinds = _kinds(read_changelog(uri), "t1")
    assert kinds["bootstrap-complete"] >= 3 and kinds["bootstrap-insert"] == 50 * kinds["bootstrap-complete"]
    conn.close()


def test_partition_changes_without_row_events_are_read_again(
    server: PrivateServer, flavor: Flavor, tmp_path: Path
) -> None:
    """A partition's TRUNCATE, DROP and EXCHANGE (and MariaDB's CONVERT PARTITION) add or remove rows without row
    events: the worker puts a snapshot of each table they change in the position the statement ends at, and reads
    it once the stream is past the statement. The change log then replays to what the server holds."""
    uri, sink, doc, worker = _streaming("part", server, tmp_path)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE part")
            cur.execute(
                "CREATE TABLE part.p (id INT PRIMARY KEY, v VARCHAR(10)) PARTITION BY RANGE (id) (PARTITION p0 "
                "VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN (200), PARTITION p2 VALUES LESS THAN (300), "
                "PARTITION p3 VALUES LESS THAN (400), PARTITION pmax VALUES LESS THAN MAXVALUE)"
            )
            cur.execute("CREATE TABLE part.x (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("CREATE TABLE part.other (id INT PRIMARY KEY, v VARCHAR(10))")
            for low in (0, 100, 200, 300, 400):
                cur.executemany("INSERT INTO part.p VALUES (%s, %s)", [(low + i, f"p{low + i}") for i in range(1, 21)])
            cur.executemany("INSERT INTO part.x VALUES (%s, 'x')", [(i,) for i in range(150, 156)])
            cur.execute("INSERT INTO part.other VALUES (1, 'kept'), (2, 'kept')")
            statements = [
                "ALTER TABLE part.p TRUNCATE PARTITION p0",
                "UPDATE part.p SET v = 'changed' WHERE id = 105",
                "ALTER TABLE part.p EXCHANGE PARTITION p1 WITH TABLE part.x",  # p1's rows and x's swap
                "INSERT INTO part.p VALUES (5, 'new')",
                "ALTER TABLE part.p DROP PARTITION p2",
                "UPDATE part.x SET v = 'moved' WHERE id = 110",
            ]
            if flavor == "mariadb":  # MariaDB 10.7+: the partition's rows become a new table's
                statements.append("ALTER TABLE part.p CONVERT PARTITION p3 TO TABLE part.conv")
            for statement in statements:
                cur.execute(statement)
        wait_until(lambda: _caught_up(server, sink, worker), timeout=90, what="the stream and its snapshots")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    assert "changed rows of part.p, part.x without row events" in worker.log_text()
    rows = read_changelog(uri)
    assert _kinds(rows, "p")["bootstrap-start"] >= 1 and _kinds(rows, "x")["bootstrap-start"] >= 1
    assert _kinds(rows, "other")["bootstrap-start"] == 0  # a table no statement changed is not read
    # While the worker is down: a partition emptied, then its table renamed. Catching up, the worker opens the
    # snapshot's view at the binlog's end, past the RENAME: the snapshot reads the table under its new name.
    with conn.cursor() as cur:
        cur.execute("ALTER TABLE part.p TRUNCATE PARTITION pmax")
        cur.execute("RENAME TABLE part.p TO part.p_renamed")
        cur.execute("INSERT INTO part.p_renamed VALUES (450, 'after')")
    worker = WorkerProcess(write_manifest(tmp_path / "part.yaml", doc), log_path=tmp_path / "again.log")
    try:
        wait_until(lambda: _caught_up(server, sink, worker), timeout=90, what="the stream and its snapshots")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert _kinds(rows, "p_renamed")["bootstrap-start"] == 1
    source = source_tables(conn, ["part"])
    assert {k: len(v) for k, v in source.items()} == {
        ("part", "p_renamed"): 6 + 1 + 1 + (0 if flavor == "mariadb" else 20),
        ("part", "x"): 20,
        ("part", "other"): 2,
        **({("part", "conv"): 20} if flavor == "mariadb" else {}),
    }
    assert_replay_equals_source(replay(rows), source)
    conn.close()


def test_statements_logged_as_text_are_read_again(server: PrivateServer, tmp_path: Path) -> None:
    """A session's binlog_format=STATEMENT logs its INSERT, UPDATE, DELETE and LOAD DATA as text, without row events
    (the worker dropped them without a word): each table they write that the capture includes is read again, like a
    partition's TRUNCATE; a table the capture leaves out (pt-table-checksum's percona.checksums) is not."""
    uri, sink, _, worker = _streaming("stmt", server, tmp_path)
    server.execute("SET GLOBAL local_infile = 1")
    conn = server.connect(local_infile=True)
    loaded = tmp_path / "rows.csv"
    loaded.write_text("30,loaded\n31,loaded\n")
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE stmt")
            cur.execute("CREATE DATABASE stmt_checks")
            cur.execute("CREATE TABLE stmt.t (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute("CREATE TABLE stmt.quiet (id INT PRIMARY KEY)")
            cur.execute("CREATE TABLE stmt_checks.sums (tbl VARCHAR(64) PRIMARY KEY, n INT)")
            cur.execute("INSERT INTO stmt.t VALUES (1, 'row'), (2, 'row'), (3, 'row')")
            cur.execute("INSERT INTO stmt.quiet VALUES (1)")
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            for statement in (
                "INSERT INTO stmt.t VALUES (10, 'text'), (11, 'text')",
                "UPDATE stmt.t SET v = 'changed' WHERE id IN (1, 10)",
                "DELETE FROM stmt.t WHERE id = 2",
                f"LOAD DATA LOCAL INFILE '{loaded}' INTO TABLE stmt.t FIELDS TERMINATED BY ','",
                "REPLACE INTO stmt_checks.sums SELECT 't', COUNT(*) FROM stmt.t",
            ):
                cur.execute(statement)
            cur.execute("SET SESSION binlog_format = 'ROW'")
            cur.execute("INSERT INTO stmt.t VALUES (20, 'row')")
        wait_until(lambda: _caught_up(server, sink, worker), timeout=90, what="the stream and its snapshots")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    assert "changed rows of stmt.t without row events (INSERT INTO stmt.t VALUES (10" in worker.log_text()
    assert "changed rows of stmt.t without row events (LOAD DATA LOCAL INFILE" in worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert _kinds(rows, "t")["bootstrap-start"] >= 1
    assert _kinds(rows, "quiet")["bootstrap-start"] == 0 and _kinds(rows, "sums")["bootstrap-start"] == 0
    assert_replay_equals_source(replay(rows), source_tables(conn, ["stmt"]))
    conn.close()


def test_an_incident_reads_every_captured_table_again(server: PrivateServer, tmp_path: Path) -> None:
    """A statement on a non-transactional (MyISAM) table that outgrows max_binlog_stmt_cache_size fails after
    changing rows the server then cannot log: it writes an INCIDENT event (LOST_EVENTS) instead, which does not say
    which rows. mysql-replication skips the event type, and the worker went past it with those rows lost to the
    change log; now every captured table is read again once the stream is past it, and the change log replays to
    what the server holds."""
    uri, sink, _, worker = _streaming("inc", server, tmp_path)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE inc")
            cur.execute("CREATE TABLE inc.m (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=MyISAM")
            cur.execute("CREATE TABLE inc.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB")
            cur.execute("INSERT INTO inc.t VALUES (1, 'before'), (2, 'before')")
            cur.execute("INSERT INTO inc.m VALUES (1, 'before')")
            cur.execute("SELECT @@GLOBAL.max_binlog_stmt_cache_size")
            (saved,) = cur.fetchone()
            cur.execute("SET GLOBAL max_binlog_stmt_cache_size = 4096")
        try:
            lossy = server.connect()  # a session started after the change: its statement cache has the new limit
            with lossy.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as refused:
                cur.execute(
                    "INSERT INTO inc.m WITH RECURSIVE r (n) AS (SELECT 2 UNION ALL SELECT n + 1 FROM r WHERE n < 500) "
                    "SELECT n, REPEAT('x', 200) FROM r"
                )
            lossy.close()
        finally:
            with conn.cursor() as cur:
                cur.execute(f"SET GLOBAL max_binlog_stmt_cache_size = {int(saved)}")
        assert refused.value.args[0] == 1705, refused.value  # ER_STMT_CACHE_FULL, after some rows went in
        with conn.cursor() as cur:
            cur.execute("INSERT INTO inc.t VALUES (3, 'after')")
            cur.execute("UPDATE inc.m SET v = 'after' WHERE id = 1")
        wait_until(lambda: _caught_up(server, sink, worker), timeout=90, what="the stream and its snapshots")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    assert "the source wrote an INCIDENT event (LOST_EVENTS" in worker.log_text(), worker.log_text()[-3000:]
    assert "a snapshot of every captured table (2) follows" in worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert _kinds(rows, "m")["bootstrap-start"] == 1 and _kinds(rows, "t")["bootstrap-start"] == 1
    source = source_tables(conn, ["inc"])
    assert len(source[("inc", "m")]) > 2, "the failed statement left no rows: no incident to read past"
    assert_replay_equals_source(replay(rows), source)
    conn.close()


@pytest.mark.parametrize("policy", ["onPurged-resnapshot", "mode-when-needed"])
def test_purged_binlogs_resnapshot(server: PrivateServer, tmp_path: Path, policy: str) -> None:
    database = f"snap5{policy[0]}"
    workload, conn = _workload(server, database, seed=8, rows=100)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id=f"mysqlcapture-{database}")
    extra: dict[str, Any] = (
        {"failover": {"onPurged": "resnapshot"}}
        if policy == "onPurged-resnapshot"
        else {"snapshot": {"mode": "when-needed"}}
    )
    path = write_manifest(tmp_path / "snap5.yaml", _doc(database, server, uri, database, **extra))
    worker = WorkerProcess(path)
    try:
        for _ in range(50):
            workload.step()
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="the first run to catch up")
    finally:
        assert worker.stop() == 0, worker.log_text()
    for _ in range(100):  # written while the worker is down, then purged: these events are gone
        workload.step()
    _purge_history(server)
    worker = WorkerProcess(path)
    try:
        wait_until(lambda: _caught_up(server, sink, worker), timeout=90, what="the recovery snapshot")
        for _ in range(50):
            workload.step()
        wait_until(lambda: _caught_up(server, sink, worker), timeout=60, what="streaming after the snapshot")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    assert "is purged: taking a new snapshot of 3 tables" in worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert all(_kinds(rows, t)["bootstrap-complete"] >= 1 for t in workload.tables)
    assert_replay_equals_source(replay(rows), source_tables(conn, [database]))
    conn.close()


def test_bootstrap_values_render_exactly_as_binlog_inserts(
    server: PrivateServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every corpus value: `data` of its bootstrap-insert is byte-identical to `data` of its binlog insert, and so
    is its `json_null` (the JSON null documents), on the snapshot's compiled text path (`fidsnap`) and on its
    reference converters (`fidref`)."""
    assert TextRenderer is not None, "mysqlcapture_native without TextRenderer: make setup builds it"
    # Every case of the flavor but one: MySQL prints DECIMAL and temporal values inside a JSON document as plain
    # numbers and strings, so a snapshot cannot render them as the binlog's binary JSON does (README, Snapshots).
    cases = [c for c in cases_for(server.flavor) if c.name != "json_opaque"]
    columns = {c.name: f"b {c.base}, v {c.ddl}" if c.base else f"v {c.ddl}" for c in cases}
    server.execute(
        "CREATE DATABASE snapfid",
        *(f"CREATE TABLE snapfid.`{name}` (id INT PRIMARY KEY, {cols})" for name, cols in columns.items()),
    )
    status = server.binlog_status()
    file, pos = status.file, status.pos
    shared = server.connect()
    for c in cases:
        session = server.connect() if c.setup else shared  # a case's session settings stay in its session
        with session.cursor() as cur:
            for statement in c.setup:
                cur.execute(statement)
            column = "b" if c.base else "v"
            for i, value in enumerate(c.values):
                try:
                    cur.execute(f"INSERT INTO snapfid.`{c.name}` (id, {column}) VALUES ({i}, {value})")
                except pymysql.err.MySQLError as exc:
                    raise AssertionError(f"{c.name} value {value}: {exc}") from exc
        if session is not shared:
            session.close()
    shared.close()
    logs: dict[str, list[dict[str, Any]]] = {}
    for name, start in (("fidbin", {"from": "position", "binlogFile": str(file), "binlogPosition": int(pos)}),
                        ("fidsnap", {"from": "earliest"}), ("fidref", {"from": "earliest"})):  # fmt: skip
        if name == "fidsnap":
            _purge_history(server)  # a capture from earliest now snapshots the rows the first one streamed
            executed = _statements_executed(server)
        if name == "fidref":
            monkeypatch.setenv("MYSQLCAPTURE_DECODER", "reference")
        uri = str(tmp_path / name)
        doc = _doc(name, server, uri, "snapfid", chunk_rows=1000)
        doc["spec"]["start"] = start
        result = run_cli("run", str(write_manifest(tmp_path / f"{name}.yaml", doc)), "--exit-at-end", "--plain-logs")
        assert result.returncode == 0, result.stderr[-3000:]
        logs[name] = read_changelog(uri)
        if name == "fidsnap":
            assert "compiled text path failed" not in result.stderr, result.stderr[-3000:]
            compiled = set(re.findall(r"snapshot of snapfid\.(\S+): compiled text path", result.stderr))
            # Every table, JSON, spatial types, VECTOR and multi-byte charsets included.
            assert {c.name for c in cases} - compiled == set()
            # The compiled path reads its chunks as prepared statements (binary rows): one at least per table.
            assert _statements_executed(server) - executed >= len(compiled)

    def image(r: dict[str, Any]) -> tuple[str, str | None]:
        return r["data"], r["json_null"]

    binlog = {(r["table"], r["primary_key"]): image(r) for r in logs["fidbin"] if r["type"] == "insert"}
    assert len(binlog) == sum(len(c.values) for c in cases)
    assert binlog[("json_null", "[0]")] == ('{"id":0,"v":null}', '["v"]')  # the JSON document null
    assert binlog[("json_null", "[1]")] == ('{"id":1,"v":null}', None)  # SQL NULL
    for name in ("fidsnap", "fidref"):
        snapshot = {(r["table"], r["primary_key"]): image(r) for r in logs[name] if r["type"] == "bootstrap-insert"}
        assert sorted(snapshot) == sorted(binlog), name
        different = {key: (binlog[key], snapshot[key]) for key in binlog if binlog[key] != snapshot[key]}
        assert not different, (name, different)
        hashes = {r["pk_hash"] for r in logs[name] if r["type"] == "bootstrap-insert"}
        assert hashes == {r["pk_hash"] for r in logs["fidbin"] if r["type"] == "insert"}, name
    for c in cases:  # and both say what the corpus says
        for i, expected in enumerate(c.expected_for(server.flavor)):
            data = snapshot[(c.name, f"[{i}]")][0]
            assert data.endswith(f'"v":{expected}}}'), (c.name, i, data)


class _InProcess:
    """A parallel snapshot of `database` run in this process, no stream running: the harness stands in for it,
    naming the binlog's end as the place the stream reached and each fence at the end it had when written (nothing
    else writes while it reads, so every read sees every transaction before)."""

    def __init__(self, server: PrivateServer, database: str, *, chunk_rows: int, parallelism: int = 2) -> None:
        from mysqlcapture_worker.engine import CaptureEngine
        from mysqlcapture_worker.filters import TableFilter
        from mysqlcapture_worker.metrics import WorkerMetrics
        from mysqlcapture_worker.positions import Position
        from mysqlcapture_worker.schema.introspect import capture_schema
        from mysqlcapture_worker.schema.state import SchemaState
        from mysqlcapture_worker.snapshot.parallel import Fences, ParallelSnapshot
        from mysqlcapture_worker.snapshot.progress import Progress
        from mysqlcapture_worker.snapshot.window import WindowLog
        from prometheus_client import CollectorRegistry

        self.server, self.chunk_rows = server, chunk_rows
        conn = self.connect()
        schema = capture_schema(conn, lambda db, t: db == database)
        conn.close()
        self.engine = CaptureEngine(
            position=Position(server_id=1, coordinate=Coordinate("x", 4)),
            schema=SchemaState(None, schema, 0),
            table_filter=TableFilter([f"{database}.*"]),
        )
        self.chunks: list[Any] = []
        self.metrics = WorkerMetrics(CollectorRegistry(), "t")
        self.window, self._values = WindowLog(), itertools.count(1)
        self.engine.position = self.engine.position.at_boundary(self.here(), gtid_set="")
        self.parallel = ParallelSnapshot(
            connect=self.connect,
            dialect=server.dialect,
            metrics=self.metrics,
            window=self.window,
            fences=Fences(self._fence),
            parallelism=parallelism,
            chunk_rows=chunk_rows,
            progress=Progress(self.metrics),
        )

    def connect(self, **kw: Any) -> pymysql.connections.Connection:
        return self.server.connect(**kw)

    def here(self) -> Coordinate:
        status = self.server.binlog_status()
        return Coordinate(status.file, status.pos)

    def _fence(self) -> int:
        value, at = next(self._values), self.here()
        self.window.heartbeat(value, Coordinate(at.file, at.pos - 1))
        return value

    def read(self, *tables: tuple[str, str]) -> None:
        """Every range of `tables`, put in as the stream would put them in."""
        job = SnapshotJob(tables=tables, reason="initial")
        self.engine.position = self.engine.position.with_snapshot(job.to_json())

        def done() -> bool:
            self.parallel.reached = self.here()
            self.parallel.pump(
                self.engine, SnapshotJob.from_json(self.engine.position.snapshot or job.to_json()), self.chunks.append
            )
            return self.engine.position.snapshot is None

        try:
            wait_until(done, timeout=60, what=f"the ranges of {tables}", interval=0.05)
        finally:
            self.parallel.close()

    def events(self, table: str) -> list[tuple[str, Any]]:
        from mysqlcapture_worker.sinks.delta import events_to_arrow

        log = events_to_arrow([e for c in self.chunks for e in c.events]).to_pylist()
        return [(r["type"], r["data"]) for r in log if r["table"] == table]


def test_compiled_render_failure_reads_again_on_the_reference_path(
    server: PrivateServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A value the compiled path cannot render: a keyed range is read again on the reference path, a keyless
    table is scanned again after a new bootstrap-start; both still give every row exactly as the reference does."""
    from mysqlcapture_worker.snapshot import fast
    from mysqlcapture_worker.snapshot.runner import Snapshotter

    server.execute(
        "CREATE DATABASE snapfail",
        "CREATE TABLE snapfail.keyed (id INT PRIMARY KEY, s VARCHAR(20))",
        "CREATE TABLE snapfail.keyless (n INT, s VARCHAR(20))",
        *(f"INSERT INTO snapfail.{t} VALUES {', '.join(f'({i}, {v})' for i, v in rows)}"
          for t, rows in (("keyed", [(i, f"'{i}'" if i != 7 else "'seven'") for i in range(12)]),
                          ("keyless", [(i % 3, f"'{i}'" if i != 9 else "'nine'") for i in range(12)]))),
    )  # fmt: skip
    # The compiled path reads the VARCHAR as a date: the digits render as the string they are, "seven" and
    # "nine" cannot be rendered.
    real = fast.text_column
    monkeypatch.setattr(
        fast, "text_column", lambda t, c, conv: ((fast.T_QUOTED, []), None) if c.name == "s" else real(t, c, conv)
    )
    run = _InProcess(server, "snapfail", chunk_rows=5)
    run.read(("snapfail", "keyed"))
    snap = Snapshotter(connect=run.connect, dialect=server.dialect, metrics=run.metrics, chunk_rows=5)
    job = SnapshotJob(tables=(("snapfail", "keyless"),), reason="initial")
    snap.run(run.engine, job, run.chunks.append, threading.Event(), view=snap.open_view())
    for table in ("keyed", "keyless"):
        events = run.events(table)
        starts = [i for i, (kind, _) in enumerate(events) if kind == "bootstrap-start"]
        assert len(starts) == (2 if table == "keyless" else 1), events  # the scan starts again, the chunks do not
        inserts = [json.loads(d) for kind, d in events[starts[-1] :] if kind == "bootstrap-insert"]
        expected = source_tables(server.connect(), ["snapfail"])[("snapfail", table)].values()
        assert sorted(json.dumps(r, sort_keys=True) for r in inserts) == sorted(
            json.dumps(r, sort_keys=True) for r in expected
        ), table
        assert events[-1][0] == "bootstrap-complete"
    assert "compiled text path failed (bad temporal text)" in caplog.text


def test_keys_past_the_planned_end_are_read_before_the_table_completes(
    server: PrivateServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once every range is read, the table's largest key is read again: a plan whose read of the largest key
    missed the top rows (here: made to) still ends with every row of the table, each once."""
    from mysqlcapture_worker.snapshot.parallel import ParallelSnapshot

    server.execute(
        "CREATE DATABASE snapend",
        "CREATE TABLE snapend.t (id INT PRIMARY KEY, s VARCHAR(20))",
        "INSERT INTO snapend.t VALUES " + ", ".join(f"({i}, 'r{i}')" for i in range(0, 60, 2)),
    )
    real = ParallelSnapshot._largest
    asked: list[Any] = []

    def stale_first(self: ParallelSnapshot, view: Any, st: Any, after: Any) -> Any:
        found = real(self, view, st, after)
        asked.append((after, found))
        return (38,) if len(asked) == 1 else found  # the plan sees the table as it was before ids 40-58

    monkeypatch.setattr(ParallelSnapshot, "_largest", stale_first)
    run = _InProcess(server, "snapend", chunk_rows=4)
    run.read(("snapend", "t"))
    events = run.events("t")
    assert events[0][0] == "bootstrap-start" and events[-1][0] == "bootstrap-complete"
    ids = sorted(json.loads(d)["id"] for kind, d in events if kind == "bootstrap-insert")
    assert ids == list(range(0, 60, 2)), "a row past the planned end missing, or read twice"
    assert asked == [(None, (58,)), ((38,), (58,))], asked  # the plan's read, then once past its end


class _TightWriter:
    """Commits as fast as it can on the rows a snapshot is reading: updates, inserts into the gaps between keys,
    deletes, and updates that move a key (into and out of ranges being read), on its own connection."""

    def __init__(self, server: PrivateServer, table: str, *, keys: int, seed: int, commits: int) -> None:
        self.conn = server.connect(autocommit=True)
        self.limit = commits
        self.table, self.keys, self.rng = table, keys, random.Random(seed)
        self.commits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self.conn.cursor() as cur:
            while not self._stop.is_set() and self.commits < self.limit:
                k = self.rng.randrange(self.keys * 2)
                op = self.rng.random()
                if op < 0.4:
                    cur.execute(f"UPDATE {self.table} SET v = v + 1, s = %s WHERE id = %s", (f"u{self.commits}", k))
                elif op < 0.6:
                    cur.execute(f"INSERT IGNORE INTO {self.table} (id, v, s) VALUES (%s, 0, 'new')", (k,))
                elif op < 0.8:
                    cur.execute(f"DELETE FROM {self.table} WHERE id = %s", (k,))
                else:  # a key moves: to a place far away in the key space, perhaps a range read already
                    cur.execute(
                        f"UPDATE IGNORE {self.table} SET id = %s WHERE id = %s", (self.rng.randrange(self.keys * 2), k)
                    )
                self.commits += 1

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=30)
            self.conn.close()


def test_ranges_read_while_a_writer_commits_in_a_tight_loop_on_them_are_exact(
    server: PrivateServer, tmp_path: Path
) -> None:
    """The visibility race: a writer commits as fast as it can on the very rows the snapshot's parallel ranges read
    (a transaction reaches the binlog, and the stream, before a reader sees it). Every range is merged with the
    stream through its window: the change log replays to the source, no row is stale after its bootstrap-insert."""
    keys = 12000
    server.execute(
        "CREATE DATABASE snaprace",
        "CREATE TABLE snaprace.t (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(40))",
        *(
            "INSERT INTO snaprace.t VALUES " + ", ".join(f"({i}, 0, 'r{i}')" for i in range(start, start + 1000, 2))
            for start in range(0, keys * 2, 1000)
        ),
    )
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snaprace")
    doc = _doc("snaprace", server, uri, "snaprace", chunk_rows=100)
    doc["spec"]["snapshot"]["parallelism"] = 4
    doc["spec"]["flush"] = {"maxIntervalMs": 500, "maxEvents": 20000}
    worker = WorkerProcess(write_manifest(tmp_path / "snaprace.yaml", doc))
    # As fast as it can, for a bounded number of commits: a writer faster than the stream can follow (a tight loop
    # on two cores) holds every range back until the stream has passed the read's window.
    writer = _TightWriter(server, "snaprace.t", keys=keys, seed=11, commits=30000)
    try:
        # Done, not started first: a snapshot may begin and end between two checkpoints (the merges it made and the
        # writer's changes during it are counted in the change log below).
        wait_until(lambda: _snapshot_done(sink, worker), timeout=300, what="the snapshot to complete")
        writer.stop()
        wait_until(lambda: _caught_up(server, sink, worker), timeout=120, what="the stream to reach the binlog's end")
    finally:
        writer.stop()
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    kinds = _kinds(rows, "t")
    assert kinds["bootstrap-start"] == 1 and kinds["bootstrap-complete"] == 1, kinds
    merged = assert_no_stale_bootstrap(rows)
    start, end = (
        next(r["order_key"] for r in rows if r["type"] == kind) for kind in ("bootstrap-start", "bootstrap-complete")
    )
    # The writer's transactions the stream carried between the table's bootstrap-start and -complete.
    during = len(
        {
            (r["binlog_file"], r["binlog_pos"])
            for r in rows
            if start < r["order_key"] < end and r["type"] in ("insert", "update", "delete")
        }
    )
    print(
        f"{during} transactions while the snapshot read; {kinds['bootstrap-insert']} bootstrap-inserts, {merged} merged"
    )
    assert during >= 100, during  # the writer really raced the reads (a loaded machine commits less often)
    assert merged > 0  # and some ranges were read while their rows changed
    conn = server.connect()
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snaprace"]))
    conn.close()


def test_ranges_follow_the_servers_order_for_ci_composite_skewed_and_growing_keys(
    server: PrivateServer, tmp_path: Path
) -> None:
    """Ranges are cut by the server, so they follow its order whatever the key: a composite key with a `_ci`
    VARCHAR (mixed case: binary order is not the collation's), integer keys skewed over twelve orders of magnitude,
    and a table a writer keeps growing at its end while it is read (its snapshot still ends: keys above its largest
    one at the start are the stream's)."""
    codes = [
        f"{random.Random(i).choice(['a', 'B', 'c', 'D'])}{'é' if i % 5 == 0 else 'e'}-{i:05d}" for i in range(3000)
    ]
    server.execute(
        "CREATE DATABASE snapkeys",
        "CREATE TABLE snapkeys.ci (tenant INT NOT NULL, code VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL, "
        "n INT, PRIMARY KEY (tenant, code))",
        "INSERT INTO snapkeys.ci VALUES " + ", ".join(f"({i % 3}, '{c}', {i})" for i, c in enumerate(codes)),
        "CREATE TABLE snapkeys.skewed (id BIGINT PRIMARY KEY, n INT)",
        "INSERT INTO snapkeys.skewed VALUES "
        + ", ".join(f"({i if i < 2500 else 10 ** (i % 12 + 1) + i}, {i})" for i in range(3000)),
        "CREATE TABLE snapkeys.growing (id INT AUTO_INCREMENT PRIMARY KEY, n INT)",
        "INSERT INTO snapkeys.growing (n) VALUES " + ", ".join(f"({i})" for i in range(3000)),
    )
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snapkeys")
    doc = _doc("snapkeys", server, uri, "snapkeys", chunk_rows=100)
    doc["spec"]["snapshot"]["parallelism"] = 4
    doc["spec"]["flush"] = {"maxIntervalMs": 500, "maxEvents": 20000}
    worker = WorkerProcess(write_manifest(tmp_path / "snapkeys.yaml", doc))
    grower = server.connect(autocommit=True)
    grown = 0
    try:
        # Appends to the table's end as fast as one connection can, until the whole snapshot is done or 20,000 rows
        # were added (a writer the stream cannot follow holds every read back until the stream passes its window).
        while (grown % 50 or not _snapshot_done(sink, worker)) and grown < 20000:
            with grower.cursor() as cur:
                cur.execute("INSERT INTO snapkeys.growing (n) VALUES (-1)")
            grown += 1
        wait_until(lambda: _snapshot_done(sink, worker), timeout=180, what="the snapshot to complete")
        wait_until(lambda: _caught_up(server, sink, worker), timeout=120, what="the stream to reach the binlog's end")
    finally:
        grower.close()
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert_no_stale_bootstrap(rows)
    assert grown > 100, grown  # the table really grew while it was read
    for table in ("ci", "skewed"):
        assert _kinds(rows, table)["bootstrap-insert"] == 3000, (table, _kinds(rows, table))
    conn = server.connect()
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snapkeys"]))
    conn.close()


class _Writes:
    """Random typed writes (inserts, updates, PK changes, deletes, multi-table transactions) with a DDL every
    `ddl_every` steps (ADD/DROP/MODIFY/RENAME COLUMN, RENAME TABLE, re-creation, TRUNCATE), until stopped."""

    def __init__(self, workload: Workload, *, ddl_every: int) -> None:
        self.workload = workload
        self.ddl_every = ddl_every
        self.steps = self.ddls = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.01):
                if self.steps % self.ddl_every == self.ddl_every - 1:
                    self.workload.do_ddl()
                    self.ddls += 1
                else:
                    self.workload.step()
                self.steps += 1
        except BaseException as exc:  # surfaced by join()
            self.error = exc

    def join(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        if self.error is not None:
            raise self.error


def _capture_user(server: PrivateServer, name: str) -> None:
    """A capture user with the grants README documents for a managed server: no RELOAD, no LOCK TABLES."""
    plugin = " WITH caching_sha2_password" if server.flavor == "mysql" else ""
    server.execute(
        f"DROP USER IF EXISTS '{name}'@'%'",
        f"CREATE USER '{name}'@'%' IDENTIFIED{plugin} BY 's3cret'",
        f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{name}'@'%'",
        f"GRANT CREATE, INSERT, UPDATE, DELETE ON mysqlcapture.* TO '{name}'@'%'",
    )


def test_random_writes_and_ddl_through_a_parallel_snapshot_killed_again_and_again(
    server: PrivateServer, tmp_path: Path
) -> None:
    """A capture user with the managed-server grants snapshots four tables of random typed rows at parallelism 4 while
    random writes, PK changes and DDL go on; the worker is SIGKILLed at random points of the snapshot, again and
    again, and resumed. The change log holds every event once, no bootstrap-insert is older than what the stream
    had already said of its row, and it replays to `SELECT *`."""
    conn = server.connect()
    workload = Workload(conn, "snapkill", seed=97, ddl=False, truncate=True)  # DDL: `_Writes`
    workload.setup(n_tables=4)
    for table in workload.tables.values():
        workload.insert(table, 1200)
    _purge_history(server)
    _capture_user(server, "snapkill")
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snapkill")
    doc = _doc("snapkill", server, uri, "snapkill", chunk_rows=60)
    doc["spec"]["source"]["user"] = "snapkill"
    doc["spec"]["snapshot"].update({"parallelism": 4, "maxBufferedRows": 240})
    doc["spec"]["flush"] = {"maxIntervalMs": 100, "maxEvents": 120}
    path = write_manifest(tmp_path / "snapkill.yaml", doc)
    rng = random.Random(97)
    writes = _Writes(workload, ddl_every=150)
    kills: list[SnapshotJob] = []
    runs: list[WorkerProcess] = []
    final: WorkerProcess | None = None
    try:
        for i in itertools.count():
            before = sink.load_checkpoint()
            worker = WorkerProcess(path, password="s3cret", log_path=tmp_path / f"run{i}.log")
            runs.append(worker)
            # Kill once this run has committed part of the snapshot, at a random point after that.
            wait_until(
                lambda w=worker, b=before: w.running() and sink.load_checkpoint() != b,
                timeout=90,
                what=f"run {i} to commit",
                interval=0.02,
            )
            time.sleep(rng.uniform(0.0, 0.4))
            job = _snapshot_job(sink, worker)
            if job is None or len(kills) == 6:
                final = worker  # the snapshot is done (or killed enough): this run goes on to the end
                break
            worker.kill()
            kills.append(job)
        assert final is not None
        wait_until(lambda: _snapshot_done(sink, final), timeout=300, what="the resumed snapshot to complete")
        writes.join()
        wait_until(lambda: _caught_up(server, sink, final), timeout=120, what="the stream to reach the binlog's end")
    finally:
        writes.join()
        for run in runs:
            if run is not final:
                run.kill()
        code = final.stop() if final is not None else None
    assert code == 0, final.log_text() if final is not None else ""
    assert len(kills) >= 3, f"only {len(kills)} kills landed inside the snapshot"
    assert writes.ddls >= 2 and writes.steps >= 200, (writes.ddls, writes.steps)
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    merged = assert_no_stale_bootstrap(rows)
    # Every table's snapshot ran to its end, started again (a DDL of it while read), or lost its table (renamed
    # or dropped: a renamed table's snapshot starts again under its new name).
    ends = {"bootstrap-start", "bootstrap-complete", "table-alter", "table-drop"}
    for i, r in enumerate(rows):
        if r["type"] == "bootstrap-start":
            table = (r["database"], r["table"])
            assert any((x["database"], x["table"]) == table and x["type"] in ends for x in rows[i + 1 :]), r
    kinds = Counter(r["type"] for r in rows)
    # How much of the 4,800 rows a snapshot reads before the DDL drops or renames their tables depends on timing
    # alone (265 to over 1,200 seen, the fewest on a loaded machine): that a table's snapshot ran to its end is what
    # does not; what it read is checked by the replay below.
    assert kinds["bootstrap-complete"] >= 1 and kinds["bootstrap-insert"] > 0, kinds
    progress = [(j.index, j.rows, len(j.ranges)) for j in kills]
    print(f"killed at {progress}; {writes.steps} writes, {writes.ddls} DDL; {merged} bootstrap-inserts merged; {kinds}")
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snapkill"]))
    conn.close()


def test_tables_are_read_side_by_side_and_a_kill_resumes_every_table_it_had_begun(
    server: PrivateServer, tmp_path: Path
) -> None:
    """Many small tables: once every range of the tables being read is handed out, the next tables start on the
    connections left (each with its bootstrap-start), so tables overlap. The checkpoint carries every table begun;
    a SIGKILL then resumes each from its own committed ranges: no row read twice, nothing lost."""
    conn = server.connect()
    workload = Workload(conn, "snapside", seed=41, ddl=False)
    workload.setup(n_tables=8)
    for table in workload.tables.values():
        workload.insert(table, 240)
    _purge_history(server)
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-snapside")
    doc = _doc("snapside", server, uri, "snapside", chunk_rows=30)
    doc["spec"]["snapshot"]["parallelism"] = 4
    doc["spec"]["flush"] = {"maxIntervalMs": 100, "maxEvents": 60}
    path = write_manifest(tmp_path / "snapside.yaml", doc)
    writes = _Writes(workload, ddl_every=10**9)
    first = WorkerProcess(path, log_path=tmp_path / "first.log")
    second: WorkerProcess | None = None
    try:
        wait_until(
            lambda: ((j := _snapshot_job(sink, first)) is not None and j.ahead and j) or None,
            timeout=90,
            what="a checkpoint with a table read ahead of the current one",
            interval=0.01,
        )
        first.kill()
        # What the second worker resumes from: the last commit, which the first may have made after the one seen.
        ckpt = sink.load_checkpoint()
        assert ckpt is not None
        killed_at = SnapshotJob.from_json(ckpt.snapshot) if ckpt.snapshot else None
        second = WorkerProcess(path, log_path=tmp_path / "second.log")
        wait_until(lambda: _snapshot_done(sink, second), timeout=120, what="the resumed snapshot to complete")
        writes.join()
        wait_until(lambda: _caught_up(server, sink, second), timeout=60, what="the stream to reach the binlog's end")
    finally:
        writes.join()
        first.kill()
        code = second.stop() if second is not None else None
    assert code == 0, second.log_text() if second is not None else ""
    rows = read_changelog(uri)
    _assert_exactly_once(rows)
    assert_no_stale_bootstrap(rows)
    markers = [(r["type"], r["table"]) for r in rows if r["type"] in ("bootstrap-start", "bootstrap-complete")]
    assert Counter(kind for kind, _ in markers) == {"bootstrap-start": 8, "bootstrap-complete": 8}, markers
    # Side by side: some table starts before the one started before it completes.
    open_at_once = max(
        sum(1 for kind, t in markers[: k + 1] if kind == "bootstrap-start")
        - sum(1 for kind, t in markers[: k + 1] if kind == "bootstrap-complete")
        for k in range(len(markers))
    )
    assert open_at_once >= 2, markers
    sent = Counter((r["table"], r["primary_key"]) for r in rows if r["type"] == "bootstrap-insert")
    assert max(sent.values()) == 1, [key for key, n in sent.items() if n > 1][:5]
    if killed_at is not None:
        resumed = [(a.i, a.rows) for a in killed_at.ahead]
        print(f"killed with table {killed_at.index} current ({killed_at.rows} rows), {resumed} ahead; at most "
              f"{open_at_once} tables open at once")  # fmt: skip
        if killed_at.rows or any(a.rows for a in killed_at.ahead):  # a table begun and partly committed
            assert "resuming after" in second.log_text()
    assert_replay_equals_source(replay(rows), source_tables(conn, ["snapside"]))
    conn.close()
