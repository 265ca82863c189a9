"""Every (re)connect: which server is this, did it change, and where does the stream start on it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mysqlcapture_worker.engine import CaptureEngine
from mysqlcapture_worker.failover.purge import BinlogPurgedError
from mysqlcapture_worker.failover.resume import (
    FailoverError,
    check_gtid_continuity,
    find_heartbeat,
    gtid_start,
    is_failover,
)
from mysqlcapture_worker.replication.stream import BinlogStream, StreamStart
from mysqlcapture_worker.settings import WorkerSettings
from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.checks import ServerInfo, check_source

log = logging.getLogger(__name__)


class Reconnector:
    """Works out the stream's start on every connect, following the source through failovers.

    `on_failover(old_server_id, new_server)` is called after a failover was planned (metrics, status).
    """

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        connect: Callable[[], Any],
        open_stream: Callable[[StreamStart], BinlogStream],
        on_failover: Callable[[int, ServerInfo], None],
    ) -> None:
        self.settings = settings
        self._connect = connect
        self._open_stream = open_stream
        self._on_failover = on_failover
        self.server: ServerInfo | None = None

    def start_for(self, engine: CaptureEngine, *, first: bool) -> StreamStart:
        conn = self._connect()
        try:
            server = check_source(
                conn,
                replica_server_id=self.settings.source.replica_server_id,
                user=self.settings.source.user,
                check_server_id=first,
                require_gtids=self.settings.failover.mode == "gtid",
            )
            self.server = server
            pos = engine.position
            if is_failover(pos, server):
                return self._failover(conn, engine, server)
            at = pos.coordinate
            if not at.file:  # failed over by GTID, no boundary on this server yet
                return gtid_start(pos, server)
            names = [name for name, _ in queries.binary_logs(conn)]
            if at.file not in names:
                raise BinlogPurgedError(
                    f"BinlogPurged: the checkpoint's binlog {at.file} (position {at.pos}) is no "
                    f"longer on the source, whose oldest binlog is {names[0] if names else 'none'}: events "
                    "after the checkpoint are lost on this server. Set spec.failover.onPurged: resnapshot to "
                    "take a new snapshot, or keep binlogs longer (binlog_expire_logs_seconds) and restart"
                )
            return at
        finally:
            conn.close()

    def _failover(self, conn: Any, engine: CaptureEngine, server: ServerInfo) -> StreamStart:
        old = engine.position
        s = self.settings
        if not s.failover.enabled:
            raise FailoverError(
                f"the source changed from server_id {old.server_id} ({old.server_identity}) to "
                f"{server.server_id} ({server.identity}) and spec.failover.enabled is false"
            )
        use_gtid = s.failover.mode == "gtid" or (s.failover.mode == "auto" and bool(old.gtid_set))
        log.warning(
            "failover: the source was server_id %d (%s), is now %d (%s); continuing by %s",
            old.server_id,
            old.server_identity,
            server.server_id,
            server.identity,
            "GTID set" if use_gtid else "heartbeat search",
        )
        if use_gtid:
            if not old.gtid_set:
                raise FailoverError("spec.failover.mode is gtid but the checkpoint has no GTID set")
            check_gtid_continuity(conn, old, server)
            new = old.continued_by_gtid(server_id=server.server_id, identity=server.identity)
            start: StreamStart = gtid_start(old, server)
        else:
            if old.last_heartbeat is None:
                raise FailoverError(
                    "the source changed and the checkpoint holds no heartbeat to search for: enable "
                    "spec.heartbeat (intervalSeconds > 0) so failovers without GTIDs can be followed"
                )
            found = find_heartbeat(
                conn,
                self._open_stream,
                database=s.heartbeat.database,
                client_id=s.name,
                heartbeat=old.last_heartbeat,
            )
            # MariaDB names the GTID position of a file:pos. MySQL's GTIDs are the same on every server of the
            # topology: the checkpoint's set stays right (the transactions read again after the heartbeat are in it).
            gtid = queries.gtid_at(conn, server.dialect, found) if server.flavor == "mariadb" else old.gtid_set
            # The heartbeat's transaction ends at `found`: a boundary, nothing of the next transaction committed.
            new = old.with_server(server.server_id, server.identity).at_boundary(found, gtid_set=gtid)
            start = found
        version = engine.schema.merge(
            server_id=server.server_id,
            coordinate=new.coordinate,
            gtid=new.gtid_set or None,
            last_heartbeat=new.last_heartbeat,
            from_heartbeat=not use_gtid,
        )
        engine.failover_to(new.with_schema_version(version))
        self._on_failover(old.server_id, server)
        return start
