"""Library events to normalized events: the only module that reads mysql-replication's event attributes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.charsets import charset_of_collation, text_decoder
from mysqlcapture_worker.replication.events import ColumnMeta, RowsEvent, RowsKind, TableMap
from mysqlcapture_worker.replication.mysql_wire import read_packed_uint

ENUM, SET, GEOMETRY = 247, 248, 255
# The columns the library counts when it spreads the charset lists (TableMapEvent._is_character_column).
_CHARACTER_TYPES = frozenset({254, 253, 15, 252})
PARTIAL_UPDATE_ROWS_EVENT = 39
_SET_STR_VALUE, _ENUM_STR_VALUE = 5, 6  # optional metadata field types
_EVENT_BODY = 20  # the packet: OK byte + 19-byte event header, then the body


class UnsupportedEventError(RuntimeError):
    """A binlog event whose row format the decoder cannot read."""


def _column_meta(col: Any, nullable: bool) -> ColumnMeta:
    bits = getattr(col, "bits", None)
    return ColumnMeta(
        type_code=int(col.type),
        max_length=getattr(col, "max_length", None),
        length_size=getattr(col, "length_size", None),
        precision=getattr(col, "precision", None),
        decimals=getattr(col, "decimals", None),
        fsp=getattr(col, "fsp", None),
        bits=int(bits) if bits is not None else None,
        size=getattr(col, "size", None),
        nullable=nullable,
    )


def _is_character(type_code: int, dbms: str) -> bool:
    return type_code in _CHARACTER_TYPES or (type_code == GEOMETRY and dbms == "mariadb")


def _collations(ev: Any, meta: Any) -> tuple[int | None, ...] | None:
    """Collation id per column (None where not a string), from the library's per-kind lists."""
    dbms = getattr(ev, "dbms", "mysql") or "mysql"
    char_ids = list(meta.charset_collation_list or [])
    enum_ids = list(meta.enum_and_set_collation_list or [])
    types = [int(c.type) for c in ev.columns]
    n_char = sum(1 for t in types if _is_character(t, dbms))
    n_enum = sum(1 for t in types if t in (ENUM, SET))
    # MINIMAL logs the charsets of string columns but not those of ENUM/SET; NO_LOG neither.
    have_char = len(char_ids) == n_char
    have_enum = len(enum_ids) == n_enum
    if not (n_char and have_char) and not (n_enum and have_enum):
        return None
    if n_char and not have_char:
        return None  # the string columns' charsets must never be guessed
    chars, enums = iter(char_ids), iter(enum_ids)
    out: list[int | None] = []
    for t in types:
        if t in (ENUM, SET):
            out.append(int(next(enums)) if have_enum else None)
        elif _is_character(t, dbms):
            collation = int(next(chars))  # MariaDB logs one for GEOMETRY too: consume it
            out.append(None if t == GEOMETRY else collation)
        else:
            out.append(None)
    return tuple(out)


def _raw_member_lists(ev: Any) -> dict[int, list[list[bytes]]]:
    """The SET/ENUM string values of the optional metadata as raw bytes.

    The library decodes them as UTF-8 and replaces any other charset's non-ASCII member by "";
    here they are read again from the event body (TABLE_MAP layout, post-header of 8 bytes).
    """
    data = ev.packet.packet.get_all_data()
    end = _EVENT_BODY + ev.event_size
    off = _EVENT_BODY + 8
    off += data[off] + 2  # schema name: length, bytes, NUL
    off += data[off] + 2  # table name
    count, off = read_packed_uint(data, off)
    off += count  # column types
    meta_len, off = read_packed_uint(data, off)
    off += meta_len + (count + 7) // 8  # column metadata, null bitmap
    out: dict[int, list[list[bytes]]] = {}
    while off < end:
        kind = data[off]
        length, off = read_packed_uint(data, off + 1)
        if kind in (_SET_STR_VALUE, _ENUM_STR_VALUE):
            lists, p = [], off
            while p < off + length:
                n, p = read_packed_uint(data, p)
                members = []
                for _ in range(n):
                    size, p = read_packed_uint(data, p)
                    members.append(bytes(data[p : p + size]))
                    p += size
                lists.append(members)
            out[kind] = lists
        off += length
    if off != end:
        raise ValueError("optional metadata overruns the event")
    return out


def _members(ev: Any, meta: Any, charsets: tuple[int | None, ...] | None) -> tuple[tuple[str, ...] | None, ...] | None:
    """ENUM and SET members per column, decoded from the column's charset."""
    types = [int(c.type) for c in ev.columns]
    if ENUM not in types and SET not in types:
        return tuple(None for _ in types)
    try:
        raw = _raw_member_lists(ev)
        counts = (len(raw.get(_ENUM_STR_VALUE, [])), len(raw.get(_SET_STR_VALUE, [])))
        if counts != (types.count(ENUM), types.count(SET)):
            raise ValueError("member lists do not match the ENUM/SET columns")
    except (ValueError, IndexError):
        raw = {  # the library's reading: right for UTF-8 members
            _ENUM_STR_VALUE: [[m.encode() for m in v] for v in meta.set_enum_str_value_list or []],
            _SET_STR_VALUE: [[m.encode() for m in v] for v in meta.set_str_value_list or []],
        }
    enums, sets = iter(raw.get(_ENUM_STR_VALUE, [])), iter(raw.get(_SET_STR_VALUE, []))
    out: list[tuple[str, ...] | None] = []
    for i, t in enumerate(types):
        source = enums if t == ENUM else sets if t == SET else None
        if source is None:
            out.append(None)
            continue
        values = next(source, None)
        if values is None:
            return None
        charset = charset_of_collation(charsets[i]) if charsets is not None else None
        decode = text_decoder(charset or "utf8mb4") or text_decoder("utf8mb4")
        assert decode is not None
        out.append(tuple(decode(v) for v in values))
    return tuple(out)


def to_table_map(ev: Any) -> TableMap:
    """A TABLE_MAP event, with whatever optional metadata the server logged (all of it with FULL)."""
    nulls = bytes(ev.null_bitmask)
    count = len(ev.columns)
    columns = tuple(
        _column_meta(c, bool(nulls[i >> 3] & (1 << (i & 7))) if i >> 3 < len(nulls) else True)
        for i, c in enumerate(ev.columns)
    )
    meta = getattr(ev, "optional_metadata", None)
    names = unsigned = charsets = enum_values = primary_key = None
    if meta is not None:
        if meta.column_name_list and len(meta.column_name_list) == count:
            names = tuple(str(n) for n in meta.column_name_list)
        if meta.unsigned_column_list and len(meta.unsigned_column_list) == count:
            unsigned = tuple(bool(u) for u in meta.unsigned_column_list)
        charsets = _collations(ev, meta)
        if names is not None:  # members and the primary key are logged with FULL only
            enum_values = _members(ev, meta, charsets)
            pk = list(meta.simple_primary_key_list or []) or list(meta.primary_keys_with_prefix or {})
            primary_key = tuple(int(i) for i in pk)
    return TableMap(
        table_id=int(ev.table_id),
        database=str(ev.schema),
        table=str(ev.table),
        columns=columns,
        column_names=names,
        unsigned=unsigned,
        charsets=charsets,
        enum_values=enum_values,
        primary_key=primary_key,
    )


VECTOR = 242


def with_vector_columns(table_map: TableMap, columns: tuple[int, ...]) -> TableMap:
    """The map with the VECTOR type back on the columns the library was shown as BLOB (see `mysql_wire`)."""
    metas = list(table_map.columns)
    charsets = list(table_map.charsets) if table_map.charsets is not None else None
    for i in columns:
        metas[i] = replace(metas[i], type_code=VECTOR)
        if charsets is not None:
            charsets[i] = None
    return replace(table_map, columns=tuple(metas), charsets=tuple(charsets) if charsets is not None else None)


def partial_update_refused(where: Coordinate) -> UnsupportedEventError:
    """The error that stops the capture at a PARTIAL_UPDATE_ROWS event (binlog_row_value_options=PARTIAL_JSON)."""
    return UnsupportedEventError(
        f"PARTIAL_UPDATE_ROWS event at {where}: set binlog_row_value_options='' "
        "on the source (partial JSON updates are not decoded)"
    )


def to_rows_event(ev: Any, kind: RowsKind, where: Coordinate, *, start_pos: int = 0) -> RowsEvent:
    """The rows event with its row images still encoded; `where` and `start_pos` as the event's fields.

    Call it before anything touches `ev.rows`: the library has read only the post-header and the
    columns-present bitmaps. `ev.event_size` excludes the header and the CRC32 checksum when the
    server writes one, so what remains up to it is exactly the row images.
    """
    if ev.event_type == PARTIAL_UPDATE_ROWS_EVENT:
        raise partial_update_refused(where)
    remaining = ev.event_size - ev.packet.read_bytes
    if remaining < 0:
        raise UnsupportedEventError(f"rows event at {where} was read past its end")
    body = ev.packet.read(remaining)
    after = getattr(ev, "columns_present_bitmap2", None) if kind is RowsKind.UPDATE else None
    return RowsEvent(
        kind=kind,
        table_id=int(ev.table_id),
        where=where,
        timestamp=int(ev.timestamp),
        server_id=int(ev.packet.server_id),
        columns_present=bytes(ev.columns_present_bitmap),
        columns_present_after=bytes(after) if after is not None else None,
        body=bytes(body),
        column_count=int(ev.number_of_columns),
        start_pos=start_pos,
        flags=int(getattr(ev, "flags", 0) or 0),
    )
