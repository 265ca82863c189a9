"""Private MariaDB and MySQL servers started by the project itself: the embedded default of `make demo`, the tests."""

from __future__ import annotations

from mysqlcapture_worker.source.dialect import Flavor

from mysqlcapture_dev.embedded.server import PrivateServer


def start_server(server_id: int, *, flavor: Flavor = "mariadb", **settings: str) -> PrivateServer:
    """Start a private server of `flavor` with its defaults overridden by `settings` (None drops a default)."""
    if flavor == "mysql":
        from mysqlcapture_dev.embedded.mysql import MySQLServer

        return MySQLServer(server_id=server_id, settings=dict(settings)).start()
    from mysqlcapture_dev.embedded.mariadb import MariaDBServer

    return MariaDBServer(server_id=server_id, settings=dict(settings)).start()
