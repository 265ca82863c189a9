"""One compaction run: the change log since the last run into typed row histories and current-state tables.

Reads the change log's newest snapshot from the ordering key the last finished run reached and replays its
non-row events in order (lifecycle.py), flushing each table's row events up to such an event before applying
it. A flush parses every row image once, typed by the definition it was written under, into the table's history
(versions.py), then reads the latest version per key back from it and MERGEs (or writes) the table's current
state (current_state.py; by_value.py for rows without a primary key). Each table records how far it is applied
(targets.py), so a rerun after a kill redoes only the rest.
Snapshots (Maxwell's bootstrap events): a bootstrap-insert is an upsert like an insert; a bootstrap-start of a
table at key k removes its rows last changed before k (the snapshot re-sends every row still there).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from deltalake import DeltaTable as RsTable
from mysqlcapture_api.changelog import Col
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mysqlcapture_compaction import output as layout
from mysqlcapture_compaction import referential, repeats, timeline, transforms
from mysqlcapture_compaction.current_state import CurrentState
from mysqlcapture_compaction.definitions import Definitions, marks_of
from mysqlcapture_compaction.lifecycle import Lifecycle
from mysqlcapture_compaction.plan import RunPlan, TableRows
from mysqlcapture_compaction.versions import Versions

log = logging.getLogger(__name__)
PARALLEL_FLUSHES = 4


@dataclass
class RunResult:
    """What a run did: change-log version read, ordering keys covered, events read, tables written."""

    changelog_version: int
    start_key: int
    end_key: int
    events: int
    tables: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run(spark: SparkSession, *, changelog: str, output: str | None = None) -> RunResult:
    """Compact what the change log holds beyond the last finished run. Safe to kill and rerun at any point."""
    started = time.monotonic()
    output = output or layout.default_output(changelog)
    version = RsTable(changelog).version()
    start = layout.last_compacted(output)
    log_df = spark.read.format("delta").option("versionAsOf", version).load(changelog)
    if Col.ABSENT not in log_df.columns:  # a change log written before the worker listed partial images' columns
        log_df = log_df.withColumn(Col.ABSENT, F.lit(None).cast("array<string>"))
    for marks in (Col.JSON_NULL, Col.OLD_JSON_NULL):  # before the worker told JSON null documents from SQL NULL
        if marks not in log_df.columns:
            log_df = log_df.withColumn(marks, F.lit(None).cast("string"))
    batch = log_df.where(F.col(Col.ORDER_KEY) > start)
    per_table = _per_table(batch)
    # Every non-row event of the change log (few): the schema timeline, and this batch's DDL.
    others = timeline.read(log_df, output, start)
    batch_ddl = timeline.first_of_each([e for e in others if e[Col.ORDER_KEY] > start])
    actions = batch.where(F.col(Col.TYPE).isin(*transforms.ACTION_TYPES)).orderBy(Col.ORDER_KEY).collect()
    ends = [r.high for r in per_table.values()] + [int(e[Col.ORDER_KEY]) for e in [*batch_ddl, *actions]]
    if not ends:
        return RunResult(version, start, start, 0, seconds=time.monotonic() - started)
    end = max(ends)
    count = sum(r.count for r in per_table.values()) + len(batch_ddl) + len(actions)
    if repeats.duplicates_possible(changelog, version, start):
        batch = transforms.dedupe(repeats.not_compacted(spark, batch, output, start=start, tables=list(per_table)))
        actions = batch.where(F.col(Col.TYPE).isin(*transforms.ACTION_TYPES)).orderBy(Col.ORDER_KEY).collect()
    defs = Definitions.load(changelog, marks_of(others))
    rows = per_table
    derived = referential.Expansion(spark, output, defs, start, batch_ddl).run(batch, actions)
    if derived is not None:
        # The row events the server did not log, compacted as if it had.
        batch = batch.unionByName(derived, allowMissingColumns=True)
        rows = _per_table(batch)
    plan = RunPlan(spark, batch, output, version, defs, batch_ddl, rows)
    versions = Versions(plan)
    current = CurrentState(plan, versions)
    lifecycle = Lifecycle(plan, versions, current)
    for event in batch_ddl:
        lifecycle.apply(event)
    # Every table's last stretch, several at once: on two cores most of a small table's write is waiting
    # (planning, the Delta log, the commit), which other tables' writes fill.
    with ThreadPoolExecutor(max_workers=PARALLEL_FLUSHES) as pool:
        tables = sorted({*rows, *plan.alters, *plan.pending})
        done = [pool.submit(current.flush, db, table, end) for db, table in tables]
        for future in done:
            future.result()
    timeline.keep(spark, log_df, output, others, end)
    layout.record_run(spark, output, version=version, start=start, end=end, events=count)
    result = RunResult(version, start, end, count, sorted(plan.written), time.monotonic() - started)
    log.info("compacted %s", result)
    return result


def _per_table(batch: DataFrame) -> dict[tuple[str, str], TableRows]:
    """Each table's row events in the batch (TableRows)."""
    row_events = batch.where(F.col(Col.TYPE).isin(*transforms.ROW_TYPES))
    found = (
        row_events.groupBy(Col.DATABASE, Col.TABLE)
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min(Col.ORDER_KEY).alias("low"),
            F.max(Col.ORDER_KEY).alias("high"),
            F.count(F.when(transforms.pk_moved(row_events), 1)).alias("moves"),
            F.count(F.when(F.col(Col.TYPE) == "update", 1)).alias("updates"),
            F.count(F.when(F.col(Col.PRIMARY_KEY).isNull(), 1)).alias("keyless"),
            F.count(Col.ABSENT).alias("partial"),
        )
        .collect()
    )
    return {
        (r[Col.DATABASE], r[Col.TABLE]): TableRows(
            int(r["n"]),
            int(r["low"]),
            int(r["high"]),
            int(r["moves"]),
            int(r["updates"]),
            int(r["keyless"]),
            int(r["partial"]),
        )
        for r in found
    }
