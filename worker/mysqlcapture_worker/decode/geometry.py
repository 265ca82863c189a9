"""MySQL GEOMETRY values (SRID + WKB) rendered as WKT."""

from __future__ import annotations

import struct

_NAMES = {1: "POINT", 2: "LINESTRING", 3: "POLYGON", 4: "MULTIPOINT", 5: "MULTILINESTRING",
          6: "MULTIPOLYGON", 7: "GEOMETRYCOLLECTION"}


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)


def _parse(buf: bytes, off: int) -> tuple[str, int, str]:
    """(body text, new offset, type name) of one WKB geometry at `off`."""
    order = "<" if buf[off] == 1 else ">"
    (kind,) = struct.unpack_from(order + "I", buf, off + 1)
    off += 5
    name = _NAMES.get(kind)
    if name is None:
        raise ValueError(f"unknown WKB geometry type {kind}")

    def points(n: int, at: int) -> tuple[str, int]:
        coords = struct.unpack_from(order + "d" * (2 * n), buf, at)
        return ", ".join(f"{_num(coords[i])} {_num(coords[i + 1])}" for i in range(0, 2 * n, 2)), at + 16 * n

    def count(at: int) -> tuple[int, int]:
        return struct.unpack_from(order + "I", buf, at)[0], at + 4

    if kind == 1:
        body, off = points(1, off)
        return body, off, name
    if kind == 2:
        n, off = count(off)
        body, off = points(n, off)
        return body, off, name
    if kind == 3:
        rings, off = count(off)
        parts = []
        for _ in range(rings):
            n, off = count(off)
            body, off = points(n, off)
            parts.append(f"({body})")
        return ", ".join(parts), off, name
    n, off = count(off)
    parts = []
    for _ in range(n):
        body, off, sub = _parse(buf, off)
        if kind == 7:
            parts.append(f"{sub}({body})")
        elif kind == 4:
            parts.append(body if body else "EMPTY")
        else:
            parts.append(f"({body})")
    return ", ".join(parts), off, name


def wkt(value: bytes) -> str:
    """WKT of a MySQL geometry value: 4 bytes of SRID, then WKB."""
    body, _, name = _parse(value, 4)
    return f"{name}({body})"
