"""Where a compaction output keeps what: the tables, their histories, the timeline and the record of runs."""

from __future__ import annotations

import time
from pathlib import Path

from mysqlcapture_api.changelog import read_delta
from pyspark.sql import SparkSession

from mysqlcapture_compaction import targets


def default_output(changelog: str) -> str:
    """Beside the change log: `<changelog>-compacted` (spec.compaction.outputUri overrides it)."""
    return changelog.rstrip("/") + "-compacted"


def history_path(output: str) -> str:
    """Where the tables' histories are: <output>/history/<database>/<table>."""
    return f"{output.rstrip('/')}/history"


def history_tables(output: str) -> list[Path]:
    """Every table's history (Delta tables under history_path)."""
    return sorted(p for p in Path(history_path(output)).glob("*/*") if (p / "_delta_log").is_dir())


def tables_of(output: str, database: str) -> set[str]:
    """The tables of `database` that have a current-state target."""
    folder = Path(f"{output.rstrip('/')}/tables/{database}")
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def runs_path(output: str) -> str:
    return f"{output.rstrip('/')}/_runs"


def timeline_path(output: str) -> str:
    """The change log's non-row events up to the last run's end (few: DDL, snapshot markers), kept so a run reads
    only the change log's new events, not the whole log's `type` column, to place every schema version."""
    return f"{output.rstrip('/')}/_timeline"


def last_compacted(output: str) -> int:
    """The ordering key every target is known to hold (the last finished run's end), -1 before the first."""
    return targets.applied(runs_path(output))


def last_compacted_version(output: str) -> int | None:
    """The change-log version the last finished run read, if any."""
    try:
        rows = read_delta(runs_path(output), ["changelog_version", "end_key"]).to_pylist()
    except Exception:  # no run yet
        return None
    return max((r["end_key"], r["changelog_version"]) for r in rows)[1] if rows else None


def record_run(spark: SparkSession, output: str, *, version: int, start: int, end: int, events: int) -> None:
    """The run's record, in one commit carrying (APP_ID, end): from here on `last_compacted` is `end`."""
    record = spark.createDataFrame(
        [(version, start, end, events, int(time.time()))],
        "changelog_version long, start_key long, end_key long, events long, finished_at long",
    )
    writer = record.write.format("delta").mode("append").option("txnAppId", targets.APP_ID)
    writer.option("txnVersion", str(end)).save(runs_path(output))
