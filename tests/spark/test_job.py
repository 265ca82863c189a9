"""One compaction run after another on small change logs written with the worker's own schema (no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from mysqlcapture_api.changelog import CHANGELOG_SCHEMA, PARTITION_BY, read_delta
from mysqlcapture_compaction import cli, history, job, lineage, targets, timeline
from mysqlcapture_compaction import output as layout
from pyspark.sql import SparkSession

from tests.spark.test_transforms import event

pytestmark = pytest.mark.spark


def append(uri: str, rows: list[dict[str, Any]]) -> None:
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=CHANGELOG_SCHEMA), mode="append", partition_by=PARTITION_BY)


def state(output: str) -> dict[str, dict[str, Any]]:
    rows = read_delta(targets.Target(output, "shop", "orders").path).to_pylist()
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
    assert lineage.renames(old, new) == expected


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
    assert job.run(spark, changelog=uri, output=output).events == 6
    assert state(output) == {
        "[1]": {"id": "1", "v": "b", "_cdc_order_key": 3},
        "[5]": {"id": "5", "v": "x", "_cdc_order_key": 4},
    }
    # The history's files have statistics of the columns its readers skip by, not of every image field. A history
    # written before that (here: its setting removed) gets it from its next write on.
    kept = targets.Target(output, "shop", "orders").history
    assert statistics(kept) == [{"pk_hash", "order_key", "ts"}]
    spark.sql(f"ALTER TABLE delta.`{kept}` UNSET TBLPROPERTIES ('delta.dataSkippingStatsColumns')")
    # The first insert written again under a later ordering key (same server, file, position, row index):
    # it must not bring back v=a. A genuinely new update follows it.
    append(uri, [{**first, "order_key": 10}, event(11, "update", 5, '{"id":5,"v":"z"}', '{"v":"x"}')])
    second = job.run(spark, changelog=uri, output=output)
    assert (second.start_key, second.end_key, second.events) == (6, 11, 2)
    assert "dropping 1 change-log events already compacted" in caplog.text
    assert state(output) == {
        "[1]": {"id": "1", "v": "b", "_cdc_order_key": 3},
        "[5]": {"id": "5", "v": "z", "_cdc_order_key": 11},
    }
    assert statistics(kept) == [{"pk_hash", "order_key", "ts"}] * 2
    assert versions(output, 1) == [
        (1, "insert", None, {"id": "1", "v": "a"}),
        (3, "update", {"id": "1", "v": "a"}, {"id": "1", "v": "b"}),
    ]
    assert versions(output, 2) == [
        (2, "insert", None, {"id": "2", "v": "x"}),
        (4, "update", {"id": "2", "v": "x"}, {"id": "5", "v": "x"}),  # listed under the old key too: the move shows
    ]
    assert job.run(spark, changelog=uri, output=output).events == 0


def test_a_change_log_written_before_partial_images_were_listed_compacts(spark: SparkSession, tmp_path: Path) -> None:
    """A change log without the `absent`, `json_null` and `old_json_null` columns (a worker from before them): its
    images are whole, and a JSON `null` in them is null."""
    uri, output = str(tmp_path / "changelog"), str(tmp_path / "compacted")
    older = pa.schema([f for f in CHANGELOG_SCHEMA if f.name not in ("absent", "json_null", "old_json_null")])
    rows = [event(1, "insert", 1, '{"id":1,"v":"a"}'), event(2, "update", 1, '{"id":1,"v":"b"}', '{"v":"a"}')]
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=older), mode="append", partition_by=PARTITION_BY)
    assert job.run(spark, changelog=uri, output=output).events == 2
    assert state(output) == {"[1]": {"id": "1", "v": "b", "_cdc_order_key": 2}}


def statistics(path: str) -> list[set[str]]:
    """The columns each data file of a Delta table has min/max statistics of, oldest file first."""
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    files = sorted(actions, key=lambda a: a["modification_time"])
    return [{k.removeprefix("min.") for k, v in a.items() if k.startswith("min.") and v is not None} for a in files]


def test_history_lists_the_versions_of_a_table_without_a_primary_key(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri, output = str(tmp_path / "changelog"), str(tmp_path / "compacted")

    def logged(order_key: int, kind: str, data: str, old: str | None = None) -> dict[str, Any]:
        keyless = {"primary_key": None, "primary_key_columns": None, "pk_hash": None}
        return event(order_key, kind, 0, data, old, table="logs", **keyless)

    append(
        uri,
        [
            logged(1, "insert", '{"msg":"a","n":1}'),
            logged(2, "insert", '{"msg":"a","n":1}'),  # an equal row
            event(3, "insert", 1, '{"id":1,"v":"x"}'),  # a keyed table beside it
            logged(4, "update", '{"msg":"b","n":1}', '{"msg":"a"}'),
            logged(5, "delete", '{"msg":"a","n":1}'),
        ],
    )
    job.run(spark, changelog=uri, output=output)
    found = history.row_history(output, database="shop", table="logs", pk=None)
    assert [(v["order_key"], v["type"], v["pk"]) for v in found] == [
        (1, "insert", None),
        (2, "insert", None),
        (4, "update", None),
        (5, "delete", None),
    ]
    assert (image(found[2]["before"]), image(found[2]["after"])) == ({"msg": "a", "n": "1"}, {"msg": "b", "n": "1"})
    late = history.row_history(output, database="shop", table="logs", pk=None, since=1_700_000_004)
    assert [v["order_key"] for v in late] == [4, 5]

    common = ["history", "--changelog", uri, "--output", output, "--table"]
    assert cli.main([*common, "shop.logs", "--since", "1700000004", "--format", "json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(v["order_key"], v["type"], v["pk"]) for v in listed] == [(5, "delete", None), (4, "update", None)]
    # A key names no row of a table without one.
    assert cli.main([*common, "shop.logs", "--pk", "1"]) == 2
    assert "shop.logs has no primary key" in capsys.readouterr().err
    # A keyed table: its every version, or one key's.
    assert cli.main([*common, "shop.orders"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "(1 version)"
    assert cli.main([*common, "shop.orders", "--pk", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[2] == "insert"


def snapshot_event(order_key: int, kind: str, pk: int | None = None, data: str | None = None) -> dict[str, Any]:
    """A snapshot's event as the worker writes it: its own identity (row_index = -order_key); markers carry no row."""
    row = event(order_key, kind, pk or 0, data, row_index=-order_key)
    if pk is None:
        row.update(primary_key=None, primary_key_columns=None, pk_hash=None)
    return row


def image(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """A history image without its (empty) `_cdc_raw`."""
    if found is None:
        return None
    assert found["_cdc_raw"] is None, found
    return {k: v for k, v in found.items() if k != "_cdc_raw"}


def versions(output: str, pk: int) -> list[tuple[int, str, dict[str, Any] | None, dict[str, Any] | None]]:
    found = history.row_history(output, database="shop", table="orders", pk=f"[{pk}]")
    return [(v["order_key"], v["type"], image(v["before"]), image(v["after"])) for v in found]


def test_snapshot_upserts_rows_and_a_resnapshot_drops_the_rows_it_does_not_resend(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, output = str(tmp_path / "changelog"), str(tmp_path / "compacted")
    # The initial snapshot into no target at all, then streaming.
    append(
        uri,
        [
            snapshot_event(1, "bootstrap-start"),
            snapshot_event(2, "bootstrap-insert", 1, '{"id":1,"v":"a"}'),
            snapshot_event(3, "bootstrap-insert", 2, '{"id":2,"v":"b"}'),
            snapshot_event(4, "bootstrap-insert", 3, '{"id":3,"v":"c"}'),
            snapshot_event(5, "bootstrap-complete"),
            event(6, "update", 2, '{"id":2,"v":"B"}', '{"v":"b"}'),
            event(7, "delete", 3, '{"id":3,"v":"c"}'),
        ],
    )
    assert job.run(spark, changelog=uri, output=output).events == 7
    assert state(output) == {
        "[1]": {"id": "1", "v": "a", "_cdc_order_key": 2},
        "[2]": {"id": "2", "v": "B", "_cdc_order_key": 6},
    }
    assert versions(output, 1) == [(2, "bootstrap-insert", None, {"id": "1", "v": "a"})]
    assert versions(output, 3) == [
        (4, "bootstrap-insert", None, {"id": "3", "v": "c"}),
        (7, "delete", {"id": "3", "v": "c"}, None),
    ]

    # Streaming adds 4 and 5; then, while not streaming, 1 and 4 are deleted on the source (binlogs purged), and
    # a re-snapshot at key 10 re-sends 2 and 5 only. An update of 5 read after the snapshot's view follows its
    # row; a delete of 4 the snapshot no longer holds is a no-op; 6 is inserted after the snapshot.
    append(
        uri,
        [
            event(8, "insert", 4, '{"id":4,"v":"d"}'),
            event(9, "insert", 5, '{"id":5,"v":"e"}'),
            snapshot_event(10, "bootstrap-start"),
            snapshot_event(11, "bootstrap-insert", 2, '{"id":2,"v":"B"}'),
            snapshot_event(12, "bootstrap-insert", 5, '{"id":5,"v":"e"}'),
            event(13, "update", 5, '{"id":5,"v":"E"}', '{"v":"e"}'),
            event(14, "delete", 4, '{"id":4,"v":"d"}'),
            snapshot_event(15, "bootstrap-complete"),
            event(16, "insert", 6, '{"id":6,"v":"f"}'),
        ],
    )
    expected = {
        "[2]": {"id": "2", "v": "B", "_cdc_order_key": 11},
        "[5]": {"id": "5", "v": "E", "_cdc_order_key": 13},
        "[6]": {"id": "6", "v": "f", "_cdc_order_key": 16},
    }
    # Killed after the re-snapshot's DELETE committed, before the MERGE: the rerun applies the rest, once.
    merge = targets.merge

    def killed(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(targets, "merge", killed)
    with pytest.raises(RuntimeError, match="killed"):
        job.run(spark, changelog=uri, output=output)
    assert state(output) == {}  # every row older than the snapshot gone, none re-sent yet
    assert layout.last_compacted(output) == 7
    assert targets.applied(targets.Target(output, "shop", "orders").path) == 10  # the DELETE's transaction
    monkeypatch.setattr(targets, "merge", merge)
    second = job.run(spark, changelog=uri, output=output)
    assert (second.start_key, second.end_key, second.events) == (7, 16, 9)
    assert state(output) == expected
    assert versions(output, 5) == [
        (9, "insert", None, {"id": "5", "v": "e"}),
        (12, "bootstrap-insert", None, {"id": "5", "v": "e"}),
        (13, "update", {"id": "5", "v": "e"}, {"id": "5", "v": "E"}),
    ]
    assert versions(output, 1) == [(2, "bootstrap-insert", None, {"id": "1", "v": "a"})]
    assert job.run(spark, changelog=uri, output=output).events == 0
    assert state(output) == expected

    # The snapshot markers (non-row events) are in the output's timeline, each once; a run reads those up to its
    # start from there, and from the change log only its new events (here: none older than 16 in the frame given).
    assert sorted(r["order_key"] for r in read_delta(layout.timeline_path(output)).to_pylist()) == [1, 5, 10, 15]
    markers = [snapshot_event(17, "bootstrap-start"), snapshot_event(18, "bootstrap-complete")]
    append(uri, [{**m, "table": "items"} for m in markers])  # another table's snapshot: the orders keep their rows
    found = timeline.read(spark.read.format("delta").load(uri).where("order_key > 16"), output, 16)
    assert [(r["order_key"], r["type"]) for r in found] == [
        (1, "bootstrap-start"),
        (5, "bootstrap-complete"),
        (10, "bootstrap-start"),
        (15, "bootstrap-complete"),
        (17, "bootstrap-start"),
        (18, "bootstrap-complete"),
    ]
    assert found[0].asDict() == {c: snapshot_event(1, "bootstrap-start")[c] for c in timeline.COLUMNS}

    # One run over the whole change log (every snapshot in one batch) ends in the same state.
    fresh = str(tmp_path / "fresh")
    assert job.run(spark, changelog=uri, output=fresh).events == 18
    assert state(fresh) == expected
    assert versions(fresh, 5) == versions(output, 5)
