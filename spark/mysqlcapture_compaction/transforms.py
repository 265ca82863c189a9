"""Pure DataFrame transforms of the change log: dedupe, per-key changes, latest image, state and history rows."""

from __future__ import annotations

from mysqlcapture_api.changelog import Col
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
from pyspark.sql.types import StringType

from mysqlcapture_compaction import values

# A snapshot's bootstrap-insert is an upsert of the full row, like an insert, and a version in the history.
ROW_TYPES = ("insert", "update", "delete", "bootstrap-insert")
# A foreign key's action the server did not log (the worker's event): expanded into row events (referential.py).
ACTION_TYPES = ("referential-action",)
IDENTITY = [Col.SERVER_ID, Col.BINLOG_FILE, Col.BINLOG_POS, Col.ROW_INDEX]
META = ["_cdc_pk", "_cdc_order_key", "_cdc_ts", "_cdc_gtid", "_cdc_position"]

# Lambdas, not the annotated functions: Spark would try (and warn about) inferring an Arrow UDF from type hints.
_before_pk = F.udf(lambda d, o, c: values.before_pk(d, o, c), StringType())
_row_hash = F.udf(lambda d, t, k: values.row_hash(d, t, k), StringType())


def dedupe(events: DataFrame) -> DataFrame:
    """One row per event identity (server_id, binlog_file, binlog_pos, row_index): the lowest ordering key."""
    first = Window.partitionBy(*IDENTITY).orderBy(Col.ORDER_KEY)
    return events.withColumn("_n", F.row_number().over(first)).where("_n = 1").drop("_n")


def pk_moved(events: DataFrame) -> Column:
    """Updates whose `old` names a primary-key column: the row moved to another key (a cheap textual test)."""
    pk_cols = F.from_json(Col.PRIMARY_KEY_COLUMNS, "array<string>")
    named = F.exists(pk_cols, lambda c: F.instr(F.col(Col.OLD), F.concat(F.lit('"'), c, F.lit('":'))) > 0)
    return (F.col(Col.TYPE) == "update") & F.col(Col.OLD).isNotNull() & named


def latest(changes: DataFrame) -> DataFrame:
    """Per key (`_pk`), the change with the greatest ordering key."""
    others = [c for c in changes.columns if c not in ("_pk", Col.ORDER_KEY)]
    # max_by, not max of a struct: images hold maps, which have no ordering. Ordering keys are unique per event.
    best = F.max_by(F.struct(Col.ORDER_KEY, *others), Col.ORDER_KEY).alias("_s")
    return changes.groupBy("_pk").agg(best).select("_pk", "_s.*")


def changes(versions: DataFrame) -> DataFrame:
    """A table's history versions (typed, history_rows' columns) as its latest change per key: `_pk`, the
    change's metadata, its after image and `_op` (a delete, or the old key of a primary-key change, deletes)."""
    deletes = (F.col(Col.TYPE) == "delete") | F.col(MOVED_AWAY)
    out = versions.select(
        F.col(PK).alias("_pk"),
        Col.ORDER_KEY,
        Col.TS,
        Col.GTID,
        Col.BINLOG_FILE,
        Col.EVENT_POS,
        "after",
        F.when(deletes, "delete").otherwise("upsert").alias("_op"),
    )
    return latest(out)


def meta_columns() -> list[Column]:
    """The `_cdc_*` metadata of a latest change: its key, ordering key, time, GTID and binlog position."""
    return [
        F.col("_pk").alias("_cdc_pk"),
        F.col(Col.ORDER_KEY).alias("_cdc_order_key"),
        F.col(Col.TS).alias("_cdc_ts"),
        F.col(Col.GTID).alias("_cdc_gtid"),
        F.concat_ws(":", Col.BINLOG_FILE, F.col(Col.EVENT_POS).cast("string")).alias("_cdc_position"),
    ]


# A history version's own columns, beside the change-log columns it carries (Col.*).
PK = "pk"  # the key the version is listed under: the change log's primary_key, or the old key of a move
MOVED_AWAY = "moved_away"  # the version took the row away from this key (a primary-key change)

HISTORY_META = [
    PK,
    Col.PK_HASH,
    MOVED_AWAY,
    Col.ORDER_KEY,
    Col.TYPE,
    Col.TS,
    Col.GTID,
    Col.SERVER_ID,
    Col.BINLOG_FILE,
    Col.BINLOG_POS,
    Col.EVENT_POS,
    Col.ROW_INDEX,
    Col.THREAD_ID,
    Col.XID,
]


# The Spark type of each HISTORY_META column (the change log's types; the history's own: a string key, a flag).
HISTORY_META_TYPES = {
    **dict.fromkeys(
        [Col.ORDER_KEY, Col.TS, Col.SERVER_ID, Col.BINLOG_POS, Col.EVENT_POS, Col.ROW_INDEX, Col.THREAD_ID, Col.XID],
        "bigint",
    ),
    MOVED_AWAY: "boolean",
}


def history_meta(versions: DataFrame) -> list[Column]:
    """HISTORY_META of a history's versions; a history written before a column was added to it (thread_id and xid)
    gives nulls for it."""
    return [
        F.col(c) if c in versions.columns else F.lit(None).cast(HISTORY_META_TYPES.get(c, "string")).alias(c)
        for c in HISTORY_META
    ]


def row_hash(database: Column, table: Column, pk: Column) -> Column:
    """The change log's `pk_hash` of a row's key (a Python UDF: the worker's digest)."""
    return _row_hash(database, table, pk)


def history_rows(events: DataFrame, *, moves: bool = True) -> DataFrame:
    """One table's row events as versions of keys (HISTORY_META, then the raw `data` and `old` images and the
    columns they leave out), typed by images.version_images afterwards.

    A primary-key change is listed under both keys, so either key's history shows the move; under the old key
    `moved_away` is true (that version took the row away from it). Without `moves` (the caller knows no update
    changes a primary key) that second listing is not looked for: it costs a second scan and Python UDFs.
    """
    rows = events.where(F.col(Col.TYPE).isin(*ROW_TYPES))
    common = [c for c in HISTORY_META if c not in (PK, Col.PK_HASH, MOVED_AWAY)] + [Col.DATA, Col.OLD]
    common += [c for c in (Col.ABSENT, Col.JSON_NULL, Col.OLD_JSON_NULL) if c in events.columns]
    own = rows.select(F.col(Col.PRIMARY_KEY).alias(PK), Col.PK_HASH, F.lit(False).alias(MOVED_AWAY), *common)
    if not moves:
        return own
    moved = (
        rows.where(pk_moved(rows))
        .withColumn(PK, _before_pk(Col.DATA, Col.OLD, Col.PRIMARY_KEY_COLUMNS))
        .where(F.col(PK) != F.col(Col.PRIMARY_KEY))
        .withColumn(Col.PK_HASH, _row_hash(Col.DATABASE, Col.TABLE, PK))
        .select(PK, Col.PK_HASH, F.lit(True).alias(MOVED_AWAY), *common)
    )
    return own.unionByName(moved)


def union(parts: list[DataFrame]) -> DataFrame:
    """The rows of every part, matched by column name."""
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def materialized(frame: DataFrame) -> DataFrame:
    """`frame` computed once (a local checkpoint), as a relation of its own that carries no size estimate.

    A checkpoint keeps the optimizer's size estimate of the plan that made it, and a join's estimate is the product
    of its inputs': chained through rounds of joins (the foreign-key expansion's levels), the estimates' digits grow
    geometrically until the optimizer's own arithmetic fills the driver's heap. The relation made here is estimated
    as any relation of unknown size is, afresh.
    """
    done = frame.localCheckpoint()
    session = done.sparkSession
    fresh = session._jsparkSession.createDataFrame(done._jdf.rdd(), done._jdf.schema())
    return ClassicDataFrame(fresh, session)
