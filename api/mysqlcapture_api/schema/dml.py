"""The tables a data-changing statement logged as text writes to.

With `binlog_format=ROW` a server logs every row a statement changes as row events. A session may still set its
own `binlog_format` to STATEMENT or MIXED (pt-table-checksum does, for its checksum table): its INSERT, REPLACE,
UPDATE and DELETE statements are then logged as their text, with no row events, and only a new read of the tables
they wrote tells what those tables hold. `written_tables` names them.
"""

from __future__ import annotations

import re

from mysqlcapture_api.schema.ddl_tokens import EOF, IDENT, OP, STRING, WORD, Cursor, DdlParseError
from mysqlcapture_api.schema.schema import Schema

_LEAD = re.compile(r"(?:\s+|/\*(?!!|M!).*?\*/|/\*M?!\d*|--(?=\s|$)[^\n]*|#[^\n]*|\()*", re.S)
_VERBS = ("INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "SET")
_MODIFIERS = ("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "CONCURRENT", "LOCAL")


def _may_be_dml(sql: str) -> bool:
    start = _LEAD.match(sql)
    return sql[start.end() if start else 0 :][:10].upper().startswith(_VERBS)


def written_tables(sql: str, default_db: str | None, schema: Schema) -> tuple[tuple[str, str], ...]:
    """The tables of `schema` that `sql`, an INSERT, REPLACE, UPDATE, DELETE or LOAD DATA (behind MariaDB's SET
    STATEMENT ... FOR or a WITH clause too), may have written; () for any other statement.

    INSERT, REPLACE and LOAD DATA write the one table they name. UPDATE and DELETE: every table of `schema` the
    statement names (a superset where a multi-table statement only reads some of them: a table read again costs a
    snapshot, a table missed would lose its change). A statement not read to its target names every table it
    mentions."""
    if not _may_be_dml(sql):
        return ()
    try:
        cur = Cursor(sql)
    except DdlParseError:
        return ()
    while cur.accept_op("("):
        pass
    if cur.accept("SET", "STATEMENT"):  # MariaDB: SET STATEMENT var=value[, ...] FOR <statement>
        while not cur.at("FOR") and cur.peek().kind != EOF:
            cur.next()
        cur.accept("FOR")
    if cur.at("INSERT", "REPLACE", "LOAD"):
        if cur.accept("LOAD"):  # LOAD DATA|XML [LOW_PRIORITY|CONCURRENT] [LOCAL] INFILE 'f' [REPLACE|IGNORE] INTO TABLE
            if not cur.accept("DATA") and not cur.accept("XML"):
                return ()
            while cur.at(*_MODIFIERS):
                cur.next()
            if not cur.accept("INFILE") or cur.peek().kind != STRING:
                return _named(cur, default_db, schema)
            cur.next()
            cur.accept("REPLACE") or cur.accept("IGNORE")
            cur.accept("INTO", "TABLE")
        else:
            cur.next()
            while cur.at(*_MODIFIERS):
                cur.next()
            cur.accept("INTO")
        try:
            database, table = cur.qualified(default_db)
        except DdlParseError:
            return _named(cur, default_db, schema)
        found = schema.table(database, table)
        return ((found.database, found.name),) if found is not None else ()
    if cur.at("UPDATE", "DELETE", "WITH"):
        return _named(cur, default_db, schema)
    return ()


def _named(cur: Cursor, default_db: str | None, schema: Schema) -> tuple[tuple[str, str], ...]:
    """Every table of `schema` the statement's tokens name (`t`, `db`.`t`), in order, once each."""
    tokens = cur.tokens
    out: dict[tuple[str, str], None] = {}
    for i, tok in enumerate(tokens):
        if tok.kind not in (WORD, IDENT):
            continue
        if i > 0 and tokens[i - 1].kind == OP and tokens[i - 1].value == ".":
            continue  # the second half of a qualified name: seen with its first
        dotted = i + 2 < len(tokens) and tokens[i + 1].kind == OP and tokens[i + 1].value == "."
        candidates = [(tok.value, tokens[i + 2].value)] if dotted and tokens[i + 2].kind in (WORD, IDENT) else []
        if default_db:
            candidates.append((default_db, tok.value))
        for database, table in candidates:
            found = schema.table(database, table)
            if found is not None:
                out[(found.database, found.name)] = None
    return tuple(out)
