"""One compaction run: the change log since the last run into current-state tables and the history index.

Reads the change log's newest snapshot from the ordering key the last finished run reached, replays its DDL
in order (flushing each table's row changes up to a DDL before applying it) and MERGEs every table's latest
images. Each target records how far it is applied (targets.py), so a rerun after a kill redoes only the rest.
Snapshots (Maxwell's bootstrap events): a bootstrap-insert is an upsert like an insert; a bootstrap-start of a
table at key k removes its rows last changed before k (the snapshot re-sends every row still there).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltalake import DeltaTable as RsTable
from mysqlcapture_worker.sinks.delta import read_delta
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from mysqlcapture_compaction import targets, transforms
from mysqlcapture_compaction.targets import Target

log = logging.getLogger(__name__)
DEFAULT_BUCKETS = 16


def default_output(changelog: str) -> str:
    """Beside the change log: `<changelog>-compacted` (spec.compaction.outputUri overrides it)."""
    return changelog.rstrip("/") + "-compacted"


def history_path(output: str) -> str:
    return f"{output.rstrip('/')}/history"


def runs_path(output: str) -> str:
    return f"{output.rstrip('/')}/_runs"


@dataclass
class RunResult:
    """What a run did: change-log version read, ordering keys covered, events read, tables written."""

    changelog_version: int
    start_key: int
    end_key: int
    events: int
    tables: list[str] = field(default_factory=list)
    seconds: float = 0.0


def last_compacted(output: str) -> int:
    """The ordering key every target is known to hold (the last finished run's end), -1 before the first."""
    return targets.applied(runs_path(output))


def last_compacted_version(output: str) -> int | None:
    """The change-log version the last finished run read, if any."""
    try:
        rows = read_delta(runs_path(output), ["changelog_version", "end_key"]).to_pylist()
    except Exception:  # no run yet
        return None
    return max((r["end_key"], r["changelog_version"]) for r in rows)[1] if rows else None


class _Run:
    def __init__(self, spark: SparkSession, batch: DataFrame, output: str, version: int) -> None:
        self.spark, self.batch, self.output, self.version = spark, batch, output, version
        self.applied: dict[tuple[str, str], int] = {}
        # Per table and stretch between DDL events: its highest row-event ordering key and the columns its row
        # images name (set by `run`).
        self.row_keys: dict[tuple[str, str], list[tuple[int, list[str]]]] = {}
        self.written: set[str] = set()

    def target(self, database: str, table: str) -> Target:
        return Target(self.output, database, table)

    def applied_key(self, database: str, table: str) -> int:
        key = (database, table)
        if key not in self.applied:
            self.applied[key] = targets.applied(self.target(database, table).path)
        return self.applied[key]

    def note(self, key: int) -> dict[str, Any]:
        return {"changelog_version": self.version, "order_key": key}

    def image_columns(self, database: str, table: str, low: int, upto: int) -> list[str]:
        """The columns named by the table's row images with ordering key in (low, upto]; none: no rows there."""
        out: list[str] = []
        for top, names in self.row_keys.get((database, table), []):
            if low < top <= upto:
                out += [c for c in names if c not in out]
        return out

    def flush(self, database: str, table: str, upto: int) -> None:
        """Apply the table's row changes with ordering key in (applied, upto]."""
        low = self.applied_key(database, table)
        seen = self.image_columns(database, table, low, upto) if low < upto else []
        if not seen:
            return
        scope = self.batch.where(
            (F.col("database") == database) & (F.col("table") == table) & (F.col("order_key") > low)
        ).where(F.col("order_key") <= upto)
        changes = transforms.row_changes(transforms.dedupe(scope))
        prepared = transforms.with_columns_map(transforms.latest(changes)).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            path = self.target(database, table).path
            columns = targets.data_columns(path) if RsTable.is_deltatable(path) else []
            columns += [c for c in seen if c not in columns]
            targets.merge(self.spark, path, transforms.state_rows(prepared, columns), key=upto, note=self.note(upto))
        finally:
            prepared.unpersist()
        self.applied[(database, table)] = upto
        self.written.add(f"{database}.{table}")

    def ddl(self, event: Row) -> None:
        kind, key, db, table = event["type"], event["order_key"], event["database"], event["table"]
        definition = json.loads(event["data"]) if event["data"] else {}
        if kind == "table-create":
            if self.applied_key(db, table) < key:
                cols = [c["name"] for c in definition.get("columns", [])]
                targets.create(self.spark, self.target(db, table).path, cols, key=key, note=self.note(key))
                self._done(db, table, key)
        elif kind == "table-drop":
            self._drop(db, table, key)
        elif kind == "table-alter":
            self._alter(event, definition)
        elif kind == "database-drop":
            for name in self._tables_of(db):
                self._drop(db, name, key)
        elif kind == "bootstrap-start":
            self._resnapshot(db, table, key)

    def _resnapshot(self, db: str, table: str, key: int) -> None:
        """A snapshot of the table starts at `key`: it re-sends every row that existed at its read view, and rows
        changed since carry later keys, so a row whose last change is older than `key` is gone.

        The table's events before `key` need not be applied: whatever they did, their rows go. One DELETE
        carrying (APP_ID, key) removes the target's older rows (no target, or a dropped one: an empty table carrying
        it, as a snapshot of an empty table leaves); the batch's are left out of the next flush, whose range starts
        at `key`.
        """
        if self.applied_key(db, table) >= key:
            return
        path = self.target(db, table).path
        if RsTable.is_deltatable(path) and not targets.is_dropped(path):
            targets.delete_older(self.spark, path, key=key, note=self.note(key))
        else:
            targets.create(self.spark, path, [], key=key, note=self.note(key))
        self._done(db, table, key)

    def _done(self, db: str, table: str, key: int) -> None:
        self.applied[(db, table)] = key
        self.written.add(f"{db}.{table}")

    def _drop(self, db: str, table: str, key: int) -> None:
        self.flush(db, table, key - 1)
        if self.applied_key(db, table) < key:
            targets.drop(self.spark, self.target(db, table).path, key=key, note=self.note(key))
            self._done(db, table, key)

    def _alter(self, event: Row, definition: dict[str, Any]) -> None:
        key, db, table = event["order_key"], event["database"], event["table"]
        self.flush(db, table, key - 1)
        new_cols = [c["name"] for c in definition.get("columns", [])]
        old_cols = [c["name"] for c in json.loads(event["old"]).get("columns", [])] if event["old"] else []
        renamed = renames(old_cols, new_cols)
        dest_db, dest_table = definition.get("database", db), definition.get("table", table)
        src = self.target(db, table).path
        same_place = (dest_db, dest_table) == (db, table)
        if same_place and not renamed and RsTable.is_deltatable(src) and not targets.is_dropped(src):
            # MODIFY or reorder: nothing to rewrite (values are text); ADD: a schema-only commit, idempotent.
            # Neither needs the DDL's key recorded: replaying it finds nothing left to do.
            targets.add_columns(self.spark, src, [c for c in new_cols if c not in targets.data_columns(src)])
            if set(targets.data_columns(src)) <= set(new_cols):
                return
        if self.applied_key(dest_db, dest_table) < key:
            dest = self.target(dest_db, dest_table).path
            targets.reshape(self.spark, src, dest, new_cols, renamed, key=key, note=self.note(key))
            self._done(dest_db, dest_table, key)
        if not same_place and self.applied_key(db, table) < key:
            targets.drop(self.spark, src, key=key, note=self.note(key))
            self._done(db, table, key)

    def _tables_of(self, db: str) -> list[str]:
        """The database's tables: those with a target, and those whose first rows are still in this batch."""
        folder = Path(f"{self.output.rstrip('/')}/tables/{db}")
        on_disk = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        return sorted(on_disk | {t for d, t in self.row_keys if d == db})


def renames(old_cols: list[str], new_cols: list[str]) -> dict[str, str]:
    """new name -> old name for columns an ALTER renamed (RENAME/CHANGE COLUMN).

    Names on both sides are the same columns (MODIFY ... AFTER only moves them). The names that appear only on
    one side pair up in order when there are as many of each (a rename); otherwise they were dropped and added.
    """
    gone = [c for c in old_cols if c not in new_cols]
    came = [c for c in new_cols if c not in old_cols]
    return dict(zip(came, gone, strict=True)) if len(gone) == len(came) else {}


def _segment_maxima(batch: DataFrame, ddl_keys: list[int]) -> dict[tuple[str, str], list[tuple[int, list[str]]]]:
    """Per table and stretch between consecutive DDL events: the greatest row-event ordering key and the column
    names of its row images, in order (one small aggregation; json_object_keys is native, no Python)."""
    segment = F.size(
        F.filter(F.array(*[F.lit(k) for k in ddl_keys] or [F.lit(None)]), lambda k: k < F.col("order_key"))
    )
    rows = (
        batch.where(F.col("type").isin(*transforms.ROW_TYPES))
        .groupBy("database", "table", segment.alias("segment"))
        .agg(F.max("order_key").alias("top"), F.collect_set(F.json_object_keys("data")).alias("names"))
        .collect()
    )
    out: dict[tuple[str, str], list[tuple[int, list[str]]]] = {}
    for row in sorted(rows, key=lambda r: r["top"]):
        names: list[str] = []
        for image in row["names"]:
            names += [c for c in image if c not in names]
        out.setdefault((row["database"], row["table"]), []).append((int(row["top"]), names))
    return out


def _not_compacted(spark: SparkSession, batch: DataFrame, output: str, *, start: int) -> DataFrame:
    """`batch` without the row events an earlier run already compacted under another ordering key (the same
    event identity written twice): dedupe across runs, as `transforms.dedupe` does within one.

    Only history versions with ordering key <= `start` count: the rest may be this batch's own, written by a
    killed run. History files are written run by run in binlog order, so the binlog_file filter lets Delta's
    file statistics skip all but the recent ones.
    """
    path = history_path(output)
    if start < 0 or not RsTable.is_deltatable(path):
        return batch
    files = [r["binlog_file"] for r in batch.select("binlog_file").distinct().collect()]
    seen = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("binlog_file").isin(files) & (F.col("order_key") <= start))
        .select(*transforms.IDENTITY)
    )
    again = batch.select(*transforms.IDENTITY).join(seen, transforms.IDENTITY, "left_semi").distinct()
    again = again.persist(StorageLevel.MEMORY_AND_DISK)
    count = again.count()
    if count == 0:
        again.unpersist()
        return batch
    log.warning("dropping %d change-log events already compacted under an earlier ordering key", count)
    return batch.join(F.broadcast(again), transforms.IDENTITY, "left_anti")


def write_history(spark: SparkSession, events: DataFrame, output: str, *, end: int, buckets: int) -> None:
    """Append the batch's row versions to the history index, once (application transaction (APP_ID, end))."""
    path = history_path(output)
    low = targets.applied(path)
    if low >= end:
        return
    rows = transforms.history_rows(events.where(F.col("order_key") > low), buckets=buckets)
    rows = rows.repartition("database", "table", "bucket").sortWithinPartitions("pk_hash", "order_key")
    (
        rows.write.format("delta")
        .mode("append")
        .partitionBy("database", "table", "bucket")
        .option("txnAppId", targets.APP_ID)
        .option("txnVersion", str(end))
        .save(path)
    )


def run(spark: SparkSession, *, changelog: str, output: str | None = None, buckets: int = DEFAULT_BUCKETS) -> RunResult:
    """Compact what the change log holds beyond the last finished run. Safe to kill and rerun at any point."""
    started = time.monotonic()
    output = output or default_output(changelog)
    version = RsTable(changelog).version()
    start = last_compacted(output)
    batch = spark.read.format("delta").option("versionAsOf", version).load(changelog).where(F.col("order_key") > start)
    stats = batch.agg(F.max("order_key").alias("end"), F.count(F.lit(1)).alias("n")).first()
    assert stats is not None
    if stats["end"] is None:
        return RunResult(version, start, start, 0, seconds=time.monotonic() - started)
    end, count = int(stats["end"]), int(stats["n"])
    batch = _not_compacted(spark, batch, output, start=start)
    events = transforms.dedupe(batch)
    write_history(spark, events, output, end=end, buckets=buckets)
    work = _Run(spark, batch, output, version)
    ddl = (
        transforms.dedupe(batch.where(~F.col("type").isin(*transforms.ROW_TYPES)))
        .select("order_key", "type", "database", "table", "data", "old")
        .orderBy("order_key")
        .collect()
    )
    work.row_keys = _segment_maxima(batch, [e["order_key"] for e in ddl])
    for event in ddl:
        work.ddl(event)
    for database, table in sorted(work.row_keys):
        work.flush(database, table, end)
    record = spark.createDataFrame(
        [(version, start, end, count, int(time.time()))],
        "changelog_version long, start_key long, end_key long, events long, finished_at long",
    )
    record.write.format("delta").mode("append").option("txnAppId", targets.APP_ID).option("txnVersion", str(end)).save(
        runs_path(output)
    )
    result = RunResult(version, start, end, count, sorted(work.written), time.monotonic() - started)
    log.info("compacted %s", result)
    return result
