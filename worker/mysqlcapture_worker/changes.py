"""The change event: one model for every sink, Maxwell's JSON plus the capture's total ordering key."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Any, cast

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
    json_null: str | None = None  # JSON array of the columns of `data_json` holding JSON null documents (Col.JSON_NULL)
    old_json_null: str | None = None  # the same of `old_json` (Col.OLD_JSON_NULL)

    @property
    def pk_hash(self) -> str | None:
        if self.pk_json is None:
            return None
        if self.pk_hash_hex is not None:
            return self.pk_hash_hex
        return pk_hash(self.database, self.table or "", self.pk_json)


TextColumn = tuple[int, int, pa.Buffer | None, pa.Buffer, pa.Buffer | None]
"""An Arrow string column as its buffers: (offset, length, validity bitmap or None, int32 offsets, values), as
`pyarrow.StringArray.buffers()` gives them."""

DATA, OLD, PRIMARY_KEY, PK_HASH, JSON_NULL, OLD_JSON_NULL = range(6)
_PARTS = 6


class RowTexts:
    """A batch's per-row texts: data, old (UPDATE only), primary key and its hash, and the columns of data and of old
    holding the JSON document null (None when no row has one), each a string column or None.

    The compiled renderer hands them over as buffers; an Arrow array is made of a column only when one is asked
    for (`column`): the Delta sink joins a commit's buffers into one array per column, and the Maxwell renderer
    reads them as they are (`buffers`). Made in the binlog reader, four arrays per rows event cost it four hand-offs
    of the GIL (PyArrow checks a new array without it), and a thread busy with Python (the commit loop) keeps the
    GIL for up to the switch interval before handing it back. Made lazily and kept: read by one thread at a time
    (a race of two makes the same array twice)."""

    __slots__ = ("_arrays", "_parts", "rows")

    def __init__(self, rows: int, parts: tuple[TextColumn | None, ...]) -> None:
        self.rows = rows
        self._parts: list[TextColumn | None] = [*parts, *(None,) * (_PARTS - len(parts))]  # the columns not given: none
        self._arrays: list[pa.StringArray | bool | None] = [False] * _PARTS  # False: not made yet

    @classmethod
    def of(
        cls,
        data: pa.StringArray,
        old: pa.StringArray | None = None,
        pk: pa.StringArray | None = None,
        hashes: pa.StringArray | None = None,
        json_null: pa.StringArray | None = None,
        old_json_null: pa.StringArray | None = None,
    ) -> RowTexts:
        """Texts held as Arrow arrays already (a snapshot's, the reference path's tests)."""
        texts = cls(len(data), (None,) * _PARTS)
        texts._arrays = [data, old, pk, hashes, json_null, old_json_null]
        texts._parts = [_buffers(a) for a in texts._arrays]
        return texts

    @classmethod
    def rendered(cls, rows: int, columns: Sequence[tuple[Any, ...] | None], skip: int = 0) -> RowTexts:
        """The renderer's columns, each (values, offsets[, validity]) or None, of `rows` rows; the first `skip` left
        out. Its buffers are wrapped as Arrow buffers where they are read (`buffers`), not by the binlog reader."""
        n = rows - skip
        return cls(
            n, tuple(None if c is None else (skip, n, c[2] if len(c) > 2 else None, c[1], c[0]) for c in columns)
        )

    def parts(self, i: int) -> tuple[int, int, Any, Any, Any] | None:
        """Column `i` as `buffers` gives it, its buffers as the renderer handed them (any objects with the buffer
        protocol, not yet wrapped as Arrow buffers): for the compiled joiners and renderers, which read them as they
        are. None when the batch has none."""
        return self._parts[i]

    def buffers(self, i: int) -> TextColumn | None:
        """Column `i` (DATA, OLD, PRIMARY_KEY, PK_HASH, JSON_NULL, OLD_JSON_NULL) as its buffers, None when the batch
        has none."""
        part = self._parts[i]
        if part is not None and type(part[3]) is not pa.Buffer:
            offset, length, validity, offsets, values = part
            if validity is not None:
                validity = pa.py_buffer(validity)
            part = self._parts[i] = (offset, length, validity, pa.py_buffer(offsets), pa.py_buffer(values))
        return part

    def column(self, i: int) -> pa.StringArray | None:
        """Column `i` as an Arrow array (made once), None when the batch has none."""
        made = self._arrays[i]
        if made is False:
            part = self.buffers(i)
            made = None
            if part is not None:
                offset, length, validity, offsets, values = part
                made = pa.StringArray.from_buffers(length, offsets, values, validity, -1, offset)
            self._arrays[i] = made
        return made

    def slice(self, start: int, length: int) -> RowTexts:
        """Rows start .. start + length - 1 (the buffers shared, not copied)."""
        cut = RowTexts(length, (None,) * _PARTS)
        for i, part in enumerate(self._parts):
            if part is not None:
                cut._parts[i] = (part[0] + start, length, *part[2:])
            made = self._arrays[i]
            if made is not False:
                cut._arrays[i] = None if made is None else made.slice(start, length)  # type: ignore[union-attr]
        return cut

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as Arrow arrays (a transaction spilled to disk: `TxnBuffer`)."""
        return RowTexts.of, tuple(self.column(i) for i in range(_PARTS))

    def nbytes(self, i: int) -> int:
        """The bytes column `i`'s buffers hold (0 without it)."""
        part = self._parts[i]
        return 0 if part is None else sum(len(b) for b in part[2:] if b is not None)


def _buffers(array: pa.StringArray | None) -> TextColumn | None:
    if array is None:
        return None
    validity, offsets, values = array.buffers()
    return array.offset, len(array), validity, offsets, values


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
    texts: RowTexts  # data, old (UPDATE only), primary key and its hash (None when the table has no primary key)
    row_step: int = 1  # row indexes go up by this from row to row (-1: a snapshot's, which are -order_key)

    @property
    def data_json(self) -> pa.StringArray:
        data = self.texts.column(DATA)
        assert data is not None
        return data

    @property
    def old_json(self) -> pa.StringArray | None:
        return self.texts.column(OLD)

    @property
    def pk_json(self) -> pa.StringArray | None:
        return self.texts.column(PRIMARY_KEY)

    @property
    def pk_hashes(self) -> pa.StringArray | None:
        return self.texts.column(PK_HASH)

    @property
    def json_null(self) -> pa.StringArray | None:
        return self.texts.column(JSON_NULL)

    @property
    def old_json_null(self) -> pa.StringArray | None:
        return self.texts.column(OLD_JSON_NULL)

    @property
    def keyed(self) -> bool:
        """The rows have a primary key."""
        return self.texts.parts(PRIMARY_KEY) is not None

    def __len__(self) -> int:
        return self.texts.rows

    def split(self, n: int) -> tuple[RowBatch, RowBatch]:
        """The first `n` rows and the others (before ordering keys are given out)."""
        first = replace(self, commit=False, texts=self.texts.slice(0, n))
        rest = replace(self, row_index=self.row_index + n * self.row_step, texts=self.texts.slice(n, len(self) - n))
        return first, rest

    def event(self, i: int) -> ChangeEvent:
        """Row `i` as a `ChangeEvent` (the other rows left as they are)."""
        one = replace(
            self,
            order_key=self.order_key + i if self.order_key else 0,
            commit=self.commit and i == len(self) - 1,
            row_index=self.row_index + i * self.row_step,
            texts=self.texts.slice(i, 1),
        )
        return one.events()[0]

    def events(self) -> list[ChangeEvent]:
        """The batch as one `ChangeEvent` per row."""
        n = len(self)
        none = repeat(None)
        key = self.order_key
        old, pk, hashes = self.old_json, self.pk_json, self.pk_hashes
        nulls, old_nulls = self.json_null, self.old_json_null
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
                None,
                marked,
                old_marked,
            )
            for j, data, old, pk, hashed, marked, old_marked in zip(
                range(n),
                self.data_json.to_pylist(),
                old.to_pylist() if old is not None else none,
                pk.to_pylist() if pk is not None else none,
                hashes.to_pylist() if hashes is not None else none,
                nulls.to_pylist() if nulls is not None else none,
                old_nulls.to_pylist() if old_nulls is not None else none,
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
        json_null: str | None = None,
        old_json_null: str | None = None,
    ) -> ChangeEvent:
        """One row's insert, update or delete, rendered by the reference path (`absent`: the columns a partial
        image left out; `json_null`/`old_json_null`: ChangeEvent's)."""
        return self._event(
            database=database,
            table=table,
            type=type,
            pk_json=pk_json,
            pk_columns=pk_columns,
            data_json=data_json,
            old_json=old_json,
            absent=absent,
            json_null=json_null,
            old_json_null=old_json_null,
        )

    def rows(
        self,
        *,
        database: str,
        table: str,
        type: str,
        row_index: int,
        pk_columns: tuple[str, ...],
        texts: RowTexts,
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
            texts=texts,
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
        json_null: pa.StringArray | None = None,
    ) -> RowBatch:
        """A snapshot chunk's rows as `bootstrap-insert`s (`json_null`: RowTexts')."""
        return self.rows(
            database=database,
            table=table,
            type="bootstrap-insert",
            row_index=0,
            pk_columns=pk_columns,
            texts=RowTexts.of(data_json, None, pk_json, pk_hashes, json_null),
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
        json_null: str | None = None,
        old_json_null: str | None = None,
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
            json_null=json_null,
            old_json_null=old_json_null,
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
