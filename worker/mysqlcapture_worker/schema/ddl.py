"""DDL from Query events: which statement it is, what it names, and its effect on the schema.

Interim scope (see the issue notes): statements are classified and their targets extracted;
a table they alter or create is dropped from the schema so its rows decode from the TABLE_MAP's
FULL metadata until the full column-level parser lands. `def`/`old` are filled from the schema
where it knows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from mysqlcapture_worker.schema.schema import Schema


class DdlParseError(RuntimeError):
    """A DDL statement the parser cannot understand; the capture stops before it, losing nothing."""


@dataclass(frozen=True)
class DdlResult:
    schema: Schema
    events: list[dict[str, Any]] = field(default_factory=list)


_NAME = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_QNAME = rf"({_NAME})(?:\s*\.\s*({_NAME}))?"
_COMMENTS = re.compile(r"/\*(?![!M]).*?\*/|--[^\n]*|#[^\n]*", re.S)
_EXEC_COMMENT = re.compile(r"/\*[!M]!?\d*\s?(.*?)\*/", re.S)

_CREATE_DB = re.compile(rf"^CREATE\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+NOT\s+EXISTS\s+)?({_NAME})", re.I)
_ALTER_DB = re.compile(rf"^ALTER\s+(?:DATABASE|SCHEMA)\s+({_NAME})", re.I)
_DROP_DB = re.compile(rf"^DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?({_NAME})", re.I)
_CREATE_TABLE = re.compile(
    rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_QNAME}", re.I
)
_ALTER_TABLE = re.compile(rf"^ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?{_QNAME}(.*)$", re.I | re.S)
_DROP_TABLE = re.compile(r"^DROP\s+(TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?(.*)$", re.I | re.S)
_RENAME_TABLE = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.I | re.S)
_RENAME_TO = re.compile(rf"\bRENAME\s+(?:TO|AS)?\s*{_QNAME}\s*$", re.I)


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _qualify(first: str, second: str | None, default_db: str) -> tuple[str, str]:
    return (_unquote(first), _unquote(second)) if second else (default_db, _unquote(first))


def _clean(sql: str) -> str:
    sql = _EXEC_COMMENT.sub(r"\1", sql)
    return _COMMENTS.sub(" ", sql).strip().rstrip(";").strip()


def _split_names(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(_QNAME, text)]


def _table_event(kind: str, db: str, table: str, schema: Schema, sql: str) -> dict[str, Any]:
    event: dict[str, Any] = {"type": kind, "database": db, "table": table, "sql": sql}
    known = schema.table(db, table)
    if known is not None and kind in ("table-alter", "table-drop"):
        event["old"] = known.to_maxwell()
    return event


def apply_ddl(schema: Schema, sql: str, default_db: str) -> DdlResult:
    """The schema after `sql` and Maxwell's DDL events for it (none for statements that are not DDL)."""
    text = _clean(sql)
    if m := _CREATE_DB.match(text):
        db = _unquote(m.group(1))
        return DdlResult(schema.with_database(db), [{"type": "database-create", "database": db, "sql": sql}])
    if m := _ALTER_DB.match(text):
        db = _unquote(m.group(1))
        return DdlResult(schema, [{"type": "database-alter", "database": db, "sql": sql}])
    if m := _DROP_DB.match(text):
        db = _unquote(m.group(1))
        return DdlResult(schema.without_database(db), [{"type": "database-drop", "database": db, "sql": sql}])
    if m := _CREATE_TABLE.match(text):
        if m.group(1):
            return DdlResult(schema)  # temporary tables are not captured
        db, table = _qualify(m.group(2), m.group(3), default_db)
        return DdlResult(schema.without_table(db, table), [_table_event("table-create", db, table, schema, sql)])
    if m := _ALTER_TABLE.match(text):
        db, table = _qualify(m.group(1), m.group(2), default_db)
        event = _table_event("table-alter", db, table, schema, sql)
        new_schema = schema.without_table(db, table)
        rename = _RENAME_TO.search(m.group(3) or "")
        if rename:
            new_db, new_table = _qualify(rename.group(1), rename.group(2), db)
            event["def"] = {"database": new_db, "table": new_table}
            new_schema = new_schema.without_table(new_db, new_table)
        return DdlResult(new_schema, [event])
    if m := _DROP_TABLE.match(text):
        if m.group(1):
            return DdlResult(schema)
        events, new_schema = [], schema
        for first, second in _split_names(re.sub(r"\s+(RESTRICT|CASCADE)\s*$", "", m.group(2), flags=re.I)):
            db, table = _qualify(first, second, default_db)
            events.append(_table_event("table-drop", db, table, schema, sql))
            new_schema = new_schema.without_table(db, table)
        return DdlResult(new_schema, events)
    if m := _RENAME_TABLE.match(text):
        events, new_schema = [], schema
        for pair in m.group(1).split(","):
            names = _split_names(re.sub(r"\bTO\b", " ", pair, flags=re.I))
            if len(names) != 2:
                raise DdlParseError(f"cannot parse RENAME TABLE clause {pair.strip()!r} in {sql[:200]!r}")
            (db, table), (new_db, new_table) = (_qualify(*names[0], default_db), _qualify(*names[1], default_db))
            event = _table_event("table-alter", db, table, new_schema, sql)
            event["def"] = {"database": new_db, "table": new_table}
            events.append(event)
            new_schema = new_schema.without_table(db, table).without_table(new_db, new_table)
        return DdlResult(new_schema, events)
    return DdlResult(schema)
