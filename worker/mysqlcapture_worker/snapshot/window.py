"""What the stream did to the tables a snapshot is reading: the row effects a chunk's window merges.

A chunk is read without a lock, so the rows it returns describe the table at some moment the worker
cannot name exactly. What it can name is a window around that moment: a *fence* F before it (every
transaction that starts before F is visible to the chunk's read) and an *end* E after it (the binlog
position once the read returned). The stream keeps going meanwhile; this log keeps, for the tables
being read, what each transaction starting at F or later did to each row key: set it to an image, or
remove it. When the stream stands at a boundary B >= E, a chunk row whose key was touched in [F, B]
takes the last image the stream gave that key (or goes, if the key was removed), and every other
chunk row is the key's state at B, since nothing changed it between F and B (`parallel` says why
that is exact).

Entries are appended by the reader thread only, in binlog order; windows read them under the engine lock
the reader thread holds (`parallel.ParallelSnapshot`), so no lock is needed here.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.changes import ChangeEvent, Event, RowBatch

log = logging.getLogger(__name__)

Key = tuple[Any, ...]
Table = tuple[str, str]

# Change-log event types that change a table's definition or empty it: a chunk read before cannot be merged.
_RESHAPES = frozenset(
    {"table-create", "table-alter", "table-drop", "table-rename", "table-truncate", "database-drop", "truncate"}
)


def hashable(value: Any) -> Any:
    """A JSON value usable in a key tuple (a SET's members come as a list)."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value


Image = tuple[str, str | None]
"""A row's image as the change log holds it: its `data` and its `json_null` (the JSON null documents' columns)."""


@dataclass
class _Entry:
    start: Coordinate  # the transaction's start (a boundary)
    table: Table
    effects: list[tuple[Key, Image | None]] | None  # None: the table was reshaped (DDL, TRUNCATE)
    partial: bool = False  # an image left columns out (a session's MINIMAL or NOBLOB)


@dataclass
class TableWatch:
    """One watched table: the key columns (their names as `data` spells them) effects are keyed by."""

    key_names: tuple[str, ...]
    since: Coordinate  # recorded from here on


@dataclass
class Merge:
    """A window's effects on one table: key -> the last image (None: removed); `reshaped`: a DDL or TRUNCATE in it."""

    effects: dict[Key, Image | None] = field(default_factory=dict)
    reshaped: bool = False
    partial: bool = False


class WindowLog:
    """Row effects of watched tables since the oldest open window, and where each fence heartbeat landed."""

    def __init__(self) -> None:
        self._watched: dict[Table, TableWatch] = {}
        self._entries: deque[_Entry] = deque()  # in binlog order: their starts never go down
        self._fences: dict[int, Coordinate] = {}  # heartbeat value -> first place after its transaction
        self.epoch = 0  # moves on each stream restart: windows opened before it cannot be merged

    # -- the reader thread ----------------------------------------------------------------------------
    def watch(self, table: Table, key_names: Sequence[str], since: Coordinate) -> None:
        self._watched[table] = TableWatch(tuple(key_names), since)

    def unwatch(self, table: Table) -> None:
        self._watched.pop(table, None)
        self._entries = deque(e for e in self._entries if e.table != table)

    def watching(self, table: Table) -> TableWatch | None:
        return self._watched.get(table)

    def restart(self) -> None:
        """The stream restarts (a reconnect, a failover): what was recorded may not describe the new stream."""
        self._entries.clear()
        self._fences.clear()
        self._watched.clear()
        self.epoch += 1

    def heartbeat(self, value: int, txn_start: Coordinate) -> None:
        """A heartbeat row of the transaction starting at `txn_start`: a fence at the place right after that start
        (the transaction is one statement, so every later transaction starts after it)."""
        self._fences[value] = Coordinate(txn_start.file, txn_start.pos + 1)

    def fence_at(self, value: int) -> Coordinate | None:
        return self._fences.get(value)

    def record(self, events: Iterable[Event]) -> None:
        """The change events of a chunk the engine produced (in binlog order)."""
        if not self._watched:
            return
        for ev in events:
            table = (ev.database, ev.table or "")
            watch = self._watched.get(table)
            if watch is None:
                if ev.type == "database-drop":
                    for t in [t for t in self._watched if t[0] == ev.database]:
                        self._entries.append(_Entry(Coordinate(ev.binlog_file, ev.binlog_pos), t, None))
                continue
            start = Coordinate(ev.binlog_file, ev.binlog_pos)
            if ev.type in _RESHAPES:
                self._entries.append(_Entry(start, table, None))
                continue
            if type(ev) is RowBatch:
                self._entries.append(_Entry(start, table, list(_batch_effects(ev, watch.key_names))))
            elif type(ev) is ChangeEvent and ev.type in ("insert", "update", "delete"):
                partial = ev.absent is not None
                self._entries.append(_Entry(start, table, list(_event_effects(ev, watch.key_names)), partial))

    def prune(self, before: Coordinate | None) -> None:
        """Forget entries of transactions starting before `before` (no open window reaches back there)."""
        entries = self._entries
        if before is None:
            entries.clear()
        else:
            while entries and entries[0].start < before:
                entries.popleft()
        if len(self._fences) > 1000:
            for value in sorted(self._fences)[:-100]:
                del self._fences[value]

    # -- windows -------------------------------------------------------------------------------------------
    def merge(self, table: Table, fence: Coordinate) -> Merge:
        """What transactions starting at `fence` or later did to `table`'s keys, up to the stream's boundary."""
        out = Merge()
        for entry in self._entries:
            if entry.table != table or entry.start < fence:
                continue
            if entry.effects is None:
                out.reshaped = True
                continue
            out.partial = out.partial or entry.partial
            for key, image in entry.effects:
                out.effects[key] = image
        return out

    def __len__(self) -> int:
        return sum(len(e.effects or ()) for e in self._entries)


def key_of(data: dict[str, Any], names: Sequence[str]) -> Key | None:
    """The key tuple of a row image, None when it lacks a key column (a partial image)."""
    try:
        return tuple(hashable(data[n]) for n in names)
    except KeyError:
        return None


def _image_effects(
    kind: str, data_json: str | None, old_json: str | None, json_null: str | None, names: Sequence[str]
) -> list[tuple[Key, Image | None]]:
    if data_json is None:
        return []
    data = orjson.loads(data_json)
    key = key_of(data, names)
    if key is None:
        return []
    if kind == "delete":
        return [(key, None)]
    out: list[tuple[Key, Image | None]] = []
    if kind == "update" and old_json:
        old = orjson.loads(old_json)
        if any(n in old for n in names):
            before = key_of({**data, **old}, names)
            if before is not None and before != key:
                out.append((before, None))
    out.append((key, (data_json, json_null)))
    return out


def _event_effects(ev: ChangeEvent, names: Sequence[str]) -> list[tuple[Key, Image | None]]:
    return _image_effects(ev.type, ev.data_json, ev.old_json, ev.json_null, names)


def _batch_effects(batch: RowBatch, names: Sequence[str]) -> Iterable[tuple[Key, Image | None]]:
    datas = batch.data_json.to_pylist()
    olds = batch.old_json.to_pylist() if batch.old_json is not None else [None] * len(datas)
    marks = batch.json_null.to_pylist() if batch.json_null is not None else [None] * len(datas)
    for data, old, marked in zip(datas, olds, marks, strict=True):
        yield from _image_effects(batch.type, data, old, marked, names)
