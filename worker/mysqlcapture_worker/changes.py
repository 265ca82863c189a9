"""The change event: one model for every sink, Maxwell's JSON plus the capture's total ordering key."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from typing import cast

import pyarrow as pa
from mysqlcapture_api.changelog import pk_hash


@dataclass(slots=True)
class ChangeEvent:
    """A row change or a DDL event. `data_json`/`old_json`/`pk_json` are rendered once, at decode time.

    Identity (what makes an event unique across restarts and failovers):
    (server_id, binlog_file, binlog_pos, row_index), where `binlog_pos` is the position at which the
    event's transaction starts and `row_index` counts the transaction's events from 0.
    """

    order_key: int
    database: str
    table: str | None
    type: str
    ts: int
    server_id: int
    thread_id: int | None
    xid: int | None
    commit: bool
    gtid: str | None
    binlog_file: str
    binlog_pos: int  # position of the event's transaction start (a boundary)
    event_pos: int  # where the binlog event that carried the row starts (Maxwell's "position")
    row_index: int
    pk_json: str | None
    pk_columns: tuple[str, ...]
    data_json: str | None
    old_json: str | None
    sql: str | None = None
    pk_hash_hex: str | None = None  # `pk_hash` when the decoder computed it already (the compiled fast path)
    absent: tuple[str, ...] | None = None  # the columns a partial image left out of `data_json` (Col.ABSENT)

    @property
    def pk_hash(self) -> str | None:
        if self.pk_json is None:
            return None
        if self.pk_hash_hex is not None:
            return self.pk_hash_hex
        return pk_hash(self.database, self.table or "", self.pk_json)


@dataclass(slots=True)
class RowBatch:
    """The rows of one rows event as the compiled fast path renders them: shared fields once, text per row.

    It stands for `len(batch)` consecutive `ChangeEvent`s (`events()` builds them): their ordering keys
    and row indexes count up from `order_key` and `row_index`, `xid` is every row's, `commit` only the
    last row's. Columnar, so that no Python object per row exists between the decoder and the Delta sink.
    """

    order_key: int  # the first row's (0 until its transaction commits)
    database: str
    table: str
    type: str
    ts: int
    server_id: int
    thread_id: int | None
    xid: int | None
    commit: bool  # the last row ends its transaction
    gtid: str | None
    binlog_file: str
    binlog_pos: int
    event_pos: int
    row_index: int  # the first row's
    pk_columns: tuple[str, ...]
    data_json: pa.StringArray  # Arrow strings straight from the renderer: no Python object per row
    old_json: pa.StringArray | None  # UPDATE only
    pk_json: pa.StringArray | None  # None when the table has no primary key
    pk_hashes: pa.StringArray | None
    row_step: int = 1  # row indexes go up by this from row to row (-1: a snapshot's, which are -order_key)

    def __len__(self) -> int:
        return len(self.data_json)

    def split(self, n: int) -> tuple[RowBatch, RowBatch]:
        """The first `n` rows and the others (before ordering keys are given out)."""

        def cut(values: pa.StringArray | None, head: bool) -> pa.StringArray | None:
            return None if values is None else values.slice(0, n) if head else values.slice(n)

        first = replace(
            self,
            commit=False,
            data_json=self.data_json.slice(0, n),
            old_json=cut(self.old_json, True),
            pk_json=cut(self.pk_json, True),
            pk_hashes=cut(self.pk_hashes, True),
        )
        rest = replace(
            self,
            row_index=self.row_index + n * self.row_step,
            data_json=self.data_json.slice(n),
            old_json=cut(self.old_json, False),
            pk_json=cut(self.pk_json, False),
            pk_hashes=cut(self.pk_hashes, False),
        )
        return first, rest

    def event(self, i: int) -> ChangeEvent:
        """Row `i` as a `ChangeEvent` (the other rows left as they are)."""

        def at(values: pa.StringArray | None) -> pa.StringArray | None:
            return None if values is None else values.slice(i, 1)

        one = replace(
            self,
            order_key=self.order_key + i if self.order_key else 0,
            commit=self.commit and i == len(self) - 1,
            row_index=self.row_index + i * self.row_step,
            data_json=self.data_json.slice(i, 1),
            old_json=at(self.old_json),
            pk_json=at(self.pk_json),
            pk_hashes=at(self.pk_hashes),
        )
        return one.events()[0]

    def events(self) -> list[ChangeEvent]:
        """The batch as one `ChangeEvent` per row."""
        n = len(self)
        none = repeat(None)
        key = self.order_key
        return [
            ChangeEvent(
                key + j if key else 0,
                self.database,
                self.table,
                self.type,
                self.ts,
                self.server_id,
                self.thread_id,
                self.xid,
                self.commit and j == n - 1,
                self.gtid,
                self.binlog_file,
                self.binlog_pos,
                self.event_pos,
                self.row_index + j * self.row_step,
                pk,
                self.pk_columns,
                data,
                old,
                None,
                hashed,
            )
            for j, data, old, pk, hashed in zip(
                range(n),
                self.data_json.to_pylist(),
                self.old_json.to_pylist() if self.old_json is not None else none,
                self.pk_json.to_pylist() if self.pk_json is not None else none,
                self.pk_hashes.to_pylist() if self.pk_hashes is not None else none,
                strict=False,
            )
        ]


@dataclass(frozen=True, slots=True)
class EventFactory:
    """Builds the change events of one binlog event, or of one snapshot table: the context given once.

    Every event leaves it without an ordering key (0), `xid` and `commit`, and with `row_index` 0 unless
    given: the engine sets them when the transaction commits, or when a snapshot's chunk is inserted.
    """

    server_id: int
    ts: int  # the binlog event's timestamp (a snapshot: the table's start), seconds
    binlog_file: str  # where the event's transaction starts (a boundary)
    binlog_pos: int
    event_pos: int  # where the binlog event starts (Maxwell's "position"); a snapshot: `binlog_pos`
    gtid: str | None = None
    thread_id: int | None = None

    @classmethod
    def snapshot(cls, *, server_id: int, binlog_file: str, binlog_pos: int, ts: int) -> EventFactory:
        """bootstrap-* events placed at the boundary `binlog_file:binlog_pos`: no transaction, no thread."""
        return cls(server_id=server_id, ts=ts, binlog_file=binlog_file, binlog_pos=binlog_pos, event_pos=binlog_pos)

    def row(
        self,
        *,
        database: str,
        table: str,
        type: str,
        pk_json: str | None,
        pk_columns: tuple[str, ...],
        data_json: str,
        old_json: str | None,
        absent: tuple[str, ...] | None = None,
    ) -> ChangeEvent:
        """One row's insert, update or delete, rendered by the reference path (`absent`: the columns a partial
        image left out)."""
        return self._event(
            database=database,
            table=table,
            type=type,
            pk_json=pk_json,
            pk_columns=pk_columns,
            data_json=data_json,
            old_json=old_json,
            absent=absent,
        )

    def rows(
        self,
        *,
        database: str,
        table: str,
        type: str,
        row_index: int,
        pk_columns: tuple[str, ...],
        data_json: pa.StringArray,
        old_json: pa.StringArray | None,
        pk_json: pa.StringArray | None,
        pk_hashes: pa.StringArray | None,
    ) -> RowBatch:
        """Consecutive rows as one batch (the compiled path; a snapshot's inserts), the first at `row_index`."""
        return RowBatch(
            order_key=0,
            database=database,
            table=table,
            type=type,
            ts=self.ts,
            server_id=self.server_id,
            thread_id=self.thread_id,
            xid=None,
            commit=False,
            gtid=self.gtid,
            binlog_file=self.binlog_file,
            binlog_pos=self.binlog_pos,
            event_pos=self.event_pos,
            row_index=row_index,
            pk_columns=pk_columns,
            data_json=data_json,
            old_json=old_json,
            pk_json=pk_json,
            pk_hashes=pk_hashes,
        )

    def ddl(
        self, *, database: str, table: str | None, type: str, data_json: str | None, old_json: str | None, sql: str
    ) -> ChangeEvent:
        """A schema change (`table` None for a database's); `data_json`/`old_json` are the definitions."""
        return self._event(database=database, table=table, type=type, data_json=data_json, old_json=old_json, sql=sql)

    def referential(self, *, database: str, table: str, data_json: str) -> ChangeEvent:
        """A `referential-action` of the child table `database`.`table` (engine/referential.py)."""
        return self._event(database=database, table=table, type="referential-action", data_json=data_json)

    def bootstrap(self, *, database: str, table: str, type: str) -> ChangeEvent:
        """A snapshot's `bootstrap-start` or `bootstrap-complete` marker of one table."""
        return self._event(database=database, table=table, type=type)

    def bootstrap_inserts(
        self,
        *,
        database: str,
        table: str,
        pk_columns: tuple[str, ...],
        data_json: pa.StringArray,
        pk_json: pa.StringArray | None,
        pk_hashes: pa.StringArray | None,
    ) -> RowBatch:
        """A snapshot chunk's rows as `bootstrap-insert`s."""
        return self.rows(
            database=database,
            table=table,
            type="bootstrap-insert",
            row_index=0,
            pk_columns=pk_columns,
            data_json=data_json,
            old_json=None,
            pk_json=pk_json,
            pk_hashes=pk_hashes,
        )

    def _event(
        self,
        *,
        database: str,
        table: str | None,
        type: str,
        pk_json: str | None = None,
        pk_columns: tuple[str, ...] = (),
        data_json: str | None = None,
        old_json: str | None = None,
        sql: str | None = None,
        absent: tuple[str, ...] | None = None,
    ) -> ChangeEvent:
        return ChangeEvent(
            order_key=0,
            database=database,
            table=table,
            type=type,
            ts=self.ts,
            server_id=self.server_id,
            thread_id=self.thread_id,
            xid=None,
            commit=False,
            gtid=self.gtid,
            binlog_file=self.binlog_file,
            binlog_pos=self.binlog_pos,
            event_pos=self.event_pos,
            row_index=0,
            pk_json=pk_json,
            pk_columns=pk_columns,
            data_json=data_json,
            old_json=old_json,
            sql=sql,
            absent=absent,
        )


Event = ChangeEvent | RowBatch
"""What the capture engine emits and sinks commit: single events, or batches of rows from the fast path."""


def count_rows(events: Iterable[Event]) -> int:
    """Row events in `events` (a batch counts its rows)."""
    return sum(len(e) if type(e) is RowBatch else 1 for e in events)


def each_event(events: Iterable[Event]) -> Iterator[ChangeEvent]:
    """Every event as a `ChangeEvent`, batches expanded, in order."""
    for e in events:
        if type(e) is RowBatch:
            yield from e.events()
        else:
            assert isinstance(e, ChangeEvent)
            yield e


def split_batches(events: Sequence[Event]) -> tuple[list[ChangeEvent], list[RowBatch]]:
    """The single events and the batches of `events`, each in order."""
    batches = [e for e in events if isinstance(e, RowBatch)]
    if not batches:
        return cast(list[ChangeEvent], list(events)), []
    return [e for e in events if isinstance(e, ChangeEvent)], batches
