"""A table's (or one row's) state at a time T, from its history: each key's newest version at or before T.

A key's newest version is its row's image after that change, unless it was a delete or took the row to another
key (then the key held no row at T). A table without a primary key is replayed as the multiset of its rows
(multiset.py's rule: an update or a delete changes one row equal to its before image); a snapshot of it starts
the multiset afresh. Times are the binlog events' own (whole seconds): "at T" includes every change made during
second T.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from mysqlcapture_api.changelog import Col

from mysqlcapture_compaction import history
from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.transforms import MOVED_AWAY, PK


def _newest_per_key(found: pa.Table) -> pa.Table:
    """Each key's newest version (`found` sorted by key, then ordering key)."""
    keys = found[PK].combine_chunks()
    n = len(keys)
    if n == 0:
        return found
    later = pa.concat_arrays([keys.slice(1), pa.array([None], pa.string())])
    last = pc.fill_null(pc.not_equal(keys, later), True)
    return found.filter(last)


def keyed_state(output: str, database: str, table: str, at: int, pk: str | None) -> pa.Array:
    """The rows of a keyed table (or the row `pk`) at `at`, in key order, as typed images (a struct array)."""
    query = history.Query(database, table, pk=pk, until=at, moves_twice=True, newest_first=False)
    found = history.select(output, query).table()
    found = found.filter(pc.is_valid(found[PK])) if found.num_rows else found
    if found.num_rows == 0:
        return pa.array([], pa.struct([]))
    found = found.sort_by([(PK, "ascending"), (Col.ORDER_KEY, "ascending"), (MOVED_AWAY, "ascending")])
    newest = _newest_per_key(found)
    alive = newest.filter(pc.and_(pc.not_equal(newest[Col.TYPE], "delete"), pc.invert(newest[MOVED_AWAY])))
    keys = [orjson.loads(k) for k in alive[PK].to_pylist()]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return alive["after"].combine_chunks().take(pa.array(order, pa.int64()))


def _identity(image: dict[str, Any] | None) -> bytes:
    shown = dict(image or {})
    if isinstance(shown.get(RAW), list):
        shown[RAW] = sorted(shown[RAW])
    return orjson.dumps(shown, default=str, option=orjson.OPT_SORT_KEYS)


def keyless_state(output: str, database: str, table: str, at: int, snapshots: list[int]) -> pa.Array:
    """The rows of a table without a primary key at `at` (the multiset replayed; `snapshots`: the ordering keys
    of its snapshots' starts, each of which starts it afresh)."""
    query = history.Query(database, table, keyless=True, until=at, newest_first=False)
    found = history.select(output, query).table()
    versions = found.to_pylist()
    rows: Counter[bytes] = Counter()
    images: dict[bytes, dict[str, Any]] = {}
    starts = sorted(s for s in snapshots)
    for v in versions:
        while starts and starts[0] < v[Col.ORDER_KEY]:
            starts.pop(0)
            rows.clear()
        if v[Col.TYPE] in ("update", "delete") and v["before"] is not None:
            gone = _identity(v["before"])
            if rows[gone] > 0:
                rows[gone] -= 1
        if v[Col.TYPE] in ("insert", "update", "bootstrap-insert") and v["after"] is not None:
            came = _identity(v["after"])
            rows[came] += 1
            images[came] = v["after"]
    out = []
    for identity in sorted(rows):
        out += [images[identity]] * rows[identity]
    kind = found.schema.field("after").type if found.num_rows else pa.struct([])
    return pa.array(out, kind)
