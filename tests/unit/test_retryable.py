"""Which source errors the reader outlives by reconnecting, and which stop the worker with their message."""

from __future__ import annotations

import pymysql
import pytest
from mysqlcapture_worker.replication.stream import StreamDisconnected, is_retryable

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("exc", "retry"),
    [
        (StreamDisconnected("EOF"), True),
        (pymysql.err.OperationalError(2013, "Lost connection to server during query"), True),
        (pymysql.err.OperationalError(2003, "Can't connect to server on '127.0.0.1'"), True),
        (pymysql.err.OperationalError(1927, "Connection was killed"), True),
        (pymysql.err.OperationalError(1205, "Lock wait timeout exceeded"), True),
        (pymysql.err.OperationalError(1045, "Access denied for user 'cdc'"), True),
        # A snapshot SELECT naming a column a later ALTER dropped: retrying would loop forever.
        (pymysql.err.OperationalError(1054, "Unknown column 'note' in 'SELECT'"), False),
        (pymysql.err.OperationalError(1142, "SELECT command denied to user 'cdc' for table 't'"), False),
        (pymysql.err.ProgrammingError(1146, "Table 'shop.gone' doesn't exist"), False),
        (pymysql.err.OperationalError(), False),  # no code at all: nothing says it is transient
        # PyMySQL's error for a statement on a connection already closed (a failover closed it mid-snapshot).
        (pymysql.err.InterfaceError(0, ""), True),
        (pymysql.err.InterfaceError(2014, "Command Out of Sync"), False),
        (ValueError("not a server error"), False),
    ],
    ids=[
        "eof",
        "lost",
        "refused",
        "killed",
        "lock-wait",
        "access",
        "unknown-column",
        "table-grant",
        "no-table",
        "no-code",
        "closed",
        "out-of-sync",
        "other",
    ],
)
def test_is_retryable(exc: BaseException, retry: bool) -> None:
    assert is_retryable(exc) is retry
