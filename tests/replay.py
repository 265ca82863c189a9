"""Replay a change log into tables and compare them, value by value, with `SELECT *` on the source."""

from __future__ import annotations

import base64
import datetime
import json
from decimal import Decimal
from typing import Any

Key = tuple[str, str]


def replay(rows: list[dict[str, Any]], *, strict: bool = True) -> dict[Key, dict[str, dict[str, Any]]]:
    """Apply change-log rows in order: the state of every table, rows keyed by primary-key JSON.

    `strict=False` accepts re-applied events (at-least-once stretches, as after a heartbeat failover):
    a delete or update of a row that is not there is then not an error.

    Snapshots (Maxwell's bootstrap events): `bootstrap-start` replaces the table's rows with the
    `bootstrap-insert`s that follow, each an upsert. A snapshot placed before binlog events it already
    saw (a resumed or requested one) is followed by updates and deletes of rows it no longer holds:
    after a bootstrap-start those are no-ops for that table (runner.py explains why the result is exact).
    So are the events before a table's snapshot that had to start again from a later view (a DDL made the
    first view unable to read it): its bootstrap-start replaces whatever they left.
    """
    tables: dict[Key, dict[str, dict[str, Any]]] = {}
    bootstrapped = {(r["database"], r["table"]) for r in rows if r["type"] == "bootstrap-start"}
    # Tables that were there before the change log began (not created, nor renamed into, by it): their events before
    # their snapshot (or before a rename or drop took them out of it) concern rows the change log never held.
    created: set[Key] = set()
    for r in rows:
        if r["type"] == "table-create":
            created.add((r["database"], r["table"]))
        elif r["type"] == "table-alter" and r["data"]:
            new = _loads(r["data"])
            old = (r["database"], r["table"])
            if (new["database"], new["table"]) != old and old in created:  # renamed: there before if `old` was
                created.add((new["database"], new["table"]))
        if (r["database"], r["table"]) not in created and r["type"] in ("update", "delete"):
            bootstrapped.add((r["database"], r["table"]))
    for row in rows:
        db, table, kind = row["database"], row["table"], row["type"]
        if kind == "bootstrap-start":
            tables[(db, table)] = {}
        elif kind == "bootstrap-insert":
            data = _loads(row["data"])
            tables.setdefault((db, table), {})[_pk(data, _loads(row["primary_key_columns"]))] = data
        elif kind in ("insert", "update", "delete"):
            lenient = not strict or (db, table) in bootstrapped
            data = _loads(row["data"])
            pk_cols = _loads(row["primary_key_columns"])
            state = tables.setdefault((db, table), {})
            key = row["primary_key"]
            if kind == "delete":
                gone = state.pop(_pk(data, pk_cols), None)
                assert gone is not None or lenient, f"delete of a missing row: {row}"
                continue
            if kind == "update":
                old = _loads(row["old"]) if row["old"] else {}
                before = {**data, **old}
                found = state.pop(_pk(before, pk_cols), None)
                assert found is not None or lenient, f"update of a missing row: {row}"
            state[_pk(data, pk_cols)] = data
            assert _pk(data, pk_cols) == _pk(_loads(key), None), row
        elif kind == "table-create":
            tables[(db, table)] = {}
        elif kind == "table-drop":
            tables.pop((db, table), None)
        elif kind == "table-truncate":
            tables[(db, table)] = {}
        elif kind == "table-alter":
            new = _loads(row["data"])
            if new["table"] != table or new["database"] != db:
                tables[(new["database"], new["table"])] = tables.pop((db, table), {})
        elif kind == "database-drop":
            for k in [k for k in tables if k[0] == db]:
                del tables[k]
    return tables


def _loads(value: Any) -> Any:
    """A change-log JSON column (text), or the already-parsed value (JSON lines read with Decimals)."""
    return json.loads(value, parse_float=Decimal) if isinstance(value, str) else value


def _pk(values: Any, pk_cols: list[str] | None) -> str:
    if pk_cols is None:
        return json.dumps(values, default=str)
    return json.dumps([values[c] for c in pk_cols], default=str)


def _fmt_fraction(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def maxwell_value(value: Any, data_type: str, column_type: str, fsp: int) -> Any:
    """The Maxwell JSON rendering (as parsed JSON) of a value PyMySQL returned for a column."""
    if value is None:
        return None
    if data_type in ("decimal",):
        return Decimal(value)
    if data_type in ("float", "double"):
        return Decimal(repr(value)) if data_type == "double" else value
    if data_type == "bit":
        n = int.from_bytes(value, "big")
        return bool(n) if column_type == "bit(1)" else n
    if data_type in ("blob", "tinyblob", "mediumblob", "longblob", "binary", "varbinary"):
        return base64.b64encode(value).decode()
    if data_type in ("datetime", "timestamp"):
        if isinstance(value, str):  # zero dates come back as text
            return value
        return value.strftime("%Y-%m-%d %H:%M:%S") + _fmt_fraction(value.microsecond, fsp)
    if data_type == "date":
        return value.isoformat() if isinstance(value, datetime.date) else value
    if data_type == "time":
        total = value.days * 86400 * 10**6 + value.seconds * 10**6 + value.microseconds
        sign = "-" if total < 0 else ""
        total = abs(total)
        secs, micro = divmod(total, 10**6)
        return f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}" + _fmt_fraction(micro, fsp)
    if data_type == "set":
        members = [m.strip("'") for m in column_type[4:-1].split(",")]
        chosen = value if isinstance(value, set) else set(value.split(",")) - {""}
        return [m for m in members if m in chosen]
    if data_type == "json" or (data_type == "longtext" and "json" in column_type):
        return json.loads(value, parse_float=Decimal)
    if isinstance(value, bytes):
        return value.decode()
    return value


def normalize_replayed(value: Any, data_type: str) -> Any:
    if data_type == "double" and value is not None:
        return Decimal(repr(float(value)))
    if data_type == "decimal" and value is not None:
        return Decimal(str(value))
    return value


def json_column_test(cur: Any) -> str:
    """An information_schema.COLUMNS `c` expression true for JSON columns on the cursor's server: MariaDB's JSON
    is LONGTEXT with a json_valid CHECK; MySQL's is a type (and its CHECK_CONSTRAINTS has no TABLE_NAME)."""
    cur.execute("SELECT VERSION()")
    if "mariadb" not in str(cur.fetchone()[0]).lower():
        return "c.DATA_TYPE = 'json'"
    return (
        "EXISTS(SELECT 1 FROM information_schema.CHECK_CONSTRAINTS k WHERE k.CONSTRAINT_SCHEMA = c.TABLE_SCHEMA "
        "AND k.TABLE_NAME = c.TABLE_NAME AND k.CHECK_CLAUSE LIKE CONCAT('%%json_valid(`', c.COLUMN_NAME, '`)%%'))"
    )


def source_tables(conn: Any, databases: list[str]) -> dict[Key, dict[str, dict[str, Any]]]:
    """Every row of every table of `databases` (all their columns), rendered as Maxwell renders values, keyed like
    `replay`."""
    out: dict[Key, dict[str, dict[str, Any]]] = {}
    with conn.cursor() as cur:
        placeholders = ",".join(["%s"] * len(databases))
        is_json = json_column_test(cur)
        cur.execute(
            "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, "
            f"COALESCE(c.DATETIME_PRECISION, 0), {is_json} "
            "FROM information_schema.COLUMNS c JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) "
            f"WHERE c.TABLE_SCHEMA IN ({placeholders}) AND t.TABLE_TYPE = 'BASE TABLE' "
            "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION",
            databases,
        )
        columns: dict[Key, list[tuple[str, str, str, int]]] = {}
        for db, table, name, dtype, ctype, fsp, is_json in cur.fetchall():
            columns.setdefault((db, table), []).append((name, "json" if is_json else str(dtype), str(ctype), int(fsp)))
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            f"WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA IN ({placeholders}) ORDER BY ORDINAL_POSITION",
            databases,
        )
        pks: dict[Key, list[str]] = {}
        for db, table, name in cur.fetchall():
            pks.setdefault((db, table), []).append(name)
        for key, cols in columns.items():
            # Every column information_schema lists, invisible ones too (SELECT * leaves those out; binlogs have them).
            names = ", ".join("`" + c[0].replace("`", "``") + "`" for c in cols)
            cur.execute(f"SELECT {names} FROM `{key[0]}`.`{key[1]}`")
            rows: dict[str, dict[str, Any]] = {}
            for raw in cur.fetchall():
                rendered = {c[0]: maxwell_value(v, c[1], c[2], c[3]) for c, v in zip(cols, raw, strict=True)}
                rows[_pk(rendered, pks.get(key))] = rendered
            out[key] = rows
    return out


def assert_replay_equals_source(
    replayed: dict[Key, dict[str, dict[str, Any]]],
    source: dict[Key, dict[str, dict[str, Any]]],
    types: dict[Key, dict[str, str]] | None = None,
) -> None:
    assert sorted(replayed) == sorted(source), f"tables differ: replay {sorted(replayed)} source {sorted(source)}"
    for key, rows in source.items():
        got = replayed[key]
        assert sorted(got) == sorted(rows), (
            f"{key}: primary keys differ: missing {set(rows) - set(got)}, extra {set(got) - set(rows)}"
        )
        for pk, expected in rows.items():
            actual = got[pk]
            assert set(actual) == set(expected), f"{key} {pk}: columns differ: {sorted(actual)} vs {sorted(expected)}"
            for col, want in expected.items():
                have = actual[col]
                if isinstance(want, Decimal) and have is not None:
                    have = Decimal(str(have))
                assert have == want, f"{key} {pk} column {col}: change log has {have!r}, source has {want!r}"
