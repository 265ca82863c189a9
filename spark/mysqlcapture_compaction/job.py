"""One compaction run: the change log since the last run into typed row histories and current-state tables.

Reads the change log's newest snapshot from the ordering key the last finished run reached and replays its DDL
in order, flushing each table's row events up to a DDL before applying it. A flush parses every row image once,
typed by the definition it was written under, into the table's history (history/<db>/<table>), then reads the
latest version per key back from it and MERGEs (or writes) the table's current state. Each table records how far
it is applied (targets.py), so a rerun after a kill redoes only the rest.
Snapshots (Maxwell's bootstrap events): a bootstrap-insert is an upsert like an insert; a bootstrap-start of a
table at key k removes its rows last changed before k (the snapshot re-sends every row still there).
A table whose rows have no primary key is kept as the multiset of its rows, matched by value (multiset.py).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable as RsTable
from mysqlcapture_api.changelog import Col, read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.model import TableDef
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from mysqlcapture_compaction import completion, images, multiset, targets, transforms
from mysqlcapture_compaction.definitions import Definitions, column_renames, marks_of
from mysqlcapture_compaction.targets import Target
from mysqlcapture_compaction.transforms import META

log = logging.getLogger(__name__)
PARALLEL_FLUSHES = 4
# A table's history gets one file per this many new versions in a run (at most MAX_HISTORY_FILES).
HISTORY_ROWS_PER_FILE = 1_000_000
MAX_HISTORY_FILES = 16


def default_output(changelog: str) -> str:
    """Beside the change log: `<changelog>-compacted` (spec.compaction.outputUri overrides it)."""
    return changelog.rstrip("/") + "-compacted"


def history_path(output: str) -> str:
    """Where the tables' histories are: <output>/history/<database>/<table>."""
    return f"{output.rstrip('/')}/history"


def history_tables(output: str) -> list[Path]:
    """Every table's history (Delta tables under history_path)."""
    return sorted(p for p in Path(history_path(output)).glob("*/*") if (p / "_delta_log").is_dir())


def runs_path(output: str) -> str:
    return f"{output.rstrip('/')}/_runs"


def timeline_path(output: str) -> str:
    """The change log's non-row events up to the last run's end (few: DDL, snapshot markers), kept so a run reads
    only the change log's new events, not the whole log's `type` column, to place every schema version."""
    return f"{output.rstrip('/')}/_timeline"


# The columns of a non-row event a run needs: the DDL to replay, its identity, and where it sits.
TIMELINE_COLUMNS = [
    Col.ORDER_KEY,
    Col.TYPE,
    Col.DATABASE,
    Col.TABLE,
    Col.DATA,
    Col.OLD,
    Col.SQL,
    *transforms.IDENTITY,
    Col.EVENT_POS,
    Col.TS,
    Col.GTID,
]


def _timeline(log_df: DataFrame, output: str, start: int) -> list[Row]:
    """Every non-row event of the change log, in ordering-key order: those up to `start` from the timeline when it
    reaches that far (else, once, from the whole change log), the rest from the change log's new events."""
    path = timeline_path(output)
    others = log_df.where(~F.col(Col.TYPE).isin(*transforms.ROW_TYPES)).select(*TIMELINE_COLUMNS)
    if start < 0 or targets.applied(path) < start:
        return others.orderBy(Col.ORDER_KEY).collect()
    earlier = read_delta(path).filter(pc.less_equal(pc.field(Col.ORDER_KEY), start)).to_pylist()
    newer = others.where(F.col(Col.ORDER_KEY) > start).orderBy(Col.ORDER_KEY).collect()
    return [Row(**r) for r in sorted(earlier, key=lambda r: r[Col.ORDER_KEY])] + newer


def _keep_timeline(spark: SparkSession, log_df: DataFrame, output: str, others: list[Row], end: int) -> None:
    """Append the events up to `end` the timeline lacks, in one commit carrying (APP_ID, end). Written by Spark,
    as every other table of the output (its object-store log store); `log_df` gives the columns' types."""
    path = timeline_path(output)
    kept = targets.applied(path)
    if kept >= end:
        return
    rows = [tuple(r[c] for c in TIMELINE_COLUMNS) for r in others if kept < r[Col.ORDER_KEY] <= end]
    schema = log_df.select(*TIMELINE_COLUMNS).schema
    writer = spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append")
    writer.option("txnAppId", targets.APP_ID).option("txnVersion", str(end)).save(path)


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


@dataclass(frozen=True)
class TableRows:
    """A table's row events in the batch: how many, their lowest and highest ordering keys, and how many
    updates may change a primary key (transforms.pk_moved), how many updates there are, how many rows have no
    primary key (a table without one), and how many images are partial (Col.ABSENT)."""

    count: int
    low: int
    high: int
    moves: int = 1
    updates: int = 1
    keyless: int = 0
    partial: int = 1


@dataclass(frozen=True)
class _Plan:
    """A table's row events in one flush (`scope`), the ALTERs among them, one definition and column list per
    schema segment then the newest, each ALTER's statement (then None), and each event's segment number."""

    scope: DataFrame
    alters: list[int]
    defs: list[TableDef | None]
    lists: list[list[str]]
    sqls: list[str | None]
    segment: Column


class _Run:
    """One run's table work. Row changes are applied per table once per stretch between the table's resets
    (CREATE, DROP, RENAME, a snapshot's start): ALTERs inside a stretch only change how its older rows are read,
    so a table with no reset is written once per run, whatever its DDL."""

    def __init__(
        self,
        spark: SparkSession,
        batch: DataFrame,
        output: str,
        version: int,
        defs: Definitions,
        ddl: list[Row],
        rows: dict[tuple[str, str], TableRows],
    ) -> None:
        self.spark, self.batch, self.output, self.version, self.defs = spark, batch, output, version, defs
        self.rows = rows
        self.applied: dict[tuple[str, str], int] = {}
        # Each table's ALTERs that keep it in place, by ordering key (they split its rows into schema segments).
        self.alters: dict[tuple[str, str], list[int]] = {}
        self.statements: dict[int, str | None] = {}  # each ALTER's SQL by ordering key (its column renames)
        for event in ddl:
            if event[Col.TYPE] == "table-alter" and not _moves(event):
                self.alters.setdefault((event[Col.DATABASE], event[Col.TABLE]), []).append(int(event[Col.ORDER_KEY]))
                self.statements[int(event[Col.ORDER_KEY])] = event[Col.SQL]
        self.written: set[str] = set()
        # Tables a CREATE in this batch starts, not written yet: (the CREATE's key, its column names). Their first
        # write carries the rows too (one commit, no MERGE); one with no rows is written empty.
        self.pending: dict[tuple[str, str], tuple[int, list[str]]] = {}

    def target(self, database: str, table: str) -> Target:
        return Target(self.output, database, table)

    def applied_key(self, database: str, table: str) -> int:
        key = (database, table)
        if key not in self.applied:
            self.applied[key] = targets.applied(self.target(database, table).path)
        return self.applied[key]

    def note(self, key: int) -> dict[str, Any]:
        return {"changelog_version": self.version, "order_key": key}

    def definition(self, database: str, table: str, key: int) -> TableDef | None:
        """The table's definition once every DDL event with ordering key <= `key` is applied."""
        return self.defs.table(database, table, self.defs.version_at(key + 1))

    def _has_rows(self, database: str, table: str, low: int, upto: int) -> bool:
        found = self.rows.get((database, table))
        return found is not None and found.high > low and found.low <= upto

    def _names(self, scope: DataFrame, have: list[str]) -> list[str]:
        """Without a schema history: the target's columns, then those the row images name (one small job)."""
        keys = scope.select(F.explode(F.json_object_keys(Col.DATA)).alias("k")).distinct().collect()
        return have + sorted(k for k in (r["k"] for r in keys) if k not in have)

    def flush(self, database: str, table: str, upto: int) -> None:
        """Apply the table's row changes with ordering key in (applied, upto], and its ALTERs there: one commit.

        Rows between two ALTERs are read with the definition they were written under and carried to the
        newest one (renamed, cast, defaulted), like the target's own rows when its definition changed.
        """
        low = self.applied_key(database, table)
        path = self.target(database, table).path
        alters = [k for k in self.alters.get((database, table), []) if low < k <= upto]
        has_rows = self._has_rows(database, table, low, upto)
        if low >= upto or not (has_rows or alters):
            self.materialize(database, table)
            return
        created = self.pending.pop((database, table), None)
        live = created is None and targets.is_live(path)
        have = targets.data_columns(path) if live else []
        plan = self._plan(database, table, low, upto, have, has_rows)
        if created is None and targets.dropped_for(path) == targets.NO_KEY:
            if has_rows:
                self.write_history(database, table, plan, upto)
            self._keep_keyless(database, table, upto, warn=has_rows)
            return
        marked = live and targets.by_value(path)
        if marked or self._keyless(database, table, plan):
            self._flush_by_value(
                database, table, plan, upto, live=live, marked=marked, has_rows=has_rows, created=created
            )
            return
        final, lists = plan.defs[-1], plan.lists
        parts: list[DataFrame] = []
        if has_rows:
            image = self.write_history(database, table, plan, upto)
            # The current state from the history just written: every image parsed once, for both.
            changes = self._history_changes(database, table, low, upto).withColumn("_seg", plan.segment)
            held = {f.name: f.dataType for f in image.fields}
            for i in range(len(plan.alters) + 1):
                part = changes.where(F.col("_seg") == i) if plan.alters else changes
                carried = images.carried(
                    plan.defs[i],
                    final,
                    lineage(lists[i:], plan.sqls[i:]),
                    lists[i],
                    source=lambda n: F.col("after").getField(n),
                    older_types=held,
                )
                parts.append(part.select(*carried, *transforms.meta_columns(), "_op"))
        key, note = upto, self.note(upto)
        wanted = targets.schema_for(images.table_schema(final, lists[-1]))
        order = [F.col(f"`{n}`") for n in wanted.names]
        changes_all = _union(parts).select(*order, "_op") if parts else None
        current = self.spark.read.format("delta").load(path) if live else None
        if current is None:
            if changes_all is None:
                if created is not None:
                    self.pending[(database, table)] = created
                    self.materialize(database, table)
                return
            targets.replace(self.spark, path, changes_all.where("_op = 'upsert'").drop("_op"), key=key, note=note)
        elif _fields(current.schema) != _fields(wanted):
            # A table rewrite: the target's rows carried to the new definition, the batch's changes applied.
            rows = _carried_rows(current, plan, have)
            if changes_all is not None:
                kept = rows.join(changes_all.select("_cdc_pk"), "_cdc_pk", "left_anti")
                rows = kept.unionByName(changes_all.where("_op = 'upsert'").drop("_op"))
            targets.replace(self.spark, path, rows.select(*order).localCheckpoint(), key=key, note=note)
        elif changes_all is None:
            return
        else:
            targets.merge(self.spark, path, changes_all, key=key, note=note)
        self.applied[(database, table)] = upto
        self.written.add(f"{database}.{table}")

    def _keyless(self, database: str, table: str, plan: _Plan) -> bool:
        """Whether this flush has rows without a primary key (only a table with such rows somewhere in the batch
        pays for the look)."""
        found = self.rows.get((database, table))
        if found is None or found.keyless == 0:
            return False
        return not plan.scope.where(F.col(Col.PRIMARY_KEY).isNull()).isEmpty()

    def _flush_by_value(
        self,
        database: str,
        table: str,
        plan: _Plan,
        upto: int,
        *,
        live: bool,
        marked: bool,
        has_rows: bool,
        created: tuple[int, list[str]] | None,
    ) -> None:
        """`flush` for a table whose rows are matched by value (multiset.py): its rows have no primary key, or
        had none since its last reset. One commit: a MERGE of the instances added and removed, or a rewrite of
        the table (its first rows, a definition change, a keyed table whose rows lost their key). `marked`: the
        live table is already matched by value."""
        low = self.applied_key(database, table)
        path = self.target(database, table).path
        final, lists = plan.defs[-1], plan.lists
        wanted = targets.schema_for(images.table_schema(final, lists[-1]))
        columns = images.column_names(final, lists[-1])
        order = [F.col(f"`{n}`") for n in wanted.names]
        steps = None
        if has_rows:
            image = self.write_history(database, table, plan, upto)
            held_types = {f.name: f.dataType for f in image.fields}
            versions = self._history_versions(database, table, low, upto).where(~F.col(transforms.MOVED_AWAY))
            versions = versions.withColumn("_seg", plan.segment)
            parts = []
            for i in range(len(plan.alters) + 1):
                segment = versions.where(F.col("_seg") == i) if plan.alters else versions
                for side, step in (("before", -1), ("after", 1)):
                    carried = images.carried(
                        plan.defs[i],
                        final,
                        lineage(lists[i:], plan.sqls[i:]),
                        lists[i],
                        source=functools.partial(_field_of, side),
                        older_types=held_types,
                    )
                    part = segment.where(F.col(side).isNotNull())
                    parts.append(
                        part.select(*carried, *transforms.meta_columns()[1:], F.lit(step).alias(multiset.STEP))
                    )
            steps = multiset.steps(_union(parts), columns)
        current = self.spark.read.format("delta").load(path) if live else None
        key, note = upto, self.note(upto)
        if current is not None and marked and _fields(current.schema) == _fields(wanted):
            if steps is None:
                return
            changes = multiset.changes(steps, current.select("_cdc_pk", "_cdc_order_key"), columns)
            targets.merge(self.spark, path, changes.select(*order, "_op"), key=key, note=note)
        elif current is None and steps is None:
            if created is not None:
                self.pending[(database, table)] = created
                self.materialize(database, table)
            return
        else:
            # The table written whole: its first rows, its rows carried to a new definition (hashed again), or
            # a keyed table's rows, each keeping its key as its instance id.
            held = None
            if current is not None:
                rows = _carried_rows(current, plan, targets.data_columns(path))
                held = multiset.rekeyed(rows, columns, by_value=marked).localCheckpoint()
            out = held.select(*order) if held is not None else None
            if steps is not None:
                changes = multiset.changes(steps, held, columns).localCheckpoint()
                added = changes.where("_op = 'upsert'").select(*order)
                if out is not None:
                    out = out.join(changes.where("_op = 'delete'").select("_cdc_pk"), "_cdc_pk", "left_anti")
                    out = out.select(*order).unionByName(added)
                else:
                    out = added
            assert out is not None
            out = out.withColumn("_cdc_pk", multiset.marked(F.col("_cdc_pk"))).select(*order)
            targets.replace(self.spark, path, out, key=key, note=note)
        self._done(database, table, upto)

    def _keep_keyless(self, database: str, table: str, upto: int, *, warn: bool = True) -> None:
        """The table's target becomes (or stays) a tombstone carrying `upto`; its history holds every version."""
        target = self.target(database, table)
        if warn:
            log.warning(
                "%s.%s has rows without a primary key: its history (%s) lists every version, but no current-state "
                "table is kept for it (an update or delete of a row without a key cannot be matched to the row it "
                "changed; duplicate rows are allowed). Fix: %s.",
                database,
                table,
                target.history,
                targets.no_key_fix(f"{database}.{table}"),
            )
        if self.applied_key(database, table) < upto:
            targets.drop(self.spark, target.path, key=upto, note=self.note(upto), reason=targets.NO_KEY)
        self._done(database, table, upto)

    def _plan(self, database: str, table: str, low: int, upto: int, have: list[str], has_rows: bool) -> _Plan:
        """The table's row events in (low, upto] and the definitions they were written under."""
        alters = [k for k in self.alters.get((database, table), []) if low < k <= upto]
        scope = self.batch.where(
            (F.col(Col.DATABASE) == database) & (F.col(Col.TABLE) == table) & (F.col(Col.ORDER_KEY) > low)
        ).where(F.col(Col.ORDER_KEY) <= upto)
        final = self.definition(database, table, upto)
        # Without a schema history every column is text, named by the target and the row images.
        names = (self._names(scope, have) if has_rows else have) if final is None else []
        defs = [*(self.definition(database, table, b) for b in [low, *alters]), final]
        lists = [d.column_names() if d is not None else names for d in defs]
        sqls = [self.statements.get(k) for k in alters] + [None]
        segment = F.size(
            F.filter(F.array(*[F.lit(k) for k in alters] or [F.lit(None)]), lambda k: k < F.col(Col.ORDER_KEY))
        )
        return _Plan(scope, alters, defs, lists, sqls, segment)

    def history_upto(self, database: str, table: str, upto: int) -> None:
        """Write the table's row versions up to `upto` to its history, and no current state (their rows are
        gone: a snapshot that starts at `upto + 1` re-sends the rows still there)."""
        low = self.applied_key(database, table)
        if low < upto and self._has_rows(database, table, low, upto):
            path = self.target(database, table).path
            live = targets.is_live(path)
            have = targets.data_columns(path) if live else []
            self.write_history(database, table, self._plan(database, table, low, upto, have, True), upto)

    def write_history(self, database: str, table: str, plan: _Plan, upto: int) -> StructType:
        """Append the table's row versions up to `upto` not yet in its history, typed; returns the history's
        image type (one commit carrying (APP_ID, upto); a change of a column's type rewrites the history)."""
        path = self.target(database, table).history
        written = targets.applied(path)
        current = self.spark.read.format("delta").load(path) if written >= 0 else None
        had = current.schema["after"].dataType if current is not None else None
        wanted = history_image(had, list(zip(plan.defs, plan.lists, strict=True)))
        if written >= upto and isinstance(had, StructType):
            return had
        found = self.rows.get((database, table))
        moves = found is None or found.moves > 0
        updates = found is None or found.updates > 0
        partial = found is None or found.partial > 0
        rows = transforms.history_rows(plan.scope.where(F.col(Col.ORDER_KEY) > written), moves=moves)
        rows = rows.withColumn("_seg", plan.segment)
        meta = [*transforms.HISTORY_META, Col.ABSENT, completion.SEGMENT] if partial else transforms.HISTORY_META
        parts = []
        segments = list(zip(plan.defs[:-1], plan.lists[:-1], strict=True))
        for i, (definition, names) in enumerate(segments):
            kind = F.col(Col.TYPE)
            parsed = images.parsed_images(F.col(Col.DATA), F.col(Col.OLD), definition, names, updates=updates)
            part = (rows.where(F.col("_seg") == i) if plan.alters else rows).select(*meta, parsed.alias("_p"))
            v = images.version_images(F.col("_p"), kind, definition, names, updates=updates)
            part = part.select(*meta, v.alias("_v"))
            before, after = images.images_of(F.col("_v"), kind, images.column_names(definition, names), updates=updates)
            if partial and definition is not None:
                defaults = {
                    n: images.default_value(definition.column(n), sc)
                    for n, sc in images.spark_columns(definition, names)
                }
                after = completion.defaulted(after, kind, F.col(Col.ABSENT), defaults)
            have = images.image_types(definition, names)
            part = part.select(
                *meta,
                images.project(before, have, wanted).alias("before"),
                images.project(after, have, wanted).alias("after"),
            )
            parts.append(part)
        new = _union(parts)
        if partial:
            new = self._completed(database, table, plan, new, current, wanted, written)
        self._save_history(path, current, wanted, new, found.count if found else 0, upto)
        return wanted

    def _completed(
        self,
        database: str,
        table: str,
        plan: _Plan,
        new: DataFrame,
        history: DataFrame | None,
        wanted: StructType,
        written: int,
    ) -> DataFrame:
        """`new` versions (with Col.ABSENT and their segments) with their partial images completed (completion.py),
        from the current-state rows the flush starts from and the history's versions written since them."""
        low = self.applied_key(database, table)
        path = self.target(database, table).path
        final, lists, sqls = plan.defs[-1], plan.lists, plan.sqls
        cols = [
            completion.Newest(
                name,
                sc.table,
                images.default_value(final.column(name) if final is not None else None, sc),
                [lineage(lists[j:], sqls[j:]).get(name) for j in range(len(lists) - 1)],
            )
            for name, sc in images.spark_columns(final, lists[-1])
        ]
        state = None
        if targets.is_live(path) and not targets.by_value(path):
            state = _carried_rows(self.spark.read.format("delta").load(path), plan, targets.data_columns(path))
        versions = new.withColumn(completion.HELD, F.lit(False))
        if history is not None and written > low:  # a run killed between the history's commit and the table's
            had = history.schema["after"].dataType
            assert isinstance(had, StructType)
            have = {f.name: f.dataType for f in had.fields}
            held = history.where((F.col(Col.ORDER_KEY) > low) & (F.col(Col.ORDER_KEY) <= written)).select(
                *transforms.HISTORY_META,
                F.lit(None).cast("array<string>").alias(Col.ABSENT),
                plan.segment.alias(completion.SEGMENT),
                images.project(F.col("before"), have, wanted).alias("before"),
                images.project(F.col("after"), have, wanted).alias("after"),
                F.lit(True).alias(completion.HELD),
            )
            versions = versions.unionByName(held)
        return completion.complete(versions.localCheckpoint(), state, cols, wanted)

    def _save_history(
        self, path: str, current: DataFrame | None, wanted: StructType, new: DataFrame, count: int, upto: int
    ) -> None:
        """Append `new` versions (about `count`, images of type `wanted`) to the history at `path`, whose rows are
        `current`; a change of a field's type rewrites the history, its older images cast (one commit carrying
        (APP_ID, upto))."""
        note, meta = self.note(upto), transforms.HISTORY_META
        had = current.schema["after"].dataType if current is not None else None
        if current is not None:
            targets.keep_history_stats(self.spark, path)
        if isinstance(had, StructType) and current is not None and _changed_types(had, wanted):
            have = {f.name: f.dataType for f in had.fields}
            old = current.select(
                *meta,
                images.project(F.col("before"), have, wanted).alias("before"),
                images.project(F.col("after"), have, wanted).alias("after"),
            )
            out = old.unionByName(new).localCheckpoint()
            files = min(MAX_HISTORY_FILES, 1 + (targets.row_count(path) + count) // HISTORY_ROWS_PER_FILE)
            targets.overwrite_history(out, path, files=files, key=upto, note=note)
        else:
            files = min(MAX_HISTORY_FILES, 1 + count // HISTORY_ROWS_PER_FILE)
            targets.append_history(new, path, files=files, key=upto, note=note)

    def _history_changes(self, database: str, table: str, low: int, upto: int) -> DataFrame:
        """The table's latest change per key in (low, upto], read from its history (transforms.changes)."""
        return transforms.changes(self._history_versions(database, table, low, upto))

    def _history_versions(self, database: str, table: str, low: int, upto: int) -> DataFrame:
        """The table's history versions with ordering key in (low, upto]."""
        versions = self.spark.read.format("delta").load(self.target(database, table).history)
        return versions.where((F.col(Col.ORDER_KEY) > low) & (F.col(Col.ORDER_KEY) <= upto))

    def ddl(self, event: Row) -> None:
        kind, key, db, table = event[Col.TYPE], event[Col.ORDER_KEY], event[Col.DATABASE], event[Col.TABLE]
        if kind == "table-create":
            self.flush(db, table, key - 1)
            if self.applied_key(db, table) < key:
                names = [c["name"] for c in json.loads(event[Col.DATA] or "{}").get("columns", [])]
                self.pending[(db, table)] = (key, names)
                self.applied[(db, table)] = key
        elif kind == "table-drop":
            self._drop(db, table, key)
        elif kind == "table-alter" and _moves(event):
            self._move(event)
        elif kind == "database-drop":
            for name in self._tables_of(db):
                self._drop(db, name, key)
        elif kind == "bootstrap-start":
            self._resnapshot(db, table, key)
        elif kind == "table-truncate":
            self._truncate(event)

    def _truncate(self, event: Row) -> None:
        """TRUNCATE TABLE at `key` removed every row the table held, with no row events: each becomes a `delete`
        version in the table's history (at the statement's position, its before image the row as it was), then
        one DELETE carrying (APP_ID, key) empties the current state. A table without a current state (none
        yet, or a tombstone) becomes an empty table: what is in it from here on is known, as after a snapshot's
        start. Rerun after a kill between the two commits, the history's append is skipped (it carries key)."""
        key, db, table = int(event[Col.ORDER_KEY]), event[Col.DATABASE], event[Col.TABLE]
        self.flush(db, table, key - 1)
        if self.applied_key(db, table) >= key:
            return
        target = self.target(db, table)
        held = targets.row_count(target.path) if targets.is_live(target.path) else 0
        if held > 0:
            self._history_of_truncate(event, target, held)
        self._empty_from(db, table, key)

    def _history_of_truncate(self, event: Row, target: Target, held: int) -> None:
        """A `delete` version of every row the current state holds (`held` rows), at the TRUNCATE's position."""
        key = int(event[Col.ORDER_KEY])
        rows = self.spark.read.format("delta").load(target.path)
        names = targets.data_columns(target.path)
        have = {f.name: f.dataType for f in rows.schema.fields if f.name in names or f.name == images.RAW}
        current = self.spark.read.format("delta").load(target.history) if targets.applied(target.history) >= 0 else None
        had = current.schema["after"].dataType if current is not None else None
        wanted = history_image(had, [(self.definition(target.database, target.table, key - 1), names)])
        fields = event.asDict()
        version = {c: F.lit(fields[c]) for c in transforms.HISTORY_META if c in fields}
        if targets.by_value(target.path):  # rows without a key: versions listed under none, as their others
            version[transforms.PK] = version[Col.PK_HASH] = F.lit(None)
        else:
            version[transforms.PK] = F.col("_cdc_pk")
            version[Col.PK_HASH] = transforms.row_hash(F.lit(target.database), F.lit(target.table), F.col("_cdc_pk"))
        version[transforms.MOVED_AWAY] = F.lit(False)
        version[Col.TYPE] = F.lit("delete")
        image = F.struct(*[F.col(f"`{n}`") for n in have])
        types = transforms.HISTORY_META_TYPES
        deletes = rows.select(
            *[version[c].cast(types.get(c, "string")).alias(c) for c in transforms.HISTORY_META],
            images.project(image, have, wanted).alias("before"),
            F.lit(None).cast(wanted).alias("after"),
        )
        self._save_history(target.history, current, wanted, deletes, held, key)

    def _resnapshot(self, db: str, table: str, key: int) -> None:
        """A snapshot of the table starts at `key`: it re-sends every row that existed at its read view, and rows
        changed since carry later keys, so a row whose last change is older than `key` is gone.

        The table's events before `key` need not be applied: whatever they did, their rows go. One DELETE
        carrying (APP_ID, key) removes the target's older rows (no target, or a dropped one: an empty table
        carrying it, as a snapshot of an empty table leaves); the next flush starts at `key`, and rewrites the
        emptied table to the definition of its rows if ALTERs came before.
        """
        self.materialize(db, table)
        if self.applied_key(db, table) >= key:
            return
        self.history_upto(db, table, key - 1)
        self._empty_from(db, table, key)

    def _empty_from(self, db: str, table: str, key: int) -> None:
        """No row of the table older than `key` is left (a TRUNCATE, a snapshot's start), in one commit carrying
        (APP_ID, key): a DELETE of the live table's older rows, else an empty table of its definition at `key`
        (also for a table matched by value: what follows decides again whether its rows have a key)."""
        path = self.target(db, table).path
        if targets.is_live(path) and not targets.by_value(path):
            targets.delete_older(self.spark, path, key=key, note=self.note(key))
        else:
            definition = self.definition(db, table, key)
            targets.create(self.spark, path, images.table_schema(definition, []), key=key, note=self.note(key))
        self._done(db, table, key)

    def materialize(self, db: str, table: str) -> None:
        """Write the empty table a CREATE in this batch started, if no flush wrote it."""
        created = self.pending.pop((db, table), None)
        if created is not None:
            key, names = created
            definition = self.definition(db, table, key)
            path = self.target(db, table).path
            targets.create(self.spark, path, images.table_schema(definition, names), key=key, note=self.note(key))
            self._done(db, table, key)

    def _done(self, db: str, table: str, key: int) -> None:
        self.applied[(db, table)] = key
        self.written.add(f"{db}.{table}")

    def _drop(self, db: str, table: str, key: int) -> None:
        self.flush(db, table, key - 1)
        if self.applied_key(db, table) < key:
            targets.drop(self.spark, self.target(db, table).path, key=key, note=self.note(key))
            self._done(db, table, key)

    def _move(self, event: Row) -> None:
        """RENAME TABLE (or ALTER ... RENAME): the source's rows, carried to the new definition, become the
        destination's; the source is dropped."""
        key, db, table = event[Col.ORDER_KEY], event[Col.DATABASE], event[Col.TABLE]
        definition = json.loads(event[Col.DATA] or "{}")
        dest_db, dest_table = definition.get("database", db), definition.get("table", table)
        self.flush(db, table, key - 1)
        src = self.target(db, table).path
        if self.applied_key(dest_db, dest_table) < key and targets.dropped_for(src) == targets.NO_KEY:
            self._keep_keyless(dest_db, dest_table, key)  # the rows moved are as unknown as they were
        elif self.applied_key(dest_db, dest_table) < key:
            before = self.definition(db, table, key - 1)
            after = self.definition(dest_db, dest_table, key)
            live = targets.is_live(src)
            old_names = targets.data_columns(src) if live else []
            new_names = [c["name"] for c in definition.get("columns", [])]
            names_then = _step(
                before.column_names() if before is not None else old_names,
                after.column_names() if after is not None else new_names,
                event[Col.SQL],
            )
            if live:
                current = self.spark.read.format("delta").load(src)
                rows = current.select(*images.carried(before, after, names_then, old_names), *META)
                wanted = targets.schema_for(images.table_schema(after, list(names_then)))
                if targets.by_value(src):  # its values may have changed with the definition: hashed again
                    rows = multiset.rekeyed(rows, images.column_names(after, list(names_then)), by_value=True)
                rows = rows.select(*[F.col(f"`{n}`") for n in wanted.names])
            else:
                rows = self.spark.createDataFrame([], targets.schema_for(images.table_schema(after, new_names)))
            dest = self.target(dest_db, dest_table).path
            targets.replace(self.spark, dest, rows.localCheckpoint(), key=key, note=self.note(key))
            self._done(dest_db, dest_table, key)
        if self.applied_key(db, table) < key:
            targets.drop(self.spark, src, key=key, note=self.note(key))
            self._done(db, table, key)

    def _tables_of(self, db: str) -> list[str]:
        """The database's tables: those with a target, those whose first rows are still in this batch, and those
        a CREATE in this batch started."""
        folder = Path(f"{self.output.rstrip('/')}/tables/{db}")
        on_disk = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        return sorted(on_disk | {t for d, t in [*self.rows, *self.pending] if d == db})


def _field_of(image: str, name: str) -> Column:
    return F.col(image).getField(name)


def _carried_rows(current: DataFrame, plan: _Plan, have: list[str]) -> DataFrame:
    """A target's rows (columns `have`) carried to the plan's newest definition; read as written under its first
    definition when their types match it, else as they are typed."""
    final = plan.defs[-1]
    as_first = targets.schema_for(images.table_schema(plan.defs[0], have))
    older = plan.defs[0] if _fields(as_first) == _fields(current.schema) else None
    return current.select(*images.carried(older, final, lineage([have, *plan.lists[1:]], plan.sqls), have), *META)


def _moves(event: Row) -> bool:
    """Whether a table-alter renames the table (its definition names another database or table)."""
    definition = json.loads(event[Col.DATA] or "{}")
    database, table = event[Col.DATABASE], event[Col.TABLE]
    return (definition.get("database", database), definition.get("table", table)) != (database, table)


def history_image(had: DataType | None, definitions: list[tuple[TableDef | None, list[str]]]) -> StructType:
    """The history's image type after a flush: the fields it had, in their order, each with its newest type,
    then the columns it did not have yet (a dropped or renamed column keeps its field: older versions hold it)."""
    newest: dict[str, DataType] = {}
    order: list[str] = []
    for definition, names in reversed(definitions):
        for name, dtype in images.image_types(definition, names).items():
            newest.setdefault(name, dtype)
    for definition, names in definitions[::-1]:
        order += [n for n in images.image_types(definition, names) if n not in order]
    fields = list(had.fields) if isinstance(had, StructType) else []
    known = {f.name for f in fields}
    out = [StructField(f.name, newest.get(f.name, f.dataType)) for f in fields]
    out += [StructField(n, newest[n]) for n in order if n not in known]
    return StructType(out)


def _changed_types(had: DataType, wanted: StructType) -> bool:
    """Whether a field the history had changes its type (its rows then are rewritten, cast)."""
    assert isinstance(had, StructType)
    types = {f.name: f.dataType for f in wanted.fields}
    return any(types.get(f.name, f.dataType) != f.dataType for f in had.fields)


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _step(old_cols: list[str], new_cols: list[str], sql: str | None) -> dict[str, str | None]:
    """new name -> old name (None: added) across one ALTER: the renames its statement names, else (no statement:
    a change log written without one) `renames`' guess from the names alone."""
    renamed = column_renames(sql) if sql else renames(old_cols, new_cols)
    renamed = {new: old for new, old in renamed.items() if old in old_cols}
    return {c: renamed.get(c, c if c in old_cols and c not in renamed.values() else None) for c in new_cols}


def _fields(schema: StructType) -> list[tuple[str, DataType]]:
    return [(f.name, f.dataType) for f in schema.fields]


def lineage(cols: list[list[str]], sqls: list[str | None]) -> dict[str, str | None]:
    """For each column of the last list, its name in the first (None: added since); one list per definition, and
    the statement that led from each to the next."""
    mapping: dict[str, str | None] = {c: c for c in cols[0]}
    for (older, newer), sql in zip(itertools.pairwise(cols), sqls, strict=False):
        step = _step(older, newer, sql)
        mapping = {c: (mapping.get(old) if old is not None else None) for c, old in step.items()}
    return mapping


def renames(old_cols: list[str], new_cols: list[str]) -> dict[str, str]:
    """new name -> old name for columns an ALTER renamed (RENAME/CHANGE COLUMN).

    Names on both sides are the same columns (MODIFY ... AFTER only moves them). The names that appear only on
    one side pair up in order when there are as many of each (a rename); otherwise they were dropped and added.
    """
    gone = [c for c in old_cols if c not in new_cols]
    came = [c for c in new_cols if c not in old_cols]
    return dict(zip(came, gone, strict=True)) if len(gone) == len(came) else {}


def _not_compacted(
    spark: SparkSession, batch: DataFrame, output: str, *, start: int, tables: list[tuple[str, str]]
) -> DataFrame:
    """`batch` without the row events an earlier run already compacted under another ordering key (the same
    event identity written twice): dedupe across runs, as `transforms.dedupe` does within one.

    Only history versions with ordering key <= `start` count: the rest may be this batch's own, written by a
    killed run. History files are written run by run in binlog order, so the binlog_file filter lets Delta's
    file statistics skip all but the recent ones.
    """
    paths = [Target(output, db, t).history for db, t in tables]
    paths = [p for p in paths if RsTable.is_deltatable(p)]
    if start < 0 or not paths:
        return batch
    files = [r[Col.BINLOG_FILE] for r in batch.select(Col.BINLOG_FILE).distinct().collect()]
    seen = _union(
        [
            spark.read.format("delta")
            .load(path)
            .where(F.col(Col.BINLOG_FILE).isin(files) & (F.col(Col.ORDER_KEY) <= start))
            .select(*transforms.IDENTITY)
            for path in paths
        ]
    )
    again = batch.select(*transforms.IDENTITY).join(seen, transforms.IDENTITY, "left_semi").distinct()
    again = again.persist(StorageLevel.MEMORY_AND_DISK)
    count = again.count()
    if count == 0:
        again.unpersist()
        return batch
    log.warning("dropping %d change-log events already compacted under an earlier ordering key", count)
    return batch.join(F.broadcast(again), transforms.IDENTITY, "left_anti")


def duplicates_possible(changelog: str, version: int, start: int) -> bool:
    """Whether the batch (ordering keys above `start`) can hold an event the change log already holds under a
    lower ordering key: a re-emission after a resume from a heartbeat or a failover.

    Decided from the Delta log's file statistics, no data read. An event and its repetition are rows of the same
    table partition from the same server; there, files in ordering-key order must move forward in the binlog. A
    file whose lowest (binlog file, position) is not past everything earlier files reached may repeat them (a
    transaction split across commits looks so too: the safe answer).
    """
    actions = pa.table(RsTable(changelog, version=version).get_add_actions(flatten=True)).to_pylist()
    # Delta's flattened file statistics of the change-log columns: "min.<column>", "max.<column>".
    lo = {c: f"min.{c}" for c in (Col.ORDER_KEY, Col.SERVER_ID, Col.BINLOG_FILE, Col.BINLOG_POS)}
    hi = {c: f"max.{c}" for c in (Col.ORDER_KEY, Col.SERVER_ID, Col.BINLOG_FILE, Col.BINLOG_POS)}
    if any(a.get(k) is None for a in actions for k in (*lo.values(), *hi.values())):
        return True
    reached: dict[tuple[int, str, str], Coordinate] = {}
    for a in sorted(actions, key=lambda a: (a[lo[Col.ORDER_KEY]], a[hi[Col.ORDER_KEY]])):
        server = int(a[lo[Col.SERVER_ID]])
        if server != int(a[hi[Col.SERVER_ID]]):
            return True
        where = (server, str(a.get(f"partition.{Col.DATABASE}")), str(a.get(f"partition.{Col.TABLE}")))
        low = Coordinate(str(a[lo[Col.BINLOG_FILE]]), int(a[lo[Col.BINLOG_POS]]))
        high = Coordinate(str(a[hi[Col.BINLOG_FILE]]), int(a[hi[Col.BINLOG_POS]]))
        # Parquet's min/max of the file names are by text, binlog order is by the file's number: across a change
        # of its width (.999999, .1000000) the text's minimum is the later file. Such statistics bound nothing.
        if Coordinate(low.file, 0) > Coordinate(high.file, 0):
            return True
        if int(a[hi[Col.ORDER_KEY]]) > start and where in reached and low <= reached[where]:
            return True
        reached[where] = max(reached.get(where, high), high)
    return False


def run(spark: SparkSession, *, changelog: str, output: str | None = None) -> RunResult:
    """Compact what the change log holds beyond the last finished run. Safe to kill and rerun at any point."""
    started = time.monotonic()
    output = output or default_output(changelog)
    version = RsTable(changelog).version()
    start = last_compacted(output)
    log_df = spark.read.format("delta").option("versionAsOf", version).load(changelog)
    if Col.ABSENT not in log_df.columns:  # a change log written before the worker listed partial images' columns
        log_df = log_df.withColumn(Col.ABSENT, F.lit(None).cast("array<string>"))
    batch = log_df.where(F.col(Col.ORDER_KEY) > start)
    row_events = batch.where(F.col(Col.TYPE).isin(*transforms.ROW_TYPES))
    per_table = (
        row_events.groupBy(Col.DATABASE, Col.TABLE)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min(Col.ORDER_KEY).alias("low"),
            F.max(Col.ORDER_KEY).alias("high"),
            F.count(F.when(transforms.pk_moved(row_events), 1)).alias("moves"),
            F.count(F.when(F.col(Col.TYPE) == "update", 1)).alias("updates"),
            F.count(F.when(F.col(Col.PRIMARY_KEY).isNull(), 1)).alias("keyless"),
            F.count(Col.ABSENT).alias("partial"),
        )
        .collect()
    )
    # Every non-row event of the change log (few): the schema timeline, and this batch's DDL.
    others = _timeline(log_df, output, start)
    batch_ddl = _first_of_each([e for e in others if e[Col.ORDER_KEY] > start])
    ends = [int(r["high"]) for r in per_table] + [int(e[Col.ORDER_KEY]) for e in batch_ddl]
    if not ends:
        return RunResult(version, start, start, 0, seconds=time.monotonic() - started)
    end = max(ends)
    count = sum(int(r["n"]) for r in per_table) + len(batch_ddl)
    rows = {
        (r[Col.DATABASE], r[Col.TABLE]): TableRows(
            int(r["n"]),
            int(r["low"]),
            int(r["high"]),
            int(r["moves"]),
            int(r["updates"]),
            int(r["keyless"]),
            int(r["partial"]),
        )
        for r in per_table
    }
    if duplicates_possible(changelog, version, start):
        batch = transforms.dedupe(_not_compacted(spark, batch, output, start=start, tables=list(rows)))
    defs = Definitions.load(changelog, marks_of(others))
    work = _Run(spark, batch, output, version, defs, batch_ddl, rows)
    for event in batch_ddl:
        work.ddl(event)
    # Every table's last stretch, several at once: on two cores most of a small table's write is waiting
    # (planning, the Delta log, the commit), which other tables' writes fill.
    with ThreadPoolExecutor(max_workers=PARALLEL_FLUSHES) as pool:
        done = [pool.submit(work.flush, db, table, end) for db, table in sorted({*rows, *work.alters, *work.pending})]
        for future in done:
            future.result()
    _keep_timeline(spark, log_df, output, others, end)
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


def _first_of_each(events: list[Row]) -> list[Row]:
    """Non-row events once per identity (the lowest ordering key: a re-emitted DDL is applied once)."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for e in events:
        identity = tuple(e[c] for c in transforms.IDENTITY)
        if identity not in seen:
            seen.add(identity)
            out.append(e)
    return out
