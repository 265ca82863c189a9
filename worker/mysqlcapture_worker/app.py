"""The worker: validate the source, resume from the sink's checkpoint, stream, decode and commit, until stopped.

Two threads joined by a queue bounded by rows (binlog_reader.Handoff), so that reading and decoding the binlog
overlap the sink's commits while memory stays bounded: the reader thread (binlog_reader) owns the replication
connection and the capture engine and hands complete chunks to the queue; the main thread (committer) commits them
to the sink. The start (startup), the metric updates (recorder) and the /status document (state) are units of their own;
`Worker` wires them together.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable

from mysqlcapture_api.columns import to_property
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.worker_status import WorkerStatus
from prometheus_client import CollectorRegistry

from mysqlcapture_worker.engine import CaptureEngine
from mysqlcapture_worker.failover.heartbeat import TABLE as HEARTBEAT_TABLE
from mysqlcapture_worker.failover.heartbeat import HeartbeatWriter
from mysqlcapture_worker.failover.purge import Headroom, PurgeWatch
from mysqlcapture_worker.failover.reconnect import Reconnector
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.metrics import HealthState, WorkerMetrics
from mysqlcapture_worker.positions import Position, seal_snapshot_keys
from mysqlcapture_worker.replication.stream import BinlogStream
from mysqlcapture_worker.runtime.binlog_reader import BinlogReader, Handoff
from mysqlcapture_worker.runtime.committer import Committer
from mysqlcapture_worker.runtime.connections import SourceConnections
from mysqlcapture_worker.runtime.recorder import MetricsRecorder
from mysqlcapture_worker.runtime.startup import Startup
from mysqlcapture_worker.runtime.state import WorkerState
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.sinks import Sink
from mysqlcapture_worker.sinks.jsonl import JsonLinesSink
from mysqlcapture_worker.snapshot.control import SnapshotControl
from mysqlcapture_worker.snapshot.requests import RequestPoller
from mysqlcapture_worker.source.checks import ServerInfo

_GC_GEN0 = 200_000  # allocations between young-generation collections (CPython's default: 700)
SWITCH_SECONDS = 0.001  # the GIL's switch interval (`Worker.run`; CPython's default: 0.005)
CHUNK_ROWS = 5000


def build_sink(settings: WorkerSettings, recorder: MetricsRecorder | None = None) -> Sink:
    if settings.sink.type == "delta":
        from mysqlcapture_worker.sinks.delta import DeltaSink  # pyarrow.compute (0.1 s to import): Delta captures only

        return DeltaSink(
            settings.sink.delta_uri,
            app_id=f"mysqlcapture-{settings.name}",
            storage_options=settings.sink.storage_options,
            column_rules=to_property(settings.columns.spec) if settings.columns is not None else "",
            hashed=settings.columns is not None and settings.columns.spec.hash is not None,
        )
    if settings.sink.type == "kafka":
        from mysqlcapture_worker.sinks.kafka import KafkaMetrics, KafkaSink  # confluent-kafka: Kafka captures only

        assert settings.sink.kafka is not None
        metrics = KafkaMetrics()
        if recorder is not None:
            metrics = KafkaMetrics(
                dead_lettered=recorder.dead_lettered,
                fenced=recorder.kafka_fenced,
                transaction=recorder.kafka_transaction,
                unacknowledged=recorder.kafka_unacknowledged,
            )
        security = settings.sink.kafka_security
        return KafkaSink(
            settings.sink.kafka,
            capture=settings.name,
            security=security,
            metrics=metrics,
            history_storage=settings.sink.storage_options,
        )
    return JsonLinesSink(settings.sink.jsonl)


class Worker:
    """One capture of one server. `run()` blocks until `stop` is set or a fatal error is raised."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        registry: CollectorRegistry,
        health: HealthState | None = None,
        clock: Callable[[], float] = time.time,
        sink: Sink | None = None,
        stream_factory: Callable[..., BinlogStream] = BinlogStream,
        exit_at_end: bool = False,
    ) -> None:
        self.settings = settings
        # Snapshot key values in checkpoints are sealed with the column-hash key, when the capture has one.
        seal_snapshot_keys(settings.columns.key if settings.columns is not None and settings.columns.key else None)
        self.metrics = WorkerMetrics.of(registry, settings.name)
        self.recorder = MetricsRecorder(self.metrics, name=settings.name, clock=clock)
        self.health = health or HealthState()
        self.clock = clock
        self.sink = sink or build_sink(settings, self.recorder)
        self.stream_factory = stream_factory
        self.exit_at_end = exit_at_end  # read to the end of the binlog, commit, exit (benchmarks, batch runs)
        self.source = SourceConnections(
            settings,
            TableFilter(
                settings.tables.include, settings.tables.exclude, settings.heartbeat.database, settings.columns
            ),
        )
        self.state = WorkerState()
        self._queue = Handoff.for_flush(settings.flush.max_events)
        self.health.status = self.status
        self.reconnector = Reconnector(
            settings,
            connect=self.source.connect,
            open_stream=lambda start: self.stream_factory(
                self.source.connection, replica_server_id=settings.source.replica_server_id, start=start, blocking=False
            ),
            on_failover=self._on_failover,
        )

    @property
    def position(self) -> Position | None:
        """The last position the sink committed."""
        return self.state.position

    def status(self) -> WorkerStatus:
        """The worker's state for GET /status: phase, server, committed position, lag, purge headroom."""
        return self.state.document(lag_seconds=self.recorder.lag_seconds())

    def _on_failover(self, old_server_id: int, server: ServerInfo) -> None:
        self.state.failovers += 1
        self.state.server = server
        self.recorder.failed_over(server.server_id)

    def _on_headroom(self, room: Headroom) -> None:
        self.state.headroom = room
        self.recorder.headroom(room)

    def _checkpoint_coordinate(self) -> Coordinate | None:
        pos = self.state.position
        return pos.coordinate if pos is not None else None

    def _start_helpers(
        self, snapshots: SnapshotControl, heartbeats: HeartbeatWriter
    ) -> list[HeartbeatWriter | PurgeWatch | RequestPoller]:
        s = self.settings
        connect = self.source.connect
        helpers: list[HeartbeatWriter | PurgeWatch | RequestPoller] = []
        if s.heartbeat.interval_s > 0:
            helpers.append(heartbeats.start())
            # Requests live in the heartbeat database: without heartbeats the worker writes nothing there.
            helpers.append(snapshots.start_poller(connect))
        helpers.append(
            PurgeWatch(
                connect, self._checkpoint_coordinate, self._on_headroom, interval=s.failover.purge_check_s
            ).start()
        )
        return helpers

    def run(self, stop: threading.Event) -> None:
        # Change events are GC-tracked objects and tens of thousands are alive between commits (one per row
        # on the reference path): with the default thresholds the cyclic collector rescanned them all the
        # time (9% of the worker's CPU when measured). Nothing on the hot path makes cycles: collect rarely,
        # and never the start-up heap.
        gc.freeze()
        gc.set_threshold(_GC_GEN0, 50, 100)
        # Two threads run Python here, the binlog reader and the commit loop, and the commit loop calls into PyArrow
        # and delta-rs dozens of times per commit, each call giving the GIL up; taking it back waits for the reader
        # to reach the switch interval (Python's 5 ms), which made a commit of 50,000 rows wait more than it worked.
        sys.setswitchinterval(SWITCH_SECONDS)
        s = self.settings
        start = Startup(s, source=self.source, sink=self.sink, recorder=self.recorder).prepare()
        self.state.server, self.state.snapshots = start.server, start.snapshots
        self.state.foreign_keys = (start.foreign_keys, start.schema, self.source.table_filter.includes)
        self.state.position = start.position
        committer = Committer(
            s, sink=self.sink, handoff=self._queue, state=self.state, recorder=self.recorder, health=self.health
        )
        if start.new_capture:
            # Pin the start: a restart must resume here, not at a "latest" that has moved on.
            committer.commit([], start.position, caught_up=False)
        engine = CaptureEngine(
            position=start.position,
            schema=start.schema,
            table_filter=self.source.table_filter,
            heartbeat_table=(s.heartbeat.database, HEARTBEAT_TABLE),
            heartbeat_client=s.name,
            on_heartbeat=self.recorder.heartbeat,
            # Small chunks through a handoff bounded by rows: memory is bounded by flush.maxEvents, twice that waiting
            # in the handoff and one chunk.
            chunk_rows=min(s.flush.max_events, CHUNK_ROWS),
            spill_rows=s.flush.max_events,
            spill_dir=s.spill_dir,
            reread_unlogged=s.snapshot.mode != "never",
            key_hashes=s.sink.type == "delta",
        )
        reader = BinlogReader(
            s,
            source=self.source,
            reconnector=self.reconnector,
            snapshots=start.snapshots,
            handoff=self._queue,
            state=self.state,
            recorder=self.recorder,
            stream_factory=self.stream_factory,
            exit_at_end=self.exit_at_end,
        )
        reader_stop = threading.Event()
        thread = threading.Thread(target=reader.run, args=(engine, reader_stop), name="binlog-reader", daemon=True)
        thread.start()
        helpers = self._start_helpers(start.snapshots, start.heartbeats)
        self.recorder.up(True)
        self.health.ready = True
        self.health.detail = "streaming"
        self.state.phase = "Streaming"
        try:
            committer.loop(stop, thread)
        finally:
            reader_stop.set()
            for helper in helpers:
                helper.stop()
            if start.heartbeats not in helpers:
                start.heartbeats.stop()
            thread.join(timeout=10)
            self.recorder.up(False)
            self.health.ready = False
            self.sink.close()
