"""A snapshot's progress: an immutable value checkpointed with every chunk of its rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson


@dataclass(frozen=True)
class SnapshotJob:
    """Which tables a snapshot covers and how far it got, stored in `Position.snapshot`.

    `index` is the table being read; `started` says its bootstrap-start is committed; `last` is the
    chunking key of the last committed row (None: none yet); `rows` counts its committed rows.
    """

    tables: tuple[tuple[str, str], ...]
    reason: str  # initial | request | purged | unlogged (rows changed without row events)
    request_id: int = 0  # the resnapshot request being served (0: none)
    index: int = 0
    started: bool = False
    last: tuple[Any, ...] | None = None
    rows: int = 0

    @property
    def done(self) -> bool:
        return self.index >= len(self.tables)

    @property
    def table(self) -> tuple[str, str]:
        return self.tables[self.index]

    def start_table(self) -> SnapshotJob:
        return replace(self, started=True, last=None, rows=0)

    def restart_table(self) -> SnapshotJob:
        """Read the current table again from its start (a full scan cannot resume): a new bootstrap-start."""
        return replace(self, started=False, last=None, rows=0)

    def advance(self, last: tuple[Any, ...] | None, rows: int) -> SnapshotJob:
        return replace(self, last=last, rows=self.rows + rows)

    def next_table(self) -> SnapshotJob:
        return replace(self, index=self.index + 1, started=False, last=None, rows=0)

    def reading_again(self, tables: tuple[tuple[str, str], ...]) -> SnapshotJob:
        """The job with `tables` read (again) after those it still has to read: a table it has started or done
        is read once more from the start (a new bootstrap-start), one still waiting is not added twice."""
        waiting = self.tables[self.index + (1 if self.started else 0) :]
        return replace(self, tables=self.tables + tuple(t for t in tables if t not in waiting))

    def renamed(self, names: Mapping[tuple[str, str], tuple[str, str]]) -> SnapshotJob:
        """The job with the tables it has not finished under their new `names` (RENAME TABLE). The table it is
        in the middle of starts again under its new name: its bootstrap-start named the old one."""
        if not names:
            return self
        rest = tuple(names.get(t, t) for t in self.tables[self.index :])
        job = replace(self, tables=self.tables[: self.index] + rest)
        return job.restart_table() if self.started and not self.done and self.table in names else job

    def to_json(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> SnapshotJob:
        raw: dict[str, Any] = orjson.loads(text)
        raw["tables"] = tuple((str(d), str(t)) for d, t in raw["tables"])
        if raw.get("last") is not None:
            raw["last"] = tuple(raw["last"])
        return cls(**raw)
