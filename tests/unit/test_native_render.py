"""The compiled renderer against the reference decoder on random row images: equal text, or a refusal.

Where the native renderer accepts a body it must produce exactly the reference path's JSON (`data`, `old`,
primary key and its hash); where it refuses (ValueError: bytes no server writes, such as a DECIMAL group
past 10^9), the worker decodes the event on the reference path.
"""

from __future__ import annotations

import dataclasses
import random
import struct
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
import pytest
from mysqlcapture_api.changelog import pk_hash
from mysqlcapture_api.columns import Columns
from mysqlcapture_api.schema.model import ColumnDef
from mysqlcapture_worker.column_rules import ColumnRules, text_column
from mysqlcapture_worker.decode import compile_decoder
from mysqlcapture_worker.decode.native import RowRenderer, native_renderer
from mysqlcapture_worker.engine.rendering import changed as _changed
from mysqlcapture_worker.engine.rendering import json_nulls, render
from mysqlcapture_worker.replication.events import ColumnMeta, RowsKind

from tests.unit.test_decode import bitmap, rows, table_def, table_map

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(RowRenderer is None, reason="mysqlcapture_native is not built (make setup builds it)"),
]

_KINDS = {RowsKind.INSERT: 0, RowsKind.UPDATE: 1, RowsKind.DELETE: 2}
Gen = Callable[[random.Random], bytes]


def _sized(prefix: int, gen: Callable[[random.Random], bytes]) -> Gen:
    def value(rng: random.Random) -> bytes:
        raw = gen(rng)
        return len(raw).to_bytes(prefix, "little") + raw

    return value


def _utf8ish(rng: random.Random) -> bytes:
    """UTF-8 text with quotes, backslashes, control characters, astral characters and invalid sequences."""
    pieces = ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "a", "Z", " "]
    raw = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))).encode()
    if rng.random() < 0.3:
        raw += rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\x80abc"])
    return raw


def _bytes(n: int) -> Gen:
    return lambda rng: rng.randbytes(n)


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _decimal(precision: int, scale: int) -> Gen:
    """MySQL's binary DECIMAL of a random value: groups of 9 digits, big-endian, negatives inverted."""
    intg = precision - scale

    def value(rng: random.Random) -> bytes:
        ip = str(rng.randrange(10 ** rng.randint(0, intg)) if intg else 0).rjust(intg, "0")
        fp = str(rng.randrange(10**scale) if scale else 0).rjust(scale, "0")
        lead, tail = intg % 9, scale % 9
        groups = ([ip[:lead]] if lead else []) + [ip[i : i + 9] for i in range(lead, intg, 9)]
        groups += [fp[i : i + 9] for i in range(0, scale - tail, 9)] + ([fp[scale - tail :]] if tail else [])
        raw = bytearray(b"".join(int(g).to_bytes(_DIG2BYTES[len(g)], "big") for g in groups))
        raw[0] ^= 0x80
        return bytes(x ^ 0xFF for x in raw) if rng.random() < 0.5 else bytes(raw)

    return value


def _datetime6(rng: random.Random) -> bytes:
    ym = rng.randint(0, 9999) * 13 + rng.randint(0, 12)
    packed = (ym << 22 | rng.randint(0, 31) << 17 | rng.randint(0, 23) << 12 | rng.randint(0, 59) << 6) + 0x8000000000
    return (packed << 24 | rng.randint(0, 999_999)).to_bytes(8, "big")


def _timestamp3(rng: random.Random) -> bytes:
    return rng.randint(0, 2**32 - 1).to_bytes(4, "big") + (rng.randint(0, 999) * 10).to_bytes(2, "big")


# (case id, column meta, column definition, value generator): one column `v` beside `id int` (the key).
COLUMNS: list[tuple[str, ColumnMeta, ColumnDef, Gen]] = [
    ("tinyint", ColumnMeta(1), ColumnDef("v", "tinyint"), _bytes(1)),
    ("smallint_unsigned", ColumnMeta(2), ColumnDef("v", "smallint", signed=False), _bytes(2)),
    ("mediumint", ColumnMeta(9), ColumnDef("v", "mediumint"), _bytes(3)),
    ("mediumint_unsigned", ColumnMeta(9), ColumnDef("v", "mediumint", signed=False), _bytes(3)),
    ("int", ColumnMeta(3), ColumnDef("v", "int"), _bytes(4)),
    ("bigint", ColumnMeta(8), ColumnDef("v", "bigint"), _bytes(8)),
    ("bigint_unsigned", ColumnMeta(8), ColumnDef("v", "bigint", signed=False), _bytes(8)),
    ("double", ColumnMeta(5, size=8), ColumnDef("v", "double"), lambda r: struct.pack("<d", r.uniform(-1e9, 1e9))),
    ("double_bits", ColumnMeta(5, size=8), ColumnDef("v", "double"), _bytes(8)),
    ("decimal_10_2", ColumnMeta(246, precision=10, decimals=2), ColumnDef("v", "decimal"), _decimal(10, 2)),
    ("decimal_65_30", ColumnMeta(246, precision=65, decimals=30), ColumnDef("v", "decimal"), _decimal(65, 30)),
    ("decimal_5_0", ColumnMeta(246, precision=5, decimals=0), ColumnDef("v", "decimal"), _decimal(5, 0)),
    ("decimal_18_9", ColumnMeta(246, precision=18, decimals=9), ColumnDef("v", "decimal"), _decimal(18, 9)),
    ("decimal_bytes", ColumnMeta(246, precision=10, decimals=2), ColumnDef("v", "decimal"), _bytes(5)),
    ("date", ColumnMeta(10), ColumnDef("v", "date"), _bytes(3)),
    ("datetime6", ColumnMeta(18, fsp=6), ColumnDef("v", "datetime"), _datetime6),
    ("datetime6_bytes", ColumnMeta(18, fsp=6), ColumnDef("v", "datetime"), _bytes(8)),
    ("datetime0", ColumnMeta(18, fsp=0), ColumnDef("v", "datetime"), _bytes(5)),
    ("timestamp3", ColumnMeta(17, fsp=3), ColumnDef("v", "timestamp"), _timestamp3),
    ("time1", ColumnMeta(19, fsp=1), ColumnDef("v", "time"), _bytes(4)),
    ("time4", ColumnMeta(19, fsp=4), ColumnDef("v", "time"), _bytes(5)),
    ("time6", ColumnMeta(19, fsp=6), ColumnDef("v", "time"), _bytes(6)),
    ("year", ColumnMeta(13), ColumnDef("v", "year"), _bytes(1)),
    ("bit1", ColumnMeta(16, bits=1), ColumnDef("v", "bit"), _bytes(1)),
    ("bit12", ColumnMeta(16, bits=12), ColumnDef("v", "bit"), _bytes(2)),
    (
        "enum",
        ColumnMeta(247, size=1),
        ColumnDef("v", "enum", enum_values=("a", 'q"uote', "é")),
        lambda r: bytes([r.randint(0, 4)]),
    ),
    (
        "set",
        ColumnMeta(248, size=1),
        ColumnDef("v", "set", enum_values=("x", "y", "\\z")),
        lambda r: bytes([r.randint(0, 7)]),
    ),
    ("varchar_utf8", ColumnMeta(15, max_length=40), ColumnDef("v", "varchar", charset="utf8mb4"), _sized(1, _utf8ish)),
    (
        "varchar_long",
        ColumnMeta(15, max_length=1000),
        ColumnDef("v", "varchar", charset="utf8mb4"),
        _sized(2, _utf8ish),
    ),
    ("latin1", ColumnMeta(15, max_length=20), ColumnDef("v", "varchar", charset="latin1"), _sized(1, _bytes(12))),
    ("cp1251", ColumnMeta(15, max_length=20), ColumnDef("v", "varchar", charset="cp1251"), _sized(1, _bytes(12))),
    ("ascii", ColumnMeta(15, max_length=20), ColumnDef("v", "varchar", charset="ascii"), _sized(1, _bytes(12))),
    ("blob", ColumnMeta(252, length_size=2), ColumnDef("v", "blob"), _sized(2, _bytes(7))),
    ("text_utf8", ColumnMeta(252, length_size=4), ColumnDef("v", "text", charset="utf8mb4"), _sized(4, _utf8ish)),
    ("binary5", ColumnMeta(254, max_length=5), ColumnDef("v", "binary", length=5), _sized(1, _bytes(3))),
]


def _image(rng: random.Random, gen: Gen, key: int) -> bytes:
    if rng.random() < 0.15:
        return bitmap([False, True]) + struct.pack("<i", key)
    return bitmap([False, False]) + struct.pack("<i", key) + gen(rng)


def _reference_images(
    meta: ColumnMeta, col: ColumnDef, kind: RowsKind, body: bytes
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The images the capture engine's reference loop decodes, per row: (data, old), `old` None but for an update.
    `col` is the second column, after `id`."""
    tm = table_map(ColumnMeta(3, nullable=False), meta)
    decoder = compile_decoder(tm, table_def(ColumnDef("id", "int"), col))
    names = ("id", col.name)
    out = []
    for before, after in decoder.decode(rows(kind, body, 2)):
        image = after if after is not None else before
        assert image is not None
        old = None
        if kind is RowsKind.UPDATE and before is not None:
            old = {n: b for n, b, a in zip(names, before, image, strict=True) if _changed(b, a)}
        out.append((dict(zip(names, image, strict=True)), old))
    return out


def _reference(meta: ColumnMeta, col: ColumnDef, kind: RowsKind, body: bytes) -> list[tuple[str, str | None, str]]:
    """What the capture engine's reference loop renders: (data, old, primary key) per row."""
    return [
        (render(data), None if old is None else render(old), render([data["id"]]))
        for data, old in _reference_images(meta, col, kind, body)
    ]


def _column(n: int, column: tuple[bytes, bytes] | None) -> list[str | None]:
    if column is None:
        return [None] * n
    values, offsets = column
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(values)).to_pylist()


# Random bytes of types with invalid encodings (a DECIMAL group past 10^9, a fraction past 10^6): the point
# is that whatever is accepted equals the reference, not how much is.
FUZZ = {"decimal_bytes", "datetime6_bytes", "datetime0", "time1", "time4", "time6"}


@pytest.mark.parametrize(("case", "meta", "col", "gen"), COLUMNS, ids=[c[0] for c in COLUMNS])
@pytest.mark.parametrize("kind", list(RowsKind), ids=[k.value for k in RowsKind])
def test_random_images_render_as_the_reference_or_are_refused(
    case: str, meta: ColumnMeta, col: ColumnDef, gen: Gen, kind: RowsKind
) -> None:
    rng = random.Random(f"{case}-{kind.value}")
    tm = table_map(ColumnMeta(3, nullable=False), meta)
    renderer = native_renderer(tm, table_def(ColumnDef("id", "int"), col), (0,))
    assert renderer is not None, "this column type has a native plan"
    accepted = 0
    for event in range(300):
        count = rng.randint(1, 4)
        images = [(_image(rng, gen, event * 10 + i), _image(rng, gen, event * 10 + i)) for i in range(count)]
        body = b"".join(b + a if kind is RowsKind.UPDATE else b for b, a in images)
        try:
            n, data, old, pk, hashes, _, _ = renderer.render(_KINDS[kind], body)
        except ValueError:
            continue  # refused (bytes no server writes): the worker renders this event on the reference path

        accepted += 1
        expected = _reference(meta, col, kind, body)
        got = list(zip(_column(n, data), _column(n, old), _column(n, pk), strict=True))
        assert got == expected, f"event {event}: {body.hex()}"
        assert _column(n, hashes) == [pk_hash("shop", "items", p) for _, _, p in expected]
    assert case in FUZZ or accepted > 100, f"only {accepted} of 300 events rendered"


def test_truncated_and_overlong_bodies_are_refused() -> None:
    tm = table_map(ColumnMeta(3, nullable=False), ColumnMeta(15, max_length=40))
    renderer = native_renderer(tm, table_def(ColumnDef("id", "int"), ColumnDef("v", "varchar")), ())
    assert renderer is not None
    good = bitmap([False, False]) + struct.pack("<i", 1) + b"\x03abc"
    n, data, old, pk, hashes, _, _ = renderer.render(0, good)
    assert (n, _column(n, data), old, pk, hashes) == (1, ['{"id":1,"v":"abc"}'], None, None, None)
    for bad in (good[:-1], good + b"\x00", good[:3]):
        with pytest.raises(ValueError, match="truncated"):
            renderer.render(0, bad)


def test_key_hashes_only_for_the_sinks_that_write_them() -> None:
    """Without key hashes (every sink but Delta) a keyed table's rows keep their primary key and get no pk_hash;
    with them, each row's is the BLAKE2b the change log records."""
    tm = table_map(ColumnMeta(3, nullable=False), ColumnMeta(15, max_length=40))
    table = table_def(ColumnDef("id", "int"), ColumnDef("v", "varchar"))
    body = b"".join(bitmap([False, False]) + struct.pack("<i", i) + b"\x03abc" for i in (7, -2))
    hashed, plain = native_renderer(tm, table, (0,)), native_renderer(tm, table, (0,), key_hashes=False)
    assert hashed is not None and plain is not None
    n, data, _, pk, hashes, _, _ = hashed.render(0, body)
    keys = ["[7]", "[-2]"]
    assert (n, _column(n, pk), _column(n, hashes)) == (2, keys, [pk_hash("shop", "items", k) for k in keys])
    n, plain_data, _, plain_pk, plain_hashes, _, _ = plain.render(0, body)
    assert (_column(n, plain_data), _column(n, plain_pk), plain_hashes) == (_column(n, data), keys, None)


def test_only_pre_56_temporal_tables_stay_on_the_reference_path() -> None:
    for meta, col, native in (
        (ColumnMeta(4, size=4), ColumnDef("v", "float"), True),
        (ColumnMeta(255, length_size=4), ColumnDef("v", "geometry"), True),
        (ColumnMeta(245, length_size=4), ColumnDef("v", "json"), True),
        (ColumnMeta(15, max_length=40), ColumnDef("v", "varchar", charset="gbk"), True),
        (ColumnMeta(12), ColumnDef("v", "datetime"), False),
    ):
        tm = table_map(ColumnMeta(3, nullable=False), meta)
        assert (native_renderer(tm, table_def(ColumnDef("id", "int"), col), (0,)) is not None) is native


def test_floats_render_as_the_reference_path_does() -> None:
    """Every power of two (where the shortest digits may round away from zero), extremes, denormals and
    200,000 random bit patterns: the compiled text equals the reference path's Java `Float.toString`."""
    from mysqlcapture_native import format_float
    from mysqlcapture_worker.decode.values import float32_fragment

    rng = random.Random(7)
    patterns = [struct.pack("<I", e << 23 | sign) for e in range(256) for sign in (0, 1 << 31)]  # mantissa 0
    patterns += [struct.pack("<f", v) for v in (0.1, -0.1, 1 / 3, 3.4028235e38, 1.17549435e-38, 1e-45, 16777217.0)]
    patterns += [struct.pack("<I", b) for b in (1, 0x7FFFFF, 0x800001, 0x7F7FFFFF, 0x00800000)]
    patterns += [rng.randbytes(4) for _ in range(200_000)]
    expected = [orjson.dumps(float32_fragment(p)).decode() for p in patterns]
    assert [format_float(p) for p in patterns] == expected


def test_doubles_render_as_the_reference_path_does() -> None:
    """Java's `Double.toString`, by the Rust and the Python implementation, over 150,000 random doubles."""
    from mysqlcapture_api.javatext import java_double
    from mysqlcapture_native import format_double

    rng = random.Random(5)
    values: list[Any] = [0.0, -0.0, 0.1, 1e15, 1e16, 1e-5, 1e-6, 5e-324, 1.7976931348623157e308, 1515171147986681.2]
    values += [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(100_000)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(50_000)] + [10.0**k for k in range(-300, 300)]
    finite = [v for v in values if v == v and v not in (float("inf"), float("-inf"))]
    assert [format_double(v) for v in finite] == [java_double(v) for v in finite]


def _rules_for(col: ColumnDef) -> list[dict[str, Any]]:
    """Rule sets over `v` (and the key `id`, hashed) that apply to a column like `col`."""
    hashed = {"hash": {"columns": ["shop.items.v", "shop.items.id"], "keyFrom": {"env": "K"}}}
    sets: list[dict[str, Any]] = [{"exclude": ["*.*.v"], **hashed}, hashed]
    if text_column(col):
        sets += [
            {"mask": [{"columns": ["shop.items.v"], "keep": 2, "with": "#"}]},
            {"truncate": [{"columns": ["shop.items.v"], "length": 3}], **hashed},
        ]
    return sets


@pytest.mark.parametrize(("case", "meta", "col", "gen"), COLUMNS, ids=[c[0] for c in COLUMNS])
@pytest.mark.parametrize("kind", list(RowsKind), ids=[k.value for k in RowsKind])
def test_ruled_columns_render_as_the_reference_then_its_rules(
    case: str, meta: ColumnMeta, col: ColumnDef, gen: Gen, kind: RowsKind
) -> None:
    """spec.columns inside the compiled renderer: each value, `old` and the key equal the reference path's rendering
    ruled by column_rules (the Python reference), for every column type and rule that applies to it."""
    rng = random.Random(f"ruled-{case}-{kind.value}")
    tm = table_map(ColumnMeta(3, nullable=False), meta)
    table = dataclasses.replace(table_def(ColumnDef("id", "int"), col), primary_key=("id",))
    for spec in _rules_for(col):
        rules = ColumnRules(Columns.model_validate(spec), b"render-key").for_table(table)
        assert rules is not None and rules.native is not None
        renderer = native_renderer(tm, table, (0,), rules.native)
        assert renderer is not None
        accepted = 0
        for event in range(60):
            images = [(_image(rng, gen, event * 10 + i), _image(rng, gen, event * 10 + i)) for i in range(3)]
            body = b"".join(b + a if kind is RowsKind.UPDATE else b for b, a in images)
            try:
                n, data, old, pk, hashes, _, _ = renderer.render(_KINDS[kind], body)
            except ValueError:
                continue
            accepted += 1
            expected = [
                (rules.object(d), rules.object(o), rules.key(p)) for d, o, p in _reference(meta, col, kind, body)
            ]
            got = list(zip(_column(n, data), _column(n, old), _column(n, pk), strict=True))
            assert got == expected, f"{spec} event {event}: {body.hex()}"
            assert _column(n, hashes) == [pk_hash("shop", "items", p) for _, _, p in expected]
        assert case in FUZZ or accepted > 10, f"only {accepted} of 60 events rendered"


# A JSON column's values as each flavor's binlog holds them: SQL NULL (None), the JSON document null, other
# documents. MySQL's binary form (literal null: 0x04 0x00; an empty value MySQL reads as null), MariaDB's text.
_MYSQL_JSON = {
    "sql-null": None,
    "null": b"\x04\x00",
    "empty": b"",
    "string-null": b"\x0c\x04null",
    "object": b"\x00\x00\x00\x04\x00",
    "false": b"\x04\x02",
}
_MARIADB_JSON = {
    "sql-null": None,
    "null": b"null",
    "spaced-null": b" \r\n\tnull ",
    "empty": b"",
    "string-null": b'"null"',
    "object": b'{"a": null}',
    "form-feed-null": b"\x0cnull",
    "bom-null": b"\xef\xbb\xbfnull",
}


@pytest.mark.parametrize(
    ("flavor", "meta", "values"),
    [
        ("mysql", ColumnMeta(245, length_size=4), _MYSQL_JSON),
        ("mariadb", ColumnMeta(252, length_size=4), _MARIADB_JSON),
    ],
    ids=["mysql", "mariadb"],
)
def test_json_null_documents_are_marked_apart_from_sql_null(
    flavor: str, meta: ColumnMeta, values: dict[str, bytes | None]
) -> None:
    """The JSON document null renders `null` as SQL NULL does; the compiled renderer marks it (the change log's
    json_null, and old_json_null for an update's before value), and an update between the two is a change (in
    `old`, as Maxwell has it). Every pair of values, inserted, deleted and updated: equal to the reference path."""
    column = ColumnDef("j", "json")
    renderer = native_renderer(
        table_map(ColumnMeta(3, nullable=False), meta), table_def(ColumnDef("id", "int"), column), (0,)
    )
    assert renderer is not None

    def image(i: int, raw: bytes | None) -> bytes:
        if raw is None:
            return bitmap([False, True]) + struct.pack("<i", i)
        return bitmap([False, False]) + struct.pack("<i", i) + len(raw).to_bytes(4, "little") + raw

    def marks(n: int, column: tuple[Any, Any, Any] | None) -> list[str | None]:
        if column is None:
            return [None] * n
        values_, offsets, validity = column
        array = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(values_), pa.py_buffer(validity))
        return array.to_pylist()

    names = list(values)
    pairs = [(a, b) for a in names for b in names]
    for kind in RowsKind:
        if kind is RowsKind.UPDATE:
            body = b"".join(image(i, values[a]) + image(i, values[b]) for i, (a, b) in enumerate(pairs))
        else:
            body = b"".join(image(i, values[a]) for i, a in enumerate(names))
        n, data, old, _, _, json_null, old_json_null = renderer.render(_KINDS[kind], body)
        assert n == (len(pairs) if kind is RowsKind.UPDATE else len(names))
        expected = [
            (
                render(d),
                None if o is None else render(o),
                json_nulls(d, None),
                None if o is None else json_nulls(o, None),
            )
            for d, o in _reference_images(meta, column, kind, body)
        ]
        got = list(zip(_column(n, data), _column(n, old), marks(n, json_null), marks(n, old_json_null), strict=True))
        assert got == expected, kind
        if kind is RowsKind.INSERT:
            documents = ["null", "spaced-null", "bom-null"] if flavor == "mariadb" else ["null", "empty"]
            assert [m for m, _ in zip(marks(n, json_null), names, strict=True)] == [
                '["j"]' if v in documents else None for v in names
            ]
        if kind is RowsKind.UPDATE:
            # SQL NULL -> the JSON null document: a change, `old` holds j (null) and it is not marked; back: marked.
            to_doc = pairs.index(("sql-null", "null"))
            back = pairs.index(("null", "sql-null"))
            assert got[to_doc][1:] == ('{"j":null}', '["j"]', None)
            assert got[back][1:] == ('{"j":null}', None, '["j"]')
            assert got[pairs.index(("null", "null"))][1:] == ("{}", '["j"]', None)
