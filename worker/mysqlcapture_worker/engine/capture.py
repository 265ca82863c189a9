"""`CaptureEngine`: dispatches binlog events to the transaction, DDL, rows and heartbeat units; owns the position."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.changes import Event, RowBatch
from mysqlcapture_worker.decode.native import fast_path_enabled
from mysqlcapture_worker.engine.ddl import DdlHandler
from mysqlcapture_worker.engine.errors import CaptureError
from mysqlcapture_worker.engine.heartbeat import HeartbeatDetector
from mysqlcapture_worker.engine.referential import add_actions
from mysqlcapture_worker.engine.rows import add_rows
from mysqlcapture_worker.engine.tables import Tables
from mysqlcapture_worker.engine.transaction import Chunk, OrderKeys, Transaction
from mysqlcapture_worker.engine.txnbuffer import TxnBuffer
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.gtid import GtidSet
from mysqlcapture_worker.positions import Position, SnapshotJob
from mysqlcapture_worker.replication.events import (
    BinlogEvent,
    GtidEvent,
    HeartbeatEvent,
    IncidentEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMap,
    XaPrepareEvent,
    XidEvent,
)
from mysqlcapture_worker.schema.state import SchemaState

log = logging.getLogger(__name__)


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
        reread_unlogged: bool = True,
        key_hashes: bool = True,
    ) -> None:
        """`fast`: render with the compiled decoder where it covers the table (None: MYSQLCAPTURE_DECODER).
        `reread_unlogged`: a statement that changes a table's rows without row events (a partition's TRUNCATE,
        DROP or EXCHANGE; IMPORT TABLESPACE) adds a snapshot of that table to the position it ends at, read once
        the stream is past it; without, a warning names the table and the fix. `key_hashes`: the compiled path
        renders each row's `pk_hash` (the Delta change log's column; no other sink writes it, and it costs a BLAKE2b
        a row)."""
        self.position = position
        self.schema = schema
        self.filter = table_filter
        self.chunk_rows = max(1, chunk_rows)
        # Rows of one open transaction kept in memory before the rest spills to disk.
        self.spill_rows = max(1, spill_rows if spill_rows is not None else chunk_rows)
        self.spill_dir = spill_dir
        self.on_heartbeat = on_heartbeat
        # Where each heartbeat's transaction starts (a snapshot's fences: `snapshot.window`).
        self.on_heartbeat_at: Callable[[int, Coordinate], None] | None = None
        self.fast = fast_path_enabled() if fast is None else fast
        self.reread_unlogged = reread_unlogged
        self.key_hashes = key_hashes
        self._heartbeats = HeartbeatDetector(heartbeat_table, heartbeat_client)
        self._ddl = DdlHandler(schema, table_filter)
        self._tables = Tables(schema, fast=self.fast, columns=table_filter.columns, key_hashes=key_hashes)
        self._gtids = GtidSet.parse(position.gtid_set)
        self._txn: Transaction | None = None
        self._resume_skip = position.txn_index
        self._keys = OrderKeys(position.order_key)

    def failover_to(self, position: Position) -> None:
        """Continue on another server from `position` (its file may be empty until the first rotate)."""
        self.position = position
        self._gtids = GtidSet.parse(position.gtid_set)
        self._tables.forget_decoders()
        self.restart()

    def restart(self) -> None:
        """Forget per-connection state after a lost connection; the stream restarts at `position`."""
        if self._txn is not None:
            self._txn.events.clear()
        self._txn = None
        self._tables.forget_maps()
        self._resume_skip = self.position.txn_index

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
            if type(event) is RowBatch:
                event.order_key = self._keys.take(len(event))
                event.row_index = -event.order_key
                event.row_step = -1
            else:
                event.order_key = self._keys.take()
                event.row_index = -event.order_key
        self.position = self.position.with_order_key(self._keys.last).with_snapshot(snapshot)
        return Chunk(events, self.position, boundary=True)

    # -- dispatch -----------------------------------------------------------------------------
    def feed(self, ev: BinlogEvent) -> Iterable[Chunk]:
        """The chunks `ev` completes (iterate them fully before the next event)."""
        if isinstance(ev, RowsEvent):
            self._on_rows(ev)
            return []
        if isinstance(ev, TableMap):
            self._tables.mapped(ev)
            return []
        if isinstance(ev, XidEvent):
            return self._end_txn(ev.where, xid=ev.xid)
        if isinstance(ev, XaPrepareEvent):
            return self._on_xa_prepare(ev)
        if isinstance(ev, IncidentEvent):
            return self._on_incident(ev)
        if isinstance(ev, GtidEvent):
            self._begin_txn(ev.gtid)
            assert self._txn is not None
            self._txn.begun, self._txn.alter = ev.begins, ev.alter
            return []
        if isinstance(ev, QueryEvent):
            return self._on_query(ev)
        if isinstance(ev, RotateEvent):
            if self._txn is None and ev.timestamp != 0:
                # A real rotation at a boundary: checkpoint there so a restart starts in the new file.
                return self._boundary_only(ev.next_start)
            return []
        if isinstance(ev, HeartbeatEvent):
            return []
        return []

    def _on_query(self, ev: QueryEvent) -> Iterable[Chunk]:
        upper = ev.query.strip()[:9].upper()
        if upper.startswith("BEGIN"):
            txn = self._txn_or_new()
            txn.thread_id = ev.thread_id
            txn.begun = True
            return []
        if upper.startswith(("COMMIT", "ROLLBACK")):
            return self._end_txn(ev.where, xid=None)
        if upper.startswith("XA "):
            return []
        # A statement outside BEGIN...COMMIT: DDL (or a non-transactional statement); it ends its transaction.
        txn = self._txn_or_new()
        txn.thread_id = ev.thread_id
        if txn.alter in ("start", "rollback"):
            # MariaDB's ALTER in two phases: it takes effect at its COMMIT ALTER, which carries the same statement
            # (until then the table's rows come in their old form); a ROLLBACK ALTER never took effect.
            log.info("%s ALTER at %s: applied at its commit, not here: %s", txn.alter, ev.where, ev.query[:200])
            return self._end_txn(ev.where, xid=None)
        if self._ddl.apply(ev, txn, last_heartbeat=self.position.last_heartbeat):
            self._tables.forget_decoders()
        if txn.begun and not self._ddl.unlogged and not self._ddl.renamed:
            # A statement inside BEGIN ... COMMIT does not end the transaction: MySQL 8.0.21+ and MariaDB log
            # CREATE TABLE ... SELECT so, the new table's rows and the commit following in the same transaction.
            return []
        return self._end_txn(ev.where, xid=None, reread=self._unlogged(ev), renamed=self._ddl.renamed)

    def _on_xa_prepare(self, ev: XaPrepareEvent) -> Iterable[Chunk]:
        """XA COMMIT ... ONE PHASE commits here; an XA PREPARE is refused by name: its rows take effect at a later XA
        COMMIT (or never, at XA ROLLBACK), which this engine does not follow. Without it the prepared rows ran into
        the next transaction (or stopped the worker with a misleading "truncated binlog" at the next GTID)."""
        if ev.one_phase:
            return self._end_txn(ev.where, xid=None)
        txn = self._txn
        start = txn.start if txn is not None else self.position.coordinate
        gtid = f" {txn.gtid}" if txn is not None and txn.gtid else ""
        raise CaptureError(
            f"transaction{gtid} at {start} is a two-phase XA transaction (XA PREPARE of xid {ev.xid!r} at "
            f"{ev.where}): its rows take effect only at a later XA COMMIT, and the worker does not capture XA "
            f"transactions committed in two phases; nothing from {start} on was written. Fix: commit XA transactions "
            "in one phase (XA COMMIT ... ONE PHASE) where the application allows it; to go on past this one, start "
            "the capture after its XA COMMIT (spec.start), which leaves its rows out of the change log"
        )

    def _on_incident(self, ev: IncidentEvent) -> Iterable[Chunk]:
        """The server changed rows it could not log, of tables the binlog does not name: every captured table is
        read again once the stream is past the incident (as for a statement that changed rows without row
        events), or, with spec.snapshot.mode never, a warning names the fix. MySQL gives the incident a GTID of its
        own, and the transaction that GTID opened ends here."""
        said = f"{ev.incident}: {ev.message}" if ev.message else ev.incident
        tables = tuple(sorted(k for k in self.schema.current.tables if self.filter.includes(*k)))
        if self.reread_unlogged:
            log.warning(
                "the source wrote an INCIDENT event (%s) at %s: it changed rows it could not write to its binlog, "
                "and the binlog does not say which; a snapshot of every captured table (%d) follows once the stream "
                "is past it, so the change log holds what the tables hold",
                said,
                ev.where,
                len(tables),
            )
            return self._end_txn(ev.where, xid=None, reread=tables)
        log.warning(
            "the source wrote an INCIDENT event (%s) at %s: it changed rows it could not write to its binlog, and "
            "spec.snapshot.mode is never: the change log does not show those changes. Fix: `mysqlcapture resnapshot "
            "<manifest>` (every table)",
            said,
            ev.where,
        )
        return self._end_txn(ev.where, xid=None)

    def _unlogged(self, ev: QueryEvent) -> tuple[tuple[str, str], ...]:
        """The included tables whose rows `ev` changed without row events, to read again (or warned about)."""
        tables = self._ddl.unlogged
        if not tables:
            return ()
        names = ", ".join(f"{db}.{t}" for db, t in tables)
        if self.reread_unlogged:
            log.warning(
                "the statement at %s changed rows of %s without row events (%s): a snapshot of %s follows once "
                "the stream is past it, so the change log holds what the tables hold",
                ev.where,
                names,
                ev.query[:200],
                "it" if len(tables) == 1 else "them",
            )
            return tables
        log.warning(
            "the statement at %s changed rows of %s without row events (%s), and spec.snapshot.mode is never: the "
            "change log does not show that change. Fix: `mysqlcapture resnapshot <manifest> --table <db.table>` "
            "for each of them",
            ev.where,
            names,
            ev.query[:200],
        )
        return ()

    def _on_rows(self, ev: RowsEvent) -> None:
        tm = self._tables.get(ev.table_id)
        if tm is None:
            raise CaptureError(
                f"rows event at {ev.where} for unknown table id {ev.table_id}; "
                "the stream did not start at a transaction boundary"
            )
        if self._heartbeats.matches(tm):
            for value in self._heartbeats.values(self._tables.decoded(tm), ev):
                self.position = self.position.with_heartbeat(value)
                if self.on_heartbeat is not None:
                    self.on_heartbeat(value)
                if self.on_heartbeat_at is not None:
                    self.on_heartbeat_at(value, self._txn.start if self._txn is not None else self.position.coordinate)
            return
        if not self.filter.includes(tm.database, tm.table) or self.schema.replaying:
            return  # (replaying: read again after a failover by heartbeat search, in the change log already)
        txn = self._txn_or_new()
        decoded = self._tables.decoded(tm)
        add_rows(txn, decoded, ev)
        add_actions(txn, decoded, ev, self.schema.current, self.filter.includes)

    # -- transactions -------------------------------------------------------------------------
    def _txn_or_new(self) -> Transaction:
        if self._txn is None:
            self._begin_txn(None)
        assert self._txn is not None
        return self._txn

    def _begin_txn(self, gtid: str | None) -> None:
        if self._txn is not None and self._txn.gtid is not None and gtid is not None:
            raise CaptureError(
                f"transaction {self._txn.gtid} at {self._txn.start} has no commit "
                f"before GTID {gtid}; the binlog is truncated or corrupt"
            )
        skip, self._resume_skip = self._resume_skip, 0
        self._txn = Transaction(
            start=self.position.coordinate,
            gtid=gtid,
            skip=skip,
            events=TxnBuffer(self.spill_rows, self.spill_dir),
        )

    def _end_txn(
        self,
        end_at: Coordinate,
        *,
        xid: int | None,
        reread: tuple[tuple[str, str], ...] = (),
        renamed: Mapping[tuple[str, str], tuple[str, str]] | None = None,
    ) -> Iterator[Chunk]:
        """The transaction's chunks, produced lazily: a million-row transaction is never all in memory.

        The engine's position moves to the transaction's end only once the last chunk was taken. `reread`: tables
        the position there carries a snapshot of (in the same commit as the statement: a restart reads them too).
        `renamed`: tables a pending snapshot reads under their new names (its view, opened later, sees those).
        """
        txn = self._txn
        self._txn = None
        if txn is None:
            txn = Transaction(start=self.position.coordinate)
        if txn.gtid is not None:
            self._gtids = self._gtids.add(txn.gtid)
        end = self.position.at_boundary(end_at, gtid_set=str(self._gtids), schema_version=self.schema.version)
        if reread or (renamed and end.snapshot):
            job = SnapshotJob.from_json(end.snapshot) if end.snapshot else SnapshotJob((), reason="unlogged")
            end = end.with_snapshot(job.renamed(renamed or {}).reading_again(reread).to_json())
        return self._chunks(txn, end, xid)

    def _chunks(self, txn: Transaction, end: Position, xid: int | None) -> Iterator[Chunk]:
        for events, txn_index in txn.commits(xid=xid, chunk_rows=self.chunk_rows, keys=self._keys):
            if txn_index is None:  # the last: the position moves to the transaction's end
                self.position = end.with_order_key(self._keys.last)
                yield Chunk(events, self.position, boundary=True)
            else:
                inside = self.position.inside(txn_index, self._keys.last).with_schema_version(self.schema.version)
                yield Chunk(events, inside, boundary=False)

    def _boundary_only(self, coordinate: Coordinate) -> list[Chunk]:
        self.position = self.position.at_boundary(coordinate, gtid_set=str(self._gtids))
        return [Chunk([], self.position, boundary=True)]
