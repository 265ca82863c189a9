"""A change log written before the `absent`, `json_null` and `old_json_null` columns existed: the worker's next commit
adds them, older rows read null."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from mysqlcapture_api.changelog import CHANGELOG_SCHEMA, CHECKPOINT_KEY, PARTITION_BY, VERSION_KEY, Col, read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.changes import EventFactory
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.sinks.delta import DeltaSink, events_to_arrow

ADDED = [Col.ABSENT, Col.JSON_NULL, Col.OLD_JSON_NULL]
OLD_SCHEMA = pa.schema([f for f in CHANGELOG_SCHEMA if f.name not in ADDED])


def _events() -> list:
    make = EventFactory(server_id=1, ts=1_700_000_000, binlog_file="mysql-bin.000001", binlog_pos=4, event_pos=4)
    whole = make.row(
        database="d", table="t", type="insert", pk_json="[1]", pk_columns=("id",), data_json='{"id":1,"v":2}',
        old_json=None,
    )  # fmt: skip
    partial = make.row(
        database="d", table="t", type="update", pk_json="[1]", pk_columns=("id",), data_json='{"id":1}',
        old_json="{}", absent=("v",), json_null='["j"]',
    )  # fmt: skip
    return [replace(whole, order_key=1), replace(partial, order_key=2, row_index=1, commit=True)]


def test_the_next_commit_adds_the_column_and_older_rows_read_null(tmp_path: Path) -> None:
    uri = str(tmp_path / "changelog")
    older = events_to_arrow(_events()[:1]).drop_columns(ADDED).cast(OLD_SCHEMA)
    # The older worker's commit: its rows, its application transaction and its checkpoint.
    first = Position(server_id=1, coordinate=Coordinate("mysql-bin.000001", 300), order_key=1)
    props = CommitProperties(
        custom_metadata={CHECKPOINT_KEY: first.to_json(), VERSION_KEY: "1"},
        app_transactions=[Transaction("mysqlcapture-upgrade", 1)],
    )
    write_deltalake(uri, older, mode="append", partition_by=PARTITION_BY, commit_properties=props)
    sink = DeltaSink(uri, app_id="mysqlcapture-upgrade")
    assert sink.load_checkpoint() == first
    sink.commit(_events()[1:], Position(server_id=1, coordinate=Coordinate("mysql-bin.000001", 400), order_key=2))
    assert [f.name for f in DeltaTable(uri).schema().fields] == CHANGELOG_SCHEMA.names
    rows = sorted(read_delta(uri).to_pylist(), key=lambda r: r[Col.ORDER_KEY])
    assert [(r[Col.ORDER_KEY], r[Col.ABSENT], r[Col.JSON_NULL]) for r in rows] == [(1, None, None), (2, ["v"], '["j"]')]
    # Later commits append with the schema as it now is.
    sink.commit(_events()[:1], Position(server_id=1, coordinate=Coordinate("mysql-bin.000001", 500), order_key=3))
    assert DeltaTable(uri).version() == 2
