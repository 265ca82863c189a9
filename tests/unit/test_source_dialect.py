"""Statements by server version: one case per version the worker meets (MySQL 5.7 to 9.x, MariaDB 10.x/11.x)."""

from __future__ import annotations

import pytest
from mysqlcapture_worker.source.dialect import Dialect, ServerVersion

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("9.7.4-2", ServerVersion("mysql", 9, 7, 4)),
        ("8.4.3", ServerVersion("mysql", 8, 4, 3)),
        ("8.0.36-0ubuntu0.22.04.1", ServerVersion("mysql", 8, 0, 36)),
        # Aurora MySQL 3 may report "8.0.mysql_aurora.3.05.2": the 8.0 series' oldest statements serve it.
        ("8.0.mysql_aurora.3.05.2", ServerVersion("mysql", 8, 0, 0)),
        ("MySQL", None),
        ("10.11.19-MariaDB-0+deb12u1-log", ServerVersion("mariadb", 10, 11, 19)),
        ("5.5.5-10.6.18-MariaDB", ServerVersion("mariadb", 10, 6, 18)),  # the replication-protocol prefix
        ("11.4.2-MariaDB", ServerVersion("mariadb", 11, 4, 2)),
    ],
    ids=[
        "mysql-9.7",
        "mysql-8.4",
        "mysql-8.0-ubuntu",
        "aurora",
        "garbage",
        "mariadb-10.11",
        "mariadb-prefix",
        "mariadb-11",
    ],
)
def test_version_parse(text: str, expected: ServerVersion | None) -> None:
    if expected is None:
        with pytest.raises(ValueError, match="unrecognised server version"):
            ServerVersion.parse(text)
    else:
        assert ServerVersion.parse(text) == expected


# Each row: version, then the statements that differ. 8.0.22 introduced the REPLICA/SOURCE names, 8.2 renamed
# SHOW MASTER STATUS, 8.4 removed the old names; MariaDB keeps the old ones.
CASES = [
    (
        "9.7.4",
        "SHOW BINARY LOG STATUS",
        "SHOW REPLICAS",
        "START REPLICA",
        "SELECT @@GLOBAL.gtid_executed",
        "CHANGE REPLICATION SOURCE TO",
    ),
    (
        "8.4.3",
        "SHOW BINARY LOG STATUS",
        "SHOW REPLICAS",
        "START REPLICA",
        "SELECT @@GLOBAL.gtid_executed",
        "CHANGE REPLICATION SOURCE TO",
    ),
    (
        "8.2.0",
        "SHOW BINARY LOG STATUS",
        "SHOW REPLICAS",
        "START REPLICA",
        "SELECT @@GLOBAL.gtid_executed",
        "CHANGE REPLICATION SOURCE TO",
    ),
    (
        "8.0.36",
        "SHOW MASTER STATUS",
        "SHOW REPLICAS",
        "START REPLICA",
        "SELECT @@GLOBAL.gtid_executed",
        "CHANGE REPLICATION SOURCE TO",
    ),
    (
        "8.0.21",
        "SHOW MASTER STATUS",
        "SHOW SLAVE HOSTS",
        "START SLAVE",
        "SELECT @@GLOBAL.gtid_executed",
        "CHANGE MASTER TO",
    ),
    (
        "5.7.44-log",
        "SHOW MASTER STATUS",
        "SHOW SLAVE HOSTS",
        "START SLAVE",
        "SELECT @@GLOBAL.gtid_executed",
        "CHANGE MASTER TO",
    ),
    (
        "10.11.19-MariaDB",
        "SHOW MASTER STATUS",
        "SHOW SLAVE HOSTS",
        "START SLAVE",
        "SELECT @@GLOBAL.gtid_binlog_pos",
        "CHANGE MASTER TO",
    ),
    (
        "11.4.2-MariaDB",
        "SHOW MASTER STATUS",
        "SHOW SLAVE HOSTS",
        "START SLAVE",
        "SELECT @@GLOBAL.gtid_binlog_pos",
        "CHANGE MASTER TO",
    ),
]


@pytest.mark.parametrize(
    ("version", "binlog_status", "replicas", "start_replica", "gtid_executed", "change_source"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_statements_by_version(
    version: str, binlog_status: str, replicas: str, start_replica: str, gtid_executed: str, change_source: str
) -> None:
    d = Dialect.of(version)
    assert d.binlog_status == binlog_status
    assert d.replica_hosts == replicas
    assert d.start_replica == start_replica
    assert d.stop_replica == start_replica.replace("START", "STOP")
    assert d.gtid_executed == gtid_executed
    assert d.change_source(host="db", port=3306, user="r", password="p'w").startswith(change_source)
    assert "'p''w'" in d.change_source(host="db", port=3306, user="r", password="p'w")


def test_mariadb_specifics() -> None:
    d = Dialect.of("10.11.19-MariaDB")
    assert d.mariadb and d.snapshot_frontier_from_status
    assert d.gtid_purged is None  # asked through BINLOG_GTID_POS of the first kept binlog
    assert d.gtid_at == "SELECT BINLOG_GTID_POS(%s, %s)"
    assert d.replica_applied == "SELECT @@GLOBAL.gtid_slave_pos"
    assert "MASTER_USE_GTID=slave_pos" in d.change_source(host="h", port=1, user="u", password="p")
    assert d.log_replica_updates == "log_slave_updates"


def test_mysql_specifics() -> None:
    d = Dialect.of("9.7.4-2")
    assert not d.mariadb and not d.snapshot_frontier_from_status
    assert d.gtid_purged == "SELECT @@GLOBAL.gtid_purged"
    assert d.gtid_at is None
    assert d.replica_applied == "SELECT @@GLOBAL.gtid_executed"
    assert "SOURCE_AUTO_POSITION=1" in d.change_source(host="h", port=1, user="u", password="p")
    assert d.log_replica_updates == "log_replica_updates"
    assert d.reset_replica_all == "RESET REPLICA ALL"
    assert Dialect.of("8.0.21").reset_replica_all == "RESET SLAVE ALL"
    assert "MASTER_AUTO_POSITION=1" in Dialect.of("8.0.21").change_source(host="h", port=1, user="u", password="p")
    assert str(d.version) == "MySQL 9.7.4"
