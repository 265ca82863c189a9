"""Sinks: where change events go, each committing its events and the checkpoint atomically."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mysqlcapture_worker.changes import Event
from mysqlcapture_worker.positions import Position


class SinkError(Exception):
    """A sink cannot go on: one line naming the setting or the event, and the fix. Nothing uncommitted was kept.
    `reason`: the capture's condition reason (CamelCase)."""

    def __init__(self, message: str, reason: str = "SinkFailed") -> None:
        super().__init__(message)
        self.reason = reason


class SinkMismatch(SinkError):
    """The sink's output does not match its checkpoint (a file gone or cut short): going on would lose or repeat
    events, so nothing is written until a person decides."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "SinkInconsistent")


class Sink(Protocol):
    """A sink commits a batch of events together with the position to resume from after them."""

    def load_checkpoint(self) -> Position | None:
        """The position of the last successful commit, or None for a new change log."""
        ...

    def commit(self, events: Sequence[Event], position: Position) -> None:
        """Durably append `events` and record `position`, all or nothing."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Staging(Protocol):
    """A sink that can take a commit's events ahead of it (the Kafka sink: its transaction's messages are sent
    while the reader reads on). The committer stages each chunk as it arrives; the next `commit` begins with every
    event staged since the last, in order."""

    def stage(self, events: Sequence[Event]) -> None:
        """Take `events` into the open commit (written only with it: all or nothing, as before)."""
        ...
