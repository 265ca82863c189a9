"""Where to continue on a new server after a failover: by GTID set, or by Maxwell's heartbeat search."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.decode import compile_decoder
from mysqlcapture_worker.failover.heartbeat import TABLE
from mysqlcapture_worker.gtid import Flavor, GtidSet
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.replication.events import RotateEvent, RowsEvent, TableMap, XidEvent
from mysqlcapture_worker.replication.stream import BinlogStream, GtidStart, StreamStart
from mysqlcapture_worker.schema.introspect import capture_schema
from mysqlcapture_worker.schema.tables import resolve_table_def
from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.checks import ServerInfo

log = logging.getLogger(__name__)


class FailoverError(RuntimeError):
    """The new server cannot continue the capture without losing events; the message says why and what to do."""


def is_failover(position: Position, server: ServerInfo) -> bool:
    """A different server than the checkpoint's: its identity (server_uuid / GTID domain) or server_id changed."""
    if position.server_identity:
        return position.server_identity != server.identity
    return position.server_id != server.server_id


def check_gtid_continuity(conn: Any, position: Position, server: ServerInfo) -> None:
    """Raise FailoverError unless the new server holds every transaction seen and keeps all the others."""
    flavor: Flavor = "mariadb" if server.flavor == "mariadb" else "mysql"
    seen = GtidSet.parse(position.gtid_set, flavor)
    has = GtidSet.parse(queries.gtid_executed(conn, server.dialect), flavor)
    # MySQL: gtid_purged. MariaDB: the GTID position the first kept binlog starts at.
    purged_unseen = GtidSet.parse(queries.gtid_purged(conn, server.dialect), flavor).subtract(seen)
    missing = seen.subtract(has)
    if not missing.is_empty():
        raise FailoverError(
            f"the new source (server_id {server.server_id}) lacks transactions the capture has already "
            f"written: {missing}. It is behind the old primary; promote a server that has them, or start a "
            "new capture (delete the change log's checkpoint) to accept the loss knowingly"
        )
    if not purged_unseen.is_empty():
        raise FailoverError(
            f"the new source (server_id {server.server_id}) has purged transactions the capture has not "
            f"read yet: {purged_unseen}. Those events are lost on this server; re-snapshot "
            "(spec.failover.onPurged: resnapshot) or restore the binlogs"
        )


def gtid_start(position: Position, server: ServerInfo) -> GtidStart:
    """A start on `server` by the checkpoint's GTID set, in the server's GTID dialect."""
    return GtidStart(position.gtid_set, mariadb=server.flavor == "mariadb")


def find_heartbeat(
    conn: Any,
    open_stream: Callable[[StreamStart], BinlogStream],
    *,
    database: str,
    client_id: str,
    heartbeat: int,
) -> Coordinate:
    """Maxwell's search: the boundary right after the transaction that wrote `heartbeat` on this server.

    Reads the server's binlogs newest first, one file at a time, decoding only the heartbeat
    table's rows. Raises FailoverError when no binlog holds the heartbeat.
    """
    schema = capture_schema(conn, lambda db, table: db == database and table == TABLE)
    files = [name for name, _ in queries.binary_logs(conn)]
    for name in reversed(files):
        found = _search_file(open_stream, name, schema, database, client_id, heartbeat)
        if found is not None:
            log.info("heartbeat %d found on the new server; resuming at %s", heartbeat, found)
            return found
    raise FailoverError(
        f"heartbeat {heartbeat} of capture {client_id!r} is in none of the new server's binlogs "
        f"({files[0]}..{files[-1]}): it was not replicated here (log_slave_updates off?) or was purged; "
        "the capture cannot tell where to resume without losing or doubling events"
    )


def _search_file(
    open_stream: Callable[[StreamStart], BinlogStream],
    name: str,
    schema: Any,
    database: str,
    client_id: str,
    heartbeat: int,
) -> Coordinate | None:
    stream = open_stream(Coordinate.start_of(name))
    maps: dict[int, TableMap] = {}
    hit = False
    try:
        for ev in stream:
            if isinstance(ev, RotateEvent):
                if ev.timestamp != 0 and ev.next_start.file != name:
                    return None  # the end of this file
                continue
            if isinstance(ev, TableMap):
                maps[ev.table_id] = ev
            elif isinstance(ev, RowsEvent) and not hit:
                tm = maps.get(ev.table_id)
                if tm is None or (tm.database, tm.table) != (database, TABLE):
                    continue
                table = resolve_table_def(tm, schema)
                decoder = compile_decoder(tm, table)
                names = [c.name.lower() for c in table.columns]
                for before, after in decoder.decode(ev):
                    image = after if after is not None else before
                    assert image is not None
                    row = dict(zip(names, image, strict=False))
                    if row.get("client_id") == client_id and row.get("heartbeat") == heartbeat:
                        hit = True
            elif isinstance(ev, XidEvent) and hit:
                return ev.where
    finally:
        stream.close()
    return None
