"""Snapshot progress for people and for Prometheus, per table being read: chunks and rows done of those
estimated, rate and ETA; a bar on a terminal, log lines otherwise; the same figures as metrics and in /status."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from mysqlcapture_api.worker_status import SnapshotTable

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


@dataclass
class _Table:
    rows: int
    estimated: int
    chunk_rows: int
    chunks: int
    started: float
    resumed_at: int  # rows committed before this run began the table (a resumed snapshot)

    @property
    def chunks_estimated(self) -> int:
        return max(self.chunks, -(-self.estimated // self.chunk_rows))

    @property
    def share(self) -> float:
        return min(0.999, self.rows / self.estimated) if self.estimated else 0.0


class Progress:
    """The tables being read, each with its figures; the same figures as metrics."""

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
        self._tables: dict[str, _Table] = {}
        self._shown = 0.0

    @property
    def active(self) -> tuple[str, ...]:
        """The tables being read, in the order they began."""
        return tuple(self._tables)

    def share(self, table: str) -> float:
        """How much of `table` is done, 0 to 1 (below 1 until it is finished); 0 for a table not being read."""
        t = self._tables.get(table)
        return t.share if t is not None else 0.0

    def begin(self, table: str, *, estimated: int, done: int, chunk_rows: int, chunks_done: int = 0) -> None:
        t = _Table(done, max(estimated, done), max(1, chunk_rows), chunks_done, self.clock(), done)
        self._tables[table] = t
        self._shown = 0.0
        self._publish(table, t)
        log.info(
            "snapshot of %s: %d rows estimated%s, about %d chunks of %d rows",
            table,
            estimated,
            f", resuming after {done} rows" if done else "",
            t.chunks_estimated,
            t.chunk_rows,
        )

    def add(self, table: str, rows: int, *, chunks: int = 1) -> None:
        t = self._tables.get(table)
        if t is None:
            return
        t.rows += rows
        t.chunks += chunks
        t.estimated = max(t.estimated, t.rows)
        capture = self.metrics.capture
        self.metrics.snapshot_rows.labels(capture, table).inc(rows)
        self.metrics.snapshot_chunks.labels(capture, table).inc(chunks)
        self._publish(table, t)
        now = self.clock()
        if now - self._shown >= (BAR_EVERY if self.tty else LOG_EVERY):
            self._shown = now
            self._show(table, final=False)

    def finish(self, table: str) -> None:
        t = self._tables.get(table)
        if t is None:
            return
        capture = self.metrics.capture
        self.metrics.snapshot_chunks_estimated.labels(capture, table).set(t.chunks)
        self.metrics.snapshot_percent.labels(capture, table).set(100.0)
        self._show(table, final=True)
        del self._tables[table]

    def drop(self, table: str) -> None:
        """Stop showing `table` (its read starts again, or the table went away) without finishing it."""
        self._tables.pop(table, None)

    def rate(self, table: str) -> float:
        t = self._tables.get(table)
        if t is None:
            return 0.0
        elapsed = self.clock() - t.started
        return (t.rows - t.resumed_at) / elapsed if elapsed > 0 else 0.0

    def eta(self, table: str) -> float | None:
        t = self._tables.get(table)
        rate = self.rate(table)
        return max(0, t.estimated - t.rows) / rate if t is not None and rate > 0 else None

    def line(self, table: str) -> str:
        t = self._tables[table]
        return (
            f"{table}: {t.chunks}/{t.chunks_estimated} chunks, {t.rows}/{t.estimated} rows, "
            f"{self.rate(table):,.0f} rows/s, ETA {_eta(self.eta(table))}"
        )

    def status(self) -> list[SnapshotTable]:
        """The tables being read as /status lists them."""
        return [
            SnapshotTable(
                table=name,
                rows=t.rows,
                rows_estimated=t.estimated,
                chunks=t.chunks,
                chunks_estimated=t.chunks_estimated,
                rows_per_second=round(self.rate(name), 1),
                eta_seconds=None if (eta := self.eta(name)) is None else round(eta, 1),
            )
            for name, t in list(self._tables.items())
        ]

    def _publish(self, table: str, t: _Table) -> None:
        capture = self.metrics.capture
        self.metrics.snapshot_rows_estimated.labels(capture, table).set(t.estimated)
        self.metrics.snapshot_chunks_estimated.labels(capture, table).set(t.chunks_estimated)
        self.metrics.snapshot_percent.labels(capture, table).set(round(100.0 * t.share, 1))

    def _show(self, table: str, *, final: bool) -> None:
        t = self._tables[table]
        if self.tty:
            width = 30
            share = 1.0 if final else t.share
            filled = int(width * min(1.0, share))
            bar = "#" * filled + "-" * (width - filled)
            others = len(self._tables) - 1
            more = f" (+{others} more table{'s' if others > 1 else ''})" if others and not final else ""
            self.out.write(
                f"\r[{bar}] {100 * min(1.0, share):5.1f}% {self.line(table)}{more}\x1b[K" + ("\n" if final else "")
            )
            self.out.flush()
        elif final:
            log.info(
                "snapshot of %s complete: %d rows in %d chunks, %.0f rows/s", table, t.rows, t.chunks, self.rate(table)
            )
        else:
            log.info("snapshot progress %s", self.line(table))
