"""Foreign-key actions the server did not log (the worker's `referential-action` events), expanded into the row
events they stand for before a run compacts its batch.

An action event names a child table, one of its foreign keys, what ran (CASCADE, SET NULL or SET DEFAULT, on a
delete or an update of a parent row) and the parent's old (and new) values of the referenced columns. The rows it
changed are the child's rows whose key columns held those values at the event's place: each row's latest version
before it (from the child's current state as of the run's start, then the batch's row events) is alive and holds
them. Each becomes a row event at the action's ordering key: a delete, or an update of the key's columns to null,
to their default or to the parent's new values. Their images are partial (`absent` lists every other column), so
compaction completes them from the row's previous version, as it completes a MINIMAL image.

A child's changed rows change its own children's rows in turn, by their foreign keys' actions (the server did not
log those either): derived the same way, level by level, a table referencing itself included. Actions at
different places of one batch can meet on one row (a row one action deleted is not there for a later one; a key
changed twice): the expansion runs again, with what it derived, until nothing changes.

Values are matched typed (each side parsed by its table's definition), as the server compares them, except that
a `_ci` collation's case-insensitive or PAD SPACE equality is not followed: a child key that differs from its
parent's only so is not matched.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from deltalake import DeltaTable as RsTable
from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import ForeignKeyDef, TableDef
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from mysqlcapture_compaction import images, targets, transforms
from mysqlcapture_compaction.definitions import Definitions
from mysqlcapture_compaction.targets import Target

log = logging.getLogger(__name__)
TYPE = transforms.ACTION_TYPES[0]
MAX_LEVELS = 32  # a chain of foreign keys (or of a table's rows referencing each other) this deep at most
MAX_ROUNDS = 4
_DECODER = json.JSONDecoder()
# The change-log columns a derived row event copies from the action that caused it.
_CARRIED = [
    Col.SERVER_ID,
    Col.GTID,
    Col.BINLOG_FILE,
    Col.BINLOG_POS,
    Col.ROW_INDEX,
    Col.EVENT_POS,
    Col.XID,
    Col.TS,
    Col.THREAD_ID,
]


@dataclass(frozen=True)
class Group:
    """Requests to change a child's rows by one foreign key: a DataFrame with the action's ordering key (`_key`),
    `_on` (delete, update), `_action`, the old values of the key's columns typed as the child's (`_o0`...), their
    new values as change-log JSON text (`_n0`..., null: none), and the _CARRIED columns."""

    child: tuple[str, str]
    fk: ForeignKeyDef
    rows: DataFrame


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
        """`resets`: the batch's non-row events; a table's TRUNCATE, CREATE, DROP, RENAME or snapshot start ends
        every row it had (an action after it cannot find them)."""
        self.spark, self.output, self.defs, self.start = spark, output, defs, start
        self._states: dict[tuple[str, str], DataFrame | None] = {}
        self._resets: dict[tuple[str, str], list[int]] = {}
        for event in resets or []:
            if event[Col.TYPE] in _RESETS and (event[Col.TYPE] != "table-alter" or _renames(event)):
                where = (event[Col.DATABASE], event[Col.TABLE])
                self._resets.setdefault(where, []).append(int(event[Col.ORDER_KEY]))
            elif event[Col.TYPE] == "database-drop":
                self._resets.setdefault((event[Col.DATABASE], "*"), []).append(int(event[Col.ORDER_KEY]))

    def definition(self, database: str, table: str, key: int) -> TableDef | None:
        return self.defs.table(database, table, self.defs.version_at(key))

    def run(self, batch: DataFrame, actions: list[Row]) -> DataFrame | None:
        """The derived row events (the change log's columns), or None when the actions change no row."""
        if not actions:
            return None
        derived: DataFrame | None = None
        for _ in range(MAX_ROUNDS):
            found = self._round(batch, actions, derived)
            if found is None:
                return None
            found = found.localCheckpoint()
            if (derived is not None and _same(found, derived)) or (derived is None and not _may_meet(found)):
                return found
            derived = found
        log.warning("foreign-key actions still met on rows after %d passes: the last pass is kept", MAX_ROUNDS)
        return derived

    def _round(self, batch: DataFrame, actions: list[Row], derived: DataFrame | None) -> DataFrame | None:
        """One pass: every action's rows, then their children's, level by level, seeing `derived` (the previous
        pass's row events) as row events of the batch."""
        rows = batch.where(F.col(Col.TYPE).isin(*transforms.ROW_TYPES))
        if derived is not None:
            rows = rows.unionByName(derived, allowMissingColumns=True)
        groups = self._explicit(actions)
        out: list[DataFrame] = []
        for level in range(MAX_LEVELS):
            if not groups:
                break
            following: list[Group] = []
            for group in groups:
                changed = self._apply(rows, group)
                if changed is None:
                    continue
                changed = changed.localCheckpoint()
                if changed.isEmpty():
                    continue
                out.append(changed.select(*_EVENT_COLUMNS, F.lit(level).alias("_level")))
                following += self._children(group, changed)
            groups = following
        else:
            log.warning("foreign-key actions run deeper than %d levels: the deeper ones are not applied", MAX_LEVELS)
        if not out:
            return None
        # A row reached twice at one place (tables whose keys reference each other): its first change stands.
        first = Window.partitionBy(Col.DATABASE, Col.TABLE, Col.PRIMARY_KEY, Col.ORDER_KEY).orderBy("_level")
        every = transforms.union(out)
        return every.withColumn("_n", F.row_number().over(first)).where("_n = 1").drop("_n", "_level")

    # -- the actions the change log holds ----------------------------------------------------------------------
    def _explicit(self, actions: list[Row]) -> list[Group]:
        by: dict[tuple[str, str, str], list[tuple[Row, dict]]] = {}
        for event in actions:
            doc = json.loads(event[Col.DATA])
            by.setdefault((event[Col.DATABASE], event[Col.TABLE], doc["constraint"]), []).append((event, doc))
        groups = []
        for (db, table, name), items in by.items():
            key = max(int(e[Col.ORDER_KEY]) for e, _ in items)
            definition = self.definition(db, table, key)
            fk = next((f for f in definition.foreign_keys if f.name == name), None) if definition else None
            if definition is None or fk is None:
                log.warning(
                    "%s.%s: no foreign key %s in its definition at ordering key %d (no schema history?): its "
                    "referential actions are not applied",
                    db,
                    table,
                    name,
                    key,
                )
                continue
            cols = fk.columns
            records = []
            for event, doc in items:
                for one in _raw_keys(event[Col.DATA]):
                    news = one.get("new", [None] * len(cols))
                    old = _object(cols, one["old"])
                    records.append(
                        (int(event[Col.ORDER_KEY]), doc["on"], doc["action"], old, *news, *[event[c] for c in _CARRIED])
                    )
            schema = StructType(
                [
                    StructField("_key", LongType()),
                    StructField("_on", StringType()),
                    StructField("_action", StringType()),
                    StructField("_old", StringType()),
                    *[StructField(f"_n{i}", StringType()) for i in range(len(cols))],
                    *[StructField(c, _CARRIED_TYPES[c]) for c in _CARRIED],
                ]
            )
            frame = self.spark.createDataFrame(records, schema)
            parsed = frame.select("*", images.parse(F.col("_old"), definition).alias("_po"))
            typed = dict(zip(definition.column_names(), images.typed(F.col("_po"), definition), strict=False))
            rows = parsed.select(
                "_key",
                "_on",
                "_action",
                *[typed[_find(definition.column_names(), c) or c].alias(f"_o{i}") for i, c in enumerate(cols)],
                *[f"_n{i}" for i in range(len(cols))],
                *_CARRIED,
            )
            groups.append(Group((db, table), fk, rows))
        return groups

    # -- one foreign key's requests applied to its child's rows ------------------------------------------------
    def _apply(self, rows: DataFrame, group: Group) -> DataFrame | None:
        """The row events `group` makes of its child's rows (the change log's columns, `_before`/`_after` the
        child's typed columns before and after), or None when they cannot be known."""
        db, table = group.child
        key = group.rows.agg(F.max("_key")).first()
        if key is None or key[0] is None:
            return None
        definition = self.definition(db, table, int(key[0]))
        if definition is None:
            return None
        if not definition.primary_key:
            log.warning(
                "%s.%s has no primary key: the rows foreign key %s's %s actions changed in it cannot be matched in "
                "its current-state table (its history lists the parent's change). Fix: give it a primary key",
                db,
                table,
                group.fk.name,
                group.fk.on_delete,
            )
            return None
        pk_cols = {c.lower() for c in definition.primary_key}
        if any(c.lower() in pk_cols for c in group.fk.columns) and group.fk.on_update == "CASCADE":
            moving = group.rows.where(F.col("_on") == "update")
            if not moving.isEmpty():
                log.warning(
                    "%s.%s: foreign key %s's ON UPDATE CASCADE changes the primary key of its rows, which compaction "
                    "does not follow: run `mysqlcapture resnapshot <manifest> --table %s.%s`",
                    db,
                    table,
                    group.fk.name,
                    db,
                    table,
                )
                group = Group(group.child, group.fk, group.rows.where(F.col("_on") != "update"))
        names = definition.column_names()
        versions = self._versions(rows, db, table, definition)
        found = [_find(names, c) for c in group.fk.columns]
        cols = [c for c in found if c is not None]
        if len(cols) != len(found):
            return None
        reqs = group.rows.withColumn("_req", F.monotonically_increasing_id()).localCheckpoint()
        on_key = [F.col(f"v.`{c}`") == F.col(f"r._o{i}") for i, c in enumerate(cols)]
        matches = (
            versions.alias("v")
            .join(reqs.alias("r"), [*on_key, F.col("v._k") < F.col("r._key")])
            .select("r._req", "v._pk")
            .distinct()
        )
        # Each matched row's latest version before the request's place: the row as the action found it.
        before = (
            matches.join(versions, "_pk").join(reqs.select("_req", "_key"), "_req").where(F.col("_k") < F.col("_key"))
        )
        image = F.struct(*[F.col(f"`{n}`").alias(n) for n in names], F.col("_gone").alias("_gone"), "_k")
        latest = before.groupBy("_req", "_pk").agg(F.max_by(image, F.col("_k")).alias("_s"))
        same = " and ".join(f"_s.`{c}` <=> _o{i}" for i, c in enumerate(cols))
        hit = latest.where(~F.col("_s._gone")).join(reqs, "_req").where(F.expr(same))
        resets = sorted(self._resets.get((db, table), []) + self._resets.get((db, "*"), []))
        if resets:  # a row last written before the table's reset was not there for the action
            reset = F.lit(-1)
            for k in resets:
                reset = F.when(F.col("_key") > k, F.lit(k)).otherwise(reset)
            hit = hit.where(F.col("_s._k") > reset)
        return _events(hit, db, table, definition, group.fk, cols)

    def _versions(self, rows: DataFrame, db: str, table: str, definition: TableDef) -> DataFrame:
        """Every version of the child's rows known to the run: its current state as of the run's start, then the
        batch's (and the previous pass's) row events, each folded over the row's earlier ones (a partial image
        keeps the values it leaves out): `_pk`, `_k` (ordering key), `_gone`, the typed columns."""
        names = definition.column_names()
        parts = []
        state = self._state(db, table)
        if state is not None:
            have = set(state.columns)
            parts.append(
                state.select(
                    F.col("_cdc_pk").alias("_pk"),
                    F.col("_cdc_order_key").alias("_k"),
                    F.lit(False).alias("_gone"),
                    *[
                        F.struct((F.col(f"`{n}`") if n in have else F.lit(None)).alias("v")).alias(f"_p_{n}")
                        for n in names
                    ],
                )
            )
        own = rows.where((F.col(Col.DATABASE) == db) & (F.col(Col.TABLE) == table))
        listed = transforms.history_rows(own)
        parsed = listed.select("*", images.parse(F.col(Col.DATA), definition).alias("_pd"))
        typed = dict(zip(names, images.typed(F.col("_pd"), definition), strict=False))
        gone = (F.col(Col.TYPE) == "delete") | F.col(transforms.MOVED_AWAY)
        absent = F.col(Col.ABSENT) if Col.ABSENT in listed.columns else F.lit(None).cast("array<string>")

        def given(name: str) -> Column:
            logged = (
                absent.isNull() | ~F.array_contains(absent, name) | F.col(Col.TYPE).isin("insert", "bootstrap-insert")
            )
            return F.when(~gone & logged, F.struct(typed[name].alias("v")))

        parts.append(
            parsed.select(
                F.col(transforms.PK).alias("_pk"),
                F.col(Col.ORDER_KEY).alias("_k"),
                gone.alias("_gone"),
                *[given(n).alias(f"_p_{n}") for n in names],
            )
        )
        every = transforms.union(parts)
        upto = Window.partitionBy("_pk").orderBy("_k").rowsBetween(Window.unboundedPreceding, Window.currentRow)
        return every.select(
            "_pk",
            "_k",
            "_gone",
            *[F.last(f"_p_{n}", ignorenulls=True).over(upto).getField("v").alias(n) for n in names],
        )

    def _state(self, db: str, table: str) -> DataFrame | None:
        """The child's current-state rows as of the run's start (a killed run may have written past it)."""
        key = (db, table)
        if key not in self._states:
            self._states[key] = self._read_state(db, table)
        return self._states[key]

    def _read_state(self, db: str, table: str) -> DataFrame | None:
        path = Target(self.output, db, table).path
        if not targets.is_live(path) or targets.by_value(path):
            return None
        if targets.applied(path) <= self.start:
            return self.spark.read.format("delta").load(path)
        version = None
        for entry in RsTable(path).history():
            note = json.loads(entry.get("userMetadata") or "{}")
            if int(note.get("order_key", 1 << 62)) <= self.start:
                version = max(version or 0, int(entry["version"]))
        if version is None:
            return None
        return self.spark.read.format("delta").option("versionAsOf", version).load(path)

    # -- the children's children -------------------------------------------------------------------------------
    def _children(self, group: Group, changed: DataFrame) -> list[Group]:
        """The requests `changed` (row events of `group`'s child) make of the child's own children."""
        db, table = group.child
        key = changed.agg(F.max(Col.ORDER_KEY)).first()
        assert key is not None
        definition = self.definition(db, table, int(key[0]))
        if definition is None:
            return []
        out = []
        for child in self._referencing(db, table, int(key[0])):
            for fk in child.foreign_keys:
                if not fk.references(db, table):
                    continue
                found = [_find(definition.column_names(), c) for c in fk.parent_columns]
                parents = [p for p in found if p is not None]
                if len(parents) != len(found):
                    continue
                deletes = changed.where(F.col(Col.TYPE) == "delete") if fk.on_delete != "RESTRICT" else None
                touched = [c for c in parents if c.lower() in {x.lower() for x in group.fk.columns}]
                updates = (
                    changed.where(F.col(Col.TYPE) == "update")
                    if fk.on_update != "RESTRICT" and len(touched) == len(parents)
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
                            *_CARRIED,
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
                            *_CARRIED,
                        )
                    )
                if parts:
                    out.append(Group((child.database, child.name), fk, transforms.union(parts)))
        return out

    def _referencing(self, db: str, table: str, key: int) -> list[TableDef]:
        """The tables with a foreign key referencing `db`.`table` at ordering key `key`."""
        schema = self.defs.schema(self.defs.version_at(key))
        if schema is None:
            return []
        found = {(t.database, t.name): t for t, _ in schema.referencing(db, table)}
        return [found[k] for k in sorted(found)]


_CARRIED_TYPES = {
    Col.SERVER_ID: LongType(),
    Col.GTID: StringType(),
    Col.BINLOG_FILE: StringType(),
    Col.BINLOG_POS: LongType(),
    Col.ROW_INDEX: LongType(),
    Col.EVENT_POS: LongType(),
    Col.XID: LongType(),
    Col.TS: LongType(),
    Col.THREAD_ID: LongType(),
}
_EVENT_COLUMNS = [
    Col.ORDER_KEY,
    *_CARRIED,
    Col.COMMIT,
    Col.TYPE,
    Col.DATABASE,
    Col.TABLE,
    Col.PRIMARY_KEY,
    Col.PRIMARY_KEY_COLUMNS,
    Col.PK_HASH,
    Col.DATA,
    Col.OLD,
    Col.SQL,
    Col.ABSENT,
]
_RESETS = ("table-truncate", "table-create", "table-drop", "table-alter", "bootstrap-start")
_EXTRA = ["_before", "_newtext"]  # a derived event's row before it (typed) and the new values' text


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


def _renames(event: Row) -> bool:
    """Whether a table-alter moves the table to another name (its rows leave this one)."""
    definition = json.loads(event[Col.DATA] or "{}")
    where = (event[Col.DATABASE], event[Col.TABLE])
    return (definition.get("database", where[0]), definition.get("table", where[1])) != where


def _find(names: list[str], name: str) -> str | None:
    lowered = name.lower()
    return next((n for n in names if n.lower() == lowered), None)


def _events(hit: DataFrame, db: str, table: str, definition: TableDef, fk: ForeignKeyDef, cols: list[str]) -> DataFrame:
    """Change-log row events of the matched rows (`_pk`, the row before as `_s`, the request's columns)."""
    names = definition.column_names()
    delete = (F.col("_on") == "delete") & (F.col("_action") == "CASCADE")
    values = []
    for i, c in enumerate(cols):
        column = definition.column(c)
        default = images.implicit_default(column) if column.default is None else column.default
        literal = "null" if default is None else json.dumps(default) if _is_text(column.type) else default
        values.append(
            F.when(F.col("_action") == "SET NULL", F.lit("null"))
            .when(
                F.col("_action") == "SET DEFAULT", F.lit(literal if column.nullable or default is not None else "null")
            )
            .otherwise(F.col(f"_n{i}"))
        )
    data = F.concat(
        F.lit("{"),
        F.concat_ws(",", *[F.concat(F.lit(json.dumps(c) + ":"), v) for c, v in zip(cols, values, strict=True)]),
        F.lit("}"),
    )
    others = [n for n in names if n.lower() not in {c.lower() for c in cols}]
    return hit.select(
        F.col("_key").alias(Col.ORDER_KEY),
        *_CARRIED,
        F.lit(False).alias(Col.COMMIT),
        F.when(delete, "delete").otherwise("update").alias(Col.TYPE),
        F.lit(db).alias(Col.DATABASE),
        F.lit(table).alias(Col.TABLE),
        F.col("_pk").alias(Col.PRIMARY_KEY),
        F.lit(json.dumps(list(definition.primary_key))).alias(Col.PRIMARY_KEY_COLUMNS),
        transforms.row_hash(F.lit(db), F.lit(table), F.col("_pk")).alias(Col.PK_HASH),
        F.when(delete, F.lit("{}")).otherwise(data).alias(Col.DATA),
        F.when(delete, F.lit(None).cast("string")).otherwise(F.lit("{}")).alias(Col.OLD),
        F.lit(None).cast("string").alias(Col.SQL),
        F.when(delete, F.array(*[F.lit(n) for n in names]))
        .otherwise(F.array(*[F.lit(n) for n in others]))
        .alias(Col.ABSENT),
        F.col("_s").alias("_before"),
        F.create_map(*[x for c, v in zip(cols, values, strict=True) for x in (F.lit(c.lower()), v)]).alias("_newtext"),
    )


def _is_text(kind: str) -> bool:
    return kind not in {
        "tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "float", "double", "bit", "year",
    }  # fmt: skip


def _same(a: DataFrame, b: DataFrame) -> bool:
    cols = [Col.ORDER_KEY, Col.DATABASE, Col.TABLE, Col.PRIMARY_KEY, Col.TYPE, Col.DATA]
    left, right = a.select(*cols), b.select(*cols)
    return left.exceptAll(right).isEmpty() and right.exceptAll(left).isEmpty()


def _may_meet(found: DataFrame) -> bool:
    """Whether another pass can change `found`: a row reached at two places, or a key an action changed (a later
    action may then find it under its new value)."""
    if not found.where(F.col(Col.TYPE) == "update").isEmpty():
        return True
    keys = found.groupBy(Col.DATABASE, Col.TABLE, Col.PRIMARY_KEY).agg(F.countDistinct(Col.ORDER_KEY).alias("n"))
    return not keys.where("n > 1").isEmpty()
