"""One query's result set read off a PyMySQL connection by the compiled `ResultReader`, not by PyMySQL.

PyMySQL parses a result set in Python, packet by packet and value by value: for a snapshot that is
most of the time. Here the query is sent with PyMySQL's own command writer and the connection's
bytes go, in large reads, to Rust, which renders each row as it completes. This reaches into two
PyMySQL internals (`_execute_command`, `_rfile`); the connection's protocol state is left exactly as
after a fully read result, so PyMySQL carries on with the next statement. Lost connections raise
PyMySQL's own OperationalError (2013), server errors its usual exception, so retries work as for
any other statement.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import Any

import pymysql
from pymysql.constants import COMMAND, CR

from mysqlcapture_worker.snapshot.fast import ResultReader

READ_BYTES = 1 << 20


class ResultSetError(RuntimeError):
    """The server's reply is not the result set the query asked for: the connection is closed."""


def send_query(conn: pymysql.connections.Connection, sql: str) -> None:
    conn._execute_command(COMMAND.COM_QUERY, sql)


def _read_some(conn: pymysql.connections.Connection) -> bytes:
    while True:
        try:
            data: bytes = conn._rfile.read1(READ_BYTES)
            break
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            conn._force_close()
            raise pymysql.err.OperationalError(
                CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})"
            ) from exc
    if not data:
        conn._force_close()
        raise pymysql.err.OperationalError(CR.CR_SERVER_LOST, "Lost connection to MySQL server during query")
    return data


def results(
    conn: pymysql.connections.Connection, sql: str, renderer: Any, *, batch_rows: int | None = None
) -> Iterator[Any]:
    """Send `sql` and feed its result set to a new `ResultReader`, yielded each time it holds
    `batch_rows` rows (if given) and once at the end, to `take()` from. Server errors raise as PyMySQL
    raises them."""
    reader = ResultReader(renderer)
    send_query(conn, sql)
    if conn._current_timeout != conn._read_timeout:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    ended = False
    while not ended:
        try:
            ended = reader.feed(_read_some(conn))
        except ValueError as exc:  # not a result set of these columns: the stream is out of step
            conn._force_close()
            raise ResultSetError(f"{exc} (query: {sql[:200]})") from exc
        if not ended and batch_rows is not None and reader.rows >= batch_rows:
            yield reader
    error = reader.server_error()
    if error is not None:
        pymysql.err.raise_mysql_exception(error)
    yield reader
