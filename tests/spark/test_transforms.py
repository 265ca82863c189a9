"""The compaction transforms on small change logs, compared exactly with chispa."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from chispa import assert_df_equality
from mysqlcapture_api.changelog import pk_hash
from mysqlcapture_compaction import images, transforms, values
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

pytestmark = pytest.mark.spark

LONGS = {"order_key", "server_id", "binlog_pos", "row_index", "event_pos", "xid", "ts", "thread_id"}
FIELDS = [
    "order_key", "server_id", "gtid", "binlog_file", "binlog_pos", "row_index", "event_pos", "xid", "commit", "ts",
    "thread_id", "type", "primary_key", "primary_key_columns", "pk_hash", "data", "old", "sql", "database", "table",
]  # fmt: skip
SCHEMA = StructType(
    [StructField(f, LongType() if f in LONGS else BooleanType() if f == "commit" else StringType()) for f in FIELDS]
)


def event(order_key: int, kind: str, pk: int, data: str | None, old: str | None = None, **extra: Any) -> dict[str, Any]:
    """A change-log row of table shop.orders (identity: binlog_pos = order_key unless given)."""
    row = {f: None for f in FIELDS}
    row.update(
        order_key=order_key, server_id=1, binlog_file="b.000001", binlog_pos=order_key * 100, row_index=0,
        event_pos=order_key * 100 + 50, commit=True, ts=1_700_000_000 + order_key, type=kind,
        primary_key=f"[{pk}]", primary_key_columns='["id"]', pk_hash=pk_hash("shop", "orders", f"[{pk}]"),
        data=data, old=old, database="shop", table="orders",
    )  # fmt: skip
    row.update(extra)
    return row


def frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame([tuple(r[f] for f in FIELDS) for r in rows], SCHEMA)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":12.500000,"b":"x\\"y","c":null}', [("a", "12.500000"), ("b", '"x\\"y"'), ("c", "null")]),
        # numbers beyond double precision and nested JSON keep their exact text
        ('{ "d" : 123456789012345678901234567890.1 , "e":[1,2.50],"f":{"k":0.10}}',
         [("d", "123456789012345678901234567890.1"), ("e", "[1,2.50]"), ("f", '{"k":0.10}')]),
        ("{}", []),
    ],
    ids=["scalars", "exact-numbers-nested", "empty"],
)  # fmt: skip
def test_raw_items_keep_literal_text(text: str, expected: list[tuple[str, str]]) -> None:
    assert values.raw_items(text) == expected


@pytest.mark.unit
def test_natural_text() -> None:
    image = '{"s":"é\\n","n":1e300,"b":true,"z":null,"j":["x","y"]}'
    names = ("s", "n", "b", "z", "j")
    assert values.raw_members(image, names, ("natural",) * 5) == ("{}", "é\n", "1e300", "true", None, '["x","y"]')
    assert values.raw_members(image, ("j", "s"), ("json", "json")) == (
        '{"n":1e300,"b":true,"z":null}',
        '["x","y"]',
        '"é\\n"',
    )
    assert values.before_pk('{"a":2,"b":"x"}', '{"a":1}', '["a","b"]') == '[1,"x"]'


def test_dedupe_keeps_one_event_per_identity(spark: SparkSession) -> None:
    first = event(1, "insert", 1, '{"id":1}')
    again = {**first, "order_key": 7}  # the same event written twice, under a later ordering key
    other = event(2, "insert", 2, '{"id":2}')
    got = transforms.dedupe(frame(spark, [again, first, other]))
    assert_df_equality(got, frame(spark, [first, other]), ignore_row_order=True)


def typed_versions(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """History versions of change-log rows of a table with columns id and v, kept as text (no definition)."""
    versions = transforms.history_rows(frame(spark, rows))
    parsed = images.parsed_images(F.col("data"), F.col("old"), None, ["id", "v"])
    versions = versions.select(*transforms.HISTORY_META, parsed.alias("_p"))
    parts = images.version_images(F.col("_p"), F.col("type"), None, ["id", "v"])
    versions = versions.select(*transforms.HISTORY_META, parts.alias("_v"))
    before, after = images.images_of(F.col("_v"), F.col("type"), ["id", "v"])
    return versions.select(*transforms.HISTORY_META, before.alias("before"), after.alias("after"))


def test_a_primary_key_move_deletes_the_old_key(spark: SparkSession) -> None:
    rows = [
        event(1, "insert", 1, '{"id":1,"v":"a"}'),
        event(2, "update", 5, '{"id":5,"v":"a"}', '{"id":1}'),  # id 1 -> 5
        event(3, "update", 5, '{"id":5,"v":"b"}', '{"v":"a"}'),
        event(4, "insert", 1, '{"id":1,"v":"c"}'),  # the old key used again
        event(5, "update", 7, '{"id":7,"v":"b"}', '{"id":5}'),  # 5 -> 7
    ]
    got = transforms.changes(typed_versions(spark, rows)).select("order_key", "_pk", "_op", "after.v")
    want = spark.createDataFrame(
        [(4, "[1]", "upsert", "c"), (5, "[5]", "delete", "b"), (5, "[7]", "upsert", "b")],
        "order_key long, _pk string, _op string, v string",
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


def test_history_images_are_typed_before_and_after(spark: SparkSession) -> None:
    rows = [
        event(1, "insert", 1, '{"id":1,"v":"a"}'),
        event(2, "update", 1, '{"id":1,"v":"b"}', '{"v":"a"}'),
        event(3, "update", 3, '{"id":3,"v":"b"}', '{"id":1}'),
        event(4, "delete", 3, '{"id":3,"v":"b"}'),
    ]
    versions = typed_versions(spark, rows)
    got = versions.select(
        "pk",
        "order_key",
        "moved_away",
        *[F.col(f"{image}.{c}").alias(f"{image}_{c}") for image in ("before", "after") for c in ("id", "v")],
    )
    want = spark.createDataFrame(
        [
            ("[1]", 1, False, None, None, "1", "a"),
            ("[1]", 2, False, "1", "a", "1", "b"),  # the before image: the after image with `old` put back
            ("[3]", 3, False, "1", "b", "3", "b"),
            ("[1]", 3, True, "1", "b", "3", "b"),
            ("[3]", 4, False, "3", "b", None, None),
        ],
        "pk string, order_key long, moved_away boolean, before_id string, before_v string, after_id string, "
        "after_v string",
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


def test_history_rows_list_every_version_and_moves_under_both_keys(spark: SparkSession) -> None:
    rows = [
        event(1, "insert", 1, '{"id":1,"v":"a","w":0}'),
        event(2, "update", 1, '{"id":1,"v":"b","w":0}', '{"v":"a"}'),
        event(3, "update", 9, '{"id":9,"v":"b","w":0}', '{"id":1}'),
        event(4, "delete", 9, '{"id":9,"v":"b","w":0}'),
    ]
    history = transforms.history_rows(frame(spark, rows))
    got = history.select("pk", "order_key", "type", "moved_away", "data", "old")
    want = spark.createDataFrame(
        [
            ("[1]", 1, "insert", False, '{"id":1,"v":"a","w":0}', None),
            ("[1]", 2, "update", False, '{"id":1,"v":"b","w":0}', '{"v":"a"}'),
            ("[9]", 3, "update", False, '{"id":9,"v":"b","w":0}', '{"id":1}'),
            ("[1]", 3, "update", True, '{"id":9,"v":"b","w":0}', '{"id":1}'),
            ("[9]", 4, "delete", False, '{"id":9,"v":"b","w":0}', None),
        ],
        "pk string, order_key long, type string, moved_away boolean, data string, old string",
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
    hashes = {r["pk"]: r["pk_hash"] for r in transforms.history_rows(frame(spark, rows)).collect()}
    for pk, digest in hashes.items():
        assert digest == pk_hash("shop", "orders", pk)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("args", "expected"),
    [(["42"], "[42]"), (["abc"], '["abc"]'), (["7", "x"], '[7,"x"]'), (['[1, "a b"]'], '[1,"a b"]')],
    ids=["int", "string", "composite", "json-array"],
)
def test_history_pk_argument_renders_like_the_worker(args: list[str], expected: str) -> None:
    from mysqlcapture_compaction import history

    assert history.pk_json(args) == expected


@pytest.mark.unit
def test_history_versions_print_as_a_table_json_and_csv() -> None:
    import pyarrow as pa
    from mysqlcapture_api.schema.model import ColumnDef, TableDef
    from mysqlcapture_compaction import history, history_output

    table = TableDef(
        "shop",
        "orders",
        (
            ColumnDef("id", "int"),
            ColumnDef("total", "decimal", precision=10, scale=2),
            ColumnDef("placed", "datetime", column_length=3),
            ColumnDef("tag", "varbinary"),
            ColumnDef("d", "date"),
            ColumnDef("t", "time", column_length=0),
        ),
        primary_key=("id",),
    )
    # Images as pyarrow reads them: typed values, `_cdc_raw` (a map) as pairs.
    after = {
        "id": 42,
        "total": decimal.Decimal("1.50"),
        "placed": datetime.datetime(2024, 1, 2, 3, 4, 5, 120000),
        "tag": b"\x00\xff",
        "d": None,
        "t": -3_600_000_000,
        "_cdc_raw": [("d", "0000-00-00")],
    }
    image = pa.struct(
        [
            ("id", pa.int32()),
            ("total", pa.decimal128(10, 2)),
            ("placed", pa.timestamp("us")),
            ("tag", pa.binary()),
            ("d", pa.date32()),
            ("t", pa.int64()),
            ("_cdc_raw", pa.map_(pa.string(), pa.string())),
        ]
    )
    meta = {"database": "shop", "table": "orders", "thread_id": 7, "xid": 11, "moved_away": False}
    rows = [
        {**meta, "order_key": 8, "ts": 60, "type": "delete", "binlog_file": "b.1", "event_pos": 99, "gtid": None,
         "pk": "[42]", "before": after, "after": None},
        {**meta, "order_key": 3, "ts": 0, "type": "insert", "binlog_file": "b.1", "event_pos": 9, "gtid": "0-1-3",
         "pk": "[42]", "before": None, "after": after},
    ]  # fmt: skip
    schema = pa.schema(
        [(c, pa.int64()) for c in ("order_key", "ts", "event_pos", "thread_id", "xid")]
        + [(c, pa.string()) for c in ("type", "binlog_file", "gtid", "pk", "database", "table")]
        + [("moved_away", pa.bool_()), ("before", image), ("after", image)]
    )
    found = history.Found((pa.Table.from_pylist(rows, schema),))
    defs = {("shop", "orders"): table}
    lines = history_output.render("table", defs, found).splitlines()
    assert lines[0].split()[:7] == ["time", "(UTC)", "type", "pk", "gtid", "position", "thread"]
    shown = '{"id":42,"total":1.50,"placed":"2024-01-02 03:04:05.120","tag":"AP8=","d":"0000-00-00","t":"-01:00:00"}'
    assert lines[3].split(None, 8) == ["1970-01-01", "00:00:00", "insert", "[42]", "0-1-3", "b.1:9", "7", "11", shown]
    assert lines[-1] == "(2 versions)"
    first = history_output.render("json", defs, found).splitlines()[0]
    assert first.startswith('{"database":"shop","table":"orders","type":"delete","ts":60,"time":"1970-01-01 00:01:00"')
    assert '"pk":[42],"changed":null,"before":' + shown + ',"after":null}' in first
    csv_text = history_output.render("csv", defs, found).splitlines()
    assert csv_text[0].startswith('"time","type","database","table","pk","gtid","binlog_file","event_pos"')
    assert csv_text[1].endswith('"42","1.50","2024-01-02 03:04:05.120","0x00FF","0000-00-00","-01:00:00",,,,,,')
    assert ',"b.1","99","7","11",,' in csv_text[1]  # no GTID: an empty unquoted field (NULL), unlike ""
    assert history.parse_time("2024-01-01T00:00:00Z") == 1704067200
    assert history.parse_time("1704067200") == 1704067200


@pytest.mark.unit
def test_undo_statements_are_exact_guarded_and_leave_generated_columns_out() -> None:
    from mysqlcapture_api.schema.model import ColumnDef, TableDef
    from mysqlcapture_compaction import undo

    table = TableDef(
        "s",
        "t",
        (
            ColumnDef("id", "int"),
            ColumnDef("f", "float"),
            ColumnDef("j", "json"),
            ColumnDef("note", "varchar"),
            ColumnDef("g", "int", generated=True),
        ),
        primary_key=("id",),
    )
    old = {"id": 1, "f": 0.10000000149011612, "j": '{"a":1}', "note": "it's", "g": 2, "_cdc_raw": None}
    new = {**old, "note": "a\\b", "g": 3}
    row = {"database": "s", "table": "t", "type": "update", "before": old, "after": new}
    assert undo.statement(row, table, "mysql") == (
        "UPDATE `s`.`t` SET `note` = 'it''s' WHERE `id` = 1 AND `f` = 0.10000000149011612 AND "
        "`j` = CAST('{\"a\":1}' AS JSON) AND `note` = _utf8mb4 X'615C62' LIMIT 1;"
    )
    gone = {**row, "type": "delete", "after": None}
    assert undo.statement(gone, table, "mariadb") == (
        "INSERT INTO `s`.`t` (`id`, `f`, `j`, `note`) VALUES (1, 0.10000000149011612, '{\"a\":1}', 'it''s');"
    )
    made = {**row, "type": "insert", "before": None, "after": {**old, "note": None}}
    assert undo.statement(made, table, "mariadb") == (
        "DELETE FROM `s`.`t` WHERE `id` = 1 AND `f` = 0.10000000149011612 AND "
        "JSON_COMPACT(`j`) = JSON_COMPACT('{\"a\":1}') AND `note` IS NULL LIMIT 1;"
    )
    assert undo.statement({**made, "type": "bootstrap-insert"}, table, "mysql") is None
    # The JSON document null (its text `null`) is a JSON value, not SQL NULL, in the guard and the value put back.
    document = {**row, "type": "delete", "before": {**old, "j": "null"}, "after": None}
    assert "CAST('null' AS JSON), 'it''s');" in undo.statement(document, table, "mysql")  # type: ignore[operator]
    nulled = {**made, "after": {**old, "j": "null", "note": None}}
    assert "AND JSON_COMPACT(`j`) = JSON_COMPACT('null') AND" in undo.statement(nulled, table, "mariadb")  # type: ignore[operator]
    assert "AND `j` = CAST('null' AS JSON) AND" in undo.statement(nulled, table, "mysql")  # type: ignore[operator]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "problem"),
    [("status", "expected `column = value`"), ("a = 'it's'", "unescaped '"), ("a LIKE 'x%'", "expected")],
)
def test_history_where_says_what_it_cannot_read(text: str, problem: str) -> None:
    from mysqlcapture_compaction import history_where

    with pytest.raises(history_where.WhereError, match=problem):
        history_where.parse(text)


@pytest.mark.unit
def test_history_json_columns_equal_the_reference_renderer_value_for_value() -> None:
    """history_json renders whole columns in Arrow; each value must be json_renderer's (the reference), on
    randomized values of every type it formats itself, sliced arrays included (a batch of a longer window)."""
    import random
    import struct

    import orjson
    import pyarrow as pa
    from mysqlcapture_api.schema.model import ColumnDef
    from mysqlcapture_compaction.history_json import value_texts
    from mysqlcapture_compaction.history_values import json_renderer

    rnd = random.Random(33)
    n = 3000

    def maybe(v: Any) -> Any:
        return None if rnd.random() < 0.1 else v

    def text() -> str:
        alphabet = 'ab"\\\x00\x01\x1f\x7f é€😀\n\t/<>\u2028'
        return "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12)))

    def double() -> float:
        pick = rnd.random()
        if pick < 0.3:
            return struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if pick < 0.4:
            return rnd.choice([0.0, -0.0, 1.0, 1e7, 9999999.999, 1e-3, 0.000999, 100.0, -2.5])
        return rnd.uniform(-1, 1) * 10 ** rnd.randint(-8, 12)

    when = datetime.datetime(1970, 1, 1)
    columns: list[tuple[ColumnDef | None, pa.DataType, list[Any]]] = [
        (ColumnDef("i", "bigint"), pa.int64(), [maybe(rnd.randint(-(2**63), 2**63 - 1)) for _ in range(n)]),
        (None, pa.int32(), [maybe(rnd.randint(-(2**31), 2**31 - 1)) for _ in range(n)]),
        (ColumnDef("b", "boolean"), pa.bool_(), [maybe(rnd.random() < 0.5) for _ in range(n)]),
        (ColumnDef("s", "varchar"), pa.string(), [maybe(text()) for _ in range(n)]),
        (None, pa.string(), [maybe(text().replace("\x00", "").replace("\x01", "")) for _ in range(n)]),
        (ColumnDef("j", "json"), pa.string(), [maybe(orjson.dumps({"k": text()}).decode()) for _ in range(n)]),
        (ColumnDef("d", "double"), pa.float64(), [maybe(double()) for _ in range(n)]),
        (None, pa.float64(), [maybe(rnd.uniform(-1e6, 1e6)) for _ in range(n)]),
        (ColumnDef("f", "float"), pa.float64(), [maybe(rnd.uniform(-1e9, 1e9)) for _ in range(300)]),
        (
            ColumnDef("m", "decimal", precision=20, scale=10),
            pa.decimal128(20, 10),
            [maybe(decimal.Decimal(rnd.randint(-(10**20) + 1, 10**20 - 1)).scaleb(-10)) for _ in range(n)]
            + [decimal.Decimal("0E-10"), decimal.Decimal("1E-10"), decimal.Decimal("-0.0000001000")],
        ),
        (
            ColumnDef("day", "date"),
            pa.date32(),
            [maybe(datetime.date(1, 1, 1) + datetime.timedelta(days=rnd.randint(0, 3_652_058))) for _ in range(n)],
        ),
        *[
            (
                ColumnDef("at", kind, column_length=fsp),
                pa.timestamp("us", tz="UTC" if kind == "timestamp" else None),
                [
                    maybe(
                        (when + datetime.timedelta(microseconds=rnd.randint(0, 2**55))).replace(
                            tzinfo=datetime.UTC if kind == "timestamp" else None
                        )
                    )
                    for _ in range(n)
                ],
            )
            for kind in ("datetime", "timestamp")
            for fsp in (0, 3, 6)
        ],
        (
            ColumnDef("tags", "set"),
            pa.list_(pa.string()),
            [maybe([text() for _ in range(rnd.randint(0, 3))]) for _ in range(n)],
        ),
        (
            ColumnDef("t", "time", column_length=2),
            pa.int64(),
            [maybe(rnd.randint(-(10**12), 10**12)) for _ in range(99)],
        ),
        (ColumnDef("bin", "varbinary"), pa.binary(), [maybe(rnd.randbytes(rnd.randint(0, 9))) for _ in range(300)]),
    ]
    for col, kind, given in columns:
        array = pa.array(given, kind)
        render = json_renderer(col)
        want = [None if v is None else orjson.dumps(render(v)).decode() for v in array.to_pylist()]
        assert value_texts(array, col).to_pylist() == want, (col, kind)
        part = array.slice(len(array) // 3, len(array) // 2)
        assert value_texts(part, col).to_pylist() == want[len(array) // 3 : len(array) // 3 + len(array) // 2]


@pytest.mark.unit
def test_one_transaction_across_tables_keeps_each_tables_own_columns(tmp_path: Any) -> None:
    """`history --gtid` across tables: a column of one name and two types (an INT `status` here, a VARCHAR there)
    is each table's own, and an image shows only its table's columns, newest first across the tables."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake
    from mysqlcapture_api.schema.model import ColumnDef, TableDef
    from mysqlcapture_compaction import history, history_output, targets

    output = str(tmp_path)

    def version(order_key: int, gtid: str, pk: int, after: dict[str, Any], image: pa.DataType) -> pa.Table:
        meta: dict[str, Any] = {"pk": f"[{pk}]", "pk_hash": f"{pk:04d}", "moved_away": False, "order_key": order_key}
        meta |= {"type": "insert", "ts": 100, "gtid": gtid, "binlog_file": "b.1", "event_pos": order_key}
        meta |= {"thread_id": 3, "xid": 9, "before": None, "after": after}
        names = ["pk", "pk_hash", "moved_away", "order_key", "type", "ts", "gtid", "binlog_file", "event_pos"]
        names += ["thread_id", "xid", "before", "after"]
        kinds = [pa.string(), pa.string(), pa.bool_(), pa.int64(), pa.string(), pa.int64(), pa.string()]
        kinds += [pa.string(), pa.int64(), pa.int64(), pa.int64(), image, image]
        schema = pa.schema(list(zip(names, kinds, strict=True)))
        return pa.Table.from_pylist([meta], schema)

    a_image = pa.struct([("id", pa.int64()), ("status", pa.int32())])
    b_image = pa.struct([("id", pa.int64()), ("status", pa.string()), ("note", pa.string())])
    write_deltalake(
        targets.Target(output, "shop", "a").history, version(5, "0-1-7", 1, {"id": 1, "status": 2}, a_image)
    )
    b_rows = pa.concat_tables(
        [
            version(6, "0-1-7", 1, {"id": 1, "status": "paid", "note": None}, b_image),
            version(4, "0-1-6", 2, {"id": 2, "status": "new", "note": "x"}, b_image),
        ]
    )
    write_deltalake(targets.Target(output, "shop", "b").history, b_rows)
    defs = {
        ("shop", "a"): TableDef("shop", "a", (ColumnDef("id", "bigint"), ColumnDef("status", "int")), ("id",)),
        ("shop", "b"): TableDef(
            "shop", "b", (ColumnDef("id", "bigint"), ColumnDef("status", "varchar"), ColumnDef("note", "text")), ("id",)
        ),
    }
    found = history.select(output, history.Query(gtid="0-1-7"))
    lines = [json.loads(line) for line in history_output.render("json", defs, found).splitlines()]
    assert [(v["table"], v["order_key"], v["after"]) for v in lines] == [
        ("b", 6, {"id": 1, "status": "paid", "note": None}),
        ("a", 5, {"id": 1, "status": 2}),
    ]
    assert [r["table"] for r in found.rows()] == ["b", "a"]
    table = history_output.render("table", defs, found, tables=True).splitlines()
    assert "shop.b" in table[2] and '{"id":1,"status":"paid","note":null}' in table[2]
    assert "shop.a" in table[3] and '{"id":1,"status":2}' in table[3] and table[-1] == "(2 versions)"
    oldest = history.select(output, history.Query(gtid="0-1-7", newest_first=False, limit=1))
    assert [r["table"] for r in oldest.rows()] == ["a"]
    csv_lines = history_output.render("csv", defs, found).splitlines()
    assert csv_lines[0].endswith('"after.id","after.status","after.note"'), csv_lines[0]
    assert csv_lines[1].endswith('"1","paid",') and csv_lines[2].endswith('"1","2",'), csv_lines


@pytest.mark.unit
def test_cut_members_keep_a_json_null_document_apart_from_sql_null() -> None:
    from mysqlcapture_compaction.values import raw_members

    image = '{"id":1,"j":null,"k":null,"d":{"a": null}}'
    modes = ("json", "json", "json")
    assert raw_members(image, ("j", "k", "d"), modes) == ('{"id":1}', None, None, '{"a": null}')
    assert raw_members(image, ("j", "k", "d"), modes, json_null='["j"]') == ('{"id":1}', "null", None, '{"a": null}')
    assert raw_members(None, ("j",), ("json",), json_null='["j"]') is None


@pytest.mark.unit
def test_a_wide_decimal_is_cut_out_in_plain_notation_with_every_digit() -> None:
    from mysqlcapture_compaction.values import plain_decimal, raw_members

    image = '{"d":1.2345678901234567890123E-8,"z":0E-30,"n":-1.5,"x":null}'
    assert raw_members(image, ("d", "z", "n", "x"), ("decimal",) * 4) == (
        "{}", "0.000000012345678901234567890123", "0.000000000000000000000000000000", "-1.5", None,
    )  # fmt: skip
    assert plain_decimal("-1E-30") == "-0.000000000000000000000000000001"
    assert plain_decimal("12345678901234567890123456789012345678901234567890.5") == (
        "12345678901234567890123456789012345678901234567890.5"
    )
