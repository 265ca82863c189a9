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
        # Without a history: the last heartbeat a DDL was applied after, the schema and version before the first
        # DDL after it (the schema in force at that heartbeat), and the statements applied since.
        self._at_heartbeat: tuple[int, Schema, int, list[str]] | None = None
        # After a failover by heartbeat search: the DDL statements the stream reads again before it is past every
        # one the change log already holds. Until then every event read is one already written (`replaying`).
        self.replay: tuple[str, ...] = history.replay_after(version) if history is not None and version else ()
        self.read_again = False  # the last statement applied was one of `replay` (its events are not written again)

    @property
    def replaying(self) -> bool:
        """The stream is reading again what the change log holds: its events are not to be written again."""
        return bool(self.replay)

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
        base, replay = self.version, self.replay
        if from_heartbeat and last_heartbeat is not None:
            base, replay = self._rewind_to(last_heartbeat)
        if self._history is not None:
            self.version = self._history.merge(
                base_version=base,
                version=self.version + 1,
                server_id=server_id,
                coordinate=coordinate,
                gtid=gtid,
                last_heartbeat=last_heartbeat,
            )
            replay = self._history.replay_after(self.version)
        else:
            self.version += 1
        self.replay = replay
        if replay:
            log.info(
                "the %d DDL statements read after heartbeat %s, and every event before the last of them, are in the "
                "change log already: read again, not written again",
                len(replay),
                last_heartbeat,
            )
        return self.version

    def _rewind_to(self, heartbeat: int) -> tuple[int, tuple[str, ...]]:
        """Make the schema in force where `heartbeat` was read the current one; returns its version and, without a
        history, the DDL statements applied since (in order; with one, `SchemaHistory.replay_after` says)."""
        replay: tuple[str, ...] = ()
        if self._history is not None:
            base = self._history.version_before_heartbeat(self.version, heartbeat)
            if base != self.version:
                self.current = self._history.schema_at(base)
        elif self._at_heartbeat is not None and self._at_heartbeat[0] == heartbeat:
            _, self.current, base, applied = self._at_heartbeat
            replay = tuple(applied)
        else:
            base = self.version
        if base != self.version:
            log.info("schema back to version %d, in force at heartbeat %d, for the DDL read again", base, heartbeat)
        self._at_heartbeat = None
        return base, replay

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
        self.read_again = self.replaying  # (a TRUNCATE read again: nothing for the history, an event written before)
        if result.schema == self.current and all(e["type"] == "table-truncate" for e in result.events):
            return result  # no statement, or a TRUNCATE: an event, nothing for the history
        if last_heartbeat is not None and (self._at_heartbeat is None or self._at_heartbeat[0] != last_heartbeat):
            self._at_heartbeat = (last_heartbeat, self.current, self.version, [])
        if self._at_heartbeat is not None:
            self._at_heartbeat[3].append(sql)
        if self.replay:
            if sql == self.replay[0]:
                self.replay = self.replay[1:]
            else:
                log.warning(
                    "the new server's binlog after the heartbeat differs from the one read before the failover "
                    "(read %r where %r was): events from here are written, those already written again",
                    sql[:200],
                    self.replay[0][:200],
                )
                self.replay, self.read_again = (), False
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
