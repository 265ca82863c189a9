"""Compaction rate: events per second folded into current-state tables on local[2], with peak memory.

Synthesizes a change log in the worker's schema (pyarrow + deltalake, no server), then times one compaction
run (history index included) and samples the RSS of this process and its JVM.

    python bench/bench_compaction.py [--events 5000000] [--tables 8] [--keys 500000]
"""

from __future__ import annotations

import argparse
import contextlib
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
    """Samples the RSS of this process plus its children (the JVM and Python workers) every 0.2 s."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)
            time.sleep(0.2)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--keys", type=int, default=500_000, help="distinct primary keys per table")
    parser.add_argument("--driver-memory", default="4g")
    args = parser.parse_args(argv)
    from mysqlcapture_compaction import job
    from mysqlcapture_compaction.session import build_session

    work = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    try:
        uri = str(work / "changelog")
        began = time.monotonic()
        synthesize(uri, events=args.events, tables=args.tables, keys=args.keys)
        print(f"synthesized {args.events:,} change events in {time.monotonic() - began:.0f}s", flush=True)
        with PeakRss() as rss:
            spark = build_session(master="local[2]", conf={"spark.driver.memory": args.driver_memory})
            began = time.monotonic()
            result = job.run(spark, changelog=uri, output=str(work / "compacted"))
            seconds = time.monotonic() - began
            rows = sum(
                spark.read.format("delta").load(f"{work}/compacted/tables/bench/t{t}").count()
                for t in range(args.tables)
            )
            spark.stop()
        print(
            f"compaction local[2]: {result.events:,} events in {seconds:.1f}s = "
            f"{result.events / seconds:,.0f} events/s; "
            f"{rows:,} current rows in {args.tables} tables; peak RSS {rss.peak / 2**20:,.0f} MiB (driver JVM + Python)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
