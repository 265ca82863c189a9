"""Each table's history (history/<db>/<table>): every row version, typed by the definition it was written
under, its partial images completed; one commit per flush carrying (APP_ID, upto)."""

from __future__ import annotations

from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import TableDef
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from mysqlcapture_compaction import completion, images, targets, transforms
from mysqlcapture_compaction.lineage import lineage
from mysqlcapture_compaction.plan import RunPlan, TablePlan
from mysqlcapture_compaction.targets import Target

# A table's history gets one file per this many new versions in a run (at most MAX_HISTORY_FILES).
HISTORY_ROWS_PER_FILE = 1_000_000
MAX_HISTORY_FILES = 16


class Versions:
    """The run's writes to the tables' histories."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan

    def upto(self, database: str, table: str, upto: int) -> None:
        """Write the table's row versions up to `upto` to its history, and no current state (their rows are
        gone: a snapshot that starts at `upto + 1` re-sends the rows still there)."""
        low = self.plan.applied_key(database, table)
        if low < upto and self.plan.has_rows(database, table, low, upto):
            path = self.plan.target(database, table).path
            have = targets.data_columns(path) if targets.is_live(path) else []
            self.write(database, table, self.plan.table_plan(database, table, low, upto, have, True), upto)

    def write(self, database: str, table: str, plan: TablePlan, upto: int) -> StructType:
        """Append the table's row versions up to `upto` not yet in its history, typed; returns the history's
        image type (one commit carrying (APP_ID, upto); a change of a column's type rewrites the history)."""
        path = self.plan.target(database, table).history
        written = targets.applied(path)
        current = self.plan.spark.read.format("delta").load(path) if written >= 0 else None
        had = current.schema["after"].dataType if current is not None else None
        wanted = history_image(had, list(zip(plan.defs, plan.lists, strict=True)))
        if written >= upto and isinstance(had, StructType):
            return had
        found = self.plan.rows.get((database, table))
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
            parsed = images.parsed_images(
                F.col(Col.DATA), F.col(Col.OLD), definition, names, updates=updates, json_null=_json_nulls(rows)
            )
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
        new = transforms.union(parts)
        if partial:
            new = self._completed(database, table, plan, new, current, wanted, written)
        self.save(path, current, wanted, new, found.count if found else 0, upto)
        return wanted

    def _completed(
        self,
        database: str,
        table: str,
        plan: TablePlan,
        new: DataFrame,
        history: DataFrame | None,
        wanted: StructType,
        written: int,
    ) -> DataFrame:
        """`new` versions (with Col.ABSENT and their segments) with their partial images completed (completion.py),
        from the current-state rows the flush starts from and the history's versions written since them."""
        low = self.plan.applied_key(database, table)
        path = self.plan.target(database, table).path
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
            state = plan.carried(self.plan.spark.read.format("delta").load(path), targets.data_columns(path))
        versions = new.withColumn(completion.HELD, F.lit(False))
        if history is not None and written > low:  # a run killed between the history's commit and the table's
            had = history.schema["after"].dataType
            assert isinstance(had, StructType)
            have = {f.name: f.dataType for f in had.fields}
            held = history.where((F.col(Col.ORDER_KEY) > low) & (F.col(Col.ORDER_KEY) <= written)).select(
                *transforms.history_meta(history),
                F.lit(None).cast("array<string>").alias(Col.ABSENT),
                plan.segment.alias(completion.SEGMENT),
                images.project(F.col("before"), have, wanted).alias("before"),
                images.project(F.col("after"), have, wanted).alias("after"),
                F.lit(True).alias(completion.HELD),
            )
            versions = versions.unionByName(held)
        return completion.complete(versions.localCheckpoint(), state, cols, wanted)

    def save(
        self, path: str, current: DataFrame | None, wanted: StructType, new: DataFrame, count: int, upto: int
    ) -> None:
        """Append `new` versions (about `count`, images of type `wanted`) to the history at `path`, whose rows are
        `current`; a change of a field's type rewrites the history, its older images cast (one commit carrying
        (APP_ID, upto))."""
        note = self.plan.note(upto)
        had = current.schema["after"].dataType if current is not None else None
        spark = self.plan.spark
        if current is not None:
            targets.keep_history_stats(spark, path)
        if isinstance(had, StructType) and current is not None and changed_types(had, wanted):
            have = {f.name: f.dataType for f in had.fields}
            old = current.select(
                *transforms.history_meta(current),
                images.project(F.col("before"), have, wanted).alias("before"),
                images.project(F.col("after"), have, wanted).alias("after"),
            )
            out = old.unionByName(new).localCheckpoint()
            files = min(MAX_HISTORY_FILES, 1 + (targets.row_count(path) + count) // HISTORY_ROWS_PER_FILE)
            targets.overwrite_history(out, path, files=files, key=upto, note=note)
        else:
            files = min(MAX_HISTORY_FILES, 1 + count // HISTORY_ROWS_PER_FILE)
            targets.append_history(new, path, files=files, key=upto, note=note)

    def changes(self, database: str, table: str, low: int, upto: int) -> DataFrame:
        """The table's latest change per key in (low, upto], read from its history (transforms.changes)."""
        return transforms.changes(self.between(database, table, low, upto))

    def between(self, database: str, table: str, low: int, upto: int) -> DataFrame:
        """The table's history versions with ordering key in (low, upto]."""
        versions = self.plan.spark.read.format("delta").load(self.plan.target(database, table).history)
        return versions.where((F.col(Col.ORDER_KEY) > low) & (F.col(Col.ORDER_KEY) <= upto))

    def removed(self, event: Row, target: Target, held: int) -> None:
        """A `delete` version, at `event`'s position, of every row the current state holds (`held` rows): what a
        TRUNCATE does to the history."""
        key = int(event[Col.ORDER_KEY])
        spark = self.plan.spark
        rows = spark.read.format("delta").load(target.path)
        names = targets.data_columns(target.path)
        have = {f.name: f.dataType for f in rows.schema.fields if f.name in names or f.name == images.RAW}
        current = spark.read.format("delta").load(target.history) if targets.applied(target.history) >= 0 else None
        had = current.schema["after"].dataType if current is not None else None
        wanted = history_image(had, [(self.plan.definition(target.database, target.table, key - 1), names)])
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
            *[version.get(c, F.lit(None)).cast(types.get(c, "string")).alias(c) for c in transforms.HISTORY_META],
            images.project(image, have, wanted).alias("before"),
            F.lit(None).cast(wanted).alias("after"),
        )
        self.save(target.history, current, wanted, deletes, held, key)


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


def changed_types(had: DataType, wanted: StructType) -> bool:
    """Whether a field the history had changes its type (its rows then are rewritten, cast)."""
    assert isinstance(had, StructType)
    types = {f.name: f.dataType for f in wanted.fields}
    return any(types.get(f.name, f.dataType) != f.dataType for f in had.fields)


def _json_nulls(rows: DataFrame) -> tuple[Column, Column] | None:
    """The events' Col.JSON_NULL and Col.OLD_JSON_NULL, when the change log has them."""
    if Col.JSON_NULL not in rows.columns or Col.OLD_JSON_NULL not in rows.columns:
        return None
    return F.col(Col.JSON_NULL), F.col(Col.OLD_JSON_NULL)
