"""Row versions out of the tables' typed histories, by table, key, time, type, GTID, changed column and value.

Each table's history (<output>/history/<database>/<table>) holds one row per version: the change's metadata and
its `before` and `after` images as structs of the table's Spark types. Reads with delta-rs and pyarrow (no JVM):
`history_files` picks, from the Delta log alone, the files whose pk_hash and ts statistics can match (each
write spreads a table's versions over files of disjoint pk_hash ranges); only those are opened, and in them
only the row groups whose statistics admit the key, window, type or GTID (Parquet's own statistics).
"""

from __future__ import annotations

import datetime
import json
from array import array
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable
from mysqlcapture_api.changelog import Col

from mysqlcapture_compaction import values
from mysqlcapture_compaction.history_where import Predicate
from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.output import history_tables
from mysqlcapture_compaction.targets import Target
from mysqlcapture_compaction.transforms import MOVED_AWAY, PK

# A history version's columns read back: the change-log columns it carries, then its own.
COLUMNS = [
    Col.ORDER_KEY,
    Col.TYPE,
    Col.TS,
    Col.GTID,
    Col.BINLOG_FILE,
    Col.EVENT_POS,
    Col.THREAD_ID,
    Col.XID,
    PK,
    MOVED_AWAY,
    "before",
    "after",
]
# Columns a history written before they were kept lacks (read as nulls).
_LATER = {Col.THREAD_ID: pa.int64(), Col.XID: pa.int64()}
# What `--type` may name: a change, or a snapshot's read of a row (not a change: the row was there).
VERSION_TYPES = ("insert", "update", "delete", "bootstrap-insert")


def pk_json(parts: list[str]) -> str:
    """`--pk` values as the worker renders `primary_key`: a JSON array; numbers stay numbers.

    One argument that is itself a JSON array is taken as the whole key.
    """
    if len(parts) == 1 and parts[0].lstrip().startswith("["):
        try:
            whole = json.loads(parts[0])
        except ValueError as exc:
            raise ValueError(f"--pk {parts[0]}: not a JSON array ({exc})") from exc
        if not isinstance(whole, list):
            raise ValueError(f"--pk {parts[0]}: not a JSON array")
        return orjson.dumps(whole).decode()
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
    any_key: bool = False,
) -> list[str]:
    """The data files of a table's history that can hold versions of the row `digest` in [since, until]: those
    whose pk_hash and ts min/max statistics admit it (the Delta log; no data file is opened). With `digest`
    None: the files that can hold versions listed under no key (a table matched by value: multiset.py); with
    `any_key`: those that can hold any version in the window."""
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()

    def admits(a: dict[str, Any]) -> bool:
        low, high = a.get(f"min.{Col.PK_HASH}"), a.get(f"max.{Col.PK_HASH}")
        if not any_key:
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


@dataclass(frozen=True)
class Query:
    """Which versions to list. `table` None (with `gtid`): every table of the capture. `pk`: one row's key (JSON
    array); `keyless`: the versions listed under no key (a table without a primary key)."""

    database: str | None = None
    table: str | None = None
    pk: str | None = None
    keyless: bool = False
    since: int | None = None
    until: int | None = None
    types: frozenset[str] = frozenset()
    gtid: str | None = None
    changed: str | None = None
    where: Predicate | None = None
    limit: int | None = None
    newest_first: bool = True
    # A primary-key change is listed under both keys; a listing by table shows it once (under its new key).
    moves_twice: bool = False


def _file_filter(query: Query, digest: str | None) -> ds.Expression | None:
    """What Parquet statistics and the scan can decide per version without the images."""
    parts: list[ds.Expression] = []
    if digest is not None:
        parts.append(ds.field(Col.PK_HASH) == digest)
    if query.since is not None:
        parts.append(ds.field(Col.TS) >= query.since)
    if query.until is not None:
        parts.append(ds.field(Col.TS) <= query.until)
    if query.types:
        parts.append(ds.field(Col.TYPE).isin(sorted(query.types)))
    if query.gtid is not None:
        parts.append(ds.field(Col.GTID) == query.gtid)
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


# Spark writes a TIMESTAMP column (an instant) as Parquet INT96, which carries no time zone: read at microseconds
# and made UTC instants again by the Delta schema, which tells them from TIMESTAMP_NTZ (DATETIME) columns.
_PARQUET = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit="us"))
_INSTANT = pa.timestamp("us", tz="UTC")
READERS = 2


def _instants(table: DeltaTable) -> set[str]:
    """The image fields whose Delta type is `timestamp` (an instant, not TIMESTAMP_NTZ)."""
    fields = json.loads(table.schema().to_json())["fields"]
    image = next((f["type"] for f in fields if f["name"] == "after"), None)
    if not isinstance(image, dict):
        return set()
    return {f["name"] for f in image.get("fields", []) if f["type"] == "timestamp"}


def _as_instants(images: pa.ChunkedArray, instants: set[str]) -> pa.ChunkedArray:
    kind = images.type
    assert isinstance(kind, pa.StructType)
    if not any(f.name in instants and f.type != _INSTANT for f in kind):
        return images
    wanted = pa.struct([f.with_type(_INSTANT) if f.name in instants else f for f in kind])
    return images.cast(wanted)


def _read_file(path: str, wanted: ds.Expression | None, instants: set[str]) -> pa.Table:
    """One history file's versions the filter admits, with COLUMNS (those it lacks as nulls)."""
    names = pq.ParquetFile(path).schema_arrow.names
    present = [c for c in COLUMNS if c in names]
    scan = ds.dataset(path, format=_PARQUET).to_table(columns=present, filter=wanted)
    for name, kind in _LATER.items():
        if name not in names:
            scan = scan.append_column(pa.field(name, kind), pa.nulls(scan.num_rows, kind))
    for side in ("before", "after"):
        i = scan.schema.get_field_index(side)
        scan = scan.set_column(i, side, _as_instants(scan[side], instants))
    return scan.select(COLUMNS)


def _read(files: list[str], query: Query, digest: str | None, instants: set[str]) -> pa.Table | None:
    """The versions of `files` the filter admits, one schema for all; files read two at a time (Arrow decodes
    without the GIL: a window over a table's every file reads them all)."""
    wanted = _file_filter(query, digest)
    if not files:
        return None
    if len(files) == 1:
        tables = [_read_file(files[0], wanted, instants)]
    else:
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            tables = list(pool.map(lambda f: _read_file(f, wanted, instants), files))
    return pa.concat_tables(tables, promote_options="permissive")


def _image_field(images: pa.ChunkedArray, name: str) -> pa.ChunkedArray | None:
    kind = images.type
    assert isinstance(kind, pa.StructType)
    if kind.get_field_index(name) < 0:
        return None
    return pc.struct_field(images, name)


def _changed(found: pa.Table, column: str) -> pa.ChunkedArray:
    """Per version: an update whose `column` differs between its images, or an insert or delete (which set or
    remove every column)."""
    before, after = _image_field(found["before"], column), _image_field(found["after"], column)
    kinds = found[Col.TYPE]
    whole = pc.is_in(kinds, pa.array(["insert", "delete", "bootstrap-insert"]))
    if before is None or after is None:
        return whole
    differs = differ(before, after)
    raw_before, raw_after = _image_field(found["before"], RAW), _image_field(found["after"], RAW)
    if raw_before is not None and raw_after is not None:  # a zero date: null, with its text in `_cdc_raw`
        texts = [pc.map_lookup(m, pa.scalar(column), "first") for m in (raw_before, raw_after)]
        differs = pc.or_(differs, differ(*texts))
    return pc.or_(whole, pc.and_(pc.equal(kinds, "update"), differs))


def differ(before: pa.ChunkedArray, after: pa.ChunkedArray) -> pa.ChunkedArray:
    """Per row: the two values differ (null differs from any value, equals null)."""
    if pa.types.is_list(before.type) and pa.types.is_string(before.type.value_type):  # a SET: its members joined
        nulls = pc.not_equal(pc.is_null(before), pc.is_null(after))
        same = pc.equal(pc.binary_join(before, "\x00"), pc.binary_join(after, "\x00"))
        return pc.or_(pc.fill_null(pc.invert(same), False), nulls)
    if pa.types.is_nested(before.type):  # a VECTOR: compared as Python values
        pairs = zip(before.to_pylist(), after.to_pylist(), strict=True)
        return pa.chunked_array([pa.array([b != a for b, a in pairs], pa.bool_())])
    nulls = pc.not_equal(pc.is_null(before), pc.is_null(after))
    return pc.or_(pc.fill_null(pc.not_equal(before, after), False), nulls)


def _narrowed(found: pa.Table, query: Query) -> pa.Table:
    """What the images decide: the key itself (the hash only narrows), a move's second listing, --changed, --where."""
    if query.pk is not None:
        found = found.filter(pc.equal(found[PK], query.pk))
    elif query.keyless:
        found = found.filter(pc.is_null(found[PK]))
    elif not query.moves_twice:
        found = found.filter(pc.invert(found[MOVED_AWAY]))
    if query.changed is not None:
        found = found.filter(_changed(found, query.changed))
    if query.where is not None:
        found = found.filter(query.where.matches(found))
    return found


@dataclass(frozen=True)
class Found:
    """The versions a query picked, one part per table: each part's images have its table's own columns (two
    tables' columns of one name may differ in type, so their images are never merged), each part in output order;
    `order` names the part of each version in output order across them (None: at most one part)."""

    parts: tuple[pa.Table, ...]
    order: tuple[int, ...] | None = None

    @property
    def num_rows(self) -> int:
        return sum(p.num_rows for p in self.parts)

    def in_order(self, per_part: list[list[Any]]) -> list[Any]:
        """Per-version items given part by part (each in its part's order), in output order."""
        if self.order is None:
            return per_part[0] if per_part else []
        each = [iter(items) for items in per_part]
        return [next(each[p]) for p in self.order]

    def rows(self) -> list[dict[str, Any]]:
        """Every version as a dict (images as dicts), in output order."""
        return self.in_order([p.to_pylist() for p in self.parts])

    def table(self) -> pa.Table:
        """The versions of a query of one table (empty, with COLUMNS, when none matched)."""
        assert self.order is None, "versions of several tables have no one table"
        if not self.parts:
            return pa.table({c: pa.array([], pa.null()) for c in [*COLUMNS, "database", "table"]})
        return self.parts[0]


def image_columns(output: str, database: str, table: str) -> list[str] | None:
    """The columns a table's history holds (its image fields), None when it has no history."""
    path = Target(output, database, table).history
    if not DeltaTable.is_deltatable(path):
        return None
    fields = json.loads(DeltaTable(path).schema().to_json())["fields"]
    image = next((f["type"] for f in fields if f["name"] == "after"), None)
    if not isinstance(image, dict):
        return []
    return [f["name"] for f in image.get("fields", []) if f["name"] != RAW]


def _ordered(parts: list[pa.Table], query: Query) -> Found:
    """Parts (one per table) in output order and limited: newest (or oldest) first across them."""
    order = "descending" if query.newest_first else "ascending"
    keys = [(Col.ORDER_KEY, order), (MOVED_AWAY, order)]
    if len(parts) == 1:
        out = parts[0].sort_by(keys)
        return Found((out.slice(0, query.limit) if query.limit is not None else out,))
    meta = pa.concat_tables(
        [
            pa.table(
                {
                    Col.ORDER_KEY: p[Col.ORDER_KEY],
                    MOVED_AWAY: p[MOVED_AWAY],
                    # Through C arrays: `pa.array` of Python ints converts them one by one.
                    "_part": pa.Array.from_buffers(
                        pa.int32(), p.num_rows, [None, pa.py_buffer(array("i", [i]) * p.num_rows)]
                    ),
                    "_row": pa.Array.from_buffers(
                        pa.int64(), p.num_rows, [None, pa.py_buffer(array("q", range(p.num_rows)))]
                    ),
                }
            )
            for i, p in enumerate(parts)
        ]
    ).sort_by(keys)
    if query.limit is not None:
        meta = meta.slice(0, query.limit)
    which = meta["_part"].to_pylist()
    rows = meta["_row"]
    picked = tuple(p.take(rows.filter(pc.equal(meta["_part"], i))) for i, p in enumerate(parts))
    return Found(picked, tuple(which))


def select(output: str, query: Query) -> Found:
    """The versions `query` asks for, ordered (newest or oldest first) and limited, with `database` and `table`
    columns, one part per table (a GTID's versions span tables)."""
    if query.table is not None:
        assert query.database is not None
        places = [(query.database, query.table, Path(Target(output, query.database, query.table).history))]
    else:
        places = [(p.parent.name, p.name, p) for p in history_tables(output)]
    parts = []
    for database, table, path in places:
        if not DeltaTable.is_deltatable(str(path)):
            continue
        digest = None if query.pk is None else values.row_hash(database, table, query.pk)
        delta = DeltaTable(str(path))
        files = history_files(
            delta,
            digest=digest,
            since=query.since,
            until=query.until,
            any_key=query.pk is None and not query.keyless,
        )
        found = _read(files, query, digest, _instants(delta))
        if found is None or found.num_rows == 0:
            continue
        found = _narrowed(found, query)
        if found.num_rows == 0:
            continue
        found = found.append_column("database", pa.array([database] * found.num_rows, pa.string()))
        found = found.append_column("table", pa.array([table] * found.num_rows, pa.string()))
        parts.append(found)
    if not parts:
        return Found(())
    return _ordered(parts, query)


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
    query = Query(database, table, pk=pk, keyless=pk is None, since=since, until=until, newest_first=False)
    return select(output, query).table().to_pylist()


def raw_image(image: dict[str, Any] | None) -> dict[str, Any] | None:
    """An image with its `_cdc_raw` pairs (as pyarrow reads a map) as a dict, None when it has none."""
    if image is None:
        return None
    shown = dict(image)
    if isinstance(shown.get(RAW), list):
        shown[RAW] = dict(shown[RAW])
    return shown
