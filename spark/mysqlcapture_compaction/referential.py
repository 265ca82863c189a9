"""Foreign-key actions the server did not log (the worker's `referential-action` events), expanded into the row
events they stand for before a run compacts its batch.

An action event names a child table, one of its foreign keys, what ran (CASCADE or SET NULL, on a delete or an
update of a parent row) and the parent's old (and new) values of the referenced columns. The rows it
changed are the child's rows whose key columns held those values at the event's place: each row's latest version
before it (from the child's current state as of the run's start, then the batch's row events) is alive and holds
them. Each becomes a row event at the action's ordering key: a delete, or an update of the key's columns to null
or to the parent's new values. Their images are partial (`absent` lists every other column), so
compaction completes them from the row's previous version, as it completes a MINIMAL image.

A child's changed rows change its own children's rows in turn, by their foreign keys' actions (the server did not
log those either): derived the same way, level by level, a table referencing itself included. A row changes once
at one place (rows referencing each other in a ring lead back to it; where two of its keys reach it, a delete
wins). Actions at different places of one batch can meet on one row (a row one action deleted is not there for a
later one; a key changed twice): the expansion runs again, with what it derived, until nothing changes.

Values are matched typed (each side parsed by its table's definition), as the server compares them, except that
a `_ci` collation's case-insensitive or PAD SPACE equality is not followed: a child key that differs from its
parent's only so is not matched.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import CHANGING_ACTIONS, ForeignKeyDef, TableDef
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from mysqlcapture_compaction import images, transforms
from mysqlcapture_compaction.child_rows import CARRIED, CARRIED_TYPES, EVENT_COLUMNS, ChildRows, Group, find
from mysqlcapture_compaction.definitions import Definitions

log = logging.getLogger(__name__)
TYPE = transforms.ACTION_TYPES[0]
MAX_LEVELS = 32  # a chain of foreign keys (or of a table's rows referencing each other) this deep at most
MAX_ROUNDS = 4
_DECODER = json.JSONDecoder()


def raw_items(text: str) -> list[str]:
    """The JSON text of each element of a JSON array, as written."""
    i, out = text.index("[") + 1, list[str]()
    while True:
        while text[i] in " \t\n\r,":
            i += 1
        if text[i] == "]":
            return out
        _, end = _DECODER.raw_decode(text, i)
        out.append(text[i:end])
        i = end


def _object(names: tuple[str, ...], values: list[str]) -> str:
    return "{" + ",".join(f"{json.dumps(n)}:{v}" for n, v in zip(names, values, strict=True)) + "}"


class Expansion:
    """The row events a batch's action events stand for (module doc)."""

    def __init__(
        self, spark: SparkSession, output: str, defs: Definitions, start: int, resets: list[Row] | None = None
    ) -> None:
        """`resets`: the batch's non-row events (child_rows.ChildRows)."""
        self.spark, self.defs = spark, defs
        self.rows = ChildRows(spark, output, defs, start, resets)

    def definition(self, database: str, table: str, key: int) -> TableDef | None:
        return self.defs.table(database, table, self.defs.version_at(key))

    def run(self, batch: DataFrame, actions: list[Row]) -> DataFrame | None:
        """The derived row events (the change log's columns), or None when the actions change no row."""
        if not actions:
            return None
        derived: DataFrame | None = None
        for _ in range(MAX_ROUNDS):
            found, moved_keys = self._round(batch, actions, derived)
            if found is None:
                return None
            found = transforms.materialized(found)
            if derived is not None and _same(found, derived):
                return found
            if derived is None and not moved_keys and not _met(found):
                return found  # nothing one action did can change what another found
            derived = found
        log.warning("foreign-key actions still met on rows after %d passes: the last pass is kept", MAX_ROUNDS)
        return derived

    def _round(self, batch: DataFrame, actions: list[Row], derived: DataFrame | None) -> tuple[DataFrame | None, bool]:
        """One pass: every action's rows, then their children's, level by level, seeing `derived` (the previous
        pass's row events) as row events of the batch; and whether a CASCADE gave a key new values (a later
        action may find a row under them)."""
        rows = batch.where(F.col(Col.TYPE).isin(*transforms.ROW_TYPES))
        if derived is not None:
            rows = rows.unionByName(derived, allowMissingColumns=True)
        # Read once a pass: each child table's versions read the batch again otherwise (the change log's files, its
        # JSON parsed), once per table and pass (an 887-event batch with 7 child tables, 4 passes: its versions took
        # 23 s with that, 10 s without).
        rows = transforms.materialized(rows)
        self.rows.new_pass()
        groups = self._explicit(actions)
        out: list[DataFrame] = []
        reached: dict[tuple[str, str], DataFrame] = {}
        moved_keys = False
        for _ in range(MAX_LEVELS):
            if not groups:
                break
            following: list[Group] = []
            for group in groups:
                changed = self.rows.apply(rows, group)
                if changed is None:
                    continue
                # A row changes once at a place (rows that reference each other in a ring lead back to it), but a
                # delete there wins over an update (two of the row's foreign keys reached it: it ends gone).
                seen = reached.get(group.child)
                if seen is not None:
                    again = changed.join(seen, [Col.PRIMARY_KEY, Col.ORDER_KEY], "left_semi")
                    settled = seen.where(F.col("_gone"))
                    changed = changed.join(seen, [Col.PRIMARY_KEY, Col.ORDER_KEY], "left_anti").unionByName(
                        again.where(F.col(Col.TYPE) == "delete").join(
                            settled, [Col.PRIMARY_KEY, Col.ORDER_KEY], "left_anti"
                        )
                    )
                changed = transforms.materialized(changed)
                now = changed.select(Col.PRIMARY_KEY, Col.ORDER_KEY, (F.col(Col.TYPE) == "delete").alias("_gone"))
                reached[group.child] = now if seen is None else transforms.materialized(seen.unionByName(now))
                cascaded = (F.col(Col.TYPE) == "update") & (F.col("_action") == "CASCADE")
                found = changed.agg(F.count(F.lit(1)), F.max(Col.ORDER_KEY), F.count(F.when(cascaded, 1))).first()
                if found is None or found[0] == 0:
                    continue
                moved_keys = moved_keys or found[2] > 0
                out.append(changed.select(*EVENT_COLUMNS))
                following += self._children(group, changed, int(found[1]))
            groups = following
        else:
            log.warning("foreign-key actions run deeper than %d levels: the deeper ones are not applied", MAX_LEVELS)
        if not out:
            return None, moved_keys
        every = transforms.union(out)
        first = Window.partitionBy(Col.DATABASE, Col.TABLE, Col.PRIMARY_KEY, Col.ORDER_KEY).orderBy(
            (F.col(Col.TYPE) == "delete").desc()
        )
        return every.withColumn("_n", F.row_number().over(first)).where("_n = 1").drop("_n"), moved_keys

    # -- the actions the change log holds ----------------------------------------------------------------------
    def _explicit(self, actions: list[Row]) -> list[Group]:
        by: dict[tuple[str, str, str], list[tuple[Row, dict[str, Any]]]] = {}
        for event in actions:
            doc = json.loads(event[Col.DATA])
            by.setdefault((event[Col.DATABASE], event[Col.TABLE], doc["constraint"]), []).append((event, doc))
        groups = []
        for (db, table, name), items in by.items():
            key = max(int(e[Col.ORDER_KEY]) for e, _ in items)
            definition = self.definition(db, table, key)
            if definition is None:
                log.warning(
                    "%s.%s: no definition at ordering key %d (no schema history?): the rows foreign key %s's actions "
                    "changed in it are not applied",
                    db,
                    table,
                    key,
                    name,
                )
                continue
            # The events say what the key is: a schema history written before foreign keys were kept in it
            # has none (its children's children then are not followed).
            fk = next((f for f in definition.foreign_keys if f.name == name), None) or _described(items)
            named = [find(definition.column_names(), c) for c in fk.columns]
            cols = tuple(c for c in named if c is not None)
            if len(cols) != len(named):
                log.warning("%s.%s has no column %s of foreign key %s: its actions are not applied", db, table,
                            ", ".join(fk.columns), name)  # fmt: skip
                continue
            records = []
            for event, doc in items:
                for one in _raw_keys(event[Col.DATA]):
                    news = one.get("new", [None] * len(cols))
                    old = _object(cols, one["old"])
                    records.append(
                        (int(event[Col.ORDER_KEY]), doc["on"], doc["action"], old, *news, *[event[c] for c in CARRIED])
                    )
            schema = StructType(
                [
                    StructField("_key", LongType()),
                    StructField("_on", StringType()),
                    StructField("_action", StringType()),
                    StructField("_old", StringType()),
                    *[StructField(f"_n{i}", StringType()) for i in range(len(cols))],
                    *[StructField(c, CARRIED_TYPES[c]) for c in CARRIED],
                ]
            )
            frame = self.spark.createDataFrame(records, schema)
            parsed = frame.select("*", images.parse(F.col("_old"), definition).alias("_po"))
            typed = dict(zip(definition.column_names(), images.typed(F.col("_po"), definition), strict=False))
            rows = parsed.select(
                "_key",
                "_on",
                "_action",
                *[typed[c].alias(f"_o{i}") for i, c in enumerate(cols)],
                *[f"_n{i}" for i in range(len(cols))],
                *CARRIED,
            )
            groups.append(Group((db, table), fk, rows, key))
        return groups

    # -- the children's children -------------------------------------------------------------------------------
    def _children(self, group: Group, changed: DataFrame, key: int) -> list[Group]:
        """The requests `changed` (row events of `group`'s child, up to ordering key `key`) make of the child's own
        children."""
        db, table = group.child
        definition = self.definition(db, table, key)
        if definition is None:
            return []
        out = []
        for child in self._referencing(db, table, key):
            for fk in child.foreign_keys:
                if not fk.references(db, table):
                    continue
                found = [find(definition.column_names(), c) for c in fk.parent_columns]
                parents = [p for p in found if p is not None]
                if len(parents) != len(found):
                    continue
                deletes = changed.where(F.col(Col.TYPE) == "delete") if fk.on_delete in CHANGING_ACTIONS else None
                touched = [c for c in parents if c.lower() in {x.lower() for x in group.fk.columns}]
                updates = (
                    changed.where(F.col(Col.TYPE) == "update")
                    if fk.on_update in CHANGING_ACTIONS and len(touched) == len(parents)
                    else None
                )
                parts = []
                if deletes is not None:
                    parts.append(
                        deletes.select(
                            F.col(Col.ORDER_KEY).alias("_key"),
                            F.lit("delete").alias("_on"),
                            F.lit(fk.on_delete).alias("_action"),
                            *[F.col("_before").getField(p).alias(f"_o{i}") for i, p in enumerate(parents)],
                            *[F.lit(None).cast("string").alias(f"_n{i}") for i in range(len(parents))],
                            *CARRIED,
                        )
                    )
                if updates is not None:
                    new_text = F.col("_newtext")
                    parts.append(
                        updates.select(
                            F.col(Col.ORDER_KEY).alias("_key"),
                            F.lit("update").alias("_on"),
                            F.lit(fk.on_update).alias("_action"),
                            *[F.col("_before").getField(p).alias(f"_o{i}") for i, p in enumerate(parents)],
                            *[new_text.getItem(p.lower()).alias(f"_n{i}") for i, p in enumerate(parents)],
                            *CARRIED,
                        )
                    )
                if parts:
                    out.append(Group((child.database, child.name), fk, transforms.union(parts), key))
        return out

    def _referencing(self, db: str, table: str, key: int) -> list[TableDef]:
        """The tables with a foreign key referencing `db`.`table` at ordering key `key`."""
        schema = self.defs.schema(self.defs.version_at(key))
        if schema is None:
            return []
        found = {(t.database, t.name): t for t, _ in schema.referencing(db, table)}
        return [found[k] for k in sorted(found)]


def _raw_keys(raw: str) -> list[dict[str, list[str]]]:
    """The `keys` of an action event's data with each value's exact text."""
    doc = json.loads(raw)
    start = raw.index('"keys"')
    at = raw.index("[", start) + 1
    out = []
    for one in doc["keys"]:
        item: dict[str, list[str]] = {}
        for side in ("old", "new"):
            if side in one:
                where = raw.index(f'"{side}"', at)
                open_at = raw.index("[", where)
                _, end = _DECODER.raw_decode(raw, open_at)
                item[side] = raw_items(raw[open_at:end])
                at = end
        out.append(item)
    return out


def _described(items: list[tuple[Row, dict[str, Any]]]) -> ForeignKeyDef:
    """The foreign key the action events of one constraint describe."""
    doc = items[0][1]
    actions = {d["on"]: d["action"] for _, d in items}
    return ForeignKeyDef(
        name=doc["constraint"],
        columns=tuple(doc["columns"]),
        parent_database=doc["parent"]["database"],
        parent_table=doc["parent"]["table"],
        parent_columns=tuple(doc["parent"]["columns"]),
        on_delete=actions.get("delete", "RESTRICT"),
        on_update=actions.get("update", "RESTRICT"),
    )


def _same(a: DataFrame, b: DataFrame) -> bool:
    cols = [Col.ORDER_KEY, Col.DATABASE, Col.TABLE, Col.PRIMARY_KEY, Col.TYPE, Col.DATA]
    left, right = a.select(*cols), b.select(*cols)
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def _met(found: DataFrame) -> bool:
    """Whether actions at two places reached one row (the later one may not find it as it was)."""
    keys = found.groupBy(Col.DATABASE, Col.TABLE, Col.PRIMARY_KEY).agg(F.countDistinct(Col.ORDER_KEY).alias("n"))
    return not keys.where("n > 1").isEmpty()
