"""Library events to normalized events: the only module that reads mysql-replication's event attributes."""

from __future__ import annotations

from typing import Any

from mysqlcapture_worker.replication.events import BinlogCoordinate, ColumnMeta, RowsEvent, RowsKind, TableMap

ENUM, SET = 247, 248


def _column_meta(col: Any) -> ColumnMeta:
    return ColumnMeta(
        type_code=int(col.type),
        max_length=getattr(col, "max_length", None),
        length_size=getattr(col, "length_size", None),
        precision=getattr(col, "precision", None),
        decimals=getattr(col, "decimals", None),
        fsp=getattr(col, "fsp", None),
        bits=getattr(col, "bits", None),
        size=getattr(col, "size", None),
    )


def to_table_map(ev: Any) -> TableMap:
    """A TABLE_MAP event with its FULL optional metadata when the server sent it."""
    columns = tuple(_column_meta(c) for c in ev.columns)
    meta = getattr(ev, "optional_metadata", None)
    names = tuple(meta.column_name_list) if meta is not None and meta.column_name_list else None
    unsigned = charsets = enum_values = primary_key = None
    if names is not None:
        unsigned = tuple(bool(getattr(c, "unsigned", False)) for c in ev.columns)
        ids: list[int | None] = []
        char_pos = 0
        enum_set_pos = 0
        collations = list(meta.charset_collation_list or [])
        enum_collations = list(meta.enum_and_set_collation_list or [])
        for c in ev.columns:
            if c.type in (ENUM, SET):
                ids.append(enum_collations[enum_set_pos] if enum_set_pos < len(enum_collations) else None)
                enum_set_pos += 1
            elif ev._is_character_column(c.type, dbms=ev.dbms):
                ids.append(collations[char_pos] if char_pos < len(collations) else None)
                char_pos += 1
            else:
                ids.append(None)
        charsets = tuple(ids)
        values: list[tuple[str, ...] | None] = []
        for c in ev.columns:
            if c.type == ENUM and c.enum_values:
                values.append(tuple(c.enum_values[1:]))  # the library prepends "" for index 0
            elif c.type == SET and c.set_values:
                values.append(tuple(c.set_values))
            else:
                values.append(None)
        enum_values = tuple(values)
        pk = list(meta.simple_primary_key_list or [])
        if not pk and meta.primary_keys_with_prefix:
            pk = list(meta.primary_keys_with_prefix)
        primary_key = tuple(int(i) for i in pk)
    schema = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
    table = ev.table.decode() if isinstance(ev.table, bytes) else ev.table
    return TableMap(
        table_id=int(ev.table_id),
        database=schema,
        table=table,
        columns=columns,
        column_names=names,
        unsigned=unsigned,
        charsets=charsets,
        enum_values=enum_values,
        primary_key=primary_key,
    )


def to_rows_event(ev: Any, kind: RowsKind, where: BinlogCoordinate) -> RowsEvent:
    """The rows event with its row images still encoded (the library has read only the header and bitmaps)."""
    body = ev.packet.read(ev.event_size - ev.packet.read_bytes)
    return RowsEvent(
        kind=kind,
        table_id=int(ev.table_id),
        where=where,
        timestamp=int(ev.timestamp),
        server_id=int(ev.packet.server_id),
        columns_present=bytes(ev.columns_present_bitmap),
        columns_present_after=bytes(ev.columns_present_bitmap2) if kind is RowsKind.UPDATE else None,
        body=bytes(body),
        column_count=int(ev.number_of_columns),
    )
