"""File compaction of the change log: OPTIMIZE small files, VACUUM past retention but never what is uncompacted.

VACUUM only deletes files no longer in the newest snapshot (OPTIMIZE's inputs, whose rows live on in the
bin-packed files) and older than the retention. The retention is raised so that every file written by a commit
the last finished compaction has not read yet is kept, even if something else rewrote it meanwhile.
"""

from __future__ import annotations

import time

from delta.tables import DeltaTable
from deltalake import DeltaTable as RsTable
from pyspark.sql import SparkSession

# Commits that only rewrite or delete files: they bring no row the compaction has not seen.
_REWRITES = {"OPTIMIZE", "VACUUM START", "VACUUM END"}


def optimize(spark: SparkSession, path: str) -> int:
    """Bin-pack the table's small files; returns the number of files removed."""
    metrics = DeltaTable.forPath(spark, path).optimize().executeCompaction().first()
    return int(metrics["metrics"]["numFilesRemoved"]) if metrics else 0


def safe_retention_hours(changelog: str, *, configured_hours: float, compacted_version: int | None) -> float:
    """The retention VACUUM may use: the configured hours, or longer to keep every uncompacted commit's files."""
    if compacted_version is None:
        return float("inf")  # nothing compacted yet: remove nothing
    newer = [
        h
        for h in RsTable(changelog).history()
        if int(h.get("version", -1)) > compacted_version and h.get("operation") not in _REWRITES
    ]
    if not newer:
        return float(configured_hours)
    oldest = min(int(h["timestamp"]) for h in newer)
    age_hours = (time.time() * 1000 - oldest) / 3_600_000
    return max(float(configured_hours), age_hours + 1 / 60)


def vacuum(spark: SparkSession, changelog: str, *, configured_hours: float, compacted_version: int | None) -> float:
    """VACUUM the change log with `safe_retention_hours`; returns the retention used (inf: skipped)."""
    hours = safe_retention_hours(changelog, configured_hours=configured_hours, compacted_version=compacted_version)
    if hours != float("inf"):
        DeltaTable.forPath(spark, changelog).vacuum(hours)
    return hours
