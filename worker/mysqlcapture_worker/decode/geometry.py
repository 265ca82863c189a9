"""GEOMETRY values (4-byte SRID + WKB) rendered as WKT, laid out as Maxwell's JTS 1.13 WKTWriter prints them."""

from __future__ import annotations

import struct
from decimal import Decimal

_NAMES = {
    1: "POINT",
    2: "LINESTRING",
    3: "POLYGON",
    4: "MULTIPOINT",
    5: "MULTILINESTRING",
    6: "MULTIPOLYGON",
    7: "GEOMETRYCOLLECTION",
}
_U32 = {"<": struct.Struct("<I"), ">": struct.Struct(">I")}
_XY = {"<": struct.Struct("<dd"), ">": struct.Struct(">dd")}


class GeometryError(ValueError):
    """Bytes that are not a well-formed WKB geometry."""


def number_text(value: float) -> str:
    """A coordinate as Maxwell's JTS WKTWriter prints it: positional, never an exponent, no ".0".

    JTS formats with `DecimalFormat("0.################")`, which rounds to 16 fraction digits; the shortest
    round-trip digits are kept here instead (README: differences from Maxwell), so no coordinate changes value.
    """
    if value != value or value in (float("inf"), float("-inf")):
        raise GeometryError(f"coordinate {value!r} has no WKT form")
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    point = len(text) + exponent  # the value is 0.<text> * 10**point
    if point <= 0:
        text = "0." + "0" * -point + text
    elif point >= len(text):
        text += "0" * (point - len(text))
    else:
        text = text[:point] + "." + text[point:]
    return "-" + text if sign else text


def _point_list(buf: bytes, off: int, order: str, count: int) -> tuple[str, int]:
    xy = _XY[order].unpack_from
    parts = []
    for _ in range(count):
        x, y = xy(buf, off)
        off += 16
        parts.append(f"{number_text(x)} {number_text(y)}")
    return ", ".join(parts), off


def _geometry(buf: bytes, off: int) -> tuple[str, str, int]:
    """(type name, body after the type name, next offset) of the WKB geometry at `off`: JTS's layout."""
    if off + 5 > len(buf):
        raise GeometryError("truncated WKB")
    order = "<" if buf[off] == 1 else ">"
    u32 = _U32[order].unpack_from
    (kind,) = u32(buf, off + 1)
    off += 5
    name = _NAMES.get(kind)
    if name is None:
        raise GeometryError(f"unknown WKB geometry type {kind}")
    if kind == 1:
        body, off = _point_list(buf, off, order, 1)
        return name, f" ({body})", off
    (count,) = u32(buf, off)
    off += 4
    if count == 0:
        return name, " EMPTY", off
    if kind == 2:
        body, off = _point_list(buf, off, order, count)
        return name, f" ({body})", off
    if kind == 3:
        rings = []
        for _ in range(count):
            (n,) = u32(buf, off)
            body, off = _point_list(buf, off + 4, order, n)
            rings.append(f"({body})")
        return name, f" ({', '.join(rings)})", off
    parts = []
    for _ in range(count):
        sub_name, sub_body, off = _geometry(buf, off)
        parts.append(sub_name + sub_body if kind == 7 else sub_body[1:])  # MULTIPOINT ((1 1), (2 2))
    return name, f" ({', '.join(parts)})", off


def wkt(value: bytes) -> str:
    """WKT of a MySQL/MariaDB geometry value: 4 bytes of SRID, then WKB."""
    try:
        name, body, _ = _geometry(value, 4)
    except struct.error as exc:
        raise GeometryError(f"truncated WKB: {exc}") from exc
    return name + body
