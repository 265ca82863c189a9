"""JSON column values as Maxwell renders them: MySQL's binary JSON (the binlog's form), and JSON text.

Maxwell prints MySQL's binary JSON with mysql-binlog-connector-java's JsonStringFormatter: a double as Java's
`Double.toString` when that has no exponent (|v| in [0.001, 10^7): the shortest digits, at least one after the
point), else as the double's exact decimal expansion (`new BigDecimal(v).toPlainString()`); DECIMAL as written;
DATE, TIME and DATETIME as strings whose fraction is printed only when not zero, without trailing zeros; any other
opaque value as base64; strings escaped as that formatter escapes them (control characters only, in upper case).
Maxwell prints MariaDB's JSON, a LONGTEXT, as the text it holds: so does `json_text_fragment`. The text MySQL's
server prints (what a MySQL snapshot reads) is parsed with the same double rule, so one value renders the same on
every path.
"""

from __future__ import annotations

import base64
import json
import struct
from decimal import Decimal
from typing import Any

import orjson
from mysqlcapture_api.javatext import jackson_fragment, upper_escapes

from mysqlcapture_worker.decode.values import decimal_converter

_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY = 0x0, 0x1, 0x2, 0x3
_LITERAL, _INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _DOUBLE, _STRING, _OPAQUE = (
    0x4,
    0x5,
    0x6,
    0x7,
    0x8,
    0x9,
    0xA,
    0xB,
    0xC,
    0xF,
)
_SCALARS = {
    _INT16: struct.Struct("<h"),
    _UINT16: struct.Struct("<H"),
    _INT32: struct.Struct("<i"),
    _UINT32: struct.Struct("<I"),
    _INT64: struct.Struct("<q"),
    _UINT64: struct.Struct("<Q"),
    _DOUBLE: struct.Struct("<d"),
}
_U16, _U32, _I64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<q")


class JsonFormatError(ValueError):
    """Bytes that are not well-formed MySQL binary JSON."""


def json_double(value: float) -> orjson.Fragment:
    """A JSON double as Maxwell prints it (see the module docstring)."""
    magnitude = abs(value)
    if magnitude == 0.0 or 1e-3 <= magnitude < 1e7:
        return orjson.Fragment(repr(value))  # Python's repr has Java's digits and form in this range
    return orjson.Fragment(format(Decimal(value), "f"))


JSON_NULL: Any = orjson.Fragment(b"null")
"""A JSON column's value that is the JSON document `null`: rendered `null` as SQL NULL (None) is, but told apart
from it (by identity: Maxwell's `old` and the change log's `json_null`)."""


def json_text_fragment(raw: bytes) -> Any:
    """MariaDB's JSON (a LONGTEXT): its text as it is, as Maxwell prints it.

    Two exceptions keep every line one line of valid JSON: a line break (which valid JSON holds only as
    whitespace) becomes a space, and a text that is not JSON at all (a LONGTEXT without MariaDB's json_valid
    check) is printed as a JSON string.
    """
    if not raw:
        return None
    try:
        parsed = parse_json_text(raw)
    except (ValueError, RecursionError):
        return jackson_fragment(raw.decode("utf-8", "replace"))
    if parsed is None:
        return JSON_NULL if is_null_text(raw) else None
    if b"\n" in raw or b"\r" in raw:
        raw = raw.replace(b"\r", b" ").replace(b"\n", b" ")
    return orjson.Fragment(raw)


def mysql_json_fragment(raw: bytes) -> Any:
    """A binary JSON column value as mysql-binlog-connector-java's JsonStringFormatter prints it (an empty value is
    JSON `null`, as MySQL reads it)."""
    value = parse_mysql_json(raw)
    return JSON_NULL if value is None else orjson.Fragment(upper_escapes(orjson.dumps(value)))


def json_text_reparsed(raw: bytes) -> Any:
    """JSON text printed by MySQL's server (a snapshot's), printed as the binary form would be."""
    if not raw:
        return None
    value = parse_json_text(raw)
    if value is None:
        return JSON_NULL if is_null_text(raw) else None
    return orjson.Fragment(upper_escapes(orjson.dumps(value)))


def is_null_text(raw: bytes) -> bool:
    """Whether a JSON text is the document `null`: `null` between JSON whitespace, after a UTF-8 byte-order mark
    if any (the compiled renderer's rule too). A text Python's reader takes as `null` otherwise (UTF-16 bytes) is
    rendered `null` unmarked, on both paths."""
    return raw.removeprefix(b"\xef\xbb\xbf").strip(b" \t\n\r") == b"null"


def parse_json_text(raw: bytes | str) -> Any:
    """A JSON document from its text, its doubles as `json_double` renders them."""
    if not raw:
        return None
    return json.loads(raw, parse_float=lambda text: json_double(float(text)))


def parse_mysql_json(raw: bytes) -> Any:
    """A JSON column value from its binary form (an empty value is JSON null)."""
    if not raw:
        return None
    try:
        return _value(raw[0], raw, 1)
    except (IndexError, struct.error) as exc:
        raise JsonFormatError(f"truncated binary JSON: {exc}") from exc


def _varlen(buf: bytes, off: int) -> tuple[int, int]:
    """A variable-length integer: 7 bits per byte, low bits first."""
    value = shift = 0
    for _ in range(5):
        byte = buf[off]
        off += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, off
        shift += 7
    raise JsonFormatError("bad variable-length integer in binary JSON")


def _value(kind: int, buf: bytes, off: int) -> Any:
    """The value of type `kind` whose data starts at `off` (containers: offsets relative to `off`)."""
    if kind in (_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY):
        return _container(buf, off, kind in (_SMALL_OBJECT, _SMALL_ARRAY), kind <= _LARGE_OBJECT)
    if kind == _LITERAL:
        return _literal(buf[off])
    if kind == _DOUBLE:
        return json_double(_SCALARS[_DOUBLE].unpack_from(buf, off)[0])
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        return scalar.unpack_from(buf, off)[0]
    if kind == _STRING:
        length, off = _varlen(buf, off)
        return buf[off : off + length].decode("utf-8", "replace")
    if kind == _OPAQUE:
        field_type = buf[off]
        length, off = _varlen(buf, off + 1)
        return _opaque(field_type, buf[off : off + length])
    raise JsonFormatError(f"unknown binary JSON value type {kind:#x}")


def _literal(code: int) -> bool | None:
    if code == 0:
        return None
    if code in (1, 2):
        return code == 1
    raise JsonFormatError(f"unknown binary JSON literal {code:#x}")


def _container(buf: bytes, base: int, small: bool, is_object: bool) -> Any:
    offset = _U16 if small else _U32
    width = offset.size
    read = offset.unpack_from
    (count,) = read(buf, base)
    pos = base + 2 * width
    keys: list[str] = []
    if is_object:
        for _ in range(count):
            (key_off,) = read(buf, pos)
            (key_len,) = _U16.unpack_from(buf, pos + width)
            keys.append(buf[base + key_off : base + key_off + key_len].decode("utf-8", "replace"))
            pos += width + 2
    values = []
    for _ in range(count):
        kind = buf[pos]
        inline = kind in (_LITERAL, _INT16, _UINT16) or (not small and kind in (_INT32, _UINT32))
        if inline:
            values.append(_value(kind, buf, pos + 1))
        else:
            (value_off,) = read(buf, pos + 1)
            values.append(_value(kind, buf, base + value_off))
        pos += 1 + width
    if is_object:
        return dict(zip(keys, values, strict=True))
    return values


# MySQL field types that appear as opaque JSON values.
_NEWDECIMAL, _DATE, _TIME, _DATETIME, _TIMESTAMP, _DATETIME2, _TIME2, _TIMESTAMP2 = (
    246,
    10,
    11,
    12,
    7,
    18,
    19,
    17,
)


def _opaque(field_type: int, data: bytes) -> Any:
    """DECIMAL, temporal values, or any other opaque value (base64 of its bytes, as Maxwell prints it)."""
    if field_type == _NEWDECIMAL:
        precision, scale = data[0], data[1]
        return orjson.Fragment(decimal_converter(precision, scale)(data[2:]))
    if field_type in (_DATE, _TIME, _DATETIME, _TIMESTAMP, _DATETIME2, _TIME2, _TIMESTAMP2):
        (packed,) = _I64.unpack_from(data, 0)
        if field_type in (_TIME, _TIME2):
            return _packed_time(packed)
        return _packed_datetime(packed, with_time=field_type != _DATE)
    return base64.b64encode(data).decode()


def _fraction(micro: int) -> str:
    """Maxwell's fraction of a temporal value inside JSON: none when zero, else without trailing zeros."""
    return f".{micro:06d}".rstrip("0") if micro else ""


def _packed_time(packed: int) -> str:
    """A TIME from its packed 64-bit form."""
    sign = ""
    if packed < 0:
        sign, packed = "-", -packed
    hms, micro = packed >> 24, packed & 0xFFFFFF
    return f"{sign}{(hms >> 12) & 0x3FF:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}{_fraction(micro)}"


def _packed_datetime(packed: int, *, with_time: bool) -> str:
    if packed < 0:
        packed = -packed
    ymdhms, micro = packed >> 24, packed & 0xFFFFFF
    ymd, hms = ymdhms >> 17, ymdhms & 0x1FFFF
    ym = ymd >> 5
    date = f"{ym // 13:04d}-{ym % 13:02d}-{ymd & 31:02d}"
    if not with_time:
        return date
    return f"{date} {hms >> 12:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}{_fraction(micro)}"
