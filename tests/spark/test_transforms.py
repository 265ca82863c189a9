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
    meta = {"database": "shop", "table": "orders", "thread_id": 7, "xid": 11, "moved_away": False}
    rows = [
        {**meta, "order_key": 8, "ts": 60, "type": "delete", "binlog_file": "b.1", "event_pos": 99, "gtid": None,
         "pk": "[42]", "before": after, "after": None},
        {**meta, "order_key": 3, "ts": 0, "type": "insert", "binlog_file": "b.1", "event_pos": 9, "gtid": "0-1-3",
         "pk": "[42]", "before": None, "after": after},
    ]  # fmt: skip
    defs = {("shop", "orders"): table}
    lines = history_output.render("table", defs, rows).splitlines()
    assert lines[0].split()[:7] == ["time", "(UTC)", "type", "pk", "gtid", "position", "thread"]
    shown = '{"id":42,"total":1.50,"placed":"2024-01-02 03:04:05.120","tag":"AP8=","d":"0000-00-00","t":"-01:00:00"}'
    assert lines[3].split(None, 8) == ["1970-01-01", "00:00:00", "insert", "[42]", "0-1-3", "b.1:9", "7", "11", shown]
    assert lines[-1] == "(2 versions)"
    first = history_output.render("json", defs, rows).splitlines()[0]
    assert first.startswith('{"database":"shop","table":"orders","type":"delete","ts":60,"time":"1970-01-01 00:01:00"')
    assert '"pk":[42],"changed":null,"before":' + shown + ',"after":null}' in first
    csv_text = history_output.render("csv", defs, rows).splitlines()
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
        "DELETE FROM `s`.`t` WHERE `id` = 1 AND `f` = 0.10000000149011612 AND `j` = '{\"a\":1}' AND `note` IS NULL "
        "LIMIT 1;"
    )
    assert undo.statement({**made, "type": "bootstrap-insert"}, table, "mysql") is None


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "problem"),
    [("status", "expected `column = value`"), ("a = 'it's'", "unescaped '"), ("a LIKE 'x%'", "expected")],
)
def test_history_where_says_what_it_cannot_read(text: str, problem: str) -> None:
    from mysqlcapture_compaction import history_where

    with pytest.raises(history_where.WhereError, match=problem):
        history_where.parse(text)
