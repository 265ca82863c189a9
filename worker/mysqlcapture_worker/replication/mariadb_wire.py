"""MariaDB's compressed binlog events (`log_bin_compress=ON`), which mysql-replication 1.0.17 does not read, as
pure functions over bytes.

With `log_bin_compress=ON` MariaDB writes a statement longer than `log_bin_compress_min_len` as
QUERY_COMPRESSED_EVENT (165) and a rows event whose row images are as long as WRITE/UPDATE/DELETE_ROWS_COMPRESSED
(166-168 in the v1 layout, 169-171 in the v2 layout). Only the variable part is compressed: a statement's text, a
rows event's row images; the post-header, the database name, the column count and the columns-present bitmaps are
as in the uncompressed event. The compressed part (sql/log_event.cc, binlog_buf_compress) is one header byte
(bit 7 set; bits 4-6 the algorithm, 0 for zlib, the only one; bits 0-2 the byte count of the length), the
uncompressed length big-endian in that many bytes, then a zlib stream.

The library skips event types it does not know, so unread, these events would lose a statement or a transaction's
rows without a word. `uncompressed_event` turns one into the event of the same layout the library reads.

GTID events: the library reads the GTID and its first flags byte only. `gtid_flags_extra` reads the extra flags
after them, which mark the two halves of an ALTER logged in two phases (`binlog_alter_two_phase=ON`): START ALTER
when it begins, then COMMIT ALTER (or ROLLBACK ALTER) when it ends, each carrying the statement's text.
"""

from __future__ import annotations

import struct
import zlib

from mysqlcapture_worker.replication.mysql_wire import HEADER, WireFormatError, read_packed_uint

QUERY_EVENT = 2
# Each compressed type and the uncompressed type of the same layout.
UNCOMPRESSED_TYPE = {165: QUERY_EVENT, 166: 23, 167: 24, 168: 25, 169: 30, 170: 31, 171: 32}
_UPDATES = frozenset({167, 170})  # two columns-present bitmaps: the before image's and the after image's
_V2 = frozenset({169, 170, 171})  # the v2 post-header: an extra-data length (itself included) and the data
_QUERY_POST_HEADER = struct.Struct("<IIBHH")  # thread id, execution time, database name length, error, status length
_ROWS_POST_HEADER = 8  # table id (6 bytes), flags (2)


def uncompress(data: bytes) -> bytes:
    """The bytes MariaDB's binlog_buf_compress compressed into `data`."""
    if not data or not data[0] & 0x80:
        raise WireFormatError("a compressed binlog event's data does not start with a compression header")
    algorithm, width = (data[0] >> 4) & 0x07, data[0] & 0x07
    if algorithm != 0:
        raise WireFormatError(f"a compressed binlog event uses compression algorithm {algorithm} (only zlib is known)")
    if not 1 <= width <= 4 or len(data) < 1 + width:
        raise WireFormatError(f"a compressed binlog event's length takes {width} bytes")
    size = int.from_bytes(data[1 : 1 + width], "big")
    try:
        out = zlib.decompress(data[1 + width :])
    except zlib.error as exc:
        raise WireFormatError(f"a compressed binlog event does not uncompress: {exc}") from exc
    if len(out) != size:
        raise WireFormatError(f"a compressed binlog event uncompressed to {len(out)} bytes, not {size}")
    return out


def _plain_part(kind: int, body: bytes) -> int:
    """Where the compressed part of an event body of compressed type `kind` starts."""
    if kind == 165:
        _, _, db_length, _, status_length = _QUERY_POST_HEADER.unpack_from(body)
        return _QUERY_POST_HEADER.size + status_length + db_length + 1  # the database name ends with a NUL
    at = _ROWS_POST_HEADER
    if kind in _V2:
        at += struct.unpack_from("<H", body, at)[0]
    columns, at = read_packed_uint(body, at)
    return at + (columns + 7) // 8 * (2 if kind in _UPDATES else 1)


def uncompressed_event(event: bytes) -> bytes:
    """A compressed event (header and body, no checksum) as the uncompressed event of its layout: the same header
    but for the type and the size (which counts no checksum: the caller adds the checksum's room and counts it)."""
    kind = event[4]
    body = event[HEADER:]
    try:
        plain = _plain_part(kind, body)
    except (struct.error, IndexError, WireFormatError) as exc:
        raise WireFormatError(f"a compressed binlog event of type {kind} is cut short") from exc
    if plain > len(body):
        raise WireFormatError(f"a compressed binlog event of type {kind} is cut short")
    new_body = body[:plain] + uncompress(body[plain:])
    header = bytearray(event[:HEADER])
    header[4] = UNCOMPRESSED_TYPE[kind]
    struct.pack_into("<I", header, 9, HEADER + len(new_body))
    return bytes(header) + new_body


GTID_EVENT = 162
_FL_GROUP_COMMIT_ID, _FL_PREPARED_XA, _FL_COMPLETED_XA = 0x02, 0x40, 0x80
START_ALTER, COMMIT_ALTER, ROLLBACK_ALTER = 0x02, 0x04, 0x08  # the extra flags of a two-phase ALTER's halves


def gtid_flags_extra(body: bytes) -> int:
    """The extra flags of a GTID event's body (checksum excluded): after the sequence number (8 bytes), the domain
    (4), the flags (1), a commit id (8) when flagged, an XA transaction's xid when flagged; 0 when none follow."""
    if len(body) < 13:
        raise WireFormatError("a GTID event is cut short")
    flags = body[12]
    at = 13 + (8 if flags & _FL_GROUP_COMMIT_ID else 0)
    if flags & (_FL_PREPARED_XA | _FL_COMPLETED_XA):
        if len(body) < at + 6:
            raise WireFormatError("a GTID event's xid is cut short")
        at += 6 + body[at + 4] + body[at + 5]  # format id, gtrid and bqual lengths, then both
    return body[at] if at < len(body) else 0
