"""Referential actions the server did not log, written as `referential-action` events after the parent's rows.

A foreign key's ON DELETE / ON UPDATE action (CASCADE, SET NULL) changes the child's rows inside
InnoDB, below the binlog, on MariaDB and on MySQL before 9.6 or with innodb_native_foreign_keys=ON: the binlog
holds the parent's row events only. MySQL 9.6 and later run foreign keys in the SQL layer by default and log the
child rows too, flagging the parent's rows event USE_SQL_FOREIGN_KEY_F; a session with foreign_key_checks=0
flags it NO_FOREIGN_KEY_CHECKS_F, and then no action ran. In neither case is anything written here.

Otherwise, after a parent's delete or key-changing update, one event per foreign key of a captured child whose
action changes rows: the child table, the key, the action, and the parent's old (and new) values of the
referenced columns, in the order of the key's columns, rendered as the change log renders values. Compaction
applies it to the child's rows at the event's place, then to the child's own children by their foreign keys
(cascades go on there too, and are not logged either).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from mysqlcapture_api.schema.model import CHANGING_ACTIONS, ForeignKeyDef, TableDef
from mysqlcapture_api.schema.schema import Schema

from mysqlcapture_worker.column_rules import EXCLUDE, TableRules
from mysqlcapture_worker.decode import ABSENT
from mysqlcapture_worker.engine.rendering import changed, render
from mysqlcapture_worker.engine.tables import DecodedTable
from mysqlcapture_worker.engine.transaction import Transaction
from mysqlcapture_worker.replication.events import RowsEvent, RowsKind

log = logging.getLogger(__name__)

NO_FOREIGN_KEY_CHECKS_F = 0x0002  # the session ran with foreign_key_checks=0: no action ran
USE_SQL_FOREIGN_KEY_F = 0x0010  # MySQL 9.6+: the SQL layer ran the actions and logged the child rows
TYPE = "referential-action"


def logged_or_none(flags: int) -> bool:
    """Whether the rows event's flags say its foreign-key actions are in the binlog already, or none ran."""
    return bool(flags & (USE_SQL_FOREIGN_KEY_F | NO_FOREIGN_KEY_CHECKS_F))


def action_of(fk: ForeignKeyDef, kind: RowsKind) -> str | None:
    """The action a `kind` change of a parent row runs on the child's rows (None: it changes none)."""
    action = fk.on_delete if kind is RowsKind.DELETE else fk.on_update if kind is RowsKind.UPDATE else None
    return action if action in CHANGING_ACTIONS else None


class _Index:
    """Each table's referencing foreign keys, built once per schema (a schema is never changed in place)."""

    def __init__(self) -> None:
        self._schema: Schema | None = None
        self._by: dict[tuple[str, str], list[tuple[TableDef, ForeignKeyDef]]] = {}

    def of(self, schema: Schema, database: str, table: str) -> list[tuple[TableDef, ForeignKeyDef]]:
        if schema is not self._schema:
            self._by = {}
            for child in schema.all_tables():
                for fk in child.foreign_keys:
                    parent = (fk.parent_database.lower(), fk.parent_table.lower())
                    self._by.setdefault(parent, []).append((child, fk))
            self._schema = schema
        return self._by.get((database.lower(), table.lower()), [])


_INDEX = _Index()


def children(
    schema: Schema, parent: TableDef, kind: RowsKind, captured: Callable[[str, str], bool]
) -> list[tuple[TableDef, ForeignKeyDef, str]]:
    """The captured children (table, foreign key, action) a `kind` change of `parent`'s rows can change, in the
    order of their names."""
    out = []
    for child, fk in _INDEX.of(schema, parent.database, parent.name):
        action = action_of(fk, kind)
        if action is not None and captured(child.database, child.name):
            out.append((child, fk, action))
    return sorted(out, key=lambda c: (c[0].database, c[0].name, c[1].name))


def keys_of(
    fk: ForeignKeyDef, names: tuple[str, ...], rows: Iterable[tuple[list[Any] | None, list[Any] | None]], kind: RowsKind
) -> list[dict[str, list[Any]]]:
    """Per parent row the action touches: the referenced columns' old values (and new ones, for an update).
    A row whose old values hold a NULL is referenced by no child row; an update that leaves them alone runs
    no action."""
    lowered = [n.lower() for n in names]
    if any(c.lower() not in lowered for c in fk.parent_columns):
        raise PartialImage(fk)  # the parent's definition lacks a referenced column: its values are not known
    at = [lowered.index(c.lower()) for c in fk.parent_columns]
    out = []
    for before, after in rows:
        if before is None:
            continue
        old = [before[i] for i in at]
        if any(v is None for v in old):
            continue
        if any(v is ABSENT for v in old):
            raise PartialImage(fk)
        if kind is RowsKind.DELETE:
            out.append({"old": old})
            continue
        assert after is not None
        new = [o if n is ABSENT else n for o, n in zip(old, (after[i] for i in at), strict=True)]
        if any(changed(o, n) for o, n in zip(old, new, strict=True)):
            out.append({"old": old, "new": new})
    return out


class PartialImage(Exception):
    """A parent's row image leaves out a column a foreign key references (binlog_row_image=MINIMAL)."""

    def __init__(self, fk: ForeignKeyDef) -> None:
        super().__init__(fk.name)
        self.fk = fk


def add_actions(
    txn: Transaction, dec: DecodedTable, ev: RowsEvent, schema: Schema, captured: Callable[[str, str], bool]
) -> None:
    """The `referential-action` events of `ev`'s rows, after them in `txn` (none when the server logged the
    actions, none ran, or no captured child's rows can change)."""
    if ev.kind is RowsKind.INSERT or logged_or_none(ev.flags):
        return
    found = children(schema, dec.table_def, ev.kind, captured)
    if not found:
        return
    rows = list(dec.decoder.decode(ev))
    make = txn.factory(ts=ev.timestamp, server_id=ev.server_id, event_pos=ev.start_pos)
    for child, fk, action in found:
        try:
            keys = keys_of(fk, dec.names, rows, ev.kind)
        except PartialImage:
            _warn_partial(dec.table_def, child, fk, ev)
            continue
        if not keys:
            continue
        if dec.rules is not None:
            keys = ruled_keys(dec.rules, fk.parent_columns, keys)
        doc = {
            "constraint": fk.name,
            "on": ev.kind.value,
            "action": action,
            "parent": {"database": dec.table_def.database, "table": dec.table_def.name, "columns": fk.parent_columns},
            "columns": fk.columns,
            "keys": keys,
        }
        txn.add(make.referential(database=child.database, table=child.name, data_json=render(doc)))


def ruled_keys(
    rules: TableRules, columns: Sequence[str], keys: list[dict[str, list[Any]]]
) -> list[dict[str, list[Any]]]:
    """The referenced values under the parent table's column rules (spec.columns): an excluded column's as null."""
    by_name = {c.lower(): a for c, a in rules.actions.items()}
    actions = [by_name.get(c.lower()) for c in columns]
    if not any(actions):
        return keys

    def ruled(values: list[Any]) -> list[Any]:
        return [
            v if a is None else None if a.kind == EXCLUDE else orjson.Fragment(rules.value(a, render(v)).encode())
            for v, a in zip(values, actions, strict=True)
        ]

    return [{side: ruled(values) for side, values in key.items()} for key in keys]


def _warn_partial(parent: TableDef, child: TableDef, fk: ForeignKeyDef, ev: RowsEvent) -> None:
    log.warning(
        "%s.%s: the %s at %s logged a row image without the columns foreign key %s of %s.%s references (a session "
        "set binlog_row_image to MINIMAL or NOBLOB), so the rows its %s action changed in %s.%s are not known: set "
        "binlog_row_image=FULL for every session, and run `mysqlcapture resnapshot <manifest> --table %s.%s`",
        parent.database,
        parent.name,
        ev.kind.value,
        ev.where,
        fk.name,
        child.database,
        child.name,
        fk.on_delete if ev.kind is RowsKind.DELETE else fk.on_update,
        child.database,
        child.name,
        child.database,
        child.name,
    )
