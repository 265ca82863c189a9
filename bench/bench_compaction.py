"""Compaction rate: events per second folded into current-state tables on local[2], with peak memory.

`make bench` (bench/bench.py) runs this on the change log its worker captured from the benchmark binlog
(`--changelog URI --json FILE`). Run alone, it synthesizes a larger change log instead: 5,000,000 events
through MariaDB and the worker take far longer than the compaction itself. That one is written in a child
process with the worker's own Delta schema and partitioning (CHANGELOG_SCHEMA, PARTITION_BY, pk_hash;
Maxwell-rendered `data`/`old`, one commit per 500,000 events, inserts then updates and deletes over 8
tables), so the figures measure Spark only. Then, in one Spark session (local[2]):

- baseline: a plain Spark read of the same change log, every column materialised (count of a hash of all columns);
- compaction: one full `job.run` (dedupe, latest image per key, MERGE per table, the history index);

and the ratio of the two rates. Peak RSS is sampled every 0.2 s for the Spark driver JVM and the Python side
(this process plus Spark's Python workers), separately and summed.

    python bench/bench_compaction.py [--events 5000000] [--tables 8] [--keys 500000]
    python bench/bench_compaction.py --changelog URI [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake
from mysqlcapture_worker.models import pk_hash
from mysqlcapture_worker.sinks.delta import CHANGELOG_SCHEMA, PARTITION_BY


def synthesize(uri: str, *, events: int, tables: int, keys: int, chunk: int = 500_000, seed: int = 1) -> None:
    """`events` row events over `tables` tables of `keys` keys each: inserts first, then updates and deletes."""
    rng = random.Random(seed)
    live: list[set[int]] = [set() for _ in range(tables)]
    order = 0
    for commit_no, start in enumerate(range(0, events, chunk), start=1):
        cols: dict[str, list] = {f.name: [] for f in CHANGELOG_SCHEMA}
        for _ in range(min(chunk, events - start)):
            order += 1
            t = rng.randrange(tables)
            k = rng.randrange(keys)
            r = rng.random()
            kind = "insert" if k not in live[t] else ("delete" if r < 0.1 else "update")
            (live[t].discard if kind == "delete" else live[t].add)(k)
            amount = f"{k % 10000}.{order % 100:02d}"
            data = f'{{"id":{k},"rev":{order},"name":"n{k % 977}","amount":{amount},"at":"2024-05-0{1 + k % 9} 10:00"}}'
            pk = f"[{k}]"
            values = {
                "order_key": order, "server_id": 1, "gtid": f"0-1-{order}", "binlog_file": "mysql-bin.000001",
                "binlog_pos": order * 10, "row_index": 0, "event_pos": order * 10 + 5, "xid": order, "commit": True,
                "ts": 1_700_000_000 + order // 1000, "thread_id": 1, "type": kind, "primary_key": pk,
                "primary_key_columns": '["id"]', "pk_hash": pk_hash("bench", f"t{t}", pk), "data": data,
                "old": f'{{"rev":{order - 1}}}' if kind == "update" else None, "sql": None,
                "database": "bench", "table": f"t{t}",
            }  # fmt: skip
            for name, value in values.items():
                cols[name].append(value)
        props = CommitProperties(app_transactions=[Transaction("mysqlcapture-bench", commit_no)])
        table = pa.Table.from_pydict(cols, schema=CHANGELOG_SCHEMA)
        write_deltalake(uri, table, mode="append", partition_by=PARTITION_BY, commit_properties=props)


class PeakRss:
    """Peak RSS of the Spark driver JVM (a java child) and of the Python side (this process and Python workers)."""

    def __init__(self) -> None:
        self.jvm = self.python = self.total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            jvm = python = 0
            for proc in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss = proc.memory_info().rss
                    if proc.name().startswith("java"):
                        jvm += rss
                    else:
                        python += rss
            self.jvm, self.python = max(self.jvm, jvm), max(self.python, python)
            self.total = max(self.total, jvm + python)
            time.sleep(0.2)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def text(self) -> str:
        mib = 2**20
        return f"JVM {self.jvm / mib:,.0f} MiB + Python {self.python / mib:,.0f} MiB (peak sum {self.total / mib:,.0f})"


def measure(uri: str, work: Path, *, driver_memory: str = "4g") -> dict[str, float | str]:
    """A plain Spark read of the change log at `uri` (baseline), then one compaction run into `work`."""
    from mysqlcapture_compaction import job
    from mysqlcapture_compaction.session import build_session
    from pyspark.sql import functions as F

    with PeakRss() as rss:
        spark = build_session(master="local[2]", conf={"spark.driver.memory": driver_memory})
        began = time.monotonic()
        log = spark.read.format("delta").load(uri)
        totals = log.agg(F.count(F.lit(1)).alias("n"), F.sum(F.hash(*log.columns).cast("long"))).first()
        scanned = int(totals["n"]) if totals else 0
        base_seconds = time.monotonic() - began
        base_rss = rss.text()
        began = time.monotonic()
        result = job.run(spark, changelog=uri, output=str(work / "compacted"))
        seconds = time.monotonic() - began
        rows = sum(
            spark.read.format("delta").load(f"{work}/compacted/tables/{name.replace('.', '/', 1)}").count()
            for name in result.tables
        )
        versions = spark.read.format("delta").load(f"{work}/compacted/history").count()
        spark.stop()
    return {
        "scanned": scanned, "base_seconds": base_seconds, "base_rate": scanned / base_seconds, "base_rss": base_rss,
        "events": result.events, "seconds": seconds, "rate": result.events / seconds, "tables": len(result.tables),
        "rows": rows, "versions": versions, "rss": rss.text(), "jvm_mib": rss.jvm / 2**20,
        "python_mib": rss.python / 2**20,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--keys", type=int, default=500_000, help="distinct primary keys per table")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--changelog", help="compact this change log instead of a synthesized one")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    try:
        uri = args.changelog or str(work / "changelog")
        if not args.changelog:
            began = time.monotonic()
            # A child process, so that this one (the Spark driver's Python side) is measured without it.
            child = multiprocessing.get_context("spawn").Process(
                target=synthesize,
                args=(uri,),
                kwargs={"events": args.events, "tables": args.tables, "keys": args.keys},
            )
            child.start()
            child.join()
            assert child.exitcode == 0, "synthesizing the change log failed"
            print(f"synthesized {args.events:,} change events in {time.monotonic() - began:.0f}s", flush=True)
        m = measure(uri, work, driver_memory=args.driver_memory)
        print(
            f"baseline   local[2]: Spark read of every column, {m['scanned']:,} events in {m['base_seconds']:.1f}s = "
            f"{m['base_rate']:,.0f} events/s; peak RSS so far {m['base_rss']}"
        )
        print(f"compaction local[2]: {m['events']:,} events in {m['seconds']:.1f}s = {m['rate']:,.0f} events/s "
              f"({m['rate'] / m['base_rate']:.3f}x the baseline); {m['rows']:,} current rows in {m['tables']} "
              f"tables, {m['versions']:,} history versions; peak RSS {m['rss']}")  # fmt: skip
        if args.json:
            Path(args.json).write_text(json.dumps(m))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
