"""The heartbeat writer: a row on the source, updated every interval, that the stream reads back.

Maxwell's scheme: `<db>.heartbeats(server_id, client_id, heartbeat)`. The value is a
strictly increasing millisecond timestamp, so the last one seen in the stream is a unique marker
of a place in the binlog — on another server too, once replicated there with log_slave_updates.
Grants: CREATE, INSERT, UPDATE on the heartbeat database (`GRANT CREATE, INSERT, UPDATE ON mysqlcapture.*`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pymysql

from mysqlcapture_worker.source import queries

log = logging.getLogger(__name__)

TABLE = "heartbeats"
# The server's "access denied" errors: to the database (1044), to a table (1142), to a command (1227).
DENIED = frozenset({1044, 1142, 1227})


def ensure_table(conn: Any, database: str) -> None:
    """Create the heartbeat database and table when absent (needs CREATE on the database)."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS `{database}`.`{TABLE}` ("
            " server_id INT UNSIGNED NOT NULL,"
            " client_id VARCHAR(255) NOT NULL,"
            " heartbeat BIGINT NOT NULL,"
            " PRIMARY KEY (server_id, client_id))"
        )


class HeartbeatWriter:
    """Writes `heartbeat = now (ms)` for this capture every `interval` seconds, in its own thread.

    Errors are logged and retried on the next beat: a source that is down is the reader's problem to
    report, and a heartbeat must never stop the capture.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        database: str,
        client_id: str,
        interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._connect = connect
        self._database = database
        self._client_id = client_id
        self._interval = interval
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()  # one beat at a time: the row's value only grows, in the binlog too
        self._fence_conn: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
        self.beats = 0

    def start(self) -> HeartbeatWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        elif self._fence_conn is not None:  # never started: only fences were written
            with contextlib.suppress(Exception):
                self._fence_conn.close()
            self._fence_conn = None

    def next_value(self) -> int:
        value = max(int(self._clock() * 1000), self._last + 1)
        self._last = value
        return value

    def beat(self, conn: Any) -> int:
        """Write one heartbeat on `conn`; returns the value written."""
        server_id = queries.server_id(conn)
        with self._lock, conn.cursor() as cur:
            value = self.next_value()
            cur.execute(
                f"INSERT INTO `{self._database}`.`{TABLE}` (server_id, client_id, heartbeat) VALUES (%s, %s, %s) "
                # Not VALUES(heartbeat): MySQL 8.0.20+ deprecates VALUES() in ON DUPLICATE KEY UPDATE.
                "ON DUPLICATE KEY UPDATE heartbeat = %s",
                (server_id, self._client_id, value, value),
            )
            self.beats += 1
        return value

    def fence(self) -> int:
        """One heartbeat now, on a connection of its own, committed when this returns (a snapshot's fence:
        every transaction before it in the binlog is visible to a read that starts after it)."""
        for attempt in (1, 2):
            try:
                if self._fence_conn is None:
                    self._fence_conn = self._connect()
                    ensure_table(self._fence_conn, self._database)
                return self.beat(self._fence_conn)
            except pymysql.err.OperationalError:
                with contextlib.suppress(Exception):
                    self._fence_conn.close()
                self._fence_conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _run(self) -> None:
        conn: Any = None
        while not self._stop.wait(self._interval):
            try:
                if conn is None:
                    conn = self._connect()
                    ensure_table(conn, self._database)
                self.beat(conn)
            except pymysql.err.MySQLError as exc:
                fix = (
                    f": GRANT CREATE, INSERT, UPDATE ON {self._database}.* to the capture user (or set "
                    "spec.heartbeat.intervalSeconds: 0 to write none: no lag measured when idle, no failover by "
                    "heartbeat search, no resnapshot requests)"
                    if exc.args and exc.args[0] in DENIED
                    else ""
                )
                log.warning("heartbeat write failed (%s)%s; retrying in %.0fs", exc, fix, self._interval)
                if conn is not None:
                    with contextlib.suppress(Exception):  # the connection is already gone
                        conn.close()
                conn = None
        if conn is not None:
            conn.close()
        if self._fence_conn is not None:
            with contextlib.suppress(Exception):
                self._fence_conn.close()
