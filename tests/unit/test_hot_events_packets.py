"""`hot_events.read` on packets built here: the fields of each hot event, and a clear error for a malformed one.
(`tests/integration/test_hot_events.py` compares it with the library on real binlogs of both flavors.)"""

from __future__ import annotations

import struct

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.replication import hot_events
from mysqlcapture_worker.replication.events import GtidEvent, QueryEvent, RowsEvent, RowsKind, XidEvent
from mysqlcapture_worker.replication.normalize import UnsupportedEventError


class _Conn:
    checksum = True
    post_headers: bytes | None = b""  # no declared lengths: the known ones apply
    gtid_extra = (-1, 0)


def _packet(kind: int, body: bytes, *, log_pos: int = 1000, server_id: int = 7) -> bytes:
    size = 19 + len(body) + 4
    return b"\x00" + struct.pack("<IBIIIH", 1_700_000_000, kind, server_id, size, log_pos, 0) + body + b"CRC!"


def _reading() -> hot_events.Reading:
    return hot_events.Reading(_Conn(), "binlog.000003", lambda log_pos, size: log_pos - size)


def test_a_v2_update_rows_event() -> None:
    images = b"\x00\x01\x02\x03"
    body = (7).to_bytes(6, "little") + struct.pack("<HH", 1, 2) + b"\x03" + b"\x07" + b"\x05" + images
    ev = hot_events.read(_packet(31, body), _reading())
    assert ev == RowsEvent(
        kind=RowsKind.UPDATE,
        table_id=7,
        where=Coordinate("binlog.000003", 1000),
        timestamp=1_700_000_000,
        server_id=7,
        columns_present=b"\x07",
        columns_present_after=b"\x05",
        body=images,
        column_count=3,
        start_pos=1000 - (19 + len(body) + 4),
        flags=1,
    )


def test_partition_extra_data_is_skipped() -> None:
    extra = struct.pack("<H", 2 + 3) + b"\x01\x02\x00"  # partition info: type 1, partition id 2
    body = (9).to_bytes(6, "little") + struct.pack("<H", 0) + extra + b"\x01" + b"\x01" + b"\x00\x2a"
    ev = hot_events.read(_packet(30, body), _reading())
    assert isinstance(ev, RowsEvent) and ev.kind is RowsKind.INSERT and ev.body == b"\x00\x2a"


def test_gtid_begin_and_xid() -> None:
    sid = bytes(range(16))
    ev = hot_events.read(_packet(33, b"\x00" + sid + struct.pack("<Q", 42) + bytes(17)), _reading())
    assert isinstance(ev, GtidEvent) and ev.gtid == "00010203-0405-0607-0809-0a0b0c0d0e0f:42" and not ev.begins
    mariadb = hot_events.read(_packet(162, struct.pack("<QIB", 5, 1, 0) + bytes(6), server_id=3), _reading())
    assert isinstance(mariadb, GtidEvent) and mariadb.gtid == "1-3-5" and mariadb.begins
    begin = struct.pack("<IIBHH", 11, 0, 4, 0, 0) + b"shop\x00BEGIN"
    query = hot_events.read(_packet(2, begin), _reading())
    assert isinstance(query, QueryEvent) and (query.schema, query.query, query.thread_id) == ("shop", "BEGIN", 11)
    ddl = struct.pack("<IIBHH", 11, 0, 0, 0, 0) + b"\x00DROP TABLE t"
    assert hot_events.read(_packet(2, ddl), _reading()) is hot_events.LIBRARY
    xid = hot_events.read(_packet(16, struct.pack("<Q", 99)), _reading())
    assert isinstance(xid, XidEvent) and xid.xid == 99


def test_what_the_library_reads_and_what_is_dropped() -> None:
    assert hot_events.read(_packet(19, b"an unseen table map"), _reading()) is hot_events.LIBRARY
    assert hot_events.read(_packet(4, b"rotate"), _reading()) is hot_events.LIBRARY
    assert hot_events.read(_packet(35, b"previous gtids"), _reading()) is None


def test_malformed_events_are_refused_with_where_they_are() -> None:
    short = (7).to_bytes(6, "little") + struct.pack("<HH", 0, 2) + b"\x10" + b"\x01"  # 16 columns, 1 bitmap byte
    with pytest.raises(ValueError, match=r"binlog\.000003:1000 is shorter than its own header"):
        hot_events.read(_packet(30, short), _reading())
    conn = _Conn()
    conn.post_headers = bytes([13] * 29 + [4])  # WRITE_ROWS_v2 (type 30) declared with a 4-byte post-header
    with pytest.raises(ValueError, match="event type 30 declares a post-header of 4 bytes, shorter than 10"):
        hot_events.read(_packet(30, short), hot_events.Reading(conn, "binlog.000003", lambda p, s: 0))
    with pytest.raises(UnsupportedEventError, match="binlog_row_value_options"):
        hot_events.read(_packet(39, short), _reading())
