"""When the worker snapshots: a new capture (spec.snapshot.mode), a request, purged binlogs (onPurged: resnapshot).

The worker's hooks call this object; it owns the snapshot's view, the job and the request poller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pymysql

from mysqlcapture_worker.capture import CaptureEngine, Chunk
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.monitoring import WorkerMetrics
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.schema.schema import Schema
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.snapshot.job import SnapshotJob
from mysqlcapture_worker.snapshot.reader import SnapshotView
from mysqlcapture_worker.snapshot.requests import RequestPoller
from mysqlcapture_worker.snapshot.runner import Snapshotter
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)

Put = Callable[[Chunk], None]


def included_tables(schema: Schema, table_filter: TableFilter) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((t.database, t.name) for t in schema.all_tables() if table_filter.includes(t.database, t.name)))


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
            connect=connect, dialect=dialect, metrics=metrics, chunk_rows=settings.snapshot_chunk_rows
        )
        self._connect = connect
        self._view: SnapshotView | None = None  # opened by initial() or recover_purged(), read by the reader
        self.poller: RequestPoller | None = None

    # -- new capture ----------------------------------------------------------------------------
    def wants_initial(self, *, at_origin: bool) -> bool:
        """A new capture from `earliest` snapshots unless the binlog still holds the server's whole history.

        `latest`, `gtid` and `position` name where the capture's history starts: no snapshot.
        """
        s = self.settings
        return s.snapshot_mode != "never" and s.start_from == "earliest" and not at_origin

    def initial(
        self, *, server_id: int, identity: str, capture_schema: Callable[[], Schema]
    ) -> tuple[Position, Schema]:
        """Open the view; the position is its frontier, carrying the job; the schema is read under the lock."""
        captured: list[Schema] = []
        self._view = self.snapshotter.open_view(while_locked=lambda: captured.append(capture_schema()))
        schema = captured[0]
        job = SnapshotJob(tables=included_tables(schema, self.filter), reason="initial")
        f = self._view.frontier
        position = Position(
            server_id=server_id,
            server_identity=identity,
            binlog_file=f.binlog_file,
            binlog_pos=f.binlog_pos,
            gtid_set=f.gtid_set,
            snapshot=job.to_json(),
        )
        log.info("new capture: snapshot of %d tables at %s", len(job.tables), position)
        return position, schema

    # -- reader thread --------------------------------------------------------------------------
    def run_pending(self, engine: CaptureEngine, put: Put, stop: threading.Event) -> None:
        """Finish the snapshot the checkpoint is in the middle of (or that was just planned)."""
        text = engine.position.snapshot
        view, self._view = self._view, None
        if text is None:
            if view is not None:
                view.close()
            return
        self.snapshotter.run(engine, SnapshotJob.from_json(text), put, stop, view=view)

    def serve_requests(self, engine: CaptureEngine, put: Put, stop: threading.Event) -> None:
        """Between two transactions: snapshot what `mysqlcapture resnapshot` asked for."""
        poller = self.poller
        if poller is None or not poller.wanted or not engine.between_transactions:
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
        self.snapshotter.run(engine, job, put, stop)
        poller.done([r.id for r in requests])

    def recover_purged(self, engine: CaptureEngine, capture_schema: Callable[[], Schema]) -> bool:
        """onPurged: resnapshot / mode when-needed: jump to a new snapshot's frontier; False when not allowed."""
        s = self.settings
        if s.on_purged != "resnapshot" and s.snapshot_mode != "when-needed":
            return False
        old = engine.position
        captured: list[Schema] = []
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
                binlog_file=f.binlog_file,
                binlog_pos=f.binlog_pos,
                gtid=f.gtid_set or None,
                last_heartbeat=old.last_heartbeat,
                sql="/* mysqlcapture: schema captured again after purged binlogs */",
            )
        else:
            state.version += 1
        state.current = schema
        job = SnapshotJob(tables=included_tables(schema, self.filter), reason="purged")
        new = old.at_boundary(binlog_file=f.binlog_file, binlog_pos=f.binlog_pos, gtid_set=f.gtid_set)
        engine.failover_to(new.with_schema_version(state.version).with_snapshot(job.to_json()))
        self._view = view
        log.warning(
            "the checkpoint's binlog %s is purged: taking a new snapshot of %d tables, continuing from %s",
            old.binlog_file,
            len(job.tables),
            new.coordinate,
        )
        return True

    # -- helpers --------------------------------------------------------------------------------
    def start_poller(self, connect: Callable[[], Any]) -> RequestPoller:
        self.poller = RequestPoller(
            connect, database=self.settings.heartbeat_db, client_id=self.settings.name, interval=1.0
        ).start()
        return self.poller

    def percent(self) -> float | None:
        return self.snapshotter.percent()

    @property
    def running(self) -> bool:
        return self.snapshotter.running is not None
