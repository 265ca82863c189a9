"""The transaction being assembled, and its cutting into sink commits (chunks) once it commits."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.changes import ChangeEvent, Event, EventFactory, RowBatch
from mysqlcapture_worker.engine.txnbuffer import TxnBuffer
from mysqlcapture_worker.positions import Position


@dataclass(slots=True)
class Chunk:
    """Events to append, and the position the sink may checkpoint once they are committed."""

    events: Sequence[Event]  # single events and fast-path batches of rows (`models.count_rows` counts them)
    position: Position
    boundary: bool  # True when `position` is a transaction boundary (txn_index == 0)
    ends: int | None = None  # transactions that end in it (`merged`); None: 1 at a boundary, else 0

    @property
    def transactions(self) -> int:
        """Source transactions read to their end in this chunk."""
        return self.ends if self.ends is not None else int(self.boundary)

    @staticmethod
    def merged(chunks: Sequence[Chunk]) -> Chunk:
        """Consecutive chunks as one: their events in order, the last one's position (what a commit of them all
        checkpoints)."""
        if len(chunks) == 1:
            return chunks[0]
        last = chunks[-1]
        events = [e for c in chunks for e in c.events]
        return Chunk(events, last.position, last.boundary, sum(c.transactions for c in chunks))


class OrderKeys:
    """The capture's total order of events: the last key handed out, strictly increasing over the capture."""

    __slots__ = ("last",)

    def __init__(self, last: int) -> None:
        self.last = last

    def take(self, n: int = 1) -> int:
        """`n` consecutive keys (a batch takes one per row); returns the first."""
        first = self.last + 1
        self.last += n
        return first


@dataclass
class Transaction:
    """One transaction's events, buffered until its commit; `row_index` counts them from its start."""

    start: Coordinate  # the boundary the transaction starts at: every event's `binlog_file`/`binlog_pos`
    gtid: str | None = None
    thread_id: int | None = None
    row_index: int = 0
    skip: int = 0  # rows already committed by a previous run (resume inside a transaction)
    begun: bool = False  # opened by BEGIN (or a GTID event that stands for one): it ends at its commit
    alter: str | None = None  # MariaDB's two-phase ALTER: the half this transaction is (GtidEvent.alter)
    events: TxnBuffer = field(default_factory=lambda: TxnBuffer(50000))

    def factory(self, *, ts: int, server_id: int, event_pos: int) -> EventFactory:
        """Builds the events of one binlog event of this transaction (starting at `event_pos`)."""
        return EventFactory(
            server_id=server_id,
            ts=ts,
            binlog_file=self.start.file,
            binlog_pos=self.start.pos,
            event_pos=event_pos,
            gtid=self.gtid,
            thread_id=self.thread_id,
        )

    def add(self, event: ChangeEvent) -> None:
        """The next event, dropped when the previous run committed it already."""
        index = self.row_index
        self.row_index += 1
        if index < self.skip:
            return  # committed by the previous run
        event.row_index = index
        self.events.append(event)

    def reserve(self, n: int) -> tuple[int, int]:
        """Room for the next `n` rows of a batch: (the first one's row index, how many of them to drop)."""
        first = self.row_index
        self.row_index += n
        return first, max(0, self.skip - first)

    def commits(self, *, xid: int | None, chunk_rows: int, keys: OrderKeys) -> Iterator[tuple[list[Event], int | None]]:
        """The events with ordering keys, `xid` and `commit` set, in sink commits of `chunk_rows` rows.

        Each comes with the number of the transaction's rows committed once it is (the `txn_index` of its
        checkpoint), None for the last one, whose checkpoint is the boundary after the transaction.
        Produced lazily (a million-row transaction is never all in memory); `keys` advance as they go.
        """
        pending: list[Event] = []
        pending_rows = 0
        emitted = self.skip
        last_index = self.skip + len(self.events) - 1
        for event in self.events.drain():
            if type(event) is not RowBatch:
                assert isinstance(event, ChangeEvent)
                event.order_key = keys.take()
                event.xid = xid
                event.commit = event.row_index == last_index
                pending.append(event)
                pending_rows += 1
                emitted += 1
                if pending_rows >= chunk_rows and emitted <= last_index:
                    yield pending, emitted
                    pending, pending_rows = [], 0
                continue
            # A batch is cut where a chunk ends: chunks hold the same rows as with one event per row.
            rest: RowBatch | None = event
            while rest is not None:
                room = max(1, chunk_rows - pending_rows)
                head, rest = (rest, None) if len(rest) <= room else rest.split(room)
                n = len(head)
                head.order_key = keys.take(n)
                head.xid = xid
                head.commit = head.row_index + n - 1 == last_index
                pending.append(head)
                pending_rows += n
                emitted += n
                if pending_rows >= chunk_rows and emitted <= last_index:
                    yield pending, emitted
                    pending, pending_rows = [], 0
        yield pending, None
