"""The capture engine: turns normalized binlog events into ordered change events and checkpoints.

It is a pure state machine over the event stream (no I/O but the schema history's write-ahead
record and the transaction buffer's spill file): transactions are buffered until their commit,
DDL updates the schema, and every emitted `Chunk` carries the position to checkpoint once that
chunk is durably in the sink.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
from mysqlcapture_api.schema.ddl_tokens import DdlParseError
from mysqlcapture_api.schema.model import TableDef
from mysqlcapture_api.schema.types import UnsupportedColumnTypeError

from mysqlcapture_worker.changes import ChangeEvent, Event, RowBatch
from mysqlcapture_worker.decode import ABSENT, compile_decoder
from mysqlcapture_worker.decode.native import fast_path_enabled, native_renderer
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.gtid import GtidSet
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.replication.events import (
    BinlogEvent,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    RowsKind,
    TableMap,
    XidEvent,
)
from mysqlcapture_worker.schema.state import SchemaState
from mysqlcapture_worker.schema.tables import resolve_table_def
from mysqlcapture_worker.txnbuffer import TxnBuffer

log = logging.getLogger(__name__)

_TXN_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "XA ")


class CaptureError(RuntimeError):
    """The stream cannot be processed further; the message says what and how to fix it."""


@dataclass(slots=True)
class Chunk:
    """Events to append, and the position the sink may checkpoint once they are committed."""

    events: Sequence[Event]  # single events and fast-path batches of rows (`models.count_rows` counts them)
    position: Position
    boundary: bool  # True when `position` is a transaction boundary (txn_index == 0)


@dataclass
class _Txn:
    start_file: str
    start_pos: int
    gtid: str | None = None
    thread_id: int | None = None
    row_index: int = 0
    skip: int = 0  # rows already committed by a previous run (resume inside a transaction)
    events: TxnBuffer = field(default_factory=lambda: TxnBuffer(50000))


class _Decoded:
    __slots__ = ("decoder", "names", "pk_idx", "pk_names", "renderer", "table_def", "table_map")

    def __init__(self, table_map: TableMap, table_def: TableDef, *, fast: bool) -> None:
        self.table_map = table_map
        self.table_def = table_def
        self.decoder = compile_decoder(table_map, table_def)
        self.names = tuple(table_def.column_names())
        lowered = [n.lower() for n in self.names]
        self.pk_names = tuple(table_def.primary_key)
        self.pk_idx = tuple(lowered.index(n.lower()) for n in table_def.primary_key)
        # The compiled renderer of full row images, when every column has a native plan.
        self.renderer = native_renderer(table_map, table_def, self.pk_idx) if fast else None


def _default(obj: object) -> object:
    to_fragment = getattr(obj, "__json_fragment__", None)
    if to_fragment is not None:
        return to_fragment()
    raise TypeError(f"cannot render {type(obj).__name__} as JSON")


_NATIVE_KINDS = {RowsKind.INSERT: 0, RowsKind.UPDATE: 1, RowsKind.DELETE: 2}
# The compiled renderer's answer for one rows event: data, old (UPDATE), primary key and its hash, per row.
# Each an Arrow string column (values bytes, int32 offsets bytes), or None; the first item counts the rows.
_Column = tuple[bytes, bytes] | None
_Rendered = tuple[int, _Column, _Column, _Column, _Column]


def _strings(n: int, column: _Column, skip: int) -> pa.StringArray | None:
    if column is None:
        return None
    values, offsets = column
    array = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(values))
    return array.slice(skip) if skip else array


def _all_present(bitmap: bytes, count: int) -> bool:
    # Only the first `count` bits: MySQL sets the unused bits of the last byte, MariaDB clears them.
    every = (1 << count) - 1
    return int.from_bytes(bitmap, "little") & every == every


def _changed(before: object, after: object) -> bool:
    """Whether a column's value changed, as Maxwell's `old` sees it: by rendered JSON, not Python equality.

    Python says 1 == True == 1.0 (JSON documents) and compares orjson fragments (DECIMAL) by identity.
    """
    if before is after:
        return False
    kind = type(before)
    if kind is not type(after):
        return True
    if kind is str or kind is int or kind is float:
        return before != after
    return orjson.dumps(before, default=_default) != orjson.dumps(after, default=_default)


def render(obj: object) -> str:
    return orjson.dumps(obj, default=_default).decode()


class CaptureEngine:
    """Feed it binlog events in order; it returns chunks to commit. One engine per stream run."""

    def __init__(
        self,
        *,
        position: Position,
        schema: SchemaState,
        table_filter: TableFilter,
        chunk_rows: int = 50000,
        spill_rows: int | None = None,
        spill_dir: str | None = None,
        heartbeat_table: tuple[str, str] | None = None,
        heartbeat_client: str | None = None,
        on_heartbeat: Callable[[int], None] | None = None,
        fast: bool | None = None,
    ) -> None:
        """`fast`: render with the compiled decoder where it covers the table (None: MYSQLCAPTURE_DECODER)."""
        self.position = position
        self.schema = schema
        self.filter = table_filter
        self.chunk_rows = max(1, chunk_rows)
        # Rows of one open transaction kept in memory before the rest spills to disk.
        self.spill_rows = max(1, spill_rows if spill_rows is not None else chunk_rows)
        self.spill_dir = spill_dir
        self.heartbeat_table = heartbeat_table
        self.heartbeat_client = heartbeat_client
        self.on_heartbeat = on_heartbeat
        self._gtids = GtidSet.parse(position.gtid_set)
        self._file = position.binlog_file
        self._table_maps: dict[int, TableMap] = {}
        self._decoders: dict[tuple[TableMap, int], _Decoded] = {}
        self._txn: _Txn | None = None
        self._resume_skip = position.txn_index
        self._order_key = position.order_key
        self.rows_seen = 0
        self.fast = fast_path_enabled() if fast is None else fast

    def failover_to(self, position: Position) -> None:
        """Continue on another server from `position` (its file may be empty until the first rotate)."""
        self.position = position
        self._gtids = GtidSet.parse(position.gtid_set)
        self._file = position.binlog_file
        self._decoders.clear()
        self.restart()

    def restart(self) -> None:
        """Forget per-connection state after a lost connection; the stream restarts at `position`."""
        if self._txn is not None:
            self._txn.events.clear()
        self._txn = None
        self._table_maps.clear()
        self._resume_skip = self.position.txn_index
        self._file = self.position.binlog_file

    @property
    def between_transactions(self) -> bool:
        """No transaction is open: events from elsewhere (a snapshot's rows) may be inserted here."""
        return self._txn is None

    def insert(self, events: Sequence[Event], snapshot: str | None) -> Chunk:
        """A chunk of events not read from the binlog (a snapshot's), placed at the current boundary.

        They take the next ordering keys and a negative `row_index` (-order_key): unique, and never
        equal to a binlog event's identity at the same boundary. `snapshot` is the progress to checkpoint.
        A `RowBatch` takes one key per row, its row indexes counting down (`row_step` -1).
        """
        assert self._txn is None, "snapshot rows go between transactions"
        for event in events:
            self._order_key += 1
            event.order_key = self._order_key
            event.row_index = -self._order_key
            if type(event) is RowBatch:
                event.row_step = -1
                self._order_key += len(event) - 1
        self.position = self.position.with_order_key(self._order_key).with_snapshot(snapshot)
        return Chunk(events, self.position, boundary=True)

    # -- dispatch -----------------------------------------------------------------------------
    def feed(self, ev: BinlogEvent) -> Iterable[Chunk]:
        """The chunks `ev` completes (iterate them fully before the next event)."""
        if isinstance(ev, RowsEvent):
            self._on_rows(ev)
            return []
        if isinstance(ev, TableMap):
            # Table ids are not stable: always trust the latest mapping (seed 001's production bug).
            self._table_maps[ev.table_id] = ev
            return []
        if isinstance(ev, XidEvent):
            return self._end_txn(ev.where.file, ev.where.next_pos, xid=ev.xid)
        if isinstance(ev, GtidEvent):
            self._begin_txn(ev.gtid)
            return []
        if isinstance(ev, QueryEvent):
            return self._on_query(ev)
        if isinstance(ev, RotateEvent):
            self._file = ev.next_file
            if self._txn is None and ev.timestamp != 0:
                # A real rotation at a boundary: checkpoint there so a restart starts in the new file.
                return self._boundary_only(ev.next_file, ev.next_pos)
            return []
        if isinstance(ev, HeartbeatEvent):
            return []
        return []

    # -- transactions -------------------------------------------------------------------------
    def _txn_or_new(self) -> _Txn:
        if self._txn is None:
            self._begin_txn(None)
        assert self._txn is not None
        return self._txn

    def _begin_txn(self, gtid: str | None) -> None:
        if self._txn is not None and self._txn.gtid is not None and gtid is not None:
            raise CaptureError(
                f"transaction {self._txn.gtid} at {self._txn.start_file}:{self._txn.start_pos} has no commit "
                f"before GTID {gtid}; the binlog is truncated or corrupt"
            )
        skip, self._resume_skip = self._resume_skip, 0
        self._txn = _Txn(
            start_file=self.position.binlog_file,
            start_pos=self.position.binlog_pos,
            gtid=gtid,
            skip=skip,
            events=TxnBuffer(self.spill_rows, self.spill_dir),
        )

    def _on_query(self, ev: QueryEvent) -> Iterable[Chunk]:
        sql = ev.query.strip()
        upper = sql[:9].upper()
        if upper.startswith("BEGIN"):
            txn = self._txn_or_new()
            txn.thread_id = ev.thread_id
            return []
        if upper.startswith(("COMMIT", "ROLLBACK")):
            return self._end_txn(ev.where.file, ev.where.next_pos, xid=None)
        if upper.startswith("XA "):
            return []
        # A statement outside BEGIN...COMMIT: DDL (or a non-transactional statement); it ends its transaction.
        txn = self._txn_or_new()
        txn.thread_id = ev.thread_id
        self._on_ddl(ev, txn)
        return self._end_txn(ev.where.file, ev.where.next_pos, xid=None)

    def _on_ddl(self, ev: QueryEvent, txn: _Txn) -> None:
        where = f"{ev.where.file}:{ev.where.next_pos}"
        try:
            results = self.schema.apply(
                ev.query,
                default_db=ev.schema,
                server_id=ev.server_id,
                binlog_file=ev.where.file,
                binlog_pos=ev.where.next_pos,
                gtid=txn.gtid,
                last_heartbeat=self.position.last_heartbeat,
                where=where,
            )
        except UnsupportedColumnTypeError as exc:
            if exc.table and not self.filter.includes(exc.database, exc.table):
                log.info("ignoring DDL of excluded table %s.%s at %s: %s", exc.database, exc.table, where, exc)
                return
            raise CaptureError(f"DDL at {where}: {exc}") from exc
        except DdlParseError as exc:
            raise CaptureError(
                f"cannot apply the DDL at {where} ({exc}): {ev.query[:300]!r}. The capture stops before it, "
                "nothing after its checkpoint is lost; exclude the table it changes (spec.tables.exclude) or "
                "restart the capture from a position after it (spec.start)"
            ) from exc
        if results:
            self._decoders.clear()
        for ddl in results:
            database = str(ddl["database"])
            table = ddl.get("table")
            included = (
                self.filter.includes(database, str(table))
                if table is not None
                else self.filter.includes_database(database)
            )
            if not included:
                continue
            definition = ddl.get("def")
            if definition is None and "charset" in ddl:  # database-create/alter: the database's definition
                definition = {"database": database, "charset": ddl["charset"]}
            old = ddl.get("old")
            self._add(
                txn,
                ChangeEvent(
                    order_key=0,
                    database=database,
                    table=str(table) if table is not None else None,
                    type=str(ddl["type"]),
                    ts=ev.timestamp,
                    server_id=ev.server_id,
                    thread_id=ev.thread_id,
                    xid=None,
                    commit=False,
                    gtid=txn.gtid,
                    binlog_file=txn.start_file,
                    binlog_pos=txn.start_pos,
                    event_pos=ev.where.start_pos,
                    row_index=0,
                    pk_json=None,
                    pk_columns=(),
                    data_json=render(definition) if definition is not None else None,
                    old_json=render(old) if old is not None else None,
                    sql=ev.query,
                ),
            )

    def _add(self, txn: _Txn, event: ChangeEvent) -> None:
        index = txn.row_index
        txn.row_index += 1
        if index < txn.skip:
            return  # committed by the previous run
        event.row_index = index
        txn.events.append(event)

    def _decoded(self, tm: TableMap) -> _Decoded:
        key = (tm, self.schema.version)
        found = self._decoders.get(key)
        if found is None:
            table_def = resolve_table_def(tm, self.schema.current)
            found = _Decoded(tm, table_def, fast=self.fast)
            self._decoders[key] = found
        return found

    def _on_rows(self, ev: RowsEvent) -> None:
        tm = self._table_maps.get(ev.table_id)
        if tm is None:
            raise CaptureError(
                f"rows event at {ev.where.file}:{ev.where.next_pos} for unknown table id {ev.table_id}; "
                "the stream did not start at a transaction boundary"
            )
        if self.heartbeat_table is not None and (tm.database, tm.table) == self.heartbeat_table:
            self._on_heartbeat_rows(tm, ev)
            return
        if not self.filter.includes(tm.database, tm.table):
            return
        txn = self._txn_or_new()
        dec = self._decoded(tm)
        names = dec.names
        pk_idx = dec.pk_idx
        kind = ev.kind
        type_name = kind.value
        # A session may still log partial images (SET SESSION binlog_row_image=MINIMAL): Maxwell then
        # renders only the columns the image holds, and `old` only what both images hold.
        partial = not (
            _all_present(ev.columns_present, ev.column_count)
            and _all_present(ev.columns_present_after or ev.columns_present, ev.column_count)
        )
        if dec.renderer is not None and not partial and ev.column_count == len(names):
            try:
                rendered = dec.renderer.render(_NATIVE_KINDS[kind], ev.body)
            except ValueError:
                pass  # the reference path decodes it again and says what is wrong
            else:
                self._add_rendered(txn, dec, ev, rendered)
                return
        for before, after in dec.decoder.decode(ev):
            self.rows_seen += 1
            image = after if after is not None else before
            assert image is not None
            if partial:
                if before is not None and after is not None:
                    # A MINIMAL update logs the key in the before image only: keep the row identifiable.
                    image = [before[i] if v is ABSENT and i in pk_idx else v for i, v in enumerate(image)]
                data = {n: v for n, v in zip(names, image, strict=False) if v is not ABSENT}
            else:
                data = dict(zip(names, image, strict=False))
            old_json = None
            if kind is RowsKind.UPDATE and before is not None:
                old = {
                    n: b
                    for n, b, a in zip(names, before, image, strict=False)
                    if b is not ABSENT and a is not ABSENT and _changed(b, a)
                }
                old_json = render(old)
            pk_json = render([image[i] for i in pk_idx]) if pk_idx else None
            self._add(
                txn,
                ChangeEvent(
                    order_key=0,
                    database=tm.database,
                    table=tm.table,
                    type=type_name,
                    ts=ev.timestamp,
                    server_id=ev.server_id,
                    thread_id=txn.thread_id,
                    xid=None,
                    commit=False,
                    gtid=txn.gtid,
                    binlog_file=txn.start_file,
                    binlog_pos=txn.start_pos,
                    event_pos=ev.where.start_pos,
                    row_index=0,
                    pk_json=pk_json,
                    pk_columns=dec.pk_names,
                    data_json=render(data),
                    old_json=old_json,
                ),
            )

    def _add_rendered(self, txn: _Txn, dec: _Decoded, ev: RowsEvent, rendered: _Rendered) -> None:
        """The compiled renderer's rows as one batch: the events the reference loop above would build."""
        n = rendered[0]
        self.rows_seen += n
        first = txn.row_index
        txn.row_index += n
        skip = max(0, txn.skip - first)  # rows committed by the previous run (resume inside a transaction)
        if skip >= n:
            return
        datas, olds, pks, hashes = (_strings(n, column, skip) for column in rendered[1:])
        assert datas is not None
        tm = dec.table_map
        txn.events.extend(
            RowBatch(
                order_key=0,
                database=tm.database,
                table=tm.table,
                type=ev.kind.value,
                ts=ev.timestamp,
                server_id=ev.server_id,
                thread_id=txn.thread_id,
                xid=None,
                commit=False,
                gtid=txn.gtid,
                binlog_file=txn.start_file,
                binlog_pos=txn.start_pos,
                event_pos=ev.where.start_pos,
                row_index=first + skip,
                pk_columns=dec.pk_names,
                data_json=datas,
                old_json=olds,
                pk_json=pks,
                pk_hashes=hashes,
            )
        )

    def _on_heartbeat_rows(self, tm: TableMap, ev: RowsEvent) -> None:
        dec = self._decoded(tm)
        names = [n.lower() for n in dec.names]
        if "heartbeat" not in names:
            return
        idx = names.index("heartbeat")
        # Several captures may share one heartbeat table: only this capture's rows are its markers.
        client = names.index("client_id") if "client_id" in names and self.heartbeat_client else None
        for before, after in dec.decoder.decode(ev):
            image = after if after is not None else before
            if image is None or (client is not None and image[client] != self.heartbeat_client):
                continue
            if isinstance(image[idx], int):
                self.position = self.position.with_heartbeat(image[idx])
                if self.on_heartbeat is not None:
                    self.on_heartbeat(image[idx])

    def _end_txn(self, file: str, next_pos: int, *, xid: int | None) -> Iterator[Chunk]:
        """The transaction's chunks, produced lazily: a million-row transaction is never all in memory.

        The engine's position moves to the transaction's end only once the last chunk was taken.
        """
        txn = self._txn
        self._txn = None
        if txn is None:
            txn = _Txn(start_file=self.position.binlog_file, start_pos=self.position.binlog_pos)
        if txn.gtid is not None:
            self._gtids = self._gtids.add(txn.gtid)
        end = self.position.at_boundary(binlog_file=file, binlog_pos=next_pos, gtid_set=str(self._gtids))
        end = end.with_schema_version(self.schema.version)
        return self._chunks(txn, end, xid)

    def _chunks(self, txn: _Txn, end: Position, xid: int | None) -> Iterator[Chunk]:
        pending: list[Event] = []
        pending_rows = 0
        emitted = txn.skip
        last_index = txn.skip + len(txn.events) - 1
        for event in txn.events.drain():
            if type(event) is not RowBatch:
                assert isinstance(event, ChangeEvent)
                self._order_key += 1
                event.order_key = self._order_key
                event.xid = xid
                event.commit = event.row_index == last_index
                pending.append(event)
                pending_rows += 1
                emitted += 1
                if pending_rows >= self.chunk_rows and emitted <= last_index:
                    inside = self.position.inside(emitted, self._order_key).with_schema_version(self.schema.version)
                    yield Chunk(pending, inside, boundary=False)
                    pending, pending_rows = [], 0
                continue
            # A batch is cut where a chunk ends: chunks hold the same rows as with one event per row.
            rest: RowBatch | None = event
            while rest is not None:
                room = max(1, self.chunk_rows - pending_rows)
                head, rest = (rest, None) if len(rest) <= room else rest.split(room)
                n = len(head)
                head.order_key = self._order_key + 1
                self._order_key += n
                head.xid = xid
                head.commit = head.row_index + n - 1 == last_index
                pending.append(head)
                pending_rows += n
                emitted += n
                if pending_rows >= self.chunk_rows and emitted <= last_index:
                    inside = self.position.inside(emitted, self._order_key).with_schema_version(self.schema.version)
                    yield Chunk(pending, inside, boundary=False)
                    pending, pending_rows = [], 0
        self.position = end.with_order_key(self._order_key)
        yield Chunk(pending, self.position, boundary=True)

    def _boundary_only(self, file: str, pos: int) -> list[Chunk]:
        self.position = self.position.at_boundary(binlog_file=file, binlog_pos=pos, gtid_set=str(self._gtids))
        return [Chunk([], self.position, boundary=True)]
