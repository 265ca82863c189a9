"""Re-snapshot requests: rows in the capture's metadata database on the source, polled by the worker.

`mysqlcapture resnapshot` inserts a row; the running worker polls for rows of its capture not yet
done, snapshots the tables between two transactions of the stream, and marks them done. A table
on the source rather than a signal or an HTTP call: it works wherever the worker runs (a pod), needs
no extra port or credentials, survives a worker restart, and leaves a record of each request.
Grants: CREATE, INSERT, UPDATE ON <database>.* (the heartbeat database).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

TABLE = "snapshot_requests"


@dataclass(frozen=True)
class Request:
    id: int
    table: str | None  # "db.table", or None for every included table


def ensure_table(conn: Any, database: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS `{database}`.`{TABLE}` ("
            " id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,"
            " client_id VARCHAR(255) NOT NULL,"
            " table_name VARCHAR(255) NULL,"
            " requested_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),"
            " done_at DATETIME(6) NULL,"
            " KEY pending (client_id, done_at))"
        )


def request_snapshot(conn: Any, *, database: str, client_id: str, table: str | None) -> int:
    """Ask the capture `client_id` to snapshot `table` ("db.table") or all its tables; returns the id."""
    ensure_table(conn, database)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO `{database}`.`{TABLE}` (client_id, table_name) VALUES (%s, %s)", (client_id, table))
        request_id = int(cur.lastrowid)
    conn.commit()
    return request_id


def pending(conn: Any, *, database: str, client_id: str) -> list[Request]:
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT id, table_name FROM `{database}`.`{TABLE}` WHERE client_id = %s AND done_at IS NULL ORDER BY id",
            (client_id,),
        )
        return [Request(int(i), None if t is None else str(t)) for i, t in cur.fetchall()]


def mark_done(conn: Any, *, database: str, ids: list[int]) -> None:
    if not ids:
        return
    with conn.cursor() as cur:
        marks = ",".join(["%s"] * len(ids))
        cur.execute(f"UPDATE `{database}`.`{TABLE}` SET done_at = CURRENT_TIMESTAMP(6) WHERE id IN ({marks})", ids)
    conn.commit()


def mark_done_through(conn: Any, *, database: str, client_id: str, request_id: int) -> None:
    """Every pending request of `client_id` up to `request_id`: those a snapshot job served (it takes all that are
    pending and records the newest's id; ids only grow, so none above it was pending then)."""
    with conn.cursor() as cur:
        cur.execute(
            f"UPDATE `{database}`.`{TABLE}` SET done_at = CURRENT_TIMESTAMP(6)"
            " WHERE client_id = %s AND id <= %s AND done_at IS NULL",
            (client_id, request_id),
        )
    conn.commit()


class RequestPoller:
    """Reads this capture's pending requests every `interval` seconds; `wanted` is cheap to test per event."""

    def __init__(self, connect: Callable[[], Any], *, database: str, client_id: str, interval: float = 1.0) -> None:
        self._connect = connect
        self.database = database
        self.client_id = client_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-requests", daemon=True)
        self.requests: list[Request] = []
        self.wanted = False

    def start(self) -> RequestPoller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def take(self) -> list[Request]:
        found, self.requests, self.wanted = self.requests, [], False
        return found

    def done(self, ids: list[int], *, through: int = 0) -> None:
        """Mark `ids` done, and every pending request up to `through` (a job's request_id: a job resumed after a
        restart knows no ids of its own)."""
        conn = self._connect()
        try:
            mark_done(conn, database=self.database, ids=ids)
            if through:
                mark_done_through(conn, database=self.database, client_id=self.client_id, request_id=through)
        finally:
            conn.close()
        if through:  # found pending while the job ran (resumed after a restart): served by it, not to be served again
            left = [r for r in self.requests if r.id > through]
            self.requests, self.wanted = left, bool(left)

    def _run(self) -> None:
        conn: Any = None
        seen: set[int] = set()
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                    ensure_table(conn, self.database)
                found = [r for r in pending(conn, database=self.database, client_id=self.client_id) if r.id not in seen]
                if found and not self.wanted:
                    seen.update(r.id for r in found)
                    self.requests = found
                    self.wanted = True
            except Exception as exc:  # a source that is down is the reader's to report
                log.debug("snapshot request poll failed: %s", exc)
                conn = None
            self._stop.wait(self._interval)
        if conn is not None:
            conn.close()
