"""An immutable schema value: databases and their tables, with lookups, pure updates and a JSON form."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from mysqlcapture_api.schema.model import ColumnDef, DatabaseDef, ForeignKeyDef, TableDef

FORMAT = 1
# Never captured, so never tracked: DDL on them (server upgrades, tooling) is ignored too.
SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")
_COLUMN_DEFAULTS = {f.name: f.default for f in fields(ColumnDef)}


@dataclass(frozen=True)
class Schema:
    """Databases by name (each with its tables by name) and the server's default charset.

    Never mutated: every operation returns a new Schema sharing the unchanged parts. Names are
    matched as with lower_case_table_names=0: an exact match first, then a case-insensitive one.
    """

    databases: Mapping[str, DatabaseDef] = field(default_factory=dict)
    charset: str = "utf8mb4"  # the server's character_set_server, for CREATE DATABASE without a charset

    @classmethod
    def empty(cls, charset: str = "utf8mb4") -> Schema:
        return cls({}, charset)

    # -- lookups -------------------------------------------------------------------------------
    def database(self, name: str) -> DatabaseDef | None:
        found = self.databases.get(name)
        if found is not None:
            return found
        lowered = name.lower()
        return next((d for n, d in self.databases.items() if n.lower() == lowered), None)

    def table(self, database: str, name: str, *, exact: bool = False) -> TableDef | None:
        """The table named so (with `exact`, only an exact match of the table's name)."""
        db = self.database(database)
        if db is None:
            return None
        found = db.tables.get(name)
        if found is not None or exact:
            return found
        lowered = name.lower()
        return next((t for n, t in db.tables.items() if n.lower() == lowered), None)

    def all_tables(self) -> Iterator[TableDef]:
        for db in self.databases.values():
            yield from db.tables.values()

    @property
    def tables(self) -> dict[tuple[str, str], TableDef]:
        """Every table keyed by (database, table)."""
        return {(t.database, t.name): t for t in self.all_tables()}

    def database_charset(self, name: str) -> str:
        db = self.database(name)
        return db.charset if db is not None else self.charset

    # -- pure updates --------------------------------------------------------------------------
    def with_database(self, name: str, charset: str | None = None) -> Schema:
        """The database created (with `charset`, else the server's), or its charset changed if it exists."""
        existing = self.database(name)
        databases = dict(self.databases)
        if existing is None:
            databases[name] = DatabaseDef(name, charset or self.charset, {})
        else:
            databases[existing.name] = DatabaseDef(existing.name, charset or existing.charset, existing.tables)
        return Schema(databases, self.charset)

    def without_database(self, name: str) -> Schema:
        existing = self.database(name)
        if existing is None:
            return self
        return Schema({n: d for n, d in self.databases.items() if n != existing.name}, self.charset)

    def with_table(self, table: TableDef) -> Schema:
        """`table` added, or replacing the table of exactly that name (its database is created if missing)."""
        db = self.database(table.database)
        schema = self if db is not None else self.with_database(table.database)
        db = schema.database(table.database)
        assert db is not None
        if db.name != table.database:  # keep one spelling of the database's name
            table = replace(table, database=db.name)
        databases = dict(schema.databases)
        databases[db.name] = DatabaseDef(db.name, db.charset, {**db.tables, table.name: table})
        return Schema(databases, self.charset)

    def without_table(self, database: str, name: str) -> Schema:
        existing = self.table(database, name)
        if existing is None:
            return self
        db = self.databases[existing.database]
        tables = {n: t for n, t in db.tables.items() if n != existing.name}
        return Schema({**self.databases, db.name: DatabaseDef(db.name, db.charset, tables)}, self.charset)

    def with_parent_renamed(self, old: tuple[str, str], new: tuple[str, str], columns: dict[str, str]) -> Schema:
        """Every foreign key referencing table `old` (database, table) made to reference `new`, its referenced
        columns renamed by `columns` (old name -> new name): what the server does on RENAME TABLE and RENAME
        COLUMN of a parent."""
        schema = self
        for table in list(self.all_tables()):
            if not any(fk.references(*old) for fk in table.foreign_keys):
                continue
            keys = tuple(
                replace(
                    fk,
                    parent_database=new[0],
                    parent_table=new[1],
                    parent_columns=tuple(columns.get(c, c) for c in fk.parent_columns),
                )
                if fk.references(*old)
                else fk
                for fk in table.foreign_keys
            )
            schema = schema.with_table(replace(table, foreign_keys=keys))
        return schema

    def referencing(self, database: str, table: str) -> list[tuple[TableDef, ForeignKeyDef]]:
        """The tracked tables with a foreign key referencing `database`.`table`, and those keys."""
        return [(t, fk) for t in self.all_tables() for fk in t.foreign_keys if fk.references(database, table)]

    # -- storage -------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "charset": self.charset,
            "databases": [
                {
                    "name": d.name,
                    "charset": d.charset,
                    "tables": [table_to_json(t) for t in d.tables.values()],
                }
                for d in self.databases.values()
            ],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Schema:
        if doc.get("format") != FORMAT:
            raise ValueError(f"unknown schema format {doc.get('format')!r} (expected {FORMAT})")
        databases: dict[str, DatabaseDef] = {}
        for raw in doc["databases"]:
            tables = {t.name: t for t in (table_from_json(raw["name"], rt) for rt in raw["tables"])}
            databases[raw["name"]] = DatabaseDef(raw["name"], raw["charset"], tables)
        return cls(databases, doc["charset"])


def column_to_json(col: ColumnDef) -> dict[str, Any]:
    """The column's fields that differ from ColumnDef's defaults (name and type always)."""
    out: dict[str, Any] = {"name": col.name, "type": col.type}
    for name, default in _COLUMN_DEFAULTS.items():
        value = getattr(col, name)
        if name not in out and value != default:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def column_from_json(doc: Mapping[str, Any]) -> ColumnDef:
    values = dict(doc)
    if values.get("enum_values") is not None:
        values["enum_values"] = tuple(values["enum_values"])
    return ColumnDef(**values)


def table_to_json(table: TableDef) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": table.name,
        "charset": table.charset,
        "primary_key": list(table.primary_key),
        "columns": [column_to_json(c) for c in table.columns],
    }
    if table.foreign_keys:
        out["foreign_keys"] = [
            {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(fk).items()} for fk in table.foreign_keys
        ]
    return out


def foreign_key_from_json(doc: Mapping[str, Any]) -> ForeignKeyDef:
    values = dict(doc)
    return ForeignKeyDef(
        **{**values, "columns": tuple(values["columns"]), "parent_columns": tuple(values["parent_columns"])}
    )


def table_from_json(database: str, doc: Mapping[str, Any]) -> TableDef:
    return TableDef(
        database=database,
        name=doc["name"],
        columns=tuple(column_from_json(c) for c in doc["columns"]),
        primary_key=tuple(doc["primary_key"]),
        charset=doc["charset"],
        foreign_keys=tuple(foreign_key_from_json(f) for f in doc.get("foreign_keys", ())),
    )
