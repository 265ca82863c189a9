"""Which table definition decodes a TABLE_MAP: the schema history's, checked against the event's own metadata."""

from __future__ import annotations

import logging
from typing import Protocol

from mysqlcapture_api.schema.model import ColumnDef, TableDef

from mysqlcapture_worker.decode.values import charset_of_collation
from mysqlcapture_worker.replication.events import TableMap

log = logging.getLogger(__name__)

# MySQL field type codes (include/field_types.h) -> Maxwell type names, for tables the schema does not know.
_TYPE_NAMES: dict[int, str] = {
    0: "decimal",
    1: "tinyint",
    2: "smallint",
    3: "int",
    4: "float",
    5: "double",
    7: "timestamp",
    8: "bigint",
    9: "mediumint",
    10: "date",
    11: "time",
    12: "datetime",
    13: "year",
    15: "varchar",
    16: "bit",
    17: "timestamp",
    18: "datetime",
    19: "time",
    245: "json",
    246: "decimal",
    247: "enum",
    248: "set",
    249: "tinyblob",
    250: "mediumblob",
    251: "longblob",
    252: "blob",
    253: "varchar",
    254: "char",
    255: "geometry",
}


_TEXT_OF_BLOB = {"tinyblob": "tinytext", "blob": "text", "mediumblob": "mediumtext", "longblob": "longtext"}


class SchemaLookup(Protocol):
    def table(self, database: str, name: str) -> TableDef | None: ...


class SchemaMismatchError(RuntimeError):
    """The binlog's row layout does not match any known definition of the table."""


def resolve_table_def(tm: TableMap, schema: SchemaLookup) -> TableDef:
    """The definition to decode `tm` with.

    The schema history knows what the TABLE_MAP cannot say (MariaDB JSON columns, exact type
    names); the TABLE_MAP's FULL metadata, when present, is the truth about names and layout.
    """
    known = schema.table(tm.database, tm.table)
    if known is not None and len(known.columns) == len(tm.columns):
        if tm.column_names is None or [c.name.lower() for c in known.columns] == [n.lower() for n in tm.column_names]:
            return known
        log.warning(
            "schema history disagrees with the binlog's column names for %s.%s; using the binlog's metadata",
            tm.database,
            tm.table,
        )
    if tm.column_names is None:
        have = "unknown" if known is None else f"{len(known.columns)} columns"
        raise SchemaMismatchError(
            f"cannot decode {tm.database}.{tm.table}: the binlog row has {len(tm.columns)} columns, the schema "
            f"history has {have}, and binlog_row_metadata=MINIMAL carries no names. Set "
            "binlog_row_metadata=FULL on the server, or restart the capture from a position after the table's "
            "last DDL so the schema is captured again."
        )
    return table_def_from_metadata(tm, known)


def table_def_from_metadata(tm: TableMap, known: TableDef | None = None) -> TableDef:
    """A TableDef built from a TABLE_MAP's FULL metadata, reusing `known` columns where names match."""
    assert tm.column_names is not None
    previous = {c.name.lower(): c for c in known.columns} if known is not None else {}
    columns: list[ColumnDef] = []
    for i, meta in enumerate(tm.columns):
        name = tm.column_names[i]
        prior = previous.get(name.lower())
        type_name = _TYPE_NAMES.get(meta.type_code)
        if type_name is None:
            raise SchemaMismatchError(
                f"{tm.database}.{tm.table}.{name}: unsupported MySQL column type code {meta.type_code}"
            )
        if prior is not None and _compatible(prior.type, type_name):
            columns.append(prior)
            continue
        charset = charset_of_collation(tm.charsets[i]) if tm.charsets is not None else None
        if meta.type_code in (249, 250, 251, 252) and charset not in (None, "binary"):
            type_name = _TEXT_OF_BLOB[type_name]
        elif meta.type_code in (253, 254) and charset == "binary":
            type_name = "varbinary" if meta.type_code == 253 else "binary"
        enum_values = tm.enum_values[i] if tm.enum_values is not None else None
        columns.append(
            ColumnDef(
                name=name,
                type=type_name,
                signed=not (tm.unsigned[i] if tm.unsigned is not None else False),
                charset=charset,
                column_length=meta.fsp,
                length=meta.max_length if type_name in ("char", "binary") else None,
                precision=meta.precision,
                scale=meta.decimals,
                enum_values=enum_values,
                nullable=meta.nullable,
            )
        )
    pk = tuple(tm.column_names[i] for i in tm.primary_key) if tm.primary_key else ()
    return TableDef(database=tm.database, name=tm.table, columns=tuple(columns), primary_key=pk)


_FAMILIES = [
    {"tinyint", "smallint", "mediumint", "int", "bigint"},
    {"char", "varchar", "binary", "varbinary"},
    {"tinyblob", "blob", "mediumblob", "longblob", "tinytext", "text", "mediumtext", "longtext", "json"},
    {"datetime", "timestamp"},
]


def _compatible(schema_type: str, binlog_type: str) -> bool:
    if schema_type == binlog_type:
        return True
    return any(schema_type in fam and binlog_type in fam for fam in _FAMILIES) or (
        binlog_type == "geometry" and schema_type not in {t for fam in _FAMILIES for t in fam}
    )
