"""The schema history in a local Delta table: round trip, chains of deltas, and crash idempotency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.ddl import apply_ddl
from mysqlcapture_api.schema.diff import apply_delta, diff
from mysqlcapture_api.schema.history import ARROW_SCHEMA, SchemaHistory, SchemaHistoryError
from mysqlcapture_api.schema.schema import Schema
from mysqlcapture_worker.schema.state import SchemaState

pytestmark = pytest.mark.unit  # a local Delta table, no server

FILE = "mysql-bin.000003"
WHERE: dict[str, Any] = {"server_id": 7, "gtid": None}


def _schemas(*statements: str) -> list[Schema]:
    """The schema before and after each statement, starting from a captured `shop` database."""
    schema = Schema.empty().with_database("shop", "latin1")
    out = [schema]
    for sql in statements:
        schema = apply_ddl(schema, sql, "shop").schema
        out.append(schema)
    return out


STATEMENTS = (
    "CREATE TABLE orders (id int PRIMARY KEY, note varchar(10), e enum('a''b','c,d'))",
    "ALTER TABLE orders ADD total decimal(10,2) AFTER id, MODIFY note text CHARSET utf8mb4",
    "CREATE DATABASE other CHARACTER SET utf8mb4",
    "RENAME TABLE orders TO other.orders2",
    "ALTER DATABASE shop CHARACTER SET utf8mb4",
    "CREATE TABLE t2 (a json, b point)",
    "DROP DATABASE other",
)
STEPS = _schemas(*STATEMENTS)
# The last heartbeat read before each statement: 1 and 2 after heartbeat 1000, 3 to 6 after heartbeat 2000.
BEATS = (None, 1000, 1000, 2000, 2000, 2000, 2000)


def _record_all(history: SchemaHistory, steps: list[Schema], start: int = 0) -> list[int]:
    versions = []
    for i in range(start, len(steps) - 1):
        versions.append(
            history.record(
                base_version=i,
                before=steps[i],
                after=steps[i + 1],
                coordinate=Coordinate(FILE, 100 + i),
                last_heartbeat=1000 + i,
                sql=f"statement {i}",
                **WHERE,
            )
        )
    return versions


def test_round_trip_every_version(tmp_path: Path) -> None:
    history = SchemaHistory.open(str(tmp_path / "h"))
    assert history.latest_version() is None and history.entries() == []
    assert history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE) == 0
    assert _record_all(history, STEPS) == list(range(1, len(STEPS)))
    reopened = SchemaHistory.open(str(tmp_path / "h"))
    assert reopened.latest_version() == len(STEPS) - 1
    for version, expected in enumerate(STEPS):
        assert reopened.schema_at(version) == expected
    entries = reopened.entries()
    assert [(e.version, e.base_version, e.kind) for e in entries[:2]] == [
        (0, None, "capture"),
        (1, 0, "delta"),
    ]
    assert (entries[1].coordinate, entries[1].last_heartbeat, entries[1].sql) == (
        Coordinate(FILE, 100),
        1000,
        "statement 0",
    )
    # Deltas carry table definitions, not SQL: the table created by statement 0 is in its payload.
    assert entries[1].payload["tables_set"][0]["name"] == "orders"


def test_rerecording_a_version_after_a_crash_leaves_one_entry(tmp_path: Path) -> None:
    uri = str(tmp_path / "h")
    history = SchemaHistory.open(uri)
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    _record_all(history, STEPS[:4])  # versions 1..3 written; say the change log only checkpointed version 1
    # The worker restarts from the checkpoint at version 1 and meets the same DDL again.
    again = SchemaHistory.open(uri)
    assert (
        again.record(
            base_version=1,
            before=STEPS[1],
            after=STEPS[2],
            coordinate=Coordinate(FILE, 101),
            last_heartbeat=None,
            sql="statement 1",
            **WHERE,
        )
        == 2
    )
    assert [e.version for e in again.entries()] == [0, 1, 2]  # version 3 of the crashed run is gone
    assert (
        again.record(
            base_version=1,
            before=STEPS[1],
            after=STEPS[2],
            coordinate=Coordinate(FILE, 101),
            last_heartbeat=None,
            sql="statement 1",
            **WHERE,
        )
        == 2
    )
    assert [e.version for e in again.entries()] == [0, 1, 2]
    assert again.schema_at(2) == STEPS[2]
    _record_all(again, STEPS, start=2)
    assert [e.version for e in again.entries()] == list(range(len(STEPS)))
    assert again.schema_at(len(STEPS) - 1) == STEPS[-1]


def test_truncate_after_the_checkpoint(tmp_path: Path) -> None:
    uri = str(tmp_path / "h")
    history = SchemaHistory.open(uri)
    history.truncate_after(3)  # no table yet: nothing to do
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    _record_all(history, STEPS)
    commits = DeltaTable(uri).version()
    history.truncate_after(len(STEPS))  # nothing past it: no commit
    assert DeltaTable(uri).version() == commits
    history.truncate_after(2)
    assert history.latest_version() == 2 and history.schema_at(2) == STEPS[2]
    with pytest.raises(SchemaHistoryError, match="no version 5"):
        history.schema_at(5)


def test_new_capture_replaces_the_whole_history(tmp_path: Path) -> None:
    history = SchemaHistory.open(str(tmp_path / "h"))
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    _record_all(history, STEPS)
    history.initial(STEPS[3], coordinate=Coordinate(FILE, 999), **WHERE)
    assert [e.version for e in history.entries()] == [0] and history.schema_at(0) == STEPS[3]


def test_merge_point_continues_the_chain_on_another_server(tmp_path: Path) -> None:
    history = SchemaHistory.open(str(tmp_path / "h"))
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    _record_all(history, STEPS[:3])
    merged = history.merge(
        base_version=2,
        server_id=8,
        coordinate=Coordinate("other-bin.000001", 44),
        gtid="0-8-1",
        last_heartbeat=5000,
    )
    assert merged == 3 and history.schema_at(3) == STEPS[2]
    last = history.entries()[-1]
    assert (last.server_id, last.coordinate, last.gtid, last.kind) == (
        8,
        Coordinate("other-bin.000001", 44),
        "0-8-1",
        "merge",
    )


def _apply_all(state: SchemaState) -> list[int]:
    versions = []
    for i, sql in enumerate(STATEMENTS):
        state.apply(sql, default_db="shop", coordinate=Coordinate(FILE, 100 + i), last_heartbeat=BEATS[i], **WHERE)
        versions.append(state.version)
    return versions


def test_the_version_in_force_at_a_heartbeat(tmp_path: Path) -> None:
    history = SchemaHistory.open(str(tmp_path / "h"))
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    assert _apply_all(SchemaState(history, STEPS[0], 0)) == list(range(1, len(STEPS)))
    # Version v is the schema after statement v-1, recorded after heartbeat BEATS[v-1].
    assert history.version_before_heartbeat(7, 2000) == 3
    assert history.version_before_heartbeat(7, 1000) == 1
    assert history.version_before_heartbeat(7, 3000) == 7  # no DDL after that heartbeat
    assert history.version_before_heartbeat(2, 1000) == 1
    assert history.version_before_heartbeat(1, 1000) == 1
    with pytest.raises(SchemaHistoryError, match="has no version 9"):
        history.version_before_heartbeat(9, 1000)


def test_a_heartbeat_failover_merges_onto_the_schema_at_the_heartbeat(tmp_path: Path) -> None:
    """The new server's stream starts again at the heartbeat: its DDL is applied again, to the schema it was first
    applied to, under versions after every one the change log names (a failed test: RENAME COLUMN of a column the
    checkpoint's schema had already renamed)."""
    history = SchemaHistory.open(str(tmp_path / "h"))
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    state = SchemaState(history, STEPS[0], 0)
    _apply_all(state)
    merged = state.merge(
        server_id=8, coordinate=Coordinate("other-bin.000001", 44), gtid=None, last_heartbeat=2000, from_heartbeat=True
    )
    assert merged == 8 and state.current == STEPS[3] and history.schema_at(8) == STEPS[3]
    last = history.entries()[-1]
    assert (last.version, last.base_version, last.kind, last.server_id) == (8, 3, "merge", 8)
    assert [e.version for e in history.entries()] == list(range(9)), "the versions the change log names stay"
    # Statements 3 to 6, and every event before the last of them, are in the change log already.
    assert state.replay == STATEMENTS[3:] and state.replaying
    for i in range(3, len(STATEMENTS)):  # read again on the new server
        assert state.replaying
        state.apply(
            STATEMENTS[i],
            default_db="shop",
            server_id=8,
            coordinate=Coordinate("other-bin.000001", 50 + i),
            gtid=None,
            last_heartbeat=2000,
        )
        assert state.replay == STATEMENTS[i + 1 :]
        # A restart from a checkpoint here knows as much from the history alone.
        assert SchemaState(SchemaHistory.open(str(tmp_path / "h")), state.current, state.version).replay == state.replay
    assert not state.replaying
    assert state.version == 12 and state.current == STEPS[-1] and history.schema_at(12) == STEPS[-1]
    # A GTID failover (no stream read again) merges onto the schema in force.
    assert state.merge(server_id=9, coordinate=Coordinate("third.000001", 4), gtid=None, last_heartbeat=2000) == 13
    assert history.schema_at(13) == STEPS[-1]


def _read_again(state: SchemaState, i: int, heartbeat: int) -> None:
    coordinate = Coordinate("again.000001", 500 + i)
    state.apply(
        STATEMENTS[i], default_db="shop", server_id=8, coordinate=coordinate, gtid=None, last_heartbeat=heartbeat
    )


def test_failovers_while_reading_again_keep_what_the_change_log_holds(tmp_path: Path) -> None:
    history = SchemaHistory.open(str(tmp_path / "h"))
    history.initial(STEPS[0], coordinate=Coordinate(FILE, 4), **WHERE)
    state = SchemaState(history, STEPS[0], 0)
    _apply_all(state)
    where: dict[str, Any] = {"server_id": 8, "coordinate": Coordinate("b.000001", 4), "gtid": None}
    state.merge(**where, last_heartbeat=2000, from_heartbeat=True)
    _read_again(state, 3, 2000)
    _read_again(state, 4, 3000)  # a heartbeat (3000) read between the two
    assert state.replay == STATEMENTS[5:]
    # Another failover from heartbeat 2000: statements 3 to 6 are still the change log's, read again once more.
    again = SchemaState(history, state.current, state.version)
    again.merge(**where, last_heartbeat=2000, from_heartbeat=True)
    assert again.current == STEPS[3] and again.replay == STATEMENTS[3:]
    # From heartbeat 3000 instead: back to the schema after statement 3, with 4 to 6 to read again.
    state.merge(**where, last_heartbeat=3000, from_heartbeat=True)
    assert state.current == STEPS[4] and state.replay == STATEMENTS[4:]
    # A GTID failover meanwhile changes nothing of it.
    state.merge(**where, last_heartbeat=3000)
    assert state.replay == STATEMENTS[4:]
    _read_again(state, 4, 3000)
    assert state.read_again and state.replay == STATEMENTS[5:]
    # A statement other than the next one: the stream went elsewhere; from there everything is written, it too.
    state.merge(**where, last_heartbeat=3000, from_heartbeat=True)
    assert state.replay == STATEMENTS[4:]
    _read_again(state, 5, 3000)
    assert state.replay == () and not state.replaying and not state.read_again
    state.apply(STATEMENTS[4], default_db="shop", server_id=8, coordinate=Coordinate("c.000001", 9), gtid=None,
                last_heartbeat=3000)  # fmt: skip
    assert SchemaState(history, state.current, state.version).replay == ()


def test_a_heartbeat_failover_without_a_history_rewinds_in_memory() -> None:
    state = SchemaState(None, STEPS[0], 0)
    _apply_all(state)
    state.merge(server_id=8, coordinate=Coordinate("b.000001", 4), gtid=None, last_heartbeat=2000, from_heartbeat=True)
    assert state.current == STEPS[3] and state.version == 8 and state.replay == STATEMENTS[3:]
    # No DDL after heartbeat 3000: the schema stays.
    fresh = SchemaState(None, STEPS[0], 0)
    _apply_all(fresh)
    fresh.merge(server_id=8, coordinate=Coordinate("b.000001", 4), gtid=None, last_heartbeat=3000, from_heartbeat=True)
    assert fresh.current == STEPS[-1]


def test_coordinates_are_stored_in_the_file_and_position_columns(tmp_path: Path) -> None:
    """The table keeps its columns: a coordinate is written as `binlog_file` and `binlog_pos`, and read back."""
    uri = str(tmp_path / "h")
    history = SchemaHistory.open(uri)
    history.initial(STEPS[0], coordinate=Coordinate("mysql-bin.999999", 4), **WHERE)
    history.merge(
        base_version=0, server_id=8, coordinate=Coordinate("mysql-bin.1000000", 120), gtid=None, last_heartbeat=None
    )
    table = DeltaTable(uri).to_pyarrow_table()
    assert table.schema.names == ARROW_SCHEMA.names
    rows = sorted(table.select(["version", "binlog_file", "binlog_pos"]).to_pylist(), key=lambda r: r["version"])
    assert rows == [
        {"version": 0, "binlog_file": "mysql-bin.999999", "binlog_pos": 4},
        {"version": 1, "binlog_file": "mysql-bin.1000000", "binlog_pos": 120},
    ]
    assert [e.coordinate for e in SchemaHistory.open(uri).entries()] == [
        Coordinate("mysql-bin.999999", 4),
        Coordinate("mysql-bin.1000000", 120),
    ]


def test_record_needs_its_base(tmp_path: Path) -> None:
    history = SchemaHistory.open(str(tmp_path / "h"))
    with pytest.raises(SchemaHistoryError, match="record the initial schema first"):
        history.record(
            base_version=0,
            before=STEPS[0],
            after=STEPS[1],
            coordinate=Coordinate(FILE, 1),
            last_heartbeat=None,
            sql="x",
            **WHERE,
        )
    with pytest.raises(SchemaHistoryError, match="missing or empty"):
        history.schema_at(0)


@pytest.mark.parametrize("i", range(len(STEPS) - 1), ids=[f"step-{i}" for i in range(len(STEPS) - 1)])
def test_delta_reproduces_each_step(i: int) -> None:
    delta = diff(STEPS[i], STEPS[i + 1])
    assert apply_delta(STEPS[i], delta) == STEPS[i + 1]
    assert diff(STEPS[i + 1], STEPS[i + 1]) == {}


def test_schema_json_round_trip_keeps_everything() -> None:
    schema = STEPS[-1]
    assert Schema.from_json(schema.to_json()) == schema
    with pytest.raises(ValueError, match="unknown schema format"):
        Schema.from_json({"databases": []})
