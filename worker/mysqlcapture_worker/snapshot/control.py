"""When the worker snapshots: a new capture (spec.snapshot.mode), a request, purged binlogs (onPurged: resnapshot).

The worker's hooks call this object; it owns the snapshot's view, the job and the request poller.
A snapshot is planned (its job checkpointed in the position, its view opened at frontier F) and
read once the stream stands at F (`due`): the rows and the schema they are rendered with then
describe the same moment (see `runner`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pymysql
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.schema import Schema

from mysqlcapture_worker.engine import CaptureEngine, Chunk
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.metrics import WorkerMetrics
from mysqlcapture_worker.positions import Position, SnapshotJob
from mysqlcapture_worker.replication.events import BinlogEvent, HeartbeatEvent
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.snapshot.reader import SnapshotView
from mysqlcapture_worker.snapshot.requests import RequestPoller
from mysqlcapture_worker.snapshot.runner import Snapshotter, ViewOutdated
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)

Put = Callable[[Chunk], None]

# A table that keeps changing under every new view: after this many views in a row, its error is the worker's.
MAX_OUTDATED_VIEWS = 10


def included_tables(schema: Schema, table_filter: TableFilter) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((t.database, t.name) for t in schema.all_tables() if table_filter.includes(t.database, t.name)))


def at_frontier(frontier: Coordinate, boundary: Coordinate, ev: BinlogEvent | None) -> bool:
    """Whether a stream between transactions at `boundary`, about to feed `ev`, has fed every event before `frontier`.

    Its boundary is at the frontier or later; or `ev` ends after it, so starts at it or later (an event
    either ends at or before the frontier or starts at or after it); or `ev` is a heartbeat, sent with
    everything up to the place it names, and names the frontier or later. An event whose end is unknown
    (0) says nothing.
    """
    if boundary >= frontier:
        return True
    where = getattr(ev, "where", None)
    if not isinstance(where, Coordinate) or where.pos <= 0:
        return False
    if isinstance(ev, HeartbeatEvent):
        return where >= frontier
    return where > frontier


class SnapshotControl:
    def __init__(
        self,
        settings: WorkerSettings,
        *,
        connect: Callable[..., pymysql.connections.Connection],
        metrics: WorkerMetrics,
        table_filter: TableFilter,
        dialect: Dialect,
    ) -> None:
        self.settings = settings
        self.filter = table_filter
        self.snapshotter = Snapshotter(
            connect=connect, dialect=dialect, metrics=metrics, chunk_rows=settings.snapshot.chunk_rows
        )
        self._connect = connect
        self._view: SnapshotView | None = None  # the planned snapshot's view, read once the stream reaches it
        self._fresh = False  # the view was opened at the stream's start position (initial, recover_purged)
        self._requests: list[int] = []  # the requests the planned snapshot serves
        self._outdated: tuple[tuple[str, str], int] | None = None  # table, views in a row it changed under
        self.poller: RequestPoller | None = None

    # -- new capture ----------------------------------------------------------------------------
    def wants_initial(self, *, at_origin: bool) -> bool:
        """A new capture from `earliest` snapshots unless the binlog still holds the server's whole history.

        `latest`, `gtid` and `position` name where the capture's history starts: no snapshot.
        """
        s = self.settings
        return s.snapshot.mode != "never" and s.start.from_ == "earliest" and not at_origin

    def initial(
        self, *, server_id: int, identity: str, capture_schema: Callable[[], Schema]
    ) -> tuple[Position, Schema]:
        """Open the view; the position is its frontier, carrying the job; the schema is read under the lock."""
        captured: list[Schema] = []
        self._view = self.snapshotter.open_view(while_locked=lambda: captured.append(capture_schema()))
        schema = captured[0]
        self._fresh = True
        job = SnapshotJob(tables=included_tables(schema, self.filter), reason="initial")
        f = self._view.frontier
        position = Position(
            server_id=server_id,
            server_identity=identity,
            coordinate=f.coordinate,
            gtid_set=f.gtid_set,
            snapshot=job.to_json(),
        )
        log.info("new capture: snapshot of %d tables at %s", len(job.tables), position)
        return position, schema

    # -- reader thread --------------------------------------------------------------------------
    def plan_pending(self, engine: CaptureEngine) -> None:
        """At (re)connect: the snapshot the checkpoint is in the middle of reads from a view opened now.

        A view left from before the reconnect is dropped: the server may not be the one it was opened on.
        """
        view, fresh, self._view, self._fresh = self._view, self._fresh, None, False
        if engine.position.snapshot is None:
            if view is not None:
                view.close()
            return
        if view is not None and not fresh:
            view.close()
            view = None
        self._view = view or self.snapshotter.open_view()

    def plan_added(self, engine: CaptureEngine) -> None:
        """Between transactions: open the view of a job the stream itself put in the position (a statement that
        changed rows without row events), read once the stream reaches the view's frontier, past the statement."""
        if self._view is None and engine.position.snapshot is not None and engine.between_transactions:
            self._view = self.snapshotter.open_view()

    def due(self, engine: CaptureEngine, ev: BinlogEvent | None = None) -> bool:
        """Whether the planned snapshot is to be read now, before `ev` is fed: the stream stands at its frontier.

        The engine is between transactions and has fed every event before the frontier F: its position is
        at F or later, or `ev` starts at F or later (an event either ends at or before F or starts at or
        after it), or `ev` is a heartbeat sent with everything up to F.
        """
        view = self._view
        if view is None or not engine.between_transactions:
            return False
        return at_frontier(view.frontier.coordinate, engine.position.coordinate, ev)

    def run_due(self, engine: CaptureEngine, put: Put, stop: threading.Event) -> None:
        """Read the planned snapshot (the stream stands at its view's frontier) to its end.

        A table changed after the view opened starts again from a new view, read once the stream has
        applied the change; the job's other tables keep what they read.
        """
        view, self._view, self._fresh = self._view, None, False
        assert view is not None and engine.position.snapshot is not None
        try:
            self.snapshotter.run(engine, SnapshotJob.from_json(engine.position.snapshot), put, stop, view=view)
        except ViewOutdated as exc:
            job = SnapshotJob.from_json(engine.position.snapshot)  # as far as the chunks got
            tries = self._outdated[1] + 1 if self._outdated is not None and self._outdated[0] == exc.table else 1
            if tries > MAX_OUTDATED_VIEWS:
                raise (exc.__cause__ or exc) from None
            self._outdated = (exc.table, tries)
            if job.started:
                put(engine.insert([], job.restart_table().to_json()))
            log.warning(
                "snapshot of %s: the table changed after the snapshot's view opened (%s); reading it again from a "
                "view opened after the change, once the stream has applied it",
                ".".join(exc.table),
                exc.__cause__,
            )
            self._view = self.snapshotter.open_view()
            return
        self._outdated = None
        ids, self._requests = self._requests, []
        if ids and self.poller is not None:
            self.poller.done(ids)

    def serve_requests(self, engine: CaptureEngine, put: Put) -> None:
        """Between two transactions: plan what `mysqlcapture resnapshot` asked for (read once `due`)."""
        poller = self.poller
        if (
            poller is None
            or not poller.wanted
            or not engine.between_transactions
            or self._view is not None
            or engine.position.snapshot is not None
        ):
            return
        requests = poller.take()
        everything = included_tables(engine.schema.current, self.filter)
        wanted: set[tuple[str, str]] = set()
        for r in requests:
            if r.table is None:
                wanted.update(everything)
                continue
            db, _, name = r.table.partition(".")
            if (db, name) in everything:
                wanted.add((db, name))
            else:
                log.warning("resnapshot request %d: %s is not a captured table, ignored", r.id, r.table)
        log.info("resnapshot requested (%s): %d tables", ",".join(str(r.id) for r in requests), len(wanted))
        job = SnapshotJob(tables=tuple(sorted(wanted)), reason="request", request_id=max(r.id for r in requests))
        self._view = self.snapshotter.open_view()
        self._requests = [r.id for r in requests]
        put(engine.insert([], job.to_json()))

    def recover_purged(self, engine: CaptureEngine, capture_schema: Callable[[], Schema]) -> bool:
        """onPurged: resnapshot / mode when-needed: jump to a new snapshot's frontier; False when not allowed."""
        s = self.settings
        if s.failover.on_purged != "resnapshot" and s.snapshot.mode != "when-needed":
            return False
        old = engine.position
        captured: list[Schema] = []
        if self._view is not None:  # a view planned before the binlog was found purged
            self._view.close()
            self._view = None
        view = self.snapshotter.open_view(while_locked=lambda: captured.append(capture_schema()))
        f = view.frontier
        state = engine.schema
        history: Any = state._history
        schema = captured[0]
        # The binlog that would have said how the schema changed is gone: record the schema read now.
        if history is not None:
            state.version = history.record(
                base_version=state.version,
                before=state.current,
                after=schema,
                server_id=old.server_id,
                coordinate=f.coordinate,
                gtid=f.gtid_set or None,
                last_heartbeat=old.last_heartbeat,
                sql="/* mysqlcapture: schema captured again after purged binlogs */",
            )
        else:
            state.version += 1
        state.current = schema
        job = SnapshotJob(tables=included_tables(schema, self.filter), reason="purged")
        new = old.at_boundary(f.coordinate, gtid_set=f.gtid_set)
        engine.failover_to(new.with_schema_version(state.version).with_snapshot(job.to_json()))
        self._view, self._fresh = view, True
        log.warning(
            "the checkpoint's binlog %s is purged: taking a new snapshot of %d tables, continuing from %s",
            old.coordinate.file,
            len(job.tables),
            new.coordinate,
        )
        return True

    # -- helpers --------------------------------------------------------------------------------
    def start_poller(self, connect: Callable[[], Any]) -> RequestPoller:
        self.poller = RequestPoller(
            connect, database=self.settings.heartbeat.database, client_id=self.settings.name, interval=1.0
        ).start()
        return self.poller

    def percent(self) -> float | None:
        return self.snapshotter.percent()

    @property
    def running(self) -> bool:
        return self.snapshotter.running is not None
