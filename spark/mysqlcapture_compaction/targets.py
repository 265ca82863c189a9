"""Current-state Delta tables: exactly-once MERGE, rewrites after DDL, drops, each commit an application transaction.

Every commit to a target carries the transaction (APP_ID, k): "every change-log event with ordering key <= k is
in this table". Delta skips a write whose k is not above the recorded one, and the job reads k back to filter
what it still has to apply, so a run killed anywhere and run again applies each event exactly once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from delta.tables import DeltaTable
from deltalake import DeltaTable as RsTable
from deltalake.exceptions import TableNotFoundError
from mysqlcapture_api.changelog import Col
from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from mysqlcapture_compaction.images import RAW, RAW_TYPE
from mysqlcapture_compaction.multiset import MARK
from mysqlcapture_compaction.transforms import META

APP_ID = "mysqlcapture-compaction"
DROPPED = "mysqlcapture.dropped"  # a tombstone's reason: "true" (the source table was dropped) or NO_KEY
# The tombstone that outputs written before tables without a primary key were compacted by value (multiset.py)
# keep for such a table, until a reset (CREATE TABLE, a snapshot, a TRUNCATE) rebuilds it: its rows before
# then are not known.
NO_KEY = "no primary key"
_META_TYPES = {"_cdc_order_key": LongType(), "_cdc_ts": LongType()}


def no_key_fix(table: str) -> str:
    """What turns a `NO_KEY` tombstone of `table` (db.t) back into a table."""
    return (
        f"ALTER TABLE {table} ADD PRIMARY KEY (...) on the source, then `mysqlcapture resnapshot <manifest> --table "
        f"{table}`: the snapshot re-sends its rows with their key and the next compaction rebuilds it"
    )


@dataclass(frozen=True)
class Target:
    """One current-state table: <output>/tables/<database>/<table>."""

    output: str
    database: str
    table: str

    @property
    def path(self) -> str:
        return f"{self.output.rstrip('/')}/tables/{self.database}/{self.table}"

    @property
    def history(self) -> str:
        """The table's history: every version of every row, typed (<output>/history/<database>/<table>)."""
        return f"{self.output.rstrip('/')}/history/{self.database}/{self.table}"


def applied(path: str) -> int:
    """The ordering key up to which `path` holds every change (-1 when it does not exist or was never written)."""
    try:
        version = RsTable(path).transaction_version(APP_ID)
    except TableNotFoundError:
        return -1
    return -1 if version is None else int(version)


def is_dropped(path: str) -> bool:
    return dropped_for(path) is not None


def dropped_for(path: str) -> str | None:
    """Why `path` is a tombstone ("true": its table was dropped; NO_KEY), None when it holds a live table."""
    try:
        return RsTable(path).metadata().configuration.get(DROPPED)
    except TableNotFoundError:
        return "true"


def by_value(path: str) -> bool:
    """Whether the table's rows are matched by value (multiset.py: a table whose rows have no primary key)."""
    try:
        fields = RsTable(path).schema().fields
    except TableNotFoundError:
        return False
    return any(f.name == "_cdc_pk" and MARK.items() <= f.metadata.items() for f in fields)


def is_live(path: str) -> bool:
    """Whether `path` holds a table that is not a dropped table's tombstone."""
    return RsTable.is_deltatable(path) and not is_dropped(path)


# DML (MERGE, DELETE) takes its transaction from session confs, so each thread runs it in a session of its own
# (sharing the SparkContext and its static confs): several tables' MERGEs run at once, each with its own
# transaction. (A shared session behind a lock made the MERGEs of a run wait for one another: on two cores an
# incremental run of 8 tables took 5-10% longer, cold or warm.)
_OWN = threading.local()


def _session_of_thread(spark: SparkSession) -> SparkSession:
    """This thread's session for DML: a new session of `spark` (kept for the thread while `spark` is its parent)."""
    kept: tuple[SparkSession, SparkSession] | None = getattr(_OWN, "sessions", None)
    if kept is None or kept[0] is not spark:
        kept = _OWN.sessions = (spark, spark.newSession())
    return kept[1]


@contextmanager
def _txn(spark: SparkSession, key: int, note: dict[str, object]) -> Iterator[SparkSession]:
    """This thread's DML session, set so that the next Delta DML commit carries (APP_ID, key) and `note` as
    userMetadata."""
    own = _session_of_thread(spark)
    own.conf.set("spark.databricks.delta.write.txnAppId", APP_ID)
    own.conf.set("spark.databricks.delta.write.txnVersion", str(key))
    own.conf.set("spark.databricks.delta.commitInfo.userMetadata", json.dumps(note, sort_keys=True))
    try:
        yield own
    finally:
        for name in ("write.txnAppId", "write.txnVersion", "commitInfo.userMetadata"):
            own.conf.unset(f"spark.databricks.delta.{name}")


def schema_for(data: StructType) -> StructType:
    """A current-state table's schema: the source's typed columns, then the `_cdc_*` metadata and `_cdc_raw`."""
    fields = list(data.fields)
    fields += [StructField(m, _META_TYPES.get(m, StringType())) for m in META]
    return StructType([*fields, StructField(RAW, RAW_TYPE)])


def row_count(path: str) -> int:
    """How many rows the table holds, from the Delta log's file statistics (no data file is read)."""
    counts = pa.table(RsTable(path).get_add_actions(flatten=True)).column("num_records")
    return sum(int(n) for n in counts.to_pylist() if n is not None)


def data_columns(path: str) -> list[str]:
    """The table's source columns, in order (read from the Delta log, no Spark job)."""
    names = [f.name for f in RsTable(path).schema().fields]
    return [c for c in names if c not in META and c != RAW]


def overwrite(spark: SparkSession, path: str, rows: DataFrame, *, key: int | None, note: dict[str, object]) -> None:
    """Replace the table's rows and schema in one commit carrying (APP_ID, key) unless key is None.

    Deletion vectors on: a MERGE then marks the rows it replaces instead of rewriting every file it touches, so
    an incremental run costs what its new events cost, not what the table holds. Readers need the
    deletionVectors table feature (Spark with Delta 2.3+, delta-rs's query engine, DuckDB, Trino).
    """
    writer = rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    writer = writer.option("delta.enableDeletionVectors", "true")
    if key is not None:
        writer = writer.option("txnAppId", APP_ID).option("txnVersion", str(key))
    writer.option("userMetadata", json.dumps(note, sort_keys=True)).save(path)


def set_dropped(spark: SparkSession, path: str, dropped: bool, *, reason: str = "true") -> None:
    """Mark or unmark a tombstone (idempotent; set before the commit that carries the DDL's key)."""
    if dropped:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{DROPPED}' = '{reason}')")
    else:
        spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES IF EXISTS ('{DROPPED}')")


def create(spark: SparkSession, path: str, data: StructType, *, key: int, note: dict[str, object]) -> None:
    """An empty table with `data` columns (a CREATE, or replacing a dropped table of the same name)."""
    if RsTable.is_deltatable(path):
        set_dropped(spark, path, False)
    overwrite(spark, path, spark.createDataFrame([], schema_for(data)), key=key, note=note)


def drop(spark: SparkSession, path: str, *, key: int, note: dict[str, object], reason: str = "true") -> None:
    """A dropped table stays as an empty tombstone (deleting a directory is not atomic; this commit is)."""
    empty = spark.createDataFrame([], schema_for(StructType([])))
    if not RsTable.is_deltatable(path):
        overwrite(spark, path, empty, key=None, note=note)
    set_dropped(spark, path, True, reason=reason)
    overwrite(spark, path, empty, key=key, note=note)


def replace(spark: SparkSession, path: str, rows: DataFrame, *, key: int, note: dict[str, object]) -> None:
    """Replace the table's rows and schema with `rows` (materialised first: they may be read from `path`)."""
    if RsTable.is_deltatable(path):
        set_dropped(spark, path, False)
    overwrite(spark, path, rows, key=key, note=note)


def delete_older(spark: SparkSession, path: str, *, key: int, note: dict[str, object]) -> None:
    """Delete every row whose last change is older than `key` (a snapshot started at `key` re-sends the rest) in
    one commit carrying (APP_ID, key). Repeating it is harmless: after it, no row is older than `key`."""
    with _txn(spark, key, note) as own:
        DeltaTable.forPath(own, path).delete(F.col("_cdc_order_key") < F.lit(key))


def merge(spark: SparkSession, path: str, source: DataFrame, *, key: int, note: dict[str, object]) -> None:
    """Apply latest-per-key changes (`_op` upsert/delete, the table's own schema) with one MERGE carrying
    (APP_ID, key)."""
    columns = [c for c in source.columns if c != "_op"]
    assignments: dict[str, str | Column] = {f"`{c}`": f"s.`{c}`" for c in columns}
    with _txn(spark, key, note) as own:
        (
            DeltaTable.forPath(own, path)
            .alias("t")
            .merge(source.alias("s"), "t._cdc_pk = s._cdc_pk")
            .whenMatchedDelete("s._op = 'delete'")
            .whenMatchedUpdate(set=assignments)
            .whenNotMatchedInsert(condition="s._op = 'upsert'", values=assignments)
            .execute()
        )


# The history's file statistics: the columns its readers skip files by (a key's lookup: pk_hash; a time range:
# ts; a run's new versions: order_key). Statistics of every image field cost about 15% of a history write and
# skip nothing: a history file is sorted by key hash, so each image field spans its whole range in every file.
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
HISTORY_STATS = f"{Col.PK_HASH},{Col.ORDER_KEY},{Col.TS}"


def keep_history_stats(spark: SparkSession, path: str) -> None:
    """Give a history written before HISTORY_STATS (statistics of every column) those statistics from now on."""
    if RsTable(path).metadata().configuration.get(STATS_COLUMNS) != HISTORY_STATS:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{STATS_COLUMNS}' = '{HISTORY_STATS}')")


def _history_writer(rows: DataFrame, *, files: int, key: int, note: dict[str, object]) -> DataFrameWriter:
    """Versions in `files` files of disjoint key-hash ranges, each sorted by key hash: a key's lookup opens one
    file per write (the pk_hash min/max statistics) and reads few row groups; the commit carries (APP_ID, key).
    One file is written without a shuffle. A new history gets HISTORY_STATS."""
    spread = rows.repartitionByRange(files, Col.PK_HASH) if files > 1 else rows.coalesce(1)
    writer = spread.sortWithinPartitions(Col.PK_HASH, Col.ORDER_KEY).write.format("delta")
    writer = writer.option(STATS_COLUMNS, HISTORY_STATS)
    writer = writer.option("txnAppId", APP_ID).option("txnVersion", str(key))
    return writer.option("userMetadata", json.dumps(note, sort_keys=True))


def append_history(rows: DataFrame, path: str, *, files: int, key: int, note: dict[str, object]) -> None:
    """Append versions to a table's history (new image fields are added: Delta schema evolution)."""
    writer = _history_writer(rows, files=files, key=key, note=note)
    writer.mode("append").option("mergeSchema", "true").save(path)


def overwrite_history(rows: DataFrame, path: str, *, files: int, key: int, note: dict[str, object]) -> None:
    """Replace a table's history with `rows` (materialised first: they are read from `path`), new image type."""
    writer = _history_writer(rows, files=files, key=key, note=note)
    writer.mode("overwrite").option("overwriteSchema", "true").save(path)
