"""Source servers for the integration tiers: one parameter, the flavor, and the same tests on MariaDB and MySQL.

`FLAVORS` parametrizes a fixture (`pytest.param(..., marks=...)`: `-m mysql` / `-m mariadb` select a flavor). A
server that cannot start (MySQL not fetched: `make setup` records why) fails the test with that reason; nothing
is skipped. Settings are given by their MariaDB names where the two differ and translated here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from mysqlcapture_dev.embedded import start_server
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.source.dialect import Flavor

FLAVORS = [
    pytest.param("mariadb", marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param("mysql", marks=pytest.mark.mysql, id="mysql"),
]

# The server kinds that differ in how they log a foreign key's actions: (flavor, settings, whether the binlog holds
# the child rows an action changes). MySQL 9.6+ runs foreign keys in the SQL layer unless told otherwise.
FOREIGN_KEY_KINDS = [
    pytest.param(("mariadb", {}, False), marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param(("mysql", {}, True), marks=pytest.mark.mysql, id="mysql"),
    pytest.param(("mysql", {"innodb_native_foreign_keys": "ON"}, False), marks=pytest.mark.mysql, id="mysql-native-fk"),
]

# MariaDB's name -> MySQL 8.0.26+'s name, for the settings the tests pass.
_MYSQL_NAMES = {"log_slave_updates": "log_replica_updates"}


def settings_for(flavor: Flavor, settings: dict[str, str]) -> dict[str, str]:
    if flavor == "mariadb":
        return dict(settings)
    return {_MYSQL_NAMES.get(k, k): v for k, v in settings.items()}


def start(flavor: Flavor, server_id: int, **settings: str) -> PrivateServer:
    """Start a private server of `flavor` and print its version (shown with -s, and in -rA reports)."""
    srv = start_server(server_id, flavor=flavor, **settings_for(flavor, settings))
    print(f"started {srv.version} (server_id {server_id}) on port {srv.port}")
    return srv


@contextmanager
def running(flavor: Flavor, server_id: int, **settings: str) -> Iterator[PrivateServer]:
    srv = start(flavor, server_id, **settings)
    try:
        yield srv
    finally:
        srv.stop()


def replica_ids(server: PrivateServer) -> set[int]:
    """server_ids of the replicas registered with `server` (SHOW REPLICAS / SHOW SLAVE HOSTS)."""
    return {int(str(row[0])) for row in server.query(server.dialect.replica_hosts)}
