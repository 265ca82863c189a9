"""Tables without a primary key compacted as multisets (multiset.py), on small DataFrames: counts follow the
versions in ordering-key order, removals of rows the table was not known to hold remove nothing, equal values
share a hash and differing ones (by a microsecond, by `_cdc_raw`) do not."""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

import pytest
from mysqlcapture_compaction import multiset
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark

COLUMNS = ["a", "b"]
VERSION = "a int, b string, _cdc_order_key long, _cdc_ts long, _cdc_gtid string, _cdc_position string, " \
    "_cdc_raw map<string,string>, _d int"  # fmt: skip


def _versions(spark: SparkSession, *steps: tuple[int, int, str | None, int]) -> DataFrame:
    """(ordering key, a, b, +1/-1) each, as the sides of history versions."""
    rows = [(a, b, key, 1000 + key, None, f"f:{key}", None, d) for key, a, b, d in steps]
    return spark.createDataFrame(rows, VERSION)


def _held(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(
        [(r["_cdc_pk"], r["_cdc_order_key"]) for r in rows], "_cdc_pk string, _cdc_order_key long"
    )


def _apply(spark: SparkSession, held: list[dict[str, Any]], versions: DataFrame) -> list[dict[str, Any]]:
    """`held` rows after the changes multiset.changes gives (as a MERGE applies them)."""
    steps = multiset.steps(versions, COLUMNS)
    changes = multiset.changes(steps, _held(spark, held) if held else None, COLUMNS).collect()
    gone = {r["_cdc_pk"] for r in changes if r["_op"] == "delete"}
    added = [r.asDict() for r in changes if r["_op"] == "upsert"]
    assert all(r["_cdc_pk"] in {h["_cdc_pk"] for h in held} for r in changes if r["_op"] == "delete")
    return [r for r in held if r["_cdc_pk"] not in gone] + added


def _bag(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter((r["a"], r["b"]) for r in rows)


def test_counts_follow_inserts_deletes_and_updates_of_equal_rows(spark: SparkSession) -> None:
    first = _versions(
        spark,
        (1, 1, "x", 1), (2, 1, "x", 1), (3, 2, "y", 1),  # two equal rows, another
        (4, 1, "x", -1), (4, 1, "z", 1),  # an update of one of the two: x once, z once
        (5, 3, None, 1), (6, 3, None, -1),  # inserted and deleted within the batch
    )  # fmt: skip
    held = _apply(spark, [], first)
    assert _bag(held) == Counter({(1, "x"): 1, (1, "z"): 1, (2, "y"): 1})
    assert len({r["_cdc_pk"] for r in held}) == 3
    z = next(r for r in held if r["b"] == "z")
    assert (z["_cdc_order_key"], z["_cdc_ts"], z["_cdc_position"]) == (4, 1004, "f:4")
    assert z["_cdc_pk"].endswith("#4.1") and len(z["_cdc_pk"].split("#")[0]) == 64
    second = _versions(
        spark,
        (7, 1, "x", 1), (8, 1, "x", 1), (9, 1, "x", -1),  # x: 1 + 2 - 1 = 2
        (10, 2, "y", -1), (11, 2, "y", -1),  # y: the second delete removes a row not held
        (12, 1, "z", -1), (12, 1, "z", 1),  # an update to its own value keeps the row
    )  # fmt: skip
    held = _apply(spark, held, second)
    assert _bag(held) == Counter({(1, "x"): 2, (1, "z"): 1})
    assert len({r["_cdc_pk"] for r in held}) == 3


def test_removals_of_rows_not_held_remove_nothing_and_later_inserts_count(spark: SparkSession) -> None:
    """A capture that started after the rows were written: a delete of one, then an insert of its value."""
    held = _apply(spark, [], _versions(spark, (1, 5, "v", -1), (2, 5, "v", 1), (3, 6, "w", -1)))
    assert _bag(held) == Counter({(5, "v"): 1})


def test_values_differing_by_a_microsecond_or_their_raw_text_hash_apart(spark: SparkSession) -> None:
    at = datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
    rows = [
        (at, None),
        (at + datetime.timedelta(microseconds=1), None),
        (None, {"t": "0000-00-00 00:00:00"}),
        (None, None),
        (at, None),
    ]
    df = spark.createDataFrame(rows, "t timestamp_ntz, _cdc_raw map<string,string>")
    hashes = [r["h"] for r in df.select(multiset.value_hash(["t"]).alias("h")).collect()]
    assert len(set(hashes)) == 4 and hashes[0] == hashes[4]


def test_rekeyed_keeps_each_rows_instance_id(spark: SparkSession) -> None:
    keyed = spark.createDataFrame(
        [("[1]", 1, "x", None), ("[2]", 1, "x", None)], "_cdc_pk string, a int, b string, _cdc_raw map<string,string>"
    )
    again = multiset.rekeyed(keyed, COLUMNS, by_value=False).collect()
    assert [r["_cdc_pk"].split("#", 1)[1] for r in again] == ["[1]", "[2]"]
    assert again[0]["_cdc_pk"].split("#")[0] == again[1]["_cdc_pk"].split("#")[0]
    renamed = keyed.withColumn("b", F.lit("y")).withColumn("_cdc_pk", F.concat(F.lit("h#"), F.col("_cdc_pk")))
    moved = multiset.rekeyed(renamed, COLUMNS, by_value=True)
    assert moved.schema["_cdc_pk"].metadata == multiset.MARK
    assert [r["_cdc_pk"].split("#", 1)[1] for r in moved.collect()] == ["[1]", "[2]"]
