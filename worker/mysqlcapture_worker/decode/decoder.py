"""Compile a TABLE_MAP (+ the table's definition) into a decoder of its rows events' images."""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

import orjson
from pymysqlreplication.json_binary import parse_json

from mysqlcapture_worker.decode import values as V
from mysqlcapture_worker.decode.geometry import wkt
from mysqlcapture_worker.replication.events import ColumnMeta, RowsEvent, RowsKind, TableMap
from mysqlcapture_worker.schema.model import ColumnDef, TableDef

# Reader: (buffer, offset) -> (value, new offset)
Reader = Callable[[bytes, int], tuple[Any, int]]
RowImage = tuple[list[Any] | None, list[Any] | None]


class UnsupportedTypeError(RuntimeError):
    """A column whose type or charset the decoder cannot render."""


def _fixed(fmt: str, convert: Callable[[Any], Any] | None = None) -> Reader:
    st = struct.Struct(fmt)
    size = st.size
    unpack = st.unpack_from
    if convert is None:
        return lambda b, o: (unpack(b, o)[0], o + size)
    return lambda b, o: (convert(unpack(b, o)[0]), o + size)


def _int_reader(code: int, unsigned: bool) -> Reader:
    if code == 9:  # INT24
        if unsigned:
            return lambda b, o: (int.from_bytes(b[o : o + 3], "little"), o + 3)
        return lambda b, o: (int.from_bytes(b[o : o + 3], "little", signed=True), o + 3)
    fmt = {1: "b", 2: "h", 3: "i", 8: "q"}[code]
    return _fixed("<" + (fmt.upper() if unsigned else fmt))


def _length_prefixed(size: int) -> Callable[[bytes, int], tuple[bytes, int]]:
    def read(b: bytes, o: int) -> tuple[bytes, int]:
        n = int.from_bytes(b[o : o + size], "little")
        start = o + size
        return b[start : start + n], start + n

    return read


def _text_converter(col: ColumnDef, charset: str | None, where: str) -> Callable[[bytes], Any]:
    if col.type == "json":
        return lambda raw: orjson.loads(raw) if raw else None
    name = charset or col.charset or "utf8mb4"
    codec = V.CODECS.get(name)
    if codec is None:
        raise UnsupportedTypeError(
            f"{where}: charset {name} is not supported (Maxwell's unsupported list); convert the column to utf8mb4"
        )
    if codec == "binary":
        return lambda raw: base64.b64encode(raw).decode()
    return lambda raw: raw.decode(codec)


def _column_reader(meta: ColumnMeta, col: ColumnDef, charset_id: int | None, unsigned: bool, where: str) -> Reader:
    code = meta.type_code
    if code in (1, 2, 3, 8, 9):
        return _int_reader(code, unsigned)
    if code == 4:
        return lambda b, o: (V.float32_text(b[o : o + 4]), o + 4)
    if code == 5:
        return _fixed("<d")
    if code == 246:
        precision, scale = meta.precision or 10, meta.decimals or 0
        size = V.decimal_size(precision, scale)
        return lambda b, o: (V.JsonNumber(V.decimal_text(b[o : o + size], precision, scale)), o + size)
    if code == 13:
        return lambda b, o: (b[o] + 1900 if b[o] else 0, o + 1)
    if code == 10:
        return lambda b, o: (V.date_text(int.from_bytes(b[o : o + 3], "little")), o + 3)
    if code == 18:
        fsp = meta.fsp or 0
        n = 5 + V.fsp_bytes(fsp)
        return lambda b, o: (V.datetime2_text(b[o : o + n], fsp), o + n)
    if code == 17:
        fsp = meta.fsp or 0
        n = 4 + V.fsp_bytes(fsp)
        return lambda b, o: (V.timestamp2_text(b[o : o + n], fsp), o + n)
    if code == 19:
        fsp = meta.fsp or 0
        n = 3 + V.fsp_bytes(fsp)
        return lambda b, o: (V.time2_text(b[o : o + n], fsp), o + n)
    if code == 7:
        return lambda b, o: (V.timestamp2_text(int.from_bytes(b[o : o + 4], "little").to_bytes(4, "big"), 0), o + 4)
    if code == 12:

        def old_datetime(b: bytes, o: int) -> tuple[str, int]:
            v = int.from_bytes(b[o : o + 8], "little")
            d, t = divmod(v, 1000000)
            return f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} {t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}", o + 8

        return old_datetime
    if code == 11:

        def old_time(b: bytes, o: int) -> tuple[str, int]:
            v = int.from_bytes(b[o : o + 3], "little", signed=True)
            sign, v = ("-", -v) if v < 0 else ("", v)
            return f"{sign}{v // 10000:02d}:{v // 100 % 100:02d}:{v % 100:02d}", o + 3

        return old_time
    if code == 16:
        bits = meta.bits or 1
        nbytes = (bits + 7) // 8
        if bits == 1:
            return lambda b, o: (b[o] != 0, o + 1)
        return lambda b, o: (int.from_bytes(b[o : o + nbytes], "big"), o + nbytes)
    if code in (247, 248):
        size = meta.size or 1
        members = col.enum_values or ()
        if code == 247:
            return lambda b, o: (_enum(members, int.from_bytes(b[o : o + size], "little")), o + size)
        return lambda b, o: (_set(members, int.from_bytes(b[o : o + size], "little")), o + size)
    charset = V.charset_of_collation(charset_id) if charset_id is not None else None
    if code in (15, 253, 254):
        prefix = _length_prefixed(1 if (meta.max_length or 0) <= 255 else 2)
        if col.type in ("binary", "varbinary") or (charset or col.charset) == "binary":
            pad = col.length if col.type == "binary" and col.length else (meta.max_length if col.type == "binary" else 0)

            def read_binary(b: bytes, o: int) -> tuple[str, int]:
                raw, o = prefix(b, o)
                if pad and len(raw) < pad:
                    raw = raw + b"\x00" * (pad - len(raw))
                return base64.b64encode(raw).decode(), o

            return read_binary
        convert = _text_converter(col, charset, where)
        strip = col.type == "char"

        def read_text(b: bytes, o: int) -> tuple[Any, int]:
            raw, o = prefix(b, o)
            text = convert(raw)
            return (text.rstrip(" ") if strip else text), o

        return read_text
    if code in (249, 250, 251, 252):
        prefix = _length_prefixed(meta.length_size or 2)
        is_text = col.type in ("tinytext", "text", "mediumtext", "longtext", "json") or (
            charset is not None and charset != "binary" and col.type not in ("tinyblob", "blob", "mediumblob", "longblob")
        )
        if not is_text:
            return lambda b, o: _map(prefix(b, o), lambda raw: base64.b64encode(raw).decode())
        convert = _text_converter(col, charset, where)
        return lambda b, o: _map(prefix(b, o), convert)
    if code == 245:
        prefix = _length_prefixed(meta.length_size or 4)
        return lambda b, o: _map(prefix(b, o), lambda raw: _mysql_json(raw))
    if code == 255:
        prefix = _length_prefixed(meta.length_size or 4)
        return lambda b, o: _map(prefix(b, o), wkt)
    raise UnsupportedTypeError(
        f"{where}: MySQL column type code {code} is not supported; exclude the table in spec.tables.exclude"
    )


def _map(pair: tuple[bytes, int], convert: Callable[[bytes], Any]) -> tuple[Any, int]:
    return convert(pair[0]), pair[1]


def _enum(members: tuple[str, ...], index: int) -> str:
    return members[index - 1] if 0 < index <= len(members) else ""


def _set(members: tuple[str, ...], mask: int) -> list[str]:
    return [m for i, m in enumerate(members) if mask & (1 << i)]


def _json_plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_json_plain(k): _json_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_plain(v) for v in value]
    return value


def _mysql_json(raw: bytes) -> Any:
    if not raw:
        return None
    return _json_plain(parse_json(raw[0], raw[1:]))


class TableDecoder:
    """Decodes the row images of one table's rows events with readers compiled once."""

    def __init__(self, table_map: TableMap, readers: list[Reader]) -> None:
        self.table_map = table_map
        self._readers = readers
        self._count = len(readers)

    def _image(self, body: bytes, off: int, present: bytes) -> tuple[list[Any], int]:
        readers = self._readers
        count = self._count
        present_idx = [i for i in range(count) if present[i >> 3] & (1 << (i & 7))]
        nbytes = (len(present_idx) + 7) // 8
        nulls = body[off : off + nbytes]
        off += nbytes
        row: list[Any] = [None] * count
        for bit, i in enumerate(present_idx):
            if nulls[bit >> 3] & (1 << (bit & 7)):
                continue
            row[i], off = readers[i](body, off)
        return row, off

    def decode(self, event: RowsEvent) -> list[RowImage]:
        body = event.body
        off = 0
        end = len(body)
        out: list[RowImage] = []
        present = event.columns_present
        if event.kind is RowsKind.UPDATE:
            after_present = event.columns_present_after or present
            while off < end:
                before, off = self._image(body, off, present)
                after, off = self._image(body, off, after_present)
                out.append((before, after))
        elif event.kind is RowsKind.INSERT:
            while off < end:
                row, off = self._image(body, off, present)
                out.append((None, row))
        else:
            while off < end:
                row, off = self._image(body, off, present)
                out.append((row, None))
        return out


def compile_decoder(table_map: TableMap, table: TableDef) -> TableDecoder:
    """Build the per-column readers for `table_map`, typed and named by `table`."""
    if len(table.columns) != len(table_map.columns):
        raise UnsupportedTypeError(
            f"{table_map.database}.{table_map.table}: binlog row has {len(table_map.columns)} columns, "
            f"definition has {len(table.columns)}"
        )
    readers: list[Reader] = []
    for i, (meta, col) in enumerate(zip(table_map.columns, table.columns, strict=True)):
        unsigned = not col.signed
        if table_map.unsigned is not None and table_map.unsigned[i]:
            unsigned = True
        charset_id = table_map.charsets[i] if table_map.charsets is not None else None
        if col.enum_values is None and table_map.enum_values is not None and table_map.enum_values[i]:
            from dataclasses import replace

            col = replace(col, enum_values=table_map.enum_values[i])
        where = f"{table_map.database}.{table_map.table}.{col.name}"
        readers.append(_column_reader(meta, col, charset_id, unsigned, where))
    return TableDecoder(table_map, readers)
