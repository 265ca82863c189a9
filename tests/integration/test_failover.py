"""Failover: the primary dies, its replica is promoted, the endpoint moves; the capture follows."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.positions import SnapshotJob
from mysqlcapture_worker.sinks.delta import DeltaSink

from tests.proxy import SwitchableProxy
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, wait_until, write_manifest
from tests.workload import Workload


def _status(worker: WorkerProcess) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/status", timeout=5) as resp:
        return json.loads(resp.read())


def _fail_over(primary: PrivateServer, replica: PrivateServer, proxy: SwitchableProxy) -> None:
    """Once the replica holds all the primary wrote: the primary dies, the replica is promoted and made writable,
    and the endpoint moves to it."""
    replica.wait_replica_caught_up(primary)
    primary.stop()
    replica.promote()
    replica.execute("SET GLOBAL read_only = 0")
    proxy.switch(replica.port)


def _promotable_capture(
    tmp_path: Path,
    start_source: Callable[..., PrivateServer],
    server_ids: tuple[int, int],
    name: str,
    *,
    mode: str,
    heartbeat_seconds: int,
) -> tuple[PrivateServer, PrivateServer, SwitchableProxy, str, WorkerProcess, DeltaSink]:
    """A primary, its replica (log_slave_updates, ready to be promoted), a proxy in front of the primary, and a
    worker capturing through the proxy from the binlog's end into a Delta change log (`spec.failover.mode` `mode`)."""
    primary = start_source(server_ids[0])
    replica = start_source(server_ids[1], log_slave_updates="ON")
    replica.make_replica_of(primary)
    proxy = SwitchableProxy(primary.port)
    uri = str(tmp_path / "changelog")
    doc = manifest(
        name,
        port=proxy.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 200},
        extra_spec={"failover": {"mode": mode}, "heartbeat": {"intervalSeconds": heartbeat_seconds}},
    )
    worker = WorkerProcess(write_manifest(tmp_path / f"{name}.yaml", doc))
    return primary, replica, proxy, uri, worker, DeltaSink(uri, app_id=f"mysqlcapture-{name}")


@pytest.mark.parametrize("mode", ["gtid", "heartbeat"])
def test_failover_to_a_promoted_replica(tmp_path: Path, mode: str, start_source: Callable[..., PrivateServer]) -> None:
    name = f"fo-{mode}"
    primary, replica, proxy, uri, worker, sink = _promotable_capture(
        tmp_path, start_source, (51, 52), name, mode=mode, heartbeat_seconds=1
    )
    conn = primary.connect()
    try:
        wait_until(
            lambda: sink.load_checkpoint() is not None or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        workload = Workload(conn, "fo", seed=61, ddl=True)
        workload.setup(n_tables=3)
        for _ in range(200):
            workload.step()
        replica.wait_replica_caught_up(primary)
        # Heartbeats keep moving the binlog's end: wait for the position reached by the workload.
        written = primary.binlog_status().pos
        wait_until(
            lambda: (
                worker.running()
                and (ckpt := sink.load_checkpoint()) is not None
                and ckpt.last_heartbeat is not None
                and ckpt.coordinate.pos >= written
            ),
            timeout=60,
            what="the worker to commit past the last write and a heartbeat",
        )
        for _ in range(30):  # written on the old primary, replicated, possibly not yet read by the worker
            workload.step()
        conn.close()
        _fail_over(primary, replica, proxy)
        conn = replica.connect()
        workload.conn = conn
        for _ in range(200):
            workload.step()
        end = replica.binlog_status()
        end_file, end_pos = end.file, end.pos
        _wait_past(
            worker,
            sink,
            52,
            Coordinate(str(end_file), int(end_pos)),
            what="the worker to follow the new primary to its binlog's end",
        )
        status = _status(worker)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/metrics", timeout=5).read()
    finally:
        code = worker.stop()
        proxy.close()
    rows = read_changelog(uri)
    tables = source_tables(conn, ["fo"])
    conn.close()
    replica.stop()
    primary.stop()
    assert code == 0, worker.log_text()
    log = worker.log_text()
    assert "failover: the source was server_id 51" in log and "is now 52" in log
    assert ("GTID set" if mode == "gtid" else "heartbeat search") in log
    assert status["server_id"] == 52 and status["failovers"] == 1, status
    assert f'mysqlcapture_failovers_total{{capture="{name}"}} 1.0' in metrics.decode()
    identities = Counter((r["gtid"], r["row_index"]) for r in rows if r["type"] in ("insert", "update", "delete"))
    reemitted = sum(n - 1 for n in identities.values())
    print(f"{mode} failover: {len(rows)} events, {reemitted} re-emitted")
    if mode == "gtid":
        assert reemitted == 0, "a GTID failover must not re-emit events"
        assert_replay_equals_source(replay(rows), tables)
    else:
        assert_replay_equals_source(replay(rows, strict=False), tables)


def _wait_past(worker: WorkerProcess, sink: DeltaSink, server_id: int, end: Coordinate, *, what: str) -> None:
    """Until the worker's checkpoint is on `server_id` at or past `end` (it fails the test if the worker exits)."""
    wait_until(
        lambda: (
            worker.running()
            and (ckpt := sink.load_checkpoint()) is not None
            and ckpt.server_id == server_id
            and ckpt.coordinate >= end
        ),
        timeout=120,
        what=what,
    )


def _headroom(worker: WorkerProcess) -> tuple[float, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/metrics", timeout=5).read().decode()
    values = {}
    for line in text.splitlines():
        for kind in ("bytes", "files"):
            if line.startswith(f"mysqlcapture_binlog_purge_headroom_{kind}{{"):
                values[kind] = float(line.rsplit(" ", 1)[1])
    return values.get("bytes", -1.0), values.get("files", -1.0)


def test_purge_headroom_moves_and_a_purged_checkpoint_fails(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(53, max_binlog_size="4096")
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "purge",
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 200},
        extra_spec={"failover": {"onPurged": "fail"}},
    )
    path = write_manifest(tmp_path / "purge.yaml", doc)
    sink = DeltaSink(uri, app_id="mysqlcapture-purge")
    srv.execute("CREATE DATABASE p", "CREATE TABLE p.t (id INT PRIMARY KEY, v VARCHAR(200))")
    worker = WorkerProcess(path)
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
        wait_until(lambda: _headroom(worker)[0] >= 0, timeout=60, what="the first headroom figures")
        before = _headroom(worker)
        for i in range(200):  # ~ a dozen 4 KiB binlog files
            srv.execute(f"INSERT INTO p.t VALUES ({i}, REPEAT('x', 150))")
        wait_until(lambda: _headroom(worker)[1] >= before[1] + 5, timeout=60, what="the headroom to grow by files")
        grown = _headroom(worker)
    finally:
        assert worker.stop() == 0, worker.log_text()
    ckpt = sink.load_checkpoint()
    assert ckpt is not None
    assert grown[0] > before[0]
    # Written while no worker runs, then purged past the checkpoint: those events exist nowhere else.
    for i in range(200, 260):
        srv.execute(f"INSERT INTO p.t VALUES ({i}, REPEAT('y', 150))")
    srv.execute("FLUSH BINARY LOGS")
    last = srv.binlog_status().file
    srv.execute(f"PURGE BINARY LOGS TO '{last}'")
    worker = WorkerProcess(path, log_path=tmp_path / "after-purge.log")
    try:
        wait_until(lambda: not worker.alive(), timeout=60, what="the worker to refuse the purged checkpoint")
    finally:
        code = worker.stop()
        srv.stop()
    assert code == 4, worker.log_text()
    assert f"BinlogPurged: the checkpoint's binlog {ckpt.coordinate.file}" in worker.log_text()
    assert "spec.failover.onPurged: resnapshot" in worker.log_text()
    assert sink.load_checkpoint() == ckpt, "a refused start must not move the checkpoint"


def _dump_threads(srv: PrivateServer) -> list[int]:
    return [
        int(r[0]) for r in srv.query("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
    ]


def test_dropped_connections_resume_without_loss_or_duplicates(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(54)
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "drops",
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 100, "maxEvents": 20},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "drops.yaml", doc))
    sink = DeltaSink(uri, app_id="mysqlcapture-drops")
    conn = srv.connect()
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
        workload = Workload(conn, "drops", seed=71, ddl=True)
        workload.setup(n_tables=3)
        for drop in range(1, 7):
            for _ in range(60):
                workload.step()
            # Mid-stream, as a network blip or the server's net_write_timeout would: kill the dump thread.
            wait_until(lambda: _dump_threads(srv), timeout=30, what="the worker's binlog dump thread")
            for thread_id in _dump_threads(srv):
                srv.execute(f"KILL {thread_id}")
            wait_until(
                lambda drop=drop: worker.log_text().count("replication connection lost") >= drop,
                timeout=30,
                what=f"the worker to notice drop {drop}",
            )
        status = srv.binlog_status()
        end = (status.file, status.pos)
        wait_until(
            lambda: (
                worker.running()
                and (ckpt := sink.load_checkpoint()) is not None
                and ckpt.coordinate >= Coordinate(str(end[0]), int(end[1]))
            ),
            timeout=120,
            what="the worker to reach the binlog's end",
        )
    finally:
        code = worker.stop()
    rows = read_changelog(uri)
    tables = source_tables(conn, ["drops"])
    conn.close()
    srv.stop()
    assert code == 0, worker.log_text()
    assert worker.log_text().count("replication connection lost") >= 6
    identities = [(r["server_id"], r["binlog_file"], r["binlog_pos"], r["row_index"]) for r in rows]
    assert len(identities) == len(set(identities)), "an event was written twice"
    assert_replay_equals_source(replay(rows), tables)


@pytest.mark.parametrize("mode", ["gtid", "heartbeat"])
def test_failover_while_a_parallel_snapshot_reads(
    tmp_path: Path, mode: str, start_source: Callable[..., PrivateServer]
) -> None:
    """The primary dies while a parallel snapshot is half way through its tables (writes going on); the replica is
    promoted and the endpoint moves. The snapshot goes on from the new primary, from the ranges it had committed:
    nothing read twice, no stale bootstrap-insert, and the change log replays to the new primary's tables."""
    from tests.integration.test_snapshot import _Writes, assert_no_stale_bootstrap

    primary = start_source(55)
    replica = start_source(56, log_slave_updates="ON")
    replica.make_replica_of(primary)
    conn = primary.connect()
    workload = Workload(conn, "fosnap", seed=83, ddl=False)
    workload.setup(n_tables=3)
    for table in workload.tables.values():
        workload.insert(table, 1500)
    replica.wait_replica_caught_up(primary)
    primary.flush_and_purge()  # a capture from `earliest` must snapshot
    proxy = SwitchableProxy(primary.port)
    uri = str(tmp_path / "changelog")
    name = f"fosnap-{mode}"
    doc = manifest(
        name,
        port=proxy.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "earliest"},
        tables={"include": ["fosnap.*"]},
        flush={"maxIntervalMs": 100, "maxEvents": 100},
        extra_spec={
            "failover": {"mode": mode},
            "heartbeat": {"intervalSeconds": 1},
            "snapshot": {"chunkRows": 40, "parallelism": 4},
        },
    )
    worker = WorkerProcess(write_manifest(tmp_path / f"{name}.yaml", doc))
    sink = DeltaSink(uri, app_id=f"mysqlcapture-{name}")
    writes = _Writes(workload, ddl_every=10**9)
    try:

        def half_way() -> SnapshotJob | None:
            worker.running()
            ckpt = sink.load_checkpoint()
            job = SnapshotJob.from_json(ckpt.snapshot) if ckpt is not None and ckpt.snapshot else None
            # (a heartbeat search needs a heartbeat in the checkpoint: one a second is written)
            beat = ckpt is not None and ckpt.last_heartbeat is not None
            return job if job is not None and beat and (job.index, job.rows) >= (1, 200) else None

        at = wait_until(half_way, timeout=90, what="the snapshot half way through its tables", interval=0.02)
        writes.join()
        conn.close()
        _fail_over(primary, replica, proxy)
        conn = replica.connect()
        workload.conn = conn
        writes = _Writes(workload, ddl_every=10**9)  # the writes go on, on the new primary
        wait_until(
            lambda: worker.running() and (c := sink.load_checkpoint()) is not None and c.snapshot is None,
            timeout=180,
            what="the snapshot to complete on the new primary",
        )
        writes.join()
        end = replica.binlog_status()
        _wait_past(
            worker, sink, 56, Coordinate(end.file, end.pos), what="the worker to reach the new primary's binlog end"
        )
    finally:
        writes.join()
        code = worker.stop()
        proxy.close()
    rows = read_changelog(uri)
    tables = source_tables(conn, ["fosnap"])
    conn.close()
    assert code == 0, worker.log_text()
    log = worker.log_text()
    assert "failover: the source was server_id 55" in log and "is now 56" in log, log[-3000:]
    assert at.index < len(at.tables)
    kinds = Counter(r["type"] for r in rows)
    assert kinds["bootstrap-start"] == kinds["bootstrap-complete"] == 3, kinds
    inserted = Counter((r["table"], r["primary_key"]) for r in rows if r["type"] == "bootstrap-insert")
    assert max(inserted.values()) == 1, "a row was snapshotted twice"
    assert_no_stale_bootstrap(rows)
    print(f"{mode}: failover at table {at.index} row {at.rows}; {kinds}")
    if mode == "gtid":
        identities = Counter((r["gtid"], r["row_index"]) for r in rows if r["type"] in ("insert", "update", "delete"))
        assert max(identities.values()) == 1, "a GTID failover must not re-emit events"
        assert_replay_equals_source(replay(rows), tables)
    else:
        assert_replay_equals_source(replay(rows, strict=False), tables)


HEARTBEAT = 1_000_000_000_001


def ddl_after_heartbeat_failover(
    tmp_path: Path, start_source: Callable[..., PrivateServer], *, touch_all: bool = True
) -> tuple[str, str, PrivateServer]:
    """A capture by heartbeat search across a failover, with DDL (a column renamed, added and dropped, a table
    created) and rows written between the checkpoint's last heartbeat and the failover, then more on the new
    primary: the change log's URI, the worker's log and the new primary (the worker stopped cleanly).

    `touch_all`: the new primary updates every row last (their last images in the newest columns, for a replay
    that does not reshape rows on ALTER TABLE); else rows 6 to 8 keep as their last change an update made
    after the heartbeat and before the rename (an image of the oldest columns)."""
    from mysqlcapture_worker.failover.heartbeat import ensure_table

    name = "fo-ddl"
    # The worker writes no heartbeat during the test: the test writes the one the failover searches for.
    primary, replica, proxy, uri, worker, sink = _promotable_capture(
        tmp_path, start_source, (57, 58), name, mode="heartbeat", heartbeat_seconds=3600
    )
    conn = primary.connect()
    beat = HEARTBEAT
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="first commit")
        primary.execute(
            "CREATE DATABASE fod",
            "CREATE TABLE fod.t (id INT PRIMARY KEY, a INT, b VARCHAR(20))",
            "INSERT INTO fod.t VALUES " + ",".join(f"({i}, {i * 10}, 'b{i}')" for i in range(1, 21)),
        )
        ensure_table(conn, "mysqlcapture")
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO mysqlcapture.heartbeats (server_id, client_id, heartbeat) VALUES (57, %s, %s)",
                (name, beat),
            )
        conn.commit()
        primary.execute(
            "UPDATE fod.t SET a = a + 5 WHERE id BETWEEN 6 AND 8",
            "ALTER TABLE fod.t RENAME COLUMN a TO a2",
            "UPDATE fod.t SET a2 = a2 + 1 WHERE id <= 5",
            "ALTER TABLE fod.t ADD COLUMN c INT, DROP COLUMN b",
            "UPDATE fod.t SET c = id * 3 WHERE id > 10",
            "CREATE TABLE fod.u (id INT PRIMARY KEY, v VARCHAR(10))",
            "INSERT INTO fod.u VALUES (1, 'one'), (2, 'two')",
            "DELETE FROM fod.t WHERE id = 20",
        )
        written = primary.binlog_status()
        wait_until(
            lambda: (
                worker.running()
                and (ckpt := sink.load_checkpoint()) is not None
                and ckpt.last_heartbeat == beat
                and ckpt.coordinate >= Coordinate(written.file, written.pos)
            ),
            timeout=60,
            what="the worker to commit past the DDL after the heartbeat",
        )
        conn.close()
        _fail_over(primary, replica, proxy)
        replica.execute(
            "INSERT INTO fod.t (id, a2, c) VALUES (21, 210, 63)",
            "UPDATE fod.t SET a2 = 0, c = 0 WHERE id = 1",
            "ALTER TABLE fod.u ADD COLUMN w INT",
            "INSERT INTO fod.u VALUES (3, 'three', 3)",
            # Rows last in the current columns (see touch_all).
            "UPDATE fod.t SET c = COALESCE(c, 0) + 1" + ("" if touch_all else " WHERE id NOT BETWEEN 6 AND 8"),
            "UPDATE fod.u SET w = COALESCE(w, 0) + 1",
        )
        end = replica.binlog_status()
        _wait_past(
            worker,
            sink,
            58,
            Coordinate(end.file, end.pos),
            what="the worker to follow the new primary to its binlog's end",
        )
    finally:
        code = worker.stop()
        proxy.close()
    assert code == 0, worker.log_text()
    return uri, worker.log_text(), replica


def test_a_heartbeat_failover_applies_the_ddl_after_the_heartbeat_again(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    """DDL between the checkpoint's last heartbeat and the failover: the heartbeat search reads it again on the new
    server and applies it to the schema in force at the heartbeat (not to the checkpoint's, which already holds it:
    a RENAME COLUMN there stopped the capture, seen once in CI), so the capture goes on and the rows replay exactly."""
    uri, log, replica = ddl_after_heartbeat_failover(tmp_path, start_source)
    beat = HEARTBEAT
    rows = read_changelog(uri)
    conn = replica.connect()
    tables = source_tables(conn, ["fod"])
    conn.close()
    assert "continuing by heartbeat search" in log and f"heartbeat {beat} found on the new server" in log, log[-3000:]
    assert "in force at heartbeat" in log, log[-3000:]
    assert "schema history disagrees" not in log, log[-3000:]
    # The events from the heartbeat to the last DDL statement after it are read again, not written again: the
    # DDL once, the updates between once; the events after that statement twice (at least once, as documented).
    kinds = Counter((r["type"], r["table"], r["primary_key"]) for r in rows)
    assert kinds[("table-alter", "t", None)] == 2 and kinds[("table-create", "u", None)] == 1, kinds
    assert [kinds[("update", "t", f"[{i}]")] for i in range(1, 6)] == [3, 2, 2, 2, 2], kinds
    assert kinds[("update", "t", "[15]")] == 2, kinds  # SET c = id * 3, then SET c = c + 1
    assert (kinds[("insert", "u", "[1]")], kinds[("insert", "u", "[2]")], kinds[("delete", "t", "[20]")]) == (2, 2, 2)
    assert "are in the change log already: read again, not written again" in log, log[-3000:]
    assert_replay_equals_source(replay(rows, strict=False), tables)
