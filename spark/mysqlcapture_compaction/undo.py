"""A SQL script that reverses chosen changes, newest first, in one transaction. Written, never run.

Each change becomes one statement: an insert a DELETE, a delete an INSERT of its before image, an update an
UPDATE setting back the columns it changed. Every DELETE and UPDATE is guarded by the row's whole image after
the change (every stored column, NULL-safe), so it changes nothing when the row has moved on since; an INSERT
fails on a duplicate key when the row is back. By default each statement is followed by a check that fails the
script (nothing is committed) when the statement changed no row: the undo applies whole or not at all.

Values are exact literals (history_values.sql_literal). Generated columns are left out (the server computes
them). The session the script sets: utf8mb4, time zone UTC (TIMESTAMP values are UTC), strict sql_mode without
NO_ZERO_DATE (zero dates go back as they were) and with NO_AUTO_VALUE_ON_ZERO (a key 0 stays 0), and
foreign_key_checks = 0: the history lists the rows a cascade changed as versions of their own, so each is
reversed by its own statement and no action runs twice.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import TableDef

from mysqlcapture_compaction.history_output import changed, image_fields
from mysqlcapture_compaction.history_values import guard, quote_name, sql_literal
from mysqlcapture_compaction.transforms import MOVED_AWAY, PK

# Fails the script when the statement before it changed no row: two rows into one variable is an error.
CHECK = (
    "SELECT 'the row moved on since: nothing was committed' INTO @mysqlcapture_undo "
    "FROM (SELECT 1 AS n UNION ALL SELECT 2) AS moved_on WHERE ROW_COUNT() <> 1;"
)
STRICT = "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION';"
# An ENUM's error value ('', index 0: what a non-strict session stores for a value not in the list) can only be
# written back outside strict mode; the statements that write one run so, and strict mode is set again after.
LENIENT = "SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION';"
PRELUDE = ["SET NAMES utf8mb4;", "SET SESSION time_zone = '+00:00';", STRICT, "SET SESSION foreign_key_checks = 0;"]


class UndoError(ValueError):
    """Changes that cannot be reversed exactly (no definition of their table)."""


def _stored(table: TableDef) -> dict[str, Any]:
    return {c.name: c for c in table.columns if not c.generated}


def _image(row: Mapping[str, Any], side: str, table: TableDef) -> list[tuple[str, Any, str | None]]:
    """The image's stored columns that the table still has, in the table's order."""
    stored = _stored(table)
    have = {name: (value, raw) for name, value, raw in image_fields(row.get(side))}
    return [(n, *have[n]) for n in stored if n in have]


def _where(row: Mapping[str, Any], table: TableDef, flavor: str) -> str:
    stored = _stored(table)
    return " AND ".join(guard(n, v, stored[n], raw, flavor=flavor) for n, v, raw in _image(row, "after", table))


def writes_enum_error_value(row: Mapping[str, Any], table: TableDef) -> bool:
    """Whether reversing `row` writes an ENUM column's '' (its error value) back."""
    if row[Col.TYPE] not in ("delete", "update"):
        return False
    stored = _stored(table)
    return any(stored[n].type == "enum" and v == "" for n, v, _ in _image(row, "before", table))


def statement(row: Mapping[str, Any], table: TableDef, flavor: str) -> str | None:
    """The statement reversing one version, None for a snapshot's read (not a change)."""
    name = f"{quote_name(row['database'])}.{quote_name(row['table'])}"
    stored = _stored(table)
    kind = row[Col.TYPE]
    if kind == "insert":
        return f"DELETE FROM {name} WHERE {_where(row, table, flavor)} LIMIT 1;"
    if kind == "delete":
        cols = _image(row, "before", table)
        names = ", ".join(quote_name(n) for n, _, _ in cols)
        values = ", ".join(sql_literal(v, stored[n], raw, flavor=flavor) for n, v, raw in cols)
        return f"INSERT INTO {name} ({names}) VALUES ({values});"
    if kind == "update":
        back = set(changed(row) or [])
        sets = [
            f"{quote_name(n)} = {sql_literal(v, stored[n], raw, flavor=flavor)}"
            for n, v, raw in _image(row, "before", table)
            if n in back
        ]
        if not sets:
            return None
        return f"UPDATE {name} SET {', '.join(sets)} WHERE {_where(row, table, flavor)} LIMIT 1;"
    return None


def script(
    rows: list[dict[str, Any]],
    tables: Mapping[tuple[str, str], TableDef | None],
    *,
    flavor: str,
    check: bool = True,
    title: str = "",
) -> str:
    """The undo script for `rows` (history versions, any order: reversed newest first)."""
    ordered = sorted((r for r in rows if not r.get(MOVED_AWAY)), key=lambda r: int(r[Col.ORDER_KEY]), reverse=True)
    seen: set[int] = set()
    out = [
        f"-- mysqlcapture undo{': ' + title if title else ''}",
        "-- Reverses the changes below, newest first, in one transaction. Review it before running it: nothing "
        "was run.",
        "-- Each DELETE/UPDATE is guarded by the row's image after its change; an INSERT fails on a duplicate key.",
    ]
    if check:
        out.append(
            "-- A check after each statement stops the script (nothing committed) if that statement changed no "
            "row: the row moved on since."
        )
    out += [*PRELUDE, "START TRANSACTION;"]
    reversed_n = skipped = 0
    for r in ordered:
        key = int(r[Col.ORDER_KEY])
        if key in seen:
            continue
        seen.add(key)
        table = tables.get((r["database"], r["table"]))
        if table is None:
            raise UndoError(
                f"{r['database']}.{r['table']}: no definition in the schema history, so its values cannot be written "
                "as exact literals (give the manifest or --changelog of the capture that wrote the history)"
            )
        when = datetime.datetime.fromtimestamp(r[Col.TS], datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        out.append(
            f"-- {r[Col.TYPE]} of {r['database']}.{r['table']} {r[PK] or '(no key)'} at {when} UTC, "
            f"GTID {r[Col.GTID] or '-'}, {r[Col.BINLOG_FILE]}:{r[Col.EVENT_POS]}"
        )
        found = statement(r, table, flavor)
        if found is None:
            out.append(
                "-- nothing to reverse: "
                + (
                    "a snapshot's read of the row, not a change"
                    if r[Col.TYPE] == "bootstrap-insert"
                    else "no stored column changed"
                )
            )
            skipped += 1
            continue
        lenient = writes_enum_error_value(r, table)
        # The check reads ROW_COUNT() of the statement right before it: before strict mode is set again.
        out += [LENIENT] if lenient else []
        out += [found, CHECK] if check else [found]
        out += [STRICT] if lenient else []
        reversed_n += 1
    out.append("COMMIT;")
    out.append(f"-- {reversed_n} change(s) reversed, {skipped} without a statement")
    return "\n".join(out) + "\n"
