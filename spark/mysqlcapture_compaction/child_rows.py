"""The child rows a foreign key's action finds, and the row events it makes of them (referential.py).

A child row is found when its latest version before the action's place is alive and holds the parent's old values
in the key's columns. Versions come from the child's current state as of the run's start (a killed run may have
written past it: read by time travel) and the batch's row events, each folded over the row's earlier ones (a
partial image keeps what it leaves out); a reset of the table (TRUNCATE, CREATE, DROP, RENAME, a snapshot's start)
before the action leaves none of its earlier rows.
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
from pyspark.sql.types import LongType, StringType

from mysqlcapture_compaction import images, targets, transforms
from mysqlcapture_compaction.definitions import Definitions
from mysqlcapture_compaction.targets import Target

log = logging.getLogger(__name__)

# The change-log columns a derived row event copies from the action that caused it.
CARRIED = [
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


CARRIED_TYPES = {
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
EVENT_COLUMNS = [
    Col.ORDER_KEY,
    *CARRIED,
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
# A derived event's row before it (typed), the new values' text, and the action that made it.
EXTRA = ["_before", "_newtext", "_action"]


@dataclass(frozen=True)
class Group:
    """Requests to change a child's rows by one foreign key: a DataFrame with the action's ordering key (`_key`),
    `_on` (delete, update), `_action`, the old values of the key's columns typed as the child's (`_o0`...), their
    new values as change-log JSON text (`_n0`..., null: none), and the CARRIED columns."""

    child: tuple[str, str]
    fk: ForeignKeyDef
    rows: DataFrame
    key: int  # the latest request's ordering key


class ChildRows:
    """Finds the rows each request of a foreign key's group changes, in the run's view of its child table."""

    def __init__(
        self, spark: SparkSession, output: str, defs: Definitions, start: int, resets: list[Row] | None = None
    ) -> None:
        """`resets`: the batch's non-row events; a table's TRUNCATE, CREATE, DROP, RENAME or snapshot start ends
        every row it had (an action after it cannot find them)."""
        self.spark, self.output, self.defs, self.start = spark, output, defs, start
        self._states: dict[tuple[str, str], DataFrame | None] = {}
        self._pass_versions: dict[tuple[str, str], DataFrame] = {}
        self._resets: dict[tuple[str, str], list[int]] = {}
        for event in resets or []:
            if event[Col.TYPE] in _RESETS and (event[Col.TYPE] != "table-alter" or _renames(event)):
                where = (event[Col.DATABASE], event[Col.TABLE])
                self._resets.setdefault(where, []).append(int(event[Col.ORDER_KEY]))
            elif event[Col.TYPE] == "database-drop":
                self._resets.setdefault((event[Col.DATABASE], "*"), []).append(int(event[Col.ORDER_KEY]))

    def definition(self, database: str, table: str, key: int) -> TableDef | None:
        return self.defs.table(database, table, self.defs.version_at(key))

    def new_pass(self) -> None:
        """The batch's row events changed (a pass of the expansion adds what the previous one derived)."""
        self._pass_versions = {}

    # -- one foreign key's requests applied to its child's rows ------------------------------------------------
    def apply(self, rows: DataFrame, group: Group) -> DataFrame | None:
        """The row events `group` makes of its child's rows (the change log's columns, `_before` the row as the
        action found it, typed, and `_newtext` the key's new values as text), or None when they cannot be known."""
        db, table = group.child
        definition = self.definition(db, table, group.key)
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
                group = Group(group.child, group.fk, group.rows.where(F.col("_on") != "update"), group.key)
        names = definition.column_names()
        versions = self._pass_versions.get((db, table))
        if versions is None:  # one table's versions serve each of its keys' requests, at every level of a pass
            versions = transforms.materialized(self._versions(rows, db, table, definition))
            self._pass_versions[(db, table)] = versions
        found = [find(names, c) for c in group.fk.columns]
        cols = [c for c in found if c is not None]
        if len(cols) != len(found):
            return None
        # The row as the action found it: its version in force at the request's place (the latest before it; the
        # next one, if any, at or after it), alive and holding the parent's old values. One join, no shuffle of
        # the versions by request: the versions carry where each stops being the latest (`_next_k`).
        on_key = [F.col(f"v.`{c}`") == F.col(f"r._o{i}") for i, c in enumerate(cols)]
        in_force = (F.col("v._k") < F.col("r._key")) & (
            F.col("v._next_k").isNull() | (F.col("v._next_k") >= F.col("r._key"))
        )
        image = F.struct(*[F.col(f"v.`{n}`").alias(n) for n in names], F.col("v._gone").alias("_gone"), "v._k")
        hit = (
            versions.alias("v")
            .join(group.rows.alias("r"), [*on_key, in_force, ~F.col("v._gone")])
            .select(F.col("v._pk").alias("_pk"), image.alias("_s"), *[F.col(f"r.`{c}`") for c in group.rows.columns])
        )
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
        keeps the values it leaves out): `_pk`, `_k` (ordering key), `_gone`, `_next_k` (the row's next version's
        ordering key, null for its last), the typed columns."""
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
        marks = F.col(Col.JSON_NULL) if Col.JSON_NULL in listed.columns else None
        parsed = listed.select("*", images.parse(F.col(Col.DATA), definition, json_null=marks).alias("_pd"))
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
        by_key = Window.partitionBy("_pk").orderBy("_k")
        upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        return every.select(
            "_pk",
            "_k",
            "_gone",
            F.lead("_k").over(by_key).alias("_next_k"),
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


def _renames(event: Row) -> bool:
    """Whether a table-alter moves the table to another name (its rows leave this one)."""
    definition = json.loads(event[Col.DATA] or "{}")
    where = (event[Col.DATABASE], event[Col.TABLE])
    return (definition.get("database", where[0]), definition.get("table", where[1])) != where


def find(names: list[str], name: str) -> str | None:
    lowered = name.lower()
    return next((n for n in names if n.lower() == lowered), None)


def _events(hit: DataFrame, db: str, table: str, definition: TableDef, fk: ForeignKeyDef, cols: list[str]) -> DataFrame:
    """Change-log row events of the matched rows (`_pk`, the row before as `_s`, the request's columns)."""
    names = definition.column_names()
    delete = (F.col("_on") == "delete") & (F.col("_action") == "CASCADE")
    values = [
        F.when(F.col("_action") == "SET NULL", F.lit("null")).otherwise(F.col(f"_n{i}")) for i in range(len(cols))
    ]
    data = F.concat(
        F.lit("{"),
        F.concat_ws(",", *[F.concat(F.lit(json.dumps(c) + ":"), v) for c, v in zip(cols, values, strict=True)]),
        F.lit("}"),
    )
    others = [n for n in names if n.lower() not in {c.lower() for c in cols}]
    return hit.select(
        F.col("_key").alias(Col.ORDER_KEY),
        *CARRIED,
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
        F.col("_action"),
        F.create_map(*[x for c, v in zip(cols, values, strict=True) for x in (F.lit(c.lower()), v)]).alias("_newtext"),
    )
