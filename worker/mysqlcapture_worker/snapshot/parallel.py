"""Lock-free snapshots of tables with a key: key ranges read in parallel, each merged with its window.

How a table is read. Its `bootstrap-start` goes in at a boundary S of the stream, which from then on
records what every transaction does to the table's keys (`window.WindowLog`). The key space up to the
table's largest key is cut into ranges of `chunk` keys by index-only queries (`LIMIT 1 OFFSET n`:
the server counts, so skewed keys and `_ci` collations give even chunks, and the ranges are the
server's own order). `parallelism` connections read ranges at once, each in a window:

* MariaDB: `START TRANSACTION WITH CONSISTENT SNAPSHOT`, whose read view sits exactly at
  `binlog_snapshot_position` P: the fence F = P. P may be behind the stream's place when the read was asked
  for (its floor, from which the window keeps entries): such a read is read again (`_collect`).
* MySQL: a heartbeat written and committed before the read is the fence F (the read sees every
  transaction before it: a transaction is visible once it commits, and with `binlog_order_commits=ON`
  InnoDB commits in binlog order, so the heartbeat's commit means every transaction before it in the
  binlog has committed). The binlog status read after the read returned is its end E.

A range's rows are put in at the first boundary B of the stream at or after E (MariaDB: P). A row
whose key a transaction starting in [F, B] touched takes that key's last image from the stream (or
goes, when that last change removed the key); every other row is its key's state at B, since nothing
changed it between F and B, and the read saw a state between them. Keys the read did not return but
the stream touched in [F, B] are in the change log already, after the bootstrap-start (F > S). So at B
the change log holds the range's state at B, and the stream goes on from there: nothing lost, nothing
stale after it. A key above the table's largest key when the ranges were cut was created after F > S,
by an event the stream carries. A DDL or TRUNCATE of the table in a window starts the table again (a
new bootstrap-start); a window whose last change to a row is a partial image reads its range again.

Positions are taken with `SHOW BINARY LOG STATUS`, whose trap (a transaction is in the binlog, and
sent to replicas, before a reader sees it) is why the fence is a committed heartbeat and not a
binlog position read before the SELECT.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
import pymysql
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.model import TableDef

from mysqlcapture_worker.engine import CaptureEngine, Chunk
from mysqlcapture_worker.metrics import WorkerMetrics
from mysqlcapture_worker.positions import SnapshotJob
from mysqlcapture_worker.snapshot.fast import Rendered
from mysqlcapture_worker.snapshot.progress import Progress
from mysqlcapture_worker.snapshot.reader import Frontier, KeyPlan, SnapshotView, key_plan, session
from mysqlcapture_worker.snapshot.runner import _CHANGED_SINCE_VIEW, EventBuilder
from mysqlcapture_worker.snapshot.window import Image, Key, Table, WindowLog, hashable, key_of
from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)

Put = Callable[[Chunk], None]
FENCE_AGE = 1.0  # seconds a MySQL fence serves new reads before the next read writes a fresh one
# Statements the server refused as outdated, each after the stream had passed the server's end at the previous
# refusal, before the refusal is the worker's error (a pending DDL is applied by then: this is something else).
MAX_OUTDATED = 20
PARTIAL_WARNING = 20  # reads of one range again because of partial row images before the warning
Order = tuple[int, ...]


@dataclass(frozen=True)
class Range:
    """Keys in (after, upto]; `order` sorts ranges in key order without comparing keys in Python."""

    after: Key | None
    upto: Key | None
    order: Order


@dataclass
class Read:
    """One range as a connection read it, waiting for the stream to pass its end."""

    range: Range
    rows: int
    rendered: Rendered
    covered: Key | None  # the last key read: the range's committed part ends here when the read was cut short
    cut: bool  # the range held more than one chunk: (covered, upto] is read next
    fence: Coordinate | None  # MariaDB: exact; MySQL: resolved from `fence_value` once the stream has passed it
    fence_value: int | None
    until: Coordinate
    ts: int


class Outdated(Exception):
    """The server's table is not the one the stream knows yet (a DDL, RENAME or DROP the stream has not reached):
    the statement is tried again once the stream has passed `end`, the server's binlog end after the refusal."""

    def __init__(self, error: pymysql.err.MySQLError, end: Coordinate) -> None:
        super().__init__(str(error))
        self.error = error
        self.end = end


@dataclass
class _Table:
    """The table being read: its plan, its ranges and the reads in flight."""

    i: int  # its place in the job's tables
    table: Table
    definition: TableDef  # the definition its reads render: a DDL of it starts the table again
    build: EventBuilder
    plan: KeyPlan
    names: tuple[str, ...]  # the key columns as `data` names them
    todo: list[Range] = field(default_factory=list)
    planning: list[tuple[Key | None, Key | None, Order]] = field(default_factory=list)  # segments not cut yet
    flight: dict[Future[Read], Range] = field(default_factory=dict)
    committed: list[tuple[Order, Key | None, Key | None]] = field(default_factory=list)
    retries: dict[Order, int] = field(default_factory=dict)
    end: Key | None = None  # where the planned segments end (the largest key when planned, in the server's order)
    planned: bool = False  # the largest key is known and `planning` holds the segments
    rechecked: bool = False  # every range read, the largest key was read again (`_recheck`)
    tail: tuple[Key | None, int] = (None, -1)  # where the committed ranges end, and the last one's index
    cuts: int = 0  # ranges cut so far (each range's order ends with its number)
    watched_at: float = 0.0  # monotonic time the watch started: fences must be written after it
    floors: dict[Order, Coordinate] = field(default_factory=dict)  # per read in flight: no fence of it is earlier
    estimated: int = 0  # rows, as the server estimates them
    behind: Coordinate | None = None  # the server changed the table past here: nothing is read before the stream is
    outdated: int = 0  # reads the server refused as outdated since the stream last applied a change of the table
    planner: Future[None] | None = None  # the read of its largest key, until `planned`
    cutting: tuple[Future[Key | None], tuple[Key | None, Key | None, Order]] | None = None  # a boundary being read
    smallest: int | None = None  # an integer key's smallest value (cuts by value)
    width: float = 0.0  # an integer key's values per range: `chunk` rows at the density seen so far (0: by the index)

    @property
    def dispatched(self) -> bool:
        """Every range of the table is cut and handed to a connection (or committed)."""
        return self.planned and not self.planning and not self.todo

    @property
    def finished(self) -> bool:
        return self.dispatched and not self.flight


class Fences:
    """MySQL's fence heartbeats: the newest committed, and a fresh one when it is older than FENCE_AGE."""

    def __init__(self, write: Callable[[], int], clock: Callable[[], float] = time.monotonic) -> None:
        self._write = write
        self._clock = clock
        self._lock = threading.Lock()
        self._value: int | None = None
        self._at = 0.0

    @property
    def latest(self) -> int | None:
        """The newest fence written (committed), None before the first."""
        return self._value

    def write_now(self) -> int:
        """A fresh heartbeat, committed when this returns."""
        with self._lock:
            started = self._clock()
            self._value = self._write()
            self._at = started  # (after the write: a write that failed leaves the older fence as old as it is)
            return self._value

    def current(self, *, not_before: float) -> int:
        """A heartbeat committed after `not_before` and less than FENCE_AGE ago (written now when none is)."""
        with self._lock:
            now = self._clock()
            if self._value is None or self._at < not_before or now - self._at > FENCE_AGE:
                started = self._clock()
                self._value = self._write()
                self._at = started
            return self._value


class ParallelSnapshot:
    """Reads the job's current table, when it has a key, in ranges on `parallelism` connections."""

    def __init__(
        self,
        *,
        connect: Callable[..., pymysql.connections.Connection],
        dialect: Dialect,
        metrics: WorkerMetrics,
        window: WindowLog,
        fences: Fences | None,
        parallelism: int,
        chunk_rows: int,
        progress: Progress,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.connect = connect
        self.dialect = dialect
        self.metrics = metrics
        self.window = window
        self.fences = fences
        self.parallelism = max(1, parallelism)
        self.chunk = max(1, chunk_rows)
        self.progress = progress
        self.clock = clock
        self.exact_views = dialect.snapshot_frontier_from_status
        self._pool = ThreadPoolExecutor(self.parallelism + 1, thread_name_prefix="snapshot-read")
        self._local = threading.local()
        self._sessions: list[pymysql.connections.Connection] = []
        self._sessions_lock = threading.Lock()
        self._session_epoch = 0  # moves when the source may have changed (a reconnect): sessions open anew
        self._states: dict[int, _Table] = {}  # the tables being read, by their place in the job
        self._blocked = -1  # a table after the current one that cannot be read ahead (no key, gone): none past it
        self.wake = threading.Event()  # set when a read completes: the idle stream's inserter looks
        self.reached: Coordinate | None = None  # the stream's place as a server heartbeat named it
        self.keyless: Table | None = None  # the job's table has no key: read from one view (`control`)

    # -- the stream's side (engine lock held) --------------------------------------------------------------
    def reconnect(self) -> None:
        """The source connection was lost (or the server changed): every read session opens anew."""
        self.reset()
        with self._sessions_lock:
            self._session_epoch += 1

    def reset(self) -> None:
        """Forget the tables in flight (a reconnect): their reads are not merged."""
        for i in list(self._states):
            self._drop(i)
        self._blocked = -1
        self.keyless = None
        self.reached = None

    def _drop(self, i: int) -> None:
        st = self._states.pop(i)
        self.window.unwatch(st.table)
        self.progress.drop(".".join(st.table))

    def close(self) -> None:
        self.reset()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._sessions_lock:
            for conn in self._sessions:
                with contextlib.suppress(Exception):
                    conn.close()
            self._sessions.clear()

    def pump(self, engine: CaptureEngine, job: SnapshotJob, put: Put) -> SnapshotJob:
        """Between transactions: start the job's tables, put in the reads the stream has passed, read more."""
        assert engine.between_transactions
        if self.keyless is not None:
            if self.keyless == job.table:
                return job
            self.keyless = None
        for i, st in list(self._states.items()):
            if not _reads(job, i, st.table):
                self._drop(i)  # finished, or the engine restarted or renamed the table under it (DDL, RENAME)
        for st in list(self._states.values()):
            if engine.schema.current.table(*st.table) != st.definition:
                # The stream applied a DDL of the table: what is still read renders the old definition.
                job = self._restart(engine, job, st, put)
        if job.done:
            return job
        if job.index not in self._states:
            job, started = self._start(engine, job, job.index, put)
            if started is None:
                return job  # skipped, or a table without a key (read from a view: `control`)
        if self._blocked <= job.index:
            self._blocked = -1
        reached = engine.position.coordinate
        if self.reached is not None and self.reached > reached:
            reached = self.reached
        for i in sorted(self._states):
            if (reading := self._states.get(i)) is not None:
                job = self._collect(engine, job, reading, reached, put)
        for i in sorted(self._states):
            if not (reading := self._states[i]).finished:
                continue
            if not reading.rechecked:  # one more look past the end first (`_recheck`)
                reading.rechecked, reading.planned, reading.planner = True, False, None
                continue
            job = self._finish(engine, job, reading, put)
        if job.done:
            return job
        job = self._ahead(engine, job, put)
        here = engine.position.coordinate
        for i in sorted(self._states):
            self._submit(self._states[i], here)
        self._prune(here)
        return job

    def _collect(
        self, engine: CaptureEngine, job: SnapshotJob, st: _Table, reached: Coordinate, put: Put
    ) -> SnapshotJob:
        """Put in the table's reads the stream has passed (merged with their windows)."""
        for fut in [f for f in st.flight if f.done()]:
            rng = st.flight[fut]
            exc = fut.exception()
            if exc is not None:
                del st.flight[fut]
                if isinstance(exc, Outdated):
                    self._outdated(st, exc)
                    st.todo.insert(0, rng)  # read again once the stream has applied the change
                    continue
                raise exc
            read = fut.result()
            if read.until > reached:
                continue
            if read.fence is None and read.fence_value is not None:
                read.fence = self.window.fence_at(read.fence_value)
                if read.fence is None:  # committed before the read, so before `until`: the stream saw it
                    raise RuntimeError(f"fence heartbeat {read.fence_value} not seen by the stream before {reached}")
            del st.flight[fut]
            assert read.fence is not None
            floor = st.floors.get(rng.order)
            if floor is not None and read.fence < floor:
                # The view sits before the place the stream stood when the read was asked for: MariaDB's dump
                # thread may send a transaction its group commit has not yet made visible to a new consistent
                # snapshot, so P can be behind the stream. The window's entries from P on were kept only from that
                # place on (and a table's are recorded only since its bootstrap-start): the read is not mergeable
                # exactly, and is read again with a newer view.
                log.debug(
                    "snapshot of %s: a view at %s behind %s; reading its range again", st.table, read.fence, floor
                )
                st.todo.insert(0, rng)
                continue
            merge = self.window.merge(st.table, read.fence)
            if merge.reshaped:
                return self._restart(engine, job, st, put)
            if merge.partial:
                tries = st.retries.get(rng.order, 0) + 1
                if tries == PARTIAL_WARNING:
                    log.warning(
                        "snapshot of %s: a session writing binlog_row_image=MINIMAL or NOBLOB images keeps changing "
                        "rows of a range while it is read (%d reads so far); it is read again until a read sees its "
                        "rows whole: set binlog_row_image=FULL for every session",
                        ".".join(st.table),
                        tries,
                    )
                st.retries[rng.order] = tries
                st.todo.insert(0, rng)  # its last change is a partial image: read it again, after it
                continue
            job = self._commit(engine, job, st, read, merge.effects, put)
        return job

    def _restart(self, engine: CaptureEngine, job: SnapshotJob, st: _Table, put: Put) -> SnapshotJob:
        log.warning(
            "snapshot of %s: the table changed (DDL or TRUNCATE) while it was read; reading it again from its start",
            ".".join(st.table),
        )
        self._drop(st.i)
        job = job.restart_table() if st.i == job.index else job.restart_ahead(st.i)
        put(engine.insert([], job.to_json()))
        return job

    def _ahead(self, engine: CaptureEngine, job: SnapshotJob, put: Put) -> SnapshotJob:
        """Start the next tables while connections would otherwise wait: every range of the tables being read is
        handed out, fewer than `parallelism` reads are in flight and fewer than `parallelism` tables are open."""
        while len(self._states) < self.parallelism and sum(len(st.flight) for st in self._states.values()) < (
            self.parallelism
        ):
            if not all(st.dispatched for st in self._states.values()):
                return job
            i = next(
                (
                    i
                    for i in range(job.index + 1, len(job.tables))
                    if i not in self._states and not ((a := job.ahead_of(i)) is not None and a.complete)
                ),
                None,
            )
            if i is None or (0 <= self._blocked <= i):
                return job
            job, opened = self._start(engine, job, i, put)
            if opened is None:
                self._blocked = i  # read when it is the current table
                return job
        return job

    def _start(self, engine: CaptureEngine, job: SnapshotJob, i: int, put: Put) -> tuple[SnapshotJob, _Table | None]:
        """Begin reading table `i` (the current one, or one ahead): its bootstrap-start, unless the job has it."""
        db, name = job.tables[i]
        current = i == job.index
        table = engine.schema.current.table(db, name)
        if table is None:
            if not current:
                return job, None
            log.warning("snapshot: table %s.%s no longer exists, skipped", db, name)
            job = job.next_table()
            put(engine.insert([], None if job.done else job.to_json()))
            return job, None
        json_text = self.dialect.version.flavor == "mariadb"
        build = EventBuilder(engine, table, ts=int(self.clock()), json_text=json_text)
        with self._session() as view:
            plan = key_plan(table, build.converter, view.unique_keys(db, name), avoid=build.unsealed_key_columns())
            estimated = view.estimate_rows(db, name)
        if plan.kind == "none":
            if current:
                self.keyless = (db, name)
            return job, None
        lowered = [n.lower() for n in build.converter.names]
        names = tuple(build.converter.names[lowered.index(c.lower())] for c in plan.key)
        st = _Table(i, (db, name), table, build, plan, names, estimated=estimated)
        ahead = job.ahead_of(i)
        if current and not job.started:
            job = job.start_table()
            put(engine.insert([build.marker("bootstrap-start")], job.to_json()))
        elif not current and ahead is None:
            job = job.start_ahead(i)
            ahead = job.ahead_of(i)
            put(engine.insert([build.marker("bootstrap-start")], job.to_json()))
        # Watched from here: every window's fence comes later (a fence is written, or a view opened, after this).
        self.window.watch(st.table, names, engine.position.coordinate)
        if current:
            if not job.ranges and job.last is not None:  # a checkpoint of a single-connection read: its prefix
                job = job.with_ranges(((None, job.last),), 0)
            ranges, rows = job.ranges, job.rows
        else:
            assert ahead is not None
            ranges, rows = ahead.ranges, ahead.rows
        st.committed = [((k, 0), a, b) for k, (a, b) in enumerate(ranges)]
        gaps: list[tuple[Key | None, Key | None, Order]] = []
        previous: Key | None = None
        for k, (after, upto) in enumerate(ranges):
            if k == 0 and after is not None:
                gaps.append((None, after, (-1, 1)))
            elif k > 0 and after != previous:
                gaps.append((previous, after, (k - 1, 1)))
            previous = upto
        st.planning = gaps
        st.tail = (previous, len(ranges) - 1) if ranges else (None, -1)
        st.watched_at = time.monotonic()
        label = f"{db}.{name}"
        if plan.kind == "unique":
            log.info("snapshot of %s: no primary key, chunking by unique key (%s)", label, ", ".join(plan.key))
        log.info(
            "snapshot of %s: %s path, %d connections, ranges of %d keys",
            label,
            "compiled text" if build.text is not None else "reference",
            self.parallelism,
            self.chunk,
        )
        # (committed ranges are joined in the checkpoint: the chunks done are counted from their rows)
        self.progress.begin(
            label, estimated=estimated, done=rows, chunk_rows=self.chunk, chunks_done=-(-rows // self.chunk)
        )
        self._states[i] = st
        return job, st

    @contextlib.contextmanager
    def _refusing(self, view: SnapshotView) -> Iterator[None]:
        """A statement the server refuses because the table changed past the stream raises Outdated."""
        try:
            yield
        except pymysql.err.MySQLError as exc:
            if not (exc.args and exc.args[0] in _CHANGED_SINCE_VIEW):
                raise
            raise Outdated(exc, queries.binlog_status(view.conn, self.dialect).coordinate) from exc

    def _plan(self, st: _Table) -> None:
        """The table's largest key (read after a fence, so every key older than the bootstrap-start is at most it)."""
        try:
            self._plan_keys(st)
        finally:
            self.wake.set()  # the stream's side cuts and reads now

    def _plan_keys(self, st: _Table) -> None:
        tail_after, tail_index = st.tail
        with self._session() as view, self._refusing(view):
            largest = self._largest(view, st, tail_after)  # past the committed ranges (a resumed table's)
            if st.plan.integer and largest is not None:
                smallest = view.key_at(st.plan.first(), [], st.plan)  # (older than the fence too: at most largest)
                if smallest is not None:
                    span = int(largest[0]) - int(smallest[0]) + 1
                    st.smallest = int(smallest[0])
                    st.width = max(1.0, self.chunk * span / max(1, st.estimated))
        st.end = tail_after
        if largest is not None:
            st.planning.append((tail_after, largest, (tail_index, 1)))
            st.end = largest
        st.planned = True

    def _largest(self, view: SnapshotView, st: _Table, after: Key | None) -> Key | None:
        """The table's largest key (past `after`), read in a view that opened after the table's watch began: on
        MariaDB a consistent snapshot, on MySQL a read after a fence written since (so every key committed before
        the table's bootstrap-start is at most it)."""
        sql, args = st.plan.last(after)
        if not self.exact_views:
            assert self.fences is not None
            self.fences.current(not_before=st.watched_at)
            return view.key_at(sql, args, st.plan)
        with view.conn.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        try:
            return view.key_at(sql, args, st.plan)
        finally:
            with view.conn.cursor() as cur:
                cur.execute("COMMIT")

    def _recheck(self, st: _Table) -> None:
        """Every range is read: is there a key past where the ranges end? A key created after the plan's read is
        in the stream already, so this is needed only when that read missed an older one; it is cheap (one
        index read), and a segment past the end is read like any other (merged with its window, so exact either
        way). Once per table: a table that keeps growing is not chased."""
        try:
            with self._session() as view, self._refusing(view):
                beyond = self._largest(view, st, st.end)
            if beyond is not None:
                log.debug("snapshot of %s: keys past the planned end; reading them too", ".".join(st.table))
                st.planning.append((st.end, beyond, (st.tail[1], 2)))
                st.end = beyond
            st.planned = True
        finally:
            self.wake.set()

    def _outdated(self, st: _Table, exc: Outdated) -> None:
        """The server refused a statement on the table as outdated: wait for the stream to pass its binlog end."""
        st.outdated += 1
        if st.outdated > MAX_OUTDATED:  # the stream has passed the server's end again and again: not a pending DDL
            raise exc.error
        st.behind = exc.end if st.behind is None or exc.end > st.behind else st.behind

    def _submit(self, st: _Table, here: Coordinate) -> None:
        """Start reads of the table while fewer than `parallelism` are in flight over every table; cut the next
        range when none is waiting."""
        if not st.planned:
            planner = st.planner
            if planner is not None and planner.done() and planner.exception() is not None:
                exc = planner.exception()
                if not isinstance(exc, Outdated):
                    raise exc  # type: ignore[misc]
                self._outdated(st, exc)
                st.planner = None
            if st.planner is not None:
                return
        if st.behind is not None:
            if here < st.behind:
                return  # the server has a change of the table the stream has not applied yet
            st.behind = None
        if not st.planned:
            st.planner = self._pool.submit(self._recheck if st.rechecked else self._plan, st)
            return
        while sum(len(t.flight) for t in self._states.values()) < self.parallelism:
            if not st.todo and st.planning:
                try:
                    self._cut(st)
                except Outdated as exc:
                    self._outdated(st, exc)
                    return
            if not st.todo:
                break
            rng = st.todo.pop(0)
            st.flight[self._pool.submit(self._read, st, rng)] = rng
            st.floors[rng.order] = self._floor(here)
        if not st.todo and st.planning:  # the next range is cut while the reads run: ready when one ends
            try:
                self._cut(st)
            except Outdated as exc:
                self._outdated(st, exc)

    def _cut(self, st: _Table) -> None:
        """The next range of the first segment not cut yet: `chunk` rows. An integer key is cut by value at the
        density its reads have shown (no query); any other key (or an integer one whose values turned out denser
        than that) on the index by the server, `chunk` keys at a time, in the background (`_boundary`)."""
        if st.cutting is not None:
            fut, segment = st.cutting
            if not fut.done():
                return
            st.cutting = None
            self._place(st, segment, fut.result())
        elif st.width and st.smallest is not None:
            after, upto, _ = segment = st.planning[0]
            assert upto is not None  # segments end at the largest key or at a committed range
            low = int(after[0]) if after is not None else st.smallest - 1
            step = int(st.width)
            self._place(st, segment, (low + step,) if low + step < int(upto[0]) else None)
        else:
            segment = st.planning[0]
            st.cutting = (self._pool.submit(self._boundary, st, segment), segment)

    def _boundary(self, st: _Table, segment: tuple[Key | None, Key | None, Order]) -> Key | None:
        after, upto, _ = segment
        try:
            with self._session() as view, self._refusing(view):
                sql, args = st.plan.boundary(after, upto, self.chunk)
                return view.key_at(sql, args, st.plan)
        finally:
            self.wake.set()

    def _place(self, st: _Table, segment: tuple[Key | None, Key | None, Order], hi: Key | None) -> None:
        """A range of `segment` up to `hi` (None or its end: all of it) goes to the reads to come."""
        after, upto, order = segment
        where = st.planning.index(segment)
        seq = st.cuts
        st.cuts += 1
        if hi is None or hi == upto:
            st.planning.pop(where)
            st.todo.append(Range(after, upto, (*order, seq)))
        else:
            st.planning[where] = (hi, upto, order)
            st.todo.append(Range(after, hi, (*order, seq)))

    # -- reads (pool threads) ---------------------------------------------------------------------------------
    def _session(self) -> _Session:
        return _Session(self)

    def _read(self, st: _Table, rng: Range) -> Read:
        try:
            return self._read_range(st, rng)
        finally:
            self.wake.set()  # put in (or read again) by the stream's side

    def _read_range(self, st: _Table, rng: Range) -> Read:
        with self._session() as view, self._refusing(view):
            fence_value: int | None = None
            fence: Coordinate | None = None
            if self.exact_views:
                with view.conn.cursor() as cur:
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                try:
                    fence = until = queries.snapshot_binlog_coordinate(view.conn)
                    rows, rendered, last = st.build.fetch_range(view, st.plan, rng.after, rng.upto, 2 * self.chunk)
                except BaseException:
                    # A lost connection's read view ended with it: a COMMIT there would raise PyMySQL's bare
                    # InterfaceError(0, '') and hide the loss (which the snapshot reconnects after).
                    if view.conn.open:
                        with contextlib.suppress(pymysql.err.Error), view.conn.cursor() as cur:
                            cur.execute("COMMIT")
                    raise
                with view.conn.cursor() as cur:
                    cur.execute("COMMIT")
            else:
                assert self.fences is not None
                fence_value = self.fences.current(not_before=st.watched_at)
                rows, rendered, last = st.build.fetch_range(view, st.plan, rng.after, rng.upto, 2 * self.chunk)
                until = queries.binlog_status(view.conn, self.dialect).coordinate
        cut = rows >= 2 * self.chunk
        return Read(rng, rows, rendered, last, cut, fence, fence_value, until, int(self.clock()))

    # -- putting reads in ----------------------------------------------------------------------------------
    def _commit(
        self,
        engine: CaptureEngine,
        job: SnapshotJob,
        st: _Table,
        read: Read,
        effects: dict[Key, Image | None],
        put: Put,
    ) -> SnapshotJob:
        rendered, rows = read.rendered, read.rows
        if effects and rows:
            rendered, rows = _merged(rendered, effects, st.names, pk_is_key=st.plan.kind == "primary")
        rng = read.range
        upto = read.covered if read.cut else rng.upto
        if read.cut and st.width:
            # Denser than its width said: the rest of it, and of the table, is cut on the index.
            st.width = 0.0
            st.planning.insert(0, (read.covered, rng.upto, (*rng.order, 1)))
        elif read.cut:
            st.todo.insert(0, Range(read.covered, rng.upto, (*rng.order, 1)))
        elif st.width and read.rows and rng.upto is not None and rng.after is not None:
            # The density this range showed sets the next ranges' width (`chunk` rows each).
            span = int(rng.upto[0]) - int(rng.after[0])
            st.width = max(1.0, 0.5 * st.width + 0.5 * self.chunk * span / read.rows)
        st.committed.append((rng.order, rng.after, upto))
        st.committed.sort(key=lambda c: c[0])
        st.retries.pop(rng.order, None)
        st.outdated = 0
        ranges = _coalesced(st.committed)
        job = job.with_ranges(ranges, rows) if st.i == job.index else job.with_ahead_ranges(st.i, ranges, rows)
        events = [st.build.batch_at(engine, rendered, ts=read.ts)] if rows else []
        put(engine.insert(events, job.to_json()))
        self.progress.add(".".join(st.table), rows)
        return job

    def _finish(self, engine: CaptureEngine, job: SnapshotJob, st: _Table, put: Put) -> SnapshotJob:
        job = job.next_table() if st.i == job.index else job.complete_ahead(st.i)
        put(engine.insert([st.build.marker_at(engine, "bootstrap-complete")], None if job.done else job.to_json()))
        self.progress.finish(".".join(st.table))
        self._states.pop(st.i)
        self.window.unwatch(st.table)
        return job

    def _floor(self, here: Coordinate) -> Coordinate:
        """The earliest fence a read submitted now is merged from: MariaDB's view and MySQL's next fence are taken
        after now, so at or after the stream's place (a MariaDB view behind it is read again: `_collect`); MySQL's
        current fence may be older, at its own place."""
        if self.fences is not None and self.fences.latest is not None:
            at = self.window.fence_at(self.fences.latest)
            if at is not None and at < here:
                return at
        return here

    def _prune(self, here: Coordinate) -> None:
        """Forget window entries no read can need: before every fence (or floor) of the reads in flight and of the
        reads still to come."""
        floors = [self._floor(here)]
        for st in self._states.values():
            for fut, rng in st.flight.items():
                read = fut.result() if fut.done() and fut.exception() is None else None
                fence = None
                if read is not None:
                    fence = read.fence or (
                        self.window.fence_at(read.fence_value) if read.fence_value is not None else None
                    )
                floors.append(fence if fence is not None else st.floors[rng.order])
            for order in [o for o in st.floors if o not in {r.order for r in st.flight.values()}]:
                del st.floors[order]
        self.window.prune(min(floors))


def _reads(job: SnapshotJob, i: int, table: Table) -> bool:
    """Whether the job still reads table `i` under this name, as started: the current table or one ahead."""
    if i < job.index or i >= len(job.tables) or job.tables[i] != table:
        return False
    if i == job.index:
        return job.started
    ahead = job.ahead_of(i)
    return ahead is not None and not ahead.complete


class _Session:
    """The pool thread's own connection (opened on first use) as a view to read with."""

    def __init__(self, owner: ParallelSnapshot) -> None:
        self.owner = owner

    def __enter__(self) -> SnapshotView:
        local, owner = self.owner._local, self.owner
        view: SnapshotView | None = getattr(local, "view", None)
        if view is not None and getattr(local, "epoch", None) != owner._session_epoch:
            view.close()
            view = None
        if view is None:
            conn = session(owner.connect)
            with owner._sessions_lock:
                owner._sessions.append(conn)
            view = SnapshotView(conn, Frontier(Coordinate("", 0), ""), owner.clock())
            local.view, local.epoch = view, owner._session_epoch
        return view

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if exc is not None and isinstance(exc, (pymysql.err.OperationalError, pymysql.err.InterfaceError)):
            view = getattr(self.owner._local, "view", None)
            if view is not None:
                view.close()
            self.owner._local.view = None


def _coalesced(committed: list[tuple[Order, Key | None, Key | None]]) -> tuple[tuple[Key | None, Key | None], ...]:
    """The committed ranges in key order, adjacent ones joined."""
    out: list[list[Key | None]] = []
    for _, after, upto in committed:
        if out and out[-1][1] == after and after is not None:
            out[-1][1] = upto
        else:
            out.append([after, upto])
    return tuple((a, b) for a, b in out)


def _merged(
    rendered: Rendered, effects: dict[Key, Image | None], names: tuple[str, ...], *, pk_is_key: bool
) -> tuple[Rendered, int]:
    """The read's rows with the window's effects: a touched key takes its last image, a removed key goes."""
    data, pks, hashes, nulls = rendered
    texts = data.to_pylist()
    marks = nulls.to_pylist() if nulls is not None else [None] * len(texts)
    if pk_is_key and pks is not None:
        keys: list[Key | None] = [tuple(hashable(v) for v in orjson.loads(p)) for p in pks.to_pylist()]
    else:
        keys = [key_of(orjson.loads(t), names) for t in texts]
    keep: list[bool] = []
    for i, key in enumerate(keys):
        if key is not None and key in effects:
            image = effects[key]
            if image is None:
                keep.append(False)
                continue
            texts[i], marks[i] = image
        keep.append(True)
    mask = pa.array(keep, pa.bool_())
    out_data = pa.array(texts, pa.string()).filter(mask)
    out_pks = pks.filter(mask) if pks is not None else None
    out_hashes = hashes.filter(mask) if hashes is not None else None
    out_nulls = pa.array(marks, pa.string()).filter(mask) if any(m is not None for m in marks) else None
    return (out_data, out_pks, out_hashes, out_nulls), len(out_data)
