"""Normalized binlog events: plain immutable values, independent of the binlog library.

Where an event sits is told by two values. `where` is a `Coordinate`: the event's file and the position where the
NEXT event starts (the header's log_pos, as the server reports it): a transaction ending with this event ends
there, so it is the boundary a checkpoint records. `start_pos` is where this event itself starts in the same file
(Maxwell's `position` of a row or DDL); an event inside a compressed transaction payload starts where the payload
does (all its inner events share the payload's end as `where`); 0 where unknown. The start is a bare position, not
a second Coordinate: an event never spans files, and only rows and DDL events need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from mysqlcapture_api.coordinates import Coordinate

_Event = TypeVar("_Event")


def made(cls: type[_Event], **fields: Any) -> _Event:
    """An event of `cls` with `fields` (any other at its default), made without the frozen dataclass's `__init__`,
    which sets each field with a call of its own: the four events of a one-row transaction cost ~6 us so. For the
    stream's lane (`hot_events`), whose values are read off the binlog's headers as the fields' types."""
    event = object.__new__(cls)
    event.__dict__.update(fields)
    return event


class RowsKind(StrEnum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class ColumnMeta:
    """Binlog-level description of one column, from a TABLE_MAP event.

    `type_code` is the MySQL field type as it appears in row images, with STRING columns that
    are really ENUM/SET resolved to ENUM (247) / SET (248). The metadata fields are set only for
    the types that carry them.
    """

    type_code: int
    max_length: int | None = None  # VARCHAR/STRING: declared max byte length
    length_size: int | None = None  # BLOB/GEOMETRY/JSON: bytes of the length prefix
    precision: int | None = None  # NEWDECIMAL
    decimals: int | None = None  # NEWDECIMAL
    fsp: int | None = None  # TIME2/DATETIME2/TIMESTAMP2
    bits: int | None = None  # BIT: number of bits
    size: int | None = None  # ENUM/SET: bytes in the row image; FLOAT/DOUBLE: pack length
    nullable: bool = True


@dataclass(frozen=True)
class TableMap:
    """A TABLE_MAP event. The optional-metadata fields are None with binlog_row_metadata=MINIMAL."""

    table_id: int
    database: str
    table: str
    columns: tuple[ColumnMeta, ...]
    column_names: tuple[str, ...] | None = None
    unsigned: tuple[bool, ...] | None = None  # per column (False for non-numeric columns)
    charsets: tuple[int | None, ...] | None = None  # collation id per column, None where not a string
    enum_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, ENUM and SET members
    primary_key: tuple[int, ...] | None = None  # column indexes


@dataclass(frozen=True)
class RowsEvent:
    """A WRITE/UPDATE/DELETE_ROWS event, rows still encoded (decoding is the decoder's job)."""

    kind: RowsKind
    table_id: int
    where: Coordinate  # where the next event starts
    timestamp: int
    server_id: int
    columns_present: bytes  # bitmap of the (before) image columns
    columns_present_after: bytes | None  # UPDATE only: bitmap of the after image
    body: bytes  # the encoded rows
    column_count: int
    start_pos: int = 0  # where this event starts in `where.file` (0: unknown)
    flags: int = 0  # the rows event's flags (STMT_END_F, NO_FOREIGN_KEY_CHECKS_F, USE_SQL_FOREIGN_KEY_F, ...)


@dataclass(frozen=True)
class GtidEvent:
    gtid: str  # "uuid:n" (MySQL) or "domain-server-seq" (MariaDB)
    standalone: bool  # MariaDB FL_STANDALONE: a DDL or non-transactional statement with no COMMIT
    where: Coordinate  # where the next event starts
    timestamp: int
    server_id: int
    # The GTID event itself opens the transaction, as a BEGIN statement does (MariaDB's without FL_STANDALONE: it
    # writes no BEGIN); the transaction then ends at its commit, not at a statement inside it.
    begins: bool = False
    # MariaDB's ALTER logged in two phases (binlog_alter_two_phase): "start" when it begins (rows of the table still
    # come in its old form), "commit" when it took effect, "rollback" when it did not; None for any other GTID.
    alter: str | None = None


@dataclass(frozen=True)
class QueryEvent:
    """A Query event: BEGIN / COMMIT / ROLLBACK or a statement (DDL) in database `schema`."""

    schema: str
    query: str
    thread_id: int
    where: Coordinate  # where the next event starts
    timestamp: int
    server_id: int
    start_pos: int = 0  # where this event starts in `where.file` (0: unknown)


@dataclass(frozen=True)
class XidEvent:
    xid: int
    where: Coordinate  # where the next event starts: the boundary after the transaction
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class XaPrepareEvent:
    """An XA transaction's XA_PREPARE_LOG_EVENT: `one_phase` (XA COMMIT ... ONE PHASE) ends and commits it like an
    Xid event; otherwise its rows take effect only at a later XA COMMIT statement (or never: XA ROLLBACK)."""

    xid: str  # the XA transaction's gtrid and bqual, as text
    one_phase: bool
    where: Coordinate  # where the next event starts
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class IncidentEvent:
    """An INCIDENT_EVENT: the server changed rows it could not write to its binlog (e.g. a statement on a
    non-transactional table that outgrew `max_binlog_stmt_cache_size`); which rows, the binlog does not say."""

    incident: str  # LOST_EVENTS
    message: str  # the server's words, often empty
    where: Coordinate  # where the next event starts
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class RotateEvent:
    """The stream continues at `next_start` (the next file's first event, or wherever a dump started)."""

    next_start: Coordinate
    timestamp: int


@dataclass(frozen=True)
class HeartbeatEvent:
    """The server's replication heartbeat: nothing new; `where` is its current position."""

    where: Coordinate


BinlogEvent = (
    TableMap
    | RowsEvent
    | GtidEvent
    | QueryEvent
    | XidEvent
    | XaPrepareEvent
    | IncidentEvent
    | RotateEvent
    | HeartbeatEvent
)
