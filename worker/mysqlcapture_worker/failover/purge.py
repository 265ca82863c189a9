"""Binlog purge headroom: how much binlog stands between the checkpoint and the oldest file kept."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.source import queries

log = logging.getLogger(__name__)


class BinlogPurgedError(RuntimeError):
    """The binlog the checkpoint needs is gone from the server."""


@dataclass(frozen=True)
class Headroom:
    """Bytes and files of binlog older than the checkpoint, and the seconds they last at the growth rate.

    `files` counts whole files before the checkpoint's: 0 means the next purge of the oldest file
    removes the one the capture is reading. `purged` is true when that file is already gone. `active`:
    the checkpoint's file is the one the source is writing, which no purge removes (neither expiry nor
    PURGE BINARY LOGS touches the active file), so however few files are before it, nothing is at risk.
    """

    bytes: int
    files: int
    seconds: float | None
    purged: bool
    active: bool = False


def headroom(logs: Sequence[tuple[str, int]], checkpoint: Coordinate, rate: float | None) -> Headroom:
    """Headroom of a checkpoint at `checkpoint` given `SHOW BINARY LOGS` rows (name, size)."""
    names = [name for name, _ in logs]
    if checkpoint.file not in names:
        return Headroom(bytes=0, files=0, seconds=0.0, purged=True)
    index = names.index(checkpoint.file)
    size = sum(int(s) for _, s in logs[:index]) + checkpoint.pos
    seconds: float | None = None  # growth not measured yet
    if rate is not None:
        seconds = size / rate if rate > 0 else float("inf")  # no growth: nothing pushes a purge closer
    return Headroom(bytes=size, files=index, seconds=seconds, purged=False, active=index == len(names) - 1)


class GrowthRate:
    """Binlog bytes written per second, over a sliding window of total-size samples."""

    def __init__(self, window: float = 300.0) -> None:
        self._window = window
        self._samples: deque[tuple[float, int]] = deque()
        self._written = 0
        self._last_logs: dict[str, int] = {}

    def observe(self, logs: Sequence[tuple[str, int]], now: float) -> float | None:
        # Growth counts bytes written, not bytes kept: a purge shrinks the total but writes nothing.
        current = {name: int(size) for name, size in logs}
        for name, size in current.items():
            self._written += max(0, size - self._last_logs.get(name, 0)) if self._last_logs else 0
        self._last_logs = current
        self._samples.append((now, self._written))
        while len(self._samples) > 2 and now - self._samples[0][0] > self._window:
            self._samples.popleft()
        (t0, w0), (t1, w1) = self._samples[0], self._samples[-1]
        return (w1 - w0) / (t1 - t0) if t1 > t0 else None


class PurgeWatch:
    """Polls `SHOW BINARY LOGS` every `interval` seconds and publishes the checkpoint's headroom."""

    def __init__(
        self,
        connect: Callable[[], Any],
        checkpoint: Callable[[], Coordinate | None],
        publish: Callable[[Headroom], None],
        *,
        interval: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._connect = connect
        self._checkpoint = checkpoint
        self._publish = publish
        self._interval = interval
        self._clock = clock
        self._rate = GrowthRate()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="purge-watch", daemon=True)
        self.latest: Headroom | None = None

    def start(self) -> PurgeWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def check(self, conn: Any) -> Headroom | None:
        where = self._checkpoint()
        logs = queries.binary_logs(conn)
        rate = self._rate.observe(logs, self._clock())
        if where is None or not where.file:
            return None
        room = headroom(logs, where, rate)
        if room.purged:
            log.error("the checkpoint's binlog %s is no longer on the source (purged)", where.file)
        self.latest = room
        self._publish(room)
        return room

    def _run(self) -> None:
        conn: Any = None
        checks = 0
        while True:
            try:
                if conn is None:
                    conn = self._connect()
                self.check(conn)
                checks += 1
            except Exception as exc:  # a source that is down is reported by the reader
                log.debug("purge headroom check failed: %s", exc)
                conn = None
            # The second look comes soon after the first, so the growth rate (and seconds) show early.
            if self._stop.wait(1.0 if checks == 1 else self._interval):
                break
        if conn is not None:
            conn.close()
