"""A transaction's events, held in memory up to a limit and spilled to a temporary file beyond it."""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from typing import IO

from mysqlcapture_worker.models import ChangeEvent

_FIELDS = ChangeEvent.__slots__


class TxnBuffer:
    """Bounded-memory buffer: at most `memory_rows` events live in RAM; the rest go to disk in blocks."""

    def __init__(self, memory_rows: int, spill_dir: str | None = None) -> None:
        self._memory_rows = max(1, memory_rows)
        self._spill_dir = spill_dir
        self._mem: list[ChangeEvent] = []
        self._spill: IO[bytes] | None = None
        self._spilled = 0

    def __len__(self) -> int:
        return self._spilled + len(self._mem)

    @property
    def spilled(self) -> int:
        return self._spilled

    def append(self, event: ChangeEvent) -> None:
        self._mem.append(event)
        if len(self._mem) >= self._memory_rows:
            self._flush_to_disk()

    def _flush_to_disk(self) -> None:
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(  # noqa: SIM115 - lives as long as the buffer
                dir=self._spill_dir, prefix="mysqlcapture-txn-"
            )
        rows = [tuple(getattr(ev, f) for f in _FIELDS) for ev in self._mem]
        pickle.dump(rows, self._spill, protocol=pickle.HIGHEST_PROTOCOL)
        self._spilled += len(self._mem)
        self._mem = []

    def drain(self) -> Iterator[ChangeEvent]:
        """Yield every event in order, then reset the buffer."""
        if self._spill is not None:
            self._spill.seek(0)
            remaining = self._spilled
            while remaining > 0:
                rows = pickle.load(self._spill)
                remaining -= len(rows)
                for row in rows:
                    yield ChangeEvent(*row)
            self._spill.close()
            self._spill = None
            self._spilled = 0
        mem, self._mem = self._mem, []
        yield from mem

    def clear(self) -> None:
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._spilled = 0
        self._mem = []
