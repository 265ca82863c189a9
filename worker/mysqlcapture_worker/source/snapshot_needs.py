"""What a lock-free snapshot needs of the source, and whether it has it (`mysqlcapture check`, the worker's start).

No lock, so no RELOAD, LOCK TABLES or BACKUP_ADMIN: what the capture user has on RDS and Aurora is enough.
MariaDB places each read's view in the binlog itself (`binlog_snapshot_position`). MySQL places it after a
heartbeat the snapshot writes (so it writes to the heartbeat database) and relies on InnoDB committing in
binlog order (`binlog_order_commits=ON`, the default) for a committed heartbeat to mean that every transaction
before it has committed (`snapshot.parallel`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.dialect import Dialect


@dataclass(frozen=True)
class Need:
    """One thing the snapshot needs: what, whether the source has it, and the fix when it has not."""

    what: str
    ok: bool
    fix: str = ""
    who: str = "snapshot"  # what needs it

    def line(self) -> str:
        return f"{self.who} needs {self.what}: {'ok' if self.ok else 'MISSING: ' + self.fix}"


def _writes_heartbeats(grants: list[str], database: str) -> bool:
    for grant in grants:
        m = re.match(r"GRANT (.+?) ON (\S+) TO", grant, re.IGNORECASE | re.DOTALL)
        if not m:
            continue
        target = m.group(2).replace("`", "")
        privs = {p.strip() for p in m.group(1).upper().split(",")}
        if target in ("*.*", f"{database}.*") and (
            "ALL PRIVILEGES" in privs or {"CREATE", "INSERT", "UPDATE"} <= privs
        ):
            return True
    return False


def heartbeat_need(conn: Any, *, user: str, database: str) -> Need:
    """The grant the worker's heartbeats need (writes of its row, resnapshot requests, on both flavors)."""
    return Need(
        f"CREATE, INSERT, UPDATE on {database}.* (lag when idle, failover by heartbeat, resnapshot requests)",
        _writes_heartbeats(queries.grants(conn), database),
        f"GRANT CREATE, INSERT, UPDATE ON {database}.* TO '{user}'@'%', or spec.heartbeat.intervalSeconds: 0 to "
        "write none",
        who="heartbeat",
    )


def snapshot_needs(conn: Any, dialect: Dialect, *, user: str, heartbeat_database: str, parallelism: int) -> list[Need]:
    """Each need of a snapshot on this server, checked."""
    needs = [Need("no lock (no FLUSH TABLES WITH READ LOCK, LOCK TABLES or LOCK INSTANCE; no RELOAD grant)", True)]
    grants = queries.grants(conn)
    if dialect.snapshot_frontier_from_status:
        rows = queries._rows(conn, "SHOW SESSION STATUS LIKE 'binlog_snapshot_position'")
        needs.append(
            Need(
                "binlog_snapshot_position (MariaDB: each read's exact place in the binlog)",
                bool(rows),
                "MariaDB 5.3 or later, with binary logging on",
            )
        )
    else:
        order = str(queries.variables(conn, ["binlog_order_commits"]).get("binlog_order_commits", "ON")).upper()
        needs.append(
            Need(
                "binlog_order_commits=ON (MySQL: transactions commit in binlog order)",
                order in ("ON", "1"),
                "SET PERSIST binlog_order_commits=ON (the default), or spec.snapshot.mode: never",
            )
        )
        needs.append(
            Need(
                f"CREATE, INSERT, UPDATE on {heartbeat_database}.* (MySQL: the snapshot's fence heartbeats)",
                _writes_heartbeats(grants, heartbeat_database),
                f"GRANT CREATE, INSERT, UPDATE ON {heartbeat_database}.* TO '{user}'@'%'",
            )
        )
    limit = queries.variables(conn, ["max_user_connections", "max_connections"])
    allowed = int(limit.get("max_user_connections") or 0) or int(limit.get("max_connections") or 0)
    wanted = parallelism + 4  # the readers, the stream, the heartbeat, the poller, the purge watch
    needs.append(
        Need(
            f"{wanted} connections at once (spec.snapshot.parallelism {parallelism} readers and the worker's own)",
            allowed == 0 or allowed >= wanted,
            f"lower spec.snapshot.parallelism, or raise max_user_connections (now {allowed})",
        )
    )
    return needs
