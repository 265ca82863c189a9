"""Text-protocol values to the binlog path's values: per-column converters compiled once per table.

A snapshot reads rows with `SELECT` (no PyMySQL converters, `character_set_results = NULL`, time zone
UTC), so every value arrives as the server's raw bytes in the column's own charset. Each converter
turns those bytes into exactly the Python value the binlog decoder (decode/columns.py) produces for
the same row, so `render()` gives byte-identical `data` JSON either way.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from mysqlcapture_api.javatext import jackson_fragment, java_decimal
from mysqlcapture_api.schema.model import BINARY_TYPES, INTEGER_TYPES, ColumnDef, TableDef
from mysqlcapture_api.schema.types import GEOMETRY_TYPES, UnsupportedColumnTypeError, unsupported

from mysqlcapture_worker.charsets import text_decoder
from mysqlcapture_worker.decode import values as V
from mysqlcapture_worker.decode.geometry import wkt
from mysqlcapture_worker.decode.mysql_json import json_text_fragment, json_text_reparsed

Convert = Callable[[bytes], Any]
_F32 = struct.Struct("<f")
_TEMPORAL = frozenset({"date", "time", "datetime", "timestamp"})


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _float32(raw: bytes) -> orjson.Fragment | None:
    # Selected as DOUBLE (exact for a FLOAT): narrowed back to float32, rendered as the binlog path does.
    return V.float32_fragment(_F32.pack(float(raw)))


def _double(raw: bytes) -> orjson.Fragment | None:
    return V.double_fragment(float(raw))


def _bits(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def _ascii(raw: bytes) -> str:
    return raw.decode("ascii")


def _decimal(raw: bytes) -> orjson.Fragment:
    return orjson.Fragment(java_decimal(raw.decode("ascii")))


def _is_binary(col: ColumnDef) -> bool:
    return col.type in BINARY_TYPES or col.charset == "binary"


def _text_decoder(table: TableDef, col: ColumnDef) -> Callable[[bytes], str]:
    charset = col.charset or table.charset
    decode = text_decoder(charset)
    if decode is None:
        raise UnsupportedColumnTypeError(
            f"column {table.database}.{table.name}.{col.name} uses charset {charset!r}, which the capture does "
            "not support. Convert the column to utf8mb4 or exclude the table (spec.tables.exclude).",
            database=table.database,
            table=table.name,
        )
    return decode


def _charset_decoder(table: TableDef, col: ColumnDef) -> Callable[[bytes], Any]:
    decode = _text_decoder(table, col)
    return lambda raw: jackson_fragment(decode(raw))


def _set_of(decode: Callable[[bytes], str]) -> Convert:
    def convert(raw: bytes) -> list[Any]:
        # The server lists a SET's members in definition order, as the binlog path does.
        return [jackson_fragment(m) for m in decode(raw).split(",")] if raw else []

    return convert


def column_converter(table: TableDef, col: ColumnDef, *, json_text: bool = True) -> tuple[str, Convert]:
    """(select expression, converter of its raw text value) for one column.

    `json_text`: the server stores JSON as text (MariaDB), printed as it is; else (MySQL) the server prints its
    binary JSON as text, parsed and printed as the binlog path prints the binary form. On MySQL that text has lost
    what the binary form says of DECIMAL and temporal values inside a document (they read back as numbers and
    strings): see the README's snapshot section.
    """
    name = quote(col.name)
    t = col.type
    if t in INTEGER_TYPES or t == "year":
        return name, int
    if t == "decimal":
        return name, _decimal
    if t == "double":
        return name, _double
    if t == "float":
        # The server prints FLOAT with 6 significant digits; as DOUBLE it is exact.
        return f"CAST({name} AS DOUBLE)", _float32
    if t == "bit":
        return name, _bits  # BIT(1) too: 0 or 1, as Maxwell prints it
    if t in _TEMPORAL:
        return name, _ascii
    if t == "json":
        return name, json_text_fragment if json_text else json_text_reparsed
    if t == "vector":
        return name, V.vector_value  # the float32 bytes, as in the binlog
    if t in GEOMETRY_TYPES:
        return name, wkt
    if _is_binary(col):
        # BINARY(N) comes back padded with its 0x00 bytes, as the binlog path pads it.
        return name, _b64
    if t == "enum":
        return name, _charset_decoder(table, col)
    if t == "set":
        return name, _set_of(_text_decoder(table, col))
    if t in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext"):
        return name, _charset_decoder(table, col)
    raise unsupported(table.database, table.name, col.name, t)


# Values that can be large (a row past max_allowed_packet would come back NULL from CONCAT_WS).
_LARGE = frozenset({"mediumtext", "longtext", "mediumblob", "longblob", "json"}) | GEOMETRY_TYPES
# Values whose text never holds a comma or is exactly "N": packed as they are, everything else as HEX.
_PLAIN = INTEGER_TYPES | _TEMPORAL | {"year", "decimal", "double", "float"}
_NULL = b"N"


@dataclass(frozen=True)
class RowConverter:
    """A table's select list and the converters of its columns, in the table's column order.

    Packed (tables without large columns): the server sends each row as one `CONCAT_WS(',', ...)`
    value, numbers and dates as text, other values as HEX, NULL as `N`. PyMySQL's per-value parsing
    is most of a snapshot's cost; one value per row and a C `split` make the read about twice as fast.
    """

    table: TableDef
    select_list: str
    names: tuple[str, ...]
    converters: tuple[Convert, ...]
    hexed: tuple[bool, ...] | None  # None: not packed
    row: Callable[[tuple[bytes | None, ...]], dict[str, Any]]  # a record as read -> the row's `data` dict

    def unpack(self, rows: list[tuple[bytes | None, ...]]) -> list[tuple[bytes | None, ...]]:
        """Rows as one raw value per column (None for NULL), whatever the select list's shape."""
        hexed = self.hexed
        if hexed is None:
            return rows
        unhex = binascii.unhexlify
        out: list[tuple[bytes | None, ...]] = []
        for (packed,) in rows:
            assert packed is not None
            out.append(
                tuple(
                    None if v == _NULL else unhex(v) if h else v for v, h in zip(packed.split(b","), hexed, strict=True)
                )
            )
        return out


def _compile_row(
    names: tuple[str, ...], converters: tuple[Convert, ...], hexed: tuple[bool, ...] | None
) -> Callable[[tuple[bytes | None, ...]], dict[str, Any]]:
    """One function per table turning a record into the `data` dict, its columns' converters inlined.

    Generated once per table, it does per row only what that table needs: no zip, no per-value
    dispatch; the dict is built in column order, the order the binlog path renders.
    """
    scope: dict[str, Any] = {"NUL": _NULL, "unhex": binascii.unhexlify}
    items = []
    for i, (name, conv) in enumerate(zip(names, converters, strict=True)):
        scope[f"c{i}"], scope[f"n{i}"] = conv, name
        if hexed is None:
            items.append(f"n{i}: None if r[{i}] is None else c{i}(r[{i}])")
        else:
            value = f"unhex(p[{i}])" if hexed[i] else f"p[{i}]"
            items.append(f"n{i}: None if p[{i}] == NUL else c{i}({value})")
    body = "    p = r[0].split(b',')\n" if hexed is not None else ""
    source = "def row(r):\n" + body + "    return {" + ", ".join(items) + "}\n"
    exec(compile(source, "<snapshot row converter>", "exec"), scope)  # only column indexes are interpolated
    row: Callable[[tuple[bytes | None, ...]], dict[str, Any]] = scope["row"]
    return row


def compile_row_converter(
    table: TableDef, *, pack: bool = True, json_text: bool = True, left_out: frozenset[str] = frozenset()
) -> RowConverter:
    """The table's SELECT and row converter (`json_text`: see `column_converter`). Columns named in `left_out`
    (lower case: spec.columns.exclude) are selected as NULL: the server neither reads nor sends their values."""
    pairs = [
        ("NULL", conv) if col.name.lower() in left_out else (expr, conv)
        for col in table.columns
        for expr, conv in [column_converter(table, col, json_text=json_text)]
    ]
    names = tuple(table.column_names())
    converters = tuple(conv for _, conv in pairs)
    if not pack or any(col.type in _LARGE for col in table.columns):
        select = ", ".join(expr for expr, _ in pairs)
        return RowConverter(table, select, names, converters, None, _compile_row(names, converters, None))
    hexed = tuple(col.type not in _PLAIN and col.type != "bit" for col in table.columns)
    parts = []
    for col, (expr, _), h in zip(table.columns, pairs, hexed, strict=True):
        if col.type == "bit":
            expr = f"{expr} + 0"  # HEX() of a BIT is the hex of its number, not of its bytes: send the number
        parts.append(f"IFNULL({f'HEX({expr})' if h else expr}, 'N')")
    converters = tuple(int if col.type == "bit" else conv for col, conv in zip(table.columns, converters, strict=True))
    select = f"CONCAT_WS(',', {', '.join(parts)})"
    return RowConverter(table, select, names, converters, hexed, _compile_row(names, converters, hexed))
