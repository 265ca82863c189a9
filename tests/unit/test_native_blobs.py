"""The compiled blob columns (JSON, GEOMETRY, VECTOR, multi-byte charsets) against their reference converters.

Random values, valid and not: the compiled renderer's text must equal the reference converter's JSON text for
every one (Rust renders the common case; the reference converter, its fallback, renders the rest).
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
import pytest
from mysqlcapture_api.javatext import jackson_fragment
from mysqlcapture_worker.charsets import CODECS, text_decoder
from mysqlcapture_worker.decode import values as V
from mysqlcapture_worker.decode.geometry import wkt
from mysqlcapture_worker.decode.mysql_json import JSON_NULL, json_text_fragment, json_text_reparsed
from mysqlcapture_worker.decode.native import (
    B_GEOMETRY,
    B_JSON_REPARSE,
    B_JSON_TEXT,
    B_TABLE,
    B_UTF16BE,
    B_UTF16LE,
    B_UTF32BE,
    B_VECTOR,
    K_BLOB,
    RowRenderer,
    charset_table,
    json_text_of,
)

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(RowRenderer is None, reason="mysqlcapture_native is not built (make setup builds it)"),
]


def _render_all(
    kind: int, convert: Callable[[bytes], Any], values: list[bytes], table: list[str] | None = None
) -> None:
    """Each value through a one-column RowRenderer (an insert of one row per value) and the reference."""
    renderer = RowRenderer([(K_BLOB, 4, kind, table or [])], ['"v"'], [], b"d\x00t\x00", [json_text_of(convert)])
    body = b"".join(b"\x00" + len(v).to_bytes(4, "little") + v for v in values)
    n, (values_buffer, offsets), _, _, _, marks, old_marks = renderer.render(0, body)
    data = bytes(values_buffer)
    assert n == len(values)
    ends = struct.unpack(f"<{n + 1}i", offsets)
    got = [data[ends[i] : ends[i + 1]].decode() for i in range(n)]
    expected = ['{"v":' + orjson.dumps(convert(v)).decode() + "}" for v in values]
    for value, g, e in zip(values, got, expected, strict=True):
        assert g == e, value
    # The JSON document null is marked (the change log's json_null), SQL NULL and every other value not.
    documents = ['["v"]' if convert(v) is JSON_NULL else None for v in values]
    assert old_marks is None
    if marks is None:
        assert not any(documents)
    else:
        nulls = pa.StringArray.from_buffers(n, pa.py_buffer(marks[1]), pa.py_buffer(marks[0]), pa.py_buffer(marks[2]))
        assert nulls.to_pylist() == documents


def _json_doc(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 2**63 - 1, -(2**63), 2**64 - 1, rng.randint(-(10**6), 10**6)])
    if kind == 2:
        return rng.choice([0.0, -0.0, 0.1, 1e-3, 9999999.5, 1e7, 1e300, 5e-324, rng.uniform(-1e4, 1e4)])
    if kind in (3, 4):
        return "".join(rng.choice(['"', "\\", "\n", "\x01", "é", "😀", "/", "a", "\u2028"]) for _ in range(5))
    if kind in (5, 6):
        return [_json_doc(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{rng.randint(0, 5)}é": _json_doc(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _json_texts(rng: random.Random, n: int) -> list[bytes]:
    out = []
    for _ in range(n):
        doc = _json_doc(rng)
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, None, 2]))
        out.append(text.encode())
    # Texts Python accepts and Rust leaves to the fallback, and texts that are not JSON at all.
    out += [b"NaN", b"[Infinity, 1]", b'{"a": 1, "a": 2}', b'"\\ud800"', b"1e999", b"  null ", b"{x", b"", b"[1,]"]
    out += [b'\xef\xbb\xbf{"bom": 1}', b'{"a":\r\n 1}', b"123456789012345678901234567890", b"[1e-7, 12345678.9]"]
    # The JSON document null, spelled every way a reader takes it (a byte-order mark; UTF-16, which Python reads).
    out += [b"null", b"\xef\xbb\xbfnull", b"\xef\xbb\xbf \r\nnull\t", b"n\x00u\x00l\x00l\x00", b"\x0cnull", b"nul"]
    return out


@pytest.mark.parametrize(("kind", "convert"), [(B_JSON_TEXT, json_text_fragment), (B_JSON_REPARSE, json_text_reparsed)])
def test_json_text_renders_as_the_reference(kind: int, convert: Callable[[bytes], Any]) -> None:
    values = _json_texts(random.Random(kind), 3000)
    if kind == B_JSON_REPARSE:  # the reference raises on text that is not JSON: a MySQL server never prints it
        values = [v for v in values if _parses(convert, v)]
    _render_all(kind, convert, values)


def _parses(convert: Callable[[bytes], Any], raw: bytes) -> bool:
    try:
        orjson.dumps(convert(raw))
    except (ValueError, TypeError):
        return False
    return True


def _wkb(rng: random.Random, depth: int = 0) -> bytes:
    order = rng.choice(["<", ">"])
    kind = rng.randint(1, 7 if depth < 2 else 3)

    def coords(n: int) -> bytes:
        values = [rng.choice([0.0, -0.0, 1.5, 1e20, 1e-7, 0.1 + 0.2, rng.uniform(-180, 180)]) for _ in range(2 * n)]
        return struct.pack(f"{order}{2 * n}d", *values)

    head = (b"\x01" if order == "<" else b"\x00") + struct.pack(f"{order}I", kind)
    if kind == 1:
        return head + coords(1)
    n = rng.randint(0, 3)
    if kind == 2:
        return head + struct.pack(f"{order}I", n) + coords(n)
    if kind == 3:
        rings = b"".join(struct.pack(f"{order}I", k) + coords(k) for k in (rng.randint(0, 4) for _ in range(n)))
        return head + struct.pack(f"{order}I", n) + rings
    part = {4: 1, 5: 2, 6: 3}.get(kind)
    parts = []
    for _ in range(n):
        sub = _wkb(rng, depth + 1)
        while part is not None and sub[1:5] not in (struct.pack("<I", part), struct.pack(">I", part)):
            sub = _wkb(rng, depth + 1)
        parts.append(sub)
    return head + struct.pack(f"{order}I", n) + b"".join(parts)


def test_geometry_renders_as_the_reference() -> None:
    rng = random.Random(3)
    values = [b"\xe6\x10\x00\x00" + _wkb(rng) for _ in range(2000)]
    values += [b"\x00\x00\x00\x00" + struct.pack("<BIdd", 1, 1, float("nan"), 1.0)]  # no WKT: the reference refuses
    good = [v for v in values if _parses(wkt, v)]
    assert len(good) == len(values) - 1
    _render_all(B_GEOMETRY, wkt, good)


@pytest.mark.parametrize("charset", ["gbk", "big5", "sjis", "euckr", "gb2312"])
def test_double_byte_charsets_render_as_the_reference(charset: str) -> None:
    rng = random.Random(charset)
    codec = CODECS[charset]
    decode = text_decoder(charset)
    assert decode is not None
    sample = '北京市朝阳区東京都ソウル特別市臺北市 abc"\\\n\x01'
    valid = [c.encode(codec) for c in sample if _encodes(c, codec)]
    values = [b"".join(rng.choice(valid) for _ in range(rng.randint(0, 10))) for _ in range(2000)]
    values += [rng.randbytes(rng.randint(1, 8)) for _ in range(2000)]  # mostly invalid: the fallback
    _render_all(B_TABLE, lambda raw: jackson_fragment(decode(raw)), values, charset_table(codec))


def _encodes(c: str, codec: str) -> bool:
    try:
        c.encode(codec)
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize(("kind", "charset"), [(B_UTF16BE, "utf16"), (B_UTF16LE, "utf16le"), (B_UTF32BE, "utf32")])
def test_code_unit_charsets_render_as_the_reference(kind: int, charset: str) -> None:
    rng = random.Random(charset)
    decode = text_decoder(charset)
    assert decode is not None
    codec = CODECS[charset]
    values = [
        "".join(rng.choice('aé€😀"\\\n\x01') for _ in range(rng.randint(0, 8))).encode(codec) for _ in range(2000)
    ]
    values += [rng.randbytes(rng.randint(1, 9)) for _ in range(2000)]  # odd lengths, lone surrogates, > U+10FFFF
    _render_all(kind, lambda raw: jackson_fragment(decode(raw)), values)


def test_vector_renders_as_the_reference() -> None:
    rng = random.Random(9)
    values = [rng.randbytes(4 * rng.randint(0, 6)) for _ in range(3000)]
    values.append(struct.pack("<3f", float("nan"), float("inf"), -0.0))  # NaN and infinity: null, as the reference
    _render_all(B_VECTOR, V.vector_value, values)
