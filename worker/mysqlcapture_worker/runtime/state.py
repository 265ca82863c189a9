"""What the worker is doing, shared by its threads, and the GET /status document built from it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mysqlcapture_api.worker_status import WorkerPhase, WorkerStatus

from mysqlcapture_worker.failover.purge import Headroom
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.schema.state import SchemaState
from mysqlcapture_worker.snapshot.control import SnapshotControl
from mysqlcapture_worker.source.checks import ServerInfo
from mysqlcapture_worker.source.foreign_keys import ForeignKeyReport


@dataclass
class WorkerState:
    """Written by the reader thread, the commit loop and the helper threads; read by the /status server.

    Each attribute is replaced whole (never mutated in place), so a reader sees an old or a new value.
    """

    phase: WorkerPhase = "Pending"
    error: str | None = None
    """What stopped the reader, one line; None while it runs."""
    position: Position | None = None
    """The last position the sink committed; None before the first commit."""
    server: ServerInfo | None = None
    """The source server, once validated (and again after each failover)."""
    failovers: int = 0
    headroom: Headroom | None = None
    """The last purge headroom measured; None until the first measurement."""
    snapshots: SnapshotControl | None = None
    """Set once the server's flavor is known."""
    foreign_keys: tuple[ForeignKeyReport, SchemaState, Callable[[str, str], bool]] | None = None
    """How the server logs foreign-key actions, the schema, and which tables are captured: set at the start."""

    def document(self, *, lag_seconds: float) -> WorkerStatus:
        """The /status document: phase, committed position, lag, purge headroom, failovers, error."""
        pos = self.position
        room = self.headroom
        snapshots = self.snapshots
        return WorkerStatus(
            phase="Snapshotting" if snapshots is not None and snapshots.running else self.phase,
            server_id=pos.server_id if pos else None,
            server_identity=pos.server_identity if pos else None,
            gtid_set=pos.gtid_set if pos else None,
            binlog_file=pos.coordinate.file if pos else None,
            binlog_pos=pos.coordinate.pos if pos else None,
            order_key=pos.order_key if pos else None,
            lag_seconds=lag_seconds,
            purge_headroom_bytes=room.bytes if room else None,
            purge_headroom_files=room.files if room else None,
            reading_active_file=room.active if room else None,
            purge_headroom_seconds=room.seconds if room else None,
            binlog_purged=room.purged if room else False,
            last_heartbeat=pos.last_heartbeat if pos else None,
            failovers=self.failovers,
            snapshot=snapshots.percent() if snapshots is not None else None,
            snapshot_tables=snapshots.tables() if snapshots is not None and snapshots.running else None,
            unlogged_foreign_keys=self._unlogged_foreign_keys(),
            error=self.error,
            error_reason=None,
            retry_seconds=None,
        )

    def _unlogged_foreign_keys(self) -> list[str] | None:
        if self.foreign_keys is None:
            return None
        found, schema, captured = self.foreign_keys
        return found.unlogged(schema.current, captured)
