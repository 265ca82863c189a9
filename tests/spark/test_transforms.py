"""The compaction transforms on small change logs, compared exactly with chispa."""

from __future__ import annotations

from typing import Any

import pytest
from chispa import assert_df_equality
from mysqlcapture_compaction import images, transforms, values
from mysqlcapture_worker.models import pk_hash
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
def test_natural_text_and_before_images() -> None:
    image = '{"s":"é\\n","n":1e300,"b":true,"z":null,"j":["x","y"]}'
    names = ("s", "n", "b", "z", "j")
    assert values.raw_members(image, names, ("natural",) * 5) == ("{}", "é\n", "1e300", "true", None, '["x","y"]')
    assert values.raw_members(image, ("j", "s"), ("json", "json")) == (
        '{"n":1e300,"b":true,"z":null}',
        '["x","y"]',
        '"é\\n"',
    )
    assert values.before_image('{"id":2,"v":"new","w":1}', '{"id":1,"v":"old"}') == '{"id":1,"v":"old","w":1}'
    assert values.before_image('{"id":2}', None) == '{"id":2}'
    assert values.before_pk('{"a":2,"b":"x"}', '{"a":1}', '["a","b"]') == '[1,"x"]'


def test_dedupe_keeps_one_event_per_identity(spark: SparkSession) -> None:
    first = event(1, "insert", 1, '{"id":1}')
    again = {**first, "order_key": 7}  # the same event written twice, under a later ordering key
    other = event(2, "insert", 2, '{"id":2}')
    got = transforms.dedupe(frame(spark, [again, first, other]))
    assert_df_equality(got, frame(spark, [first, other]), ignore_row_order=True)


def test_row_changes_split_a_primary_key_move(spark: SparkSession) -> None:
    rows = [
        event(1, "insert", 1, '{"id":1,"v":"a"}'),
        event(2, "update", 5, '{"id":5,"v":"a"}', '{"id":1}'),  # id 1 -> 5
        event(3, "update", 5, '{"id":5,"v":"b"}', '{"v":"a"}'),
        event(4, "delete", 5, '{"id":5,"v":"b"}'),
    ]
    got = transforms.row_changes(frame(spark, rows)).select("order_key", "_pk", "_op")
    want = spark.createDataFrame(
        [(1, "[1]", "upsert"), (2, "[5]", "upsert"), (2, "[1]", "delete"), (3, "[5]", "upsert"), (4, "[5]", "delete")],
        "order_key long, _pk string, _op string",
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


def test_latest_image_per_key(spark: SparkSession) -> None:
    rows = [
        event(1, "insert", 1, '{"id":1,"v":"a"}'),
        event(2, "insert", 2, '{"id":2,"v":"x"}'),
        event(3, "update", 1, '{"id":1,"v":"b"}', '{"v":"a"}'),
        event(4, "update", 3, '{"id":3,"v":"x"}', '{"id":2}'),
    ]
    latest = transforms.latest(transforms.row_changes(frame(spark, rows)))
    state = latest.select(*images.typed(F.col("data"), None, ["id", "v"]), *transforms.meta_columns(), "_op")
    got = state.select("id", "v", "_cdc_pk", "_cdc_order_key", "_cdc_position", "_op")
    want = spark.createDataFrame(
        [
            ("1", "b", "[1]", 3, "b.000001:350", "upsert"),
            ("3", "x", "[2]", 4, "b.000001:450", "delete"),  # a delete's image is not written
            ("3", "x", "[3]", 4, "b.000001:450", "upsert"),
        ],
        "id string, v string, _cdc_pk string, _cdc_order_key long, _cdc_position string, _op string",
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)


def test_history_rows_list_every_version_and_moves_under_both_keys(spark: SparkSession) -> None:
    rows = [
        event(1, "insert", 1, '{"id":1,"v":"a","w":0}'),
        event(2, "update", 1, '{"id":1,"v":"b","w":0}', '{"v":"a"}'),
        event(3, "update", 9, '{"id":9,"v":"b","w":0}', '{"id":1}'),
        event(4, "delete", 9, '{"id":9,"v":"b","w":0}'),
    ]
    history = transforms.history_rows(frame(spark, rows), buckets=4)
    got = history.select("pk", "order_key", "type", "before", "after", "old")
    want = spark.createDataFrame(
        [
            ("[1]", 1, "insert", None, '{"id":1,"v":"a","w":0}', None),
            ("[1]", 2, "update", None, '{"id":1,"v":"b","w":0}', '{"v":"a"}'),
            ("[9]", 3, "update", None, '{"id":9,"v":"b","w":0}', '{"id":1}'),
            ("[1]", 3, "update", None, '{"id":9,"v":"b","w":0}', '{"id":1}'),
            ("[9]", 4, "delete", '{"id":9,"v":"b","w":0}', None, None),
        ],
        "pk string, order_key long, type string, before string, after string, old string",
    )
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
    hashes = {
        r["pk"]: (r["pk_hash"], r["bucket"]) for r in transforms.history_rows(frame(spark, rows), buckets=4).collect()
    }
    for pk, (digest, bucket) in hashes.items():
        assert digest == pk_hash("shop", "orders", pk)
        assert bucket == int(digest[:4], 16) % 4


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
def test_history_table_prints_one_line_per_version() -> None:
    from mysqlcapture_compaction import history

    rows = [
        {"order_key": 3, "ts": 0, "type": "insert", "binlog_file": "b.1", "event_pos": 9, "gtid": "0-1-3",
         "before": None, "after": '{"id":42}'},
        {"order_key": 8, "ts": 60, "type": "delete", "binlog_file": "b.1", "event_pos": 99, "gtid": None,
         "before": '{"id":42}', "after": None},
    ]  # fmt: skip
    lines = history.format_table(rows).splitlines()
    assert lines[0].split() == ["order_key", "time", "(UTC)", "type", "position", "gtid", "before", "after"]
    assert lines[2].split() == ["3", "1970-01-01", "00:00:00", "insert", "b.1:9", "0-1-3", '{"id":42}']
    assert lines[3].split() == ["8", "1970-01-01", "00:01:00", "delete", "b.1:99", '{"id":42}']
    assert history.parse_time("2024-01-01T00:00:00Z") == 1704067200
    assert history.parse_time("1704067200") == 1704067200
