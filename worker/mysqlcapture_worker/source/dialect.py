"""What differs between source servers, by flavor and version: the one place a new server version changes.

MySQL 8.0.22 renamed the replication statements (`SHOW REPLICAS`, `SHOW REPLICA STATUS`, `START REPLICA`,
`CHANGE REPLICATION SOURCE TO ... SOURCE_*`), 8.2 renamed `SHOW MASTER STATUS` to `SHOW BINARY LOG STATUS`, and
8.4 removed the old names. MariaDB keeps the old names (its new aliases differ from MySQL's), and keeps its GTID
state in variables of its own. Everything here is pure: a `Dialect` from the `version` string, then statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mysqlcapture_worker.gtid import Flavor

__all__ = ["Dialect", "Flavor", "ServerVersion"]

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, order=True)
class ServerVersion:
    """A server's `version`: flavor and (major, minor, patch); MariaDB's `5.5.5-` replication prefix dropped."""

    flavor: Flavor
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> ServerVersion:
        """Parse `SELECT VERSION()` / `@@version`, e.g. "9.7.4-2", "8.0.36-0ubuntu", "10.11.6-MariaDB-0+deb12u1".

        A version without a numeric patch (Aurora's "8.0.mysql_aurora.3.05.2") counts as patch 0: the oldest
        statements of that series, which every later patch still serves.
        """
        flavor: Flavor = "mariadb" if "mariadb" in text.lower() else "mysql"
        body = text[len("5.5.5-") :] if flavor == "mariadb" and text.startswith("5.5.5-") else text
        m = _VERSION.match(body)
        if m is None:
            raise ValueError(f"unrecognised server version {text!r}: expected major.minor.patch")
        return cls(flavor, int(m[1]), int(m[2]), int(m[3] or 0))

    def at_least(self, major: int, minor: int = 0, patch: int = 0) -> bool:
        return (self.major, self.minor, self.patch) >= (major, minor, patch)

    def __str__(self) -> str:
        name = "MariaDB" if self.flavor == "mariadb" else "MySQL"
        return f"{name} {self.major}.{self.minor}.{self.patch}"


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(frozen=True)
class Dialect:
    """The statements and variable names of one server version."""

    version: ServerVersion

    @classmethod
    def of(cls, version_text: str) -> Dialect:
        return cls(ServerVersion.parse(version_text))

    @property
    def flavor(self) -> Flavor:
        return self.version.flavor

    @property
    def mariadb(self) -> bool:
        return self.version.flavor == "mariadb"

    @property
    def _new_replica_names(self) -> bool:
        return not self.mariadb and self.version.at_least(8, 0, 22)

    # -- the binary log ----------------------------------------------------------------------------------------
    @property
    def binlog_status(self) -> str:
        """Current file, position (and on MySQL the executed GTID set, 5th column)."""
        if not self.mariadb and self.version.at_least(8, 2):
            return "SHOW BINARY LOG STATUS"
        return "SHOW MASTER STATUS"

    @property
    def gtid_executed(self) -> str:
        """Every transaction in this server's binlogs (MariaDB: the last GTID per domain it wrote or applied)."""
        return "SELECT @@GLOBAL.gtid_binlog_pos" if self.mariadb else "SELECT @@GLOBAL.gtid_executed"

    @property
    def gtid_purged(self) -> str | None:
        """Transactions no longer in this server's binlogs; None on MariaDB (ask `gtid_at` of the first file)."""
        return None if self.mariadb else "SELECT @@GLOBAL.gtid_purged"

    @property
    def gtid_at(self) -> str | None:
        """MariaDB only: the GTID position of a file:pos (`%s, %s` parameters)."""
        return "SELECT BINLOG_GTID_POS(%s, %s)" if self.mariadb else None

    @property
    def replica_hosts(self) -> str:
        """Replicas registered with this server (first column: their server_id)."""
        return "SHOW REPLICAS" if self._new_replica_names else "SHOW SLAVE HOSTS"

    @property
    def replica_status(self) -> str:
        if self._new_replica_names:
            return "SHOW REPLICA STATUS"
        return "SHOW SLAVE STATUS"

    @property
    def start_replica(self) -> str:
        return "START REPLICA" if self._new_replica_names else "START SLAVE"

    @property
    def stop_replica(self) -> str:
        return "STOP REPLICA" if self._new_replica_names else "STOP SLAVE"

    @property
    def reset_replica_all(self) -> str:
        return "RESET REPLICA ALL" if self._new_replica_names else "RESET SLAVE ALL"

    @property
    def log_replica_updates(self) -> str:
        """The variable that makes a replica write what it applies to its own binlog."""
        return "log_replica_updates" if self._new_replica_names else "log_slave_updates"

    def change_source(self, *, host: str, port: int, user: str, password: str) -> str:
        """Replicate from `host:port` by GTID auto-positioning, from the source's first transaction."""
        if self.mariadb:
            return (
                f"CHANGE MASTER TO MASTER_HOST={_quote(host)}, MASTER_PORT={int(port)}, MASTER_USER={_quote(user)}, "
                f"MASTER_PASSWORD={_quote(password)}, MASTER_USE_GTID=slave_pos"
            )
        if self._new_replica_names:
            return (
                f"CHANGE REPLICATION SOURCE TO SOURCE_HOST={_quote(host)}, SOURCE_PORT={int(port)}, "
                f"SOURCE_USER={_quote(user)}, SOURCE_PASSWORD={_quote(password)}, SOURCE_AUTO_POSITION=1, "
                "GET_SOURCE_PUBLIC_KEY=1"
            )
        return (
            f"CHANGE MASTER TO MASTER_HOST={_quote(host)}, MASTER_PORT={int(port)}, MASTER_USER={_quote(user)}, "
            f"MASTER_PASSWORD={_quote(password)}, MASTER_AUTO_POSITION=1, GET_MASTER_PUBLIC_KEY=1"
        )

    @property
    def replica_applied(self) -> str:
        """What a replica has applied, as a GTID set of this flavor."""
        return "SELECT @@GLOBAL.gtid_slave_pos" if self.mariadb else "SELECT @@GLOBAL.gtid_executed"

    # -- snapshots ---------------------------------------------------------------------------------------------
    @property
    def snapshot_frontier_from_status(self) -> bool:
        """True on MariaDB: `binlog_snapshot_file`/`_position` give the coordinate of the read view itself."""
        return self.mariadb
