"""Schema deltas: the difference between two Schemas as JSON, and applying it (no SQL re-parsing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mysqlcapture_api.schema.model import DatabaseDef
from mysqlcapture_api.schema.schema import Schema, table_from_json, table_to_json


def diff(before: Schema, after: Schema) -> dict[str, Any]:
    """A delta taking `before` to `after`: databases dropped/set, then tables dropped/set (whole defs)."""
    delta: dict[str, Any] = {}
    dropped_dbs = [name for name in before.databases if name not in after.databases]
    set_dbs = [
        {"name": d.name, "charset": d.charset}
        for d in after.databases.values()
        if d.name not in before.databases or before.databases[d.name].charset != d.charset
    ]
    dropped_tables: list[list[str]] = []
    set_tables: list[dict[str, Any]] = []
    for db in after.databases.values():
        old = before.databases.get(db.name)
        old_tables = old.tables if old is not None else {}
        dropped_tables += [[db.name, name] for name in old_tables if name not in db.tables]
        set_tables += [
            {"database": db.name, **table_to_json(t)}
            for name, t in db.tables.items()
            if old_tables.get(name) != t or old_tables[name].foreign_keys != t.foreign_keys
        ]
    for key, value in (
        ("databases_dropped", dropped_dbs),
        ("databases_set", set_dbs),
        ("tables_dropped", dropped_tables),
        ("tables_set", set_tables),
    ):
        if value:
            delta[key] = value
    if before.charset != after.charset:
        delta["charset"] = after.charset
    return delta


def apply_delta(schema: Schema, delta: Mapping[str, Any]) -> Schema:
    """`schema` with `delta` (from `diff`) applied."""
    if "charset" in delta:
        schema = Schema(schema.databases, delta["charset"])
    for name in delta.get("databases_dropped", ()):
        schema = _without_database_exactly(schema, name)
    for db in delta.get("databases_set", ()):
        schema = _with_database_exactly(schema, db["name"], db["charset"])
    for db_name, table_name in delta.get("tables_dropped", ()):
        schema = _without_table_exactly(schema, db_name, table_name)
    for raw in delta.get("tables_set", ()):
        schema = schema.with_table(table_from_json(raw["database"], raw))
    return schema


# Deltas name databases and tables exactly as stored: no case-insensitive matching when replaying them.
def _without_database_exactly(schema: Schema, name: str) -> Schema:
    return Schema({n: d for n, d in schema.databases.items() if n != name}, schema.charset)


def _with_database_exactly(schema: Schema, name: str, charset: str) -> Schema:
    existing = schema.databases.get(name)
    tables = existing.tables if existing is not None else {}
    return Schema({**schema.databases, name: DatabaseDef(name, charset, tables)}, schema.charset)


def _without_table_exactly(schema: Schema, database: str, table: str) -> Schema:
    db = schema.databases.get(database)
    if db is None or table not in db.tables:
        return schema
    tables = {n: t for n, t in db.tables.items() if n != table}
    return Schema({**schema.databases, database: DatabaseDef(database, db.charset, tables)}, schema.charset)
