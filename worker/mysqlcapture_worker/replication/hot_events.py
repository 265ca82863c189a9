"""The events every transaction carries, read from the dump connection's packet bytes, past the library.

mysql-replication builds a packet wrapper and an event object for each event and reads each field with a call of
its own: on a source of one-row transactions that was ~40 us per event, more than the rest of the worker spends
on it. GTID, BEGIN and COMMIT, XID, rows events and a TABLE_MAP already seen are therefore read here, straight into
the normalized events, with the same values the library path gives (`tests/integration/test_hot_events.py` reads
randomized binlogs of both flavors both ways and compares every event). Everything else (a first TABLE_MAP, DDL,
ROTATE, the format description, XA, heartbeats, what the server sends on an error or at the end) is left to the
library: `read` says `LIBRARY`.

A rows event needs no library state here (its table map is resolved by the engine by table id), so a rows event is
never left to the library once this lane reads the stream: the library skips a rows event whose TABLE_MAP it did
not see itself (after a rotation it forgets them), and this lane reads repeated TABLE_MAPs without it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final, Protocol

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.replication import mariadb_wire
from mysqlcapture_worker.replication.events import (
    BinlogEvent,
    GtidEvent,
    QueryEvent,
    RowsEvent,
    RowsKind,
    TableMap,
    XidEvent,
    made,
)
from mysqlcapture_worker.replication.mysql_wire import HEADER, read_packed_uint
from mysqlcapture_worker.replication.normalize import PARTIAL_UPDATE_ROWS_EVENT, partial_update_refused

LIBRARY: Final = object()
"""`read`'s answer for a packet the library must read."""

QUERY, XID, TABLE_MAP, GTID, MARIADB_GTID = 2, 16, 19, 33, 162
ROWS_KINDS: Final = {
    23: RowsKind.INSERT,  # v1 (MariaDB)
    24: RowsKind.UPDATE,
    25: RowsKind.DELETE,
    30: RowsKind.INSERT,  # v2 (MySQL)
    31: RowsKind.UPDATE,
    32: RowsKind.DELETE,
}
_V2 = frozenset({30, 31, 32})
# Events the library drops (it reads them into classes the stream does not ask for, or does not know them), and so
# does the lane: INTVAR, RAND, USER_VAR, INCIDENT (read aside by the connection), ROWS_QUERY, ANONYMOUS_GTID,
# PREVIOUS_GTIDS, TRANSACTION_CONTEXT, VIEW_CHANGE, HEARTBEAT_V2, a tagged GTID (read aside), and MariaDB's
# ANNOTATE_ROWS, BINLOG_CHECKPOINT and GTID_LIST.
DROPPED: Final = frozenset({5, 13, 14, 26, 29, 34, 35, 36, 37, 41, 42, 160, 161, 163})
RAW: Final = frozenset({QUERY, XID, TABLE_MAP, GTID, *ROWS_KINDS, *DROPPED} - {26, 42})
"""Events the stream's lane reads as the dump sent them: the connection reads nothing aside of them (it does of an
INCIDENT, 26, and of a tagged GTID, 42), and rewrites a QUERY or a TABLE_MAP for the library only when the lane
leaves it to the library."""
_KNOWN_POST_HEADER = {QUERY: 13, 23: 8, 24: 8, 25: 8, 30: 10, 31: 10, 32: 10}
_HEAD = struct.Struct("<IBIIIH")
_U16, _U32, _U64 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<Q")
_MARIADB_FL_STANDALONE = 0x01
_SIMPLE_STATEMENTS = {b"BEGIN": "BEGIN", b"COMMIT": "COMMIT"}
ALTER_PHASES: Final = {
    mariadb_wire.START_ALTER: "start",
    mariadb_wire.COMMIT_ALTER: "commit",
    mariadb_wire.ROLLBACK_ALTER: "rollback",
}
ALTER_FLAGS: Final = mariadb_wire.START_ALTER | mariadb_wire.COMMIT_ALTER | mariadb_wire.ROLLBACK_ALTER


def post_header_lengths(format_description: bytes) -> bytes:
    """The post-header length per event type (index: type - 1) of a FORMAT_DESCRIPTION event (header and body,
    its checksum-algorithm byte and checksum at the end)."""
    return bytes(format_description[HEADER + 57 : len(format_description) - 5])


class DumpConnection(Protocol):
    """What the dump connection read of the stream so far (`stream._NoAutoReconnectConnection`)."""

    checksum: bool  # the server appends a CRC32 to each event
    post_headers: bytes | None  # per event type, from the format description event
    gtid_extra: tuple[int, int]  # (log_pos, extra flags) of the last MariaDB GTID event read


class Reading:
    """Where the stream reads: its binlog file, its connection, the table maps it keeps and where an event starts
    (`start_of(log_pos, size)`: the stream knows compressed payloads and rewritten events)."""

    __slots__ = ("conn", "file", "start_of", "table_maps")

    def __init__(self, conn: DumpConnection, file: str, start_of: Callable[[int, int], int]) -> None:
        self.conn = conn
        self.file = file
        self.start_of = start_of
        # TABLE_MAP bodies (checksum excluded) the library has read, and what they normalized to.
        self.table_maps: dict[bytes, TableMap] = {}


def header(data: bytes) -> tuple[int, int, int, int, int]:
    """(type, timestamp, server_id, size, log_pos) of a dump packet (its OK byte first)."""
    timestamp, kind, server_id, size, log_pos, _ = _HEAD.unpack_from(data, 1)
    return kind, timestamp, server_id, size, log_pos


def event_body(data: bytes, checksum: bool) -> bytes:
    """The body of a dump packet's event (its OK byte first): after the header, without the checksum."""
    size = _HEAD.unpack_from(data, 1)[3]
    return bytes(data[1 + HEADER : 1 + size - (4 if checksum else 0)])


def alter_phase(gtid_extra: tuple[int, int], log_pos: int) -> str | None:
    """The two-phase ALTER phase of the MariaDB GTID event ending at `log_pos`, from the extra flags the connection
    read of the last one (`DumpConnection.gtid_extra`)."""
    at, extra = gtid_extra
    return ALTER_PHASES.get(extra & ALTER_FLAGS) if at == log_pos else None


def _post_header(post_headers: bytes, kind: int) -> int:
    known = _KNOWN_POST_HEADER[kind]
    declared = post_headers[kind - 1] if 0 < kind <= len(post_headers) else known
    if declared < known:
        raise ValueError(f"event type {kind} declares a post-header of {declared} bytes, shorter than {known}")
    return declared


def read(data: bytes, at: Reading) -> BinlogEvent | object | None:
    """The normalized event of one dump packet (its OK byte first), None for one the stream drops, `LIBRARY` for
    one the library must read."""
    kind, timestamp, server_id, size, log_pos = header(data)
    conn = at.conn
    if conn.post_headers is None:
        return LIBRARY
    end = 1 + size - (4 if conn.checksum else 0)
    body = 1 + HEADER
    if kind in ROWS_KINDS:
        return _rows(data, kind, body, end, at, conn.post_headers, timestamp, server_id, log_pos, size)
    if kind == TABLE_MAP:
        return at.table_maps.get(event_body(data, conn.checksum), LIBRARY)
    if kind == PARTIAL_UPDATE_ROWS_EVENT:  # refused here: the library would skip it if it had not read its table map
        raise partial_update_refused(Coordinate(at.file, log_pos))
    where = Coordinate.read(at.file, log_pos)
    if kind == XID:
        return made(
            XidEvent, xid=_U64.unpack_from(data, body)[0], where=where, timestamp=timestamp, server_id=server_id
        )
    if kind == GTID:
        sid = data[body + 1 : body + 17].hex()
        gno = _U64.unpack_from(data, body + 17)[0]
        gtid = f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}"
        return made(GtidEvent, gtid=gtid, standalone=False, where=where, timestamp=timestamp, server_id=server_id)
    if kind == MARIADB_GTID:
        seq, domain = _U64.unpack_from(data, body)[0], _U32.unpack_from(data, body + 8)[0]
        standalone = bool(data[body + 12] & _MARIADB_FL_STANDALONE)
        return made(
            GtidEvent,
            gtid=f"{domain}-{server_id}-{seq}",
            standalone=standalone,
            where=where,
            timestamp=timestamp,
            server_id=server_id,
            begins=not standalone,
            alter=alter_phase(conn.gtid_extra, log_pos),
        )
    if kind == QUERY:
        return _simple_query(data, body, end, at, conn.post_headers, where, timestamp, server_id, size)
    if kind in DROPPED:
        return None
    return LIBRARY


def _simple_query(
    data: bytes,
    body: int,
    end: int,
    at: Reading,
    post_headers: bytes,
    where: Coordinate,
    timestamp: int,
    server_id: int,
    size: int,
) -> object:
    """A BEGIN or COMMIT statement's Query event; `LIBRARY` for any other statement."""
    thread_id = _U32.unpack_from(data, body)[0]
    schema_length = data[body + 8]
    status_length = _U16.unpack_from(data, body + 11)[0]
    schema_at = body + _post_header(post_headers, QUERY) + status_length
    query_at = schema_at + schema_length + 1
    statement = _SIMPLE_STATEMENTS.get(bytes(data[query_at:end]))
    if statement is None:
        return LIBRARY
    return made(
        QueryEvent,
        schema=bytes(data[schema_at : schema_at + schema_length]).decode("utf-8", "replace"),
        query=statement,
        thread_id=thread_id,
        where=where,
        timestamp=timestamp,
        server_id=server_id,
        start_pos=at.start_of(where.pos, size),
    )


def _rows(
    data: bytes,
    kind: int,
    body: int,
    end: int,
    at: Reading,
    post_headers: bytes,
    timestamp: int,
    server_id: int,
    log_pos: int,
    size: int,
) -> RowsEvent:
    """A rows event (v1 or v2) with its row images still encoded, as `normalize.to_rows_event` makes it."""
    table_id = int.from_bytes(data[body : body + 6], "little")
    flags = _U16.unpack_from(data, body + 6)[0]
    p = body + _post_header(post_headers, kind)
    if kind in _V2:
        extra = _U16.unpack_from(data, body + 8)[0]
        p += max(0, extra - 2)
    count, p = read_packed_uint(data, p)
    width = (count + 7) // 8
    present = bytes(data[p : p + width])
    p += width
    after = None
    if ROWS_KINDS[kind] is RowsKind.UPDATE:
        after = bytes(data[p : p + width])
        p += width
    if p > end:
        raise ValueError(f"rows event at {at.file}:{log_pos} is shorter than its own header")
    return made(
        RowsEvent,
        kind=ROWS_KINDS[kind],
        table_id=table_id,
        where=Coordinate.read(at.file, log_pos),
        timestamp=timestamp,
        server_id=server_id,
        columns_present=present,
        columns_present_after=after,
        body=bytes(data[p:end]),
        column_count=count,
        start_pos=at.start_of(log_pos, size),
        flags=flags,
    )
