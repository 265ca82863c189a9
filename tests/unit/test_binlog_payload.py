"""MySQL's binlog formats the library cannot read (replication/mysql_wire.py), on bytes a MySQL 9.7.4 server wrote."""

from __future__ import annotations

import struct

import pytest
import zstandard
from mysqlcapture_worker.gtid import GtidSet
from mysqlcapture_worker.replication import mysql_wire as W

pytestmark = pytest.mark.unit

# The body of a TRANSACTION_PAYLOAD event (checksum excluded) of `INSERT INTO d.t VALUES (1, 'aaa...'), (2, 'b')`
# with binlog_transaction_compression=ON: header fields (compression 0 = zstd, uncompressed 233 bytes, payload
# 146 bytes), end mark, then one zstd frame.
PAYLOAD = bytes.fromhex(
    "0201000301e90101920028b52ffd20e94d040062471924902bc3017807cdcc667742d37785c6510ee6b8a8ffd9b52a2dff6505b4c54d"
    "1fed2d650aff7f4251a0ccbf4f7e7efe7a37440c0e059361d82a05ac5f4775b2cc94a0fac41ba7e51d086939174922d0e3dfe1b7da7451"
    "0148f3c3170f6643beb1a9b49c0b0f00a004e24621e0708d823e3046201801cd810b4658955bceb23410181432002f"
)
# A GTID_TAGGED_LOG_EVENT body for 26907e4a-e7a6-11f1-a682-02fc00000001:mytag:1.
TAGGED = bytes.fromhex(
    "0274000000024c4102fc949d03990222c5039902090204f103000000020404060a6d7974616708080a100c7fa8af8c9bfb6006108d0412"
    "83120b"
)
# The Previous_gtids body the server wrote for 4bb4dbeb-e7a6-11f1-96a0-02fc00000001:1:mytag:1-2:zz:1 (tagged format).
PREVIOUS_GTIDS = bytes.fromhex(
    "01030000000000014bb4dbebe7a611f196a002fc00000001000100000000000000010000000000000002000000000000004bb4dbebe7a6"
    "11f196a002fc000000010a6d797461670100000000000000010000000000000003000000000000004bb4dbebe7a611f196a002fc000000"
    "01047a7a010000000000000001000000000000000200000000000000"
)
# TABLE_MAP body of d.t (id INT, v VARCHAR(100)) with FULL metadata.
TABLE_MAP = bytes.fromhex("6d0000000000010001640001740002030f029001020101000203fcff00040502696401760801000c01c0")


def test_payload_header() -> None:
    header = W.parse_payload_header(PAYLOAD)
    assert (header.compression_name, header.uncompressed_size, header.payload_size) == ("zstd", 233, 146)
    assert header.header_size == 10 and header.header_size + header.payload_size == len(PAYLOAD)


def test_payload_events_are_the_transaction() -> None:
    events = list(W.payload_events(PAYLOAD))
    # BEGIN, TABLE_MAP, WRITE_ROWS, XID: whole events, no checksums, log_pos 0.
    assert [e[4] for e in events] == [2, 19, 30, 16]
    assert [struct.unpack_from("<I", e, 9)[0] for e in events] == [len(e) for e in events] == [67, 61, 78, 27]
    assert all(struct.unpack_from("<I", e, 13)[0] == 0 for e in events)
    assert b"BEGIN" in events[0] and b"a" * 32 in events[2]


def test_uncompressed_and_unknown_payloads() -> None:
    inner = struct.pack("<IBIIIH", 1, 16, 9, 27, 0, 0) + struct.pack("<Q", 77)
    frame = zstandard.ZstdCompressor().compress(inner * 3)
    body = bytes([1, 1, len(frame), 2, 1, 0, 3, 1, len(inner) * 3, 0]) + frame
    assert [e for e in W.payload_events(body)] == [inner] * 3
    plain = bytes([1, 1, len(inner), 2, 3, 0xFC, 0xFF, 0x00, 0]) + inner  # 255 (none): a 3-byte packed integer
    assert list(W.payload_events(plain)) == [inner]
    unknown = bytes([1, 1, len(inner), 2, 1, 7, 0]) + inner
    with pytest.raises(W.WireFormatError, match="binlog_transaction_compression=OFF"):
        list(W.payload_events(unknown))
    with pytest.raises(W.WireFormatError, match="decompressed to 81 bytes, its header says 99"):
        list(W.payload_events(bytes([1, 1, len(frame), 2, 1, 0, 3, 1, 99, 0]) + frame))


def test_varlen_integers() -> None:
    assert W.read_varlen_uint(bytes([0x02]), 0) == (1, 1)
    assert W.read_varlen_uint(bytes([0x41, 0x02]), 0) == (144, 2)
    assert W.read_varlen_uint(bytes([0x83, 0x12, 0x0B]), 0) == (90704, 3)
    assert W.read_varlen_uint(b"\xff" + (2**64 - 1).to_bytes(8, "little"), 0) == (2**64 - 1, 9)
    assert W.read_varlen_int(bytes([0x04]), 0) == (1, 1)
    assert W.read_varlen_int(bytes([0x06]), 0) == (-2, 1)
    for value in (0, 1, 127, 128, 16383, 16384, 2**40, 2**63):
        assert W.read_varlen_uint(W._varlen_uint(value), 0) == (value, len(W._varlen_uint(value)))


def test_tagged_gtid_event() -> None:
    assert W.parse_tagged_gtid(TAGGED) == "26907e4a-e7a6-11f1-a682-02fc00000001:mytag:1"


def test_gtid_sets_encode_as_the_server_writes_them() -> None:
    tagged = GtidSet.parse("4bb4dbeb-e7a6-11f1-96a0-02fc00000001:1:mytag:1-2:zz:1")
    assert W.encode_gtid_set(tagged) == PREVIOUS_GTIDS
    plain = W.encode_gtid_set(GtidSet.parse("4bb4dbeb-e7a6-11f1-96a0-02fc00000001:1-3:5"))
    assert plain[:8] == struct.pack("<Q", 1) and plain[24:] == struct.pack("<QQQQQ", 2, 1, 4, 5, 6)
    assert W.encode_gtid_set(GtidSet.parse("")) == bytes(8)


def test_table_maps_without_vectors_are_left_alone() -> None:
    assert W.rewrite_table_map(TABLE_MAP) is None


def test_vector_columns_are_shown_as_blobs() -> None:
    # d.vec (id INT, v VECTOR(3), b BLOB): types 03 f2 fc, metadata 04 02, optional field 13 (dimensions).
    body = bytes.fromhex(
        "6d0000000000010001640003766563000303f2fc0204020601010002013f0d01030407026964017601620801000c01e0"
    )
    rewrite = W.rewrite_table_map(body)
    assert rewrite is not None and rewrite.table_id == 0x6D and rewrite.vector_columns == (1,)
    assert rewrite.body == body.replace(bytes.fromhex("03f2fc"), bytes.fromhex("03fcfc")).replace(
        bytes.fromhex("0d0103"), b""
    )


def test_columns_present_bitmaps_of_both_flavors() -> None:
    """MySQL sets the unused bits of a rows event's last bitmap byte, MariaDB clears them: both mean every column
    (a "partial image" verdict would send MySQL's rows to the slow reference path)."""
    from mysqlcapture_worker.engine.rows import all_present as _all_present

    assert _all_present(bytes.fromhex("ffff"), 11) and _all_present(bytes.fromhex("ff07"), 11)
    assert not _all_present(bytes.fromhex("fffb"), 11) and not _all_present(bytes.fromhex("fe07"), 11)
    assert _all_present(b"\xff", 8) and not _all_present(b"\x7f", 8)


def test_query_events_lose_their_status_variables_and_nothing_else() -> None:
    status = bytes([0x00, 0, 0, 0, 0, 0x15, 1, 2, 3])  # flags2, then a key the library does not know
    body = struct.pack("<IIBHH", 7, 0, 4, 0, len(status)) + status + b"shop\0" + b"INSERT INTO t VALUES (1)"
    event = struct.pack("<IBIIIH", 1700000000, W.QUERY_EVENT, 1, W.HEADER + len(body), 999, 0) + body
    stripped = W.without_status_vars(event)
    assert stripped[: W.HEADER + 11] == event[: W.HEADER + 11]  # header (its size is the caller's), post-header
    assert stripped[W.HEADER + 11 :] == b"\0\0shop\0INSERT INTO t VALUES (1)"
    assert W.without_status_vars(stripped) is stripped
    with pytest.raises(W.WireFormatError, match="run past its end"):
        W.without_status_vars(event[: W.HEADER + 16])


def test_an_incident_event_body_names_its_incident_and_message() -> None:
    # MySQL 9.7 and MariaDB 10.11 write LOST_EVENTS (1) with a message of their own, or none.
    assert W.parse_incident(struct.pack("<HB", 1, 13) + b"error writing") == ("LOST_EVENTS", "error writing")
    assert W.parse_incident(struct.pack("<HB", 1, 0)) == ("LOST_EVENTS", "")
    assert W.parse_incident(struct.pack("<H", 7)) == ("incident 7", "")
    with pytest.raises(W.WireFormatError, match="incident event shorter"):
        W.parse_incident(b"\x01")
