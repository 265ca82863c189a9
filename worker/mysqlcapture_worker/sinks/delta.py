"""The default sink: a Delta Lake change log, each commit carrying the checkpoint and an application transaction."""

from __future__ import annotations

import functools
import logging
from array import array
from collections.abc import Callable, Sequence
from itertools import accumulate
from operator import attrgetter
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import (
    ColumnProperties,
    CommitProperties,
    DeltaTable,
    Transaction,
    WriterProperties,
    write_deltalake,
)
from deltalake.exceptions import TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction
from mysqlcapture_api.changelog import (
    CHANGELOG_SCHEMA,
    CHECKPOINT_KEY,
    COLUMNS_KEY,
    PARTITION_BY,
    VERSION_KEY,
    pk_hash,
)

from mysqlcapture_worker.changes import (
    DATA,
    JSON_NULL,
    OLD,
    OLD_JSON_NULL,
    PK_HASH,
    PRIMARY_KEY,
    ChangeEvent,
    Event,
    RowBatch,
    RowTexts,
    split_batches,
)
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.sinks import SinkMismatch
from mysqlcapture_worker.sinks.delta_files import local_root, partitions, write_file

log = logging.getLogger(__name__)

# Snappy (Parquet's usual codec; delta-rs writes uncompressed unless told): a 2.7x smaller change log, and
# less to copy into the page cache than it costs to compress. Columns unique per row skip the dictionary
# (tried on every page, then dropped: ~0.5 us a row); the JSON and SQL texts skip min/max statistics,
# which no reader can use and which cost a comparison of long strings per value.
_UNIQUE = ("order_key", "row_index", "primary_key", "pk_hash")
_TEXTS = ("data", "old", "sql")
_WRITER = WriterProperties(
    compression="SNAPPY",
    column_properties={name: ColumnProperties(dictionary_enabled=False) for name in _UNIQUE}
    | {name: ColumnProperties(dictionary_enabled=False, statistics_enabled="NONE") for name in _TEXTS},
)


_COLUMNS = [
    (f.name, {"primary_key": "pk_json", "data": "data_json", "old": "old_json"}.get(f.name, f.name))
    for f in CHANGELOG_SCHEMA
    if f.name not in ("primary_key_columns", "pk_hash", "absent")
]
_FIELDS = ChangeEvent.__slots__
_GET_FIELDS = attrgetter(*_FIELDS)


@functools.lru_cache(maxsize=4096)
def _columns_json(columns: tuple[str, ...]) -> str:
    return orjson.dumps(list(columns)).decode()


def events_to_arrow(events: Sequence[Event]) -> pa.Table:
    """The change-log rows of `events`: single events row by row, the fast path's batches column by column."""
    singles, batches = split_batches(events)
    if not batches:
        return _singles_to_arrow(singles)
    if not singles:
        return _batches_to_arrow(batches)
    runs = _runs(events)
    if runs is not None:  # a few runs already in key order (a snapshot's markers around its batches): no sort
        parts = [split_batches(run) for run in runs]
        return pa.concat_tables([_batches_to_arrow(b) if b else _singles_to_arrow(s) for s, b in parts])
    return pa.concat_tables([_singles_to_arrow(singles), _batches_to_arrow(batches)]).sort_by("order_key")


def _runs(events: Sequence[Event], most: int = 8) -> list[list[Event]] | None:
    """`events` as runs of single events and of batches when there are at most `most` runs and their
    ordering keys go up from run to run (so the runs' tables concatenate in order), else None."""
    runs: list[list[Event]] = []
    last = -1
    for e in events:
        if not runs or (type(e) is RowBatch) != (type(runs[-1][0]) is RowBatch):
            if len(runs) == most:
                return None
            runs.append([])
        if e.order_key <= last:
            return None
        last = e.order_key + len(e) - 1 if type(e) is RowBatch else e.order_key
        runs[-1].append(e)
    return runs


def _singles_to_arrow(events: list[ChangeEvent]) -> pa.Table:
    """Column-wise conversion, all per-row work in C.

    One pass over the events (attrgetter of every field, then a transpose) touches each event once: with
    hundreds of thousands of events per commit, one pass per column was bound by cache misses.
    """
    columns = dict(zip(_FIELDS, zip(*map(_GET_FIELDS, events), strict=True), strict=True)) if events else {}

    def column(name: str) -> Sequence[Any]:
        return columns.get(name, ())

    pks = column("pk_json")
    hashes: Sequence[str | None] = column("pk_hash_hex")  # set by the compiled fast path
    if hashes.count(None) != pks.count(None):  # the reference path's events are hashed here
        hashes = [
            h if h is not None or p is None else pk_hash(e.database, e.table or "", p)
            for h, p, e in zip(hashes, pks, events, strict=True)
        ]
    cols: dict[str, Sequence[Any]] = {name: column(attr) for name, attr in _COLUMNS}
    cols["primary_key_columns"] = [
        _columns_json(c) if p is not None else None for c, p in zip(column("pk_columns"), pks, strict=True)
    ]
    cols["pk_hash"] = hashes
    cols["absent"] = [list(a) if a is not None else None for a in column("absent")]
    return pa.Table.from_pydict(cols, schema=CHANGELOG_SCHEMA)


# Fields a batch shares between its rows: one value per batch, run-end decoded over its rows.
_PER_BATCH = ("server_id", "gtid", "binlog_file", "binlog_pos", "event_pos", "xid", "ts", "thread_id", "type")
_arange = pa.array([], pa.int64())

SMALL_BATCH_ROWS = 256
"""A commit's per-row texts (data, old, primary key, its hash) are joined into one Arrow array when its batches hold
fewer rows than this on average, and written batch by batch (no copy) otherwise: PyArrow's Parquet writer costs per
chunk. Measured on 50,000 rows of four text columns: in batches of one row 1.0 s written as they are, 0.13 s joined
first; of 30 rows (a rows event of bench.events) 0.22 s and 0.08 s; of 300 rows 0.03 s and 0.06 s."""


def _counting(n: int) -> pa.Array:
    """0, 1, ..., n - 1: built only when a commit is larger than any before it, through a C array (`pa.array` of
    a range converts Python ints one by one: 0.5 s for 200,000)."""
    global _arange
    if len(_arange) < n:
        size = max(n, 2 * len(_arange))
        _arange = pa.Array.from_buffers(pa.int64(), size, [None, pa.py_buffer(array("q", range(size)))])
    return _arange.slice(0, n)


def _batches_to_arrow(batches: list[RowBatch]) -> pa.Table:
    """Batches to change-log rows with no Python object per row: per-row texts go to Arrow batch by batch, or
    joined into one array when the batches are small (SMALL_BATCH_ROWS); each shared field is one value per batch,
    run-end decoded over the batch's rows."""
    lengths = [len(b) for b in batches]
    total = sum(lengths)
    ends = pa.array(list(accumulate(lengths)), pa.int64())
    starts = [end - n for end, n in zip(accumulate(lengths), lengths, strict=True)]

    def spread(values: list[Any], kind: pa.DataType) -> pa.Array:
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, pa.array(values, kind)))

    def counting_from(firsts: list[int]) -> pa.Array:
        return pc.add(spread([f - s for f, s in zip(firsts, starts, strict=True)], pa.int64()), _counting(total))

    texts = [b.texts for b in batches]

    def per_row(i: int) -> pa.Array | pa.ChunkedArray:
        if all(t.parts(i) is None for t in texts):
            return pa.nulls(total, pa.string())
        if len(texts) > 1 and total < SMALL_BATCH_ROWS * len(texts) and (joined := _joined(texts, i)) is not None:
            return joined  # one copy: the Parquet writer's cost is per chunk, not per row
        arrays = [t.column(i) for t in texts]
        parts = [v if v is not None else pa.nulls(n, pa.string()) for v, n in zip(arrays, lengths, strict=True)]
        return pa.chunked_array(parts, pa.string()) if len(parts) > 1 else parts[0]  # no copy: written chunk by chunk

    # Only the last row of a batch can end its transaction.
    commit_ends: list[int] = []
    commit_values: list[bool] = []
    for end, n, b in zip(accumulate(lengths), lengths, batches, strict=True):
        if n > 1:
            commit_ends.append(end - 1)
            commit_values.append(False)
        commit_ends.append(end)
        commit_values.append(b.commit)
    arrays = {
        name: spread([getattr(b, name) for b in batches], CHANGELOG_SCHEMA.field(name).type) for name in _PER_BATCH
    }
    arrays |= {
        "database": spread([b.database for b in batches], pa.string()),
        "table": spread([b.table for b in batches], pa.string()),
        "primary_key_columns": spread([_columns_json(b.pk_columns) if b.keyed else None for b in batches], pa.string()),
        "order_key": counting_from([b.order_key for b in batches]),
        "row_index": _row_indexes(batches, starts, total, spread),
        "commit": pc.run_end_decode(
            pa.RunEndEncodedArray.from_arrays(pa.array(commit_ends, pa.int64()), pa.array(commit_values, pa.bool_()))
        ),
        "primary_key": per_row(PRIMARY_KEY),
        "pk_hash": per_row(PK_HASH),
        "data": per_row(DATA),
        "old": per_row(OLD),
        "sql": pa.nulls(total, pa.string()),
        "absent": pa.nulls(total, CHANGELOG_SCHEMA.field("absent").type),  # the fast path renders whole images
        "json_null": per_row(JSON_NULL),
        "old_json_null": per_row(OLD_JSON_NULL),
    }
    return pa.Table.from_arrays([arrays[f.name] for f in CHANGELOG_SCHEMA], schema=CHANGELOG_SCHEMA)


def _joined(texts: list[RowTexts], i: int) -> pa.StringArray | None:
    """Column `i` of every batch as one array (a batch without it: nulls), None past an Arrow string column's 2 GiB."""
    from mysqlcapture_native import join_texts

    try:
        values, offsets, validity, nulls = join_texts([(t.parts(i), t.rows) for t in texts])
    except ValueError:
        return None
    rows = len(memoryview(offsets)) // 4 - 1
    valid = None if validity is None else pa.py_buffer(validity)
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(values), valid, nulls)


def _row_indexes(
    batches: list[RowBatch], starts: list[int], total: int, spread: Callable[[list[Any], pa.DataType], pa.Array]
) -> pa.Array:
    """Each row's index: the batch's first plus its position times the batch's step (-1 for a snapshot's rows)."""
    steps = [b.row_step for b in batches]
    firsts = spread([b.row_index - s * st for b, s, st in zip(batches, starts, steps, strict=True)], pa.int64())
    if all(st == 1 for st in steps):
        return pc.add(firsts, _counting(total))
    return pc.add(firsts, pc.multiply(spread(steps, pa.int64()), _counting(total)))


class DeltaSink:
    """Appends to one Delta table partitioned by database and table.

    Exactly-once: every commit holds the events, the checkpoint (commit metadata) and a Delta
    application transaction `(app_id, n)`. A crash before the commit loses the batch, which the
    worker re-reads from the previous checkpoint; a crash after it leaves a checkpoint that already
    covers the batch. Either way nothing is written twice.
    """

    def __init__(
        self,
        uri: str,
        *,
        app_id: str,
        storage_options: dict[str, str] | None = None,
        column_rules: str | None = None,
        hashed: bool = False,
    ) -> None:
        """`column_rules`: spec.columns as every commit records them (`columns.to_property`; "" for none, None for a
        sink that only reads the checkpoint), for compaction to type ruled columns by. `hashed`: the capture hashes
        columns (spec.columns.hash); its JSON texts are written with zstd instead of Snappy (`delta_files`)."""
        self.uri = uri
        self.column_rules = column_rules
        self._entropy = _TEXTS[:2] if hashed else ()
        self.app_id = app_id
        self.storage_options = storage_options or None
        self._commit_no: int | None = None
        self._evolve = False  # a change log written before a column was added: the next commit adds it
        self._root = local_root(uri, storage_options)  # local: commits write their own files (`delta_files`)
        self._open: DeltaTable | None = None  # the table as of our last commit, for the next one

    def _table(self) -> DeltaTable | None:
        try:
            return DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None

    def load_checkpoint(self) -> Position | None:
        table = self._table()
        if table is None:
            self._commit_no = 0
            return None
        have = {f.name for f in table.schema().fields}
        self._evolve = any(f.name not in have for f in CHANGELOG_SCHEMA)
        version = table.transaction_version(self.app_id)
        if version is None:
            if table.file_uris():  # rows this capture never committed: another capture's, or a table put in its place
                raise SinkMismatch(
                    f"change log {self.uri} holds data but no checkpoint of this capture (application transaction "
                    f"{self.app_id}): it is another capture's, or it was replaced. Point spec.sink.delta.uri at this "
                    "capture's own change log, or at an empty location to start the capture over; nothing was written"
                )
            self._commit_no = 0
            return None
        self._commit_no = int(version)
        wanted = str(version)
        # Our commit is normally the newest; compaction commits (OPTIMIZE, VACUUM) may sit above it.
        limit = 16
        while True:
            history = table.history(limit)
            for entry in history:
                if entry.get(VERSION_KEY) == wanted and CHECKPOINT_KEY in entry:
                    return Position.from_json(entry[CHECKPOINT_KEY])
            if len(history) < limit:
                break
            limit *= 4
        raise RuntimeError(
            f"change log {self.uri} records application transaction {self.app_id}={version} but no commit "
            "carries its checkpoint; the Delta log was edited or truncated"
        )

    def commit(self, events: Sequence[Event], position: Position) -> None:
        if self._commit_no is None:
            self.load_checkpoint()
        assert self._commit_no is not None
        number = self._commit_no + 1
        metadata = {CHECKPOINT_KEY: position.to_json(), VERSION_KEY: str(number)}
        if self.column_rules is not None:
            metadata[COLUMNS_KEY] = self.column_rules
        props = CommitProperties(
            custom_metadata=metadata,
            app_transactions=[Transaction(self.app_id, number)],
        )
        rows = events_to_arrow(events)
        if not self._append_files(rows, props):
            write_deltalake(
                self.uri,
                rows,
                mode="append",
                partition_by=PARTITION_BY,
                storage_options=self.storage_options,
                commit_properties=props,
                writer_properties=_WRITER,
                schema_mode="merge" if self._evolve else None,
            )
            self._open = None
        self._commit_no = number
        self._evolve = False

    def _append_files(self, rows: pa.Table, props: CommitProperties) -> bool:
        """Commit `rows` as files written here (`delta_files`); False when they must go through delta-rs's
        writer instead: a remote store, the table's first commit, a schema to evolve, a name to escape."""
        if self._root is None or self._evolve:
            return False
        if self._open is None:
            self._open = self._table()
            if self._open is None or [f.name for f in self._open.schema().fields] != CHANGELOG_SCHEMA.names:
                self._open = None
                return False
        parts = partitions(rows, (str(PARTITION_BY[0]), str(PARTITION_BY[1])))
        if parts is None:
            return False
        actions: list[AddAction | RemoveAction] = [
            write_file(self._root, part, body, plain=_UNIQUE + _TEXTS, unstated=_TEXTS, entropy=self._entropy)
            for part, body in parts
        ]
        try:
            self._open.create_write_transaction(
                actions,
                "append",
                CHANGELOG_SCHEMA,
                partition_by=[str(c) for c in PARTITION_BY],
                commit_properties=props,
            )
            self._open.update_incremental()
        except Exception:
            self._open = None  # read the table anew next time
            raise
        return True

    def close(self) -> None:
        return None
