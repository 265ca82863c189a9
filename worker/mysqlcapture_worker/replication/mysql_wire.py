"""MySQL 8.0.20+ binlog formats that mysql-replication 1.0.17 does not read, as pure functions over bytes.

- TRANSACTION_PAYLOAD (event type 40, `binlog_transaction_compression=ON`): a header of (type, length, value)
  fields, each a packed integer, up to an end mark; then the transaction's events compressed as one zstd frame.
  The inner events are whole events (19-byte header and body) without checksums, and their `log_pos` is 0.
- GTID_TAGGED_LOG_EVENT (type 42, tagged GTIDs `uuid:tag:n`, 8.3+): a message of MySQL's serialization library:
  format version, size and the last non-ignorable field id, then (field id, value) pairs, every integer in its
  variable-length encoding. Fields 0-3 are the flags, the uuid (16 one-byte integers), gno and tag.
- The GTID set of COM_BINLOG_DUMP_GTID in the tagged format (8.3+), for sets that hold tags.
- TABLE_MAP events of tables with a VECTOR column (9.0+): column type 242, which the library cannot size, and an
  optional metadata field (13, the dimensions) it cannot name. `rewrite_table_map` shows it a BLOB (same metadata:
  the length's byte count; same row format: a length, then the float32 values) and drops the fields it would choke
  on; the stream puts the VECTOR type back.
- Query events' status variables, which the library reads one by one and stops at one it does not know (MySQL 9.7
  writes one for a DML statement logged as text): the worker uses none, and the library is shown an empty block.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import zstandard

from mysqlcapture_worker.gtid import GtidSet

QUERY_EVENT = 2
EXECUTE_LOAD_QUERY_EVENT = 18
TABLE_MAP_EVENT = 19
TRANSACTION_PAYLOAD_EVENT = 40
GTID_TAGGED_LOG_EVENT = 42
INCIDENT_EVENT = 26  # both flavors: the server could not log changes it made (MySQL's and MariaDB's LOST_EVENTS)
HEADER = 19  # the common event header: timestamp, type, server_id, event_size, log_pos, flags
_HEADER = struct.Struct("<IBIIIH")

# Transaction payload header fields and compression types (MySQL's binary_log::transaction::compression).
_PAYLOAD_END_MARK, _PAYLOAD_SIZE, _COMPRESSION_TYPE, _UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NONE = 0, 255
_COMPRESSION_NAMES = {ZSTD: "zstd", NONE: "none"}


class WireFormatError(ValueError):
    """Bytes that do not follow the format they claim to."""


# -- MySQL's packed integers (net_field_length): TRANSACTION_PAYLOAD headers, TABLE_MAP metadata ----------------
def read_packed_uint(buf: bytes, off: int) -> tuple[int, int]:
    """A packed integer (1, 3, 4 or 9 bytes) at `off`: (value, next offset)."""
    first = buf[off]
    if first < 251:
        return first, off + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise WireFormatError(f"bad packed integer {first:#x} at offset {off}")
    return int.from_bytes(buf[off + 1 : off + 1 + width], "little"), off + 1 + width


# -- the serialization library's variable-length integers ----------------------------------------------------------
def read_varlen_uint(buf: bytes, off: int) -> tuple[int, int]:
    """The count of trailing one bits of the first byte says how many bytes follow it (8: a plain 64-bit value)."""
    first = buf[off]
    extra = 0
    while extra < 8 and first & (1 << extra):
        extra += 1
    end = off + 1 + extra
    if end > len(buf):
        raise WireFormatError(f"variable-length integer at offset {off} runs past the end")
    if extra == 8:
        return int.from_bytes(buf[off + 1 : end], "little"), end
    return int.from_bytes(buf[off:end], "little") >> (extra + 1), end


def read_varlen_int(buf: bytes, off: int) -> tuple[int, int]:
    """A signed value: the sign in the lowest bit of the unsigned one (zigzag)."""
    raw, end = read_varlen_uint(buf, off)
    return (raw >> 1) ^ -(raw & 1), end


# -- TRANSACTION_PAYLOAD ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PayloadHeader:
    compression: int
    payload_size: int  # compressed bytes after the header
    uncompressed_size: int
    header_size: int  # bytes of the header fields, end mark included

    @property
    def compression_name(self) -> str:
        return _COMPRESSION_NAMES.get(self.compression, f"unknown ({self.compression})")


def parse_payload_header(body: bytes) -> PayloadHeader:
    """The header of a TRANSACTION_PAYLOAD event's body (after the common header, checksum excluded)."""
    fields: dict[int, int] = {}
    off = 0
    while True:
        if off >= len(body):
            raise WireFormatError("transaction payload header has no end mark")
        kind, off = read_packed_uint(body, off)
        if kind == _PAYLOAD_END_MARK:
            break
        length, off = read_packed_uint(body, off)
        value, _ = read_packed_uint(body, off)
        fields[kind] = value
        off += length
    if _PAYLOAD_SIZE not in fields:
        raise WireFormatError("transaction payload header names no payload size")
    return PayloadHeader(
        compression=fields.get(_COMPRESSION_TYPE, NONE),
        payload_size=fields[_PAYLOAD_SIZE],
        uncompressed_size=fields.get(_UNCOMPRESSED_SIZE, fields[_PAYLOAD_SIZE]),
        header_size=off,
    )


def _read_exactly(stream: io.RawIOBase | io.BufferedIOBase | zstandard.ZstdDecompressionReader, n: int) -> bytes:
    parts: list[bytes] = []
    missing = n
    while missing:
        chunk = stream.read(missing)
        if not chunk:
            break
        parts.append(chunk)
        missing -= len(chunk)
    return b"".join(parts)


def payload_events(body: bytes) -> Iterator[bytes]:
    """The inner events of a TRANSACTION_PAYLOAD body, one at a time (header and body, no checksum).

    The payload is decompressed as a stream: memory holds the compressed transaction and one inner event, never
    the whole uncompressed transaction (a million-row transaction is hundreds of megabytes uncompressed).
    """
    header = parse_payload_header(body)
    data = body[header.header_size : header.header_size + header.payload_size]
    if len(data) != header.payload_size:
        raise WireFormatError(f"transaction payload holds {len(data)} bytes, its header says {header.payload_size}")
    source: io.BytesIO | zstandard.ZstdDecompressionReader
    if header.compression == ZSTD:
        source = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_size=1 << 16)
    elif header.compression == NONE:
        source = io.BytesIO(data)
    else:
        raise WireFormatError(
            f"transaction payload compressed with {header.compression_name}, which this worker cannot read: "
            "set binlog_transaction_compression=OFF on the source, or upgrade mysqlcapture"
        )
    total = 0
    while True:
        head = _read_exactly(source, HEADER)
        if not head:
            break
        if len(head) != HEADER:
            raise WireFormatError("transaction payload ends inside an event header")
        size = _HEADER.unpack(head)[3]
        if size < HEADER:
            raise WireFormatError(f"inner event of {size} bytes in a transaction payload")
        rest = _read_exactly(source, size - HEADER)
        if len(rest) != size - HEADER:
            raise WireFormatError("transaction payload ends inside an event")
        total += size
        yield head + rest
    if total != header.uncompressed_size:
        raise WireFormatError(
            f"transaction payload decompressed to {total} bytes, its header says {header.uncompressed_size}"
        )


# -- INCIDENT_EVENT ------------------------------------------------------------------------------------------------
INCIDENTS = {1: "LOST_EVENTS"}  # the one incident either server defines (INCIDENT_LOST_EVENTS)


def parse_incident(body: bytes) -> tuple[str, str]:
    """(the incident's name, the server's message) of an INCIDENT_EVENT body, checksum excluded: a 2-byte incident
    number, then the message, one length byte before it."""
    if len(body) < 2:
        raise WireFormatError("incident event shorter than its incident number")
    number = struct.unpack_from("<H", body)[0]
    size = body[2] if len(body) > 2 else 0
    message = body[3 : 3 + size].decode("utf-8", "replace")
    return INCIDENTS.get(number, f"incident {number}"), message


# -- GTID_TAGGED_LOG_EVENT -------------------------------------------------------------------------------------------
def parse_tagged_gtid(body: bytes) -> str:
    """`uuid:tag:gno` (or `uuid:gno` when the tag is empty) of a GTID_TAGGED_LOG_EVENT body, checksum excluded."""
    off = 0
    _version, off = read_varlen_uint(body, off)
    _size, off = read_varlen_uint(body, off)
    _last_non_ignorable, off = read_varlen_uint(body, off)
    uuid = b""
    gno: int | None = None
    tag = ""
    for expected in range(4):
        field, off = read_varlen_uint(body, off)
        if field != expected:
            raise WireFormatError(f"tagged GTID event: field {field} where field {expected} was expected")
        if field == 0:  # gtid_flags
            _flags, off = read_varlen_uint(body, off)
        elif field == 1:  # the source uuid, as 16 one-byte integers
            octets = []
            for _ in range(16):
                octet, off = read_varlen_uint(body, off)
                octets.append(octet)
            uuid = bytes(octets)
        elif field == 2:
            gno, off = read_varlen_int(body, off)
        else:
            length, off = read_varlen_uint(body, off)
            tag = body[off : off + length].decode("ascii")
            off += length
    assert gno is not None
    h = uuid.hex()
    text = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return f"{text}:{tag}:{gno}" if tag else f"{text}:{gno}"


# -- the GTID set of COM_BINLOG_DUMP_GTID ----------------------------------------------------------------------------
def _varlen_uint(value: int) -> bytes:
    for extra in range(8):
        if value < 1 << (7 * (extra + 1)):
            return ((value << (extra + 1)) | ((1 << extra) - 1)).to_bytes(extra + 1, "little")
    return b"\xff" + value.to_bytes(8, "little")


def encode_gtid_set(gtid_set: GtidSet) -> bytes:
    """MySQL's binary GTID set: the untagged format when no sid has a tag, else the tagged one (8.3+)."""
    tagged = any(":" in sid for sid, _ in gtid_set.sids)
    n = len(gtid_set.sids)
    out = [struct.pack("<Q", (1 << 56) | (n << 8) | 1) if tagged else struct.pack("<Q", n)]
    for sid, intervals in gtid_set.sids:
        uuid, _, tag = sid.partition(":")
        out.append(bytes.fromhex(uuid.replace("-", "")))
        if tagged:
            out.append(_varlen_uint(len(tag)) + tag.encode("ascii"))
        out.append(struct.pack("<Q", len(intervals)))
        out.extend(struct.pack("<QQ", lo, hi + 1) for lo, hi in intervals)  # [start, end)
    return b"".join(out)


# -- TABLE_MAP for the library ----------------------------------------------------------------------------------------
VECTOR, BLOB = 242, 252
_LAST_KNOWN_OPTIONAL_FIELD = 12  # COLUMN_VISIBILITY: the last optional metadata field mysql-replication 1.0.17 reads


@dataclass(frozen=True)
class TableMapRewrite:
    body: bytes  # the TABLE_MAP body the library can read
    table_id: int
    vector_columns: tuple[int, ...]  # indexes of the columns shown as BLOB


def rewrite_table_map(body: bytes) -> TableMapRewrite | None:
    """A TABLE_MAP body (post-header included, checksum excluded) the library can read; None when it already can."""
    table_id = int.from_bytes(body[0:6], "little")
    off = 8  # table id, flags
    off += body[off] + 2  # schema: length, name, NUL
    off += body[off] + 2  # table
    count, off = read_packed_uint(body, off)
    types_at = off
    types = body[types_at : types_at + count]
    off += count
    meta_len, off = read_packed_uint(body, off)
    off += meta_len + (count + 7) // 8  # column metadata, null bitmap
    optional_at = off
    kept: list[bytes] = []
    dropped = False
    while off < len(body):
        start = off
        kind = body[off]
        length, off = read_packed_uint(body, off + 1)
        off += length
        if kind > _LAST_KNOWN_OPTIONAL_FIELD:
            dropped = True
        else:
            kept.append(body[start:off])
    if off != len(body):
        raise WireFormatError("TABLE_MAP optional metadata overruns the event")
    vectors = tuple(i for i, t in enumerate(types) if t == VECTOR)
    if not vectors and not dropped:
        return None
    new_types = bytes(BLOB if t == VECTOR else t for t in types)
    new_body = body[:types_at] + new_types + body[types_at + count : optional_at] + b"".join(kept)
    return TableMapRewrite(new_body, table_id, vectors)


# -- QUERY ------------------------------------------------------------------------------------------------------------
_QUERY_STATUS_LENGTH = HEADER + 11  # after the thread id (4), execution time (4), db name length (1), error code (2)


def load_query_as_query(event: bytes) -> bytes:
    """An EXECUTE_LOAD_QUERY event (a LOAD DATA logged as its text; header and body, no checksum) as the Query
    event of its statement: the post-header's own fields (file id, where its name is in the text, the duplicate
    handling: 13 bytes after the Query's) dropped; its header's size is the caller's to set."""
    extra = _QUERY_STATUS_LENGTH + 2
    if len(event) < extra + 13:
        raise WireFormatError("an Execute_load_query event is cut short")
    header = bytearray(event[:HEADER])
    header[4] = QUERY_EVENT
    return bytes(header) + event[HEADER:extra] + event[extra + 13 :]


def without_status_vars(event: bytes) -> bytes:
    """A Query event (header and body, no checksum) with an empty status-variables block: its header's size is the
    caller's to set. `event` itself when the block is empty already."""
    if len(event) < _QUERY_STATUS_LENGTH + 2:
        raise WireFormatError("a Query event is cut short")
    length = struct.unpack_from("<H", event, _QUERY_STATUS_LENGTH)[0]
    if length == 0:
        return event
    if _QUERY_STATUS_LENGTH + 2 + length > len(event):
        raise WireFormatError("a Query event's status variables run past its end")
    return event[:_QUERY_STATUS_LENGTH] + b"\0\0" + event[_QUERY_STATUS_LENGTH + 2 + length :]
