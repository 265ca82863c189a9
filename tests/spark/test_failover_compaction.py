"""Compaction of a change log that crossed a failover by heartbeat search with DDL after the heartbeat: the events
read again on the new server are typed by the definitions they were written under, so the compacted tables equal
the new primary's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mysqlcapture_compaction import job
from mysqlcapture_dev.embedded.server import PrivateServer
from pyspark.sql import SparkSession

from tests.integration.test_failover import ddl_after_heartbeat_failover
from tests.spark.compare import assert_state_equals_source, current_tables, source_tables

pytestmark = pytest.mark.spark


def test_compaction_across_a_heartbeat_failover_with_ddl_after_the_heartbeat(
    spark: SparkSession, tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    # Rows 6 to 8 last changed between the heartbeat and the rename: an image of columns the table no longer has.
    uri, _, replica = ddl_after_heartbeat_failover(tmp_path, start_source, touch_all=False)
    output = str(tmp_path / "compacted")
    job.run(spark, changelog=uri, output=output)
    conn = replica.connect()
    try:
        compared = assert_state_equals_source(current_tables(output), source_tables(conn, ["fod"]))
    finally:
        conn.close()
    assert compared >= 3 * 20 + 3 * 3, compared  # fod.t: 20 rows of 3 columns; fod.u: 3 rows of 3
