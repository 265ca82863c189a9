"""Runs a snapshot job between two transactions of the stream, chunk by chunk, each chunk checkpointed.

Where the rows go: every chunk is inserted at the engine's current boundary (the reader thread
stops reading the binlog meanwhile; its connection stays open and the stream continues right after),
with the job's progress in the chunk's position. A table's events are `bootstrap-start`, one
`bootstrap-insert` per row, `bootstrap-complete` (Maxwell's types); a consumer replaces the table's
rows with the bootstrap-inserts that follow bootstrap-start, treating each as an upsert.

Why the result is exact. A view is read only once the stream stands at its frontier F
(`control.SnapshotControl.due`): the stream has delivered every transaction before F and none after.

* The initial snapshot opens its view first and starts the stream at F: every row is in its state at
  F, and the stream carries exactly the transactions after F. Nothing lost, nothing twice.
* A re-snapshot on request, or one resumed after the worker died mid-table, opens a new view at F
  and lets the stream run up to F before reading. Rows committed before the crash came from the old
  view at the old frontier F0 and were followed by the stream's events in (F0, F]; the rest come from
  the new view at F. Every binlog event sets or removes whole rows by key (an update moving a key
  removes the old key, sets the new), so the last event touching a key decides its state: a key
  changed in (F0, F] ends as that change left it (the state the new view reads too), a key not
  changed there has the same state at F0 and F. A table read by a full scan (no key to resume after)
  starts again with a new bootstrap-start, which discards what the first attempt sent.
* The schema the rows are rendered with is the stream's at F, the view's own: a DDL before F has been
  applied, so a SELECT never names a column the view's table lacks.
* A DDL after F on a table not yet read makes the view unable to read it (MySQL and MariaDB answer
  1412 "Table definition has changed", or 1054/1146 for a dropped column or table): `ViewOutdated`.
  The table starts again from a new view opened after the change, once the stream has applied it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from hashlib import blake2b as _hash
from typing import Any

import pyarrow as pa
import pymysql
from mysqlcapture_api.schema.model import TableDef

from mysqlcapture_worker.changes import ChangeEvent, EventFactory, RowBatch
from mysqlcapture_worker.column_rules import EXCLUDE
from mysqlcapture_worker.engine import CaptureEngine, Chunk, render
from mysqlcapture_worker.engine.rendering import json_nulls
from mysqlcapture_worker.metrics import WorkerMetrics
from mysqlcapture_worker.positions import SnapshotJob
from mysqlcapture_worker.snapshot.fast import Rendered, rendered_columns, text_renderer
from mysqlcapture_worker.snapshot.progress import Progress
from mysqlcapture_worker.snapshot.reader import KeyPlan, RawRow, SnapshotView, key_plan
from mysqlcapture_worker.snapshot.text_values import compile_row_converter
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)


class SnapshotStopped(Exception):
    """The worker is stopping: the snapshot resumes from its last committed chunk next time."""


# What a consistent-read view answers for a table whose definition changed after it opened.
_CHANGED_SINCE_VIEW = frozenset({1412, 1054, 1146})  # table definition changed, unknown column, no such table


class ViewOutdated(Exception):
    """A table changed after the view opened: the view cannot read it; a view opened after the change must."""

    def __init__(self, table: tuple[str, str], error: pymysql.err.MySQLError) -> None:
        super().__init__(f"{table[0]}.{table[1]}: {error.args[-1]}")
        self.table = table


class Snapshotter:
    """Reads snapshot jobs into the stream of chunks (reader thread)."""

    def __init__(
        self,
        *,
        connect: Callable[..., pymysql.connections.Connection],
        dialect: Dialect,
        metrics: WorkerMetrics,
        chunk_rows: int,
        clock: Callable[[], float] = time.time,
        progress: Progress | None = None,
    ) -> None:
        """Reads one table without a key from a view (`run`); `running` is the job the worker is reading."""
        self.connect = connect
        self.dialect = dialect
        self.metrics = metrics
        self.chunk_rows = max(1, chunk_rows)
        self.clock = clock
        self.progress = progress or Progress(metrics)
        self.running: SnapshotJob | None = None

    def open_view(self, fence: Callable[[], int] | None = None) -> SnapshotView:
        return SnapshotView.open(self.connect, dialect=self.dialect, clock=self.clock, fence=fence)

    def percent(self) -> float | None:
        """Overall progress of the running job (tables done plus the current table's share), or None."""
        job = self.running
        if job is None or not job.tables:
            return None
        done = job.index + sum(1 for a in job.ahead if a.complete)
        share = sum(self.progress.share(t) for t in self.progress.active)
        return round(min(100.0, 100.0 * (done + share) / len(job.tables)), 1)

    def run(
        self,
        engine: CaptureEngine,
        job: SnapshotJob,
        put: Callable[[Chunk], None],
        stop: threading.Event,
        view: SnapshotView,
    ) -> SnapshotJob:
        """Read the job's current table from `view` to its end, handing chunks to `put`; the job after it.

        Raises SnapshotStopped when `stop` is set, ViewOutdated when the table changed after the view opened.
        """
        assert engine.between_transactions
        try:
            try:
                return self._table(engine, job, view, put, stop)
            except pymysql.err.MySQLError as exc:
                if exc.args and exc.args[0] in _CHANGED_SINCE_VIEW:
                    raise ViewOutdated(job.table, exc) from exc
                raise
        finally:
            view.close()

    def _table(
        self,
        engine: CaptureEngine,
        job: SnapshotJob,
        view: SnapshotView,
        put: Callable[[Chunk], None],
        stop: threading.Event,
    ) -> SnapshotJob:
        db, name = job.table
        table = engine.schema.current.table(db, name)
        if table is None:
            log.warning("snapshot: table %s.%s no longer exists, skipped", db, name)
            job = job.next_table()
            put(engine.insert([], None if job.done else job.to_json()))
            return job
        build = EventBuilder(engine, table, ts=int(view.started), json_text=self.dialect.version.flavor == "mariadb")
        plan = key_plan(table, build.converter, view.unique_keys(db, name), avoid=build.unsealed_key_columns())
        label = f"{db}.{name}"
        if plan.kind == "none":
            log.warning(
                "snapshot of %s: no primary key and no unique key of NOT NULL columns, reading it in one scan; "
                "an interrupted scan starts the table again",
                label,
            )
            if job.started:
                job = job.restart_table()
        elif plan.kind == "unique":
            log.info("snapshot of %s: no primary key, chunking by unique key (%s)", label, ", ".join(plan.key))
        log.info("snapshot of %s: %s path", label, "compiled text" if build.text is not None else "reference")
        if not job.started:
            job = job.start_table()
            put(engine.insert([build.marker("bootstrap-start")], job.to_json()))
        self.progress.begin(label, estimated=view.estimate_rows(db, name), done=job.rows, chunk_rows=self.chunk_rows)
        if plan.kind == "none":
            try:
                for fetched in build.scan(view, plan, self.chunk_rows):
                    job = self._chunk(engine, job, fetched, put, stop)
            except CompiledScanFailed as exc:
                # What was sent is discarded by a new bootstrap-start; the reference path reads it all again.
                log.warning("snapshot of %s: compiled text path failed (%s), scanning it again on the reference "
                            "path", label, exc)  # fmt: skip
                build.text = None
                job = job.restart_table().start_table()
                put(engine.insert([build.marker("bootstrap-start")], job.to_json()))
                self.progress.begin(label, estimated=view.estimate_rows(db, name), done=0, chunk_rows=self.chunk_rows)
                for fetched in build.scan(view, plan, self.chunk_rows):
                    job = self._chunk(engine, job, fetched, put, stop)
        else:
            # The next chunk is read (the server works, the GIL is free) while this one is put.
            with ThreadPoolExecutor(1, thread_name_prefix="snapshot-read") as prefetch:
                reading = prefetch.submit(build.fetch, view, plan, job.last, self.chunk_rows)
                while True:
                    fetched = reading.result()
                    if fetched.rows == self.chunk_rows:
                        reading = prefetch.submit(build.fetch, view, plan, fetched.last, self.chunk_rows)
                    if fetched.rows:
                        job = self._chunk(engine, job, fetched, put, stop)
                    if fetched.rows < self.chunk_rows:
                        break
        job = job.next_table()
        put(engine.insert([build.marker("bootstrap-complete")], None if job.done else job.to_json()))
        self.progress.finish(label)
        return job

    def _chunk(
        self,
        engine: CaptureEngine,
        job: SnapshotJob,
        fetched: Fetched,
        put: Callable[[Chunk], None],
        stop: threading.Event,
    ) -> SnapshotJob:
        if stop.is_set():
            raise SnapshotStopped()
        job = job.advance(fetched.last, fetched.rows)
        put(engine.insert([fetched.batch], job.to_json()))
        self.progress.add(".".join(job.table), fetched.rows)
        return job


class CompiledScanFailed(Exception):
    """A value of a full scan could not be rendered by the compiled path (the connection is still in step)."""


@dataclass(frozen=True)
class Fetched:
    """One chunk: its row count, its bootstrap-inserts, the key it ends at (None for a scan)."""

    rows: int
    batch: RowBatch
    last: tuple[Any, ...] | None


class EventBuilder:
    """bootstrap-* events of one table, at the engine's current boundary."""

    def __init__(self, engine: CaptureEngine, table: TableDef, *, ts: int, json_text: bool) -> None:
        pos = engine.position
        self.db, self.table, self.ts = table.database, table.name, ts
        # Every bootstrap row sits at the boundary the stream stands at: its file, and that position as both the
        # transaction's start and the event's.
        self.server_id, self.file, self.pos = pos.server_id, pos.coordinate.file, pos.coordinate.pos
        self.make = EventFactory.snapshot(server_id=self.server_id, binlog_file=self.file, binlog_pos=self.pos, ts=ts)
        # spec.columns: the compiled path applies them as it renders each row, the reference path after (`_reference`).
        columns = engine.filter.columns
        self.rules = columns.for_table(table) if columns is not None else None
        self.left_out = left_out = frozenset(
            name.lower() for name, a in (self.rules.actions.items() if self.rules else ()) if a.kind == EXCLUDE
        )
        plain = compile_row_converter(table, pack=False, json_text=json_text, left_out=left_out)
        lowered = [n.lower() for n in plain.names]
        self.pk_columns = table.primary_key
        self.pk_names = tuple(plain.names[lowered.index(c.lower())] for c in table.primary_key)
        # The compiled path reads plain columns off the wire; the reference path reads packed rows when it can.
        redactor = self.rules.native if self.rules is not None else None
        self.text = text_renderer(plain, self.pk_names, redactor, key_hashes=engine.key_hashes)
        self.converter = (
            plain if self.text is not None else compile_row_converter(table, json_text=json_text, left_out=left_out)
        )

    def unsealed_key_columns(self) -> frozenset[str]:
        """Ruled columns (spec.columns) a chunking key must not use, lower-case names: excluded ones, which are not
        read (selected as NULL); and the others unless a hash key seals the checkpoints that hold a chunk's key values
        (positions.KeySeal): without it they would be written as they are."""
        if self.rules is None or self.rules.rules.spec.hash is not None:
            return self.left_out
        return frozenset(name.lower() for name in self.rules.actions)

    def fetch(self, view: SnapshotView, plan: KeyPlan, after: tuple[Any, ...] | None, limit: int) -> Fetched:
        """The chunk after the key `after`, on the compiled path when the table has one."""
        n, rendered, last = self.fetch_range(view, plan, after, None, limit)
        return Fetched(n, self.batch(rendered), last)

    def marker(self, kind: str) -> ChangeEvent:
        return self.make.bootstrap(database=self.db, table=self.table, type=kind)

    def _factory(self, engine: CaptureEngine, ts: int) -> EventFactory:
        pos = engine.position
        return EventFactory.snapshot(
            server_id=pos.server_id, binlog_file=pos.coordinate.file, binlog_pos=pos.coordinate.pos, ts=ts
        )

    def marker_at(self, engine: CaptureEngine, kind: str) -> ChangeEvent:
        """A bootstrap marker at the engine's current boundary."""
        return self._factory(engine, self.ts).bootstrap(database=self.db, table=self.table, type=kind)

    def batch_at(self, engine: CaptureEngine, rendered: Rendered, *, ts: int) -> RowBatch:
        """A read's bootstrap-inserts at the engine's current boundary (where a parallel read is put in)."""
        return self._inserts_by(self._factory(engine, ts), rendered)

    def fetch_range(
        self, view: SnapshotView, plan: KeyPlan, after: tuple[Any, ...] | None, upto: tuple[Any, ...] | None, limit: int
    ) -> tuple[int, Rendered, tuple[Any, ...] | None]:
        """The rows with keys in (after, upto], at most `limit`: (count, rendered, the last key read)."""
        if self.text is not None:
            reader = view.read_rendered(plan, self.text, after=after, limit=limit, upto=upto)
            try:
                n, rendered = rendered_columns(reader.take())
            except ValueError as exc:  # the reference path converts it, or says what is wrong
                log.warning(
                    "snapshot chunk of %s.%s: compiled text path failed (%s), converting it on the reference path",
                    self.db,
                    self.table,
                    exc,
                )
            else:
                last = reader.last_row()
                return n, rendered, None if last is None else plan.last_key(tuple(last))
        rows = view.read(plan, after=after, limit=limit, upto=upto)
        if not rows:
            return 0, self._reference([]), None
        return len(rows), self._reference(rows), plan.last_key(self.converter.unpack([rows[-1]])[0])

    def scan(self, view: SnapshotView, plan: KeyPlan, batch: int) -> Iterator[Fetched]:
        """A table without a usable key, in batches of one scan; CompiledScanFailed when the compiled path fails."""
        if self.text is None:
            for rows in view.scan(plan, batch=batch):
                yield Fetched(len(rows), self.inserts(rows), None)
            return
        readers = view.scan_rendered(plan, self.text, batch=batch)
        for reader in readers:
            try:
                n, rendered = rendered_columns(reader.take())
            except ValueError as exc:
                for _ in readers:  # read the rest of the result set: the view's connection stays usable
                    pass
                raise CompiledScanFailed(str(exc)) from exc
            if n:
                yield Fetched(n, self.batch(rendered), None)

    def inserts(self, rows: list[RawRow]) -> RowBatch:
        """Records read by PyMySQL, converted by the reference path."""
        return self.batch(self._reference(rows))

    def batch(self, rendered: Rendered) -> RowBatch:
        """The chunk's bootstrap-inserts as one columnar batch: the sink makes Arrow of it without per-row work."""
        return self._inserts_by(self.make, rendered)

    def _inserts_by(self, make: EventFactory, rendered: Rendered) -> RowBatch:
        data, pks, hashes, nulls = rendered
        return make.bootstrap_inserts(
            database=self.db,
            table=self.table,
            pk_columns=self.pk_columns,
            data_json=data,
            pk_json=pks,
            pk_hashes=hashes,
            json_null=nulls,
        )

    def _reference(self, rows: list[RawRow]) -> Rendered:
        """(data, primary key, hash, json_null) by the Python converters: the reference the compiled path matches."""
        to_data, pk_names = self.converter.row, self.pk_names
        datas = [to_data(raw) for raw in rows]
        pks = hashes = None
        if pk_names:
            pk_texts = [render([data[n] for n in pk_names]) for data in datas]
            prefix = f"{self.db}\x00{self.table}\x00".encode()
            hashes = pa.array([_hash(prefix + p.encode(), digest_size=8).hexdigest() for p in pk_texts], pa.string())
            pks = pa.array(pk_texts, pa.string())
        rendered = pa.array([render(data) for data in datas], pa.string())
        if self.rules is not None:
            rendered, _, pks, hashes = self.rules.batch(rendered, None, pks, hashes)
        marks = [json_nulls(data, self.rules) for data in datas]
        nulls = pa.array(marks, pa.string()) if any(m is not None for m in marks) else None
        return rendered, pks, hashes, nulls
