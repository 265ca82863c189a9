"""The reader thread: owns the replication connection and the capture engine, hands complete chunks to a queue.

It owns reconnects too, and always resumes from the engine's last boundary, for which every chunk before it
has already been handed off. What it puts on the queue: chunks, and the markers defined here.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql
from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.changes import count_rows
from mysqlcapture_worker.engine import CaptureEngine, Chunk
from mysqlcapture_worker.failover.purge import BinlogPurgedError
from mysqlcapture_worker.failover.reconnect import Reconnector
from mysqlcapture_worker.replication.events import HeartbeatEvent
from mysqlcapture_worker.replication.stream import (
    BinlogStream,
    StreamDisconnected,
    is_retryable,
    is_server_id_clash,
)
from mysqlcapture_worker.runtime.connections import SourceConnections
from mysqlcapture_worker.runtime.recorder import MetricsRecorder
from mysqlcapture_worker.runtime.state import WorkerState
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.snapshot.control import SnapshotControl
from mysqlcapture_worker.snapshot.runner import SnapshotStopped
from mysqlcapture_worker.source.checks import SourceConfigError

log = logging.getLogger(__name__)

STEP_SECONDS = 0.02
"""A busy stream steps the snapshot at most this often (or when a read finished): a step reads the job and its
reads in flight."""

HOLD_ROWS = 5000
"""The stream's chunks are handed over at the latest when they hold this many rows, or spec.flush.maxEvents when
smaller (`Handoff`)."""
HOLD_SECONDS = 0.02
"""...or when the commit loop has found nothing else to take for this long (`Handoff`)."""


class ClashWatch:
    """Another replica taking this one's server_id: once (an old pod of this capture still connected) the stream
    reconnects and takes it back; CLASHES times within CLASH_SECONDS, two live replicas are disconnecting each other
    for good, and the capture stops with `error`."""

    CLASHES, CLASH_SECONDS = 4, 120.0

    def __init__(self, server_id: int) -> None:
        self.times: list[float] = []
        self.error = SourceConfigError(
            f"another replica keeps connecting to the source with this capture's server_id {server_id}, and the "
            "two disconnect each other: give this capture a unique spec.source.serverId",
            "ServerIdClash",
        )

    def fighting(self, now: float) -> bool:
        self.times = [t for t in self.times if now - t < self.CLASH_SECONDS] + [now]
        return len(self.times) >= self.CLASHES


@dataclass
class Failure:
    """The reader stopped on an error that ends the worker: the commit loop commits what it has, then raises it."""

    error: BaseException


@dataclass
class CaughtUp:
    """The server sent a heartbeat: everything written so far has been read."""


@dataclass
class End:
    """A non-blocking stream (`--exit-at-end`) read the binlog to its end: commit and return."""


Item = Chunk | Failure | CaughtUp | End


class Handoff(queue.Queue[Item]):
    """The reader's items on their way to the commit loop, bounded by the rows they hold rather than by their count.

    While the sink commits what is pending the reader goes on reading, until the handoff holds `max_rows` rows of any
    number of transactions; bounded by chunks instead (four), a reader of one-row transactions stopped after four
    transactions at every commit, and one of 20,000-row transactions waited on most commits. Each item weighs 1 plus
    its rows, so `empty()` holds exactly when nothing waits; a put waits only while the handoff is at or above
    `max_rows`, so one chunk (at most the engine's chunk rows) may take it past.

    The stream's chunks are held (`hold`) rather than put, and handed over together as one chunk (`Chunk.merged`):
    when they reach `hold_rows` rows, before anything else is put (so the order stays the engine's), or when the
    commit loop finds nothing else waiting after `hold_seconds`. A source of one-row transactions then costs the
    commit loop one wake-up per many transactions, not one per transaction (a put, a wake-up and a thread switch
    each, which cost a one-row transaction more than reading and decoding it), and a change waits at most
    `hold_seconds` more before its commit (spec.flush.maxIntervalMs is 1 s by default).
    """

    def __init__(self, max_rows: int, *, hold_rows: int = 1, hold_seconds: float = HOLD_SECONDS) -> None:
        super().__init__(maxsize=max(1, max_rows))
        self._rows = 0
        self._held: list[Chunk] = []
        self._held_rows = 0
        self._hold_rows = max(1, hold_rows)
        self._hold_seconds = hold_seconds

    @classmethod
    def for_flush(cls, max_events: int) -> Handoff:
        """Room for two commits' worth of rows (spec.flush.maxEvents) beside the one being committed; chunks held up
        to HOLD_ROWS rows, or spec.flush.maxEvents when smaller."""
        return cls(2 * max_events, hold_rows=min(HOLD_ROWS, max_events))

    def hold(self, chunk: Chunk) -> bool:
        """Keep a stream chunk to hand over with the next ones; True when they are due (`put(None)` hands them)."""
        with self.mutex:
            self._held.append(chunk)
            self._held_rows += count_rows(chunk.events)
            return self._held_rows >= self._hold_rows

    def put(self, item: Item | None, block: bool = True, timeout: float | None = None) -> None:
        """Hand over the held chunks (as one), then `item` (None: only the held chunks); waits while the handoff is
        full (queue.Full after `timeout`)."""
        with self.not_full:
            if self.maxsize > 0 and self._qsize() >= self.maxsize:
                if not block:
                    raise queue.Full
                deadline = None if timeout is None else time.monotonic() + timeout
                while self._qsize() >= self.maxsize:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise queue.Full
                    self.not_full.wait(remaining)
            if self._held:
                self._put(self._take_held())
                self.unfinished_tasks += 1
            if item is not None:
                self._put(item)
                self.unfinished_tasks += 1
            self.not_empty.notify()

    def get(self, block: bool = True, timeout: float | None = None) -> Item:
        """The next item; when none waits, the held chunks once `hold_seconds` passed (or `timeout`, if sooner)."""
        with self.not_empty:
            deadline = None if timeout is None else time.monotonic() + timeout
            held_due = time.monotonic() + self._hold_seconds
            while not self._qsize():
                now = time.monotonic()
                if self._held and (now >= held_due or not block):
                    item: Item = self._take_held()
                    self.not_full.notify()
                    return item
                if not block or (deadline is not None and now >= deadline):
                    raise queue.Empty
                waits = [t - now for t in (deadline, held_due if self._held else None) if t is not None]
                self.not_empty.wait(max(0.0, min(waits)) if waits else None)
            item = self._get()
            self.not_full.notify()
            return item

    def _take_held(self) -> Chunk:
        held = Chunk.merged(self._held)
        self._held, self._held_rows = [], 0
        return held

    def _put(self, item: Item) -> None:
        weight = 1 + count_rows(item.events) if isinstance(item, Chunk) else 1
        self.queue.append((item, weight))
        self._rows += weight

    def _get(self) -> Item:
        item, weight = self.queue.popleft()
        self._rows -= weight
        return item

    def _qsize(self) -> int:
        return self._rows

    def empty(self) -> bool:
        with self.mutex:
            return not self._rows and not self._held

    def chunks(self) -> int:
        """Items waiting, held chunks included (the pipeline_queue_chunks metric)."""
        with self.mutex:
            return len(self.queue) + len(self._held)


class BinlogReader:
    """Reads the binlog from the engine's position into `handoff`, reconnecting (with backoff) when the source goes."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        source: SourceConnections,
        reconnector: Reconnector,
        snapshots: SnapshotControl,
        handoff: Handoff,
        state: WorkerState,
        recorder: MetricsRecorder,
        stream_factory: Callable[..., BinlogStream],
        exit_at_end: bool,
    ) -> None:
        self.settings = settings
        self.source = source
        self.reconnector = reconnector
        self.snapshots = snapshots
        self.handoff = handoff
        self.state = state
        self.recorder = recorder
        self.stream_factory = stream_factory
        self.exit_at_end = exit_at_end
        self.lock = threading.Lock()  # held while an event is fed: the engine is the reader's or the inserter's
        self.streaming = False  # the stream is open: the idle inserter may step the snapshot
        self.failed: BaseException | None = None
        self._stepped_text: str | None = None  # the job as the last step left it, and when
        self._stepped_at = 0.0

    def run(self, engine: CaptureEngine, stop: threading.Event) -> None:
        """The thread's body: read until `stop` is set, the stream ends or a fatal error (put on the queue)."""
        snapshots = self.snapshots
        engine.on_heartbeat_at = snapshots.window.heartbeat
        # A snapshot's reads finish while the stream may be idle (blocked in a read of the socket): this thread
        # puts them in then, under the lock the reader holds while it feeds an event.
        idle = threading.Thread(target=self._idle_inserter, args=(engine, stop), name="snapshot-insert", daemon=True)
        idle.start()
        try:
            self._run(engine, stop)
        finally:
            stop.set()
            idle.join(timeout=5)
            snapshots.close()

    def _idle_inserter(self, engine: CaptureEngine, stop: threading.Event) -> None:
        wake = self.snapshots.parallel.wake
        while not stop.is_set():
            wake.wait(0.2)
            wake.clear()
            if engine.position.snapshot is None or not self.lock.acquire(timeout=0.05):
                continue
            try:
                if self.streaming and engine.between_transactions:
                    self.snapshots.step(engine, lambda chunk: self._put(chunk, stop))
            except BaseException as exc:  # the reader thread meets it again at its next step; say it once here
                log.debug("snapshot step on the idle stream failed: %s", exc)
                self.failed = exc
            finally:
                self.lock.release()

    def _run(self, engine: CaptureEngine, stop: threading.Event) -> None:
        state = self.state
        snapshots = self.snapshots
        backoff = 0.2
        first = True
        lock = self.lock
        again = False  # a non-blocking stream read to its end while a snapshot was still reading: read on from there
        clashes = ClashWatch(self.settings.source.replica_server_id)
        while not stop.is_set():
            stream: BinlogStream | None = None
            try:
                try:
                    start = self.reconnector.start_for(engine, first=first)
                except BinlogPurgedError:
                    if not snapshots.recover_purged(engine, self.source.capture_schema):
                        raise
                    start = self.reconnector.start_for(engine, first=first)
                first = False
                with lock:
                    if not again:
                        snapshots.plan_pending(engine)
                    again = False
                    self._step(engine, stop)
                if stop.is_set():
                    return
                state.phase = "Streaming"
                stream = self.stream_factory(
                    self.source.connection,
                    replica_server_id=self.settings.source.replica_server_id,
                    start=start,
                    heartbeat_seconds=min(5.0, max(1.0, self.settings.flush.interval_s)),
                    blocking=not self.exit_at_end,
                )
                window = snapshots.window
                self.streaming = True
                for ev in stream:
                    with lock:
                        if self.failed is not None:
                            failed, self.failed = self.failed, None
                            raise failed
                        if snapshots.due(engine, ev):
                            self._snapshot(engine, stop)  # the stream stands at the planned view's place
                            if stop.is_set():
                                return
                        if isinstance(ev, HeartbeatEvent):
                            self._put(CaughtUp(), stop)
                        for chunk in engine.feed(ev):
                            window.record(chunk.events)
                            self._hold(chunk, stop)
                        if engine.between_transactions:  # what follows acts between transactions only
                            self._reached(engine, ev)
                            # Looked up each time: the worker starts its request poller after this thread, so a
                            # stream that connected first would otherwise never serve a `resnapshot`.
                            if (poller := snapshots.poller) is not None and poller.wanted:
                                snapshots.serve_requests(engine, lambda chunk: self._put(chunk, stop))
                            self._step(engine, stop)
                        if stop.is_set():
                            return
                    backoff = 0.2
                if engine.position.snapshot is not None:
                    # `--exit-at-end` ends with the snapshot done: its reads end after the binlog's end (their
                    # fences are writes), so the stream reads on from where it stands until they are in.
                    snapshots.parallel.wake.wait(0.2)
                    again = True
                    continue
                self._put(End(), stop)  # non-blocking stream reached the end
                return
            except (StreamDisconnected, pymysql.err.OperationalError) as exc:
                if not is_retryable(exc):  # e.g. a snapshot SELECT naming a column the table no longer has
                    state.phase, state.error = "Error", f"source error: {exc}"
                    self._put(Failure(exc), stop)
                    return
                # The source is gone for now (a restart, a failover in progress): retry with backoff.
                if stop.is_set():
                    return
                if is_server_id_clash(exc) and clashes.fighting(time.monotonic()):
                    state.phase, state.error = "Error", str(clashes.error)
                    self._put(Failure(clashes.error), stop)
                    return
                state.phase = "Degraded"
                self.streaming = False
                self.recorder.disconnected()
                log.warning(
                    "replication connection lost (%s); resuming from %s in %.1fs", exc, engine.position, backoff
                )
                with lock:
                    engine.restart()
                    snapshots.restart()
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except BaseException as exc:  # everything else is fatal: hand it to the main thread
                state.phase, state.error = "Error", str(exc)
                self._put(Failure(exc), stop)
                return
            finally:
                self.streaming = False
                if stream is not None:
                    stream.close()

    def _reached(self, engine: CaptureEngine, ev: object) -> None:
        """Between transactions the stream has read everything before the event just fed ends (`where`): a place the
        engine's boundary does not move to for events outside transactions (a file's first events, a heartbeat)."""
        where = getattr(ev, "where", None)
        if not engine.between_transactions or not isinstance(where, Coordinate) or where.pos <= 0:
            return
        parallel = self.snapshots.parallel
        if parallel.reached is None or where > parallel.reached:
            parallel.reached = where

    def _step(self, engine: CaptureEngine, stop: threading.Event) -> None:
        """Between transactions: the snapshot's next step, and its view when the stream stands at it.

        Not after every event of a busy stream: when a read finished, the job changed, or STEP_SECONDS passed.
        """
        text = engine.position.snapshot
        if text is None or not engine.between_transactions:
            return
        now = time.monotonic()
        parallel = self.snapshots.parallel
        if text == self._stepped_text and now - self._stepped_at < STEP_SECONDS and not parallel.wake.is_set():
            if self.snapshots.due(engine):
                self._snapshot(engine, stop)
            return
        parallel.wake.clear()
        self.snapshots.step(engine, lambda chunk: self._put(chunk, stop))
        self._stepped_text, self._stepped_at = engine.position.snapshot, time.monotonic()
        if self.snapshots.due(engine):
            self._snapshot(engine, stop)

    def _snapshot(self, engine: CaptureEngine, stop: threading.Event) -> None:
        """The planned snapshot, read between two transactions once the stream stands at its view's frontier."""
        try:
            self.snapshots.run_due(engine, lambda chunk: self._put(chunk, stop), stop)
        except SnapshotStopped:
            return

    def _hold(self, chunk: Chunk, stop: threading.Event) -> None:
        """A stream chunk, held in the handoff to go with the next ones (`Handoff`)."""
        if self.handoff.hold(chunk):
            self._put(None, stop)

    def _put(self, item: Item | None, stop: threading.Event) -> None:
        """Hand over the held chunks, then `item` (None: only the held chunks)."""
        while not stop.is_set():
            try:
                self.handoff.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
