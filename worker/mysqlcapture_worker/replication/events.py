"""Normalized binlog events: plain immutable values, independent of the binlog library."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
class BinlogCoordinate:
    """Where an event sits: the file, the position where the NEXT event starts, and where this one starts (Maxwell's
    `position` of a row or DDL; an event inside a compressed transaction payload starts where the payload does;
    0 where unknown)."""

    file: str
    next_pos: int
    start_pos: int = 0


@dataclass(frozen=True)
class RowsEvent:
    """A WRITE/UPDATE/DELETE_ROWS event, rows still encoded (decoding is the decoder's job)."""

    kind: RowsKind
    table_id: int
    where: BinlogCoordinate
    timestamp: int
    server_id: int
    columns_present: bytes  # bitmap of the (before) image columns
    columns_present_after: bytes | None  # UPDATE only: bitmap of the after image
    body: bytes  # the encoded rows
    column_count: int


@dataclass(frozen=True)
class GtidEvent:
    gtid: str  # "uuid:n" (MySQL) or "domain-server-seq" (MariaDB)
    standalone: bool  # MariaDB FL_STANDALONE: a DDL or non-transactional statement with no COMMIT
    where: BinlogCoordinate
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class QueryEvent:
    """A Query event: BEGIN / COMMIT / ROLLBACK or a statement (DDL) in database `schema`."""

    schema: str
    query: str
    thread_id: int
    where: BinlogCoordinate
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class XidEvent:
    xid: int
    where: BinlogCoordinate
    timestamp: int
    server_id: int


@dataclass(frozen=True)
class RotateEvent:
    next_file: str
    next_pos: int
    timestamp: int


@dataclass(frozen=True)
class HeartbeatEvent:
    """The server's replication heartbeat: nothing new; `where` is its current position."""

    where: BinlogCoordinate


BinlogEvent = TableMap | RowsEvent | GtidEvent | QueryEvent | XidEvent | RotateEvent | HeartbeatEvent
