"""When the worker snapshots: a new capture (spec.snapshot.mode), a request, purged binlogs (onPurged: resnapshot).

The worker's hooks call this object; it owns the snapshot's readers, the job and the request poller.
A snapshot is planned by putting its job in the position; then, between transactions, `step` reads the
job's current table: a table with a key in parallel windows while the stream goes on (`parallel`), a
table without one from a view read once the stream stands at the view's place (`due`, `run_due`).
No lock is taken (see `reader` and `parallel` for why each is exact).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pymysql
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.schema import Schema
from mysqlcapture_api.worker_status import SnapshotTable

from mysqlcapture_worker.engine import CaptureEngine, Chunk
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.metrics import WorkerMetrics
from mysqlcapture_worker.positions import Position, SnapshotJob
from mysqlcapture_worker.replication.events import BinlogEvent, HeartbeatEvent
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.snapshot.parallel import Fences, ParallelSnapshot
from mysqlcapture_worker.snapshot.progress import Progress
from mysqlcapture_worker.snapshot.reader import SnapshotView
from mysqlcapture_worker.snapshot.requests import RequestPoller
from mysqlcapture_worker.snapshot.runner import Snapshotter, ViewOutdated
from mysqlcapture_worker.snapshot.window import WindowLog
from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.checks import SourceConfigError
from mysqlcapture_worker.source.dialect import Dialect
from mysqlcapture_worker.source.snapshot_needs import snapshot_needs

log = logging.getLogger(__name__)

Put = Callable[[Chunk], None]

# A table that keeps changing under every new view: after this many views in a row, its error is the worker's.
MAX_OUTDATED_VIEWS = 10
# A MySQL table without a key read from a view that writes touched between its fence and its place: tries.
MAX_INEXACT_VIEWS = 30


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
        fence: Callable[[], int] | None = None,
    ) -> None:
        """`fence`: writes a heartbeat on the source and returns its value once committed (MySQL's fences)."""
        self.settings = settings
        self.filter = table_filter
        self.dialect = dialect
        self.progress = Progress(metrics)
        self.snapshotter = Snapshotter(
            connect=connect,
            dialect=dialect,
            metrics=metrics,
            chunk_rows=settings.snapshot.rows_per_chunk,
            progress=self.progress,
        )
        self.window = WindowLog()
        self.fences = Fences(fence) if fence is not None else None
        self.parallel = ParallelSnapshot(
            connect=connect,
            dialect=dialect,
            metrics=metrics,
            window=self.window,
            fences=self.fences,
            parallelism=settings.snapshot.parallelism,
            chunk_rows=settings.snapshot.rows_per_chunk,
            progress=self.progress,
        )
        self.metrics = metrics
        self._connect = connect
        self._view: SnapshotView | None = None  # a table without a key: its view, read once the stream reaches it
        self._requests: list[int] = []  # the requests the planned snapshot serves
        self._outdated: tuple[tuple[str, str], int] | None = None  # table, views in a row it changed under
        self._inexact = 0  # views in a row a MySQL table without a key was written under
        self._job_running = False
        self.poller: RequestPoller | None = None

    # -- new capture ----------------------------------------------------------------------------
    def wants_initial(self, *, at_origin: bool) -> bool:
        """A new capture from `earliest` snapshots unless the binlog still holds the server's whole history.

        `latest`, `gtid` and `position` name where the capture's history starts: no snapshot.
        """
        s = self.settings
        return s.snapshot.mode != "never" and s.start.from_ == "earliest" and not at_origin

    def here(self, capture_schema: Callable[[], Schema]) -> tuple[Coordinate, str, Schema]:
        """The binlog's end now and the schema there, without a lock: the schema is read before and after the
        position, and again until the two reads agree (no DDL between them)."""
        conn = self._connect()
        try:
            after = capture_schema()
            for _ in range(20):
                before = after
                status = queries.binlog_status(conn, self.dialect)
                gtid = (
                    queries.gtid_at(conn, self.dialect, status.coordinate)
                    if self.dialect.mariadb
                    else status.gtid_executed
                )
                after = capture_schema()
                if after == before:
                    return status.coordinate, gtid, after
            raise SourceConfigError(
                "the source's schema kept changing while the capture read it (20 tries): start the capture when no "
                "DDL runs",
                "SchemaChanging",
            )
        finally:
            conn.close()

    def initial(
        self, *, server_id: int, identity: str, capture_schema: Callable[[], Schema]
    ) -> tuple[Position, Schema]:
        """The position is the binlog's end now, carrying the job; the snapshot is read from there on."""
        at, gtid, schema = self.here(capture_schema)
        job = SnapshotJob(tables=included_tables(schema, self.filter), reason="initial")
        position = Position(
            server_id=server_id, server_identity=identity, coordinate=at, gtid_set=gtid, snapshot=job.to_json()
        )
        log.info("new capture: snapshot of %d tables from %s", len(job.tables), position)
        return position, schema

    # -- reader thread --------------------------------------------------------------------------
    def plan_pending(self, engine: CaptureEngine) -> None:
        """At (re)connect: what was read for the stream before is dropped (the server may not be the same)."""
        self.restart()

    def restart(self) -> None:
        """The stream restarts: windows and views opened before cannot be merged with it."""
        if self._view is not None:
            self._view.close()
            self._view = None
        self.window.restart()
        self.parallel.reconnect()

    def step(self, engine: CaptureEngine, put: Put) -> None:
        """Between transactions: move the position's snapshot job on (start a table, put in finished reads)."""
        text = engine.position.snapshot
        if text is None or not engine.between_transactions or self._view is not None:
            return
        job = SnapshotJob.from_json(text)
        if not self._job_running:
            self._check_needs()
            self._job_running = True
            self.metrics.snapshot_running.labels(self.metrics.capture).set(1)
            self.snapshotter.running = job
        if job.done:
            self._complete(engine, job, put)
            return
        job = self.parallel.pump(engine, job, put)
        self.snapshotter.running = job
        if self.parallel.keyless is not None:
            self._open_keyless(engine, job)
        elif engine.position.snapshot is None:
            self._complete(engine, job, put)

    def _check_needs(self) -> None:
        """What this server must allow for a lock-free snapshot (`source.snapshot_needs`): one line naming the first
        thing missing and its fix."""
        conn = self._connect()
        try:
            s = self.settings
            needs = snapshot_needs(
                conn,
                self.dialect,
                user=s.source.user,
                heartbeat_database=s.heartbeat.database,
                parallelism=s.snapshot.parallelism,
            )
        finally:
            conn.close()
        missing = [n for n in needs if not n.ok]
        if missing:
            raise SourceConfigError(missing[0].line(), "SnapshotNotPossible")

    def _complete(self, engine: CaptureEngine, job: SnapshotJob, put: Put) -> None:
        if engine.position.snapshot is not None:
            put(engine.insert([], None))
        self._job_running = False
        self.snapshotter.running = None
        self.metrics.snapshot_running.labels(self.metrics.capture).set(0)
        self.metrics.snapshots.labels(self.metrics.capture, job.reason).inc()
        log.info("snapshot (%s) of %d tables complete", job.reason, len(job.tables))
        ids, self._requests = self._requests, []
        if (ids or job.request_id) and self.poller is not None:
            self.poller.done(ids, through=job.request_id)  # a job resumed after a restart: its request_id

    def _open_keyless(self, engine: CaptureEngine, job: SnapshotJob) -> None:
        """A table without a key: a view of it, read once the stream stands at the view's place."""
        table = job.table
        if self.window.watching(table) is None:
            self.window.watch(table, (), engine.position.coordinate)
        self._view = self.snapshotter.open_view(fence=self.fences.write_now if self.fences is not None else None)

    def due(self, engine: CaptureEngine, ev: BinlogEvent | None = None) -> bool:
        """Whether the planned view is to be read now, before `ev` is fed: the stream stands at its place.

        The engine is between transactions and has fed every event before the place F: its position is
        at F or later, or `ev` starts at F or later (an event either ends at or before F or starts at or
        after it), or `ev` is a heartbeat sent with everything up to F.
        """
        view = self._view
        if view is None or not engine.between_transactions:
            return False
        return at_frontier(view.frontier.coordinate, engine.position.coordinate, ev)

    def run_due(self, engine: CaptureEngine, put: Put, stop: threading.Event) -> None:
        """Read the table without a key from its view (the stream stands at the view's place) to its end.

        MySQL: the view lies between its fence and its place; it is exact when no transaction in between
        touched the table, else a new view is opened (the table is written continuously: at most
        MAX_INEXACT_VIEWS tries, then one line naming the table and the fix).
        """
        view, self._view = self._view, None
        assert view is not None and engine.position.snapshot is not None
        job = SnapshotJob.from_json(engine.position.snapshot)
        table = job.table
        if view.frontier.fence is not None:
            fence = self.window.fence_at(view.frontier.fence)
            merge = self.window.merge(table, fence) if fence is not None else None
            if merge is None or merge.effects or merge.reshaped or merge.partial:
                view.close()
                self._inexact += 1
                if self._inexact > MAX_INEXACT_VIEWS:
                    raise SourceConfigError(
                        f"snapshot of {table[0]}.{table[1]}: the table has no primary key and no unique key of NOT "
                        f"NULL columns, and it was written during each of {MAX_INEXACT_VIEWS} attempts to read it "
                        "exactly without a lock on MySQL. Fix: add a primary key (or a unique key of NOT NULL "
                        "columns) to it, or exclude it (spec.tables.exclude) and snapshot it when it is quiet "
                        "(`mysqlcapture resnapshot <manifest> --table db.t`)",
                        "SnapshotNotExact",
                    )
                log.info("snapshot of %s.%s: written while its view opened; opening another", *table)
                return
        self._inexact = 0
        try:
            job = self.snapshotter.run(engine, job, put, stop, view=view)
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
            return
        self._outdated = None
        self.window.unwatch(table)
        self.parallel.keyless = None
        if job.done:
            self._complete(engine, job, put)

    def serve_requests(self, engine: CaptureEngine, put: Put) -> None:
        """Between two transactions: plan what `mysqlcapture resnapshot` asked for (read by `step`)."""
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
        self._requests = [r.id for r in requests]
        put(engine.insert([], job.to_json()))

    def recover_purged(self, engine: CaptureEngine, capture_schema: Callable[[], Schema]) -> bool:
        """onPurged: resnapshot / mode when-needed: jump to the binlog's end and snapshot; False when not allowed."""
        s = self.settings
        if s.failover.on_purged != "resnapshot" and s.snapshot.mode != "when-needed":
            return False
        old = engine.position
        self.restart()
        at, gtid, schema = self.here(capture_schema)
        state = engine.schema
        history: Any = state._history
        # The binlog that would have said how the schema changed is gone: record the schema read now.
        if history is not None:
            state.version = history.record(
                base_version=state.version,
                before=state.current,
                after=schema,
                server_id=old.server_id,
                coordinate=at,
                gtid=gtid or None,
                last_heartbeat=old.last_heartbeat,
                sql="/* mysqlcapture: schema captured again after purged binlogs */",
            )
        else:
            state.version += 1
        state.current = schema
        job = SnapshotJob(tables=included_tables(schema, self.filter), reason="purged")
        new = old.at_boundary(at, gtid_set=gtid)
        engine.failover_to(new.with_schema_version(state.version).with_snapshot(job.to_json()))
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

    def close(self) -> None:
        self.restart()
        self.parallel.close()

    def percent(self) -> float | None:
        return self.snapshotter.percent()

    def tables(self) -> list[SnapshotTable]:
        """The tables being read now, with their progress (/status)."""
        return self.progress.status()

    @property
    def running(self) -> bool:
        return self._job_running
