"""`mysqlcapture-compact history | undo | as-of`: a DBA's questions to the row histories, without Spark.

history: the versions a filter picks (table, key, window, type, GTID, changed column, a column's value), newest
first, as a table, JSON lines or CSV. undo: a script reversing them (undo.py), printed, never run. as-of: a
table's or a row's state at a time. A window the histories do not cover is said (history_scope.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson
from mysqlcapture_api.schema.model import INTEGER_TYPES, TableDef

from mysqlcapture_compaction import (
    as_of,
    history,
    history_json,
    history_output,
    history_scope,
    history_where,
    targets,
    undo,
)
from mysqlcapture_compaction.history_values import MARIADB, MYSQL

# 2: the question is malformed; 1: the histories cannot answer it.
USAGE, OUTSIDE = 2, 1


class Refused(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def add_filters(p: argparse.ArgumentParser, *, table_required: bool = False) -> None:
    p.add_argument("--table", required=table_required, help="database.table")
    p.add_argument(
        "--pk", action="append", help="primary-key value (repeat for a composite key, in key order): one row"
    )
    p.add_argument("--since", help="from this time (epoch seconds or ISO 8601, UTC unless an offset is given)")
    p.add_argument("--until", help="up to this time, inclusive")
    p.add_argument(
        "--type",
        action="append",
        choices=history.VERSION_TYPES,
        help="only these kinds of version (repeatable); bootstrap-insert: a snapshot's read of a row",
    )
    p.add_argument("--gtid", help="one transaction: its versions in every table (or in --table)")
    p.add_argument("--changed", help="updates that changed this column (and inserts and deletes, which set every one)")
    p.add_argument("--where", help="a column's value in the before or after image: \"status = 'paid'\"")
    p.add_argument("--limit", type=int, help="at most this many versions (the newest, or the oldest with --oldest)")
    p.add_argument("--oldest", action="store_true", help="oldest first (default: newest first)")


def table_of(args: argparse.Namespace) -> tuple[str, str] | None:
    """--table as (database, table), None when not given; refused when it is not database.table."""
    if args.table is None:
        return None
    database, _, table = args.table.partition(".")
    if not database or not table:
        raise Refused(f"--table {args.table}: give it as database.table", USAGE)
    return database, table


def query(args: argparse.Namespace, output: str) -> history.Query:
    """The Query the filter flags ask for (refused: no table nor GTID; --pk on a table without a key)."""
    place = table_of(args)
    if place is None and args.gtid is None:
        raise Refused("--table database.table is required (or --gtid, for one transaction across tables)", USAGE)
    if place is not None and args.pk and targets.by_value(targets.Target(output, *place).path):
        raise Refused(
            f"{args.table} has no primary key: its rows are matched by value and their versions are listed under no "
            "key. Leave out --pk (--since/--until/--where narrow the list).",
            USAGE,
        )
    try:
        where = history_where.parse(args.where) if args.where else None
    except history_where.WhereError as exc:
        raise Refused(str(exc), USAGE) from exc
    if args.limit is not None and args.limit < 1:
        raise Refused("--limit must be 1 or more", USAGE)
    return history.Query(
        database=place[0] if place else None,
        table=place[1] if place else None,
        pk=_pk(args.pk),
        since=_time(args.since, "--since"),
        until=_time(args.until, "--until"),
        types=frozenset(args.type or ()),
        gtid=args.gtid,
        changed=args.changed,
        where=where,
        limit=args.limit,
        newest_first=not args.oldest,
        moves_twice=bool(args.pk),
    )


def _pk(values: list[str] | None) -> str | None:
    try:
        return history.pk_json(values) if values else None
    except ValueError as exc:
        raise Refused(str(exc), USAGE) from exc


def _known(q: history.Query, output: str, table: TableDef | None) -> None:
    """Refuse a question about a table the capture does not know, a key of the wrong length or type, or --changed
    naming no column of the table."""
    if q.database is None or q.table is None:
        return
    name = f"{q.database}.{q.table}"
    held = _held(output, q.database, q.table, table)
    _key_fits(name, table, q.pk)
    columns = {c.name for c in table.columns} if table is not None else set()
    if q.changed is not None and q.changed not in columns | set(held or ()):
        raise Refused(f"--changed {q.changed}: not a column of {name}", USAGE)


def _held(output: str, database: str, name: str, table: TableDef | None) -> list[str] | None:
    """The columns the table's history holds; refused when the capture knows no such table."""
    held = history.image_columns(output, database, name)
    if table is None and held is None:
        raise Refused(
            f"--table {database}.{name}: no such table in this capture (its schema history has no definition of it "
            "and no compaction run wrote a history of it); check the name, or run `compact` first",
            OUTSIDE,
        )
    return held


_NUMBERS = frozenset({"decimal", "float", "double"})


def _key_fits(name: str, table: TableDef | None, pk: str | None) -> None:
    """Refuse a --pk of the wrong length, or whose value cannot be one of its key column's (`abc` for an INT)."""
    if pk is None or table is None or not table.primary_key:
        return
    values = orjson.loads(pk)
    if len(values) != len(table.primary_key):
        key = ", ".join(table.primary_key)
        raise Refused(
            f"--pk: {name}'s primary key is ({key}): give {len(table.primary_key)} value(s) in that order "
            f"(repeat --pk), not {len(values)}",
            USAGE,
        )
    types = {c.name.lower(): c.type for c in table.columns}
    for column, value in zip(table.primary_key, values, strict=True):
        kind = types.get(column.lower(), "")
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if (kind in INTEGER_TYPES and not (number and float(value).is_integer())) or (kind in _NUMBERS and not number):
            raise Refused(f"--pk {value}: {name}.{column} is {kind.upper()}: give a number of that type", USAGE)


def _time(text: str | None, flag: str) -> int | None:
    try:
        return history.parse_time(text)
    except ValueError as exc:
        example = "e.g. 2026-11-27T10:00:00Z"
        raise Refused(f"{flag} {text}: not a time (give epoch seconds or ISO 8601, {example})", USAGE) from exc


def _versions(changelog: str, output: str, args: argparse.Namespace) -> tuple[history.Query, history.Found]:
    q = query(args, output)
    defs, _ = history_scope.definitions(changelog)
    _known(q, output, defs.get((q.database, q.table)) if q.database and q.table else None)
    try:
        notes = history_scope.coverage(changelog, output).check_window(q.since, q.until)
    except history_scope.OutsideHistory as exc:
        raise Refused(str(exc), OUTSIDE) from exc
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    try:
        return q, history.select(output, q)
    except history_where.WhereError as exc:
        raise Refused(str(exc), USAGE) from exc


def run_history(changelog: str, output: str, args: argparse.Namespace) -> int:
    q, found = _versions(changelog, output, args)
    defs, _ = history_scope.definitions(changelog)
    if args.format == "json" and hasattr(sys.stdout, "buffer"):  # a busy table's hour: written as Arrow made it
        sys.stdout.flush()
        for chunk in history_json.json_lines(defs, found):
            sys.stdout.buffer.write(chunk)
    else:
        sys.stdout.write(history_output.render(args.format, defs, found, tables=q.table is None))
    return 0


def run_undo(changelog: str, output: str, args: argparse.Namespace) -> int:
    _, found = _versions(changelog, output, args)
    rows = found.rows()
    defs, recorded = history_scope.definitions(changelog)
    flavor = (
        args.flavor
        or recorded
        or next((f for r in rows if r["gtid"] and (f := history_scope.flavor_of_gtid(r["gtid"]))), None)
    )
    if flavor is None:
        raise Refused(
            "give --flavor mysql or --flavor mariadb: the capture recorded no GTID to tell which server wrote it "
            "(JSON values are written differently for each)",
            USAGE,
        )
    title = " ".join(a for a in sys.argv[1:] if a) if args.title is None else args.title
    try:
        text = undo.script(rows, defs, flavor=flavor, check=not args.skip_moved, title=title)
    except undo.UndoError as exc:
        raise Refused(str(exc), OUTSIDE) from exc
    sys.stdout.write(text)
    print(f"note: {len(rows)} version(s) picked; review the script, then run it with the mysql client", file=sys.stderr)
    return 0


def run_as_of(changelog: str, output: str, args: argparse.Namespace) -> int:
    place = table_of(args)
    assert place is not None
    at = _time(args.at, "--at")
    assert at is not None
    defs, _ = history_scope.definitions(changelog)
    _held(output, *place, defs.get(place))
    pk = _pk(args.pk)
    _key_fits(args.table, defs.get(place), pk)
    try:
        history_scope.coverage(changelog, output).check_moment(at)
    except history_scope.OutsideHistory as exc:
        raise Refused(str(exc), OUTSIDE) from exc
    marks = history_scope.snapshots(output, *place)
    done = [ts for kind, _, ts in marks if kind == "bootstrap-complete"]
    begun = [ts for kind, _, ts in marks if kind == "bootstrap-start"]
    if begun and at < begun[0]:
        raise Refused(
            f"{args.table} was first read by a snapshot from {history_scope.when(begun[0])}: the rows it held before "
            "were never captured, so its state at that time is not known",
            OUTSIDE,
        )
    if done and at < done[0]:
        raise Refused(
            f"{args.table}'s first snapshot completed at {history_scope.when(done[0])}: before that its state is "
            "not whole. Ask for a time after it.",
            OUTSIDE,
        )
    keyless = targets.by_value(targets.Target(output, *place).path)
    if keyless:
        if args.pk:
            raise Refused(f"{args.table} has no primary key: leave out --pk", USAGE)
        starts = [key for kind, key, _ in marks if kind == "bootstrap-start"]
        rows = as_of.keyless_state(output, *place, at, starts)
    else:
        rows = as_of.keyed_state(output, *place, at, pk)
    sys.stdout.write(history_output.rows_render(args.format, defs.get(place), rows, place))
    return 0


def add_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    hist = sub.add_parser("history", parents=[common], help="row versions by table, key, time, GTID, column or value")
    add_filters(hist)
    hist.add_argument("--format", choices=history_output.FORMATS, default="table")
    back = sub.add_parser("undo", parents=[common], help="print a SQL script reversing the versions a filter picks")
    add_filters(back)
    back.add_argument("--flavor", choices=(MYSQL, MARIADB), help="the source server (default: as its GTIDs say)")
    back.add_argument(
        "--skip-moved",
        action="store_true",
        help="no check after each statement: a row that moved on since is left as it is and the rest applied",
    )
    back.add_argument("--title", help="the script's first comment (default: the command line)")
    at = sub.add_parser("as-of", parents=[common], help="a table's or a row's state at a time")
    at.add_argument("--table", required=True, help="database.table")
    at.add_argument("--at", required=True, help="the time (epoch seconds or ISO 8601, UTC unless an offset is given)")
    at.add_argument("--pk", action="append", help="primary-key value (repeat for a composite key): one row")
    at.add_argument("--format", choices=history_output.FORMATS, default="table")


HANDLERS = {"history": run_history, "undo": run_undo, "as-of": run_as_of}
