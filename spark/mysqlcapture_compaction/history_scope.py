"""What a capture's histories can answer: the time they cover, the tables' definitions, the source's flavor.

The histories cover the change log from its first event (the capture began) to the last event the last finished
compaction run applied. A window outside that is said, not answered as empty: before it nothing was captured;
after it the change log may hold changes no run has put into the histories yet. Versions are never deleted from
a history (VACUUM removes only files a newer commit replaced), so nothing inside the span is missing.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.dataset as ds
from deltalake import DeltaTable
from mysqlcapture_api.changelog import Col, read_delta, recorded_columns
from mysqlcapture_api.columns import from_property, ruled_schema
from mysqlcapture_api.schema.history import SchemaHistory
from mysqlcapture_api.schema.model import TableDef

from mysqlcapture_compaction.definitions import history_uri, replay
from mysqlcapture_compaction.history_values import MARIADB, MYSQL
from mysqlcapture_compaction.output import last_compacted, timeline_path


class OutsideHistory(ValueError):
    """A window or a time the histories do not cover."""


def when(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _actions(table: DeltaTable) -> list[dict[str, Any]]:
    return pa.table(table.get_add_actions(flatten=True)).to_pylist()


def _files(table: DeltaTable, actions: list[dict[str, Any]]) -> list[str]:
    root = table.table_uri.removeprefix("file://").rstrip("/")
    return [f"{root}/{unquote(a['path'])}" for a in actions]


@dataclass(frozen=True)
class Coverage:
    """[first, last]: the times (epoch seconds) of the change log's first event and of the last compacted one."""

    first: int | None
    last: int | None

    def check_window(self, since: int | None, until: int | None) -> list[str]:
        """Raises OutsideHistory for a window wholly outside; returns notes for one partly outside."""
        if self.first is None or self.last is None:
            raise OutsideHistory("no compaction run has finished yet: run `mysqlcapture-compact compact` first")
        if until is not None and until < self.first:
            raise OutsideHistory(
                f"the window ends at {when(until)}, before the capture began ({when(self.first)}): nothing before "
                "that was captured"
            )
        if since is not None and since > self.last:
            raise OutsideHistory(
                f"the window starts at {when(since)}, after the last compacted change ({when(self.last)}): run "
                "`mysqlcapture-compact compact` to bring the histories up to date"
            )
        notes = []
        if since is None or since < self.first:
            notes.append(f"the capture began at {when(self.first)}: no version before that is held")
        if until is None or until > self.last:
            notes.append(
                f"the histories hold changes up to {when(self.last)} (the last compaction run); later ones are not "
                "listed"
            )
        return notes

    def check_moment(self, at: int) -> None:
        if self.first is None or self.last is None:
            raise OutsideHistory("no compaction run has finished yet: run `mysqlcapture-compact compact` first")
        if at < self.first:
            raise OutsideHistory(f"{when(at)} is before the capture began ({when(self.first)}): no state is held")
        if at > self.last:
            raise OutsideHistory(
                f"{when(at)} is after the last compacted change ({when(self.last)}): run `mysqlcapture-compact "
                "compact` first (or ask for an earlier time)"
            )


def coverage(changelog: str, output: str) -> Coverage:
    """The span the histories cover (module doc), from the Delta logs' statistics and one file's read."""
    if not DeltaTable.is_deltatable(changelog):
        return Coverage(None, None)
    log = DeltaTable(changelog)
    actions = _actions(log)
    firsts = [a[f"min.{Col.TS}"] for a in actions if a.get(f"min.{Col.TS}") is not None]
    end = last_compacted(output)
    if not firsts or end < 0:
        return Coverage(min(firsts) if firsts else None, None)
    holding = [
        a
        for a in actions
        if a.get(f"min.{Col.ORDER_KEY}") is not None and a[f"min.{Col.ORDER_KEY}"] <= end <= a[f"max.{Col.ORDER_KEY}"]
    ]
    found = ds.dataset(_files(log, holding), format="parquet").to_table(
        columns=[Col.TS], filter=ds.field(Col.ORDER_KEY) == end
    )
    last = found[Col.TS][0].as_py() if found.num_rows else None
    if last is None:  # the end key's file could not be placed by statistics: the latest time at or before it
        before = [a[f"max.{Col.TS}"] for a in actions if (a.get(f"max.{Col.ORDER_KEY}") or end + 1) <= end]
        last = max(before) if before else None
    return Coverage(min(firsts), last)


def snapshots(output: str, database: str, table: str) -> list[tuple[str, int, int]]:
    """(type, ordering key, time) of the table's bootstrap-start and bootstrap-complete events, in order."""
    path = timeline_path(output)
    if not DeltaTable.is_deltatable(path):
        return []
    events = read_delta(path, [Col.TYPE, Col.ORDER_KEY, Col.DATABASE, Col.TABLE, Col.TS]).to_pylist()
    return sorted(
        (
            (e[Col.TYPE], e[Col.ORDER_KEY], e[Col.TS])
            for e in events
            if e[Col.TYPE] in ("bootstrap-start", "bootstrap-complete")
            and e[Col.DATABASE] == database
            and e[Col.TABLE] == table
        ),
        key=lambda e: e[1],
    )


def definitions(changelog: str) -> tuple[dict[tuple[str, str], TableDef], str | None]:
    """Every table's newest definition in the change log's schema history, and the source's flavor as its GTIDs
    say (None when it recorded none)."""
    uri = history_uri(changelog)
    if not DeltaTable.is_deltatable(uri):
        return {}, None
    entries = SchemaHistory(uri).entries()
    rules = from_property(recorded_columns(DeltaTable(changelog)))
    out: dict[tuple[str, str], TableDef] = {}
    for _, raw in sorted(replay(entries).items(), reverse=True):
        schema = ruled_schema(rules, raw)
        for db in schema.databases.values():
            for table in db.tables.values():
                out.setdefault((table.database, table.name), table)
    flavor = None
    for entry in entries:
        if entry.gtid:
            flavor = flavor_of_gtid(entry.gtid)
            break
    return out, flavor


def flavor_of_gtid(gtid: str) -> str | None:
    """mysql for server_uuid:N GTIDs, mariadb for domain-server-sequence ones."""
    first = gtid.split(",")[0].strip()
    if ":" in first:
        return MYSQL
    if first.count("-") == 2:
        return MARIADB
    return None
