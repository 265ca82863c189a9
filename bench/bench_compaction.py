"""Compaction rate: events per second folded into typed current-state tables on local[2], with peak memory.

`make bench` (bench/bench.py) runs this on the change log its worker captured from the benchmark binlog
(`--changelog URI --json FILE`). Run alone, it synthesizes a larger change log instead: 5,000,000 events
through a server and the worker take far longer than the compaction itself. That one is written in a child
process with the worker's own Delta schema, partitioning and schema history (8 typed tables, half with a JSON
column; CREATE TABLE events, and three ALTERs halfway: ADD COLUMN with a default, a widening MODIFY, a CHANGE
COLUMN rename; Maxwell-rendered `data`/`old`, one commit per 500,000 events, inserts then updates and deletes),
so the figures measure Spark only. Then, in one Spark session (local[2]):

- baseline: the irreducible work on the same change log: read the row events, parse each `data` into its table's
  typed columns, write each table once to Delta (tables written as the job writes them, several at once);
- compaction: one full `job.run` (every image typed into each table's history, latest per key into its current state);
- incremental: 1% more events appended, and a second `job.run` on the compacted state;

and the ratios. Peak RSS is sampled every 0.2 s for the Spark driver JVM and the Python side (this process plus
Spark's Python workers), separately and summed.

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
from mysqlcapture_api.changelog import CHANGELOG_SCHEMA, PARTITION_BY, pk_hash

TABLE_SQL = (
    "CREATE TABLE bench.t{n} (id BIGINT PRIMARY KEY, rev INT NOT NULL, name VARCHAR(64), amount DECIMAL(12,2), "
    "at DATETIME(6), day DATE, score DOUBLE, flag TINYINT, kind ENUM('new','paid','shipped','cancelled'), "
    "tags SET('a','b','c'){json})"
)
# Halfway through the events: schema changes the compaction replays (ADD with a default, a widening, a rename).
DDL_SQL = (
    "ALTER TABLE bench.t0 ADD COLUMN extra INT NOT NULL DEFAULT 5",
    "ALTER TABLE bench.t1 MODIFY COLUMN rev BIGINT NOT NULL",
    "ALTER TABLE bench.t2 CHANGE COLUMN name title VARCHAR(64)",
)
KINDS = ("new", "paid", "shipped", "cancelled")


def _image(schema_names: list[str], k: int, order: int) -> str:
    values = {
        "id": str(k), "rev": str(order), "name": f'"n{k % 977} é"', "title": f'"n{k % 977} é"',
        "amount": f"{k % 10000}.{order % 100:02d}",
        "at": f'"2024-05-0{1 + k % 9} 10:00:{k % 60:02d}.{order % 999999:06d}"',
        "day": f'"2024-0{1 + k % 9}-1{k % 10}"', "score": f"{(k % 1000) / 8}", "flag": str(k % 2),
        "kind": f'"{KINDS[k % 4]}"', "tags": '["a","c"]' if k % 3 else "[]",
        "attrs": f'{{"k":{k},"tier":"t{k % 7}","flags":[true,false],"n":{{"x":1.5}}}}', "extra": "5",
    }  # fmt: skip
    return "{" + ",".join(f'"{c}":{values[c]}' for c in schema_names) + "}"


def synthesize(
    uri: str,
    *,
    events: int,
    tables: int,
    keys: int,
    chunk: int = 500_000,
    seed: int = 1,
    start_order: int = 0,
    per_second: int = 1000,
) -> None:
    """`events` row events over `tables` typed tables of `keys` keys each (inserts first, then updates and deletes;
    half the tables with a JSON column), their CREATE TABLE events and a schema history as the worker writes them,
    and three ALTERs halfway, `per_second` events stamped with each second. With `start_order`, appends events
    after those of an earlier call (no DDL)."""
    from mysqlcapture_api.coordinates import Coordinate
    from mysqlcapture_api.schema.ddl import apply_ddl
    from mysqlcapture_api.schema.history import SchemaHistory
    from mysqlcapture_api.schema.schema import Schema
    from mysqlcapture_compaction.definitions import history_uri

    rng = random.Random(seed + start_order)
    live: list[set[int]] = [set(range(keys)) if start_order else set() for _ in range(tables)]
    history = SchemaHistory(history_uri(uri))
    schema = Schema.empty()
    names = {}
    order = start_order
    cols: dict[str, list] = {f.name: [] for f in CHANGELOG_SCHEMA}

    def add(values: dict) -> None:
        for f in CHANGELOG_SCHEMA:
            cols[f.name].append(values.get(f.name))

    def ddl(sql: str) -> None:
        nonlocal schema, order
        order += 1
        result = apply_ddl(schema, sql, "bench")
        pos = order * 10
        history.record(
            base_version=history.latest_version() or 0, before=schema, after=result.schema, server_id=1,
            coordinate=Coordinate("mysql-bin.000001", pos + 5), gtid=None, last_heartbeat=None, sql=sql,
        )  # fmt: skip
        schema = result.schema
        for e in result.events:
            add({
                "order_key": order, "server_id": 1, "binlog_file": "mysql-bin.000001", "binlog_pos": pos,
                "row_index": 0, "event_pos": pos, "commit": False, "ts": 1_700_000_000, "type": e["type"],
                "data": json.dumps(e.get("def")), "old": json.dumps(e["old"]) if e.get("old") else None, "sql": sql,
                "database": "bench", "table": e["table"],
            })  # fmt: skip
        for t in range(tables):
            found = schema.table("bench", f"t{t}")
            names[t] = found.column_names() if found else []

    def commit(no: int) -> None:
        props = CommitProperties(app_transactions=[Transaction("mysqlcapture-bench", no)])
        table = pa.Table.from_pydict(cols, schema=CHANGELOG_SCHEMA)
        write_deltalake(uri, table, mode="append", partition_by=PARTITION_BY, commit_properties=props)
        for values in cols.values():
            values.clear()

    if start_order == 0:
        history.initial(schema, server_id=1, coordinate=Coordinate("mysql-bin.000001", 4), gtid=None)
        for t in range(tables):
            ddl(TABLE_SQL.format(n=t, json=", attrs JSON" if t % 2 else ""))
    else:
        final = history.schema_at(history.latest_version() or 0)
        for t in range(tables):
            names[t] = final.table("bench", f"t{t}").column_names()  # type: ignore[union-attr]
    done = 0
    commit_no = start_order // chunk + 1
    while done < events:
        if start_order == 0 and done == events // 2:
            for sql in DDL_SQL:
                ddl(sql)
        order += 1
        done += 1
        t = rng.randrange(tables)
        k = rng.randrange(keys)
        r = rng.random()
        kind = "insert" if k not in live[t] else ("delete" if r < 0.1 else "update")
        (live[t].discard if kind == "delete" else live[t].add)(k)
        pk = f"[{k}]"
        add({
            "order_key": order, "server_id": 1, "gtid": f"0-1-{order}", "binlog_file": "mysql-bin.000001",
            "binlog_pos": order * 10, "row_index": 0, "event_pos": order * 10, "xid": order, "commit": True,
            "ts": 1_700_000_000 + order // per_second, "thread_id": 1, "type": kind, "primary_key": pk,
            "primary_key_columns": '["id"]', "pk_hash": pk_hash("bench", f"t{t}", pk),
            "data": _image(names[t], k, order), "old": f'{{"rev":{order - 1}}}' if kind == "update" else None,
            "database": "bench", "table": f"t{t}",
        })  # fmt: skip
        if len(cols["order_key"]) >= chunk:
            commit(commit_no)
            commit_no += 1
    if cols["order_key"]:
        commit(commit_no)


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


def baseline(spark, uri: str, out: str) -> int:  # type: ignore[no-untyped-def]
    """The irreducible work: read the change log's row events, parse each `data` into its table's typed columns
    (the same native parse the job uses), write each table once to Delta; tables written as the job writes them
    (PARALLEL_FLUSHES at a time). Returns the events read."""
    from concurrent.futures import ThreadPoolExecutor

    import mysqlcapture_compaction.images as images
    import mysqlcapture_compaction.job as job
    import mysqlcapture_compaction.transforms as transforms
    from mysqlcapture_compaction.definitions import Definitions, marks_of
    from pyspark.sql import functions as F

    log = spark.read.format("delta").load(uri)
    rows = log.where(F.col("type").isin(*transforms.ROW_TYPES))
    per_table = rows.groupBy("database", "table").count().collect()
    ddl = log.where(~F.col("type").isin(*transforms.ROW_TYPES)).collect()
    defs = Definitions.load(uri, marks_of(ddl))
    latest = defs.version_at(2**62)

    def write(db: str, table: str) -> None:
        definition = defs.table(db, table, latest)
        assert definition is not None, f"no definition of {db}.{table} in the schema history"
        scope = rows.where((F.col("database") == db) & (F.col("table") == table))
        parsed = scope.select(images.parse(F.col("data"), definition).alias("_p"), "order_key")
        typed = parsed.select(*images.typed(F.col("_p"), definition), "order_key")
        typed.write.format("delta").mode("overwrite").save(f"{out}/{db}/{table}")

    with ThreadPoolExecutor(max_workers=job.PARALLEL_FLUSHES) as pool:
        for future in [pool.submit(write, r["database"], r["table"]) for r in per_table]:
            future.result()
    return sum(int(r["count"]) for r in per_table)


def measure(
    uri: str, work: Path, *, driver_memory: str = "4g", incremental: int = 0, tables: int = 8, keys: int = 0
) -> dict[str, float | str]:
    """The baseline (read, parse typed, write once), one full compaction run, then (with `incremental`) that many
    new events appended and a second, incremental run."""
    import mysqlcapture_compaction.job as job
    import mysqlcapture_compaction.output as layout
    from mysqlcapture_compaction.session import build_session

    with PeakRss() as rss:
        spark = build_session(master="local[2]", conf={"spark.driver.memory": driver_memory})
        began = time.monotonic()
        scanned = baseline(spark, uri, str(work / "baseline"))
        base_seconds = time.monotonic() - began
        base_rss = rss.text()
        began = time.monotonic()
        result = job.run(spark, changelog=uri, output=str(work / "compacted"))
        seconds = time.monotonic() - began
        rows = sum(
            spark.read.format("delta").load(f"{work}/compacted/tables/{name.replace('.', '/', 1)}").count()
            for name in result.tables
        )
        versions = sum(
            spark.read.format("delta").load(str(p)).count() for p in layout.history_tables(str(work / "compacted"))
        )
        inc_events, inc_seconds = 0, 0.0
        if incremental:
            child = multiprocessing.get_context("spawn").Process(
                target=synthesize,
                args=(uri,),
                kwargs={"events": incremental, "tables": tables, "keys": keys, "start_order": result.end_key},
            )
            child.start()
            child.join()
            assert child.exitcode == 0, "appending the incremental events failed"
            began = time.monotonic()
            second = job.run(spark, changelog=uri, output=str(work / "compacted"))
            inc_seconds, inc_events = time.monotonic() - began, second.events
        spark.stop()
    return {
        "scanned": scanned, "base_seconds": base_seconds, "base_rate": scanned / base_seconds, "base_rss": base_rss,
        "events": result.events, "seconds": seconds, "rate": result.events / seconds, "tables": len(result.tables),
        "rows": rows, "versions": versions, "rss": rss.text(), "jvm_mib": rss.jvm / 2**20,
        "python_mib": rss.python / 2**20, "inc_events": inc_events, "inc_seconds": inc_seconds,
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
        incremental = 0 if args.changelog else args.events // 100
        m = measure(uri, work, driver_memory=args.driver_memory, incremental=incremental, tables=args.tables,
                    keys=args.keys)  # fmt: skip
        print(
            f"baseline   local[2]: read the row events, parse each image into its table's typed columns, write each "
            f"table once: {m['scanned']:,} events in {m['base_seconds']:.1f}s = {m['base_rate']:,.0f} events/s; "
            f"peak RSS so far {m['base_rss']}"
        )
        ratio = float(m["rate"]) / float(m["base_rate"])
        print(f"compaction local[2]: {m['events']:,} events in {m['seconds']:.1f}s = {m['rate']:,.0f} events/s "
              f"({ratio:.3f}x the baseline); {m['rows']:,} current rows in {m['tables']} "
              f"tables, {m['versions']:,} history versions; peak RSS {m['rss']}")  # fmt: skip
        if m["inc_events"]:
            share, time_ratio = (
                float(m["inc_events"]) / float(m["events"]),
                float(m["inc_seconds"]) / float(m["seconds"]),
            )
            print(
                f"incremental local[2]: {m['inc_events']:,} new events ({share:.1%}) on the compacted state in "
                f"{m['inc_seconds']:.1f}s = {time_ratio:.3f}x the full run's time"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(m))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
