"""The stream's own reading of the hot events (`replication.hot_events`) gives what the library path gives.

One binlog of each flavor, written by a randomized workload with DDL and by the shapes around it (multi-statement
and non-transactional transactions, one-phase XA, rotations, large multi-event transactions, MySQL's compressed
transaction payloads, MariaDB's compressed events, partitioned tables, tables opened again under new table ids), is
read twice: through the lane (the default) and through the library alone (`read_hot_events=False`). Every event but
the table maps is the same, in the same order; each rows event finds the same table map for its table id both ways
(the library path sends a table's map once per binlog file, the lane each time the server does).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.replication.events import GtidEvent, QueryEvent, RowsEvent, TableMap, XidEvent
from mysqlcapture_worker.replication.stream import BinlogStream, ConnectionSettings

from tests.workload import Workload

pytestmark = [
    # mysql-replication 1.0.17 opens its control connection with PyMySQL's deprecated `db=` argument.
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]

_replica_ids = itertools.count(7301)
LONG_VALUE = 17 * 1024 * 1024


def _read(srv: PrivateServer, start: Coordinate, *, lane: bool) -> list[Any]:
    settings = ConnectionSettings("127.0.0.1", srv.port, "root", srv.root_password, ssl_disabled=True)
    stream = BinlogStream(
        settings, replica_server_id=next(_replica_ids), start=start, blocking=False, read_hot_events=lane
    )
    try:
        return list(stream)
    finally:
        stream.close()


def _write(srv: PrivateServer, seed: int) -> None:
    conn = srv.connect()
    mysql = srv.flavor == "mysql"
    work = Workload(conn, "hot", seed=seed, truncate=True)
    work.setup(4)
    for i in range(400):
        work.step()
        if i == 150:
            work.sql("FLUSH BINARY LOGS")
        if i == 250:
            work.sql("FLUSH TABLES")  # the server opens the tables again, under new table ids
    statements = [
        "CREATE TABLE hot.plain (id INT PRIMARY KEY, v VARCHAR(30)) ENGINE=MyISAM",
        "INSERT INTO hot.plain VALUES (1, 'non-transactional'), (2, 'its own BEGIN and COMMIT')",
        "CREATE TABLE hot.big (id INT PRIMARY KEY, pad LONGTEXT)",
        "INSERT INTO hot.big SELECT seq, REPEAT('x', 3000) FROM (SELECT 1 AS seq UNION SELECT 2 UNION SELECT 3) s",
        "BEGIN",
        "INSERT INTO hot.big SELECT id + 10, REPEAT('y', 9000) FROM hot.big",
        "UPDATE hot.big SET pad = REPEAT('z', 7000)",
        "COMMIT",
        "XA START 'one'",
        "DELETE FROM hot.big WHERE id > 10",
        "XA END 'one'",
        "XA COMMIT 'one' ONE PHASE",
        # A rows event longer than one packet (16 MiB - 1): the dump sends it in several.
        f"INSERT INTO hot.big VALUES (50, REPEAT('w', {LONG_VALUE}))",
        "DELETE FROM hot.big WHERE id = 50",
        "SET SESSION binlog_row_image = 'MINIMAL'",
        "UPDATE hot.big SET pad = 'minimal' WHERE id = 1",
        "SET SESSION binlog_row_image = 'FULL'",
        # MySQL writes a partitioned table's rows events with extra data (the partition ids).
        "CREATE TABLE hot.parts (id INT PRIMARY KEY, v VARCHAR(20)) PARTITION BY HASH(id) PARTITIONS 4",
        "INSERT INTO hot.parts VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')",
        "UPDATE hot.parts SET id = id + 10, v = 'moved' WHERE id < 3",
        "DELETE FROM hot.parts WHERE id = 4",
    ]
    if mysql:
        statements += [
            "SET SESSION binlog_transaction_compression = ON",
            "INSERT INTO hot.big VALUES (100, REPEAT('compressed ', 500)), (101, 'two rows')",
            "UPDATE hot.big SET pad = 'compressed update' WHERE id >= 100",
            "SET SESSION binlog_transaction_compression = OFF",
        ]
    else:
        statements += [
            "SET GLOBAL log_bin_compress = ON",
            "SET GLOBAL log_bin_compress_min_len = 10",
        ]
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    conn.close()
    if not mysql:  # a new session, for the global settings to apply to it
        conn = srv.connect()
        with conn.cursor() as cur:
            cur.execute("INSERT INTO hot.big VALUES (100, REPEAT('compressed ', 500)), (101, 'two rows')")
            cur.execute("UPDATE hot.big SET pad = 'compressed update' WHERE id >= 100")
            cur.execute("ALTER TABLE hot.big ADD COLUMN note VARCHAR(40) DEFAULT 'after a compressed DDL'")
            cur.execute("SET GLOBAL log_bin_compress = OFF")
        conn.close()
    work = Workload(srv.connect(), "hot2", seed=seed + 1)
    work.setup(2)
    for _ in range(100):
        work.step()


@pytest.mark.parametrize("seed", [11, 12])
def test_the_lane_reads_what_the_library_reads(start_source: Callable[..., PrivateServer], seed: int) -> None:
    srv = start_source(91, max_binlog_size="64K")
    start = srv.binlog_status()
    _write(srv, seed)
    coordinate = Coordinate(start.file, start.pos)
    lane, library = _read(srv, coordinate, lane=True), _read(srv, coordinate, lane=False)

    kinds = {type(ev).__name__ for ev in lane}
    assert {"GtidEvent", "QueryEvent", "RowsEvent", "TableMap", "XidEvent", "RotateEvent"} <= kinds
    assert len([ev for ev in lane if isinstance(ev, TableMap)]) > len(
        [ev for ev in library if isinstance(ev, TableMap)]
    )
    maps: tuple[dict[int, TableMap], dict[int, TableMap]] = ({}, {})
    others: tuple[list[Any], list[Any]] = ([], [])
    for side, events in enumerate((lane, library)):
        for ev in events:
            if isinstance(ev, TableMap):
                maps[side][ev.table_id] = ev
                continue
            others[side].append((ev, maps[side].get(ev.table_id) if isinstance(ev, RowsEvent) else None))
    assert len(others[0]) == len(others[1])
    for (mine, my_map), (theirs, their_map) in zip(*others, strict=True):
        assert mine == theirs
        assert my_map == their_map
    rows = [ev for ev, _ in others[0] if isinstance(ev, RowsEvent)]
    assert len(rows) > 300 and {ev.kind for ev in rows} == {"insert", "update", "delete"}
    assert sum(1 for ev, _ in others[0] if isinstance(ev, QueryEvent) and ev.query in ("BEGIN", "COMMIT")) > 0
    assert all(ev.start_pos > 0 for ev, _ in others[0] if isinstance(ev, (RowsEvent, QueryEvent)))
    assert len([ev for ev in rows if len(ev.body) > LONG_VALUE]) == 2  # the long value's insert and delete
    assert len({ev.gtid for ev, _ in others[0] if isinstance(ev, GtidEvent)}) > 400
    assert sum(1 for ev, _ in others[0] if isinstance(ev, XidEvent)) > 300
