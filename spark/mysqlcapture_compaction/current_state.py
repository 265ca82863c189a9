"""Each table's current state (tables/<db>/<table>): the newest version of every row, MERGEd from the versions a
flush just wrote to the table's history, or the table rewritten when its definition changed."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mysqlcapture_compaction import images, targets, transforms
from mysqlcapture_compaction.by_value import ByValue
from mysqlcapture_compaction.lineage import lineage
from mysqlcapture_compaction.plan import RunPlan, fields
from mysqlcapture_compaction.versions import Versions


class CurrentState:
    def __init__(self, plan: RunPlan, versions: Versions) -> None:
        self.plan, self.versions = plan, versions
        self.by_value = ByValue(plan, versions)

    def flush(self, database: str, table: str, upto: int) -> None:
        """Apply the table's row changes with ordering key in (applied, upto], and its ALTERs there: one commit.

        Rows between two ALTERs are read with the definition they were written under and carried to the
        newest one (renamed, cast, defaulted), like the target's own rows when its definition changed.
        """
        run = self.plan
        low = run.applied_key(database, table)
        path = run.target(database, table).path
        alters = run.alters_in(database, table, low, upto)
        has_rows = run.has_rows(database, table, low, upto)
        if low >= upto or not (has_rows or alters):
            self.materialize(database, table)
            return
        created = run.pending.pop((database, table), None)
        live = created is None and targets.is_live(path)
        have = targets.data_columns(path) if live else []
        plan = run.table_plan(database, table, low, upto, have, has_rows)
        if created is None and targets.dropped_for(path) == targets.NO_KEY:
            if has_rows:
                self.versions.write(database, table, plan, upto)
            self.by_value.tombstone(database, table, upto, warn=has_rows)
            return
        marked = live and targets.by_value(path)
        if marked or self.by_value.keyless(database, table, plan):
            if not self.by_value.flush(database, table, plan, upto, live=live, marked=marked, has_rows=has_rows):
                self._not_yet(database, table, created)
            return
        final, lists = plan.defs[-1], plan.lists
        parts: list[DataFrame] = []
        if has_rows:
            image = self.versions.write(database, table, plan, upto)
            # The current state from the history just written: every image parsed once, for both.
            changes = self.versions.changes(database, table, low, upto).withColumn("_seg", plan.segment)
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
        key, note = upto, run.note(upto)
        wanted = targets.schema_for(images.table_schema(final, lists[-1]))
        order = [F.col(f"`{n}`") for n in wanted.names]
        changes_all = transforms.union(parts).select(*order, "_op") if parts else None
        current = run.spark.read.format("delta").load(path) if live else None
        if current is None:
            if changes_all is None:
                self._not_yet(database, table, created)
                return
            targets.replace(run.spark, path, changes_all.where("_op = 'upsert'").drop("_op"), key=key, note=note)
        elif fields(current.schema) != fields(wanted):
            # A table rewrite: the target's rows carried to the new definition, the batch's changes applied.
            rows = plan.carried(current, have)
            if changes_all is not None:
                kept = rows.join(changes_all.select("_cdc_pk"), "_cdc_pk", "left_anti")
                rows = kept.unionByName(changes_all.where("_op = 'upsert'").drop("_op"))
            targets.replace(run.spark, path, rows.select(*order).localCheckpoint(), key=key, note=note)
        elif changes_all is None:
            return
        else:
            targets.merge(run.spark, path, changes_all, key=key, note=note)
        run.done(database, table, upto)

    def _not_yet(self, database: str, table: str, created: tuple[int, list[str]] | None) -> None:
        """Nothing written: a table a CREATE started is written empty."""
        if created is not None:
            self.plan.pending[(database, table)] = created
            self.materialize(database, table)

    def materialize(self, database: str, table: str) -> None:
        """Write the empty table a CREATE in this batch started, if no flush wrote it."""
        created = self.plan.pending.pop((database, table), None)
        if created is not None:
            key, names = created
            definition = self.plan.definition(database, table, key)
            path = self.plan.target(database, table).path
            targets.create(
                self.plan.spark, path, images.table_schema(definition, names), key=key, note=self.plan.note(key)
            )
            self.plan.done(database, table, key)
