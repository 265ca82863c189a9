"""Read a server's current schema from information_schema into a Schema (the history's initial capture)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from mysqlcapture_api.schema import types as T
from mysqlcapture_api.schema.model import ColumnDef, DatabaseDef, ForeignKeyDef, TableDef
from mysqlcapture_api.schema.schema import SYSTEM_DATABASES, Schema

from mysqlcapture_worker.source.queries import show_generated_keys

_LENGTH = re.compile(r"\((\d+)\)")
_GENERATED = re.compile(r"\b(VIRTUAL|STORED|PERSISTENT) GENERATED\b", re.I)
_JSON_CHECK = re.compile(r"json_valid\(`((?:[^`]|``)+)`\)", re.I)

_TABLES = (
    "SELECT t.TABLE_SCHEMA, t.TABLE_NAME, c.CHARACTER_SET_NAME FROM information_schema.TABLES t "
    "LEFT JOIN information_schema.COLLATIONS c ON c.COLLATION_NAME = t.TABLE_COLLATION "
    "WHERE t.TABLE_TYPE = 'BASE TABLE' AND t.TABLE_SCHEMA NOT IN %s"
)
_COLUMNS = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, "
    "DATETIME_PRECISION, NUMERIC_PRECISION, NUMERIC_SCALE, IS_NULLABLE, EXTRA, COLUMN_DEFAULT "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA NOT IN %s "
    "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION"
)
# MariaDB's JSON is LONGTEXT with a CHECK (json_valid(`col`)) constraint; nothing else says so. (MySQL's JSON is a
# type of its own, and its CHECK_CONSTRAINTS has no TABLE_NAME: asked on MariaDB only.)
_CHECKS = (
    "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
    "WHERE CONSTRAINT_SCHEMA NOT IN %s AND CHECK_CLAUSE LIKE 'json\\_valid(%%'"
)
_FOREIGN_KEYS = (
    "SELECT k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA, "
    "k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE "
    "FROM information_schema.KEY_COLUMN_USAGE k JOIN information_schema.REFERENTIAL_CONSTRAINTS r "
    "ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME "
    "AND r.TABLE_NAME = k.TABLE_NAME "
    "WHERE k.REFERENCED_TABLE_NAME IS NOT NULL AND k.TABLE_SCHEMA NOT IN %s "
    "ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION"
)
_PRIMARY_KEYS = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
    "WHERE INDEX_NAME = 'PRIMARY' AND TABLE_SCHEMA NOT IN %s ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX"
)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _rows(cur: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    cur.execute(sql, args)
    return [tuple(_text(v) if isinstance(v, bytes) else v for v in row) for row in cur.fetchall()]


_NUMBER = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")
_NO_DEFAULT_TEXT = frozenset({"bit", "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def constant_default(value: Any, extra: Any, type_name: str, *, mariadb: bool) -> str | None:
    """COLUMN_DEFAULT as the DDL parser keeps a DEFAULT (ddl_columns.default_literal): a constant's text, else None
    (none, NULL, an expression). MySQL gives a constant as its text and marks an expression DEFAULT_GENERATED in
    EXTRA; MariaDB quotes a string, writes NULL as `NULL` and an expression as its text. Binary and BIT defaults
    are left out (their text is not the value's)."""
    if value is None or type_name in _NO_DEFAULT_TEXT:
        return None
    text = _text(value)
    if not mariadb:
        return None if "DEFAULT_GENERATED" in str(extra).upper() else text
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'").replace("\\\\", "\\")
    return text if _NUMBER.fullmatch(text) else None


def column_from_information_schema(
    database: str, table: str, row: tuple[Any, ...], json_columns: set[str], *, mariadb: bool = False
) -> ColumnDef:
    """A ColumnDef from one information_schema.COLUMNS row (COLUMN_NAME ... COLUMN_DEFAULT, as in the query
    above)."""
    name, data_type, column_type, charset, fsp, precision, scale, nullable, extra, default = row
    type_name = T.ALIASES.get(str(data_type).lower(), str(data_type).lower())
    column_type = str(column_type)
    if type_name not in T.KNOWN_TYPES:
        raise T.unsupported(database, table, str(name), type_name)
    if type_name == "longtext" and str(name).lower() in json_columns:
        type_name = "json"
    if type_name in T.BINARY_TYPES:
        charset = "binary"
    elif type_name not in T.CHARSET_TYPES:
        charset = None
    length_match = _LENGTH.search(column_type)
    return ColumnDef(
        name=str(name),
        type=type_name,
        signed=not (type_name in T.NUMERIC_TYPES and "unsigned" in column_type.lower()),
        charset=str(charset) if charset else None,
        column_length=int(fsp or 0) if type_name in ("time", "datetime", "timestamp") else None,
        length=int(length_match.group(1)) if length_match and type_name in ("char", "binary", "bit") else None,
        precision=int(precision) if type_name == "decimal" else None,
        scale=int(scale) if type_name == "decimal" else None,
        enum_values=T.parse_enum_values(column_type) if type_name in T.ENUM_TYPES else None,
        nullable=str(nullable).upper() == "YES",
        # VIRTUAL GENERATED / STORED GENERATED (MariaDB also PERSISTENT); not MySQL's DEFAULT_GENERATED, which is
        # a column with an expression default (DEFAULT CURRENT_TIMESTAMP, DEFAULT (uuid())), stored as any other.
        generated=bool(_GENERATED.search(str(extra))),
        default=constant_default(default, extra, type_name, mariadb=mariadb),
    )


def capture_schema(conn: Any, include: Callable[[str, str], bool] | None = None) -> Schema:
    """Every non-system database, and each of its base tables that `include(db, table)` accepts.

    `conn` is a DB-API connection (PyMySQL). Views, sequences and system-versioned tables are left
    out (their rows are not decoded from the schema); a column of a type the capture cannot decode
    (MariaDB's INET6, UUID, ...) in an included table raises UnsupportedColumnTypeError.
    """
    system = (SYSTEM_DATABASES,)
    show_generated_keys(conn)
    with conn.cursor() as cur:
        server_charset = T.charset_name(_text(_rows(cur, "SELECT @@character_set_server")[0][0]))
        mariadb = "mariadb" in _text(_rows(cur, "SELECT VERSION()")[0][0]).lower()
        schemata = _rows(
            cur,
            "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
            "WHERE SCHEMA_NAME NOT IN %s",
            system,
        )
        table_rows = _rows(cur, _TABLES, system)
        column_rows = _rows(cur, _COLUMNS, system)
        check_rows = _rows(cur, _CHECKS, system) if mariadb else []
        key_rows = _rows(cur, _PRIMARY_KEYS, system)
        foreign_rows = _rows(cur, _FOREIGN_KEYS, system)

    def wanted(db: str, table: str) -> bool:
        return include is None or include(db, table)

    table_charsets = {(str(db), str(t)): str(cs or server_charset) for db, t, cs in table_rows if wanted(db, t)}
    json_columns: dict[tuple[str, str], set[str]] = {}
    for db, table, clause in check_rows:
        m = _JSON_CHECK.fullmatch(str(clause).strip())
        if m is not None:
            json_columns.setdefault((str(db), str(table)), set()).add(m.group(1).replace("``", "`").lower())
    columns: dict[tuple[str, str], list[ColumnDef]] = {}
    for db, table, *rest in column_rows:
        key = (str(db), str(table))
        if key in table_charsets:
            found = json_columns.get(key, set())
            col = column_from_information_schema(key[0], key[1], tuple(rest), found, mariadb=mariadb)
            columns.setdefault(key, []).append(col)
    primary_keys: dict[tuple[str, str], list[str]] = {}
    for db, table, name in key_rows:
        primary_keys.setdefault((str(db), str(table)), []).append(str(name))

    foreign_keys = _foreign_keys(foreign_rows)

    tables: dict[str, dict[str, TableDef]] = {str(name): {} for name, _ in schemata}
    for (db, table), charset in table_charsets.items():
        tables.setdefault(db, {})[table] = TableDef(
            database=db,
            name=table,
            columns=tuple(columns.get((db, table), ())),
            primary_key=tuple(primary_keys.get((db, table), ())),
            charset=charset,
            foreign_keys=foreign_keys.get((db, table), ()),
        )
    charsets = {str(name): T.charset_name(str(charset)) for name, charset in schemata}
    databases = {db: DatabaseDef(db, charsets.get(db, server_charset), t) for db, t in tables.items()}
    return Schema(databases, server_charset)


def _action(rule: Any) -> str:
    """information_schema's DELETE_RULE / UPDATE_RULE; NO ACTION is RESTRICT (ForeignKeyDef)."""
    text = _text(rule).upper()
    return "RESTRICT" if text == "NO ACTION" else text


def _foreign_keys(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], tuple[ForeignKeyDef, ...]]:
    """Each table's foreign keys from the _FOREIGN_KEYS rows (one per column, in order)."""
    parts: dict[tuple[str, str, str], list[tuple[Any, ...]]] = {}
    for row in rows:
        parts.setdefault((_text(row[0]), _text(row[1]), _text(row[2])), []).append(row)
    out: dict[tuple[str, str], list[ForeignKeyDef]] = {}
    for (db, table, name), cols in parts.items():
        first = cols[0]
        out.setdefault((db, table), []).append(
            ForeignKeyDef(
                name=name,
                columns=tuple(_text(c[3]) for c in cols),
                parent_database=_text(first[4]),
                parent_table=_text(first[5]),
                parent_columns=tuple(_text(c[6]) for c in cols),
                on_delete=_action(first[7]),
                on_update=_action(first[8]),
            )
        )
    return {k: tuple(sorted(v, key=lambda f: f.name.lower())) for k, v in out.items()}
