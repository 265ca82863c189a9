"""The operator's own HTTP endpoint: Prometheus /metrics and /healthz, served from process start by every replica.

Every replica serves it, standbys waiting for the Lease included, so probes and scrapes work for any replica
count; `mysqlcapture_operator_leader` tells the acting replica from the standbys. The server runs on the
operator's event loop (aiohttp, which kopf already uses): /healthz answering means that loop is responsive.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime

import kopf
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

log = logging.getLogger(__name__)
# status.compute's phases (the CRD's status.phase).
PHASES = ("Pending", "Snapshotting", "Streaming", "Degraded", "FailingOver", "Error")
RESULTS = ("ok", "retry", "failed", "error")


@dataclass(frozen=True)
class CompactionRuns:
    """What the compaction object's status says about its runs."""

    last_success: str | None
    """RFC 3339 time of the last successful run, when known."""
    succeeded: tuple[str, ...] = ()
    """Names (or, for a CronJob, completion times) of successful runs the status still lists."""
    failed: tuple[str, ...] = ()
    """Names of failed runs the status still lists (a CronJob's status lists none)."""


class OperatorMetrics:
    """The operator's metrics in `registry` (passed in, so tests read them without globals)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.leader = Gauge(
            "mysqlcapture_operator_leader",
            "1 on the replica holding the leader-election Lease (the one acting), 0 on standbys",
            registry=registry,
        )
        self.reconciles = Counter(
            "mysqlcapture_operator_reconciles",
            "Reconciliations of a capture's children by result: ok; retry (a temporary error such as a missing "
            "Secret, retried after a delay); failed (a permanent error such as an invalid spec); error (unexpected)",
            ["result"],
            registry=registry,
        )
        self.phase = Gauge(
            "mysqlcapture_capture_phase",
            "1 for the capture's current status.phase, 0 for every other phase",
            ["namespace", "capture", "phase"],
            registry=registry,
        )
        self.compaction_last_success = Gauge(
            "mysqlcapture_compaction_last_success_timestamp_seconds",
            "Unix time of the capture's last successful compaction run (CronJob lastSuccessfulTime or "
            "ScheduledSparkApplication lastRun after a success)",
            ["namespace", "capture"],
            registry=registry,
        )
        self.compaction_runs = Counter(
            "mysqlcapture_compaction_runs",
            "Compaction runs this operator saw finish, by result (succeeded, failed), since it started watching "
            "the capture; a CronJob's status reports no failures, so failed counts only Spark operator runs",
            ["namespace", "capture", "result"],
            registry=registry,
        )
        for result in RESULTS:
            self.reconciles.labels(result)
        self.leader.set(0)
        # Runs already listed when this replica first looked: counted by whoever saw them finish.
        self._seen_runs: dict[tuple[str, str], tuple[set[str], set[str]]] = {}

    @contextmanager
    def counting_reconcile(self) -> Iterator[None]:
        """Count one reconcile by how it ends (kopf's errors are re-raised unchanged)."""
        try:
            yield
        except kopf.TemporaryError:
            self.reconciles.labels("retry").inc()
            raise
        except kopf.PermanentError:
            self.reconciles.labels("failed").inc()
            raise
        except Exception:
            self.reconciles.labels("error").inc()
            raise
        self.reconciles.labels("ok").inc()

    def set_phase(self, namespace: str, capture: str, phase: str) -> None:
        for each in {*PHASES, phase}:
            self.phase.labels(namespace, capture, each).set(1 if each == phase else 0)

    def observe_compaction(self, namespace: str, capture: str, runs: CompactionRuns | None) -> None:
        """Record what the compaction object's status says now (None: the capture has none)."""
        if runs is None:
            return
        if runs.last_success:
            self.compaction_last_success.labels(namespace, capture).set(_unix(runs.last_success))
        key = (namespace, capture)
        succeeded, failed = set(runs.succeeded), set(runs.failed)
        seen = self._seen_runs.get(key)
        for result, names, old in (
            ("succeeded", succeeded, seen[0] if seen else None),
            ("failed", failed, seen[1] if seen else None),
        ):
            counter = self.compaction_runs.labels(namespace, capture, result)
            if old is not None:
                counter.inc(len(names - old))
        # Names that drop out of the status's history never come back: keeping the current lists suffices.
        self._seen_runs[key] = (succeeded, failed)

    def forget(self, namespace: str, capture: str) -> None:
        """Drop a deleted capture's series."""
        for phase in PHASES:
            _remove(self.phase, namespace, capture, phase)
        _remove(self.compaction_last_success, namespace, capture)
        for result in ("succeeded", "failed"):
            _remove(self.compaction_runs, namespace, capture, result)
        self._seen_runs.pop((namespace, capture), None)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _remove(metric: Gauge | Counter, *labels: str) -> None:
    with suppress(KeyError):
        metric.remove(*labels)


def _unix(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


async def serve(metrics: OperatorMetrics, *, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start /metrics and /healthz on host:port (0: a free port); the runner (to clean up) and the bound port."""

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server  # aiohttp exposes the bound port only through the asyncio server
    sockets = getattr(server, "sockets", None) or ()
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    log.info("metrics and health on :%d", bound)
    return runner, bound
