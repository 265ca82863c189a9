"""A snapshot's connections and reads: the consistent view of a table without a key, and keyset chunks.

No lock is taken, ever: no FLUSH TABLES WITH READ LOCK, no LOCK TABLES, no LOCK INSTANCE (managed MySQL
refuses them, and on a busy primary they stall every writer behind the longest running statement).
Chunks of tables with a key are read in windows (`parallel`); a table without one is read from one
view, opened here:

1. `START TRANSACTION WITH CONSISTENT SNAPSHOT` at REPEATABLE READ: the InnoDB read view of the scan.
2. Its place in the binlog. MariaDB reports the binlog coordinate of that very read view in the
   `binlog_snapshot_file`/`binlog_snapshot_position` status variables (its group commit keeps them
   consistent without a lock): the view is exactly there. MySQL names no such coordinate: the view
   lies between a fence heartbeat committed before it (`fence`) and the binlog status read after it;
   it is exact for a table no transaction in that window touched, which the window log tells once the
   stream stands at the status's coordinate (`control`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import pymysql
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.model import BINARY_TYPES, INTEGER_TYPES, STRING_TYPES, TableDef

from mysqlcapture_worker.snapshot import wire
from mysqlcapture_worker.snapshot.text_values import RowConverter, _charset_decoder, _is_binary, quote
from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)

RawRow = tuple[bytes | None, ...]
_KEY_TYPES = INTEGER_TYPES | STRING_TYPES | BINARY_TYPES | {"year", "decimal", "date", "datetime", "timestamp", "time"}


@dataclass(frozen=True)
class Frontier:
    """Where the stream continues after the view: every transaction before it is in the view, none after."""

    coordinate: Coordinate
    gtid_set: str
    fence: int | None = None  # MySQL: the heartbeat committed before the view (the view lies after it)


class SnapshotView:
    """One connection inside `START TRANSACTION WITH CONSISTENT SNAPSHOT`; values come back as raw bytes."""

    def __init__(self, conn: pymysql.connections.Connection, frontier: Frontier, started: float) -> None:
        self.conn = conn
        self.frontier = frontier
        self.started = started

    @classmethod
    def open(
        cls,
        connect: Callable[..., pymysql.connections.Connection],
        *,
        dialect: Dialect,
        clock: Callable[[], float],
        fence: Callable[[], int] | None = None,
    ) -> SnapshotView:
        """Open the view; `fence` (MySQL) writes a heartbeat committed before the view and returns its value."""
        conn = session(connect)
        try:
            fence_value = fence() if fence is not None and not dialect.snapshot_frontier_from_status else None
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                frontier = _frontier(cur, dialect=dialect, fence=fence_value)
        except BaseException:
            conn.close()
            raise
        log.info("snapshot view opened at %s gtid=%s", frontier.coordinate, frontier.gtid_set)
        return cls(conn, frontier, clock())

    def key_at(self, sql: str, args: list[Any], plan: KeyPlan) -> tuple[Any, ...] | None:
        """The key a boundary query (`plan.boundary`, `plan.last`) answers, as the checkpoint keeps it."""
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            row = cur.fetchone()
        if row is None:
            return None
        return tuple(conv(raw) for conv, raw in zip(plan.key_value, row, strict=True))

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.conn.close()

    def estimate_rows(self, database: str, table: str) -> int:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (database, table),
            )
            row = cur.fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def unique_keys(self, database: str, table: str) -> list[tuple[str, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY' ORDER BY INDEX_NAME, SEQ_IN_INDEX",
                (database, table),
            )
            keys: dict[str, list[str]] = {}
            for index, column in cur.fetchall():
                keys.setdefault(_s(index), []).append(_s(column))
        return sorted((tuple(cols) for cols in keys.values()), key=len)

    def read(
        self, plan: KeyPlan, *, after: tuple[Any, ...] | None, limit: int, upto: tuple[Any, ...] | None = None
    ) -> list[RawRow]:
        """The next `limit` records in key order after the key value `after` (from the start when None).

        Records as the select list gives them: `plan.converter.row` and `.unpack` read both shapes.
        """
        if plan.converter.hexed is not None:
            grouped = plan.select(after, limit, grouped=True, upto=upto)
            with self.conn.cursor() as cur:
                cur.execute(*grouped)
                count, text = cur.fetchone()
            if not int(count):
                return []
            rows: list[RawRow] = [(line,) for line in text.split(b"\n")]
            if len(rows) == int(count):
                return rows
            # Truncated at group_concat_max_len (a chunk larger than max_allowed_packet): one value per row.
            log.debug("chunk of %s larger than group_concat_max_len; reading it row by row", plan.source)
        sql, args = plan.select(after, limit, upto=upto)
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def read_rendered(
        self,
        plan: KeyPlan,
        renderer: Any,
        *,
        after: tuple[Any, ...] | None,
        limit: int,
        upto: tuple[Any, ...] | None = None,
    ) -> Any:
        """The same records as `read`, rendered by the compiled path: a `ResultReader` to `take()` from."""
        sql, args = plan.select(after, limit, upto=upto)
        with self.conn.cursor() as cur:
            query = cur.mogrify(sql, args)
        *_, reader = wire.results(self.conn, query, renderer, rows=limit)
        return reader

    def scan_rendered(self, plan: KeyPlan, renderer: Any, *, batch: int) -> Iterator[Any]:
        """The same rows as `scan`, rendered by the compiled path: a `ResultReader` to `take()` from per batch."""
        return wire.results(
            self.conn, f"SELECT {plan.converter.select_list} FROM {plan.source}", renderer, batch_rows=batch
        )

    def scan(self, plan: KeyPlan, *, batch: int) -> Iterator[list[RawRow]]:
        """Every row of a table without a usable key, streamed (unbuffered) in batches."""
        cur = pymysql.cursors.SSCursor(self.conn)
        try:
            cur.execute(f"SELECT {plan.converter.select_list} FROM {plan.source}")
            while rows := cur.fetchmany(batch):
                yield list(rows)
        finally:
            cur.close()


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def session(connect: Callable[..., pymysql.connections.Connection]) -> pymysql.connections.Connection:
    """A connection for snapshot reads: raw bytes back, TIMESTAMPs in UTC, REPEATABLE READ."""
    # Encoders only (parameters still escape): no decoders, so every value arrives as raw bytes.
    conn = connect(conv=dict(pymysql.converters.encoders), use_unicode=False, autocommit=True)
    try:
        with conn.cursor() as cur:
            # Raw values: the column's own charset bytes, TIMESTAMPs in UTC as the binlog path renders them.
            cur.execute("SET SESSION time_zone = '+00:00', character_set_results = NULL")
            # A chunk may come back as one GROUP_CONCAT value (read()): let it be as long as a packet.
            cur.execute("SET SESSION group_concat_max_len = @@max_allowed_packet")
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        queries.show_generated_keys(conn)  # the key and columns the schema has, from information_schema too
    except BaseException:
        conn.close()
        raise
    return conn


def _frontier(cur: Any, *, dialect: Dialect, fence: int | None) -> Frontier:
    if dialect.snapshot_frontier_from_status:
        at = queries.snapshot_binlog_coordinate(cur.connection)
        return Frontier(at, queries.gtid_at(cur.connection, dialect, at))
    # MySQL: read after the view opened, so at or after it; `fence` is before it.
    binlog = queries.binlog_status(cur.connection, dialect)
    return Frontier(binlog.coordinate, binlog.gtid_executed, fence)


# ------------------------------------------------------------------------------------------ keys
@dataclass(frozen=True)
class KeyPlan:
    """How a table is read: by `key` columns in chunks (keyset pagination), or in one scan when empty."""

    converter: RowConverter
    source: str  # `db`.`table`
    key: tuple[str, ...]
    kind: str  # primary | unique | none
    key_index: tuple[int, ...]
    key_value: tuple[Callable[[bytes], Any], ...]  # raw -> the JSON-able value kept in the checkpoint
    placeholders: tuple[str, ...]

    def last_key(self, row: RawRow) -> tuple[Any, ...]:
        return tuple(conv(row[i]) for conv, i in zip(self.key_value, self.key_index, strict=True))  # type: ignore[arg-type]

    def _greater(self, value: tuple[Any, ...]) -> tuple[str, list[Any]]:
        """`(key) > value`, spelled out: every optimizer turns this into a range scan of the index."""
        cols = [quote(c) for c in self.key]
        ors, args = [], cast(list[Any], [])
        for n in range(len(cols)):
            terms = [f"{cols[i]} = {self.placeholders[i]}" for i in range(n)]
            terms.append(f"{cols[n]} > {self.placeholders[n]}")
            ors.append("(" + " AND ".join(terms) + ")")
            args.extend(value[: n + 1])
        return "(" + " OR ".join(ors) + ")", args

    def where(self, after: tuple[Any, ...] | None, upto: tuple[Any, ...] | None) -> tuple[str, list[Any]]:
        """` WHERE` of the keys in (after, upto]; either end open when None."""
        terms, args = [], cast(list[Any], [])
        if after is not None:
            sql, a = self._greater(after)
            terms.append(sql)
            args.extend(a)
        if upto is not None:
            sql, a = self._greater(upto)
            terms.append(f"NOT {sql}")
            args.extend(a)
        return (" WHERE " + " AND ".join(terms) if terms else ""), args

    def boundary(self, after: tuple[Any, ...] | None, upto: tuple[Any, ...] | None, rows: int) -> tuple[str, list[Any]]:
        """The key `rows` keys after `after` (not past `upto`): read from the index alone, no row is sent."""
        where, args = self.where(after, upto)
        cols = ", ".join(quote(c) for c in self.key)
        order = ", ".join(quote(c) for c in self.key)
        return f"SELECT {cols} FROM {self.source}{where} ORDER BY {order} LIMIT 1 OFFSET {max(0, rows - 1)}", args

    @property
    def integer(self) -> bool:
        """A key of one integer column: its ranges can be cut by value, with no query."""
        return len(self.key) == 1 and self.key_value[0] is int

    def first(self) -> str:
        """The smallest key of the table."""
        cols = ", ".join(quote(c) for c in self.key)
        return f"SELECT {cols} FROM {self.source} ORDER BY {cols} LIMIT 1"

    def last(self, after: tuple[Any, ...] | None = None) -> tuple[str, list[Any]]:
        """The largest key of the table (greater than `after`, when given)."""
        where, args = self.where(after, None)
        cols = ", ".join(quote(c) for c in self.key)
        order = ", ".join(f"{quote(c)} DESC" for c in self.key)
        return f"SELECT {cols} FROM {self.source}{where} ORDER BY {order} LIMIT 1", args

    def select(
        self,
        after: tuple[Any, ...] | None,
        limit: int,
        *,
        grouped: bool = False,
        upto: tuple[Any, ...] | None = None,
    ) -> tuple[str, list[Any]]:
        """The chunk's SELECT; `grouped`: the whole chunk as one value, packed rows joined by newlines.

        Packed rows hold no newline (digits, dates, HEX, commas), and one value per chunk instead of
        one packet per row leaves PyMySQL almost nothing to parse: the read is a few C-level splits.
        """
        cols = [quote(c) for c in self.key]
        order = ", ".join(cols)
        where, args = self.where(after, upto)
        sql = f"SELECT {self.converter.select_list} FROM {self.source}{where} ORDER BY {order} LIMIT {int(limit)}"
        if grouped:
            keys = ", ".join(f"{c} AS _k{i}" for i, c in enumerate(cols))
            inner = (
                f"SELECT {self.converter.select_list} AS _r, {keys} FROM {self.source}{where} "
                f"ORDER BY {order} LIMIT {int(limit)}"
            )
            order_k = ", ".join(f"_k{i}" for i in range(len(cols)))
            sql = f"SELECT COUNT(*), GROUP_CONCAT(_r ORDER BY {order_k} SEPARATOR '\\n') FROM ({inner}) AS _chunk"
        return sql, args


def _key_column(table: TableDef, name: str) -> tuple[Callable[[bytes], Any], str] | None:
    col = table.column(name)
    if col.type not in _KEY_TYPES:
        return None
    if col.type in INTEGER_TYPES or col.type == "year":
        return int, "%s"
    if col.type == "decimal":
        # A DECIMAL compared with a string literal goes through DOUBLE: cast to keep every digit.
        return (lambda raw: raw.decode()), f"CAST(%s AS DECIMAL({col.precision or 65},{col.scale or 0}))"
    if _is_binary(col):
        return (lambda raw: raw.hex()), "UNHEX(%s)"
    if col.type in STRING_TYPES:
        # A string literal takes the column's charset and collation, so `>` follows the ORDER BY.
        return _charset_decoder(table, col), "%s"
    return (lambda raw: raw.decode()), "%s"  # temporal: the literal converts to the column's type


def key_plan(
    table: TableDef, converter: RowConverter, unique_keys: list[tuple[str, ...]], avoid: frozenset[str] = frozenset()
) -> KeyPlan:
    """Chunk by the primary key, else by the shortest unique key of NOT NULL columns (none of `avoid`, lower-case
    names), else none (one scan)."""
    source = f"{quote(table.database)}.{quote(table.name)}"
    candidates: list[tuple[str, tuple[str, ...]]] = []
    if table.primary_key:
        candidates.append(("primary", table.primary_key))
    for key in unique_keys:
        if all(not table.column(c).nullable and c.lower() not in avoid for c in key):
            candidates.append(("unique", key))
    lowered = [n.lower() for n in converter.names]
    for kind, key in candidates:
        parts = [_key_column(table, c) for c in key]
        if any(p is None for p in parts):
            continue
        return KeyPlan(
            converter=converter,
            source=source,
            key=key,
            kind=kind,
            key_index=tuple(lowered.index(c.lower()) for c in key),
            key_value=tuple(p[0] for p in parts if p is not None),
            placeholders=tuple(p[1] for p in parts if p is not None),
        )
    return KeyPlan(converter, source, (), "none", (), (), ())
