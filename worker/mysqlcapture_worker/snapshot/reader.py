"""The consistent view a snapshot reads (lock, frontier, REPEATABLE READ transaction) and its chunked reads.

Opening a view, as mysqldump --single-transaction --master-data does, so that the rows read and the
binlog coordinate the stream continues from describe the same moment:

1. `FLUSH TABLES WITH READ LOCK` (needs RELOAD): every commit waits, so the binlog position and the
   snapshot below see the same set of transactions. The global form, not `FLUSH TABLES t1, t2 WITH
   READ LOCK`: the per-table form lets commits to other tables move the binlog on, so on MySQL the
   position read next would not describe the snapshot. The lock is held for a few statements only.
2. `START TRANSACTION WITH CONSISTENT SNAPSHOT` at REPEATABLE READ: the InnoDB read view of every
   chunk read later.
3. The frontier. MariaDB reports the binlog coordinate of that very read view in the
   `binlog_snapshot_file`/`binlog_snapshot_position` status variables (its group commit makes the
   two consistent even without the lock); we use them on MariaDB, and the binlog status (`SHOW BINARY
   LOG STATUS` on 8.2+, `SHOW MASTER STATUS` before: `source.dialect`), valid only because the lock is
   held, on MySQL. The GTID set is `BINLOG_GTID_POS()` of that coordinate
   on MariaDB, `gtid_executed` on MySQL.
4. `UNLOCK TABLES`; the chunks are read from the transaction while writers carry on.

Without RELOAD, on MariaDB the view is still consistent for transactional (InnoDB) tables by step 3,
and the worker warns; on MySQL the grant is required.
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
from mysqlcapture_worker.source.checks import SourceConfigError
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)

RawRow = tuple[bytes | None, ...]
_KEY_TYPES = INTEGER_TYPES | STRING_TYPES | BINARY_TYPES | {"year", "decimal", "date", "datetime", "timestamp", "time"}


@dataclass(frozen=True)
class Frontier:
    """Where the stream continues after the view: every transaction before it is in the view, none after."""

    coordinate: Coordinate
    gtid_set: str
    locked: bool  # FLUSH TABLES WITH READ LOCK was taken


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
        while_locked: Callable[[], None] | None = None,
    ) -> SnapshotView:
        """Open the view; `while_locked` runs with the global read lock held (schema capture: no DDL can pass)."""
        # Encoders only (parameters still escape): no decoders, so every value arrives as raw bytes.
        conn = connect(conv=dict(pymysql.converters.encoders), use_unicode=False, autocommit=True)
        try:
            with conn.cursor() as cur:
                # Raw values: the column's own charset bytes, TIMESTAMPs in UTC as the binlog path renders them.
                cur.execute("SET SESSION time_zone = '+00:00', character_set_results = NULL")
                # A chunk may come back as one GROUP_CONCAT value (read()): let it be as long as a packet.
                cur.execute("SET SESSION group_concat_max_len = @@max_allowed_packet")
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                locked = True
                try:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                except pymysql.err.OperationalError as exc:
                    if exc.args[0] not in (1044, 1045, 1227):
                        raise
                    if not dialect.snapshot_frontier_from_status:
                        # MySQL names no binlog coordinate of a read view: only the lock makes the frontier exact.
                        raise SourceConfigError(
                            f"a snapshot on {dialect.version} needs FLUSH TABLES WITH READ LOCK for a few statements, "
                            f"which the capture user may not run ({exc.args[-1]}): GRANT RELOAD ON *.* to the "
                            "capture user, or set spec.snapshot.mode: never",
                            "MissingGrant",
                        ) from exc
                    locked = False
                    log.warning(
                        "snapshot without FLUSH TABLES WITH READ LOCK (%s): consistent for InnoDB tables through "
                        "binlog_snapshot_position; GRANT RELOAD to lock non-transactional tables too",
                        exc.args[-1],
                    )
                try:
                    if while_locked is not None:
                        while_locked()
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                    frontier = _frontier(cur, dialect=dialect, locked=locked)
                finally:
                    if locked:
                        cur.execute("UNLOCK TABLES")
        except BaseException:
            conn.close()
            raise
        log.info("snapshot view opened at %s gtid=%s", frontier.coordinate, frontier.gtid_set)
        return cls(conn, frontier, clock())

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

    def read(self, plan: KeyPlan, *, after: tuple[Any, ...] | None, limit: int) -> list[RawRow]:
        """The next `limit` records in key order after the key value `after` (from the start when None).

        Records as the select list gives them: `plan.converter.row` and `.unpack` read both shapes.
        """
        if plan.converter.hexed is not None:
            grouped = plan.select(after, limit, grouped=True)
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
        sql, args = plan.select(after, limit)
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    def read_rendered(self, plan: KeyPlan, renderer: Any, *, after: tuple[Any, ...] | None, limit: int) -> Any:
        """The same records as `read`, rendered by the compiled path: a `ResultReader` to `take()` from."""
        sql, args = plan.select(after, limit)
        with self.conn.cursor() as cur:
            query = cur.mogrify(sql, args)
        *_, reader = wire.results(self.conn, query, renderer)
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


def _frontier(cur: Any, *, dialect: Dialect, locked: bool) -> Frontier:
    if dialect.snapshot_frontier_from_status:
        at = queries.snapshot_binlog_coordinate(cur.connection)
        return Frontier(at, queries.gtid_at(cur.connection, dialect, at), locked)
    # MySQL: valid only because the global read lock is held (no commit can pass between the view and this).
    binlog = queries.binlog_status(cur.connection, dialect)
    return Frontier(binlog.coordinate, binlog.gtid_executed, locked)


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

    def select(self, after: tuple[Any, ...] | None, limit: int, *, grouped: bool = False) -> tuple[str, list[Any]]:
        """The chunk's SELECT; `grouped`: the whole chunk as one value, packed rows joined by newlines.

        Packed rows hold no newline (digits, dates, HEX, commas), and one value per chunk instead of
        one packet per row leaves PyMySQL almost nothing to parse: the read is a few C-level splits.
        """
        cols = [quote(c) for c in self.key]
        order = ", ".join(cols)
        where, args = "", cast(list[Any], [])
        if after is not None:
            # (a, b) > (x, y) spelled out: every optimizer turns this into a range scan of the index.
            ors = []
            for n in range(len(cols)):
                terms = [f"{cols[i]} = {self.placeholders[i]}" for i in range(n)]
                terms.append(f"{cols[n]} > {self.placeholders[n]}")
                ors.append("(" + " AND ".join(terms) + ")")
                args.extend(after[: n + 1])
            where = " WHERE " + " OR ".join(ors)
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


def key_plan(table: TableDef, converter: RowConverter, unique_keys: list[tuple[str, ...]]) -> KeyPlan:
    """Chunk by the primary key, else by the shortest unique key of NOT NULL columns, else none (one scan)."""
    source = f"{quote(table.database)}.{quote(table.name)}"
    candidates: list[tuple[str, tuple[str, ...]]] = []
    if table.primary_key:
        candidates.append(("primary", table.primary_key))
    for key in unique_keys:
        if all(not table.column(c).nullable for c in key):
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
