"""The worker's metric updates: one method per thing that happened (a commit, a failover, a headroom reading)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from operator import attrgetter

from mysqlcapture_worker.changes import Event, count_rows, split_batches
from mysqlcapture_worker.failover.purge import Headroom
from mysqlcapture_worker.metrics import WorkerMetrics
from mysqlcapture_worker.positions import Position

_EVENT_KEY = attrgetter("database", "table", "type")
_EVENT_TS = attrgetter("ts")


class MetricsRecorder:
    """Updates the capture's series of `metrics`; `clock` (Unix seconds) is the "now" lag is measured against."""

    def __init__(self, metrics: WorkerMetrics, *, name: str, clock: Callable[[], float]) -> None:
        self.metrics = metrics
        self.name = name
        self.clock = clock
        # Exported from the start at 0, so that increase() sees the first.
        for outcome in ("committed", "aborted"):
            metrics.kafka_transactions.labels(name, outcome)
        for kind in ("disconnect", "dead_letter", "kafka_fenced"):
            metrics.errors.labels(name, kind)

    def serving(self, server_id: int) -> None:
        """The source server the stream reads is `server_id`."""
        self.metrics.server_id.labels(self.name).set(server_id)

    def failed_over(self, server_id: int) -> None:
        self.metrics.failovers.labels(self.name).inc()
        self.serving(server_id)

    def disconnected(self) -> None:
        """The replication connection was lost and is being re-established."""
        self.metrics.reconnects.labels(self.name).inc()
        self.metrics.errors.labels(self.name, "disconnect").inc()

    def kafka_transaction(self, seconds: float, committed: bool) -> None:
        """A Kafka sink transaction ended: committed in `seconds` (its acknowledgement), or aborted."""
        if committed:
            self.metrics.kafka_transaction_seconds.labels(self.name).observe(seconds)
        self.metrics.kafka_transactions.labels(self.name, "committed" if committed else "aborted").inc()

    def kafka_unacknowledged(self, size: int) -> None:
        self.metrics.kafka_unacknowledged_bytes.labels(self.name).set(size)

    def kafka_fenced(self) -> None:
        """Another worker of the capture took over its transactional.id: this one stops."""
        self.metrics.errors.labels(self.name, "kafka_fenced").inc()

    def dead_lettered(self) -> None:
        """A message over the Kafka sink's maxMessageBytes was recorded on its dead-letter topic instead."""
        self.metrics.errors.labels(self.name, "dead_letter").inc()

    def up(self, streaming: bool) -> None:
        self.metrics.up.labels(self.name).set(1 if streaming else 0)

    def queue_depth(self, chunks: int) -> None:
        self.metrics.queue_depth.labels(self.name).set(chunks)

    def transaction(self, count: int = 1) -> None:
        """`count` source transactions were read to their end."""
        self.metrics.transactions.labels(self.name).inc(count)

    def heartbeat(self, value: int) -> None:
        """A heartbeat carrying `value` (ms since the Unix epoch) was seen in the stream."""
        self.metrics.last_heartbeat.labels(self.name).set(value / 1000.0)

    def headroom(self, room: Headroom) -> None:
        name = self.name
        self.metrics.purge_headroom_bytes.labels(name).set(room.bytes)
        self.metrics.purge_headroom_files.labels(name).set(room.files)
        self.metrics.reading_active_file.labels(name).set(1 if room.active else 0)
        if room.seconds is not None:
            self.metrics.purge_headroom_seconds.labels(name).set(room.seconds)

    def lag_seconds(self) -> float:
        """The lag last measured at a commit."""
        value: float = self.metrics.lag.labels(self.name)._value.get()
        return value

    def committed(self, events: list[Event], position: Position, *, caught_up: bool, seconds: float) -> None:
        """`events` were committed to the sink up to `position`, in `seconds`; `caught_up`: nothing more to read."""
        name = self.name
        self.metrics.commit_latency.labels(name).observe(seconds)
        self.metrics.commit_events.labels(name).observe(count_rows(events))
        now = self.clock()
        # Per-row work in C (map/Counter): at 100k rows/s a Python loop here costs a tenth of the budget.
        singles, batches = split_batches(events)
        counts = Counter(map(_EVENT_KEY, singles))
        for batch in batches:
            counts[(batch.database, batch.table, batch.type)] += len(batch)
        newest_ts = max(map(_EVENT_TS, events), default=0)
        for (db, table, kind), n in counts.items():
            self.metrics.events.labels(name, db, table or "", kind).inc(n)
        if newest_ts:
            self.metrics.lag.labels(name).set(max(0.0, now - newest_ts))
        elif caught_up:
            self.metrics.lag.labels(name).set(0.0)
        self.metrics.checkpoint_time.labels(name).set(now)
        self.metrics.binlog_pos.labels(name).set(position.coordinate.pos)
        self.metrics.position.labels(name).info(
            {
                "binlog_file": position.coordinate.file,
                "binlog_pos": str(position.coordinate.pos),
                "gtid_set": position.gtid_set,
                "server_id": str(position.server_id),
            }
        )
        if position.last_heartbeat:
            self.metrics.last_heartbeat.labels(name).set(position.last_heartbeat / 1000.0)
