"""Startup checks of the source server: each failure is one line naming the setting and the fix."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import pymysql

from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.dialect import Dialect

log = logging.getLogger(__name__)


class SourceConfigError(RuntimeError):
    """The source server cannot be captured as configured; the message says how to fix it.

    `reason` is a CamelCase word for the capture's status condition (the operator shows it).
    """

    def __init__(self, message: str, reason: str = "SourceNotCapturable") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ServerInfo:
    """What the worker learns about the source at connect time."""

    version: str
    flavor: str  # "mariadb" or "mysql"
    server_id: int
    server_uuid: str
    gtid_domain_id: int | None
    row_metadata: str  # FULL or MINIMAL
    gtid_mode: str = "ON"  # MySQL's gtid_mode (MariaDB always logs GTIDs: "ON")

    @property
    def dialect(self) -> Dialect:
        """The statements of this server's version."""
        return Dialect.of(self.version)

    @property
    def identity(self) -> str:
        if self.flavor == "mariadb":
            return f"mariadb:{self.gtid_domain_id}:{self.server_id}"
        return self.server_uuid


_PRIV_ALIASES = {
    "REPLICATION SLAVE": ("REPLICATION SLAVE", "REPLICATION REPLICA"),
    # MariaDB 10.5+ split REPLICATION CLIENT: BINLOG MONITOR is what SHOW BINARY LOGS / binlog status need.
    "REPLICATION CLIENT": ("REPLICATION CLIENT", "BINLOG MONITOR"),
    "SELECT": ("SELECT",),
}


def _missing_privileges(grants: list[str]) -> list[str]:
    global_privs: set[str] = set()
    for grant in grants:
        m = re.match(r"GRANT (.+?) ON (\S+) TO", grant, re.IGNORECASE | re.DOTALL)
        if not m:
            continue
        if m.group(2).replace("`", "") != "*.*":
            # Database-level SELECT on the captured databases is enough for SELECT.
            if "SELECT" in m.group(1).upper() or "ALL PRIVILEGES" in m.group(1).upper():
                global_privs.add("SELECT@db")
            continue
        for priv in m.group(1).upper().split(","):
            global_privs.add(priv.strip())
    if "ALL PRIVILEGES" in global_privs:
        return []
    missing = []
    for needed, aliases in _PRIV_ALIASES.items():
        if needed == "SELECT" and "SELECT@db" in global_privs:
            continue
        if not any(a in global_privs for a in aliases):
            missing.append(needed)
    return missing


def check_source(
    conn: pymysql.connections.Connection,
    *,
    replica_server_id: int,
    user: str,
    sleep: Callable[[float], None] = time.sleep,
    server_id_wait_seconds: float = 15.0,
    check_server_id: bool = True,
    require_gtids: bool = False,
) -> ServerInfo:
    """Validate the server for row-based capture and return what the worker needs to know about it.

    `require_gtids`: the capture resumes by GTID set after a failover (spec.failover.mode gtid), so a MySQL
    server must log GTIDs.
    """
    v = queries.variables(
        conn,
        [
            "version",
            "log_bin",
            "binlog_format",
            "binlog_row_image",
            "binlog_row_metadata",
            "server_id",
            "server_uuid",
            "gtid_domain_id",
            "gtid_mode",
            "binlog_row_value_options",
        ],
    )
    grants = queries.grants(conn)
    version = v.get("version", "")
    dialect = Dialect.of(version)
    flavor = dialect.flavor
    if v.get("log_bin", "OFF").upper() not in ("ON", "1"):
        raise SourceConfigError(
            "log_bin is OFF on the source: enable binary logging (log_bin=ON / --log-bin) and restart the server",
            "BinlogDisabled",
        )
    fmt = v.get("binlog_format", "").upper()
    if fmt != "ROW":
        raise SourceConfigError(
            f"binlog_format is {fmt or 'unset'} on the source: set binlog_format=ROW "
            "(SET GLOBAL binlog_format='ROW' and in the server configuration)",
            "BinlogFormatNotRow",
        )
    image = v.get("binlog_row_image", "FULL").upper()
    if image != "FULL":
        raise SourceConfigError(
            f"binlog_row_image is {image} on the source: set binlog_row_image=FULL so every row event "
            "carries whole before and after images",
            "BinlogRowImageNotFull",
        )
    if "PARTIAL_JSON" in v.get("binlog_row_value_options", "").upper():
        raise SourceConfigError(
            "binlog_row_value_options is PARTIAL_JSON on the source: JSON updates would be logged as diffs "
            "without the whole document; set binlog_row_value_options='' (the default)",
            "PartialJsonBinlog",
        )
    gtid_mode = "ON" if flavor == "mariadb" else v.get("gtid_mode", "OFF").upper()
    if require_gtids and gtid_mode != "ON":
        raise SourceConfigError(
            f"gtid_mode is {gtid_mode} on the source and spec.failover.mode is gtid: set gtid_mode=ON and "
            "enforce_gtid_consistency=ON on the server (step by step: SET PERSIST gtid_mode=OFF_PERMISSIVE, "
            "ON_PERMISSIVE, then ON), or set spec.failover.mode: heartbeat",
            "GtidModeOff",
        )
    missing = _missing_privileges(grants)
    if missing:
        raise SourceConfigError(
            f"user {user!r} lacks {', '.join(missing)}: run GRANT {', '.join(missing)} ON *.* TO '{user}'@'%'",
            "MissingGrant",
        )
    metadata = v.get("binlog_row_metadata", "MINIMAL").upper()
    if metadata != "FULL":
        log.warning(
            "binlog_row_metadata is %s: decoding relies on the schema history alone; set "
            "binlog_row_metadata=FULL for column names, signedness and charsets in every event",
            metadata,
        )
    source_id = int(v.get("server_id", "0"))
    if source_id == replica_server_id:
        raise SourceConfigError(
            f"spec.source.serverId {replica_server_id} is the source's own server_id: choose an id no server "
            "in the replication topology uses",
            "ServerIdClash",
        )
    if check_server_id:
        # Skipped on a reconnect: our own dropped stream may still be registered, and the server
        # replaces it when the new one registers.
        _check_server_id_free(conn, dialect, replica_server_id, sleep, server_id_wait_seconds)
    domain = v.get("gtid_domain_id")
    return ServerInfo(
        version=version,
        flavor=flavor,
        server_id=source_id,
        server_uuid=v.get("server_uuid", ""),
        gtid_domain_id=int(domain) if domain not in (None, "") else None,
        row_metadata=metadata,
        gtid_mode=gtid_mode,
    )


def _check_server_id_free(
    conn: pymysql.connections.Connection,
    dialect: Dialect,
    server_id: int,
    sleep: Callable[[float], None],
    wait: float,
) -> None:
    """Fail when another replica is registered with our server_id.

    A worker killed a moment ago may still be registered until the server notices its socket is
    gone, so a conflict is re-checked for `wait` seconds before it is reported.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            registered = queries.replica_server_ids(conn, dialect)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] not in (1044, 1227):
                raise
            # MariaDB 10.5+ lets only REPLICATION MASTER ADMIN list replicas; capturing needs no more than the
            # documented grants, so the check is skipped, and the log says what it costs and how to have it.
            log.warning(
                "not checking that server_id %d is free: %s needs a privilege the capture user lacks (%s); "
                "GRANT REPLICATION MASTER ADMIN to have it checked (two replicas with one server_id disconnect "
                "each other)",
                server_id,
                dialect.replica_hosts,
                exc.args[-1],
            )
            return
        if server_id not in registered:
            return
        if time.monotonic() >= deadline:
            raise SourceConfigError(
                f"replica server_id {server_id} is already in use by another replica of this server "
                f"({dialect.replica_hosts}): give this capture a unique spec.source.serverId",
                "ServerIdClash",
            )
        sleep(0.5)
