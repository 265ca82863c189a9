"""Start and stop private MariaDB instances (Debian's mariadb-server) on 127.0.0.1.

Each instance has its own temporary datadir, port, socket and server_id, row-based binary
logging and GTIDs. A replica can be attached to a primary. Nothing here touches a system-wide
MariaDB: all state lives under the instance's base directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from mysqlcapture_worker.gtid import GtidSet

MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"

DEFAULT_SETTINGS: dict[str, str] = {
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


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerStartError(RuntimeError):
    """The private MariaDB did not come up; the message carries the tail of its error log."""


@dataclass
class MariaDBServer:
    """One private mariadbd process. Use `start()` / `stop()` or as a context manager."""

    server_id: int
    settings: dict[str, str] = field(default_factory=dict)
    basedir: Path | None = None
    port: int = 0
    root_password: str = "root"
    _proc: subprocess.Popen[bytes] | None = None
    _owns_basedir: bool = False

    @property
    def datadir(self) -> Path:
        assert self.basedir is not None
        return self.basedir / "data"

    @property
    def socket_path(self) -> Path:
        assert self.basedir is not None
        return self.basedir / "mysqld.sock"

    @property
    def error_log(self) -> Path:
        assert self.basedir is not None
        return self.basedir / "error.log"

    def effective_settings(self) -> dict[str, str]:
        merged = dict(DEFAULT_SETTINGS)
        merged.update(self.settings)
        return {k: v for k, v in merged.items() if v is not None}

    def start(self, timeout: float = 60.0) -> MariaDBServer:
        if self.basedir is None:
            self.basedir = Path(tempfile.mkdtemp(prefix=f"mariadb-{self.server_id}-"))
            self._owns_basedir = True
        self.basedir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        fresh = not (self.datadir / "mysql").exists()
        if fresh:
            self._install_db()
        args = [
            MARIADBD,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.socket_path}",
            f"--pid-file={self.basedir / 'mysqld.pid'}",
            f"--log-error={self.error_log}",
            f"--tmpdir={self.basedir}",
            "--bind-address=127.0.0.1",
            f"--port={self.port}",
            f"--server-id={self.server_id}",
            "--user=root",
        ]
        for key, value in self.effective_settings().items():
            if key == "log_bin":
                # "OFF" starts a server without binary logging, for the negative tests.
                args.append("--skip-log-bin" if value.upper() == "OFF" else f"--log-bin={self.datadir / value}")
            elif value == "":
                args.append(f"--{key.replace('_', '-')}")
            else:
                args.append(f"--{key.replace('_', '-')}={value}")
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready(timeout)
        if fresh:
            self._bootstrap_users()
        return self

    def _install_db(self) -> None:
        result = subprocess.run(
            [
                INSTALL_DB,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ServerStartError(f"mariadb-install-db failed: {result.stderr[-2000:]}")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise ServerStartError(f"mariadbd exited with {self._proc.returncode}: {self.log_tail()}")
            if not self._socket_accepts():
                time.sleep(0.1)
                continue
            try:
                conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", connect_timeout=2)
                conn.close()
                return
            except pymysql.err.OperationalError as exc:
                if exc.args and exc.args[0] == 1045:  # access denied: up, password already set
                    return
                last_error = exc
            time.sleep(0.1)
        raise ServerStartError(f"mariadbd not ready after {timeout}s ({last_error}): {self.log_tail()}")

    def _socket_accepts(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(self.socket_path))
                return True
            except OSError:
                return False

    def _bootstrap_users(self) -> None:
        conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", autocommit=True)
        try:
            with conn.cursor() as cur:
                # Everything the bootstrap does must stay out of the binlog: a capture starting at
                # the earliest position must see only what the test wrote.
                cur.execute("SET sql_log_bin = 0")
                cur.execute(f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{self.root_password}'")
                cur.execute(f"CREATE OR REPLACE USER 'root'@'127.0.0.1' IDENTIFIED BY '{self.root_password}'")
                cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        finally:
            conn.close()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.error_log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no error log)"

    def connect(self, database: str | None = None, **kwargs: object) -> pymysql.connections.Connection:
        """A root connection over TCP, autocommit on unless told otherwise."""
        params: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": "root",
            "password": self.root_password,
            "autocommit": True,
            "charset": "utf8mb4",
        }
        if database:
            params["database"] = database
        params.update(kwargs)
        return pymysql.connect(**params)

    def execute(self, *statements: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                for stmt in statements:
                    cur.execute(stmt)
        finally:
            conn.close()

    def query(self, sql: str, args: object = None) -> list[tuple[object, ...]]:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    def kill(self) -> None:
        """SIGKILL the server (a crash): its datadir stays for a restart."""
        if self._proc and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(timeout=30)
        self._proc = None

    def stop(self, remove: bool = True) -> None:
        """Shut down cleanly; remove the base directory if this object created it."""
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=30)
        self._proc = None
        if remove and self._owns_basedir and self.basedir is not None:
            shutil.rmtree(self.basedir, ignore_errors=True)

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> MariaDBServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def make_replica_of(self, primary: MariaDBServer) -> None:
        """Replicate from `primary` by GTID, from its first transaction."""
        self.execute(
            "STOP SLAVE",
            f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
            f"MASTER_USER='root', MASTER_PASSWORD='{primary.root_password}', MASTER_USE_GTID=slave_pos",
            "START SLAVE",
        )

    def wait_replica_caught_up(self, primary: MariaDBServer, timeout: float = 60.0) -> None:
        """Wait until this replica has applied every transaction the primary had written at the time of the call.

        Containment, not equality: the primary may write more (a capture's heartbeats, one a second) while
        this waits, and an equality test can step past the target between two polls.
        """
        target = GtidSet.parse(str(primary.query("SELECT @@gtid_binlog_pos")[0][0]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if GtidSet.parse(str(self.query("SELECT @@gtid_slave_pos")[0][0])).contains(target):
                return
            time.sleep(0.05)
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW SLAVE STATUS")
                row = cur.fetchone() or ()
                names = [d[0] for d in cur.description or ()]
        finally:
            conn.close()
        state = {k: v for k, v in zip(names, row, strict=False) if k.endswith(("_Running", "_Error")) and v}
        raise TimeoutError(f"replica did not reach primary GTID {target!r} within {timeout}s: {state}")


def start_server(server_id: int, **settings: str) -> MariaDBServer:
    """Start a private server with the defaults overridden by `settings`."""
    return MariaDBServer(server_id=server_id, settings=dict(settings)).start()


if __name__ == "__main__":  # pragma: no cover - manual use
    srv = start_server(int(os.environ.get("SERVER_ID", "1")))
    print(f"port={srv.port} basedir={srv.basedir}")
    try:
        signal.pause()
    finally:
        srv.stop()
