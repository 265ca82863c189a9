"""`make bench`: every throughput figure of the worker from one run on one binlog, each beside its baseline.

On a private server of each flavor (MariaDB, then MySQL), one table (bench.events, 12 mixed-type columns, one of
them JSON) filled by --rows row events:

1. streaming: mysql-replication's own decode of the binlog (the baseline), then for bench.events, for its plain
   twin (bench.events_plain, the same rows without the JSON column) and for bench.oltp (--oltp-rows of bench.events'
   rows, each inserted in a transaction of its own, as an OLTP application writes) the worker's reading side alone
   (its stream and capture engine, no sink: what each sink is measured against), the worker end to end with each
   file sink (Delta commits; Maxwell's JSON lines to a file) and real Maxwell 1.44.1 writing the same lines from the
   same binlog (when MAXWELL_HOME names a build: bench_maxwell.py), then one --big-txn-rows transaction (bounded
   memory);
2. snapshot: a plain PyMySQL read of the table (the baseline), then the worker's consistent snapshot of it; and
   the lock-free snapshot at parallelism 1, 2 and 4 beside the server's own C client over as many key ranges,
   with a writer's commit latency while it runs (bench_parallel_snapshot.py);
3. what real tables' columns cost: the worker streaming and snapshotting bench.events and bench.places (GEOMETRY and
   a gbk column) next to two twins each, --rows rows each: without those columns, and with the same bytes as plain
   UTF-8 text (the document in a TEXT column, the point as WKT, the gbk text in utf8mb4);
4. compaction: the irreducible work on the change log the worker wrote in 1 from the first flavor (read the row
   events, parse each into its table's typed columns, write each table once: the baseline),
   then the compaction job over it (bench/bench_compaction.py, in a child process);
5. row history: a DBA's questions (one key, one hour of a busy table) to a --history-versions history, a cold
   `mysqlcapture-compact history` process beside the same questions through Spark (bench/bench_history.py);
6. the Kafka sink on a private broker beside a raw transactional producer writing the same messages
   (bench/bench_kafka.py);
7. column rules (spec.columns): bench.events with three hashed columns and one excluded beside the same table
   without rules, streaming and snapshot, on each flavor (bench/bench_columns.py).

Every measured part runs in its own process, so each peak RSS is its own. Prints figures, not pass/fail:
machines here are shared and noisy, so each rate is shown as a ratio to a baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_columns  # noqa: E402
import bench_kafka  # noqa: E402
import bench_maxwell  # noqa: E402
import bench_parallel_snapshot  # noqa: E402
from bench_snapshot import measure_snapshot, purge_history, run_raw_read  # noqa: E402
from common import (  # noqa: E402
    Run,
    child_env,
    fill,
    fill_one_row_transactions,
    fill_statements,
    run_child,
    run_worker,
    warm_bytecode,
)
from mysqlcapture_dev.embedded import start_server  # noqa: E402


def raw_decode(port: int, log_file: str) -> int:
    """mysql-replication alone: read the binlog and decode every row (the library's `.rows`); returns rows."""
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": port, "user": "root", "passwd": "root"},
        server_id=4242,
        blocking=False,
        resume_stream=True,
        log_file=log_file,
        log_pos=4,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    rows = 0
    for ev in stream:
        rows += len(ev.rows)
    stream.close()
    return rows


def reader_alone(port: int, log_file: str, pos: int = 4) -> int:
    """The worker's reading side alone: its binlog stream and capture engine (decode, render every row to
    Maxwell's values, order keys, positions), no sink; returns the row events rendered. The worker's process
    without pandas, as `mysqlcapture run` starts it."""
    from mysqlcapture_worker.commands import _without_pandas

    _without_pandas()
    import pymysql
    from mysqlcapture_api.coordinates import Coordinate
    from mysqlcapture_worker.changes import count_rows
    from mysqlcapture_worker.engine import CaptureEngine
    from mysqlcapture_worker.filters import TableFilter
    from mysqlcapture_worker.positions import Position
    from mysqlcapture_worker.replication.stream import BinlogStream, ConnectionSettings
    from mysqlcapture_worker.schema.introspect import capture_schema
    from mysqlcapture_worker.schema.state import SchemaState

    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", password="root")
    schema = capture_schema(conn, lambda db, t: db == "bench")
    conn.close()
    start = Coordinate(log_file, pos)
    engine = CaptureEngine(
        position=Position(server_id=1, coordinate=start),
        schema=SchemaState(None, schema, 0),
        table_filter=TableFilter(["bench.*"]),
    )
    stream = BinlogStream(
        ConnectionSettings("127.0.0.1", port, "root", "root", ssl_disabled=True),
        replica_server_id=4241,
        start=start,
        heartbeat_seconds=0,
        blocking=False,
    )
    rows = 0
    for ev in stream:
        for chunk in engine.feed(ev):
            rows += count_rows(e for e in chunk.events if e.type in ("insert", "update", "delete"))
    stream.close()
    return rows


def run_reader_alone(port: int, log_file: str, rows: int, pos: int = 4) -> Run:
    """`reader_alone` in its own process, timed like the worker: from its start to the last row."""
    args = [sys.executable, __file__, "--reader-alone", f"{port}:{log_file}:{pos}:{rows}"]
    return run_child(args, rows, env=child_env(), what="the worker's reader alone")


def run_raw(port: int, log_file: str, rows: int) -> Run:
    """`raw_decode` in its own process, so that its time and peak RSS are its own."""
    args = [sys.executable, __file__, "--raw-decode", f"{port}:{log_file}:{rows}"]
    return run_child(args, rows, what="mysql-replication raw decode")


def run_compaction(changelog: Path, workdir: Path, driver_memory: str) -> dict[str, float | str]:
    out = workdir / "compaction.json"
    args = [sys.executable, str(REPO / "bench" / "bench_compaction.py"), "--changelog", str(changelog)]
    run_child([*args, "--json", str(out), "--driver-memory", driver_memory], 0, what="compaction")
    figures: dict[str, float | str] = json.loads(out.read_text())
    return figures


def run_history_questions(versions: int) -> list[str]:
    """bench_history.py's lines (a child process: its Spark sessions and cold CLI processes are its own)."""
    args = [sys.executable, str(REPO / "bench" / "bench_history.py"), "--events", str(versions)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.startswith(("row history", "  "))]


def _line(label: str, rate: str, ratio: str, rss: str) -> str:
    return f"  {label:<52} {rate:>16} {ratio:>20}  {rss}"


@dataclass
class Sinks:
    """One table's streaming runs on the same rows: the worker's reading side with no sink (what every sink is
    measured against), the worker with each file sink, and real Maxwell writing the same lines."""

    alone: Run
    delta: Run
    lines: Run  # Maxwell's JSON lines to a file
    maxwell: Run | None  # real Maxwell on the same binlog (MAXWELL_HOME), writing the same lines


@dataclass
class FlavorRuns:
    """Every streaming and snapshot figure of one source flavor."""

    version: str
    raw: Run
    sinks: dict[str, Sinks]  # bench.events, its plain twin, bench.oltp
    ref: Run | None
    big: Run
    read: Run
    snap: Run
    phase: float  # the snapshot's first to last commit, seconds
    twins: dict[str, tuple[Run, float, Run]]  # table -> (streaming run, snapshot rows/s first to last commit, its run)

    @property
    def fast(self) -> Run:
        return self.sinks["events"].delta


def stream_sinks(server: Any, workdir: Path, name: str, table: str, log_file: str, pos: int, rows: int) -> Sinks:
    """`table`'s rows, written from `log_file:pos` on, read by the reader alone, each sink and Maxwell."""
    alone = run_reader_alone(server.port, log_file, rows, pos)
    print(f"  {table}: worker's reader alone, no sink: {alone.describe()}")
    delta = run_worker(server.port, workdir, name, log_file, pos, rows=rows)
    print(f"  {table}: worker end to end, Delta:   {delta.describe()}")
    lines = run_worker(server.port, workdir, f"{name}-jsonl", log_file, pos, rows=rows, jsonl=True)
    print(f"  {table}: worker end to end, JSON lines: {lines.describe()}")
    maxwell = None
    if (build := bench_maxwell.home()) is not None:
        # The worker's runs first: Maxwell writes its own schema tables into the binlog, which a later worker from
        # the same start would read as well. One replica id for every run: each starts from a `maxwell` schema
        # dropped anew (`bench_maxwell.run`), and the one before it has ended.
        start = bench_maxwell.rows_start(server, log_file, table)
        out = workdir / server.flavor / f"maxwell-{table}.jsonl"
        maxwell = bench_maxwell.run(build, server, log_file, start, rows, out)
        print(f"  {table}: Maxwell 1.44.1, file producer: {maxwell.describe()}")
    return Sinks(alone, delta, lines, maxwell)


def bench_flavor(flavor: str, args: argparse.Namespace, workdir: Path) -> FlavorRuns:
    """Streaming (raw decode, worker, one large transaction) and snapshot (raw read, worker) on one server."""
    server = start_server(77, flavor=flavor, max_binlog_size="1G")  # type: ignore[arg-type]
    say = print
    name = f"bench-{flavor}"
    (workdir / flavor).mkdir(exist_ok=True)
    try:
        server.execute("CREATE DATABASE bench")
        log_file = server.binlog_status().file
        transactions = fill(server, "events", args.rows)
        say(f"{server.version}: bench.events, 12 columns, {args.rows:,} rows in {transactions} transactions")
        raw = run_raw(server.port, log_file, args.rows)
        say(f"  mysql-replication raw decode:   {raw.describe()}")
        sinks = {"events": stream_sinks(server, workdir, name, "events", log_file, 4, args.rows)}
        ref = None
        if args.reference:
            ref = run_worker(server.port, workdir, f"{name}-ref", log_file, rows=args.rows, decoder="reference")
            say(f"  worker end to end (reference):  {ref.describe()}")
        server.execute("CREATE TABLE bench.big LIKE bench.events")
        status = server.binlog_status()
        # one statement: one transaction
        server.execute(*fill_statements(flavor, "big", 1, args.big_txn_rows, like="events"))
        big = run_worker(server.port, workdir, f"{name}-big", status.file, status.pos, rows=args.big_txn_rows)
        say(f"  one {args.big_txn_rows:,}-row transaction:  {big.describe()}")
        streamed = {"events": sinks["events"].delta}
        for table in TWINS:
            status = server.binlog_status()
            fill(server, table, args.rows)
            stream_name = f"{name}-{table.replace('_', '-')}"
            if table == "events_plain":
                sinks[table] = stream_sinks(server, workdir, stream_name, table, status.file, status.pos, args.rows)
                streamed[table] = sinks[table].delta
                continue
            streamed[table] = run_worker(server.port, workdir, stream_name, status.file, status.pos, rows=args.rows)
            say(f"  worker streaming bench.{table}: {streamed[table].describe()}")
        # An OLTP source: bench.events' rows, each inserted in a transaction of its own.
        status = server.binlog_status()
        fill_one_row_transactions(server, "oltp", args.oltp_rows, like="events")
        sinks["oltp"] = stream_sinks(server, workdir, f"{name}-oltp", "oltp", status.file, status.pos, args.oltp_rows)
        purge_history(server)
        read = run_raw_read(server.port, args.rows)
        say(f"  PyMySQL raw read:               {read.describe()}")
        snap, phase = measure_snapshot(server.port, args.rows, workdir / flavor, chunk_rows=args.chunk_rows)
        say(f"  worker snapshot (process):      {snap.describe()}; first to last commit {phase:.2f}s")
        twins = {"events": (sinks["events"].delta, args.rows / phase, snap)}
        for table in TWINS:
            snap_run, seconds = measure_snapshot(
                server.port, args.rows, workdir / flavor, chunk_rows=args.chunk_rows, table=table
            )
            twins[table] = (streamed[table], args.rows / seconds, snap_run)
            say(f"  worker snapshot of bench.{table}: first to last commit {seconds:.2f}s")
        return FlavorRuns(server.version, raw, sinks, ref, big, read, snap, phase, twins)
    finally:
        server.stop()


# The tables measured next to their twins without JSON, spatial and non-UTF-8 columns (bench.events is the first).
# Each realistic table has two twins: without those columns (what they cost in all), and with the same bytes as
# plain UTF-8 text (what decoding JSON, WKB or gbk costs beyond carrying the bytes).
TWINS = ("events_plain", "events_text", "places", "places_plain", "places_text")
COSTS = (
    ("bench.events: + a JSON column", "events", "events_plain"),
    ("bench.events: JSON, not TEXT", "events", "events_text"),
    ("bench.places: + GEOMETRY, + a gbk VARCHAR", "places", "places_plain"),
    ("bench.places: GEOMETRY, gbk, not WKT, utf8mb4", "places", "places_text"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="row events in the benchmark binlog")
    parser.add_argument("--big-txn-rows", type=int, default=1_000_000, help="rows of the single large transaction")
    parser.add_argument("--chunk-rows", type=int, default=20000, help="the snapshot's spec.snapshot.chunkRows")
    parser.add_argument("--snapshot-rows", type=int, default=1_000_000, help="rows per table, parallel snapshot")
    parser.add_argument("--snapshot-repeat", type=int, default=3, help="runs of each parallel-snapshot measurement")
    parser.add_argument("--driver-memory", default="4g", help="the compaction's Spark driver memory")
    parser.add_argument("--no-compaction", action="store_true", help="skip the compaction figures (no JVM)")
    parser.add_argument("--history-versions", type=int, default=5_000_000, help="versions in the row-history bench")
    parser.add_argument("--kafka-rows", type=int, default=1_000_000, help="rows in the Kafka sink bench")
    parser.add_argument("--columns-rows", type=int, default=1_000_000, help="rows in the column-rules bench")
    parser.add_argument("--oltp-rows", type=int, default=100_000, help="one-row transactions in bench.oltp")
    parser.add_argument("--flavors", default="mariadb,mysql", help="source servers to measure, in order")
    parser.add_argument(
        "--reference", action="store_true", help="also run the worker on its reference (pure-Python) decoder"
    )
    parser.add_argument("--raw-decode", help=argparse.SUPPRESS)  # port:file:rows, the child of run_raw
    parser.add_argument("--reader-alone", help=argparse.SUPPRESS)  # port:file:pos:rows, the child of run_reader_alone
    args = parser.parse_args()
    if args.reader_alone:
        port, log_file, pos, expected = args.reader_alone.split(":")
        if (rows := reader_alone(int(port), log_file, int(pos))) != int(expected):
            raise SystemExit(f"the worker's reader rendered {rows} rows, the binlog holds {expected}")
        return
    if args.raw_decode:
        port, log_file, expected = args.raw_decode.split(":")
        if (rows := raw_decode(int(port), log_file)) != int(expected):
            raise SystemExit(f"mysql-replication decoded {rows} rows, the binlog holds {expected}")
        return
    workdir = Path(tempfile.mkdtemp(prefix="mysqlcapture-bench-"))
    print(f"work in {workdir}")
    warm_bytecode()
    load_start = os.getloadavg()[0]
    flavors = [f.strip() for f in args.flavors.split(",") if f.strip()]
    results = {flavor: bench_flavor(flavor, args, workdir) for flavor in flavors}
    # Compaction of the first flavor's streamed change log (the job reads the change log, not the server).
    comp = None if args.no_compaction else run_compaction(workdir / f"bench-{flavors[0]}", workdir, args.driver_memory)
    # The lock-free snapshot at parallelism 1, 2, 4 beside the server's own C client (bench_parallel_snapshot.py).
    parallel = [
        line
        for flavor in flavors
        for line in bench_parallel_snapshot.bench_flavor(
            flavor, args.snapshot_rows, workdir / f"psnap-{flavor}", args.chunk_rows, args.snapshot_repeat
        )
    ]
    questions = [] if args.no_compaction else run_history_questions(args.history_versions)
    kafka = [line for flavor in flavors for line in bench_kafka.measure(args.kafka_rows, flavor)]
    columns = [line for flavor in flavors for line in bench_columns.measure(flavor, args.columns_rows, repeat=2)]
    load_end = os.getloadavg()[0]
    say = print
    say("")
    say(f"== make bench: {os.cpu_count()} cores, load average {load_start:.1f} at start, {load_end:.1f} at end; "
        f"bench.events, 12 columns (one JSON), {args.rows:,} row events ==")  # fmt: skip
    say(_line("", "rate", "ratio to baseline", "peak RSS"))
    for r in results.values():
        say(f"{r.version}: streaming (one binlog, mysql-replication framing)")
        say(_line("mysql-replication raw decode (baseline)", f"{r.raw.rate:,.0f} rows/s", "1.00x",
                  f"{r.raw.peak_rss_mib:,.0f} MiB"))  # fmt: skip
        say(_line("worker end to end: read, decode, render, Delta", f"{r.fast.rate:,.0f} rows/s",
                  f"{r.fast.rate / r.raw.rate:.2f}x", f"{r.fast.peak_rss_mib:,.0f} MiB"))  # fmt: skip
        if r.ref is not None:
            say(_line("worker end to end, reference decoder", f"{r.ref.rate:,.0f} rows/s",
                      f"{r.ref.rate / r.raw.rate:.2f}x", f"{r.ref.peak_rss_mib:,.0f} MiB"))  # fmt: skip
        say(_line(f"one {args.big_txn_rows:,}-row transaction", f"{r.big.rate:,.0f} rows/s",
                  f"{r.big.rate / r.raw.rate:.2f}x", f"{r.big.peak_rss_mib:,.0f} MiB"))  # fmt: skip
        say(
            f"{r.version}: each sink beside the worker's reader alone (read, decode, render, no sink) and Maxwell; "
            f"bench.oltp: {args.oltp_rows:,} one-row transactions"
        )
        for table, runs in r.sinks.items():
            alone = runs.alone
            say(_line(f"bench.{table}: reader alone (baseline)", f"{alone.rate:,.0f} rows/s", "1.00x",
                      f"{alone.peak_rss_mib:,.0f} MiB"))  # fmt: skip
            for label, run in (("Delta change log", runs.delta), ("JSON lines, as Maxwell writes them", runs.lines)):
                say(_line(f"bench.{table}: {label}", f"{run.rate:,.0f} rows/s", f"{run.rate / alone.rate:.2f}x",
                          f"{run.peak_rss_mib:,.0f} MiB"))  # fmt: skip
            if runs.maxwell is None:
                say(f"  {bench_maxwell.missing()}")
                continue
            mx = runs.maxwell
            say(_line(f"bench.{table}: Maxwell 1.44.1, the same lines", f"{mx.rate:,.0f} rows/s",
                      f"JSON lines {runs.lines.rate / mx.rate:.2f}x it",
                      f"{mx.peak_rss_mib:,.0f} MiB; {mx.cpu_seconds / runs.lines.cpu_seconds:.1f}x the worker's "
                      "CPU"))  # fmt: skip
        say(f"{r.version}: snapshot (the same table, consistent view, keyset chunks)")
        say(_line("PyMySQL raw read of the table (baseline)", f"{r.read.rate:,.0f} rows/s", "1.00x",
                  f"{r.read.peak_rss_mib:,.0f} MiB"))  # fmt: skip
        say(_line("worker snapshot, first to last commit", f"{args.rows / r.phase:,.0f} rows/s",
                  f"{args.rows / r.phase / r.read.rate:.2f}x", ""))  # fmt: skip
        say(_line("worker snapshot, whole process (start to exit)", f"{r.snap.rate:,.0f} rows/s",
                  f"{r.snap.rate / r.read.rate:.2f}x", f"{r.snap.peak_rss_mib:,.0f} MiB"))  # fmt: skip
        say(f"{r.version}: what real tables' columns cost (ratios: rate, and worker CPU per row, to the twin table)")
        for label, table, plain in COSTS:
            (stream, snap_rate, snap), (stream_plain, snap_plain, snap_plain_run) = r.twins[table], r.twins[plain]
            cpu = stream_plain.cpu_seconds / stream.cpu_seconds
            say(_line(f"{label}: streaming", f"{stream.rate:,.0f} rows/s",
                      f"{stream.rate / stream_plain.rate:.2f}x of {stream_plain.rate:,.0f}",
                      f"{stream.peak_rss_mib:,.0f} MiB; worker CPU {cpu:.2f}x"))  # fmt: skip
            say(_line(f"{label}: snapshot", f"{snap_rate:,.0f} rows/s",
                      f"{snap_rate / snap_plain:.2f}x of {snap_plain:,.0f}",
                      f"worker CPU {snap_plain_run.cpu_seconds / snap.cpu_seconds:.2f}x"))  # fmt: skip
    if comp is not None:
        say(f"compaction (the {flavors[0]} streaming run's change log; Spark local[2])")
        say(_line("read, parse typed, write each table once (baseline)", f"{comp['base_rate']:,.0f} events/s",
                  "1.00x", ""))  # fmt: skip
        say(_line("compaction job: current state and history", f"{comp['rate']:,.0f} events/s",
                  f"{float(comp['rate']) / float(comp['base_rate']):.2f}x",
                  f"JVM {comp['jvm_mib']:,.0f} + Python {comp['python_mib']:,.0f} MiB"))  # fmt: skip
    for line in questions:
        say(line)
    for line in kafka:
        say(line)
    for line in columns:
        say(line)
    say("lock-free parallel snapshot, beside the server's own C client (--quick --batch to /dev/null)")
    for line in parallel:
        say(line)
    say(f"(this driver's own peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB)")


if __name__ == "__main__":
    main()
