"""Snapshot progress for people and for Prometheus: a bar per table on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TextIO

from mysqlcapture_worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

LOG_EVERY = 5.0  # seconds between plain progress lines
BAR_EVERY = 0.2  # seconds between redraws of the terminal bar


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else (f"{seconds // 60:02d}:{seconds % 60:02d}")
    )


class Progress:
    """Rows done, rows estimated, rate and ETA of the table being read; the same figures as metrics."""

    def __init__(
        self,
        metrics: WorkerMetrics,
        *,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.out = out if out is not None else sys.stderr
        self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self.clock = clock
        self.table = ""
        self.rows = 0
        self.estimated = 0
        self._started = 0.0
        self._resumed_at = 0
        self._shown = 0.0

    @property
    def percent(self) -> float:
        if not self.table:
            return 0.0
        return min(99.9, 100.0 * self.rows / self.estimated) if self.estimated else 0.0

    def begin(self, table: str, *, estimated: int, done: int) -> None:
        self.table, self.rows, self.estimated = table, done, max(estimated, done)
        self._started, self._resumed_at, self._shown = self.clock(), done, 0.0
        capture = self.metrics.capture
        self.metrics.snapshot_rows_estimated.labels(capture, table).set(self.estimated)
        self.metrics.snapshot_percent.labels(capture, table).set(self.percent)
        log.info("snapshot of %s: %d rows estimated%s", table, estimated, f", resuming after {done}" if done else "")

    def add(self, rows: int) -> None:
        self.rows += rows
        self.estimated = max(self.estimated, self.rows)
        capture = self.metrics.capture
        self.metrics.snapshot_rows.labels(capture, self.table).inc(rows)
        self.metrics.snapshot_rows_estimated.labels(capture, self.table).set(self.estimated)
        self.metrics.snapshot_percent.labels(capture, self.table).set(self.percent)
        now = self.clock()
        if now - self._shown >= (BAR_EVERY if self.tty else LOG_EVERY):
            self._shown = now
            self._show(final=False)

    def finish(self) -> None:
        self.metrics.snapshot_percent.labels(self.metrics.capture, self.table).set(100.0)
        self._show(final=True)
        self.table = ""

    def rate(self) -> float:
        elapsed = self.clock() - self._started
        return (self.rows - self._resumed_at) / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        rate = self.rate()
        left = max(0, self.estimated - self.rows)
        eta = left / rate if rate > 0 else None
        return f"{self.table}: {self.rows}/{self.estimated} rows, {rate:,.0f} rows/s, ETA {_eta(eta)}"

    def _show(self, *, final: bool) -> None:
        if self.tty:
            width = 30
            share = 1.0 if final else (self.rows / self.estimated if self.estimated else 0.0)
            filled = int(width * min(1.0, share))
            bar = "#" * filled + "-" * (width - filled)
            self.out.write(f"\r[{bar}] {100 * min(1.0, share):5.1f}% {self.line()}\x1b[K" + ("\n" if final else ""))
            self.out.flush()
        elif final:
            log.info("snapshot of %s complete: %d rows, %.0f rows/s", self.table, self.rows, self.rate())
        else:
            log.info("snapshot progress %s", self.line())
