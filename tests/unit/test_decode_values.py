"""The decoder's pure pieces with exact values: DECIMAL, temporal types, FLOAT, WKB, binary JSON, charsets."""

from __future__ import annotations

import random
import struct
from decimal import Decimal

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from mysqlcapture_worker.charsets import charset_of_collation, text_decoder
from mysqlcapture_worker.decode import values as V
from mysqlcapture_worker.decode.geometry import GeometryError, number_text, wkt
from mysqlcapture_worker.decode.mysql_json import JsonFormatError, parse_json_text, parse_mysql_json

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------------------- DECIMAL
def encode_decimal(text: str, precision: int, scale: int) -> bytes:
    """A reference decimal2bin: leading partial integer group, 9-digit groups, partial fraction group."""
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    intg = precision - scale
    whole, frac = whole.rjust(intg, "0"), frac.ljust(scale, "0")
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(whole[:lead]).to_bytes(dig2bytes[lead], "big")
    for i in range(lead, intg, 9):
        out += int(whole[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac[scale - scale % 9 :]).to_bytes(dig2bytes[scale % 9], "big")
    out[0] ^= 0x80
    if negative:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


@pytest.mark.parametrize(
    "precision,scale,raw,text",
    [
        (14, 4, "810dfb38d204d2", "1234567890.1234"),  # the example of MySQL's decimal2bin
        (14, 4, "7ef204c72dfb2d", "-1234567890.1234"),
        (10, 2, "8000000c32", "12.50"),
        (10, 2, "7ffffff3cd", "-12.50"),
        (5, 0, "800000", "0"),
        (10, 2, "8000000000", "0.00"),
    ],
)
def test_decimal_exact_bytes(precision: int, scale: int, raw: str, text: str) -> None:
    assert V.decimal_converter(precision, scale)(bytes.fromhex(raw)) == text
    assert encode_decimal(text, precision, scale).hex() == raw


@pytest.mark.parametrize(
    "precision,scale,text",
    [
        (65, 30, "9" * 35 + "." + "9" * 30),
        (65, 30, "-" + "9" * 35 + "." + "9" * 30),
        (65, 30, "-0.000000000000000000000000000001"),
        (65, 30, "0.000000000000000000000000000000"),
        (65, 30, "-12345678901234567890.123456789012345678901234567890"),
        (65, 0, "-" + "9" * 65),
        (10, 10, "-0.0000000001"),
        (18, 9, "-999999999.999999999"),
        (19, 9, "1000000000.000000001"),
        (4, 2, "12.50"),
        (1, 0, "-9"),
    ],
)
def test_decimal_round_trips_exactly(precision: int, scale: int, text: str) -> None:
    raw = encode_decimal(text, precision, scale)
    assert len(raw) == V.decimal_size(precision, scale)
    assert V.decimal_converter(precision, scale)(raw) == text


def test_decimal_sizes() -> None:
    assert [V.decimal_size(p, s) for p, s in [(65, 30), (10, 2), (5, 0), (10, 10), (18, 9), (1, 0)]] == [
        30,
        5,
        3,
        5,
        8,
        1,
    ]


# --------------------------------------------------------------------------------------- temporal
@pytest.mark.parametrize(
    "fsp,raw,text",
    [
        (0, "800000", "00:00:00"),
        (0, "b46efb", "838:59:59"),
        (0, "4b9105", "-838:59:59"),
        (0, "7fffff", "-00:00:01"),
        (1, "80c8b846", "12:34:56.7"),
        (1, "7fffffce", "-00:00:00.5"),
        (3, "7fefffec78", "-01:00:00.500"),
        (6, "7fffffffffff", "-00:00:00.000001"),
        (6, "b46efb0f423f", "838:59:59.999999"),
        (6, "800000000000", "00:00:00.000000"),
    ],
)
def test_time2(fsp: int, raw: str, text: str) -> None:
    assert V.time2_converter(fsp)(bytes.fromhex(raw)) == text


@pytest.mark.parametrize(
    "fsp,raw,text",
    [
        (0, "999aaa5865", "2016-10-21 05:33:37"),
        (0, "8000000000", "0000-00-00 00:00:00"),
        (6, "8000000000000000", "0000-00-00 00:00:00.000000"),
        (3, "999aaa5865146e", "2016-10-21 05:33:37.523"),
        (1, "999aaa586532", "2016-10-21 05:33:37.5"),
        (6, "999aaa58650f423f", "2016-10-21 05:33:37.999999"),
    ],
)
def test_datetime2(fsp: int, raw: str, text: str) -> None:
    assert V.datetime2_converter(fsp)(bytes.fromhex(raw)) == text


@pytest.mark.parametrize(
    "fsp,raw,text",
    [
        (0, "00000000", "0000-00-00 00:00:00"),
        (3, "000000000000", "0000-00-00 00:00:00.000"),
        (0, "00000001", "1970-01-01 00:00:01"),
        (0, "7fffffff", "2038-01-19 03:14:07"),
        (6, "7fffffff0f423f", "2038-01-19 03:14:07.999999"),
        (2, "5809a8b107", "2016-10-21 05:33:37.07"),
    ],
)
def test_timestamp2_is_utc(fsp: int, raw: str, text: str) -> None:
    assert V.timestamp2_converter(fsp)(bytes.fromhex(raw)) == text


def test_date_and_old_formats() -> None:
    assert V.date_text(int.from_bytes(bytes.fromhex("5dc80f"), "little")) == "2020-02-29"
    assert V.date_text(0) == "0000-00-00"
    assert V.old_datetime_text(20161021053337) == "2016-10-21 05:33:37"
    assert V.old_time_text(-8385959) == "-838:59:59"
    assert V.old_timestamp_text(0) == "0000-00-00 00:00:00"


# --------------------------------------------------------------------------------------- FLOAT
@pytest.mark.parametrize(
    "bits,text,rendered",
    [
        (0x3F8CCCCD, "1.1", "1.1"),
        (0xBF8CCCCD, "-1.1", "-1.1"),
        (0x7F7FFFFF, "3.4028235e+38", "3.4028235e+38"),
        (0x00000001, "1e-45", "1e-45"),
        (0x00800000, "1.1754944e-38", "1.1754944e-38"),
        (0x80000000, "-0.0", "-0.0"),
        (0x00000000, "0.0", "0.0"),
        (0x4B800000, "16777216", "16777216.0"),
        (0x501502F9, "1e+10", "10000000000.0"),
        (0x40490FDB, "3.1415927", "3.1415927"),
        (0x0F800000, "1.2621775e-29", "1.2621775e-29"),  # a power of two: the shortest rounds up
        (0x8F800000, "-1.2621775e-29", "-1.2621775e-29"),
    ],
)
def test_float32_shortest_text(bits: int, text: str, rendered: str) -> None:
    raw = struct.pack("<I", bits)
    assert V.float32_text(raw) == text
    assert orjson.dumps(V.float32_value(raw)).decode() == rendered


def test_float32_matches_double_conversion_shortest() -> None:
    """pyarrow casts float32 to string with double-conversion's ToShortestSingle: the reference."""
    rng = random.Random(5)
    raws = [struct.pack("<I", rng.getrandbits(32)) for _ in range(20000)]
    raws = [r for r in raws if (int.from_bytes(r, "little") >> 23) & 0xFF != 0xFF]  # no NaN/infinity
    floats = [struct.unpack("<f", r)[0] for r in raws]
    reference = pc.cast(pa.array(floats, type=pa.float32()), pa.string()).to_pylist()
    for raw, ref in zip(raws, reference, strict=True):
        mine = V.float32_text(raw)
        assert mine is not None and Decimal(mine) == Decimal(ref), raw.hex()
        assert Decimal(orjson.dumps(V.float32_value(raw)).decode()) == Decimal(ref)


def test_float32_nan_has_no_json_form() -> None:
    assert V.float32_text(struct.pack("<I", 0x7FC00000)) is None


# --------------------------------------------------------------------------------------- WKB -> WKT
def _wkb(kind: int, body: bytes, order: str = "<") -> bytes:
    return (b"\x01" if order == "<" else b"\x00") + struct.pack(order + "I", kind) + body


def _pts(*xy: float, order: str = "<") -> bytes:
    return b"".join(struct.pack(order + "d", v) for v in xy)


def _n(n: int, order: str = "<") -> bytes:
    return struct.pack(order + "I", n)


SRID = b"\x00\x00\x00\x00"


@pytest.mark.parametrize(
    "geometry,text",
    [
        (_wkb(1, _pts(1, 2)), "POINT (1 2)"),
        (_wkb(1, _pts(1, 2, order=">"), order=">"), "POINT (1 2)"),
        (_wkb(1, _pts(-1.5, 0.1 + 0.2)), "POINT (-1.5 0.30000000000000004)"),
        (_wkb(2, _n(3) + _pts(0, 0, 1, 1, 2, 2)), "LINESTRING (0 0, 1 1, 2 2)"),
        (
            _wkb(3, _n(2) + _n(4) + _pts(0, 0, 1, 0, 0, 1, 0, 0) + _n(4) + _pts(0, 0, 0.5, 0, 0, 0.5, 0, 0)),
            "POLYGON ((0 0, 1 0, 0 1, 0 0), (0 0, 0.5 0, 0 0.5, 0 0))",
        ),
        (_wkb(4, _n(2) + _wkb(1, _pts(1, 1)) + _wkb(1, _pts(2, 2))), "MULTIPOINT ((1 1), (2 2))"),
        (
            _wkb(5, _n(2) + _wkb(2, _n(2) + _pts(0, 0, 1, 1)) + _wkb(2, _n(2) + _pts(2, 2, 3, 3))),
            "MULTILINESTRING ((0 0, 1 1), (2 2, 3 3))",
        ),
        (
            _wkb(6, _n(1) + _wkb(3, _n(1) + _n(4) + _pts(0, 0, 1, 0, 1, 1, 0, 0))),
            "MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)))",
        ),
        (
            _wkb(7, _n(2) + _wkb(1, _pts(1, 1)) + _wkb(7, _n(1) + _wkb(2, _n(2) + _pts(0, 0, 1, 1)))),
            "GEOMETRYCOLLECTION (POINT (1 1), GEOMETRYCOLLECTION (LINESTRING (0 0, 1 1)))",
        ),
        (_wkb(7, _n(0)), "GEOMETRYCOLLECTION EMPTY"),
    ],
)
def test_wkb_to_wkt(geometry: bytes, text: str) -> None:
    assert wkt(SRID + geometry) == text
    assert wkt(b"\xe6\x10\x00\x00" + geometry) == text  # the SRID is not part of the text


@pytest.mark.parametrize(
    "value,text",
    [
        (1e15, "1000000000000000"),
        (1e14, "100000000000000"),
        (123456789012345678.0, "123456789012345680"),
        (1e-15, "0.000000000000001"),
        (1.5e-16, "0.00000000000000015"),
        (-0.0, "-0"),
        (1e20, "100000000000000000000"),
        (1e-7, "0.0000001"),
        (-12.25, "-12.25"),
        (1234.5678, "1234.5678"),
    ],
)
def test_coordinates_print_as_jts_does_with_every_digit(value: float, text: str) -> None:
    assert number_text(value) == text


def test_bad_wkb_is_an_error() -> None:
    with pytest.raises(GeometryError, match="unknown WKB geometry type 9"):
        wkt(SRID + _wkb(9, b""))
    with pytest.raises(GeometryError, match="truncated"):
        wkt(SRID + _wkb(2, _n(3) + _pts(0, 0)))


# --------------------------------------------------------------------------------------- MySQL binary JSON
def _small_object(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """{key: inline int16} as a small object (type byte included)."""
    count = len(pairs)
    header = 4 + count * 4 + count * 3
    keys = b"".join(k for k, _ in pairs)
    size = header + len(keys)
    out = struct.pack("<HH", count, size)
    offset = header
    for k, _ in pairs:
        out += struct.pack("<HH", offset, len(k))
        offset += len(k)
    for _, v in pairs:
        out += b"\x05" + v
    return b"\x00" + out + keys


@pytest.mark.parametrize(
    "raw,value",
    [
        (b"", None),
        (b"\x04\x00", None),
        (b"\x04\x01", True),
        (b"\x04\x02", False),
        (b"\x05" + struct.pack("<h", -5), -5),
        (b"\x0a" + struct.pack("<Q", 2**64 - 1), 2**64 - 1),
        (b"\x09" + struct.pack("<q", -(2**63)), -(2**63)),
        (b"\x0b" + struct.pack("<d", 2.5), 2.5),
        (b"\x0c\x05h\xc3\xa9llo".replace(b"\x05", b"\x06", 1), "héllo"),
        (_small_object([(b"a", struct.pack("<h", 1)), (b"bc", struct.pack("<h", -2))]), {"a": 1, "bc": -2}),
        (b"\x02" + struct.pack("<HH", 2, 12) + b"\x05\x01\x00" + b"\x0c\x0a\x00" + b"\x01x", [1, "x"]),
        (b"\x03" + struct.pack("<II", 1, 13) + b"\x07" + struct.pack("<i", -7), [-7]),  # large: int32 inline
        # Maxwell's (JsonStringFormatter's) forms: no fraction when it is zero, no trailing zeros, other opaque
        # values as plain base64.
        (b"\x0f\x0c\x08" + struct.pack("<q", 0x19951F7619000000), "2015-01-15 23:24:25"),
        (b"\x0f\x0a\x08" + struct.pack("<q", 0x19951F0000000000), "2015-01-15"),
        (b"\x0f\x13\x08" + struct.pack("<q", -((1 << 12) << 24 | 500000)), "-01:00:00.5"),
        (b"\x0f\xfc\x02\xab\xcd", "q80="),
    ],
)
def test_mysql_binary_json(raw: bytes, value: object) -> None:
    assert orjson.dumps(parse_mysql_json(raw)) == orjson.dumps(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.5, "2.5"),
        (1000.0, "1000.0"),
        (0.001, "0.001"),
        (9999999.5, "9999999.5"),
        (-0.0, "-0.0"),
        # Outside [0.001, 10^7) Java's Double.toString has an exponent: Maxwell prints the exact expansion.
        (1e7, "10000000"),
        (1e-7, "0.0000000999999999999999954748111825886258685613938723690807819366455078125"),
        (12345678.9, "12345678.90000000037252902984619140625"),
    ],
    ids=["plain", "integral", "low-edge", "high-edge", "negative-zero", "1e7", "1e-7", "large-fraction"],
)
def test_json_doubles_as_maxwell_prints_them(value: float, text: str) -> None:
    raw = b"\x0b" + struct.pack("<d", value)
    assert orjson.dumps(parse_mysql_json(raw)).decode() == text
    assert orjson.dumps(parse_json_text(repr(value))).decode() == text  # JSON text: the same rule


def test_mysql_binary_json_decimal_keeps_its_digits() -> None:
    raw = b"\x0f\xf6\x04\x04\x02" + encode_decimal("12.50", 4, 2)
    assert orjson.dumps({"price": parse_mysql_json(raw)}) == b'{"price":12.50}'


def test_truncated_binary_json_is_an_error() -> None:
    with pytest.raises(JsonFormatError):
        parse_mysql_json(b"\x02" + struct.pack("<HH", 2, 12) + b"\x05\x01")


# --------------------------------------------------------------------------------------- charsets
def test_collations() -> None:
    ids = [8, 45, 46, 63, 33, 255, 2304, 2048, 3072, 35, 54, 56, 60, 1, 13, 28, 9999, None]
    assert [charset_of_collation(i) for i in ids] == [
        "latin1",
        "utf8mb4",
        "utf8mb4",
        "binary",
        "utf8mb3",
        "utf8mb4",
        "utf8mb4",
        "utf8mb3",
        "utf32",
        "ucs2",
        "utf16",
        "utf16le",
        "utf32",
        "big5",
        "sjis",
        "gbk",
        None,
        None,
    ]


def test_mysql_latin1_is_cp1252_with_c1_controls() -> None:
    decode = text_decoder("latin1")
    assert decode is not None
    assert decode(b"caf\xe9 \x80 \x81\x8d\x8f\x90\x9d \x9f") == "café € \x81\x8d\x8f\x90\x9d Ÿ"


@pytest.mark.parametrize(
    "charset,raw,text",
    [
        ("ucs2", "00e920ac", "é€"),
        ("utf16", "00e9d83dde00", "é😀"),
        ("utf16le", "e9003dd800de", "é😀"),
        ("utf32", "000000e90001f600", "é😀"),
        ("greek", "e1e2e3", "αβγ"),
        ("hebrew", "f9ece5ed", "שלום"),
        ("latin5", "f0fcfe", "ğüş"),
        ("macroman", "8e", "é"),
        ("cp866", "afe0a8a2a5e2", "привет"),
        ("ujis", "c6fccbdc8fb0a1", "日本丂"),  # EUC-JP, a JIS X 0212 character in three bytes
        ("cp932", "93fa967b8740", "日本①"),  # Windows-31J, an NEC special character
        ("gb18030", "d6d0a2e39439fc36", "中€😀"),  # four bytes for a character outside the BMP
    ],
)
def test_charset_codecs(charset: str, raw: str, text: str) -> None:
    decode = text_decoder(charset)
    assert decode is not None and decode(bytes.fromhex(raw)) == text


@pytest.mark.parametrize("charset", ["koi8r", "eucjpms", "armscii8", "dec8"])  # nor does Maxwell (Java) know them
def test_unsupported_charsets(charset: str) -> None:
    assert text_decoder(charset) is None
