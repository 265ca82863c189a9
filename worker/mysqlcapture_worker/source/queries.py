"""Every query about the source server's state, in the statements of its `Dialect`.

The rest of the worker asks here (binlog status, binary logs, GTID sets, registered replicas, variables, grants)
and never spells a statement whose name depends on the server. Results come back as plain values; GTID sets as
text with the newlines MySQL puts in long sets removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mysqlcapture_api.coordinates import Coordinate

from mysqlcapture_worker.source.dialect import Dialect


@dataclass(frozen=True)
class BinlogStatus:
    """The server's current binlog coordinate; `gtid_executed` is MySQL's (empty on MariaDB: see `gtid_at`)."""

    coordinate: Coordinate
    gtid_executed: str

    @property
    def file(self) -> str:
        """The binlog file the server is writing."""
        return self.coordinate.file

    @property
    def pos(self) -> int:
        """Where the server's next event will start in it."""
        return self.coordinate.pos


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)


def _gtid_text(value: Any) -> str:
    return _text(value).replace("\n", "").replace("\r", "")


def _rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def _one(conn: Any, sql: str, args: Any = None) -> Any:
    rows = _rows(conn, sql, args)
    return rows[0][0] if rows else None


def dialect_of(conn: Any) -> Dialect:
    """The dialect of the server behind `conn`."""
    return Dialect.of(_text(_one(conn, "SELECT VERSION()")))


GIPK_VISIBILITY = "show_gipk_in_create_table_and_information_schema"


def show_generated_keys(conn: Any) -> None:
    """Let this session's information_schema show generated invisible primary keys (`my_row_id`, MySQL 8.0.30+
    with sql_generate_invisible_primary_key), which a server may hide from it (GIPK_VISIBILITY=OFF) while the
    binlog's CREATE TABLE and row images hold them: the capture then reads a table's columns and key as the binlog
    has them. No-op where the variable does not exist (MariaDB, older MySQL)."""
    if _rows(conn, f"SHOW SESSION VARIABLES LIKE '{GIPK_VISIBILITY}'"):
        _rows(conn, f"SET SESSION {GIPK_VISIBILITY} = ON")


def variables(conn: Any, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Global variables by lower-case name; absent ones are missing from the result."""
    placeholders = ",".join(["%s"] * len(names))
    rows = _rows(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({placeholders})", list(names))
    return {_text(k).lower(): _text(v) for k, v in rows}


def grants(conn: Any) -> list[str]:
    """`SHOW GRANTS` for the connected user."""
    return [_text(row[0]) for row in _rows(conn, "SHOW GRANTS")]


def binlog_status(conn: Any, dialect: Dialect) -> BinlogStatus:
    """The current binlog file and position (`SHOW BINARY LOG STATUS` / `SHOW MASTER STATUS`)."""
    rows = _rows(conn, dialect.binlog_status)
    if not rows:
        raise RuntimeError(f"{dialect.binlog_status} returned nothing: binary logging is off on the source")
    row = rows[0]
    gtid = _gtid_text(row[4]) if len(row) > 4 and not dialect.mariadb else ""
    return BinlogStatus(Coordinate(_text(row[0]), int(row[1])), gtid)


def binary_logs(conn: Any) -> list[tuple[str, int]]:
    """The binlog files the server keeps, oldest first, with their sizes."""
    return [(_text(row[0]), int(row[1])) for row in _rows(conn, "SHOW BINARY LOGS")]


def snapshot_binlog_coordinate(conn: Any) -> Coordinate:
    """MariaDB: the binlog file:pos of this session's consistent-snapshot read view (its group commit keeps them
    together, lock or not)."""
    rows = _rows(conn, "SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
    status = {_text(k).lower(): _text(v) for k, v in rows}
    return Coordinate(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))


def gtid_executed(conn: Any, dialect: Dialect) -> str:
    """MySQL's `gtid_executed`; MariaDB's `gtid_binlog_pos`."""
    return _gtid_text(_one(conn, dialect.gtid_executed))


def gtid_at(conn: Any, dialect: Dialect, at: Coordinate) -> str:
    """MariaDB: the GTID position of a binlog coordinate (`BINLOG_GTID_POS`); "" on MySQL, which has no such
    function."""
    if dialect.gtid_at is None:
        return ""
    return _gtid_text(_one(conn, dialect.gtid_at, (at.file, at.pos)))


def gtid_purged(conn: Any, dialect: Dialect) -> str:
    """Transactions the server no longer holds in its binlogs.

    MySQL: `gtid_purged`. MariaDB has no such set: its first kept file's starting GTID position says which
    transactions per domain precede the kept binlogs.
    """
    if dialect.gtid_purged is not None:
        return _gtid_text(_one(conn, dialect.gtid_purged))
    first = binary_logs(conn)[0][0]
    return gtid_at(conn, dialect, Coordinate.start_of(first))


def replica_server_ids(conn: Any, dialect: Dialect) -> set[int]:
    """server_ids of the replicas registered with this server (`SHOW REPLICAS` / `SHOW SLAVE HOSTS`)."""
    return {int(row[0]) for row in _rows(conn, dialect.replica_hosts)}


def server_id(conn: Any) -> int:
    return int(_one(conn, "SELECT @@server_id"))


def replica_status(conn: Any, dialect: Dialect) -> dict[str, Any]:
    """`SHOW REPLICA STATUS` / `SHOW SLAVE STATUS` as a dict (empty when this server replicates from none)."""
    with conn.cursor() as cur:
        cur.execute(dialect.replica_status)
        row = cur.fetchone()
        names = [d[0] for d in cur.description or ()]
    return dict(zip(names, row, strict=False)) if row else {}


def base_tables(conn: Any) -> list[tuple[str, str]]:
    """Every base table the user sees, as (database, table)."""
    return [
        (_text(db), _text(t))
        for db, t in _rows(
            conn, "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        )
    ]


def server_charset(conn: Any) -> str:
    return _text(_one(conn, "SELECT @@character_set_server"))
