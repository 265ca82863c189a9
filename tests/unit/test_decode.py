"""The table decoder on hand-built rows events: image shapes, NULLs, absent columns, fallbacks and errors."""

from __future__ import annotations

import random
import struct
from typing import Any

import orjson
import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_worker.decode import ABSENT, DecodeError, UnsupportedTypeError, compile_decoder
from mysqlcapture_worker.replication.events import ColumnMeta, RowsEvent, RowsKind, TableMap

pytestmark = pytest.mark.unit

WHERE = Coordinate("mysql-bin.000001", 1234)


def table_map(*columns: ColumnMeta, **optional: Any) -> TableMap:
    return TableMap(table_id=7, database="shop", table="items", columns=columns, **optional)


def table_def(*columns: ColumnDef) -> TableDef:
    return TableDef(database="shop", name="items", columns=columns)


def bitmap(bits: list[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def rows(
    kind: RowsKind, body: bytes, count: int, present: bytes | None = None, present_after: bytes | None = None
) -> RowsEvent:
    full = bitmap([True] * count)
    return RowsEvent(
        kind=kind,
        table_id=7,
        where=WHERE,
        timestamp=1,
        server_id=1,
        columns_present=present or full,
        columns_present_after=(present_after or full) if kind is RowsKind.UPDATE else None,
        body=body,
        column_count=count,
    )


def render(row: list[Any] | None) -> str:
    return orjson.dumps(row).decode()


# (id int, price decimal(10,2), name varchar(10) utf8mb4, f float)
ITEMS_MAP = table_map(
    ColumnMeta(3, nullable=False),
    ColumnMeta(246, precision=10, decimals=2),
    ColumnMeta(15, max_length=40),
    ColumnMeta(4, size=4),
)
ITEMS_DEF = table_def(
    ColumnDef("id", "int"),
    ColumnDef("price", "decimal", precision=10, scale=2),
    ColumnDef("name", "varchar", charset="utf8mb4"),
    ColumnDef("f", "float"),
)


def item(id_: int, price: bytes | None, name: str | None, f: float | None) -> bytes:
    values = [struct.pack("<i", id_)]
    nulls = [False]
    for v, enc in (
        (price, lambda p: p),
        (name, lambda n: bytes([len(n.encode())]) + n.encode()),
        (f, lambda x: struct.pack("<f", x)),
    ):
        nulls.append(v is None)
        if v is not None:
            values.append(enc(v))
    return bitmap(nulls) + b"".join(values)


P1250 = bytes.fromhex("8000000c32")  # 12.50
P_NEG = bytes.fromhex("7ffffff3cd")  # -12.50


def test_insert_update_delete_images() -> None:
    dec = compile_decoder(ITEMS_MAP, ITEMS_DEF)
    body = item(1, P1250, "é😀", 1.1) + item(2, None, None, None)
    assert [(b, render(a)) for b, a in dec.decode(rows(RowsKind.INSERT, body, 4))] == [
        (None, '[1,12.50,"é\\uD83D\\uDE00",1.1]'),
        (None, "[2,null,null,null]"),
    ]
    update = item(1, P1250, "a", 1.1) + item(1, P_NEG, "a", 2.5)
    [(before, after)] = dec.decode(rows(RowsKind.UPDATE, update, 4))
    assert (render(before), render(after)) == ('[1,12.50,"a",1.1]', '[1,-12.50,"a",2.5]')
    [(before, after)] = dec.decode(rows(RowsKind.DELETE, item(2, P_NEG, "", 0.0), 4))
    assert (render(before), after) == ('[2,-12.50,"",0.0]', None)


def test_equal_values_compare_equal_across_images() -> None:
    """DECIMALs are orjson Fragments: one object per distinct value within an event, so `==` works."""
    dec = compile_decoder(ITEMS_MAP, ITEMS_DEF)
    same_price = item(1, P1250, "a", 1.1) + item(1, P1250, "b", 1.1)
    [(before, after)] = dec.decode(rows(RowsKind.UPDATE, same_price, 4))
    assert before is not None and after is not None
    assert before[1] == after[1] and before[3] == after[3] and before[2] != after[2]
    new_price = item(1, P1250, "a", 1.1) + item(1, P_NEG, "a", 1.1)
    [(before, after)] = dec.decode(rows(RowsKind.UPDATE, new_price, 4))
    assert before is not None and after is not None and before[1] != after[1]


def test_absent_columns_in_minimal_images() -> None:
    dec = compile_decoder(ITEMS_MAP, ITEMS_DEF)
    before = bitmap([False]) + struct.pack("<i", 9)  # only the id
    after = bitmap([False]) + bytes([1]) + b"z"  # only the name
    event = rows(
        RowsKind.UPDATE,
        before + after,
        4,
        present=bitmap([True, False, False, False]),
        present_after=bitmap([False, False, True, False]),
    )
    [(b, a)] = dec.decode(event)
    assert b == [9, ABSENT, ABSENT, ABSENT]
    assert a == [ABSENT, ABSENT, "z", ABSENT]


def test_many_null_patterns() -> None:
    count = 12
    tm = table_map(*[ColumnMeta(8) if i % 2 else ColumnMeta(15, max_length=10) for i in range(count)])
    td = table_def(*[ColumnDef(f"c{i}", "bigint" if i % 2 else "varchar", charset="ascii") for i in range(count)])
    dec = compile_decoder(tm, td)
    rng = random.Random(3)
    body, expected = b"", []
    for n in range(600):  # more patterns than the decoder keeps compiled
        nulls = [rng.random() < 0.5 for _ in range(count)]
        row = [None if nulls[i] else (n * i - 5 if i % 2 else f"s{i}") for i in range(count)]
        body += bitmap(nulls) + b"".join(
            struct.pack("<q", v) if i % 2 else bytes([len(v)]) + v.encode() for i, v in enumerate(row) if v is not None
        )
        expected.append(row)
    assert [a for _, a in dec.decode(rows(RowsKind.INSERT, body, count))] == expected


def test_table_map_fills_what_the_definition_lacks() -> None:
    """A bare definition: signedness, charset and members come from the TABLE_MAP's metadata."""
    tm = table_map(
        ColumnMeta(1),
        ColumnMeta(15, max_length=10),
        ColumnMeta(247, size=1),
        ColumnMeta(248, size=1),
        ColumnMeta(254, max_length=4),
        unsigned=(True, False, False, False, False),
        charsets=(None, 8, 45, 45, 63),
        enum_values=(None, None, ("x", "y"), ("a", "b", "c"), None),
    )
    td = table_def(*[ColumnDef(n, "") for n in ("u", "s", "e", "st", "bin")])
    body = bitmap([False] * 5) + b"\xff" + b"\x02\xe9\x80" + b"\x02" + b"\x05" + b"\x01a"
    [(_, after)] = compile_decoder(tm, td).decode(rows(RowsKind.INSERT, body, 5))
    assert render(after) == '[255,"é€","y",["a","c"],"YQAAAA=="]'


def test_definition_wins_over_missing_metadata() -> None:
    tm = table_map(
        ColumnMeta(1),
        ColumnMeta(252, length_size=2),
        ColumnMeta(252, length_size=2),
        ColumnMeta(254, max_length=3),
        ColumnMeta(252, length_size=4),
    )
    td = table_def(
        ColumnDef("u", "tinyint", signed=False),
        ColumnDef("t", "text", charset="latin1"),
        ColumnDef("b", "blob"),
        ColumnDef("bin", "binary", length=3),
        ColumnDef("j", "json"),
    )
    body = (
        bitmap([False] * 5) + b"\x80" + b"\x01\x00\xe9" + b"\x01\x00\xe9" + b"\x01a" + b'\x0c\x00\x00\x00{"k": [1.5]}'
    )
    [(_, after)] = compile_decoder(tm, td).decode(rows(RowsKind.INSERT, body, 5))
    assert render(after) == '[128,"é","6Q==","YQAA",{"k": [1.5]}]'  # MariaDB's JSON text as it is


def test_every_fixed_width_type_in_one_run() -> None:
    tm = table_map(
        ColumnMeta(1),
        ColumnMeta(2),
        ColumnMeta(9),
        ColumnMeta(3),
        ColumnMeta(8),
        ColumnMeta(5, size=8),
        ColumnMeta(13),
        ColumnMeta(10),
        ColumnMeta(19, fsp=0),
        ColumnMeta(18, fsp=6),
        ColumnMeta(17, fsp=3),
        ColumnMeta(16, bits=1),
        ColumnMeta(16, bits=12),
        ColumnMeta(247, size=2),
    )
    names = ["tiny", "small", "medium", "int", "big", "dbl", "yr", "dt", "tm", "dtm", "ts", "b1", "b12", "e"]
    types = [
        "tinyint",
        "smallint",
        "mediumint",
        "int",
        "bigint",
        "double",
        "year",
        "date",
        "time",
        "datetime",
        "timestamp",
        "bit",
        "bit",
        "enum",
    ]
    members = tuple(f"v{i}" for i in range(300))
    td = table_def(
        *[
            ColumnDef(n, t, signed=n != "big", enum_values=members if t == "enum" else None)
            for n, t in zip(names, types, strict=True)
        ]
    )
    body = (
        bitmap([False] * 14)
        + struct.pack("<bh", -1, -2)
        + (-3).to_bytes(3, "little", signed=True)
        + struct.pack("<iQd", -4, 2**64 - 1, -0.5)
        + bytes([124])
        + bytes.fromhex("5dc80f")
        + bytes.fromhex("7fffff")
        + bytes.fromhex("999aaa58650f423f")
        + bytes.fromhex("7fffffff146e")
        + b"\x01"
        + bytes.fromhex("0fff")
        + struct.pack("<H", 300)
    )
    [(_, after)] = compile_decoder(tm, td).decode(rows(RowsKind.INSERT, body, 14))
    assert render(after) == (
        '[-1,-2,-3,-4,18446744073709551615,-0.5,2024,"2020-02-29","-00:00:01","2016-10-21 05:33:37.999999",'
        '"2038-01-19 03:14:07.523",1,4095,"v299"]'
    )


def test_unknown_type_code_says_where_and_what_to_do() -> None:
    # 243: a type code no server writes today (a type a future server may add).
    tm = table_map(ColumnMeta(3), ColumnMeta(243))
    where = r"shop\.items column 'fut' has MySQL column type code 243"
    with pytest.raises(UnsupportedTypeError, match=where) as err:
        compile_decoder(tm, table_def(ColumnDef("id", "int"), ColumnDef("fut", "blob")))
    assert "Exclude the table" in str(err.value)


def test_vector_renders_its_float32_values() -> None:
    tm = table_map(ColumnMeta(3), ColumnMeta(242, length_size=4))
    decoder = compile_decoder(tm, table_def(ColumnDef("id", "int"), ColumnDef("vec", "vector")))
    body = struct.pack("<i", 7) + struct.pack("<I", 12) + struct.pack("<fff", 1.0, 0.1, -3.5)
    decoded = list(decoder.decode(rows(RowsKind.INSERT, b"\x00" + body, 2)))
    assert render(decoded[0][1]) == "[7,[1.0,0.1,-3.5]]"


def test_unsupported_charset_says_where() -> None:
    tm = table_map(ColumnMeta(15, max_length=10))
    with pytest.raises(UnsupportedTypeError, match=r"shop\.items column 'n' uses charset 'koi8r'"):
        compile_decoder(tm, table_def(ColumnDef("n", "varchar", charset="koi8r")))
    with pytest.raises(UnsupportedTypeError, match=r"shop\.items column 'n' has collation id 4000"):
        compile_decoder(table_map(ColumnMeta(15, max_length=10), charsets=(4000,)), table_def(ColumnDef("n", "")))


def test_enum_without_members_is_an_error() -> None:
    with pytest.raises(UnsupportedTypeError, match="ENUM whose members are unknown"):
        compile_decoder(table_map(ColumnMeta(247, size=1)), table_def(ColumnDef("e", "")))


def test_layout_mismatches_are_errors() -> None:
    with pytest.raises(UnsupportedTypeError, match="2 columns, the table definition 1"):
        compile_decoder(table_map(ColumnMeta(3), ColumnMeta(3)), table_def(ColumnDef("a", "int")))
    dec = compile_decoder(ITEMS_MAP, ITEMS_DEF)
    with pytest.raises(DecodeError, match="rows event has 3 columns"):
        dec.decode(rows(RowsKind.INSERT, b"", 3))
    good = item(1, P1250, "abc", 1.0)
    with pytest.raises(DecodeError, match=r"truncated row image.*mysql-bin\.000001:1234"):
        dec.decode(rows(RowsKind.INSERT, good[:8], 4))
    overrun = item(1, P1250, "abc", None).replace(b"\x03abc", b"\x09abc")
    with pytest.raises(DecodeError, match="row images end at byte 20, the event body at 14"):
        dec.decode(rows(RowsKind.INSERT, overrun, 4))
    text_json = compile_decoder(table_map(ColumnMeta(252, length_size=1)), table_def(ColumnDef("j", "json")))
    [(_, after)] = text_json.decode(rows(RowsKind.INSERT, b"\x00\x02{x", 1))
    assert render(after) == '["{x"]'  # text that is not JSON: a string, the line stays valid JSON
    json_dec = compile_decoder(table_map(ColumnMeta(245, length_size=1)), table_def(ColumnDef("j", "json")))
    with pytest.raises(DecodeError, match=r"shop\.items: .* in the rows event ending at mysql-bin\.000001"):
        json_dec.decode(rows(RowsKind.INSERT, b"\x00\x02\x0c\xff", 1))
    enum_def = table_def(ColumnDef("e", "enum", enum_values=("a",)))
    enum_dec = compile_decoder(table_map(ColumnMeta(247, size=1)), enum_def)
    with pytest.raises(ValueError, match="ENUM index 2 beyond its 1 members"):
        enum_dec.decode(rows(RowsKind.INSERT, b"\x00\x02", 1))
