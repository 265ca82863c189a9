"""The worker's position: an immutable checkpoint value stored with every sink commit, and the progress of a
snapshot it may carry."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson
from mysqlcapture_api.coordinates import NOWHERE, Coordinate


@dataclass(frozen=True)
class Position:
    """Where the capture stands, as Maxwell's Position: a binlog coordinate plus everything needed to resume.

    `coordinate` is always a transaction boundary (where the next transaction starts), never a point
    inside one; it is `NOWHERE` (an empty file) when the capture starts or continues on a server by
    GTID set, until the first boundary there. `txn_index` counts the rows of the transaction starting
    there that are already committed to the sink: a transaction too large for one sink commit is
    written in several, and a restart re-reads it from its start and skips those rows.

    Serialised by `to_json` only, with the coordinate as the two keys `binlog_file` and `binlog_pos`
    that checkpoints have always held, so every checkpoint written before still loads.
    """

    server_id: int
    coordinate: Coordinate
    gtid_set: str = ""
    server_identity: str = ""  # MySQL server_uuid or MariaDB "domain:server_id"
    txn_index: int = 0
    order_key: int = 0  # last ordering key handed out; strictly increasing over the whole capture
    last_heartbeat: int | None = None  # last heartbeat value seen in the stream (ms since epoch)
    schema_version: int = 0
    # A snapshot in progress at this boundary (a SnapshotJob as JSON), None when streaming.
    snapshot: str | None = None

    def _with(self, **changes: Any) -> Position:
        """A copy with `changes` (fields of this class), made without `dataclasses.replace`'s call of `__init__`:
        the engine moves the position three times per transaction."""
        new = object.__new__(Position)
        new.__dict__.update(self.__dict__, **changes)
        return new

    def at_boundary(self, coordinate: Coordinate, *, gtid_set: str, schema_version: int | None = None) -> Position:
        """The position after a complete transaction, which ends where the next one starts: `coordinate` (with the
        schema version there, when given)."""
        if schema_version is None:
            return self._with(coordinate=coordinate, gtid_set=gtid_set, txn_index=0)
        return self._with(coordinate=coordinate, gtid_set=gtid_set, txn_index=0, schema_version=schema_version)

    def continued_by_gtid(self, *, server_id: int, identity: str) -> Position:
        """The same point of the capture on another server, reached by GTID set: no boundary is known there
        until the stream passes one (`NOWHERE`); the GTID set and the rows of the next transaction already
        committed (`txn_index`) stay."""
        return replace(self, server_id=server_id, server_identity=identity, coordinate=NOWHERE)

    def inside(self, txn_index: int, order_key: int) -> Position:
        """The same boundary with `txn_index` rows of the next transaction committed."""
        return self._with(txn_index=txn_index, order_key=order_key)

    def with_order_key(self, order_key: int) -> Position:
        return self._with(order_key=order_key)

    def with_heartbeat(self, heartbeat: int) -> Position:
        return self._with(last_heartbeat=heartbeat)

    def with_schema_version(self, version: int) -> Position:
        return self._with(schema_version=version)

    def with_snapshot(self, snapshot: str | None) -> Position:
        return replace(self, snapshot=snapshot)

    def with_server(self, server_id: int, identity: str) -> Position:
        return replace(self, server_id=server_id, server_identity=identity)

    def to_json(self) -> str:
        raw = asdict(self)
        coordinate = raw.pop("coordinate")
        # The keys and their order as checkpoints have always had them.
        ordered = {"server_id": raw.pop("server_id"), "binlog_file": coordinate["file"]}
        ordered["binlog_pos"] = coordinate["pos"]
        return orjson.dumps({**ordered, **raw}).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Position:
        raw: dict[str, Any] = orjson.loads(text)
        coordinate = Coordinate(raw.pop("binlog_file"), raw.pop("binlog_pos"))
        return cls(coordinate=coordinate, **raw)

    def __str__(self) -> str:
        extra = f"+{self.txn_index}" if self.txn_index else ""
        gtid = f" gtid={self.gtid_set}" if self.gtid_set else ""
        return f"{self.coordinate}{extra}{gtid} server_id={self.server_id}"


@dataclass(frozen=True)
class SnapshotJob:
    """Which tables a snapshot covers and how far it got, stored in `Position.snapshot`.

    `index` is the first table not read to its end (every table before it is); `started` says its bootstrap-start
    is committed; `ranges` are the key ranges (after, upto] of it committed so far, in key order (ranges are read in
    parallel, so they need not be contiguous); `last` is the key of the last committed row of a table read by a
    single connection (None: none yet); `rows` counts its committed rows.

    `ahead` holds the tables after `index` started while it was still read (tables are read side by side): per
    table its place in `tables`, rows, committed ranges, and whether it is complete (its bootstrap-complete
    committed). When `index` moves onto one, that table's progress moves into the fields above.
    """

    tables: tuple[tuple[str, str], ...]
    reason: str  # initial | request | purged | unlogged (rows changed without row events)
    request_id: int = 0  # the resnapshot request being served (0: none)
    index: int = 0
    started: bool = False
    last: tuple[Any, ...] | None = None
    rows: int = 0
    ranges: Ranges = ()
    ahead: tuple[Ahead, ...] = ()

    @property
    def done(self) -> bool:
        return self.index >= len(self.tables)

    def ahead_of(self, i: int) -> Ahead | None:
        """The progress of table `i` (after `index`) when it was started ahead, else None."""
        return next((a for a in self.ahead if a.i == i), None)

    def start_ahead(self, i: int) -> SnapshotJob:
        """Table `i` (after `index`) has its bootstrap-start committed."""
        assert i > self.index and self.ahead_of(i) is None
        return replace(self, ahead=tuple(sorted((*self.ahead, Ahead(i)), key=lambda a: a.i)))

    def with_ahead_ranges(self, i: int, ranges: Ranges, rows: int) -> SnapshotJob:
        """The committed key ranges of table `i` (ahead), after a range of `rows` rows was committed."""
        return self._with_ahead(i, lambda a: replace(a, ranges=ranges, rows=a.rows + rows))

    def complete_ahead(self, i: int) -> SnapshotJob:
        """Table `i` (ahead) has its bootstrap-complete committed."""
        return self._with_ahead(i, lambda a: replace(a, complete=True, ranges=()))

    def restart_ahead(self, i: int) -> SnapshotJob:
        """Table `i` (ahead) is read again from its start: it is no longer started."""
        return replace(self, ahead=tuple(a for a in self.ahead if a.i != i))

    def _with_ahead(self, i: int, change: Callable[[Ahead], Ahead]) -> SnapshotJob:
        return replace(self, ahead=tuple(change(a) if a.i == i else a for a in self.ahead))

    @property
    def table(self) -> tuple[str, str]:
        return self.tables[self.index]

    def start_table(self) -> SnapshotJob:
        return replace(self, started=True, last=None, rows=0, ranges=())

    def restart_table(self) -> SnapshotJob:
        """Read the current table again from its start (a full scan cannot resume): a new bootstrap-start."""
        return replace(self, started=False, last=None, rows=0, ranges=())

    def advance(self, last: tuple[Any, ...] | None, rows: int) -> SnapshotJob:
        return replace(self, last=last, rows=self.rows + rows)

    def with_ranges(
        self, ranges: tuple[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None], ...], rows: int
    ) -> SnapshotJob:
        """The committed key ranges of the current table, after a range of `rows` rows was committed."""
        return replace(self, ranges=ranges, rows=self.rows + rows)

    def next_table(self) -> SnapshotJob:
        """The current table is complete: the next one not complete becomes current, with its progress if it was
        started ahead."""
        index, ahead = self.index + 1, {a.i: a for a in self.ahead}
        while index in ahead and ahead[index].complete:
            del ahead[index]
            index += 1
        current = ahead.pop(index, None)
        rest = tuple(a for i, a in sorted(ahead.items()) if i > index)
        if current is None:
            return replace(self, index=index, started=False, last=None, rows=0, ranges=(), ahead=rest)
        return replace(self, index=index, started=True, last=None, rows=current.rows, ranges=current.ranges, ahead=rest)

    def reading_again(self, tables: tuple[tuple[str, str], ...]) -> SnapshotJob:
        """The job with `tables` read (again) after those it still has to read: a table it has started or done
        is read once more from the start (a new bootstrap-start), one still waiting is not added twice."""
        begun = {a.i for a in self.ahead}
        start = self.index + (1 if self.started else 0)
        waiting = [t for i, t in enumerate(self.tables) if i >= start and i not in begun]
        return replace(self, tables=self.tables + tuple(t for t in tables if t not in waiting))

    def renamed(self, names: Mapping[tuple[str, str], tuple[str, str]]) -> SnapshotJob:
        """The job with the tables it has not finished under their new `names` (RENAME TABLE). A table it is in
        the middle of starts again under its new name: its bootstrap-start named the old one."""
        if not names:
            return self
        rest = tuple(names.get(t, t) for t in self.tables[self.index :])
        job = replace(self, tables=self.tables[: self.index] + rest)
        job = replace(job, ahead=tuple(a for a in job.ahead if a.complete or self.tables[a.i] not in names))
        return job.restart_table() if self.started and not self.done and self.table in names else job

    def to_json(self) -> str:
        raw = asdict(self)
        if _SEAL is not None:  # key values may be ruled columns' (spec.columns): sealed with the capture's key
            raw["last"] = _SEAL.seal(self.last) if self.last is not None else None
            raw["ranges"] = _SEAL.seal_ranges(self.ranges)
            for a, ahead in zip(raw["ahead"], self.ahead, strict=True):
                a["ranges"] = _SEAL.seal_ranges(ahead.ranges)
        return orjson.dumps(raw).decode()

    @classmethod
    def from_json(cls, text: str) -> SnapshotJob:
        raw: dict[str, Any] = orjson.loads(text)
        raw["tables"] = tuple((str(d), str(t)) for d, t in raw["tables"])
        if raw.get("last") is not None:
            raw["last"] = _key(raw["last"])
        raw["ranges"] = _ranges(raw.get("ranges"))
        raw["ahead"] = tuple(
            Ahead(int(a["i"]), int(a["rows"]), _ranges(a["ranges"]), bool(a["complete"]))
            for a in raw.get("ahead") or ()
        )
        return cls(**raw)


Ranges = tuple[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None], ...]


@dataclass(frozen=True)
class Ahead:
    """A table started after the job's current one: its place in the job, rows, committed ranges, completeness."""

    i: int
    rows: int = 0
    ranges: Ranges = ()
    complete: bool = False


def _ranges(raw: Any) -> Ranges:
    return tuple((None if a is None else _key(a), None if b is None else _key(b)) for a, b in raw or ())


def _key(raw: Any) -> tuple[Any, ...]:
    if isinstance(raw, dict):
        if _SEAL is None:
            raise CheckpointKeyError(
                "the checkpoint's snapshot holds key values sealed with spec.columns.hash's key, and no key is set: "
                "restore spec.columns.hash with the same keyFrom until the snapshot completes"
            )
        return _SEAL.open(raw)
    return tuple(raw)


class CheckpointKeyError(ValueError):
    """Sealed snapshot keys that cannot be opened (no key, or another one)."""


class KeySeal:
    """Snapshot key values sealed in checkpoints with the capture's column-hash key: a keystream of HMAC-SHA256 in
    counter mode over a random nonce, then an HMAC-SHA256 tag (encrypt-then-MAC), so no key value is written as is."""

    def __init__(self, key: bytes, previous: KeySeal | None = None) -> None:
        """`previous`: the seal of the key this one replaced in this process (a rotated key), for opening only."""
        self._enc = hmac.new(key, b"mysqlcapture snapshot keys: encryption", hashlib.sha256).digest()
        self._mac = hmac.new(key, b"mysqlcapture snapshot keys: authentication", hashlib.sha256).digest()
        self.previous = previous
        self.key = key

    def _stream(self, nonce: bytes, n: int) -> bytes:
        blocks = (
            hmac.new(self._enc, nonce + i.to_bytes(8, "big"), hashlib.sha256).digest() for i in range(n // 32 + 1)
        )
        return b"".join(blocks)[:n]

    def seal(self, values: tuple[Any, ...]) -> dict[str, str]:
        plain = orjson.dumps(list(values))
        nonce = os.urandom(16)
        sealed = bytes(a ^ b for a, b in zip(plain, self._stream(nonce, len(plain)), strict=True))
        tag = hmac.new(self._mac, nonce + sealed, hashlib.sha256).digest()[:16]
        return {"sealed": base64.b64encode(nonce + sealed + tag).decode()}

    def seal_ranges(self, ranges: Ranges) -> list[list[dict[str, str] | None]]:
        return [[None if a is None else self.seal(a), None if b is None else self.seal(b)] for a, b in ranges]

    def open(self, raw: dict[str, Any]) -> tuple[Any, ...]:
        blob = base64.b64decode(str(raw["sealed"]))
        nonce, sealed, tag = blob[:16], blob[16:-16], blob[-16:]
        if not hmac.compare_digest(tag, hmac.new(self._mac, nonce + sealed, hashlib.sha256).digest()[:16]):
            if self.previous is not None:
                return self.previous.open(raw)
            raise CheckpointKeyError(
                "the checkpoint's snapshot key values were sealed with another spec.columns.hash key: restore the "
                "previous key until the snapshot under way completes"
            )
        plain = bytes(a ^ b for a, b in zip(sealed, self._stream(nonce, len(sealed)), strict=True))
        return tuple(orjson.loads(plain))


_SEAL: KeySeal | None = None


def seal_snapshot_keys(key: bytes | None) -> None:
    """Seal the snapshot key values of every checkpoint written from now on with `key` (None: write them as they
    are); sealed ones are opened with it, or with a key it replaced in this process (a rotation)."""
    global _SEAL
    if not key:
        _SEAL = None
    elif _SEAL is None or _SEAL.key != key:
        _SEAL = KeySeal(key, previous=_SEAL)
