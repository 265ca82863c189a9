"""The worker's start: validate the source, then resume from the sink's checkpoint or start a new capture."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pymysql
from mysqlcapture_api.coordinates import NOWHERE, Coordinate
from mysqlcapture_api.schema.history import SchemaHistory
from mysqlcapture_api.schema.schema import Schema

from mysqlcapture_worker.failover.heartbeat import HeartbeatWriter
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.row_filters import RowFilters
from mysqlcapture_worker.runtime.connections import SourceConnections
from mysqlcapture_worker.runtime.recorder import MetricsRecorder
from mysqlcapture_worker.schema.introspect import capture_schema
from mysqlcapture_worker.schema.state import SchemaState
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.sinks import Sink, SinkError
from mysqlcapture_worker.snapshot.control import SnapshotControl
from mysqlcapture_worker.source import foreign_keys, queries
from mysqlcapture_worker.source.checks import ServerInfo, check_source
from mysqlcapture_worker.source.foreign_keys import ForeignKeyReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Start:
    """Where and with which schema the capture starts, on which server."""

    server: ServerInfo
    snapshots: SnapshotControl
    position: Position
    schema: SchemaState
    new_capture: bool
    """No checkpoint was found: the start must be committed before anything else, so a restart resumes there."""
    heartbeats: HeartbeatWriter
    """The heartbeat writer: the periodic beats (started by the worker) and the snapshot's fences share its values."""
    foreign_keys: ForeignKeyReport
    """Whether the server logs its foreign keys' actions."""


class Startup:
    """Works out the capture's start: the checkpoint and the schema at it, or the configured start of a new one."""

    def __init__(
        self, settings: WorkerSettings, *, source: SourceConnections, sink: Sink, recorder: MetricsRecorder
    ) -> None:
        self.settings = settings
        self.source = source
        self.sink = sink
        self.recorder = recorder

    def prepare(self) -> Start:
        """Validate the source and work out where to start and with which schema."""
        conn = self.source.connect()
        try:
            server = check_source(
                conn,
                replica_server_id=self.settings.source.replica_server_id,
                user=self.settings.source.user,
                require_gtids=self.settings.failover.mode == "gtid",
            )
            self.recorder.serving(server.server_id)
            s = self.settings
            if not any(self.source.table_filter.includes(db, t) for db, t in queries.base_tables(conn)):
                log.warning(
                    "spec.tables (include %s, exclude %s) matches no table on the server now: nothing is captured "
                    "until a matching table is created; check the globs",
                    list(s.tables.include),
                    list(s.tables.exclude),
                )
            if s.columns is not None or s.rows:  # a rule that cannot apply stops the worker before it reads anything
                tables = capture_schema(conn, self.source.captured).tables.values()
                if s.columns is not None:
                    s.columns.lines(tables)
                RowFilters(s.rows, s.columns).check(tables)
            heartbeats = HeartbeatWriter(
                self.source.connect, database=s.heartbeat.database, client_id=s.name, interval=s.heartbeat.interval_s
            )
            snapshots = SnapshotControl(
                self.settings,
                connect=self.source.connect_with,
                metrics=self.recorder.metrics,
                table_filter=self.source.table_filter,
                dialect=server.dialect,
                fence=heartbeats.fence,
            )
            checkpoint, history = self._open_sink()
            if checkpoint is not None:
                log.info("resuming from checkpoint %s", checkpoint)
                if history is not None:
                    history.truncate_after(checkpoint.schema_version)
                    schema = history.schema_at(checkpoint.schema_version)
                else:
                    schema = capture_schema(conn, self.source.captured)
                schema = self._with_foreign_keys(conn, schema)
                state = SchemaState(history, schema, checkpoint.schema_version)
                found = self._foreign_keys(conn, server, schema)
                return Start(
                    server, snapshots, checkpoint, state, new_capture=False, heartbeats=heartbeats, foreign_keys=found
                )
            position = self._initial_position(conn, server)
            at_origin = self._starts_at_origin(conn, position)
            if snapshots.wants_initial(at_origin=at_origin):
                position, schema = snapshots.initial(
                    server_id=server.server_id,
                    identity=server.identity,
                    capture_schema=lambda: capture_schema(conn, self.source.captured),
                )
            elif at_origin:
                # Everything is in the stream from here: the schema is built from its DDL alone.
                schema = Schema.empty(queries.server_charset(conn))
            else:
                schema = capture_schema(conn, self.source.captured)
            version = 0
            if history is not None:
                with self._storage():
                    history.truncate_after(-1)
                    version = history.initial(
                        schema,
                        server_id=position.server_id,
                        coordinate=position.coordinate,
                        gtid=position.gtid_set or None,
                    )
            position = position.with_schema_version(version)
            log.info("new capture starting at %s", position)
            return Start(
                server,
                snapshots,
                position,
                SchemaState(history, schema, version),
                new_capture=True,
                heartbeats=heartbeats,
                foreign_keys=self._foreign_keys(conn, server, schema),
            )
        finally:
            conn.close()

    def _initial_position(self, conn: pymysql.connections.Connection, server: ServerInfo) -> Position:
        s = self.settings
        dialect = server.dialect
        if s.start.from_ == "earliest":
            at = Coordinate.start_of(queries.binary_logs(conn)[0][0])
        elif s.start.from_ == "position":
            assert s.start.at is not None
            at = s.start.at
        elif s.start.from_ == "gtid":
            # No file:pos yet: the stream starts by GTID set (auto-positioning), as after a failover.
            assert s.start.gtid_set is not None
            return Position(
                server_id=server.server_id,
                server_identity=server.identity,
                coordinate=NOWHERE,
                gtid_set=s.start.gtid_set,
            )
        else:
            status = queries.binlog_status(conn, dialect)
            at = status.coordinate
        if dialect.mariadb:
            gtid = queries.gtid_at(conn, dialect, at)
        elif s.start.from_ == "latest":
            gtid = status.gtid_executed
        elif s.start.from_ == "earliest":
            # Every transaction before the first kept binlog: its Previous_gtids, which is gtid_purged.
            gtid = queries.gtid_purged(conn, dialect)
        else:
            # MySQL names no GTID set for an arbitrary file:pos; the set grows from the GTIDs read after it.
            gtid = ""
            log.warning(
                "start.from position on MySQL: the checkpoint's GTID set holds only transactions read from %s; "
                "a failover by GTID set would resend earlier ones (use start.from gtid to name the set)",
                at,
            )
        return Position(
            server_id=server.server_id,
            server_identity=server.identity,
            coordinate=at,
            gtid_set=gtid,
        )

    def _foreign_keys(
        self, conn: pymysql.connections.Connection, server: ServerInfo, schema: Schema
    ) -> ForeignKeyReport:
        """How the server logs foreign-key actions; one line for each captured foreign key whose actions change
        rows, and for each crossing the capture's edge."""
        found = foreign_keys.report(conn, server.dialect)
        for line in found.lines(schema, self.source.table_filter.includes, foreign_keys.all_constraints(conn)):
            if "Fix:" in line:
                log.warning("%s", line)
            else:
                log.info("%s", line)
        return found

    def _open_sink(self) -> tuple[Position | None, SchemaHistory | None]:
        """The sink's checkpoint and the schema history."""
        sink = self.settings.sink
        with self._storage():
            checkpoint = self.sink.load_checkpoint()
            uri = sink.schema_history_uri
            return checkpoint, SchemaHistory.open(uri, sink.storage_options or None) if uri else None

    @contextlib.contextmanager
    def _storage(self) -> Iterator[None]:
        """Where the capture's storage refuses (a path no directory can be made at or written, a bucket out of
        reach), one line naming the setting instead of the storage library's error."""
        from deltalake.exceptions import DeltaError

        try:
            yield
        except (OSError, DeltaError) as exc:
            setting = {
                "delta": "spec.sink.delta.uri",
                "kafka": "spec.sink.kafka.schemaHistoryUri",
                "jsonl": "spec.sink.jsonl.path",
            }[self.settings.sink.type]
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SinkError(
                f"cannot open the capture's storage named by {setting} ({type(exc).__name__}: {said}): set it to a "
                "directory the worker can create and write, or an object-store URI its credentials reach; nothing "
                "was written",
                "SinkUnwritable",
            ) from exc

    def _with_foreign_keys(self, conn: pymysql.connections.Connection, schema: Schema) -> Schema:
        """A schema from a history written before foreign keys were kept there: its tables' foreign keys as the
        server has them now (the best knowledge there is; DDL from here on keeps them exact)."""
        if any(t.foreign_keys for t in schema.all_tables()):
            return schema
        live = capture_schema(conn, self.source.captured)
        found = {(t.database, t.name): t.foreign_keys for t in live.all_tables() if t.foreign_keys}
        for (db, name), keys in found.items():
            table = schema.table(db, name, exact=True)
            if table is not None:
                schema = schema.with_table(replace(table, foreign_keys=keys))
        return schema

    @staticmethod
    def _starts_at_origin(conn: pymysql.connections.Connection, position: Position) -> bool:
        """True when the stream starts at the beginning of the server's whole binlog history."""
        if position.coordinate.pos > 4:
            return False
        first = queries.binary_logs(conn)[0][0]
        return first == position.coordinate.file and first.endswith(".000001")
