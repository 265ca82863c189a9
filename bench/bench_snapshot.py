"""Consistent-snapshot read rate of bench.events (12 mixed columns), next to a plain PyMySQL read of it.

`make bench` (bench/bench.py) calls `run_raw_read` and `measure_snapshot` on its own server. Run alone, this
script fills a server of its own and adds the snapshot's read+convert+render without the sink (in-process).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pymysql
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from common import (  # noqa: E402
    Run,
    bench_manifest,
    child_env,
    fill,
    run_child,
    warm_bytecode,
    worker_args,
)
from mysqlcapture_dev.embedded.mariadb import start_server  # noqa: E402


def purge_history(server: Any) -> None:
    """Purge every binlog but the current one: a capture from `earliest` then snapshots instead of streaming."""
    server.execute("FLUSH BINARY LOGS")
    current = server.binlog_status().file
    for _ in range(100):  # MariaDB keeps a file until its binlog checkpoint passes it
        server.execute(f"PURGE BINARY LOGS TO '{current}'")
        if str(server.query("SHOW BINARY LOGS")[0][0]) == current:
            return
        time.sleep(0.2)
    raise SystemExit("the server kept its old binlogs: PURGE BINARY LOGS did not take")


def raw_read(port: int) -> int:
    """Baseline: PyMySQL reading every row of bench.events as raw bytes (no converters), unbuffered."""
    conn = pymysql.connect(
        host="127.0.0.1", port=port, user="root", password="root", conv=dict(pymysql.converters.encoders)
    )
    cur = pymysql.cursors.SSCursor(conn)
    cur.execute("SELECT * FROM bench.events")
    rows = 0
    while batch := cur.fetchmany(20000):
        rows += len(batch)
    conn.close()
    return rows


def run_raw_read(port: int, rows: int) -> Run:
    """`raw_read` in its own process, so that its time and peak RSS are its own."""
    return run_child([sys.executable, __file__, "--raw-read", f"{port}:{rows}"], rows, what="PyMySQL raw read")


def measure_snapshot(
    port: int,
    rows: int,
    workdir: Path,
    *,
    chunk_rows: int = 20000,
    table: str = "events",
    parallelism: int = 4,
    tag: str = "",
    spec: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[Run, float]:
    """The worker snapshotting bench.`table` (a child process, `--exit-at-end`): the whole process, and the
    snapshot itself in seconds, from the capture's first commit (made right after the view opened) to its last.

    The server's binlog must no longer start at its origin (`purge_history`), or a capture from `earliest`
    streams the binlog instead of snapshotting it. `tag` names the run apart (its change log, manifest and
    log), `spec` adds to the manifest's spec, `env` to the worker's environment.
    """
    from deltalake import DeltaTable
    from mysqlcapture_api.changelog import read_delta

    uri = str(workdir / f"snapshot-{table}-{chunk_rows}{tag}")
    path = workdir / f"snapshot-{table}-{chunk_rows}{tag}.yaml"
    manifest = bench_manifest(
        port,
        f"snap-{table.replace('_', '-')}-{chunk_rows}{tag}",
        uri,
        server_id=4344,
        start={"from": "earliest"},
        tables={"include": [f"bench.{table}"]},
        snapshot={
            "mode": "initial",
            "chunkRows": chunk_rows,
            "parallelism": parallelism,
            "maxBufferedRows": 2 * chunk_rows * parallelism,
        },
        flush={"maxEvents": max(chunk_rows, 50000), "maxBytes": 256 * 1024 * 1024},
        **(spec or {}),
    )
    path.write_text(yaml.safe_dump(manifest))
    run = run_child(
        worker_args(path),
        rows,
        env=child_env(MYSQL_PASSWORD="root", **(env or {})),
        what="worker snapshot",
        log=workdir / f"snapshot-{table}-{chunk_rows}{tag}.log",
    )
    changelog = DeltaTable(uri)
    kinds = read_delta(changelog, ["type"]).column("type").to_pylist()
    inserted = sum(1 for t in kinds if t == "bootstrap-insert")
    if inserted != rows:
        raise SystemExit(f"the snapshot committed {inserted} bootstrap-inserts, bench.{table} holds {rows}")
    stamps = [int(entry["timestamp"]) for entry in changelog.history()]
    return run, (max(stamps) - min(stamps)) / 1000


def convert_only(port: int, chunk_rows: int = 20000) -> dict[str, float]:
    """The snapshot's read of bench.events on one connection, chunk after chunk in key order, rendered to
    bootstrap-insert `data` columns as the worker renders them, without the sink (in this process)."""
    from mysqlcapture_api.coordinates import Coordinate
    from mysqlcapture_worker.engine import CaptureEngine
    from mysqlcapture_worker.filters import TableFilter
    from mysqlcapture_worker.positions import Position
    from mysqlcapture_worker.schema.introspect import capture_schema
    from mysqlcapture_worker.schema.state import SchemaState
    from mysqlcapture_worker.snapshot.reader import Frontier, SnapshotView, key_plan, session
    from mysqlcapture_worker.snapshot.runner import EventBuilder
    from mysqlcapture_worker.source import queries

    def connect(**kw: Any) -> pymysql.connections.Connection:
        return pymysql.connect(**{"host": "127.0.0.1", "port": port, "user": "root", "password": "root", **kw})

    conn = connect()
    schema = capture_schema(conn, lambda db, t: db == "bench" and t == "events")
    flavor = queries.dialect_of(conn).version.flavor
    conn.close()
    engine = CaptureEngine(
        position=Position(server_id=1, coordinate=Coordinate("x", 4)),
        schema=SchemaState(None, schema, 0),
        table_filter=TableFilter(["bench.events"]),
    )
    table = SchemaState(None, schema, 0).table("bench", "events")
    assert table is not None
    build = EventBuilder(engine, table, ts=0, json_text=flavor == "mariadb")
    view = SnapshotView(session(connect), Frontier(Coordinate("x", 4), ""), time.time())
    plan = key_plan(table, build.converter, view.unique_keys("bench", "events"))
    rows, last = 0, None
    started, cpu = time.perf_counter(), time.process_time()
    while True:
        n, _, last = build.fetch_range(view, plan, last, None, chunk_rows)
        rows += n
        if n < chunk_rows:
            break
    seconds = time.perf_counter() - started
    view.conn.close()
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "cpu": time.process_time() - cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in bench.events")
    parser.add_argument("--chunk-rows", type=int, default=20000, help="spec.snapshot.chunkRows")
    parser.add_argument("--raw-read", help=argparse.SUPPRESS)  # port:rows, the child of run_raw_read
    args = parser.parse_args()
    if args.raw_read:
        port, expected = args.raw_read.split(":")
        if (got := raw_read(int(port))) != int(expected):
            raise SystemExit(f"PyMySQL read {got} rows, bench.events holds {expected}")
        return
    warm_bytecode()
    server = start_server(78, max_binlog_size="1G")
    try:
        server.execute("CREATE DATABASE bench")
        fill(server, "events", args.rows)
        purge_history(server)
        print(f"machine: {os.cpu_count()} cores; bench.events, 11 columns, {args.rows:,} rows")
        raw = run_raw_read(server.port, args.rows)
        print(f"baseline PyMySQL raw read: {raw.describe()}")
        conv = convert_only(server.port, args.chunk_rows)
        print(
            f"snapshot read+convert+render (no sink): {conv['seconds']:.1f}s = {conv['rows_per_s']:,.0f} rows/s "
            f"({conv['rows_per_s'] / raw.rate:.2f}x raw read)"
        )
        run, phase = measure_snapshot(server.port, args.rows, Path(tempfile.mkdtemp(prefix="mysqlcapture-bench-")))
        print(f"worker snapshot, first to last commit: {phase:.1f}s = {args.rows / phase:,.0f} rows/s")
        print(f"worker snapshot, whole process: {run.describe()} ({run.rate / raw.rate:.2f}x raw read)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
