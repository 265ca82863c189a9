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
