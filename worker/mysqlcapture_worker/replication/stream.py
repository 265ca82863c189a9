"""A binlog stream over `mysql-replication` that starts where it is told and never reconnects by itself.

The library's own reconnect (on errors 2013/2006) restarts from its initial settings, not from
where it was: a silent duplicate stream. Here a lost connection surfaces as `StreamDisconnected`
and the caller resumes from its own last position. With `is_mariadb=True` and no GTID the library
ignores the file:pos it is given, so a file:pos start always uses the MySQL dump command, which
MariaDB also serves.

What the library cannot read is handled below it, on the dump connection's packets (`mysql_wire` has the
formats): a TRANSACTION_PAYLOAD (MySQL's `binlog_transaction_compression`) is replaced by its inner events, one
packet at a time as they are decompressed, each given the payload's end as its position; a tagged GTID event is
parsed and handed to the stream beside the library's events, and so is an INCIDENT event (the library skips
it: a capture going past one without a word would lose what the server could not log); the GTID set of a GTID dump
is encoded here, tags included. Events the library would skip or stop at are rewritten into ones it reads
(`_readable`): a MariaDB compressed event (`log_bin_compress`, `mariadb_wire`) into the uncompressed event of its
layout, a LOAD DATA's Execute_load_query into the Query event of its statement, and every Query event loses its
status variables. A MariaDB GTID event's extra flags (a two-phase ALTER's halves) are read beside the library's
event. Once the library has opened the dump, the events every transaction carries are read from the packets by
`hot_events` (the stream's lane), and the library reads only what the lane pushes back to it.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pymysql
from mysqlcapture_api.coordinates import Coordinate
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XAPrepareEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from mysqlcapture_worker.gtid import GtidSet
from mysqlcapture_worker.replication import hot_events, mariadb_wire, mysql_wire, normalize
from mysqlcapture_worker.replication.events import (
    BinlogEvent,
    HeartbeatEvent,
    RowsKind,
    TableMap,
)
from mysqlcapture_worker.replication.events import (
    GtidEvent as NGtidEvent,
)
from mysqlcapture_worker.replication.events import (
    IncidentEvent as NIncidentEvent,
)
from mysqlcapture_worker.replication.events import (
    QueryEvent as NQueryEvent,
)
from mysqlcapture_worker.replication.events import (
    RotateEvent as NRotateEvent,
)
from mysqlcapture_worker.replication.events import (
    XaPrepareEvent as NXaPrepareEvent,
)
from mysqlcapture_worker.replication.events import (
    XidEvent as NXidEvent,
)

log = logging.getLogger(__name__)

TABLE_MAPS_KEPT = 4096
"""TABLE_MAP bodies whose rewrite the dump connection keeps (`_table_map_readable`)."""
DUMP_READ_BUFFER = 256 * 1024
"""The dump's socket is read this much at a time (PyMySQL reads 8 KiB): a rows event is about 8 KiB, and each read
is a system call that gives up the GIL, which a thread busy with Python (the commit loop) then holds for up to the
switch interval (`app.SWITCH_SECONDS`)."""
# Events `_readable` may rewrite for the library (MariaDB's compressed ones besides).
_REWRITTEN = frozenset({mysql_wire.TABLE_MAP_EVENT, mysql_wire.QUERY_EVENT, mysql_wire.EXECUTE_LOAD_QUERY_EVENT})
LOST_CONNECTION_CODES = frozenset({2006, 2013, 2055})
# Server errors worth a reconnect with backoff: the connection or the server went away (2003 cannot connect,
# 1040 too many connections, 1053 shutdown, 1152/1158-1161 network, 1317 interrupted, 1927 and 4031 killed or
# idle-closed), lock contention (1205, 1213), and access refused (1044/1045: during a failover or a password
# rotation the server may not know the user yet). Any other error (an unknown column, a missing table, a
# missing grant on a table) does not go away by retrying: it is fatal, with its message.
RETRYABLE_CODES = LOST_CONNECTION_CODES | frozenset(
    {2003, 1040, 1053, 1152, 1158, 1159, 1160, 1161, 1317, 1927, 4031, 1205, 1213, 1044, 1045}
)
MARIADB_FL_STANDALONE = 0x01
_FRAME = struct.Struct("<HBB")  # a packet's header: its length (low 16 bits, high 8 bits) and sequence number
_NOT_EXPANDED = (-1, 0)


class StreamDisconnected(Exception):
    """The server connection was lost; resume from the last processed position."""


def _raise_if_lost(exc: pymysql.err.OperationalError) -> None:
    """PyMySQL's lost-connection error raised as `StreamDisconnected` (the caller resumes from its position)."""
    if exc.args and exc.args[0] in LOST_CONNECTION_CODES:
        raise StreamDisconnected(str(exc)) from exc


def is_retryable(exc: BaseException) -> bool:
    """True for a lost connection, or a server error that a reconnect with backoff can outlive."""
    if isinstance(exc, StreamDisconnected):
        return True
    if isinstance(exc, pymysql.err.InterfaceError) and exc.args and exc.args[0] == 0:
        return True  # PyMySQL's (0, ''): a statement on a connection already closed (lost in a failover)
    return isinstance(exc, pymysql.err.OperationalError) and bool(exc.args) and exc.args[0] in RETRYABLE_CODES


def is_server_id_clash(exc: BaseException) -> bool:
    """The server dropped the dump because another replica connected with this one's server_id: MariaDB's 4052
    (ER_SLAVE_SAME_ID), MySQL's 1236 naming "the same server_uuid/server_id"."""
    if isinstance(exc, StreamDisconnected):
        exc = exc.__cause__  # type: ignore[assignment]
    if not isinstance(exc, pymysql.err.OperationalError) or not exc.args:
        return False
    return exc.args[0] == 4052 or (exc.args[0] == 1236 and "same server_uuid/server_id" in str(exc.args[-1]))


_COM_BINLOG_DUMP, _COM_BINLOG_DUMP_GTID = 0x12, 0x1E
_FORMAT_DESCRIPTION_EVENT, _CHECKSUM_CRC32 = 15, 1
# What the library is told for a MySQL GTID dump (it must be a set it can parse); the wire carries the real one.
_PLACEHOLDER_GTID_SET = "00000000-0000-0000-0000-000000000001:1"


@dataclass(frozen=True)
class TaggedGtid:
    """A GTID_TAGGED_LOG_EVENT read below the library: its GTID and where it ends."""

    gtid: str
    log_pos: int
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class Incident:
    """An INCIDENT_EVENT read below the library (it skips the type): what it says and where it ends."""

    incident: str
    message: str
    log_pos: int
    timestamp: int
    server_id: int


class SourceConnection(pymysql.connections.Connection):
    """A PyMySQL connection whose handshake waits for the server at most `connect_timeout`, like its TCP connect.

    PyMySQL reads the server's greeting with the read timeout, None by default: where something else listens on the
    port (an HTTP server, the worker's own metrics port) nobody speaks first, and the worker waited for ever, deaf
    to SIGTERM. A greeting that does not come in time, or bytes that are no greeting, is error 2003 naming the
    port."""

    def connect(self, sock: Any = None) -> None:
        reading: float | None = getattr(self, "_read_timeout")  # noqa: B009 (PyMySQL's, untyped)
        if reading is None:
            self._read_timeout = self.connect_timeout
        try:
            super().connect(sock)
        except (pymysql.err.OperationalError, pymysql.err.InternalError) as exc:
            if getattr(self, "server_version", None) is not None or (exc.args and exc.args[0] == 2003):
                raise
            where = f"{self.host}:{self.port}"
            said = (
                f"{where} accepts connections but sent no MySQL greeting within {self.connect_timeout:.0f} s: "
                "something else listens there"
                if "timed out" in str(exc.args[-1])
                else f"{where} answered, but not as a MySQL server does ({exc.args[-1]})"
            )
            raise pymysql.err.OperationalError(2003, said) from exc  # CR_CONN_HOST_ERROR: "unreachable"
        finally:
            self._read_timeout = reading


class _NoAutoReconnectConnection(SourceConnection):
    """A PyMySQL connection whose lost-connection errors are not the library's to handle.

    On the dump connection it also reads what the library cannot (see the module docstring).
    """

    gtid_set: ClassVar[GtidSet | None] = None  # set on a per-stream subclass: the GTID dump's real set
    # PyMySQL's own, read and set by `_read_frame` as its `_read_packet` does.
    _current_timeout: float | None
    _next_seq_id: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.dumping = False
        self.checksum = True  # the server appends a CRC32 to each event: read off the format description event
        # Events read below the library that come before the next event it returns, in binlog order.
        self.aside: list[TaggedGtid | Incident] = []
        self.vector_columns: dict[int, tuple[int, ...]] = {}  # table id -> columns shown to the library as BLOB
        # TABLE_MAP bodies seen, and how each is rewritten (None: as it is): a table's map repeats before every
        # transaction that changes it, and its parse cost a one-row transaction ~4% of its read.
        self.table_maps: dict[bytes, mysql_wire.TableMapRewrite | None] = {}
        self._inner: Any = None  # the inner events of the payload being read
        self._inner_log_pos = 0  # where that payload ends: every inner event's position
        self.inner_start = 0  # where that payload starts
        self.expanded = _NOT_EXPANDED  # (log_pos, start) of the last event read, when it was rewritten (`_readable`)
        self.gtid_extra = (-1, 0)  # (log_pos, extra flags) of the last MariaDB GTID event read
        self.post_headers: bytes | None = None  # per event type, from the format description event
        self.pushed: Any = None  # a packet read by the stream's own lane, for the library to read next
        super().__init__(*args, **kwargs)

    def _write_bytes(self, data: bytes) -> None:
        if len(data) > 4 and data[4] in (_COM_BINLOG_DUMP, _COM_BINLOG_DUMP_GTID):
            self.dumping = True
            # Every reply before the dump has been read whole: nothing is buffered in the reader replaced here.
            rfile = getattr(self, "_rfile")  # noqa: B009 (PyMySQL's, untyped)
            self._rfile = self._sock.makefile("rb", buffering=DUMP_READ_BUFFER)
            rfile.close()  # the socket stays open
            if data[4] == _COM_BINLOG_DUMP_GTID and self.gtid_set is not None:
                data = _with_gtid_set(data, self.gtid_set)
        super()._write_bytes(data)

    def _read_packet(self, packet_type: Any = pymysql.connections.MysqlPacket) -> Any:
        if self.pushed is not None:
            packet, self.pushed = self.pushed, None
            return packet
        if self._inner is not None:
            inner = next(self._inner, None)
            if inner is not None:
                return packet_type(self._readable(self._as_packet(inner)), self.encoding)
            self._inner = None
        if not self.dumping:
            try:
                return super()._read_packet(packet_type)
            except pymysql.err.OperationalError as exc:
                _raise_if_lost(exc)
                raise
        return self._arrived(self._read_frame(), packet_type)

    def next_event(self) -> tuple[bytes, Any]:
        """The stream lane's next dump packet: its bytes, and the packet the library reads in their place; None for
        an event the lane reads as it came (`hot_events.RAW`), whose packet `library_packet` makes only if the lane
        leaves the event to the library. Saves a one-row transaction a packet object and a rewrite per event."""
        if self._inner is None and self.pushed is None:
            data = self._read_frame()
            if len(data) > 1 + mysql_wire.HEADER and data[0] == 0:
                kind = data[5]
                if kind in hot_events.RAW:
                    self.expanded = _NOT_EXPANDED
                    return data, None
                if kind == mariadb_wire.GTID_EVENT:
                    self._note_gtid_extra(data)
                    self.expanded = _NOT_EXPANDED
                    return data, None
            packet = self._arrived(data, pymysql.connections.MysqlPacket)
        else:
            packet = self._read_packet()
        return packet.get_all_data(), packet

    def library_packet(self, data: bytes) -> Any:
        """The packet the library reads for an event `next_event` gave as it came."""
        return self._arrived(data, pymysql.connections.MysqlPacket)

    def _read_frame(self) -> bytes:
        """The next packet's payload, framed and checked as PyMySQL's `_read_packet` does (an error packet raised as
        it raises one, a lost connection as `StreamDisconnected`), without making its packet object."""
        if self._current_timeout != self._read_timeout:
            self._sock.settimeout(self._read_timeout)
            self._current_timeout = self._read_timeout
        parts: list[bytes] = []
        try:
            while True:
                low, high, seq = _FRAME.unpack(self._read_bytes(4))
                size = low + (high << 16)
                if seq != self._next_seq_id:
                    self._force_close()
                    if seq == 0:  # MariaDB sends its shutdown error with sequence number 0
                        raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server during query")
                    raise pymysql.err.InternalError(
                        f"Packet sequence number wrong - got {seq} expected {self._next_seq_id}"
                    )
                self._next_seq_id = (seq + 1) & 0xFF
                parts.append(self._read_bytes(size))
                if size < pymysql.connections.MAX_PACKET_LEN:
                    break
            data: bytes = parts[0] if len(parts) == 1 else b"".join(parts)
            if data[:1] == b"\xff":
                pymysql.connections.MysqlPacket(data, self.encoding).raise_for_error()
        except pymysql.err.OperationalError as exc:
            _raise_if_lost(exc)
            raise
        return data

    def _note_gtid_extra(self, data: bytes) -> None:
        log_pos = struct.unpack_from("<I", data, 14)[0]
        self.gtid_extra = (log_pos, mariadb_wire.gtid_flags_extra(hot_events.event_body(data, self.checksum)))

    def _arrived(self, data: bytes, packet_type: Any) -> Any:
        """The packet the library reads for the dump packet `data` (what it cannot read read here, see the module
        docstring): `data` itself, an event rewritten, or the first inner event of a compressed payload."""
        self.expanded = _NOT_EXPANDED
        if len(data) < 1 + mysql_wire.HEADER or data[0] != 0:
            return packet_type(data, self.encoding)
        kind = data[5]
        if kind == _FORMAT_DESCRIPTION_EVENT:
            size = struct.unpack_from("<I", data, 10)[0]
            self.checksum = data[1 + size - 5] == _CHECKSUM_CRC32  # the algorithm byte before the CRC's room
            self.post_headers = hot_events.post_header_lengths(data[1 : 1 + size])
        elif kind in (
            mysql_wire.TRANSACTION_PAYLOAD_EVENT,
            mysql_wire.GTID_TAGGED_LOG_EVENT,
            mysql_wire.INCIDENT_EVENT,
        ):
            timestamp, _, server_id, size, log_pos, _ = struct.unpack_from("<IBIIIH", data, 1)
            body = hot_events.event_body(data, self.checksum)
            if kind == mysql_wire.GTID_TAGGED_LOG_EVENT:
                self.aside.append(TaggedGtid(mysql_wire.parse_tagged_gtid(body), log_pos, timestamp, server_id))
            elif kind == mysql_wire.INCIDENT_EVENT:
                self.aside.append(Incident(*mysql_wire.parse_incident(body), log_pos, timestamp, server_id))
            else:
                self._inner = mysql_wire.payload_events(body)
                self._inner_log_pos = log_pos
                self.inner_start = log_pos - size
                return self._read_packet(packet_type)
        elif kind == mariadb_wire.GTID_EVENT:
            self._note_gtid_extra(data)
        elif kind in _REWRITTEN or kind in mariadb_wire.UNCOMPRESSED_TYPE:
            readable = self._readable(data)
            if readable is not data:
                # Where the event starts, its size in the binlog no longer being the one the library sees.
                size, log_pos = struct.unpack_from("<II", data, 10)
                self.expanded = (log_pos, log_pos - size)
                return packet_type(readable, self.encoding)
        return packet_type(data, self.encoding)

    def _readable(self, packet: bytes) -> bytes:
        """The packet, or one the library can read in its place: a MariaDB compressed event uncompressed
        (`mariadb_wire`), a LOAD DATA's Execute_load_query event as the Query event of its statement, a Query event
        without its status variables (the worker uses none of them, and the library stops at one it does not know,
        as MySQL 9.7 writes for a DML statement logged as text), a TABLE_MAP with VECTOR columns shown as BLOB."""
        kind = packet[5]
        if kind in mariadb_wire.UNCOMPRESSED_TYPE:
            packet = self._event_packet(packet, mariadb_wire.uncompressed_event)
            kind = packet[5]
        elif kind == mysql_wire.EXECUTE_LOAD_QUERY_EVENT:  # the library does not read its statement
            packet = self._event_packet(packet, mysql_wire.load_query_as_query)
            kind = packet[5]
        if kind == mysql_wire.QUERY_EVENT:
            return self._event_packet(packet, mysql_wire.without_status_vars)
        if kind != mysql_wire.TABLE_MAP_EVENT:
            return packet
        return self._event_packet(packet, self._table_map_readable)

    def _table_map_readable(self, event: bytes) -> bytes:
        """A TABLE_MAP event with VECTOR columns shown as BLOB (which columns, kept in `vector_columns`)."""
        body = event[mysql_wire.HEADER :]
        try:
            rewrite = self.table_maps[body]
        except KeyError:
            if len(self.table_maps) >= TABLE_MAPS_KEPT:
                self.table_maps.clear()
            rewrite = self.table_maps[body] = mysql_wire.rewrite_table_map(body)
        if rewrite is None:
            return event
        self.vector_columns[rewrite.table_id] = rewrite.vector_columns
        return event[: mysql_wire.HEADER] + rewrite.body

    def _event_packet(self, packet: bytes, rewrite: Callable[[bytes], bytes]) -> bytes:
        """`packet` with its event (header and body) rewritten by `rewrite`, its size set again (the checksum's room
        kept, not checked: the library does not check it); `packet` itself when `rewrite` changed nothing."""
        crc = 4 if self.checksum else 0
        size = struct.unpack_from("<I", packet, 10)[0]
        event = packet[1 : 1 + size - crc]
        new = rewrite(event)
        if new is event:
            return packet
        header = bytearray(new[: mysql_wire.HEADER])
        struct.pack_into("<I", header, 9, len(new) + crc)
        return b"\x00" + bytes(header) + new[mysql_wire.HEADER :] + b"\0" * crc

    def _as_packet(self, event: bytes) -> bytes:
        """An inner event as the dump would send it: the payload's end as its position, a checksum's room."""
        header = bytearray(event[: mysql_wire.HEADER])
        size = len(event) + (4 if self.checksum else 0)
        struct.pack_into("<I", header, 9, size)
        struct.pack_into("<I", header, 13, self._inner_log_pos)
        return b"\x00" + bytes(header) + event[mysql_wire.HEADER :] + (b"\0\0\0\0" if self.checksum else b"")


def _with_gtid_set(packet: bytes, gtid_set: GtidSet) -> bytes:
    """A COM_BINLOG_DUMP_GTID packet with its GTID set encoded by `mysql_wire` (tags included)."""
    name_size = struct.unpack_from("<I", packet, 11)[0]
    data_at = 15 + name_size + 8  # binlog name, then the 8-byte position, then the set's size and the set
    encoded = mysql_wire.encode_gtid_set(gtid_set)
    body = packet[4:data_at] + struct.pack("<I", len(encoded)) + encoded
    return struct.pack("<I", len(body))[:3] + packet[3:4] + body


@dataclass(frozen=True)
class ConnectionSettings:
    host: str
    port: int
    user: str
    password: str
    connect_timeout: float = 10.0
    ssl: dict[str, Any] | None = None
    ssl_disabled: bool = False
    password_file: str | None = None  # read at each connection when set (a mounted Secret the kubelet updates)

    def pymysql_kwargs(self) -> dict[str, Any]:
        password = self.password
        if self.password_file:
            try:
                password = Path(self.password_file).read_text().rstrip("\n")
            except OSError:  # gone for a moment (a Secret being replaced): the one read at start
                log.debug("password file %s unreadable; using the password read at start", self.password_file)
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": password,
            "connect_timeout": self.connect_timeout,
            "charset": "utf8mb4",
        }
        if self.ssl_disabled:
            kwargs["ssl_disabled"] = True
        elif self.ssl is not None:
            kwargs["ssl"] = self.ssl
        return kwargs

    def __repr__(self) -> str:  # never print the password
        return f"ConnectionSettings(host={self.host!r}, port={self.port}, user={self.user!r})"


@dataclass(frozen=True)
class GtidStart:
    """A stream start by GTID set (auto-positioning): the server finds the first transaction not in `gtid_set`."""

    gtid_set: str
    mariadb: bool = False  # the set is in MariaDB's dialect (domain-server-seq), sent with MariaDB's dump command


# Where a stream starts: a binlog coordinate, or a GTID set.
StreamStart = Coordinate | GtidStart


_ROWS_KINDS: dict[type, RowsKind] = {
    WriteRowsEvent: RowsKind.INSERT,
    UpdateRowsEvent: RowsKind.UPDATE,
    # binlog_row_value_options=PARTIAL_JSON: listed so that normalize refuses it (the library drops what it is
    # not asked for: a partial update would vanish silently).
    PartialUpdateRowsEvent: RowsKind.UPDATE,
    DeleteRowsEvent: RowsKind.DELETE,
}


class BinlogStream:
    """Iterates normalized events from one replication connection. Not restartable: make a new one."""

    def __init__(
        self,
        settings: ConnectionSettings,
        *,
        replica_server_id: int,
        start: StreamStart,
        heartbeat_seconds: float = 5.0,
        blocking: bool = True,
        report_host: str = "mysqlcapture",
        read_hot_events: bool = True,
    ) -> None:
        """`read_hot_events=False`: every event is read by the library (the reference path `hot_events` is tested
        against)."""
        kwargs: dict[str, Any] = {
            "connection_settings": settings.pymysql_kwargs(),
            "server_id": replica_server_id,
            "blocking": blocking,
            "only_events": [
                TableMapEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                PartialUpdateRowsEvent,
                DeleteRowsEvent,
                QueryEvent,
                XidEvent,
                XAPrepareEvent,
                GtidEvent,
                MariadbGtidEvent,
                RotateEvent,
                HeartbeatLogEvent,
            ],
            "pymysql_wrapper": _NoAutoReconnectConnection,
            "slave_heartbeat": heartbeat_seconds if heartbeat_seconds > 0 else None,
            "freeze_schema": True,
            # Registering makes the worker visible in SHOW SLAVE HOSTS, where a server_id clash shows.
            "report_slave": report_host,
        }
        if isinstance(start, GtidStart) and not start.mariadb:
            # The library cannot encode tagged GTID sets: it is given a placeholder, and the dump command is
            # rewritten with the real set on the wire.
            gtid_set = GtidSet.parse(start.gtid_set, "mysql")
            kwargs["pymysql_wrapper"] = type(
                "_GtidDumpConnection", (_NoAutoReconnectConnection,), {"gtid_set": gtid_set}
            )
            kwargs["auto_position"] = _PLACEHOLDER_GTID_SET
            kwargs["is_mariadb"] = False
        elif isinstance(start, GtidStart):
            kwargs["auto_position"] = start.gtid_set
            kwargs["is_mariadb"] = True
        else:
            kwargs.update(log_file=start.file, log_pos=start.pos, resume_stream=True, is_mariadb=False)
        self._reader = BinLogStreamReader(**kwargs)
        self._blocking = blocking
        self._file = start.file if isinstance(start, Coordinate) else ""
        self._hot = read_hot_events
        self._reading: hot_events.Reading | None = None  # the lane's, once the library has connected

    def close(self) -> None:
        try:
            self._reader.close()
        except Exception:  # closing a dead socket must not mask the original error
            log.debug("error closing binlog stream", exc_info=True)

    def __iter__(self) -> Iterator[BinlogEvent]:
        reader = self._reader
        while True:
            try:
                fast = self._lane()
                ev = reader.fetchone() if fast is hot_events.LIBRARY else None
            except StreamDisconnected:
                raise
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError, ConnectionError, OSError) as exc:
                raise StreamDisconnected(str(exc)) from exc
            # Tagged GTIDs and incidents read below the library came before the event it returned.
            yield from self._aside()
            if fast is not hot_events.LIBRARY:
                if fast is not None:
                    yield fast  # type: ignore[misc]
                continue
            if ev is None:
                if self._blocking:
                    # A blocking dump never ends by itself: the server ended it (the dump thread was
                    # killed, the server is shutting down). Reconnect rather than stop.
                    raise StreamDisconnected("the server ended the binlog dump (EOF)")
                return
            normalized = self._normalize(ev)
            if normalized is not None:
                yield normalized

    def _lane(self) -> BinlogEvent | object | None:
        """The next event read by `hot_events` (None: one the stream drops), or `hot_events.LIBRARY` when the library
        must read it (the packet is then pushed back for it), or when the library has not yet read the dump's start."""
        at = self._reading
        if at is None:
            dump = getattr(self._reader, "_stream_connection", None)
            if not self._hot or dump is None or not dump.dumping:
                return hot_events.LIBRARY
            at = self._reading = hot_events.Reading(dump, self._file, self._start_of)
        conn: Any = at.conn  # this module's _NoAutoReconnectConnection
        if conn.pushed is not None:
            return hot_events.LIBRARY
        data, packet = conn.next_event()
        if len(data) < 1 + mysql_wire.HEADER or data[0] != 0:
            conn.pushed = packet  # an EOF or an error: the library's to end the stream with
            return hot_events.LIBRARY
        fast = hot_events.read(data, at)
        if fast is hot_events.LIBRARY:
            if data[5] == hot_events.TABLE_MAP:
                # A map the lane has not seen: the library reads it even if it knows the table id already (it keeps
                # a table id's first map until the binlog file changes), so that the latest map wins, as the engine
                # expects of a table id the server gave again to a table opened anew.
                self._reader.table_map.pop(int.from_bytes(data[20:26], "little"), None)
            conn.pushed = packet if packet is not None else conn.library_packet(data)
        return fast

    def _aside(self) -> Iterator[NGtidEvent | NIncidentEvent]:
        conn = getattr(self._reader, "_stream_connection", None)
        aside = getattr(conn, "aside", None)
        while aside:
            t = aside.pop(0)
            where = Coordinate(self._file, t.log_pos)
            if isinstance(t, Incident):
                yield NIncidentEvent(t.incident, t.message, where=where, timestamp=t.timestamp, server_id=t.server_id)
            else:
                yield NGtidEvent(
                    gtid=t.gtid, standalone=False, where=where, timestamp=t.timestamp, server_id=t.server_id
                )

    def _event_start(self, ev: Any) -> int:
        return self._start_of(int(ev.packet.log_pos), int(ev.packet.event_size))

    def _start_of(self, log_pos: int, size: int) -> int:
        """Where the event ending at `log_pos` starts in its binlog file (an event of a compressed payload: where the
        payload starts; an event rewritten for the library: where the original starts)."""
        conn = getattr(self._reader, "_stream_connection", None)
        if conn is not None and conn._inner is not None and log_pos == conn._inner_log_pos:
            return int(conn.inner_start)
        if conn is not None and conn.expanded[0] == log_pos:
            return int(conn.expanded[1])
        return max(0, log_pos - size)

    def _keep_table_map(self, data: bytes, checksum: bool, table_map: TableMap) -> None:
        """Keep what a TABLE_MAP packet normalized to, for the lane to read it again (`hot_events.read`)."""
        if self._reading is None:
            return
        kept = self._reading.table_maps
        if len(kept) >= TABLE_MAPS_KEPT:
            kept.clear()
        kept[hot_events.event_body(data, checksum)] = table_map

    def _normalize(self, ev: Any) -> BinlogEvent | None:
        if isinstance(ev, RotateEvent):
            self._file = ev.next_binlog
            if self._reading is not None:
                self._reading.file = ev.next_binlog
            return NRotateEvent(next_start=Coordinate(ev.next_binlog, ev.position), timestamp=ev.timestamp)
        where = Coordinate(self._file, ev.packet.log_pos)
        if isinstance(ev, TableMapEvent):
            table_map = normalize.to_table_map(ev)
            conn = getattr(self._reader, "_stream_connection", None)
            vectors = getattr(conn, "vector_columns", {}).get(table_map.table_id)
            if vectors:
                table_map = normalize.with_vector_columns(table_map, vectors)
            if conn is not None:
                self._keep_table_map(ev.packet.packet.get_all_data(), conn.checksum, table_map)
            return table_map
        kind = _ROWS_KINDS.get(type(ev))
        if kind is not None:
            return normalize.to_rows_event(ev, kind, where, start_pos=self._event_start(ev))
        if isinstance(ev, XidEvent):
            return NXidEvent(xid=ev.xid, where=where, timestamp=ev.timestamp, server_id=ev.packet.server_id)
        if isinstance(ev, XAPrepareEvent):
            xid = (ev.xid_gtrid + ev.xid_bqual).decode("utf-8", "replace")
            return NXaPrepareEvent(
                xid=xid, one_phase=ev.one_phase, where=where, timestamp=ev.timestamp, server_id=ev.packet.server_id
            )
        if isinstance(ev, QueryEvent):
            schema = ev.schema.decode("utf-8", "replace") if isinstance(ev.schema, bytes) else ev.schema
            return NQueryEvent(
                schema=schema or "",
                query=ev.query,
                thread_id=ev.slave_proxy_id,
                where=where,
                timestamp=ev.timestamp,
                server_id=ev.packet.server_id,
                start_pos=self._event_start(ev),
            )
        if isinstance(ev, MariadbGtidEvent):
            standalone = bool(ev.flags & MARIADB_FL_STANDALONE)
            conn = getattr(self._reader, "_stream_connection", None)
            return NGtidEvent(
                gtid=ev.gtid,
                standalone=standalone,
                where=where,
                timestamp=ev.timestamp,
                server_id=ev.packet.server_id,
                begins=not standalone,
                alter=hot_events.alter_phase(getattr(conn, "gtid_extra", (-1, 0)), ev.packet.log_pos),
            )
        if isinstance(ev, GtidEvent):
            return NGtidEvent(
                gtid=ev.gtid, standalone=False, where=where, timestamp=ev.timestamp, server_id=ev.packet.server_id
            )
        if isinstance(ev, HeartbeatLogEvent):
            return HeartbeatEvent(where=Coordinate(ev.ident or self._file, ev.packet.log_pos))
        return None
