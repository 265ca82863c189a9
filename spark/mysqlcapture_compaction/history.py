"""Seed 003's question: every version of one row, by table, primary key and time, read from the history index.

Reads with delta-rs and pyarrow (no JVM): `history_files` picks, from the Delta log alone, the files of the
(database, table, bucket) partition whose pk_hash and ts statistics can match; only those are opened. Then one
line per version with its before and after images.
"""

from __future__ import annotations

import datetime
import json
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
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


def bucket_of(digest: str, buckets: int) -> int:
    """The history partition of a pk_hash (transforms.bucket, in Python)."""
    return int(digest[:4], 16) % buckets


def history_files(
    table: DeltaTable,
    *,
    database: str,
    name: str,
    digest: str,
    since: int | None = None,
    until: int | None = None,
    buckets: int = DEFAULT_BUCKETS,
) -> list[str]:
    """The data files that can hold versions of the row `digest` in [since, until]: its partition's files whose
    pk_hash and ts min/max statistics admit it (the Delta log's add actions; no data file is opened)."""
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    bucket = str(bucket_of(digest, buckets))

    def admits(a: dict[str, Any]) -> bool:
        parts = (str(a.get("partition.database")), str(a.get("partition.table")), str(a.get("partition.bucket")))
        if parts != (database, name, bucket):
            return False
        low, high = a.get("min.pk_hash"), a.get("max.pk_hash")
        if low is not None and high is not None and not low <= digest <= high:
            return False
        first, last = a.get("min.ts"), a.get("max.ts")
        if since is not None and last is not None and last < since:
            return False
        return not (until is not None and first is not None and first > until)

    root = table.table_uri.removeprefix("file://").rstrip("/")
    return sorted(f"{root}/{unquote(a['path'])}" for a in actions if admits(a))


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
    files = history_files(
        DeltaTable(path), database=database, name=table, digest=digest, since=since, until=until, buckets=buckets
    )
    if not files:
        return []
    found = pq.read_table(files, columns=COLUMNS, filters=[("pk_hash", "=", digest)], partitioning=None)
    found = found.filter(pc.equal(found["pk"], pk))  # the hash narrows; the key itself decides
    if since is not None:
        found = found.filter(pc.greater_equal(found["ts"], since))
    if until is not None:
        found = found.filter(pc.less_equal(found["ts"], until))
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
