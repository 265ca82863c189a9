"""Connections to the source server (all but the replication stream) and the schema of the tables the capture keeps."""

from __future__ import annotations

import pymysql
from mysqlcapture_api.schema.schema import Schema

from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.replication.stream import ConnectionSettings, SourceConnection
from mysqlcapture_worker.schema.introspect import capture_schema
from mysqlcapture_worker.settings import WorkerSettings


class SourceConnections:
    """Opens connections to the capture's source; says which tables' schema the capture keeps."""

    def __init__(self, settings: WorkerSettings, table_filter: TableFilter) -> None:
        self.settings = settings
        self.table_filter = table_filter
        self.connection = ConnectionSettings(
            host=settings.source.host,
            port=settings.source.port,
            user=settings.source.user,
            password=settings.source.password,
            password_file=settings.source.password_file,
            connect_timeout=settings.source.connect_timeout,
            ssl=settings.source.ssl,
            ssl_disabled=settings.source.ssl_disabled,
        )

    def connect(self) -> pymysql.connections.Connection:
        """A new autocommit connection."""
        return SourceConnection(autocommit=True, **self.connection.pymysql_kwargs())

    def connect_with(self, **overrides: object) -> pymysql.connections.Connection:
        """A new connection with `overrides` of the usual connection arguments (the snapshot reader's)."""
        return SourceConnection(**{**self.connection.pymysql_kwargs(), **overrides})

    def captured(self, database: str, table: str) -> bool:
        """Tables whose schema is kept: the included ones and the worker's own heartbeat table."""
        return database == self.settings.heartbeat.database or self.table_filter.includes(database, table)

    def capture_schema(self) -> Schema:
        """The captured tables' schema as the source has it now, read over a connection of its own."""
        conn = self.connect()
        try:
            return capture_schema(conn, self.captured)
        finally:
            conn.close()
