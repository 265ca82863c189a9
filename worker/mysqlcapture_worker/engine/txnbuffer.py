"""A transaction's events, held in memory up to a limit and spilled to a temporary file beyond it."""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from typing import IO

from mysqlcapture_worker.changes import ChangeEvent, Event, RowBatch

_FIELDS = ChangeEvent.__slots__


class TxnBuffer:
    """Bounded-memory buffer: at most `memory_rows` rows live in RAM; the rest go to disk in blocks.

    Rows come one `ChangeEvent` at a time, or a `RowBatch` of many (the compiled fast path).
    """

    def __init__(self, memory_rows: int, spill_dir: str | None = None) -> None:
        self._memory_rows = max(1, memory_rows)
        self._spill_dir = spill_dir
        self._mem: list[Event] = []
        self._mem_rows = 0
        self._spill: IO[bytes] | None = None
        self._spilled = 0
        self._blocks = 0

    def __len__(self) -> int:
        """Rows held (a batch counts its rows)."""
        return self._spilled + self._mem_rows

    @property
    def spilled(self) -> int:
        return self._spilled

    def append(self, event: ChangeEvent) -> None:
        self._mem.append(event)
        self._mem_rows += 1
        if self._mem_rows >= self._memory_rows:
            self._flush_to_disk()

    def extend(self, batch: RowBatch) -> None:
        self._mem.append(batch)
        self._mem_rows += len(batch)
        if self._mem_rows >= self._memory_rows:
            self._flush_to_disk()

    def _flush_to_disk(self) -> None:
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(  # noqa: SIM115 - lives as long as the buffer
                dir=self._spill_dir, prefix="mysqlcapture-txn-"
            )
        # Single events as plain tuples (compact, fast to pickle); batches as themselves.
        rows = [tuple(getattr(ev, f) for f in _FIELDS) if type(ev) is ChangeEvent else ev for ev in self._mem]
        pickle.dump(rows, self._spill, protocol=pickle.HIGHEST_PROTOCOL)
        self._spilled += self._mem_rows
        self._blocks += 1
        self._mem = []
        self._mem_rows = 0

    def drain(self) -> Iterator[Event]:
        """Yield every event and batch in order, then reset the buffer."""
        if self._spill is not None:
            self._spill.seek(0)
            for _ in range(self._blocks):
                for row in pickle.load(self._spill):
                    yield ChangeEvent(*row) if type(row) is tuple else row
            self._spill.close()
            self._spill = None
            self._spilled = 0
            self._blocks = 0
        mem, self._mem = self._mem, []
        self._mem_rows = 0
        yield from mem

    def clear(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._spilled = 0
        self._blocks = 0
        self._mem = []
        self._mem_rows = 0
