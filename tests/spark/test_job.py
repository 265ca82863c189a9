"""One compaction run after another on small change logs written with the worker's own schema (no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from mysqlcapture_compaction import history, job
from mysqlcapture_worker.sinks.delta import CHANGELOG_SCHEMA, PARTITION_BY
from pyspark.sql import SparkSession

from tests.spark.test_transforms import event

pytestmark = pytest.mark.spark


def append(uri: str, rows: list[dict[str, Any]]) -> None:
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=CHANGELOG_SCHEMA), mode="append", partition_by=PARTITION_BY)


def state(output: str) -> dict[str, dict[str, Any]]:
    rows = DeltaTable(job.Target(output, "shop", "orders").path).to_pyarrow_table().to_pylist()
    return {r["_cdc_pk"]: {k: r[k] for k in ("id", "v", "_cdc_order_key")} for r in rows}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (["id", "a", "b"], ["id", "x", "b"], {"x": "a"}),  # RENAME COLUMN a TO x
        (["id", "a", "b"], ["id", "b", "a"], {}),  # MODIFY b ... AFTER id: a move, not two renames
        (["id", "a", "b"], ["id", "b"], {}),  # DROP COLUMN a
        (["id", "a"], ["c", "id", "a"], {}),  # ADD COLUMN c FIRST
        (["id", "a", "b"], ["id", "b", "x"], {"x": "a"}),  # RENAME a TO x plus a move
    ],
    ids=["rename", "reorder", "drop", "add-first", "rename-and-move"],
)
def test_alter_renames_only_what_changed_name(old: list[str], new: list[str], expected: dict[str, str]) -> None:
    assert job.renames(old, new) == expected


def test_runs_order_by_key_move_keys_and_drop_events_compacted_before(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri, output = str(tmp_path / "changelog"), str(tmp_path / "compacted")
    first = event(1, "insert", 1, '{"id":1,"v":"a"}')
    # Written out of order on purpose: the ordering key decides, not the file order.
    append(
        uri,
        [
            event(3, "update", 1, '{"id":1,"v":"b"}', '{"v":"a"}'),
            event(4, "update", 5, '{"id":5,"v":"x"}', '{"id":2}'),  # primary key 2 -> 5: the row moves
            first,
            event(2, "insert", 2, '{"id":2,"v":"x"}'),
            event(5, "insert", 7, '{"id":7,"v":"gone"}'),
            event(6, "delete", 7, '{"id":7,"v":"gone"}'),
        ],
    )
    assert job.run(spark, changelog=uri, output=output, buckets=2).events == 6
    assert state(output) == {
        "[1]": {"id": "1", "v": "b", "_cdc_order_key": 3},
        "[5]": {"id": "5", "v": "x", "_cdc_order_key": 4},
    }
    # The first insert written again under a later ordering key (same server, file, position, row index):
    # it must not bring back v=a. A genuinely new update follows it.
    append(uri, [{**first, "order_key": 10}, event(11, "update", 5, '{"id":5,"v":"z"}', '{"v":"x"}')])
    second = job.run(spark, changelog=uri, output=output, buckets=2)
    assert (second.start_key, second.end_key, second.events) == (6, 11, 2)
    assert "dropping 1 change-log events already compacted" in caplog.text
    assert state(output) == {
        "[1]": {"id": "1", "v": "b", "_cdc_order_key": 3},
        "[5]": {"id": "5", "v": "z", "_cdc_order_key": 11},
    }
    path = job.history_path(output)
    one = history.row_history(path, database="shop", table="orders", pk="[1]", buckets=2)
    assert [(v["order_key"], v["type"], v["before"], v["after"]) for v in one] == [
        (1, "insert", None, '{"id":1,"v":"a"}'),
        (3, "update", '{"id":1,"v":"a"}', '{"id":1,"v":"b"}'),
    ]
    two = history.row_history(path, database="shop", table="orders", pk="[2]", buckets=2)
    assert [(v["order_key"], v["before"], v["after"]) for v in two] == [
        (2, None, '{"id":2,"v":"x"}'),
        (4, '{"id":2,"v":"x"}', '{"id":5,"v":"x"}'),  # listed under the old key too: the move shows
    ]
    assert job.run(spark, changelog=uri, output=output, buckets=2).events == 0
