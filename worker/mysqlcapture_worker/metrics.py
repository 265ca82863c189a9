"""Prometheus metrics and the /metrics, /healthz and /readyz endpoints of a worker."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mysqlcapture_api.worker_status import WorkerStatus
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

PREFIX = "mysqlcapture"


class WorkerMetrics:
    """Every metric the worker exports, registered on the registry passed in (tests pass their own)."""

    @classmethod
    def of(cls, registry: CollectorRegistry, capture: str) -> WorkerMetrics:
        """The registry's metrics, registered once: a worker started again after an error keeps counting on them."""
        metrics = _REGISTERED.get(registry)
        if metrics is None or metrics.capture != capture:
            metrics = _REGISTERED[registry] = cls(registry, capture)
        return metrics

    def __init__(self, registry: CollectorRegistry, capture: str) -> None:
        self.capture = capture
        labels = ["capture"]
        self.events = Counter(
            f"{PREFIX}_events",
            "Change events committed to the sink.",
            [*labels, "database", "table", "type"],
            registry=registry,
        )
        self.transactions = Counter(
            f"{PREFIX}_transactions", "Source transactions processed.", labels, registry=registry
        )
        self.rows_decoded = Counter(
            f"{PREFIX}_rows_decoded", "Row images decoded from the binlog.", labels, registry=registry
        )
        self.lag = Gauge(
            f"{PREFIX}_lag_seconds",
            "Seconds between the source commit of the last committed event and now.",
            labels,
            registry=registry,
        )
        self.checkpoint_time = Gauge(
            f"{PREFIX}_checkpoint_timestamp_seconds",
            "Unix time of the last successful sink commit.",
            labels,
            registry=registry,
        )
        self.reconnects = Counter(
            f"{PREFIX}_reconnects",
            "Replication connections re-established after a loss.",
            labels,
            registry=registry,
        )
        self.commit_latency = Histogram(
            f"{PREFIX}_sink_commit_seconds",
            "Duration of one sink commit.",
            labels,
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.commit_events = Histogram(
            f"{PREFIX}_sink_commit_events",
            "Events per sink commit.",
            labels,
            registry=registry,
            buckets=(0, 1, 10, 100, 1000, 10000, 50000, 100000, 500000),
        )
        self.errors = Counter(f"{PREFIX}_errors", "Errors by kind.", [*labels, "kind"], registry=registry)
        self.kafka_transaction_seconds = Histogram(
            f"{PREFIX}_kafka_transaction_seconds",
            "Kafka sink: from the commit's request to the brokers' acknowledgement of its messages and commit marker.",
            labels,
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.kafka_transactions = Counter(
            f"{PREFIX}_kafka_transactions",
            "Kafka sink transactions by outcome: committed, or aborted (an error; nothing of it is read).",
            [*labels, "outcome"],
            registry=registry,
        )
        self.kafka_unacknowledged_bytes = Gauge(
            f"{PREFIX}_kafka_unacknowledged_bytes",
            "Kafka sink: bytes of keys and values produced in the open transaction, not yet acknowledged.",
            labels,
            registry=registry,
        )
        self.queue_depth = Gauge(
            f"{PREFIX}_pipeline_queue_chunks",
            "Chunks waiting between the decoder and the sink.",
            labels,
            registry=registry,
        )
        self.up = Gauge(f"{PREFIX}_up", "1 while the worker streams, 0 otherwise.", labels, registry=registry)
        self.position = Info(f"{PREFIX}_position", "The last committed position.", labels, registry=registry)
        self.binlog_pos = Gauge(
            f"{PREFIX}_binlog_position",
            "Byte offset of the last committed position in its binlog file.",
            labels,
            registry=registry,
        )
        self.server_id = Gauge(
            f"{PREFIX}_source_server_id", "server_id of the server being streamed.", labels, registry=registry
        )
        self.failovers = Counter(
            f"{PREFIX}_failovers", "Changes of the source server followed (failovers).", labels, registry=registry
        )
        self.purge_headroom_bytes = Gauge(
            f"{PREFIX}_binlog_purge_headroom_bytes",
            "Binlog bytes between the oldest binlog on the source and the checkpoint; 0 when already purged.",
            labels,
            registry=registry,
        )
        self.purge_headroom_files = Gauge(
            f"{PREFIX}_binlog_purge_headroom_files",
            "Whole binlog files older than the checkpoint's; 0: the next purge removes the file being read.",
            labels,
            registry=registry,
        )
        self.reading_active_file = Gauge(
            f"{PREFIX}_binlog_checkpoint_in_active_file",
            "1 while the checkpoint is in the binlog file the source is writing (no purge removes it), else 0.",
            labels,
            registry=registry,
        )
        self.purge_headroom_seconds = Gauge(
            f"{PREFIX}_binlog_purge_headroom_seconds",
            "Headroom bytes divided by the source's current binlog growth rate (bytes/s), in seconds.",
            labels,
            registry=registry,
        )
        self.last_heartbeat = Gauge(
            f"{PREFIX}_last_heartbeat_timestamp_seconds",
            "Time carried by the last heartbeat seen in the stream.",
            labels,
            registry=registry,
        )
        snapshot_labels = [*labels, "table"]
        self.snapshot_rows = Counter(
            f"{PREFIX}_snapshot_rows",
            "Rows a snapshot has read and handed to the sink, per table (db.table).",
            snapshot_labels,
            registry=registry,
        )
        self.snapshot_rows_estimated = Gauge(
            f"{PREFIX}_snapshot_rows_estimated",
            "Rows the running snapshot expects per table (information_schema.TABLES.TABLE_ROWS, an estimate).",
            snapshot_labels,
            registry=registry,
        )
        self.snapshot_chunks = Counter(
            f"{PREFIX}_snapshot_chunks",
            "Key ranges (chunks) of a table a snapshot has committed, per table (db.table).",
            snapshot_labels,
            registry=registry,
        )
        self.snapshot_chunks_estimated = Gauge(
            f"{PREFIX}_snapshot_chunks_estimated",
            "Chunks the running snapshot expects per table: its estimated rows over spec.snapshot.chunkRows.",
            snapshot_labels,
            registry=registry,
        )
        self.snapshot_percent = Gauge(
            f"{PREFIX}_snapshot_percent",
            "Progress of the running snapshot of a table, 0 to 100 (100 once the table is complete).",
            snapshot_labels,
            registry=registry,
        )
        self.snapshot_running = Gauge(
            f"{PREFIX}_snapshot_running", "1 while a snapshot is being read, 0 otherwise.", labels, registry=registry
        )
        self.snapshots = Counter(
            f"{PREFIX}_snapshots",
            "Snapshots completed, by reason (initial, request, purged).",
            [*labels, "reason"],
            registry=registry,
        )

        # Every per-capture series exists from the start (a failover count of 0 is a fact worth showing,
        # and alerts can tell "no failover" from "no data").
        # Headroom is left unset until measured: a 0 there would read as "about to lose events".
        unset = {
            self.purge_headroom_bytes,
            self.purge_headroom_files,
            self.purge_headroom_seconds,
            self.reading_active_file,
        }
        for metric in vars(self).values():
            labelled = isinstance(metric, Counter | Gauge | Histogram) and list(metric._labelnames) == labels
            if labelled and metric not in unset:
                metric.labels(capture)


_REGISTERED: weakref.WeakKeyDictionary[CollectorRegistry, WorkerMetrics] = weakref.WeakKeyDictionary()


class HealthState:
    """What /healthz and /readyz answer: the main loop beats; readiness is set once streaming."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, stale_after: float = 120.0) -> None:
        self._clock = clock
        self._stale_after = stale_after
        self._beat = clock()
        self.ready = False
        self.detail = "starting"
        # What GET /status returns (the operator reads it into the MySQLCapture's status).
        self.status: Callable[[], WorkerStatus] = WorkerStatus.starting

    def beat(self) -> None:
        self._beat = self._clock()

    def failed(self, reason: str, message: str, retry_seconds: float) -> None:
        """The worker stopped on an error a person must fix; it runs again in `retry_seconds`.

        /status says why (the operator shows it as the capture's condition); /readyz is not ready.
        """
        self.ready = False
        self.detail = message
        failure = WorkerStatus.failed(reason=reason, message=message, retry_seconds=retry_seconds)
        self.status = lambda: failure

    def healthy(self) -> bool:
        return self._clock() - self._beat < self._stale_after


def serve_http(
    registry: CollectorRegistry, health: HealthState, port: int, host: str = "0.0.0.0"
) -> ThreadingHTTPServer:
    """Start the metrics and health server in a daemon thread; port 0 picks a free port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, ctype, code = generate_latest(registry), CONTENT_TYPE_LATEST, 200
            elif self.path.startswith("/healthz"):
                ok = health.healthy()
                body, ctype, code = (b"ok\n" if ok else b"stalled\n"), "text/plain", 200 if ok else 503
            elif self.path.startswith("/status"):
                body = health.status().model_dump_json().encode()
                ctype, code = "application/json", 200
            elif self.path.startswith("/readyz"):
                ok = health.ready and health.healthy()
                body = f"{'ready' if ok else 'not ready'}: {health.detail}\n".encode()
                ctype, code = "text/plain", 200 if ok else 503
            else:
                body, ctype, code = b"not found\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet access log
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    # serve_forever checks for shutdown() every poll_interval: 0.5 s by default, which every exit waited out.
    threading.Thread(target=server.serve_forever, args=(0.05,), name="metrics-http", daemon=True).start()
    return server
