"""The current state of a table whose rows have no primary key (or had none since its last reset): the multiset
of its rows, matched by value (multiset.py); or, for outputs written before that, a tombstone."""

from __future__ import annotations

import functools
import logging

from mysqlcapture_api.changelog import Col
from pyspark.sql import Column
from pyspark.sql import functions as F

from mysqlcapture_compaction import images, multiset, targets, transforms
from mysqlcapture_compaction.lineage import lineage
from mysqlcapture_compaction.plan import RunPlan, TablePlan, fields
from mysqlcapture_compaction.versions import Versions

log = logging.getLogger(__name__)


class ByValue:
    def __init__(self, plan: RunPlan, versions: Versions) -> None:
        self.plan, self.versions = plan, versions

    def keyless(self, database: str, table: str, plan: TablePlan) -> bool:
        """Whether this flush has rows without a primary key (only a table with such rows somewhere in the batch
        pays for the look)."""
        found = self.plan.rows.get((database, table))
        if found is None or found.keyless == 0:
            return False
        return not plan.scope.where(F.col(Col.PRIMARY_KEY).isNull()).isEmpty()

    def flush(
        self,
        database: str,
        table: str,
        plan: TablePlan,
        upto: int,
        *,
        live: bool,
        marked: bool,
        has_rows: bool,
    ) -> bool:
        """`CurrentState.flush` for a table whose rows are matched by value. One commit: a MERGE of the instances
        added and removed, or a rewrite of the table (its first rows, a definition change, a keyed table whose
        rows lost their key). `marked`: the live table is already matched by value. False when there was
        nothing to write (a table not written yet, with no rows)."""
        run = self.plan
        low = run.applied_key(database, table)
        path = run.target(database, table).path
        final, lists = plan.defs[-1], plan.lists
        wanted = targets.schema_for(images.table_schema(final, lists[-1]))
        columns = images.column_names(final, lists[-1])
        order = [F.col(f"`{n}`") for n in wanted.names]
        steps = None
        if has_rows:
            image = self.versions.write(database, table, plan, upto)
            held_types = {f.name: f.dataType for f in image.fields}
            versions = self.versions.between(database, table, low, upto).where(~F.col(transforms.MOVED_AWAY))
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
            steps = multiset.steps(transforms.union(parts), columns)
        current = run.spark.read.format("delta").load(path) if live else None
        key, note = upto, run.note(upto)
        if current is not None and marked and fields(current.schema) == fields(wanted):
            if steps is None:
                return True
            changes = multiset.changes(steps, current.select("_cdc_pk", "_cdc_order_key"), columns)
            targets.merge(run.spark, path, changes.select(*order, "_op"), key=key, note=note)
        elif current is None and steps is None:
            return False
        else:
            # The table written whole: its first rows, its rows carried to a new definition (hashed again), or
            # a keyed table's rows, each keeping its key as its instance id.
            held = None
            if current is not None:
                rows = plan.carried(current, targets.data_columns(path))
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
            targets.replace(run.spark, path, out, key=key, note=note)
        run.done(database, table, upto)
        return True

    def tombstone(self, database: str, table: str, upto: int, *, warn: bool = True) -> None:
        """The table's target becomes (or stays) a tombstone carrying `upto`; its history holds every version."""
        target = self.plan.target(database, table)
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
        if self.plan.applied_key(database, table) < upto:
            targets.drop(self.plan.spark, target.path, key=upto, note=self.plan.note(upto), reason=targets.NO_KEY)
        self.plan.done(database, table, upto)


def _field_of(image: str, name: str) -> Column:
    return F.col(image).getField(name)
