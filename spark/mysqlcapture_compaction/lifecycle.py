"""A table's life from the change log's non-row events: CREATE, DROP, RENAME, TRUNCATE, a snapshot's start.

Each flushes the table's rows up to the event, then applies the event in one commit carrying its ordering key.
"""

from __future__ import annotations

import json

from mysqlcapture_api.changelog import Col
from pyspark.sql import Row
from pyspark.sql import functions as F

from mysqlcapture_compaction import images, multiset, output, targets
from mysqlcapture_compaction.current_state import CurrentState
from mysqlcapture_compaction.lineage import step
from mysqlcapture_compaction.plan import RunPlan, moves
from mysqlcapture_compaction.transforms import META
from mysqlcapture_compaction.versions import Versions


class Lifecycle:
    def __init__(self, plan: RunPlan, versions: Versions, current: CurrentState) -> None:
        self.plan, self.versions, self.current = plan, versions, current

    def apply(self, event: Row) -> None:
        kind, key, db, table = event[Col.TYPE], event[Col.ORDER_KEY], event[Col.DATABASE], event[Col.TABLE]
        if kind == "table-create":
            self.current.flush(db, table, key - 1)
            if self.plan.applied_key(db, table) < key:
                names = [c["name"] for c in json.loads(event[Col.DATA] or "{}").get("columns", [])]
                self.plan.pending[(db, table)] = (key, names)
                self.plan.applied[(db, table)] = key
        elif kind == "table-drop":
            self._drop(db, table, key)
        elif kind == "table-alter" and moves(event):
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
        self.current.flush(db, table, key - 1)
        if self.plan.applied_key(db, table) >= key:
            return
        target = self.plan.target(db, table)
        held = targets.row_count(target.path) if targets.is_live(target.path) else 0
        if held > 0:
            self.versions.removed(event, target, held)
        self._empty_from(db, table, key)

    def _resnapshot(self, db: str, table: str, key: int) -> None:
        """A snapshot of the table starts at `key`: it re-sends every row that existed at its read view, and rows
        changed since carry later keys, so a row whose last change is older than `key` is gone.

        The table's events before `key` need not be applied: whatever they did, their rows go. One DELETE
        carrying (APP_ID, key) removes the target's older rows (no target, or a dropped one: an empty table
        carrying it, as a snapshot of an empty table leaves); the next flush starts at `key`, and rewrites the
        emptied table to the definition of its rows if ALTERs came before.
        """
        self.current.materialize(db, table)
        if self.plan.applied_key(db, table) >= key:
            return
        self.versions.upto(db, table, key - 1)
        self._empty_from(db, table, key)

    def _empty_from(self, db: str, table: str, key: int) -> None:
        """No row of the table older than `key` is left (a TRUNCATE, a snapshot's start), in one commit carrying
        (APP_ID, key): a DELETE of the live table's older rows, else an empty table of its definition at `key`
        (also for a table matched by value: what follows decides again whether its rows have a key)."""
        run = self.plan
        path = run.target(db, table).path
        if targets.is_live(path) and not targets.by_value(path):
            targets.delete_older(run.spark, path, key=key, note=run.note(key))
        else:
            definition = run.definition(db, table, key)
            targets.create(run.spark, path, images.table_schema(definition, []), key=key, note=run.note(key))
        run.done(db, table, key)

    def _drop(self, db: str, table: str, key: int) -> None:
        self.current.flush(db, table, key - 1)
        if self.plan.applied_key(db, table) < key:
            targets.drop(self.plan.spark, self.plan.target(db, table).path, key=key, note=self.plan.note(key))
            self.plan.done(db, table, key)

    def _move(self, event: Row) -> None:
        """RENAME TABLE (or ALTER ... RENAME): the source's rows, carried to the new definition, become the
        destination's; the source is dropped."""
        run = self.plan
        key, db, table = event[Col.ORDER_KEY], event[Col.DATABASE], event[Col.TABLE]
        definition = json.loads(event[Col.DATA] or "{}")
        dest_db, dest_table = definition.get("database", db), definition.get("table", table)
        self.current.flush(db, table, key - 1)
        src = run.target(db, table).path
        if run.applied_key(dest_db, dest_table) < key and targets.dropped_for(src) == targets.NO_KEY:
            self.current.by_value.tombstone(dest_db, dest_table, key)  # the rows moved are as unknown as they were
        elif run.applied_key(dest_db, dest_table) < key:
            before = run.definition(db, table, key - 1)
            after = run.definition(dest_db, dest_table, key)
            live = targets.is_live(src)
            old_names = targets.data_columns(src) if live else []
            new_names = [c["name"] for c in definition.get("columns", [])]
            names_then = step(
                before.column_names() if before is not None else old_names,
                after.column_names() if after is not None else new_names,
                event[Col.SQL],
            )
            if live:
                current = run.spark.read.format("delta").load(src)
                rows = current.select(*images.carried(before, after, names_then, old_names), *META)
                wanted = targets.schema_for(images.table_schema(after, list(names_then)))
                if targets.by_value(src):  # its values may have changed with the definition: hashed again
                    rows = multiset.rekeyed(rows, images.column_names(after, list(names_then)), by_value=True)
                rows = rows.select(*[F.col(f"`{n}`") for n in wanted.names])
            else:
                rows = run.spark.createDataFrame([], targets.schema_for(images.table_schema(after, new_names)))
            dest = run.target(dest_db, dest_table).path
            targets.replace(run.spark, dest, rows.localCheckpoint(), key=key, note=run.note(key))
            run.done(dest_db, dest_table, key)
        if run.applied_key(db, table) < key:
            targets.drop(run.spark, src, key=key, note=run.note(key))
            run.done(db, table, key)

    def _tables_of(self, db: str) -> list[str]:
        """The database's tables: those with a target, those whose first rows are still in this batch, and those
        a CREATE in this batch started."""
        on_disk = output.tables_of(self.plan.output, db)
        return sorted(on_disk | {t for d, t in [*self.plan.rows, *self.plan.pending] if d == db})
