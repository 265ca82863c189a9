"""The schema in force at the stream's current position, kept in step with the persisted schema history."""

from __future__ import annotations

import logging

from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.ddl import DdlResult, apply_ddl
from mysqlcapture_api.schema.history import SchemaHistory
from mysqlcapture_api.schema.model import TableDef
from mysqlcapture_api.schema.schema import Schema

log = logging.getLogger(__name__)


class SchemaState:
    """Applies DDL as it streams by and records each change in the history before it is checkpointed.

    The history is written ahead of the change-log commit that references its version; entries
    past the checkpoint's version are discarded when a capture resumes, so a crash between the two
    writes leaves nothing behind.
    """

    def __init__(self, history: SchemaHistory | None, schema: Schema, version: int) -> None:
        self._history = history
        self.current = schema
        self.version = version

    def table(self, database: str, name: str) -> TableDef | None:
        return self.current.table(database, name)

    def merge(self, *, server_id: int, coordinate: Coordinate, gtid: str | None, last_heartbeat: int | None) -> int:
        """Record a failover's merge point: the same schema continues on `server_id`, from `coordinate` there.

        A version of its own, so the checkpoint on the new server names an entry of that server.
        """
        if self._history is not None:
            self.version = self._history.merge(
                base_version=self.version,
                server_id=server_id,
                coordinate=coordinate,
                gtid=gtid,
                last_heartbeat=last_heartbeat,
            )
        else:
            self.version += 1
        return self.version

    def apply(
        self,
        sql: str,
        *,
        default_db: str,
        server_id: int,
        coordinate: Coordinate,
        gtid: str | None,
        last_heartbeat: int | None,
    ) -> DdlResult:
        """Apply one Query event's statement, which ends at `coordinate`: the new schema, its Maxwell DDL events
        (none for non-DDL) and the tables whose rows it changed without row events."""
        result = apply_ddl(self.current, sql, default_db)
        if result.schema == self.current and all(e["type"] == "table-truncate" for e in result.events):
            return result  # no statement, or a TRUNCATE: an event, nothing for the history
        if self._history is not None:
            self.version = self._history.record(
                base_version=self.version,
                before=self.current,
                after=result.schema,
                server_id=server_id,
                coordinate=coordinate,
                gtid=gtid,
                last_heartbeat=last_heartbeat,
                sql=sql,
            )
        else:
            self.version += 1
        self.current = result.schema
        log.info("schema version %d after DDL at %s: %s", self.version, coordinate, sql[:200])
        return result
