"""Private MariaDB instances (Debian's mariadb-server), the embedded default of `make demo`."""

from __future__ import annotations

import shutil
import subprocess
from typing import ClassVar

from mysqlcapture_worker.source.dialect import Flavor

from mysqlcapture_dev.embedded.server import PrivateServer, ServerStartError, free_port

__all__ = ["MariaDBServer", "ServerStartError", "free_port", "start_server"]

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"


class MariaDBServer(PrivateServer):
    """One private mariadbd process."""

    FLAVOR: ClassVar[Flavor] = "mariadb"
    DEFAULT_SETTINGS: ClassVar[dict[str, str]] = {
        "log_bin": "mysql-bin",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "gtid_strict_mode": "ON",
        "log_slave_updates": "ON",
        "character_set_server": "utf8mb4",
        "collation_server": "utf8mb4_general_ci",
        "default_time_zone": "+00:00",
        "innodb_buffer_pool_size": "64M",
        "innodb_log_file_size": "48M",
        "innodb_flush_log_at_trx_commit": "2",
        "sync_binlog": "0",
        "max_binlog_size": "256M",
        "skip_name_resolve": "ON",
        "max_allowed_packet": "256M",
        "performance_schema": "OFF",
    }

    def client_program(self) -> list[str]:
        return ["mariadb"]

    def _command(self) -> list[str]:
        return [MARIADBD, "--no-defaults"]

    def _init_datadir(self) -> None:
        result = subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                # Its own temporary tables in the server's own directory: in the shared /tmp a bootstrap beside
                # other tests' servers once lost one ("Could not remove temporary table ... Unknown table").
                f"--tmpdir={self.basedir}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ServerStartError(f"mariadb-install-db failed: {result.stderr[-2000:]}")

    def _bootstrap_statements(self) -> list[str]:
        pw = self.root_password
        return [
            f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{pw}'",
            f"CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{pw}'",
            "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
        ]


def start_server(server_id: int, **settings: str) -> MariaDBServer:
    """Start a private MariaDB with the defaults overridden by `settings`."""
    return MariaDBServer(server_id=server_id, settings=dict(settings)).start()
