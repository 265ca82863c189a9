"""One query's result set read off a PyMySQL connection by the compiled `ResultReader`, not by PyMySQL.

PyMySQL parses a result set in Python, packet by packet and value by value: for a snapshot that is
most of the time. Here the statement is sent with PyMySQL's own command writer and the connection's
bytes go, in large reads, to Rust, which renders each row as it completes.

The statement is prepared and executed (COM_STMT_PREPARE/EXECUTE/CLOSE, its literals already in the
text): its rows then come in the binary protocol, numbers and dates as binary fields the server does
not have to print (printing a DOUBLE costs the server about as much as the rest of the row). A server
that refuses to prepare it gets a plain query (text protocol) instead.

This reaches into PyMySQL internals (`_execute_command`, `_read_packet`, `_rfile`); the connection's
protocol state is left exactly as after a fully read result, so PyMySQL carries on with the next
statement. Lost connections raise PyMySQL's own OperationalError (2013), server errors its usual
exception, so retries work as for any other statement.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pymysql
from pymysql.constants import COMMAND, CR

from mysqlcapture_worker.snapshot.fast import ResultReader

if TYPE_CHECKING:
    import mysqlcapture_native

READ_BYTES = 1 << 20


class ResultSetError(RuntimeError):
    """The server's reply is not the result set the query asked for: the connection is closed."""


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
    conn: pymysql.connections.Connection,
    sql: str,
    renderer: mysqlcapture_native.TextRenderer,
    *,
    batch_rows: int | None = None,
    rows: int = 0,
) -> Iterator[mysqlcapture_native.ResultReader]:
    """Run `sql` and feed its result set to a new `ResultReader`, yielded each time it holds `batch_rows`
    rows (if given) and once at the end, to `take()` from (`rows`: how many it may hold, to size the reader's
    buffers; 0 when unknown). Server errors raise as PyMySQL raises them."""
    assert ResultReader is not None  # a TextRenderer was made: the compiled module is installed
    statement = _prepare(conn, sql)
    if statement is None:
        conn._execute_command(COMMAND.COM_QUERY, sql)
        yield from _feed(conn, ResultReader(renderer, False, rows), sql, batch_rows)
        return
    try:
        conn._execute_command(COMMAND.COM_STMT_EXECUTE, struct.pack("<IBI", statement, 0, 1))
        yield from _feed(conn, ResultReader(renderer, True, rows), sql, batch_rows)
    except pymysql.err.MySQLError:  # a server error ended the result set; a lost connection is closed already
        _close_statement(conn, statement)
        raise
    except BaseException:  # abandoned mid-result (GeneratorExit) or out of step: nothing more can be read
        conn._force_close()
        raise
    _close_statement(conn, statement)


def _close_statement(conn: pymysql.connections.Connection, statement: int) -> None:
    if conn._sock is not None:
        conn._execute_command(COMMAND.COM_STMT_CLOSE, struct.pack("<I", statement))  # no reply


# ER_UNSUPPORTED_PS: the statement cannot be prepared (some proxies, old servers): run it as a plain query.
_CANNOT_PREPARE = frozenset({1295})


def _prepare(conn: pymysql.connections.Connection, sql: str) -> int | None:
    """COM_STMT_PREPARE: the statement id, or None when the server cannot prepare `sql`."""
    conn._execute_command(COMMAND.COM_STMT_PREPARE, sql)
    try:
        first = conn._read_packet()
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in _CANNOT_PREPARE:
            return None
        raise
    data = first.get_all_data()
    statement, columns, params = struct.unpack_from("<IHH", data, 1)
    for _ in range(params + (1 if params else 0) + columns + (1 if columns else 0)):  # definitions, EOFs
        conn._read_packet()
    return int(statement)


def _feed(
    conn: pymysql.connections.Connection,
    reader: mysqlcapture_native.ResultReader,
    sql: str,
    batch_rows: int | None,
) -> Iterator[mysqlcapture_native.ResultReader]:
    if conn._current_timeout != conn._read_timeout:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    ended = False
    while not ended:
        try:
            ended = reader.feed(_read_some(conn))
        except ValueError as exc:  # not a result set of these columns: the stream is out of step
            conn._force_close()
            # The statement up to its WHERE: the key values after it may be ruled (spec.columns) and are never shown.
            raise ResultSetError(f"{exc} (query: {sql.split(' WHERE ', 1)[0][:200]})") from exc
        if not ended and batch_rows is not None and reader.rows >= batch_rows:
            yield reader
    error = reader.server_error()
    if error is not None:
        pymysql.err.raise_mysql_exception(error)
    yield reader
