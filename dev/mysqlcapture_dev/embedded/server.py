"""A private database server on 127.0.0.1: what MariaDB and MySQL instances share (`mariadb.py`, `mysql.py`).

Each instance has its own temporary datadir, port, socket and server_id, row-based binary logging and GTIDs. A
replica can be attached to a primary, by the statements of the server's own dialect. Nothing here touches a
system-wide server: all state lives under the instance's base directory.
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
from functools import cached_property
from pathlib import Path
from typing import ClassVar, Self

import pymysql
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.gtid import GtidSet
from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.dialect import Dialect, Flavor
from mysqlcapture_worker.source.queries import BinlogStatus


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerStartError(RuntimeError):
    """The private server did not come up; the message carries the reason or the tail of its error log."""


@dataclass
class PrivateServer:
    """One private server process. Use `start()` / `stop()` or as a context manager."""

    FLAVOR: ClassVar[Flavor]
    DEFAULT_SETTINGS: ClassVar[dict[str, str]]

    server_id: int
    settings: dict[str, str] = field(default_factory=dict)
    basedir: Path | None = None
    port: int = 0
    root_password: str = "root"
    _proc: subprocess.Popen[bytes] | None = None
    _owns_basedir: bool = False

    @property
    def flavor(self) -> Flavor:
        return self.FLAVOR

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
        merged = dict(self.DEFAULT_SETTINGS)
        merged.update(self.settings)
        return {k: v for k, v in merged.items() if v is not None}

    # -- what each flavor defines ------------------------------------------------------------------------------
    def _command(self) -> list[str]:
        """The server binary (with its loader, if any) and the options every start needs."""
        raise NotImplementedError

    def _init_datadir(self) -> None:
        raise NotImplementedError

    def _bootstrap_statements(self) -> list[str]:
        """Run once on a new datadir over the socket as root (no password yet), outside the binlog."""
        raise NotImplementedError

    # -- life cycle --------------------------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> Self:
        if self.basedir is None:
            self.basedir = Path(tempfile.mkdtemp(prefix=f"{self.FLAVOR}-{self.server_id}-"))
            self._owns_basedir = True
        self.basedir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        fresh = not (self.datadir / "mysql").exists()
        if fresh:
            self._init_datadir()
        args = [
            *self._command(),
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
            option = key.replace("_", "-")
            if key == "log_bin":
                # "OFF" starts a server without binary logging, for the negative tests.
                args.append("--skip-log-bin" if value.upper() == "OFF" else f"--log-bin={self.datadir / value}")
            elif value == "":
                args.append(f"--{option}")
            elif value == "''":
                args.append(f"--{option}=")  # an option whose value is the empty string
            else:
                args.append(f"--{option}={value}")
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready(timeout)
        if fresh:
            self._bootstrap_users()
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise ServerStartError(f"{self.FLAVOR} exited with {self._proc.returncode}: {self.log_tail()}")
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
        raise ServerStartError(f"{self.FLAVOR} not ready after {timeout}s ({last_error}): {self.log_tail()}")

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
                for statement in self._bootstrap_statements():
                    cur.execute(statement)
        finally:
            conn.close()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.error_log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no error log)"

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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- SQL -----------------------------------------------------------------------------------------------------
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

    def client_program(self) -> list[str]:
        """The flavor's own command-line client (`mariadb`, `mysql`), as a command's first words."""
        raise NotImplementedError

    def client_command(self, *args: str) -> list[str]:
        """The flavor's command-line client, as root over TCP to this server, reading no option file (the password
        goes in the environment: `client_env()`; MySQL's client warns about one on its command line)."""
        return [
            *self.client_program(),
            "--no-defaults",
            "-h",
            "127.0.0.1",
            "-P",
            str(self.port),
            "-uroot",
            *args,
        ]

    def client_env(self) -> dict[str, str]:
        return {**os.environ, "MYSQL_PWD": self.root_password}

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

    @cached_property
    def dialect(self) -> Dialect:
        return Dialect.of(str(self.query("SELECT VERSION()")[0][0]))

    @property
    def version(self) -> str:
        return str(self.dialect.version)

    def binlog_status(self) -> BinlogStatus:
        """The current binlog file:pos (and MySQL's executed GTID set)."""
        conn = self.connect()
        try:
            return queries.binlog_status(conn, self.dialect)
        finally:
            conn.close()

    def gtid_executed(self) -> GtidSet:
        """Every transaction this server has written to its binlog, as a GTID set of its flavor."""
        return GtidSet.parse(str(self.query(self.dialect.gtid_executed)[0][0] or ""), self.FLAVOR)

    def gtid_at(self, at: Coordinate) -> str:
        """The GTID set a capture starting at `at` has seen (MariaDB's BINLOG_GTID_POS; MySQL: "")."""
        conn = self.connect()
        try:
            return queries.gtid_at(conn, self.dialect, at)
        finally:
            conn.close()

    def flush_and_purge(self) -> str:
        """Rotate to a new binlog and purge every older one; returns the file kept."""
        self.execute("FLUSH BINARY LOGS")
        current = self.binlog_status().file
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self.execute(f"PURGE BINARY LOGS TO '{current}'")
            if str(self.query("SHOW BINARY LOGS")[0][0]) == current:
                return current
            time.sleep(0.2)
        raise TimeoutError(f"the server kept binlogs older than {current}: PURGE BINARY LOGS did not take")

    # -- replication ---------------------------------------------------------------------------------------------
    def make_replica_of(self, primary: PrivateServer) -> None:
        """Replicate from `primary` by GTID auto-positioning, from its first transaction."""
        d = self.dialect
        self.execute(
            d.stop_replica,
            d.change_source(host="127.0.0.1", port=primary.port, user="root", password=primary.root_password),
            d.start_replica,
        )

    def promote(self) -> None:
        """Stop replicating and forget the source: this server is a primary now."""
        self.execute(self.dialect.stop_replica, self.dialect.reset_replica_all)

    def replica_applied(self) -> GtidSet:
        return GtidSet.parse(str(self.query(self.dialect.replica_applied)[0][0] or ""), self.FLAVOR)

    def wait_replica_caught_up(self, primary: PrivateServer, timeout: float = 60.0) -> None:
        """Wait until this replica has applied every transaction the primary had written at the time of the call.

        Containment, not equality: the primary may write more (a capture's heartbeats, one a second) while
        this waits, and an equality test can step past the target between two polls.
        """
        target = primary.gtid_executed()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.replica_applied().contains(target):
                return
            time.sleep(0.05)
        conn = self.connect()
        try:
            status = queries.replica_status(conn, self.dialect)
        finally:
            conn.close()
        state = {k: v for k, v in status.items() if str(k).endswith(("_Running", "_Error")) and v}
        raise TimeoutError(f"replica did not reach primary GTID {target!r} within {timeout}s: {state}")
