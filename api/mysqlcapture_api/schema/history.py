"""The schema history (Maxwell's schema storage): a captured schema and a chain of deltas, in Delta."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from mysqlcapture_api.changelog import read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.diff import apply_delta, diff
from mysqlcapture_api.schema.schema import Schema

ARROW_SCHEMA = pa.schema(
    [
        pa.field("version", pa.int64(), nullable=False),
        pa.field("base_version", pa.int64()),
        pa.field("server_id", pa.int64(), nullable=False),
        pa.field("binlog_file", pa.string()),
        pa.field("binlog_pos", pa.int64()),
        pa.field("gtid", pa.string()),
        pa.field("last_heartbeat", pa.int64()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("payload", pa.string(), nullable=False),
        pa.field("sql", pa.string()),
    ]
)
KINDS = ("capture", "delta", "merge")
_COMPACT_EVERY = 50


class SchemaHistoryError(RuntimeError):
    """The history cannot give the schema asked for (missing table, version or chain link)."""


@dataclass(frozen=True)
class HistoryEntry:
    """One row of the history; its `coordinate` is stored as the `binlog_file` and `binlog_pos` columns."""

    version: int
    base_version: int | None
    server_id: int
    coordinate: Coordinate | None  # None only in a row whose file or position column is null
    gtid: str | None
    last_heartbeat: int | None
    kind: str
    payload: dict[str, Any]
    sql: str | None = None

    def row(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "base_version": self.base_version,
            "server_id": self.server_id,
            "binlog_file": self.coordinate.file if self.coordinate is not None else None,
            "binlog_pos": self.coordinate.pos if self.coordinate is not None else None,
            "gtid": self.gtid,
            "last_heartbeat": self.last_heartbeat,
            "kind": self.kind,
            "payload": json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False),
            "sql": self.sql,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> HistoryEntry:
        fields = {**row, "payload": json.loads(row["payload"])}
        file, pos = fields.pop("binlog_file"), fields.pop("binlog_pos")
        coordinate = Coordinate(file, int(pos)) if file is not None and pos is not None else None
        return cls(**fields, coordinate=coordinate)


class SchemaHistory:
    """The schema history stored at `uri` (a Delta table; local path or object-store URI).

    One row per entry: `version` (increasing), `base_version` (the entry it applies to; null for a
    capture), where in the binlog it happened (`server_id`, the coordinate as `binlog_file` and
    `binlog_pos`, `gtid`, `last_heartbeat`), `kind` ('capture': payload is a whole Schema; 'delta':
    payload is the diff from the base; 'merge': an empty delta marking the move to another server
    after failover), `payload` (JSON) and the DDL `sql`.

    Entries are written ahead of the change-log commit that references their version. Each write
    replaces, in one atomic Delta commit, every entry at or after its version: re-recording a
    version after a crash leaves exactly one entry, and entries a crashed run wrote past its
    checkpoint are discarded (also explicitly by `truncate_after(checkpointed_version)` on resume).
    """

    def __init__(self, uri: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.storage_options = storage_options
        # The worker is the history's only writer: it keeps the table open and the versions it holds
        # in memory, so recording a DDL is one append, not a reload and a rewrite of the whole history.
        self._open: DeltaTable | None = None
        self._known: set[int] | None = None
        self._writes = 0

    @classmethod
    def open(cls, uri: str, storage_options: dict[str, str] | None = None) -> SchemaHistory:
        return cls(uri, storage_options)

    # -- reading -------------------------------------------------------------------------------
    def _table(self) -> DeltaTable | None:
        if self._open is not None:
            self._open.update_incremental()
            return self._open
        try:
            self._open = DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        return self._open

    def _version_set(self) -> set[int]:
        if self._known is None:
            self._known = set(self._versions(self._table()))
        return self._known

    def _versions(self, table: DeltaTable | None) -> list[int]:
        if table is None:
            return []
        return sorted(int(v) for v in read_delta(table, ["version"]).column("version").to_pylist())

    def entries(self) -> list[HistoryEntry]:
        """Every entry, by version."""
        table = self._table()
        if table is None:
            return []
        rows = sorted(read_delta(table).to_pylist(), key=lambda r: int(r["version"]))
        return [HistoryEntry.from_row(r) for r in rows]

    def latest_version(self) -> int | None:
        versions = self._versions(self._table())
        return versions[-1] if versions else None

    def schema_at(self, version: int) -> Schema:
        """The schema at `version`: its chain of base versions back to a capture, replayed forward."""
        by_version = {e.version: e for e in self.entries()}
        if not by_version:
            raise SchemaHistoryError(
                f"schema history {self.uri} is missing or empty; the change log cannot be resumed safely"
            )
        chain: list[HistoryEntry] = []
        current: int | None = version
        while current is not None:
            entry = by_version.get(current)
            if entry is None:
                raise SchemaHistoryError(f"schema history {self.uri} has no version {current} (wanted {version})")
            chain.append(entry)
            if entry.kind == "capture":
                break
            current = entry.base_version
        else:
            raise SchemaHistoryError(f"schema history {self.uri}: version {version} does not lead to a capture")
        schema = Schema.from_json(chain[-1].payload)
        for entry in reversed(chain[:-1]):
            schema = apply_delta(schema, entry.payload)
        return schema

    def version_before_heartbeat(self, version: int, heartbeat: int) -> int:
        """The version in force where the stream read `heartbeat`: `version`'s chain walked back past every entry
        recorded after that heartbeat was read (an entry's `last_heartbeat` is the last one read before it).

        A failover by heartbeat search reads the new server's binlog again from that heartbeat: the DDL after it
        is applied again, to the schema it was first applied to. A re-captured schema (a `capture` entry) ends
        the walk: nothing older is known to hold at the heartbeat.
        """
        by_version = {e.version: e for e in self.entries()}
        current = version
        while True:
            entry = by_version.get(current)
            if entry is None:
                raise SchemaHistoryError(f"schema history {self.uri} has no version {current} (wanted {version})")
            after = entry.last_heartbeat is not None and entry.last_heartbeat >= heartbeat
            if not after or entry.kind == "capture" or entry.base_version is None:
                return current
            current = entry.base_version

    def replay_after(self, version: int) -> tuple[str, ...]:
        """The DDL statements the stream is still to read again at `version`, which the change log already holds.

        A failover by heartbeat search records a merge onto an older base (`version_before_heartbeat`): the new
        server's stream reads again, from that heartbeat, the statements recorded after the base, and every event
        until the last of them is one the change log holds. Worked out from the entries in the order they were
        recorded (their versions): a statement recorded while some were still to be read again is one of those
        (not written again) when it is the next of them, else the read went elsewhere and the rest is written.
        """
        held: list[tuple[int, str]] = []  # the statements the change log holds, by the version that recorded them
        replay: list[str] = []
        after: dict[int, tuple[str, ...]] = {}  # the statements still to be read again after each version
        for entry in sorted(self.entries(), key=lambda e: e.version):
            if entry.version > version:
                break
            if entry.kind == "capture":
                held, replay = [], []
            elif entry.kind == "delta":
                if replay and entry.sql == replay[0]:
                    replay.pop(0)
                else:
                    replay = []
                    held.append((entry.version, entry.sql or ""))
            elif entry.base_version is not None and entry.base_version != entry.version - 1:  # a rewinding merge
                base = entry.base_version
                replay = [*after.get(base, ()), *(sql for v, sql in held if v > base)]
            after[entry.version] = tuple(replay)
        return after.get(version, ())

    # -- writing -------------------------------------------------------------------------------
    def _write(self, entry: HistoryEntry) -> int:
        """Write `entry`, replacing every entry at or after its version in the same commit."""
        data = pa.Table.from_pylist([entry.row()], schema=ARROW_SCHEMA)
        known = self._version_set()
        target: DeltaTable | str = self._table() or self.uri
        if not known or entry.version > max(known):
            # Nothing at or after this version (the steady state): a plain append.
            write_deltalake(target, data, mode="append", storage_options=self.storage_options)
        else:
            write_deltalake(
                target,
                data,
                mode="overwrite",
                predicate=f"version >= {int(entry.version)}",
                storage_options=self.storage_options,
            )
            known.difference_update({v for v in known if v >= entry.version})
        known.add(entry.version)
        self._writes += 1
        if self._writes % _COMPACT_EVERY == 0:
            # One small file per DDL would make every later write slower; fold them together.
            table = self._table()
            if table is not None:
                table.optimize.compact()
        return entry.version

    def initial(
        self,
        schema: Schema,
        *,
        server_id: int,
        coordinate: Coordinate,
        gtid: str | None,
        last_heartbeat: int | None = None,
        version: int = 0,
    ) -> int:
        """Record a captured schema as `version` (0 for a new capture: the whole history restarts).

        `server_id`, `coordinate`, `gtid` and `last_heartbeat` say where in the binlog the schema held, as in
        `record` and `merge`.
        """
        return self._write(
            HistoryEntry(
                version,
                None,
                server_id,
                coordinate,
                gtid,
                last_heartbeat,
                "capture",
                schema.to_json(),
            )
        )

    def record(
        self,
        *,
        base_version: int,
        before: Schema,
        after: Schema,
        server_id: int,
        coordinate: Coordinate,
        gtid: str | None,
        last_heartbeat: int | None,
        sql: str,
    ) -> int:
        """Record the change `before` (the schema at `base_version`) -> `after`; returns its version.

        Idempotent: recording the same version again (after a crash, before the change log caught
        up) replaces the earlier entry and anything after it.
        """
        delta = diff(before, after)
        if apply_delta(before, delta) != after:  # pragma: no cover - a bug in diff, never expected
            raise SchemaHistoryError(f"schema delta for {sql[:200]!r} does not reproduce the new schema")
        return self._append(
            base_version,
            "delta",
            delta,
            server_id=server_id,
            coordinate=coordinate,
            gtid=gtid,
            last_heartbeat=last_heartbeat,
            sql=sql,
        )

    def merge(
        self,
        *,
        base_version: int,
        server_id: int,
        coordinate: Coordinate,
        gtid: str | None,
        last_heartbeat: int | None,
        version: int | None = None,
    ) -> int:
        """A merge point: the schema at `base_version` continues on another server after a failover.

        Binlog coordinates mean something on one server only: the entry records the new server's id and the
        coordinate the capture continues at there, so later entries are read against that server's binlog,
        while the schema itself is unchanged (an empty delta). `version` (default `base_version + 1`) is the
        entry's own: a failover by heartbeat search merges onto an older base (the schema at the heartbeat),
        under a version after every one the change log already names.
        """
        return self._append(
            base_version,
            "merge",
            {},
            server_id=server_id,
            coordinate=coordinate,
            gtid=gtid,
            last_heartbeat=last_heartbeat,
            sql=None,
            version=version,
        )

    def _append(
        self,
        base_version: int,
        kind: str,
        payload: dict[str, Any],
        *,
        server_id: int,
        coordinate: Coordinate,
        gtid: str | None,
        last_heartbeat: int | None,
        sql: str | None,
        version: int | None = None,
    ) -> int:
        if base_version not in self._version_set():
            raise SchemaHistoryError(
                f"schema history {self.uri} has no version {base_version} to build on; record the initial schema first"
            )
        entry = HistoryEntry(
            base_version + 1 if version is None else version,
            base_version,
            server_id,
            coordinate,
            gtid,
            last_heartbeat,
            kind,
            payload,
            sql,
        )
        return self._write(entry)

    def truncate_after(self, version: int) -> None:
        """Discard entries past `version` (those a crashed run wrote beyond its last checkpoint)."""
        table = self._table()
        if any(v > version for v in self._version_set()):
            assert table is not None
            table.delete(f"version > {int(version)}")
            self._known = {v for v in self._version_set() if v <= version}
