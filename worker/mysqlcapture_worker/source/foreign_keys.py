"""Which foreign-key actions the source logs, and what the capture does about those it does not.

MySQL 9.6 and later run foreign keys in the SQL layer (innodb_native_foreign_keys=OFF, the default) and log the
child rows an ON DELETE / ON UPDATE action changes. MariaDB, MySQL before 9.6 and MySQL with
innodb_native_foreign_keys=ON run them inside InnoDB and log the parent's rows only; the worker then writes a
`referential-action` event after the parent's (engine/referential.py) and compaction applies it. A child whose
parent is not captured gets no such event: its rows silently keep what the parent's actions removed, so that is
said, with the fix. `mysqlcapture check`, the worker's start and GET /status list them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mysqlcapture_api.schema.model import CHANGING_ACTIONS, ForeignKeyDef
from mysqlcapture_api.schema.schema import SYSTEM_DATABASES, Schema

from mysqlcapture_worker.source import queries
from mysqlcapture_worker.source.dialect import Dialect

_ALL = (
    "SELECT r.CONSTRAINT_SCHEMA, r.TABLE_NAME, r.CONSTRAINT_NAME, r.UNIQUE_CONSTRAINT_SCHEMA, "
    "r.REFERENCED_TABLE_NAME, r.DELETE_RULE, r.UPDATE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS r "
    "WHERE r.CONSTRAINT_SCHEMA NOT IN %s"
)


def logs_actions(conn: Any, dialect: Dialect) -> bool:
    """Whether the server logs the rows its foreign-key actions change (MySQL 9.6+, SQL-layer foreign keys)."""
    if dialect.mariadb or not dialect.version.at_least(9, 6):
        return False
    native = queries.variables(conn, ["innodb_native_foreign_keys"]).get("innodb_native_foreign_keys", "OFF")
    return native.upper() not in ("ON", "1")


def _actions(fk: ForeignKeyDef) -> str:
    parts = [f"ON DELETE {fk.on_delete}" if fk.on_delete in CHANGING_ACTIONS else ""]
    parts.append(f"ON UPDATE {fk.on_update}" if fk.on_update in CHANGING_ACTIONS else "")
    return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class ForeignKeyReport:
    """The captured foreign keys whose actions change rows, and how the capture sees what they change."""

    server: str  # "MariaDB 10.11.19", for the lines a person reads
    logged: bool  # the server logs the child rows itself

    def unlogged(self, schema: Schema, captured: Callable[[str, str], bool]) -> list[str]:
        """`db.table.constraint` of each captured child's foreign key whose actions the server does not log."""
        if self.logged:
            return []
        return sorted(
            f"{t.database}.{t.name}.{fk.name}"
            for t in schema.all_tables()
            for fk in t.foreign_keys
            if fk.changes_rows() and captured(t.database, t.name)
        )

    def lines(self, schema: Schema, captured: Callable[[str, str], bool], others: list[tuple[Any, ...]]) -> list[str]:
        """One line per captured foreign key whose actions change rows, and per one crossing the capture's edge
        (`others`: information_schema's REFERENTIAL_CONSTRAINTS rows, `all_constraints`)."""
        out = []
        for table in sorted(schema.all_tables(), key=lambda t: (t.database, t.name)):
            for fk in table.foreign_keys:
                if not fk.changes_rows() or not captured(table.database, table.name):
                    continue
                name = f"{table.database}.{table.name}"
                parent = f"{fk.parent_database}.{fk.parent_table}"
                if not captured(fk.parent_database, fk.parent_table):
                    out.append(
                        f"foreign key {name}.{fk.name} ({_actions(fk)}) references {parent}, which the capture does "
                        f"not include: the rows these actions change in {name} are not in the change log. Fix: add "
                        f"{parent} to spec.tables"
                    )
                elif self.logged:
                    out.append(
                        f"foreign key {name}.{fk.name} ({_actions(fk)}) from {parent}: {self.server} logs the rows "
                        "these actions change"
                    )
                else:
                    out.append(
                        f"foreign key {name}.{fk.name} ({_actions(fk)}) from {parent}: {self.server} does not log "
                        f"the rows these actions change; the worker writes a referential-action event after each "
                        f"change of {parent}, and compaction applies it"
                    )
        for db, table, constraint, parent_db, parent, on_delete, on_update in others:
            rules = {str(on_delete).upper(), str(on_update).upper()}
            if not rules & CHANGING_ACTIONS or not captured(str(parent_db), str(parent)):
                continue
            if not captured(str(db), str(table)):
                out.append(
                    f"foreign key {db}.{table}.{constraint} changes rows of {db}.{table} when {parent_db}.{parent} "
                    f"changes; {db}.{table} is not captured, so neither are those changes"
                )
        return out


def all_constraints(conn: Any) -> list[tuple[Any, ...]]:
    """Every foreign key of the server (REFERENTIAL_CONSTRAINTS: child, name, parent, rules)."""
    return queries._rows(conn, _ALL, (SYSTEM_DATABASES,))


def report(conn: Any, dialect: Dialect) -> ForeignKeyReport:
    return ForeignKeyReport(str(dialect.version), logs_actions(conn, dialect))
