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


def _pk_moved(events: DataFrame) -> Column:
    """Updates whose `old` names a primary-key column: the row moved to another key (a cheap textual test)."""
    pk_cols = F.from_json("primary_key_columns", "array<string>")
    named = F.exists(pk_cols, lambda c: F.instr(F.col("old"), F.concat(F.lit('"'), c, F.lit('":'))) > 0)
    return (F.col("type") == "update") & F.col("old").isNotNull() & named


def row_changes(events: DataFrame) -> DataFrame:
    """Row events as changes to keys: `_pk` and `_op` ('upsert' or 'delete').

    An update that changes the primary key is two changes at one ordering key: a delete of the old key and an
    upsert of the new one.
    """
    rows = events.where(F.col("type").isin(*ROW_TYPES))
    kept = ["database", "table", "order_key", "ts", "gtid", "binlog_file", "event_pos", "data"]
    main = rows.select(
        *kept,
        F.col("primary_key").alias("_pk"),
        F.when(F.col("type") == "delete", "delete").otherwise("upsert").alias("_op"),
    )
    moved = (
        rows.where(_pk_moved(rows))
        .select(*kept, _before_pk("data", "old", "primary_key_columns").alias("_pk"), F.col("primary_key"))
        .where(F.col("_pk") != F.col("primary_key"))
        .select(*kept, "_pk", F.lit("delete").alias("_op"))
    )
    return main.unionByName(moved)


def latest(changes: DataFrame) -> DataFrame:
    """Per (database, table, _pk), the change with the greatest ordering key."""
    others = [c for c in changes.columns if c not in ("database", "table", "_pk", "order_key")]
    best = F.max(F.struct("order_key", *others)).alias("_s")
    return changes.groupBy("database", "table", "_pk").agg(best).select("database", "table", "_pk", "_s.*")


def meta_columns() -> list[Column]:
    """The `_cdc_*` metadata of a latest change: its key, ordering key, time, GTID and binlog position."""
    return [
        F.col("_pk").alias("_cdc_pk"),
        F.col("order_key").alias("_cdc_order_key"),
        F.col("ts").alias("_cdc_ts"),
        F.col("gtid").alias("_cdc_gtid"),
        F.concat_ws(":", "binlog_file", F.col("event_pos").cast("string")).alias("_cdc_position"),
    ]


def bucket(pk_hash: Column, buckets: int) -> Column:
    """The history index's partition of a key: the first 16 bits of its hash, modulo `buckets`."""
    return (F.conv(F.substring(pk_hash, 1, 4), 16, 10).cast("int") % F.lit(buckets)).cast("int")


def history_rows(events: DataFrame, *, buckets: int) -> DataFrame:
    """Every row event as versions of keys, with before and after images (seed 003's index).

    A primary-key change is listed under both keys, so either key's history shows the move.
    """
    rows = events.where(F.col("type").isin(*ROW_TYPES))
    # An update's full before image is `after` with `old` (the changed columns' previous values) put back:
    # history.row_history assembles it when read, which keeps a Python UDF off every update here.
    before = F.when(F.col("type") == "delete", F.col("data")).otherwise(F.lit(None).cast("string"))
    after = F.when(F.col("type") == "delete", F.lit(None).cast("string")).otherwise(F.col("data"))
    common: list[Column | str] = [
        "database",
        "table",
        "order_key",
        "type",
        "ts",
        "gtid",
        "server_id",
        "binlog_file",
        "binlog_pos",
        "event_pos",
        "row_index",
        before.alias("before"),
        after.alias("after"),
        "old",
    ]
    own = rows.select(F.col("primary_key").alias("pk"), "pk_hash", *common)
    moved = (
        rows.where(_pk_moved(rows))
        .withColumn("pk", _before_pk("data", "old", "primary_key_columns"))
        .where(F.col("pk") != F.col("primary_key"))
        .withColumn("pk_hash", _row_hash("database", "table", "pk"))
        .select("pk", "pk_hash", *common)
    )
    out = own.unionByName(moved)
    return out.withColumn("bucket", bucket(F.col("pk_hash"), buckets))
