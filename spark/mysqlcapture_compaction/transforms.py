"""Pure DataFrame transforms of the change log: dedupe, per-key changes, latest image, state and history rows."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from mysqlcapture_compaction import values

# A snapshot's bootstrap-insert is an upsert of the full row, like an insert, and a version in the history.
ROW_TYPES = ("insert", "update", "delete", "bootstrap-insert")
IDENTITY = ["server_id", "binlog_file", "binlog_pos", "row_index"]
META = ["_cdc_pk", "_cdc_order_key", "_cdc_ts", "_cdc_gtid", "_cdc_position"]

# Lambdas, not the annotated functions: Spark would try (and warn about) inferring an Arrow UDF from type hints.
_before_pk = F.udf(lambda d, o, c: values.before_pk(d, o, c), StringType())
_row_hash = F.udf(lambda d, t, k: values.row_hash(d, t, k), StringType())


def dedupe(events: DataFrame) -> DataFrame:
    """One row per event identity (server_id, binlog_file, binlog_pos, row_index): the lowest ordering key."""
    first = Window.partitionBy(*IDENTITY).orderBy("order_key")
    return events.withColumn("_n", F.row_number().over(first)).where("_n = 1").drop("_n")


def pk_moved(events: DataFrame) -> Column:
    """Updates whose `old` names a primary-key column: the row moved to another key (a cheap textual test)."""
    pk_cols = F.from_json("primary_key_columns", "array<string>")
    named = F.exists(pk_cols, lambda c: F.instr(F.col("old"), F.concat(F.lit('"'), c, F.lit('":'))) > 0)
    return (F.col("type") == "update") & F.col("old").isNotNull() & named


def latest(changes: DataFrame) -> DataFrame:
    """Per key (`_pk`), the change with the greatest ordering key."""
    others = [c for c in changes.columns if c not in ("_pk", "order_key")]
    # max_by, not max of a struct: images hold maps, which have no ordering. Ordering keys are unique per event.
    best = F.max_by(F.struct("order_key", *others), "order_key").alias("_s")
    return changes.groupBy("_pk").agg(best).select("_pk", "_s.*")


def changes(versions: DataFrame) -> DataFrame:
    """A table's history versions (typed, history_rows' columns) as its latest change per key: `_pk`, the
    change's metadata, its after image and `_op` (a delete, or the old key of a primary-key change, deletes)."""
    deletes = (F.col("type") == "delete") | F.col("moved_away")
    out = versions.select(
        F.col("pk").alias("_pk"),
        "order_key",
        "ts",
        "gtid",
        "binlog_file",
        "event_pos",
        "after",
        F.when(deletes, "delete").otherwise("upsert").alias("_op"),
    )
    return latest(out)


def meta_columns() -> list[Column]:
    """The `_cdc_*` metadata of a latest change: its key, ordering key, time, GTID and binlog position."""
    return [
        F.col("_pk").alias("_cdc_pk"),
        F.col("order_key").alias("_cdc_order_key"),
        F.col("ts").alias("_cdc_ts"),
        F.col("gtid").alias("_cdc_gtid"),
        F.concat_ws(":", "binlog_file", F.col("event_pos").cast("string")).alias("_cdc_position"),
    ]


HISTORY_META = [
    "pk",
    "pk_hash",
    "moved_away",
    "order_key",
    "type",
    "ts",
    "gtid",
    "server_id",
    "binlog_file",
    "binlog_pos",
    "event_pos",
    "row_index",
]


def history_rows(events: DataFrame, *, moves: bool = True) -> DataFrame:
    """One table's row events as versions of keys (HISTORY_META, then the raw `data` and `old` images), typed by
    images.version_images afterwards.

    A primary-key change is listed under both keys, so either key's history shows the move; under the old key
    `moved_away` is true (that version took the row away from it). Without `moves` (the caller knows no update
    changes a primary key) that second listing is not looked for: it costs a second scan and Python UDFs.
    """
    rows = events.where(F.col("type").isin(*ROW_TYPES))
    common = [c for c in HISTORY_META if c not in ("pk", "pk_hash", "moved_away")] + ["data", "old"]
    own = rows.select(F.col("primary_key").alias("pk"), "pk_hash", F.lit(False).alias("moved_away"), *common)
    if not moves:
        return own
    moved = (
        rows.where(pk_moved(rows))
        .withColumn("pk", _before_pk("data", "old", "primary_key_columns"))
        .where(F.col("pk") != F.col("primary_key"))
        .withColumn("pk_hash", _row_hash("database", "table", "pk"))
        .select("pk", "pk_hash", F.lit(True).alias("moved_away"), *common)
    )
    return own.unionByName(moved)
