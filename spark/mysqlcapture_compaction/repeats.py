"""Events the change log holds twice under different ordering keys (a resume from a heartbeat or a failover
re-emits what an earlier commit already held), found from the Delta log's statistics and dropped."""

from __future__ import annotations

import logging

import pyarrow as pa
from deltalake import DeltaTable as RsTable
from mysqlcapture_api.changelog import Col
from mysqlcapture_api.coordinates import Coordinate
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mysqlcapture_compaction import transforms
from mysqlcapture_compaction.targets import Target

log = logging.getLogger(__name__)


def not_compacted(
    spark: SparkSession, batch: DataFrame, output: str, *, start: int, tables: list[tuple[str, str]]
) -> DataFrame:
    """`batch` without the row events an earlier run already compacted under another ordering key (the same
    event identity written twice): dedupe across runs, as `transforms.dedupe` does within one.

    Only history versions with ordering key <= `start` count: the rest may be this batch's own, written by a
    killed run. History files are written run by run in binlog order, so the binlog_file filter lets Delta's
    file statistics skip all but the recent ones.
    """
    paths = [Target(output, db, t).history for db, t in tables]
    paths = [p for p in paths if RsTable.is_deltatable(p)]
    if start < 0 or not paths:
        return batch
    files = [r[Col.BINLOG_FILE] for r in batch.select(Col.BINLOG_FILE).distinct().collect()]
    seen = transforms.union(
        [
            spark.read.format("delta")
            .load(path)
            .where(F.col(Col.BINLOG_FILE).isin(files) & (F.col(Col.ORDER_KEY) <= start))
            .select(*transforms.IDENTITY)
            for path in paths
        ]
    )
    again = batch.select(*transforms.IDENTITY).join(seen, transforms.IDENTITY, "left_semi").distinct()
    again = again.persist(StorageLevel.MEMORY_AND_DISK)
    count = again.count()
    if count == 0:
        again.unpersist()
        return batch
    log.warning("dropping %d change-log events already compacted under an earlier ordering key", count)
    return batch.join(F.broadcast(again), transforms.IDENTITY, "left_anti")


def duplicates_possible(changelog: str, version: int, start: int) -> bool:
    """Whether the batch (ordering keys above `start`) can hold an event the change log already holds under a
    lower ordering key: a re-emission after a resume from a heartbeat or a failover.

    Decided from the Delta log's file statistics, no data read. An event and its repetition are rows of the same
    table partition from the same server; there, files in ordering-key order must move forward in the binlog. A
    file whose lowest (binlog file, position) is not past everything earlier files reached may repeat them (a
    transaction split across commits looks so too: the safe answer).
    """
    actions = pa.table(RsTable(changelog, version=version).get_add_actions(flatten=True)).to_pylist()
    # Delta's flattened file statistics of the change-log columns: "min.<column>", "max.<column>".
    lo = {c: f"min.{c}" for c in (Col.ORDER_KEY, Col.SERVER_ID, Col.BINLOG_FILE, Col.BINLOG_POS)}
    hi = {c: f"max.{c}" for c in (Col.ORDER_KEY, Col.SERVER_ID, Col.BINLOG_FILE, Col.BINLOG_POS)}
    if any(a.get(k) is None for a in actions for k in (*lo.values(), *hi.values())):
        return True
    reached: dict[tuple[int, str, str], Coordinate] = {}
    for a in sorted(actions, key=lambda a: (a[lo[Col.ORDER_KEY]], a[hi[Col.ORDER_KEY]])):
        server = int(a[lo[Col.SERVER_ID]])
        if server != int(a[hi[Col.SERVER_ID]]):
            return True
        where = (server, str(a.get(f"partition.{Col.DATABASE}")), str(a.get(f"partition.{Col.TABLE}")))
        low = Coordinate(str(a[lo[Col.BINLOG_FILE]]), int(a[lo[Col.BINLOG_POS]]))
        high = Coordinate(str(a[hi[Col.BINLOG_FILE]]), int(a[hi[Col.BINLOG_POS]]))
        # Parquet's min/max of the file names are by text, binlog order is by the file's number: across a change
        # of its width (.999999, .1000000) the text's minimum is the later file. Such statistics bound nothing.
        if Coordinate(low.file, 0) > Coordinate(high.file, 0):
            return True
        if int(a[hi[Col.ORDER_KEY]]) > start and where in reached and low <= reached[where]:
            return True
        reached[where] = max(reached.get(where, high), high)
    return False
