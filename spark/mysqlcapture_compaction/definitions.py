"""Which table definition each change-log event was written under: the worker's schema history, placed on the
change log's ordering keys.

The schema history (`<changelog>/_mysqlcapture_schema`) holds every schema the worker applied, with full column
definitions (DECIMAL precision, BIT width, unsigned...). Its entries carry the server and binlog position where
the DDL ended; the change log's DDL events carry where it started. Each change-log DDL event is matched to the
entry of the same server and binlog file with the first end position after its start, which places every
schema version on the ordering keys. A row event uses the version of the latest DDL before it, else the history's
first schema (the capture the change log starts from).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from deltalake import DeltaTable as RsTable
from mysqlcapture_api.changelog import Col, recorded_columns
from mysqlcapture_api.columns import from_property, ruled_schema
from mysqlcapture_api.schema.ddl_tokens import EOF, IDENT, WORD, Cursor
from mysqlcapture_api.schema.diff import apply_delta
from mysqlcapture_api.schema.history import HistoryEntry, SchemaHistory
from mysqlcapture_api.schema.model import TableDef
from mysqlcapture_api.schema.schema import Schema

log = logging.getLogger(__name__)
SCHEMA_FOLDER = "_mysqlcapture_schema"
DDL_TYPES = frozenset(
    {"table-create", "table-drop", "table-alter", "database-create", "database-drop", "database-alter"}
)


def history_uri(changelog: str) -> str:
    """Where the worker keeps the schema history of a change log (settings.sink.schema_history_uri)."""
    return changelog.rstrip("/") + "/" + SCHEMA_FOLDER


@dataclass(frozen=True)
class DdlMark:
    """Where a change-log DDL event sits: its ordering key and its statement's binlog start."""

    order_key: int
    server_id: int
    binlog_file: str
    event_pos: int
    sql: str | None


def replay(entries: Iterable[HistoryEntry]) -> dict[int, Schema]:
    """Every version's whole schema, replayed forward from the captures (entries in version order)."""
    out: dict[int, Schema] = {}
    for entry in sorted(entries, key=lambda e: e.version):
        if entry.kind == "capture":
            out[entry.version] = Schema.from_json(entry.payload)
        elif entry.base_version in out:
            out[entry.version] = apply_delta(out[entry.base_version], entry.payload)
    return out


def place(entries: list[HistoryEntry], marks: Iterable[DdlMark]) -> list[tuple[int, int]]:
    """(ordering key, schema version) for each DDL event matched to its history entry, by ordering key."""
    ends: dict[tuple[int, str], list[tuple[int, int]]] = {}
    statements = {e.version: e.sql for e in entries}
    for e in entries:
        if e.kind == "delta" and e.coordinate is not None:
            ends.setdefault((e.server_id, e.coordinate.file), []).append((e.coordinate.pos, e.version))
    for found in ends.values():
        found.sort()
    placed: dict[int, int] = {}
    for mark in marks:
        candidates = ends.get((mark.server_id, mark.binlog_file), [])
        i = bisect.bisect_right(candidates, (mark.event_pos, float("inf")))
        # The same statement, or the DDL left no entry (it changed nothing the history keeps).
        if i < len(candidates) and statements[candidates[i][1]] == mark.sql:
            placed[mark.order_key] = candidates[i][1]
    return sorted(placed.items())


class Definitions:
    """Table definitions by ordering key. Empty (every lookup None) when the change log has no schema history."""

    def __init__(self, schemas: Mapping[int, Schema], timeline: list[tuple[int, int]]) -> None:
        self._schemas = dict(schemas)
        self._keys = [k for k, _ in timeline]
        self._versions = [v for _, v in timeline]
        self._first = min(self._schemas) if self._schemas else None

    @classmethod
    def load(
        cls, changelog: str, marks: Iterable[DdlMark], storage_options: dict[str, str] | None = None
    ) -> Definitions:
        uri = history_uri(changelog)
        if not RsTable.is_deltatable(uri, storage_options):
            log.warning("no schema history at %s: source columns are kept as text", uri)
            return cls({}, [])
        entries = SchemaHistory(uri, storage_options).entries()
        # Columns the worker's rules hash or exclude (spec.columns, recorded on the change log) are typed as written.
        rules = from_property(recorded_columns(RsTable(changelog, storage_options=storage_options)))
        schemas = {v: ruled_schema(rules, s) for v, s in replay(entries).items()}
        return cls(schemas, place(entries, marks))

    def version_at(self, order_key: int) -> int | None:
        """The schema version in force for an event at `order_key` (the latest DDL strictly before it)."""
        i = bisect.bisect_left(self._keys, order_key)
        return self._versions[i - 1] if i > 0 else self._first

    def version_after(self, order_key: int) -> int | None:
        """The schema version once the DDL event at `order_key` is applied."""
        return self.version_at(order_key + 1)

    def schema(self, version: int | None) -> Schema | None:
        return self._schemas.get(version) if version is not None else None

    def table(self, database: str, table: str, version: int | None) -> TableDef | None:
        schema = self._schemas.get(version) if version is not None else None
        return schema.table(database, table, exact=True) if schema is not None else None


def column_renames(sql: str) -> dict[str, str]:
    """new name -> old name for the columns an ALTER statement renames (CHANGE [COLUMN] [IF EXISTS] old new ...,
    RENAME COLUMN [IF EXISTS] old TO new), read from its tokens."""
    toks = [t for t in Cursor(sql).tokens if t.kind != EOF]
    out: dict[str, str] = {}

    def name_at(j: int) -> tuple[str | None, int]:
        if j + 1 < len(toks) and toks[j].upper == "IF" and toks[j + 1].upper == "EXISTS":
            j += 2
        return (toks[j].value, j) if j < len(toks) and toks[j].kind in (WORD, IDENT) else (None, j)

    for i, tok in enumerate(toks):
        if tok.upper == "CHANGE":
            j = i + 2 if i + 1 < len(toks) and toks[i + 1].upper == "COLUMN" else i + 1
            old, j = name_at(j)
            new = toks[j + 1].value if old is not None and j + 1 < len(toks) else None
        elif tok.upper == "RENAME" and i + 1 < len(toks) and toks[i + 1].upper == "COLUMN":
            old, j = name_at(i + 2)
            new = toks[j + 2].value if old is not None and j + 2 < len(toks) and toks[j + 1].upper == "TO" else None
        else:
            continue
        if old is not None and new is not None and old != new:
            out[new] = old
    return out


def marks_of(rows: Iterable[Any]) -> list[DdlMark]:
    """The DdlMarks of change-log DDL rows (other kinds of non-row events are left out)."""
    return [
        DdlMark(
            int(r[Col.ORDER_KEY]), int(r[Col.SERVER_ID]), str(r[Col.BINLOG_FILE]), int(r[Col.EVENT_POS]), r[Col.SQL]
        )
        for r in rows
        if r[Col.TYPE] in DDL_TYPES
    ]
