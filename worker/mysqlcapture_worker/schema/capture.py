"""Read the current schema of a server from information_schema into the schema model."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from mysqlcapture_worker.schema.model import ColumnDef, TableDef
from mysqlcapture_worker.schema.schema import Schema

SYSTEM_DATABASES = ("mysql", "information_schema", "performance_schema", "sys")
_ALIASES = {"integer": "int", "numeric": "decimal", "bool": "tinyint", "boolean": "tinyint", "real": "double"}


def _enum_values(column_type: str) -> tuple[str, ...]:
    inner = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(v.replace("''", "'").replace("\\\\", "\\") for v in re.findall(r"'((?:[^']|'')*)'", inner))


def _length(column_type: str) -> int | None:
    m = re.search(r"\((\d+)\)", column_type)
    return int(m.group(1)) if m else None


def capture_schema(conn: Any, include: Callable[[str, str], bool] | None) -> Schema:
    """Every non-system base table (passing `include`), with MariaDB JSON columns recognised by their check."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
            "WHERE SCHEMA_NAME NOT IN %s", (SYSTEM_DATABASES,),
        )
        databases = {str(r[0]): str(r[1]) for r in cur.fetchall()}
        cur.execute(
            "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.CHARACTER_SET_NAME, "
            "c.DATETIME_PRECISION, c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.IS_NULLABLE, c.EXTRA, "
            "EXISTS(SELECT 1 FROM information_schema.CHECK_CONSTRAINTS k WHERE k.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA "
            "AND k.TABLE_NAME = c.TABLE_NAME AND k.CHECK_CLAUSE LIKE CONCAT('%%json_valid(`', c.COLUMN_NAME, '`)%%')), "
            "t.TABLE_COLLATION "
            "FROM information_schema.COLUMNS c JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) "
            "WHERE c.TABLE_SCHEMA NOT IN %s AND t.TABLE_TYPE = 'BASE TABLE' "
            "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION",
            (SYSTEM_DATABASES,),
        )
        columns: dict[tuple[str, str], list[ColumnDef]] = {}
        table_charset: dict[tuple[str, str], str] = {}
        for (db, table, name, dtype, ctype, charset, fsp, precision, scale, nullable, extra, is_json,
             collation) in cur.fetchall():
            key = (str(db), str(table))
            if include is not None and not include(*key):
                continue
            dtype = _ALIASES.get(str(dtype).lower(), str(dtype).lower())
            ctype = str(ctype).lower()
            if is_json:
                dtype = "json"
            col = ColumnDef(
                name=str(name),
                type=dtype,
                signed="unsigned" not in ctype,
                charset=str(charset) if charset else ("binary" if dtype in ("binary", "varbinary") else None),
                column_length=int(fsp) if fsp is not None and dtype in ("time", "datetime", "timestamp") else None,
                length=_length(ctype) if dtype in ("char", "binary", "bit", "varchar", "varbinary") else None,
                precision=int(precision) if precision is not None and dtype == "decimal" else None,
                scale=int(scale) if scale is not None and dtype == "decimal" else None,
                enum_values=_enum_values(ctype) if dtype in ("enum", "set") else None,
                nullable=str(nullable) == "YES",
                generated="generated" in str(extra).lower() or "virtual" in str(extra).lower()
                or "persistent" in str(extra).lower(),
            )
            columns.setdefault(key, []).append(col)
            table_charset[key] = str(collation or "utf8mb4").split("_")[0]
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            "WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA NOT IN %s ORDER BY ORDINAL_POSITION",
            (SYSTEM_DATABASES,),
        )
        pks: dict[tuple[str, str], list[str]] = {}
        for db, table, name in cur.fetchall():
            pks.setdefault((str(db), str(table)), []).append(str(name))
    tables = {
        key: TableDef(database=key[0], name=key[1], columns=tuple(cols), primary_key=tuple(pks.get(key, [])),
                      charset=table_charset[key])
        for key, cols in columns.items()
    }
    return Schema(tables, frozenset(databases))
