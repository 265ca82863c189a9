"""Consistent-snapshot read rate of bench.events (bench.py's BENCH_TABLE, 11 mixed columns).

Prints figures, not pass/fail: beside the worker's end-to-end snapshot (read, convert, render,
Delta commit; a child process) it measures, in the same run, a plain PyMySQL read of the same rows
(raw bytes, no conversion) and the snapshot's read+convert+render alone, and gives the ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from mysqlcapture_worker.embedded.mariadb import start_server  # noqa: E402

from bench import BENCH_TABLE, FILL, bench_manifest  # noqa: E402


def measure_snapshot(port: int, *, workdir: Path | None = None, chunk_rows: int = 20000) -> dict[str, float]:
    """The worker snapshotting bench.events end to end (child process, `--exit-at-end`).

    The server's binlog must no longer start at its origin (purge it first), or a capture from
    `earliest` streams the binlog instead of snapshotting. Returns rows, seconds, rows_per_s, peak_rss_mib.
    """
    from deltalake import DeltaTable

    workdir = workdir or Path(tempfile.mkdtemp(prefix="mysqlcapture-bench-snapshot-"))
    uri = str(workdir / f"snapshot-{chunk_rows}")
    path = workdir / f"snapshot-{chunk_rows}.yaml"
    path.write_text(
        yaml.safe_dump(
            bench_manifest(
                port,
                f"snap{chunk_rows}",
                uri,
                server_id=4344,
                start={"from": "earliest"},
                tables={"include": ["bench.events"]},
                snapshot={"mode": "initial", "chunkRows": chunk_rows},
                flush={"maxEvents": max(chunk_rows, 50000), "maxBytes": 256 * 1024 * 1024},
            )
        )
    )
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mysqlcapture_worker.cli", "run", str(path), "--exit-at-end", "--plain-logs"],
        env=dict(os.environ, MYSQL_PASSWORD="root"),
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "worker.log", "wb"),  # noqa: SIM115
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"worker failed with status {status}: {(workdir / 'worker.log').read_text()[-3000:]}")
    table = DeltaTable(uri).to_pyarrow_table(columns=["type"])
    rows = sum(1 for t in table.column("type").to_pylist() if t == "bootstrap-insert")
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "peak_rss_mib": usage.ru_maxrss / 1024}


def raw_read(port: int) -> dict[str, float]:
    """Baseline: PyMySQL reading every row as raw bytes (no converters), unbuffered."""
    conn = pymysql.connect(
        host="127.0.0.1", port=port, user="root", password="root", conv=dict(pymysql.converters.encoders)
    )
    started = time.perf_counter()
    cur = pymysql.cursors.SSCursor(conn)
    cur.execute("SELECT * FROM bench.events")
    rows = 0
    while batch := cur.fetchmany(20000):
        rows += len(batch)
    seconds = time.perf_counter() - started
    conn.close()
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds}


def convert_only(port: int, chunk_rows: int = 20000) -> dict[str, float]:
    """The snapshot's view, keyset chunks and bootstrap-insert events, without the sink."""
    from mysqlcapture_worker.capture import CaptureEngine
    from mysqlcapture_worker.filters import TableFilter
    from mysqlcapture_worker.models import count_rows
    from mysqlcapture_worker.monitoring import WorkerMetrics
    from mysqlcapture_worker.positions import Position
    from mysqlcapture_worker.schema.capture import capture_schema
    from mysqlcapture_worker.schema_state import SchemaState
    from mysqlcapture_worker.snapshot.job import SnapshotJob
    from mysqlcapture_worker.snapshot.runner import Snapshotter
    from prometheus_client import CollectorRegistry

    def connect(**kw: Any) -> pymysql.connections.Connection:
        return pymysql.connect(**{"host": "127.0.0.1", "port": port, "user": "root", "password": "root", **kw})

    conn = connect()
    schema = capture_schema(conn, lambda db, t: db == "bench" and t == "events")
    conn.close()
    engine = CaptureEngine(
        position=Position(server_id=1, binlog_file="x", binlog_pos=4),
        schema=SchemaState(None, schema, 0),
        table_filter=TableFilter(["bench.events"]),
    )
    metrics = WorkerMetrics(CollectorRegistry(), "bench")
    snap = Snapshotter(connect=connect, mariadb=True, metrics=metrics, chunk_rows=chunk_rows)
    rows = 0

    def put(chunk: Any) -> None:
        nonlocal rows
        rows += count_rows(e for e in chunk.events if e.type == "bootstrap-insert")

    started = time.perf_counter()
    snap.run(engine, SnapshotJob(tables=(("bench", "events"),), reason="initial"), put, threading.Event())
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in bench.events")
    parser.add_argument("--chunk-rows", type=int, default=20000, help="spec.snapshot.chunkRows")
    args = parser.parse_args()
    server = start_server(78, max_binlog_size="1G")
    try:
        server.execute("CREATE DATABASE bench", BENCH_TABLE)
        step = 20000
        for lo in range(1, args.rows + 1, step):
            server.execute(FILL.format(table="events", lo=lo, hi=min(lo + step - 1, args.rows)))
        server.execute("FLUSH BINARY LOGS")
        current = str(server.query("SHOW MASTER STATUS")[0][0])
        for _ in range(100):  # MariaDB keeps a file until its binlog checkpoint passes it
            server.execute(f"PURGE BINARY LOGS TO '{current}'")
            if str(server.query("SHOW BINARY LOGS")[0][0]) == current:
                break
            time.sleep(0.2)
        print(f"machine: {os.cpu_count()} cores; bench.events, 11 columns, {args.rows} rows")
        raw = raw_read(server.port)
        print(
            f"baseline PyMySQL raw read: {raw['rows']} rows in {raw['seconds']:.1f}s = {raw['rows_per_s']:,.0f} rows/s"
        )
        conv = convert_only(server.port, args.chunk_rows)
        print(
            f"snapshot read+convert+render (no sink): {conv['seconds']:.1f}s = {conv['rows_per_s']:,.0f} rows/s "
            f"({conv['rows_per_s'] / raw['rows_per_s']:.2f}x raw read)"
        )
        snap = measure_snapshot(server.port, chunk_rows=args.chunk_rows)
        assert snap["rows"] == args.rows, snap
        print(
            f"worker snapshot end to end (incl. Delta commits, process start): {snap['seconds']:.1f}s = "
            f"{snap['rows_per_s']:,.0f} rows/s ({snap['rows_per_s'] / raw['rows_per_s']:.2f}x raw read), "
            f"peak RSS {snap['peak_rss_mib']:.0f} MiB"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
