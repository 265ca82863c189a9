"""Seed 003's question: every version of one row, by table, primary key and time, read from the history index.

Reads with delta-rs (no JVM): the (database, table, bucket) partition and the files whose pk_hash/ts statistics
can match, then prints one line per version with its before and after images.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import orjson
import pyarrow.compute as pc
from deltalake import DeltaTable

from mysqlcapture_compaction import values
from mysqlcapture_compaction.job import DEFAULT_BUCKETS

COLUMNS = ["order_key", "type", "ts", "gtid", "binlog_file", "event_pos", "pk", "before", "after", "old"]


def pk_json(parts: list[str]) -> str:
    """`--pk` values as the worker renders `primary_key`: a JSON array; numbers stay numbers.

    One argument that is itself a JSON array is taken as the whole key.
    """
    if len(parts) == 1 and parts[0].lstrip().startswith("["):
        return orjson.dumps(json.loads(parts[0])).decode()
    items: list[Any] = []
    for part in parts:
        try:
            value = json.loads(part)
        except ValueError:
            value = part
        items.append(value if isinstance(value, int | float) and not isinstance(value, bool) else part)
    return orjson.dumps(items).decode()


def parse_time(text: str | None) -> int | None:
    """Epoch seconds from an integer or an ISO 8601 time (UTC when no offset is given)."""
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp())


def row_history(
    path: str,
    *,
    database: str,
    table: str,
    pk: str,
    since: int | None = None,
    until: int | None = None,
    buckets: int = DEFAULT_BUCKETS,
) -> list[dict[str, Any]]:
    """The versions of one row (primary-key JSON `pk`) in ordering-key order, optionally within [since, until].

    Each has full `before` (null for an insert) and `after` (null for a delete) images.
    """
    digest = values.row_hash(database, table, pk)
    bucket = int(digest[:4], 16) % buckets
    filters: list[tuple[str, str, Any]] = [
        ("database", "=", database),
        ("table", "=", table),
        ("bucket", "=", bucket),
        ("pk_hash", "=", digest),
    ]
    if since is not None:
        filters.append(("ts", ">=", since))
    if until is not None:
        filters.append(("ts", "<=", until))
    found = DeltaTable(path).to_pyarrow_table(columns=COLUMNS, filters=filters)
    found = found.filter(pc.equal(found["pk"], pk))  # the hash narrows; the key itself decides
    versions = sorted(found.to_pylist(), key=lambda r: r["order_key"])
    for version in versions:
        if version["type"] == "update":
            version["before"] = values.before_image(version["after"], version["old"])
        del version["old"]
    return versions


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table, one version per line."""
    head = ["order_key", "time (UTC)", "type", "position", "gtid", "before", "after"]
    lines = [head]
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["ts"], datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        position = f"{r['binlog_file']}:{r['event_pos']}"
        lines.append(
            [str(r["order_key"]), when, r["type"], position, r["gtid"] or "", r["before"] or "", r["after"] or ""]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)
