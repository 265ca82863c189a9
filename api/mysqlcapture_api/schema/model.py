"""Immutable table and column definitions, rendered as Maxwell's DDL `def` objects."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint"})
STRING_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
TEMPORAL_FSP_TYPES = frozenset({"time", "datetime", "timestamp"})
ENUM_TYPES = frozenset({"enum", "set"})


@dataclass(frozen=True)
class ColumnDef:
    """One column as the worker understands it.

    `type` is the lower-case MySQL type name after Maxwell's unaliasing (`integer` -> `int`,
    `bool` -> `tinyint`, `numeric` -> `decimal`, ...), plus `json` for MariaDB's JSON alias.
    """

    name: str
    type: str
    signed: bool = True
    charset: str | None = None  # string types only: MySQL charset name ("utf8mb4", "latin1", "binary")
    column_length: int | None = None  # fractional-second precision of time/datetime/timestamp
    length: int | None = None  # declared length: char(N), binary(N), bit(N)
    precision: int | None = None  # decimal(precision, scale)
    scale: int | None = None
    enum_values: tuple[str, ...] | None = None  # enum and set members, in definition order
    nullable: bool = True
    generated: bool = False
    # A constant DEFAULT as DDL gave it (None: none, NULL or an expression). Not part of the column's identity:
    # information_schema may spell it otherwise (2.5e3 as 2500). Compaction fills rows that existed before an ADD
    # COLUMN with it, as the server does, and a partial insert's absent columns.
    default: str | None = field(default=None, compare=False)

    def renamed(self, name: str) -> ColumnDef:
        return replace(self, name=name)

    def to_maxwell(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.type in INTEGER_TYPES:
            out["signed"] = self.signed
        if self.charset is not None and self.type in STRING_TYPES:
            out["charset"] = self.charset
        elif self.type in BINARY_TYPES:
            out["charset"] = "binary"
        if self.type in TEMPORAL_FSP_TYPES:
            out["column-length"] = self.column_length or 0
        if self.type in ENUM_TYPES and self.enum_values is not None:
            out["enum-values"] = list(self.enum_values)
        return out


# A foreign key's referential actions, as information_schema.REFERENTIAL_CONSTRAINTS spells them (NO ACTION is
# RESTRICT: InnoDB checks both at once).
ACTIONS = ("CASCADE", "SET NULL", "SET DEFAULT", "RESTRICT", "NO ACTION")
# Those that change the child's rows. InnoDB accepts SET DEFAULT in a definition but refuses the parent's change as
# RESTRICT does (MariaDB 10.11, MySQL 9.7 with either foreign-key engine: tests/integration/test_foreign_keys.py).
CHANGING_ACTIONS = frozenset({"CASCADE", "SET NULL"})


@dataclass(frozen=True)
class ForeignKeyDef:
    """A foreign key of the table holding it (the child): its columns reference `parent_columns` of the parent
    table; `on_delete` / `on_update` are what a delete of a parent row, or a change of its referenced columns,
    does to the child rows referencing it (one of ACTIONS)."""

    name: str
    columns: tuple[str, ...]
    parent_database: str
    parent_table: str
    parent_columns: tuple[str, ...]
    on_delete: str = "RESTRICT"
    on_update: str = "RESTRICT"
    index: str | None = field(default=None, compare=False)  # the index name a FOREIGN KEY clause gave, if any

    def changes_rows(self) -> bool:
        """Whether a change of a parent row can change the child's rows."""
        return self.on_delete in CHANGING_ACTIONS or self.on_update in CHANGING_ACTIONS

    def references(self, database: str, table: str) -> bool:
        return (self.parent_database.lower(), self.parent_table.lower()) == (database.lower(), table.lower())


@dataclass(frozen=True)
class TableDef:
    """A table: ordered columns (the order of values in a row image), its primary key and its foreign keys."""

    database: str
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    charset: str = "utf8mb4"
    # Not part of the table's identity (its rows read the same whatever they are): a schema history compares
    # them itself (diff.py).
    foreign_keys: tuple[ForeignKeyDef, ...] = field(default=(), compare=False)

    def column(self, name: str) -> ColumnDef:
        lowered = name.lower()
        for col in self.columns:
            if col.name.lower() == lowered:
                return col
        raise KeyError(f"{self.database}.{self.name} has no column {name!r}")

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_maxwell(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "charset": self.charset,
            "table": self.name,
            "primary-key": list(self.primary_key),
            "columns": [c.to_maxwell() for c in self.columns],
        }


@dataclass(frozen=True)
class DatabaseDef:
    name: str
    charset: str = "utf8mb4"
    tables: dict[str, TableDef] = field(default_factory=dict)
