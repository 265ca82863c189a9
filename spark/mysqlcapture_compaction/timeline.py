"""The change log's non-row events (DDL, snapshot markers, truncates), in order: what a run replays (foreign-key
actions are not among them: they are expanded into row events, referential.py).

They are few, so the output keeps every one up to the last run's end (output.timeline_path); a run then reads
only the change log's new events, not the whole log's `type` column, to place every schema version.
"""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc
from mysqlcapture_api.changelog import Col, read_delta
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from mysqlcapture_compaction import targets, transforms
from mysqlcapture_compaction.output import timeline_path

# The columns of a non-row event a run needs: the DDL to replay, its identity, and where it sits.
COLUMNS = [
    Col.ORDER_KEY,
    Col.TYPE,
    Col.DATABASE,
    Col.TABLE,
    Col.DATA,
    Col.OLD,
    Col.SQL,
    *transforms.IDENTITY,
    Col.EVENT_POS,
    Col.TS,
    Col.GTID,
]


def read(log_df: DataFrame, output: str, start: int) -> list[Row]:
    """Every non-row event of the change log, in ordering-key order: those up to `start` from the timeline when it
    reaches that far (else, once, from the whole change log), the rest from the change log's new events."""
    path = timeline_path(output)
    others = log_df.where(~F.col(Col.TYPE).isin(*transforms.ROW_TYPES, *transforms.ACTION_TYPES)).select(*COLUMNS)
    if start < 0 or targets.applied(path) < start:
        return others.orderBy(Col.ORDER_KEY).collect()
    earlier = read_delta(path).filter(pc.less_equal(pc.field(Col.ORDER_KEY), start)).to_pylist()
    newer = others.where(F.col(Col.ORDER_KEY) > start).orderBy(Col.ORDER_KEY).collect()
    return [Row(**r) for r in sorted(earlier, key=lambda r: r[Col.ORDER_KEY])] + newer


def keep(spark: SparkSession, log_df: DataFrame, output: str, others: list[Row], end: int) -> None:
    """Append the events up to `end` the timeline lacks, in one commit carrying (APP_ID, end). Written by Spark,
    as every other table of the output (its object-store log store); `log_df` gives the columns' types."""
    path = timeline_path(output)
    kept = targets.applied(path)
    if kept >= end:
        return
    rows = [tuple(r[c] for c in COLUMNS) for r in others if kept < r[Col.ORDER_KEY] <= end]
    schema = log_df.select(*COLUMNS).schema
    writer = spark.createDataFrame(rows, schema).coalesce(1).write.format("delta").mode("append")
    writer.option("txnAppId", targets.APP_ID).option("txnVersion", str(end)).save(path)


def first_of_each(events: list[Row]) -> list[Row]:
    """Non-row events once per identity (the lowest ordering key: a re-emitted DDL is applied once)."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for e in events:
        identity = tuple(e[c] for c in transforms.IDENTITY)
        if identity not in seen:
            seen.add(identity)
            out.append(e)
    return out
