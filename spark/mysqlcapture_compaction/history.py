"""Every version of one row, by table, primary key and time, read from the table's typed history.

Each table's history (<output>/history/<database>/<table>) holds one row per version: the change's metadata and
its `before` and `after` images as structs of the table's Spark types. Reads with delta-rs and pyarrow (no JVM):
`history_files` picks, from the Delta log alone, the files whose pk_hash and ts statistics can match (each
write spreads a table's versions over files of disjoint pk_hash ranges); only those are opened.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable
from mysqlcapture_api.changelog import Col

from mysqlcapture_compaction import values
from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.targets import Target
from mysqlcapture_compaction.transforms import MOVED_AWAY, PK

# A history version's columns read back: the change-log columns it carries, then its own.
COLUMNS = [Col.ORDER_KEY, Col.TYPE, Col.TS, Col.GTID, Col.BINLOG_FILE, Col.EVENT_POS, PK, MOVED_AWAY, "before", "after"]


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


def history_files(
    table: DeltaTable,
    *,
    digest: str | None,
    since: int | None = None,
    until: int | None = None,
) -> list[str]:
    """The data files of a table's history that can hold versions of the row `digest` in [since, until]: those
    whose pk_hash and ts min/max statistics admit it (the Delta log; no data file is opened). With `digest`
    None: the files that can hold versions listed under no key (a table matched by value: multiset.py)."""
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()

    def admits(a: dict[str, Any]) -> bool:
        low, high = a.get(f"min.{Col.PK_HASH}"), a.get(f"max.{Col.PK_HASH}")
        if digest is None and a.get(f"null_count.{Col.PK_HASH}") == 0:
            return False
        if digest is not None and low is not None and high is not None and not low <= digest <= high:
            return False
        first, last = a.get(f"min.{Col.TS}"), a.get(f"max.{Col.TS}")
        if since is not None and last is not None and last < since:
            return False
        return not (until is not None and first is not None and first > until)

    root = table.table_uri.removeprefix("file://").rstrip("/")
    return sorted(f"{root}/{unquote(a['path'])}" for a in actions if admits(a))


def row_history(
    output: str,
    *,
    database: str,
    table: str,
    pk: str | None,
    since: int | None = None,
    until: int | None = None,
) -> list[dict[str, Any]]:
    """The versions of one row (primary-key JSON `pk`) in ordering-key order, optionally within [since, until];
    with `pk` None, the versions listed under no key (the rows of a table without a primary key: multiset.py).

    Each has its typed `before` (null for an insert) and `after` (null for a delete) images, as dicts.
    """
    path = Target(output, database, table).history
    if not DeltaTable.is_deltatable(path):
        return []
    digest = None if pk is None else values.row_hash(database, table, pk)
    files = history_files(DeltaTable(path), digest=digest, since=since, until=until)
    if not files:
        return []
    if pk is None:
        found = pq.read_table(files, columns=COLUMNS)
        found = found.filter(pc.is_null(found[PK]))
    else:
        found = pq.read_table(files, columns=COLUMNS, filters=[(Col.PK_HASH, "=", digest)])
        found = found.filter(pc.equal(found[PK], pk))  # the hash narrows; the key itself decides
    if since is not None:
        found = found.filter(pc.greater_equal(found[Col.TS], since))
    if until is not None:
        found = found.filter(pc.less_equal(found[Col.TS], until))
    return sorted(found.to_pylist(), key=lambda r: r[Col.ORDER_KEY])


def _plain(value: Any) -> Any:
    """A typed value as JSON can show it: exact decimals and times as text, binary as base64 (as Maxwell)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if not (k == RAW and v is None)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def image_text(image: dict[str, Any] | None) -> str:
    """One image as a JSON line (the map `_cdc_raw`, read by pyarrow as pairs, as an object)."""
    if image is None:
        return ""
    shown = dict(image)
    if isinstance(shown.get(RAW), list):
        shown[RAW] = dict(shown[RAW])
    return json.dumps(_plain(shown), ensure_ascii=False, separators=(",", ":"))


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table, one version per line."""
    head = [Col.ORDER_KEY, "time (UTC)", Col.TYPE, "position", Col.GTID, "before", "after"]
    lines = [head]
    for r in rows:
        when = datetime.datetime.fromtimestamp(r[Col.TS], datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        position = f"{r[Col.BINLOG_FILE]}:{r[Col.EVENT_POS]}"
        lines.append(
            [
                str(r[Col.ORDER_KEY]),
                when,
                r[Col.TYPE],
                position,
                r[Col.GTID] or "",
                image_text(r["before"]),
                image_text(r["after"]),
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)
