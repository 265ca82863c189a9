"""Per-column decoding plans: a struct code plus converter for fixed-width types, an op for the others."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from mysqlcapture_api.javatext import jackson_fragment, java_decimal
from mysqlcapture_api.schema.model import BINARY_TYPES

from mysqlcapture_worker.charsets import text_decoder, utf8_decode
from mysqlcapture_worker.decode import values as V
from mysqlcapture_worker.decode.geometry import wkt
from mysqlcapture_worker.decode.mysql_json import json_text_fragment, mysql_json_fragment
from mysqlcapture_worker.replication.events import ColumnMeta

# An op decodes one column of one row image: (buffer, offset, row) -> next offset, value stored in row.
Op = Callable[[bytes, int, list[Any]], int]
Cache = dict[bytes, Any]

# MySQL field types (include/field_types.h) as they appear in TABLE_MAP events.
TINY, SHORT, LONG, FLOAT, DOUBLE, TIMESTAMP, LONGLONG, INT24 = 1, 2, 3, 4, 5, 7, 8, 9
DATE, TIME, DATETIME, YEAR, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = 10, 11, 12, 13, 15, 16, 17, 18, 19
JSON, NEWDECIMAL, ENUM, SET, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB = 245, 246, 247, 248, 249, 250, 251, 252
VAR_STRING, STRING, GEOMETRY = 253, 254, 255
VECTOR = 242  # MySQL 9.0+
_INT_CODES = {TINY: "b", SHORT: "h", LONG: "i", LONGLONG: "q"}


class UnsupportedTypeError(RuntimeError):
    """A column whose type or charset the decoder cannot render."""


@dataclass(frozen=True)
class ColumnPlan:
    """Fixed-width columns: `fixed` is a struct code (no byte order) and `convert` maps the unpacked item.
    Variable-width columns: `make_op(dest)` builds the op storing the value at row[dest]."""

    fixed: str | None = None
    convert: Callable[[Any], Any] | None = None
    make_op: Callable[[int], Op] | None = None


@dataclass(frozen=True)
class ColumnSpec:
    """Everything a column's plan depends on, resolved from the TABLE_MAP and the table definition."""

    where: str  # "db.table column 'name'", for error messages
    meta: ColumnMeta
    type_name: str  # the definition's type name ("" when unknown)
    unsigned: bool
    charset: str | None  # the charset of string columns, None when unknown
    table_charset: str
    enum_values: tuple[str, ...] | None
    length: int | None  # declared length (binary(N))
    fsp: int | None
    precision: int | None
    scale: int | None


def compile_column(spec: ColumnSpec, caches: list[Cache]) -> ColumnPlan:
    """The plan for one column. Caches (raw bytes -> value) it creates are appended to `caches`."""
    meta = spec.meta
    code = meta.type_code
    if code in _INT_CODES:
        fmt = _INT_CODES[code]
        return ColumnPlan(fmt.upper() if spec.unsigned else fmt)
    if code == INT24:
        signed = not spec.unsigned
        return ColumnPlan("3s", lambda raw: int.from_bytes(raw, "little", signed=signed))
    if code == DOUBLE:
        return ColumnPlan("d", V.double_fragment)
    if code == FLOAT:
        return ColumnPlan("4s", _cached(V.float32_fragment, caches))
    if code == NEWDECIMAL:
        precision = meta.precision if meta.precision is not None else spec.precision or 10
        scale = meta.decimals if meta.decimals is not None else spec.scale or 0
        decimal_text = V.decimal_converter(precision, scale)
        fragment = _cached(lambda raw: java_decimal(decimal_text(raw)), caches, orjson.Fragment)
        return ColumnPlan(f"{V.decimal_size(precision, scale)}s", fragment)
    if code == YEAR:
        return ColumnPlan("B", lambda v: v + 1900 if v else 0)
    if code == DATE:
        return ColumnPlan("3s", lambda raw: V.date_text(int.from_bytes(raw, "little")))
    if code in (DATETIME2, TIMESTAMP2, TIME2):
        fsp = meta.fsp if meta.fsp is not None else spec.fsp or 0
        if not 0 <= fsp <= 6:
            raise UnsupportedTypeError(f"{spec.where}: fractional-second precision {fsp} is out of range")
        width = {DATETIME2: 5, TIMESTAMP2: 4, TIME2: 3}[code] + V.fsp_bytes(fsp)
        return ColumnPlan(f"{width}s", _TEMPORAL2[code](fsp))
    if code == TIMESTAMP:
        return ColumnPlan("I", V.old_timestamp_text)
    if code == DATETIME:
        return ColumnPlan("Q", V.old_datetime_text)
    if code == TIME:
        return ColumnPlan("3s", lambda raw: V.old_time_text(int.from_bytes(raw, "little", signed=True)))
    if code == BIT:
        bits = meta.bits or spec.length or 1
        if bits == 1:
            return ColumnPlan("B")  # 0 or 1, as Maxwell prints BIT(1)
        return ColumnPlan(f"{(bits + 7) // 8}s", lambda raw: int.from_bytes(raw, "big"))
    if code in (ENUM, SET):
        return _enum_or_set(spec, code)
    if code in (VARCHAR, VAR_STRING, STRING):
        prefix = 1 if (meta.max_length or 0) <= 255 else 2
        if code == STRING and _is_binary(spec):
            pad = spec.length if spec.type_name == "binary" and spec.length else meta.max_length or 0
            return ColumnPlan(make_op=_prefixed(prefix, _padded_base64(pad)))
        return ColumnPlan(make_op=_string_op(spec, prefix))
    if code in (TINY_BLOB, BLOB, MEDIUM_BLOB, LONG_BLOB):
        return ColumnPlan(make_op=_string_op(spec, meta.length_size or _BLOB_PREFIX[code]))
    if code == JSON:
        return ColumnPlan(make_op=_prefixed(meta.length_size or 4, mysql_json_fragment))
    if code == GEOMETRY:
        return ColumnPlan(make_op=_prefixed(meta.length_size or 4, wkt))
    if code == VECTOR:
        return ColumnPlan(make_op=_prefixed(meta.length_size or 4, V.vector_value))
    raise UnsupportedTypeError(
        f"{spec.where} has MySQL column type code {code}, which the decoder does not support. "
        "Exclude the table from the capture (spec.tables.exclude) or change the column to a supported type."
    )


_BLOB_PREFIX = {TINY_BLOB: 1, BLOB: 2, MEDIUM_BLOB: 3, LONG_BLOB: 4}
_TEMPORAL2 = {DATETIME2: V.datetime2_converter, TIMESTAMP2: V.timestamp2_converter, TIME2: V.time2_converter}


def _cached(
    convert: Callable[[bytes], Any], caches: list[Cache], wrap: Callable[[Any], Any] | None = None
) -> Callable[[bytes], Any]:
    """`convert` (then `wrap`) memoized on the raw bytes: equal values decode to the same object, fast."""
    cache: Cache = {}
    caches.append(cache)
    get = cache.get
    if wrap is None:

        def cached(raw: bytes) -> Any:
            value = get(raw)
            if value is None:
                value = cache[raw] = convert(raw)
            return value

        return cached

    def cached_wrapped(raw: bytes) -> Any:
        value = get(raw)
        if value is None:
            value = cache[raw] = wrap(convert(raw))
        return value

    return cached_wrapped


def _enum_or_set(spec: ColumnSpec, code: int) -> ColumnPlan:
    members = spec.enum_values
    if members is None:
        raise UnsupportedTypeError(
            f"{spec.where} is an {'ENUM' if code == ENUM else 'SET'} whose members are unknown: the schema "
            "has no definition for it and the binlog has no FULL metadata. Set binlog_row_metadata=FULL."
        )
    size = spec.meta.size or 1
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}.get(size, f"{size}s")
    where = spec.where
    if code == ENUM:
        names = ("", *(jackson_fragment(m) for m in members))

        def enum(index: int) -> Any:
            if index < len(names):
                return names[index]
            raise ValueError(f"{where}: ENUM index {index} beyond its {len(members)} members (stale schema?)")

        return ColumnPlan(fmt, enum)
    count = len(members)
    bits = [(1 << i, jackson_fragment(m)) for i, m in enumerate(members)]

    def set_members(mask: Any) -> list[Any]:
        if isinstance(mask, bytes):
            mask = int.from_bytes(mask, "little")
        if mask >> count:
            raise ValueError(f"{where}: SET bits {mask:#x} beyond its {count} members (stale schema?)")
        return [m for bit, m in bits if mask & bit]

    return ColumnPlan(fmt, set_members)


def _is_binary(spec: ColumnSpec) -> bool:
    return spec.type_name in BINARY_TYPES or spec.charset == "binary"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _padded_base64(width: int) -> Callable[[bytes], str]:
    """BINARY(N): the binlog drops trailing 0x00 bytes; MySQL returns them, so pad back to N."""

    def convert(raw: bytes) -> str:
        if len(raw) < width:
            raw = raw.ljust(width, b"\x00")
        return base64.b64encode(raw).decode("ascii")

    return convert


def _string_op(spec: ColumnSpec, prefix: int) -> Callable[[int], Op]:
    """CHAR/VARCHAR/TEXT/BLOB: text in the column's charset, base64 when binary, parsed for MariaDB JSON."""
    if spec.type_name == "json":
        return _prefixed(prefix, json_text_fragment)
    if _is_binary(spec):
        return _prefixed(prefix, _b64)
    charset = spec.charset or spec.table_charset
    decode = text_decoder(charset)
    if decode is None:
        raise UnsupportedTypeError(
            f"{spec.where} uses charset {charset!r}, which the decoder (like Maxwell) does not support. "
            "Convert the column to utf8mb4 or exclude the table from the capture (spec.tables.exclude)."
        )
    if decode is utf8_decode and prefix in (1, 2):
        return _utf8_op(prefix)
    return _prefixed(prefix, lambda raw: jackson_fragment(decode(raw)))


def _prefixed(prefix: int, convert: Callable[[bytes], Any]) -> Callable[[int], Op]:
    """Values stored as a little-endian length of `prefix` bytes, then the bytes."""

    def make(dest: int) -> Op:
        if prefix == 1:

            def op1(b: bytes, o: int, row: list[Any]) -> int:
                end = o + 1 + b[o]
                row[dest] = convert(b[o + 1 : end])
                return end

            return op1
        if prefix == 2:

            def op2(b: bytes, o: int, row: list[Any]) -> int:
                end = o + 2 + (b[o] | b[o + 1] << 8)
                row[dest] = convert(b[o + 2 : end])
                return end

            return op2

        def op(b: bytes, o: int, row: list[Any]) -> int:
            start = o + prefix
            end = start + int.from_bytes(b[o:start], "little")
            row[dest] = convert(b[start:end])
            return end

        return op

    return make


def _utf8_op(prefix: int) -> Callable[[int], Op]:
    """The common case inlined: utf8/utf8mb4 CHAR/VARCHAR with a 1- or 2-byte length."""

    def make(dest: int) -> Op:
        if prefix == 1:

            def op1(b: bytes, o: int, row: list[Any]) -> int:
                end = o + 1 + b[o]
                text = b[o + 1 : end].decode("utf-8", "replace")
                row[dest] = text if text.isascii() and text.isprintable() else jackson_fragment(text)
                return end

            return op1

        def op2(b: bytes, o: int, row: list[Any]) -> int:
            end = o + 2 + (b[o] | b[o + 1] << 8)
            text = b[o + 2 : end].decode("utf-8", "replace")
            row[dest] = text if text.isascii() and text.isprintable() else jackson_fragment(text)
            return end

        return op2

    return make
