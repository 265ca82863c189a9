"""Private MySQL instances: Debian sid's mysql-server-core (9.7 LTS), unpacked by `make setup` outside the system.

`tests/mysql/fetch-mysql.sh` unpacks the server and its library closure into `MYSQLCAPTURE_MYSQL_HOME` (default
`~/.cache/mysqlcapture/mysql-sid`); mysqld runs through that tree's own dynamic loader, so sid's libc never meets
the system's. A new datadir is a copy of one initialised template (``--initialize-insecure`` takes seconds, a copy
a fraction of one), each with its own server_uuid. A failed download leaves its reason in `FAILED`: starting a
server then fails with that reason, so the MySQL tier never skips silently.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

from mysqlcapture_worker.source.dialect import Flavor

from mysqlcapture_dev.embedded.server import PrivateServer, ServerStartError

__all__ = ["MySQLServer", "mysql_home", "start_server"]


def mysql_home() -> Path:
    """Where `make setup` unpacked the MySQL server."""
    env = os.environ.get("MYSQLCAPTURE_MYSQL_HOME")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mysqlcapture" / "mysql-sid"


def _installation() -> Path:
    home = mysql_home()
    failed = home / "FAILED"
    if failed.exists():
        raise ServerStartError(f"MySQL is not available: {failed.read_text().strip()} (rerun `make setup`)")
    if not (home / "root" / "usr" / "sbin" / "mysqld").exists():
        raise ServerStartError(
            f"MySQL is not unpacked in {home}: run `make setup` (or `make mysql-server`), which fetches Debian "
            "sid's mysql-server-core into the cache"
        )
    return home / "root"


def _loader(root: Path) -> list[str]:
    libs = root / "usr" / "lib" / "x86_64-linux-gnu"
    return [str(libs / "ld-linux-x86-64.so.2"), "--library-path", str(libs)]


def _mysqld(root: Path) -> list[str]:
    return [*_loader(root), str(root / "usr" / "sbin" / "mysqld"), "--no-defaults"]


def _paths(root: Path) -> list[str]:
    return [
        f"--basedir={root / 'usr'}",
        f"--lc-messages-dir={root / 'usr' / 'share' / 'mysql'}",
        f"--plugin-dir={root / 'usr' / 'lib' / 'mysql' / 'plugin'}",
    ]


def _template(root: Path) -> Path:
    """An initialised datadir to copy (made once per unpacked server, under a file lock)."""
    template = root.parent / "template-datadir"
    if (template / "mysql.ibd").exists():
        return template
    with open(root.parent / "template.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (template / "mysql.ibd").exists():
            return template
        scratch = root.parent / "template-datadir.new"
        shutil.rmtree(scratch, ignore_errors=True)
        result = subprocess.run(
            [*_mysqld(root), "--initialize-insecure", f"--datadir={scratch}", *_paths(root), "--user=root"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ServerStartError(f"mysqld --initialize-insecure failed: {result.stderr[-2000:]}")
        scratch.rename(template)
    return template


class MySQLServer(PrivateServer):
    """One private mysqld process."""

    FLAVOR: ClassVar[Flavor] = "mysql"
    DEFAULT_SETTINGS: ClassVar[dict[str, str]] = {
        "log_bin": "mysql-bin",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "gtid_mode": "ON",
        "enforce_gtid_consistency": "ON",
        "log_replica_updates": "ON",
        "character_set_server": "utf8mb4",
        "default_time_zone": "+00:00",
        "innodb_buffer_pool_size": "64M",
        "innodb_redo_log_capacity": "64M",
        "innodb_flush_log_at_trx_commit": "2",
        "innodb_doublewrite": "OFF",
        "sync_binlog": "0",
        "max_binlog_size": "256M",
        "skip_name_resolve": "ON",
        "max_allowed_packet": "256M",
        "performance_schema": "OFF",
        "mysqlx": "OFF",
        # The packaged default (/var/lib/mysql-files) does not exist here, and mysqld refuses to start without it.
        "secure_file_priv": "''",
    }

    def client_program(self) -> list[str]:
        root = _installation()
        return [*_loader(root), str(root / "usr" / "bin" / "mysql")]

    def _command(self) -> list[str]:
        root = _installation()
        return [*_mysqld(root), *_paths(root)]

    def _init_datadir(self) -> None:
        template = _template(_installation())
        shutil.copytree(template, self.datadir)
        (self.datadir / "auto.cnf").unlink(missing_ok=True)  # a server_uuid of its own, made at first start

    def _bootstrap_statements(self) -> list[str]:
        pw = self.root_password
        return [
            f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{pw}'",
            "DROP USER IF EXISTS 'root'@'127.0.0.1'",
            f"CREATE USER 'root'@'127.0.0.1' IDENTIFIED BY '{pw}'",
            "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION",
        ]


def start_server(server_id: int, **settings: str) -> MySQLServer:
    """Start a private MySQL with the defaults overridden by `settings`."""
    return MySQLServer(server_id=server_id, settings=dict(settings)).start()
