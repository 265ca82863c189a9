"""The commit loop: takes the reader's chunks off the queue and commits them to the sink in batches."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Sequence
from operator import attrgetter

from mysqlcapture_worker.changes import DATA, OLD, Event, count_rows, split_batches
from mysqlcapture_worker.column_rules import KeyRotated
from mysqlcapture_worker.engine import Chunk
from mysqlcapture_worker.metrics import HealthState
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.row_filters import RowFilters
from mysqlcapture_worker.runtime.binlog_reader import CaughtUp, End, Failure, Handoff, Item
from mysqlcapture_worker.runtime.recorder import MetricsRecorder
from mysqlcapture_worker.runtime.state import WorkerState
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.sinks import Sink, Staging

_DATA, _OLD = attrgetter("data_json"), attrgetter("old_json")
KEY_LOOK_SECONDS = 5.0  # how often the column-hash key's file is read again (a rotated key)


class Committer:
    """Commits when flush.maxEvents, flush.maxBytes or flush.maxIntervalMs is reached; the checkpoint follows."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        sink: Sink,
        handoff: Handoff,
        state: WorkerState,
        recorder: MetricsRecorder,
        health: HealthState,
    ) -> None:
        self.settings = settings
        self.sink = sink
        self.handoff = handoff
        self.state = state
        self.recorder = recorder
        self.health = health
        # spec.rows: the rows the filters leave out are dropped here, where every sink's events pass.
        self.rows = RowFilters(settings.rows, settings.columns) if settings.rows else None
        # Chunks staged as they arrive, unless row filters apply (they look across a commit's chunks).
        self.staging = sink if isinstance(sink, Staging) and self.rows is None else None

    def loop(self, stop: threading.Event, reader: threading.Thread) -> None:
        """Commit until `stop` is set, the reader ends its stream or hands over an error (raised here)."""
        s = self.settings
        pending: list[Event] = []
        pending_rows = 0
        pending_bytes = 0
        pending_position: Position | None = None
        last_commit = time.monotonic()
        idle_commit_every = max(10.0, s.flush.interval_s * 10)
        next_key_look = time.monotonic() + KEY_LOOK_SECONDS
        caught_up = False
        while True:
            self.health.beat()
            if stop.is_set():
                if pending_position is not None:
                    self.commit(pending, pending_position, caught_up)
                return
            try:
                item: Item | None = self.handoff.get(timeout=0.2)
            except queue.Empty:
                item = None
            self.recorder.queue_depth(self.handoff.chunks())
            if isinstance(item, Failure):
                if pending_position is not None:
                    self.commit(pending, pending_position, caught_up)
                raise item.error
            if isinstance(item, CaughtUp):
                caught_up = True
                item = None
            if isinstance(item, Chunk):
                caught_up = False
                pending.extend(item.events)
                if self.staging is not None:
                    self.staging.stage(item.events)
                pending_rows += count_rows(item.events)
                pending_bytes += approx_bytes(item.events)
                pending_position = item.position
                if item.transactions:
                    self.recorder.transaction(item.transactions)
            elif isinstance(item, End) or (item is None and not reader.is_alive() and self.handoff.empty()):
                if pending_position is not None:
                    self.commit(pending, pending_position, caught_up)
                return  # a non-blocking stream ended (or the reader is gone without a word)
            if s.columns is not None and time.monotonic() >= next_key_look:
                next_key_look = time.monotonic() + KEY_LOOK_SECONDS
                if s.columns.key_changed():
                    if pending_position is not None:
                        self.commit(pending, pending_position, caught_up)
                    raise KeyRotated("spec.columns.hash: the key changed; running again with the new key")
            due = time.monotonic() - last_commit
            if pending_position is None:
                continue
            if (
                pending_rows >= s.flush.max_events
                or pending_bytes >= s.flush.max_bytes
                or (pending and due >= s.flush.interval_s)
                or (not pending and due >= idle_commit_every)
            ):
                self.commit(pending, pending_position, caught_up)
                pending, pending_rows, pending_bytes, pending_position = [], 0, 0, None
                last_commit = time.monotonic()

    def commit(self, events: list[Event], position: Position, caught_up: bool) -> None:
        """Commit `events` with the checkpoint `position`; `caught_up`: the reader had read all the source wrote."""
        started = time.perf_counter()
        if self.rows is not None:
            events = self.rows.apply(events)
        self.sink.commit(events, position)
        seconds = time.perf_counter() - started
        self.state.position = position
        self.recorder.committed(events, position, caught_up=caught_up, seconds=seconds)


def approx_bytes(events: Sequence[Event]) -> int:
    """The rendered size of `events`, roughly (flush.maxBytes): JSON text plus ~200 bytes of fields each."""
    singles, batches = split_batches(events)
    total = 0
    for batch in batches:  # a batch's whole buffers (a cut batch's halves count them twice)
        total += batch.texts.nbytes(DATA) + batch.texts.nbytes(OLD) + 200 * len(batch)
    return total + (
        sum(map(len, filter(None, map(_DATA, singles))))
        + sum(map(len, filter(None, map(_OLD, singles))))
        + 200 * len(singles)
    )
