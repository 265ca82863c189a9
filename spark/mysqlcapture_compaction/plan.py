"""A run's plan: the batch's row events per table, the schema segments their ALTERs make, and how far each
table's target is applied. Read by the units that write (versions, current_state, lifecycle), which record
here what they applied."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import TableDef
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from mysqlcapture_compaction import images, targets
from mysqlcapture_compaction.definitions import Definitions
from mysqlcapture_compaction.lineage import lineage
from mysqlcapture_compaction.targets import Target
from mysqlcapture_compaction.transforms import META


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
class TablePlan:
    """A table's row events in one flush (`scope`), the ALTERs among them, one definition and column list per
    schema segment then the newest, each ALTER's statement (then None), and each event's segment number."""

    scope: DataFrame
    alters: list[int]
    defs: list[TableDef | None]
    lists: list[list[str]]
    sqls: list[str | None]
    segment: Column

    def carried(self, current: DataFrame, have: list[str]) -> DataFrame:
        """A target's rows (columns `have`) carried to the newest definition; read as written under the first
        definition when their types match it, else as they are typed."""
        final = self.defs[-1]
        as_first = targets.schema_for(images.table_schema(self.defs[0], have))
        older = self.defs[0] if fields(as_first) == fields(current.schema) else None
        return current.select(*images.carried(older, final, lineage([have, *self.lists[1:]], self.sqls), have), *META)


def fields(schema: StructType) -> list[tuple[str, DataType]]:
    return [(f.name, f.dataType) for f in schema.fields]


def moves(event: Row) -> bool:
    """Whether a table-alter renames the table (its definition names another database or table)."""
    definition = json.loads(event[Col.DATA] or "{}")
    database, table = event[Col.DATABASE], event[Col.TABLE]
    return (definition.get("database", database), definition.get("table", table)) != (database, table)


class RunPlan:
    """One run's batch and bookkeeping. Row changes are applied per table once per stretch between the table's
    resets (CREATE, DROP, RENAME, a snapshot's start): ALTERs inside a stretch only change how its older rows are
    read, so a table with no reset is written once per run, whatever its DDL."""

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
            if event[Col.TYPE] == "table-alter" and not moves(event):
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

    def done(self, database: str, table: str, key: int) -> None:
        """The table's target holds every event up to `key`."""
        self.applied[(database, table)] = key
        self.written.add(f"{database}.{table}")

    def note(self, key: int) -> dict[str, Any]:
        return {"changelog_version": self.version, "order_key": key}

    def definition(self, database: str, table: str, key: int) -> TableDef | None:
        """The table's definition once every DDL event with ordering key <= `key` is applied."""
        return self.defs.table(database, table, self.defs.version_at(key + 1))

    def alters_in(self, database: str, table: str, low: int, upto: int) -> list[int]:
        return [k for k in self.alters.get((database, table), []) if low < k <= upto]

    def has_rows(self, database: str, table: str, low: int, upto: int) -> bool:
        found = self.rows.get((database, table))
        return found is not None and found.high > low and found.low <= upto

    def table_plan(self, database: str, table: str, low: int, upto: int, have: list[str], has_rows: bool) -> TablePlan:
        """The table's row events in (low, upto] and the definitions they were written under."""
        alters = self.alters_in(database, table, low, upto)
        scope = self.batch.where(
            (F.col(Col.DATABASE) == database) & (F.col(Col.TABLE) == table) & (F.col(Col.ORDER_KEY) > low)
        ).where(F.col(Col.ORDER_KEY) <= upto)
        final = self.definition(database, table, upto)
        # Without a schema history every column is text, named by the target and the row images.
        names = (_names(scope, have) if has_rows else have) if final is None else []
        defs = [*(self.definition(database, table, b) for b in [low, *alters]), final]
        lists = [d.column_names() if d is not None else names for d in defs]
        sqls = [self.statements.get(k) for k in alters] + [None]
        segment = F.size(
            F.filter(F.array(*[F.lit(k) for k in alters] or [F.lit(None)]), lambda k: k < F.col(Col.ORDER_KEY))
        )
        return TablePlan(scope, alters, defs, lists, sqls, segment)


def _names(scope: DataFrame, have: list[str]) -> list[str]:
    """Without a schema history: the target's columns, then those the row images name (one small job)."""
    keys = scope.select(F.explode(F.json_object_keys(Col.DATA)).alias("k")).distinct().collect()
    return have + sorted(k for k in (r["k"] for r in keys) if k not in have)
