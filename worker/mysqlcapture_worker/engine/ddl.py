"""DDL statements: applied to the schema, and turned into Maxwell's DDL events of the included tables."""

from __future__ import annotations

import logging

from mysqlcapture_api.schema.ddl_tokens import DdlParseError
from mysqlcapture_api.schema.dml import written_tables
from mysqlcapture_api.schema.types import UnsupportedColumnTypeError

from mysqlcapture_worker.column_rules import ColumnRuleError, ColumnRules
from mysqlcapture_worker.engine.errors import CaptureError
from mysqlcapture_worker.engine.rendering import render
from mysqlcapture_worker.engine.transaction import Transaction
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.replication.events import QueryEvent
from mysqlcapture_worker.schema.state import SchemaState

log = logging.getLogger(__name__)


class DdlHandler:
    """Applies a statement to the schema state (recorded in its history) and adds its DDL events."""

    def __init__(self, schema: SchemaState, table_filter: TableFilter) -> None:
        self.schema = schema
        self.filter = table_filter
        # Included tables whose rows the last statement changed without row events (DdlResult.unlogged).
        self.unlogged: tuple[tuple[str, str], ...] = ()
        # The tables the last statement renamed, old name -> new (a new name left out of the capture: not here).
        self.renamed: dict[tuple[str, str], tuple[str, str]] = {}

    def apply(self, ev: QueryEvent, txn: Transaction, *, last_heartbeat: int | None) -> bool:
        """Whether the statement was DDL (it changed the schema); its events of included tables go to `txn`."""
        where = ev.where
        self.unlogged, self.renamed = (), {}
        try:
            result = self.schema.apply(
                ev.query,
                default_db=ev.schema,
                server_id=ev.server_id,
                coordinate=where,
                gtid=txn.gtid,
                last_heartbeat=last_heartbeat,
            )
        except UnsupportedColumnTypeError as exc:
            if exc.table and not self.filter.includes(exc.database, exc.table):
                log.info("ignoring DDL of excluded table %s.%s at %s: %s", exc.database, exc.table, where, exc)
                return False
            raise CaptureError(f"DDL at {where}: {exc}") from exc
        except DdlParseError as exc:
            raise CaptureError(
                f"cannot apply the DDL at {where} ({exc}): {ev.query[:300]!r}. The capture stops before it, "
                "nothing after its checkpoint is lost; exclude the table it changes (spec.tables.exclude) or "
                "restart the capture from a position after it (spec.start)"
            ) from exc
        if self.schema.read_again:  # after a failover by heartbeat search: its events are in the change log already
            return bool(result.events)
        unlogged = result.unlogged
        if not result.events and not unlogged:  # DML logged as its text (a session's binlog_format): no row events
            unlogged = written_tables(ev.query, ev.schema or None, self.schema.current)
        self.unlogged = tuple(t for t in unlogged if self.filter.includes(*t))
        make = txn.factory(ts=ev.timestamp, server_id=ev.server_id, event_pos=ev.start_pos)
        for ddl in result.events:
            database = str(ddl["database"])
            table = ddl.get("table")
            included = (
                self.filter.includes(database, str(table))
                if table is not None
                else self.filter.includes_database(database)
            )
            if not included:
                continue
            definition = ddl.get("def")
            if ddl["type"] == "table-alter" and isinstance(definition, dict):
                new = (str(definition["database"]), str(definition["table"]))
                if new != (database, table) and self.filter.includes(*new):
                    self.renamed[(database, str(table))] = new
            if definition is None and "charset" in ddl:  # database-create/alter: the database's definition
                definition = {"database": database, "charset": ddl["charset"]}
            old = ddl.get("old")
            rules = self.filter.columns
            if rules is not None:
                if isinstance(definition, dict) and "columns" in definition:
                    self._check(rules, definition, where)
                    definition = rules.definition(definition)
                if isinstance(old, dict):
                    old = rules.definition(old)
            txn.add(
                make.ddl(
                    database=database,
                    table=str(table) if table is not None else None,
                    type=str(ddl["type"]),
                    data_json=render(definition) if definition is not None else None,
                    old_json=render(old) if old is not None else None,
                    sql=ev.query,
                )
            )
        return bool(result.events)

    def _check(self, rules: ColumnRules, definition: dict[str, object], where: object) -> None:
        """A rule that cannot apply to the table as the DDL leaves it stops the capture before the DDL."""
        table = self.schema.current.table(str(definition["database"]), str(definition["table"]), exact=True)
        if table is None:
            return
        try:
            rules.for_table(table)
        except ColumnRuleError as exc:
            raise ColumnRuleError(f"{exc} (the DDL at {where} made it so)") from exc
