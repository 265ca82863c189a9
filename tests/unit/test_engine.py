"""The capture engine fed with normalized binlog events, row images encoded as the server writes them; no server.

Every row test runs on the compiled path (the engine renders a whole rows event into one `RowBatch`) and on the
Python reference path (one `ChangeEvent` per row); both must give the same events, compared per row.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import orjson
import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.schema import Schema
from mysqlcapture_worker.changes import ChangeEvent, RowBatch, each_event
from mysqlcapture_worker.decode.native import RowRenderer
from mysqlcapture_worker.engine import CaptureEngine, CaptureError, Chunk
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.positions import Position, SnapshotJob
from mysqlcapture_worker.replication.events import (
    BinlogEvent,
    ColumnMeta,
    GtidEvent,
    IncidentEvent,
    QueryEvent,
    RowsEvent,
    RowsKind,
    TableMap,
    XidEvent,
)
from mysqlcapture_worker.schema.state import SchemaState

from tests.unit.test_decode import bitmap

pytestmark = pytest.mark.unit

FILE = "mysql-bin.000003"
SERVER = 11
TS = 1_700_000_000
THREAD = 42
START = Coordinate(FILE, 1000)  # where the stream starts: a boundary

# shop.items (id INT PRIMARY KEY, name VARCHAR(10) utf8mb4) and shop.notes (n BIGINT), as TABLE_MAPs describe them.
ITEMS_DDL = "CREATE TABLE items (id INT NOT NULL PRIMARY KEY, name VARCHAR(10) CHARACTER SET utf8mb4)"
NOTES_DDL = "CREATE TABLE notes (n BIGINT)"
HEARTBEATS_DDL = "CREATE TABLE heartbeats (client_id VARCHAR(20) CHARACTER SET utf8mb4 PRIMARY KEY, heartbeat BIGINT)"
ITEMS_COLUMNS = (ColumnMeta(3, nullable=False), ColumnMeta(15, max_length=40))
NOTES_COLUMNS = (ColumnMeta(8),)
HEARTBEAT_COLUMNS = (ColumnMeta(15, max_length=80, nullable=False), ColumnMeta(8))


def items_map(table_id: int = 7) -> TableMap:
    return TableMap(table_id=table_id, database="shop", table="items", columns=ITEMS_COLUMNS)


def notes_map(table_id: int = 8) -> TableMap:
    return TableMap(table_id=table_id, database="shop", table="notes", columns=NOTES_COLUMNS)


def item(id_: int, name: str | None) -> bytes:
    """One row image of shop.items: the NULL bitmap, then the INT (4 bytes LE), then the VARCHAR (1-byte length)."""
    body = struct.pack("<i", id_)
    if name is not None:
        body += bytes([len(name.encode())]) + name.encode()
    return bitmap([False, name is None]) + body


def note(n: int) -> bytes:
    return bitmap([False]) + struct.pack("<q", n)


def heartbeat_row(client: str, value: int) -> bytes:
    return bitmap([False, False]) + bytes([len(client)]) + client.encode() + struct.pack("<q", value)


class Binlog:
    """Writes events as a server would, one after the other in `FILE` from `START`: each knows where it starts."""

    def __init__(self, pos: int = START.pos) -> None:
        self.pos = pos

    def _next(self, size: int) -> tuple[int, Coordinate]:
        start, self.pos = self.pos, self.pos + size
        return start, Coordinate(FILE, self.pos)

    def gtid(self, gtid: str, *, standalone: bool = False) -> GtidEvent:
        return GtidEvent(gtid=gtid, standalone=standalone, where=self._next(40)[1], timestamp=TS, server_id=SERVER)

    def query(self, sql: str, *, schema: str = "shop") -> QueryEvent:
        start, where = self._next(100)
        return QueryEvent(schema, sql, THREAD, where, TS, SERVER, start_pos=start)

    def rows(self, kind: RowsKind, table: TableMap, body: bytes) -> RowsEvent:
        start, where = self._next(30 + len(body))
        count = len(table.columns)
        full = bitmap([True] * count)
        after = full if kind is RowsKind.UPDATE else None
        return RowsEvent(kind, table.table_id, where, TS, SERVER, full, after, body, count, start_pos=start)

    def table_map(self, table: TableMap) -> TableMap:
        self._next(50)
        return table

    def xid(self, xid: int) -> XidEvent:
        return XidEvent(xid, self._next(31)[1], TS, SERVER)

    def transaction(self, gtid: str, *statements: tuple[RowsKind, TableMap, bytes], xid: int) -> list[BinlogEvent]:
        """GTID, BEGIN, a TABLE_MAP before each rows event, XID."""
        events: list[BinlogEvent] = [self.gtid(gtid), self.query("BEGIN")]
        for kind, table, body in statements:
            events += [self.table_map(table), self.rows(kind, table, body)]
        return [*events, self.xid(xid)]


def schema_of(*ddl: str) -> SchemaState:
    """A schema state (no history) holding database `shop` and the tables `ddl` creates."""
    state = SchemaState(None, Schema.empty(), 0)
    for sql in ("CREATE DATABASE shop", *ddl):
        state.apply(sql, default_db="shop", server_id=SERVER, coordinate=START, gtid=None, last_heartbeat=None)
    return state


def engine_for(fast: bool, *, position: Position | None = None, **options: Any) -> CaptureEngine:
    return CaptureEngine(
        position=position or Position(server_id=SERVER, coordinate=START, gtid_set="0-11-4", order_key=100),
        schema=schema_of(ITEMS_DDL, NOTES_DDL),
        table_filter=TableFilter(["shop.*"]),
        fast=fast,
        **options,
    )


def feed(engine: CaptureEngine, events: Iterable[BinlogEvent]) -> list[Chunk]:
    return [chunk for ev in events for chunk in engine.feed(ev)]


def rows_of(chunk: Chunk) -> list[tuple[Any, ...]]:
    """Each row of the chunk: (type, table, data, old, pk, order_key, row_index, xid, commit)."""
    return [
        (
            e.type,
            e.table,
            orjson.loads(e.data_json) if e.data_json is not None else None,
            orjson.loads(e.old_json) if e.old_json is not None else None,
            e.pk_json,
            e.order_key,
            e.row_index,
            e.xid,
            e.commit,
        )
        for e in each_event(chunk.events)
    ]


def origins(chunk: Chunk) -> set[tuple[Any, ...]]:
    """Where the chunk's rows come from: (server, ts, thread, gtid, transaction start file and pos)."""
    return {(e.server_id, e.ts, e.thread_id, e.gtid, e.binlog_file, e.binlog_pos) for e in each_event(chunk.events)}


def at(pos: int) -> Coordinate:
    return Coordinate(FILE, pos)


@pytest.fixture(params=[True, False], ids=["compiled", "reference"])
def fast(request: pytest.FixtureRequest) -> bool:
    """The row path: the compiled renderer (needs the native extension) or the Python reference."""
    if request.param and RowRenderer is None:
        pytest.skip("mysqlcapture_native is not installed (make setup builds it)")
    return bool(request.param)


def assert_path(chunk: Chunk, fast: bool) -> None:
    """Rows of the compiled path come as batches, the reference path's one event per row."""
    kinds = {type(e) for e in chunk.events}
    assert kinds == ({RowBatch} if fast else {ChangeEvent}), kinds


def test_insert_update_delete(fast: bool) -> None:
    engine = engine_for(fast)
    log = Binlog()
    insert = log.transaction("0-11-5", (RowsKind.INSERT, items_map(), item(1, "é") + item(2, None)), xid=70)
    update_start = log.pos
    update = log.transaction("0-11-6", (RowsKind.UPDATE, items_map(), item(2, None) + item(2, "b")), xid=71)
    delete_start = log.pos
    delete = log.transaction("0-11-7", (RowsKind.DELETE, items_map(), item(1, "é")), xid=72)
    first, second, third = feed(engine, insert + update + delete)

    assert rows_of(first) == [
        ("insert", "items", {"id": 1, "name": "é"}, None, "[1]", 101, 0, 70, False),
        ("insert", "items", {"id": 2, "name": None}, None, "[2]", 102, 1, 70, True),
    ]
    assert rows_of(second) == [("update", "items", {"id": 2, "name": "b"}, {"name": None}, "[2]", 103, 0, 71, True)]
    assert rows_of(third) == [("delete", "items", {"id": 1, "name": "é"}, None, "[1]", 104, 0, 72, True)]
    for chunk in (first, second, third):
        assert_path(chunk, fast)
    # Every row names its transaction's start (the boundary before its GTID) and the rows event it came in.
    assert origins(first) == {(SERVER, TS, THREAD, "0-11-5", FILE, START.pos)}
    assert origins(second) == {(SERVER, TS, THREAD, "0-11-6", FILE, update_start)}
    assert origins(third) == {(SERVER, TS, THREAD, "0-11-7", FILE, delete_start)}
    assert [e.event_pos for e in each_event(first.events)] == [START.pos + 40 + 100 + 50] * 2
    assert [e.pk_columns for e in each_event(first.events)] == [("id",), ("id",)]
    # Each chunk checkpoints the boundary after its transaction's XID, with the GTID added.
    assert [
        (c.position.coordinate, c.position.gtid_set, c.position.order_key, c.boundary) for c in (first, second)
    ] == [
        (at(update_start), "0-11-5", 102, True),
        (at(delete_start), "0-11-6", 103, True),
    ]
    assert (third.position.coordinate, third.position.txn_index, third.position.gtid_set) == (at(log.pos), 0, "0-11-7")
    assert engine.position == third.position and engine.between_transactions


def test_multi_statement_transaction(fast: bool) -> None:
    engine = engine_for(fast)
    log = Binlog()
    events = log.transaction(
        "0-11-5",
        (RowsKind.INSERT, items_map(), item(5, "x")),
        (RowsKind.INSERT, notes_map(), note(-9) + note(2**40)),
        (RowsKind.UPDATE, items_map(), item(5, "x") + item(6, "x")),
        xid=80,
    )
    [chunk] = feed(engine, events)
    assert rows_of(chunk) == [
        ("insert", "items", {"id": 5, "name": "x"}, None, "[5]", 101, 0, 80, False),
        ("insert", "notes", {"n": -9}, None, None, 102, 1, 80, False),  # no primary key: no pk_json
        ("insert", "notes", {"n": 2**40}, None, None, 103, 2, 80, False),
        ("update", "items", {"id": 6, "name": "x"}, {"id": 5}, "[6]", 104, 3, 80, True),
    ]
    assert origins(chunk) == {(SERVER, TS, THREAD, "0-11-5", FILE, START.pos)}
    assert (chunk.position.coordinate, chunk.position.order_key, chunk.boundary) == (at(log.pos), 104, True)


def test_rollback(fast: bool) -> None:
    """A transaction rolled back writes no rows to the binlog: BEGIN...ROLLBACK ends it with no event. Rows that
    do precede a ROLLBACK are a non-transactional table's (MyISAM), which the ROLLBACK did not undo: kept."""
    engine = engine_for(fast)
    log = Binlog()
    [empty] = feed(engine, [log.gtid("0-11-5"), log.query("BEGIN"), log.query("ROLLBACK")])
    assert (list(empty.events), empty.position.coordinate, empty.position.gtid_set) == ([], at(log.pos), "0-11-5")
    assert engine.position.order_key == 100  # no ordering key was handed out
    kept = [
        log.gtid("0-11-6"),
        log.query("BEGIN"),
        log.table_map(notes_map()),
        log.rows(RowsKind.INSERT, notes_map(), note(3)),
    ]
    [chunk] = feed(engine, [*kept, log.query("ROLLBACK")])
    assert rows_of(chunk) == [("insert", "notes", {"n": 3}, None, None, 101, 0, None, True)]
    assert chunk.position.coordinate == at(log.pos)


def test_ddl_changes_the_schema_and_the_rows_that_follow(fast: bool) -> None:
    # Only the database is known (schema version 1): the stream creates the table.
    position = Position(server_id=SERVER, coordinate=START, gtid_set="0-11-4", order_key=100)
    engine = CaptureEngine(position=position, schema=schema_of(), table_filter=TableFilter(["shop.*"]), fast=fast)
    log = Binlog()
    create_at = log.pos
    [create] = feed(engine, [log.gtid("0-11-5", standalone=True), log.query(ITEMS_DDL)])
    [event] = create.events
    assert isinstance(event, ChangeEvent)
    assert (event.type, event.database, event.table, event.sql, event.gtid, event.binlog_pos, event.commit) == (
        "table-create", "shop", "items", ITEMS_DDL, "0-11-5", create_at, True,
    )  # fmt: skip
    assert orjson.loads(event.data_json or "") == {
        "database": "shop",
        "table": "items",
        "charset": "utf8mb4",
        "primary-key": ["id"],
        "columns": [
            {"type": "int", "name": "id", "signed": True},
            {"type": "varchar", "name": "name", "charset": "utf8mb4"},
        ],
    }
    assert event.old_json is None and event.order_key == 101 and event.event_pos == create_at + 40
    assert (engine.schema.version, create.position.schema_version, create.position.coordinate) == (2, 2, at(log.pos))
    assert engine.schema.current.table("shop", "items") is not None

    alter = "ALTER TABLE items ADD COLUMN qty INT"
    [altered] = feed(engine, [log.gtid("0-11-6", standalone=True), log.query(alter)])
    [event] = altered.events
    assert isinstance(event, ChangeEvent)
    assert (event.type, event.table, event.sql, altered.position.schema_version) == ("table-alter", "items", alter, 3)
    assert [c["name"] for c in orjson.loads(event.old_json or "")["columns"]] == ["id", "name"]
    assert [c["name"] for c in orjson.loads(event.data_json or "")["columns"]] == ["id", "name", "qty"]
    [names] = [t.column_names() for t in engine.schema.current.all_tables()]
    assert names == ["id", "name", "qty"]

    # The rows after the ALTER decode with the new column.
    wide = TableMap(table_id=7, database="shop", table="items", columns=(*ITEMS_COLUMNS, ColumnMeta(3)))
    row = bitmap([False, False, False]) + struct.pack("<i", 1) + b"\x01z" + struct.pack("<i", 3)
    [chunk] = feed(engine, log.transaction("0-11-7", (RowsKind.INSERT, wide, row), xid=90))
    assert rows_of(chunk) == [("insert", "items", {"id": 1, "name": "z", "qty": 3}, None, "[1]", 103, 0, 90, True)]
    assert_path(chunk, fast)


def test_statements_changing_rows_without_row_events_put_a_snapshot_in_the_position_they_end_at() -> None:
    state = schema_of(ITEMS_DDL, NOTES_DDL, "CREATE TABLE parts (id INT PRIMARY KEY) PARTITION BY HASH (id)")
    position = Position(server_id=SERVER, coordinate=START, gtid_set="0-11-4", order_key=100)
    engine = CaptureEngine(position=position, schema=state, table_filter=TableFilter(["shop.parts", "shop.items"]))
    log = Binlog()
    [chunk] = feed(engine, [log.gtid("0-11-5", standalone=True), log.query("ALTER TABLE parts TRUNCATE PARTITION p0")])
    assert [e.type for e in chunk.events] == ["table-alter"]
    job = SnapshotJob.from_json(chunk.position.snapshot or "")
    assert (job.tables, job.reason, job.index, job.started) == ((("shop", "parts"),), "unlogged", 0, False)
    # A job under way gets the tables after its own; one it still has to read is not added twice.
    started = job.start_table()
    engine.position = engine.position.with_snapshot(started.to_json())
    exchange = "ALTER TABLE parts EXCHANGE PARTITION p0 WITH TABLE items"
    [chunk] = feed(engine, [log.gtid("0-11-6", standalone=True), log.query(exchange)])
    job = SnapshotJob.from_json(chunk.position.snapshot or "")
    assert (job.tables, job.started) == ((("shop", "parts"), ("shop", "parts"), ("shop", "items")), True)
    [chunk] = feed(engine, [log.gtid("0-11-7", standalone=True), log.query("ALTER TABLE items TRUNCATE PARTITION a")])
    assert SnapshotJob.from_json(chunk.position.snapshot or "").tables == job.tables
    # A table left out of the capture is not read; nor is any when snapshots are off (a warning says so).
    engine.position = engine.position.with_snapshot(None)
    [chunk] = feed(engine, [log.gtid("0-11-8", standalone=True), log.query("ALTER TABLE notes DROP PARTITION p1")])
    assert chunk.position.snapshot is None
    engine.reread_unlogged = False
    [chunk] = feed(engine, [log.gtid("0-11-9", standalone=True), log.query("ALTER TABLE parts DROP PARTITION p1")])
    assert chunk.position.snapshot is None and [e.type for e in chunk.events] == ["table-alter"]


def test_an_incident_puts_a_snapshot_of_every_captured_table_in_the_position_it_ends_at(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An INCIDENT event (LOST_EVENTS) does not say which rows the server could not log: every captured table, and
    only those, is read again. MySQL gives it a GTID of its own, which the set after it holds."""
    state = schema_of(ITEMS_DDL, NOTES_DDL, "CREATE TABLE parts (id INT PRIMARY KEY)")
    position = Position(server_id=SERVER, coordinate=START, gtid_set="0-11-4", order_key=100)
    engine = CaptureEngine(position=position, schema=state, table_filter=TableFilter(["shop.parts", "shop.items"]))
    log = Binlog()
    gtid = log.gtid("0-11-5")
    incident = IncidentEvent("LOST_EVENTS", "error writing", log._next(60)[1], TS, SERVER)
    [chunk] = feed(engine, [gtid, incident])
    assert chunk.events == [] and chunk.boundary and chunk.position.coordinate == incident.where
    assert chunk.position.gtid_set == "0-11-5"
    job = SnapshotJob.from_json(chunk.position.snapshot or "")
    assert (job.tables, job.reason) == ((("shop", "items"), ("shop", "parts")), "unlogged")
    assert "INCIDENT event (LOST_EVENTS: error writing) at mysql-bin.000003:" in caplog.text
    assert "a snapshot of every captured table (2) follows" in caplog.text
    # Without snapshots: nothing is read, and the warning names the fix.
    engine.position = engine.position.with_snapshot(None)
    engine.reread_unlogged = False
    [chunk] = feed(engine, [IncidentEvent("LOST_EVENTS", "", log._next(60)[1], TS, SERVER)])
    assert chunk.position.snapshot is None and chunk.position.coordinate == at(log.pos)
    assert "spec.snapshot.mode is never: the change log does not show those changes" in caplog.text
    assert "`mysqlcapture resnapshot <manifest>` (every table)" in caplog.text


def test_heartbeat_rows_move_last_heartbeat_and_are_no_change() -> None:
    seen: list[int] = []
    engine = CaptureEngine(
        position=Position(server_id=SERVER, coordinate=START),
        schema=schema_of(ITEMS_DDL, "CREATE DATABASE meta", HEARTBEATS_DDL.replace("heartbeats", "meta.heartbeats")),
        table_filter=TableFilter(["*.*"]),
        heartbeat_table=("meta", "heartbeats"),
        heartbeat_client="me",
        on_heartbeat=seen.append,
        fast=False,
    )
    beats = TableMap(table_id=3, database="meta", table="heartbeats", columns=HEARTBEAT_COLUMNS)
    log = Binlog()
    body = heartbeat_row("other", 5) + heartbeat_row("me", 1_700_000_000_123) + heartbeat_row("another", 6)
    [chunk] = feed(engine, log.transaction("0-11-5", (RowsKind.INSERT, beats, body), xid=3))
    # Only this capture's row counts (another capture shares the table); it is a marker, not a change.
    assert (list(chunk.events), seen) == ([], [1_700_000_000_123])
    assert chunk.position.last_heartbeat == engine.position.last_heartbeat == 1_700_000_000_123
    assert (chunk.position.coordinate, chunk.position.order_key) == (at(log.pos), 0)


def test_transaction_larger_than_a_chunk(fast: bool) -> None:
    engine = engine_for(fast, chunk_rows=2)
    log = Binlog()
    body = b"".join(item(i, None) for i in range(1, 6))
    chunks = feed(engine, log.transaction("0-11-5", (RowsKind.INSERT, items_map(), body), xid=9))
    assert [[(r[2]["id"], r[5], r[6], r[8]) for r in rows_of(c)] for c in chunks] == [
        [(1, 101, 0, False), (2, 102, 1, False)],
        [(3, 103, 2, False), (4, 104, 3, False)],
        [(5, 105, 4, True)],
    ]
    # The chunks inside the transaction checkpoint its start with the rows committed so far (txn_index).
    assert [(c.position.coordinate, c.position.txn_index, c.position.order_key, c.boundary) for c in chunks] == [
        (START, 2, 102, False),
        (START, 4, 104, False),
        (at(log.pos), 0, 105, True),
    ]
    assert {e.xid for c in chunks for e in each_event(c.events)} == {9}


@pytest.mark.parametrize(
    ("committed", "expected"),
    [
        (1, [(2, 102, 1, False), (3, 103, 2, False), (4, 104, 3, False), (5, 105, 4, True)]),  # inside the 1st event
        (3, [(4, 104, 3, False), (5, 105, 4, True)]),  # inside the second rows event
        (5, []),  # every row: only the boundary remains to checkpoint
    ],
    ids=["in-first-event", "in-second-event", "all"],
)
def test_restart_inside_a_transaction_skips_committed_rows(
    fast: bool, committed: int, expected: list[tuple[int, int, int, bool]]
) -> None:
    """A run committed `committed` rows of a 5-row transaction (two rows events), then died; the next resumes."""
    resumed = Position(
        server_id=SERVER, coordinate=START, gtid_set="0-11-4", txn_index=committed, order_key=100 + committed
    )
    engine = engine_for(fast, position=resumed)
    log = Binlog()
    events = log.transaction(
        "0-11-5",
        (RowsKind.INSERT, items_map(), item(1, "a") + item(2, "a")),
        (RowsKind.INSERT, items_map(), item(3, "b") + item(4, "b") + item(5, "b")),
        xid=4,
    )
    [chunk] = feed(engine, events)
    assert [(r[2]["id"], r[5], r[6], r[8]) for r in rows_of(chunk)] == expected
    assert (chunk.position.coordinate, chunk.position.txn_index, chunk.position.order_key) == (at(log.pos), 0, 105)
    # A lost connection later: the stream restarts at the engine's boundary position, and skips nothing.
    engine.restart()
    [chunk] = feed(engine, Binlog(log.pos).transaction("0-11-6", (RowsKind.INSERT, items_map(), item(6, "c")), xid=5))
    assert [(r[2]["id"], r[5], r[6]) for r in rows_of(chunk)] == [(6, 106, 0)]


def test_table_id_remapped_mid_stream(fast: bool) -> None:
    """The server reassigns table ids: the latest TABLE_MAP of an id decides which table its rows belong to."""
    engine = engine_for(fast)
    log = Binlog()
    events = [
        *log.transaction("0-11-5", (RowsKind.INSERT, items_map(7), item(1, "a")), xid=1),
        # After a FLUSH TABLES: id 7 now names notes, items came back as id 9.
        *log.transaction(
            "0-11-6", (RowsKind.INSERT, notes_map(7), note(8)), (RowsKind.INSERT, items_map(9), item(2, "b")), xid=2
        ),
    ]
    first, second = feed(engine, events)
    assert [(r[1], r[2]) for r in rows_of(first)] == [("items", {"id": 1, "name": "a"})]
    assert [(r[1], r[2]) for r in rows_of(second)] == [("notes", {"n": 8}), ("items", {"id": 2, "name": "b"})]
    # A new connection forgets the ids: rows before their TABLE_MAP mean the stream did not start at a boundary.
    engine.restart()
    with pytest.raises(CaptureError, match="unknown table id 9"):
        feed(engine, [log.gtid("0-11-7"), log.query("BEGIN"), log.rows(RowsKind.INSERT, items_map(9), item(3, "c"))])


@pytest.mark.parametrize(
    ("choice", "batches"),
    [("reference", False), ("fast", True)],
    ids=["reference", "fast"],
)
def test_decoder_chosen_by_environment(monkeypatch: pytest.MonkeyPatch, choice: str, batches: bool) -> None:
    if batches and RowRenderer is None:
        pytest.skip("mysqlcapture_native is not installed (make setup builds it)")
    monkeypatch.setenv("MYSQLCAPTURE_DECODER", choice)
    engine = CaptureEngine(
        position=Position(server_id=SERVER, coordinate=START),
        schema=schema_of(ITEMS_DDL),
        table_filter=TableFilter(["shop.*"]),
    )
    [chunk] = feed(engine, Binlog().transaction("0-11-5", (RowsKind.INSERT, items_map(), item(1, "a")), xid=1))
    assert_path(chunk, batches)
    assert rows_of(chunk) == [("insert", "items", {"id": 1, "name": "a"}, None, "[1]", 1, 0, 1, True)]
