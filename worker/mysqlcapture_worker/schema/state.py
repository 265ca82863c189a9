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
        # Without a history: the last heartbeat a DDL was applied after, and the schema and version before the
        # first DDL after it (the schema in force at that heartbeat).
        self._at_heartbeat: tuple[int, Schema, int] | None = None

    def table(self, database: str, name: str) -> TableDef | None:
        return self.current.table(database, name)

    def merge(
        self,
        *,
        server_id: int,
        coordinate: Coordinate,
        gtid: str | None,
        last_heartbeat: int | None,
        from_heartbeat: bool = False,
    ) -> int:
        """Record a failover's merge point: the schema continues on `server_id`, from `coordinate` there.

        A version of its own, so the checkpoint on the new server names an entry of that server. With
        `from_heartbeat` the new server's stream starts again at `last_heartbeat` (a heartbeat search): the schema
        goes back to the one in force there, since the DDL read after that heartbeat is read, and applied, again.
        """
        base = self.version
        if from_heartbeat and last_heartbeat is not None:
            base = self._rewind_to(last_heartbeat)
        if self._history is not None:
            self.version = self._history.merge(
                base_version=base,
                version=self.version + 1,
                server_id=server_id,
                coordinate=coordinate,
                gtid=gtid,
                last_heartbeat=last_heartbeat,
            )
        else:
            self.version += 1
        return self.version

    def _rewind_to(self, heartbeat: int) -> int:
        """Make the schema in force where `heartbeat` was read the current one; returns its version."""
        if self._history is not None:
            base = self._history.version_before_heartbeat(self.version, heartbeat)
            if base != self.version:
                self.current = self._history.schema_at(base)
        elif self._at_heartbeat is not None and self._at_heartbeat[0] == heartbeat:
            _, self.current, base = self._at_heartbeat
        else:
            base = self.version
        if base != self.version:
            log.info("schema back to version %d, in force at heartbeat %d, for the DDL read again", base, heartbeat)
        self._at_heartbeat = None
        return base

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
        if last_heartbeat is not None and (self._at_heartbeat is None or self._at_heartbeat[0] != last_heartbeat):
            self._at_heartbeat = (last_heartbeat, self.current, self.version)
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
