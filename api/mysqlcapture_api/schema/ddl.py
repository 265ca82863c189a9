"""DDL from binlog Query events applied to a Schema, with the Maxwell DDL events each statement produces."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from typing import Any

from mysqlcapture_api.schema.ddl_alter import AlterPlan, convert_columns, parse_alter_specs
from mysqlcapture_api.schema.ddl_columns import collation_charset
from mysqlcapture_api.schema.ddl_table import (
    TableBuilder,
    parse_create_body,
    parse_table_options,
    refuse_select,
)
from mysqlcapture_api.schema.ddl_tokens import Cursor, DdlParseError
from mysqlcapture_api.schema.model import TableDef
from mysqlcapture_api.schema.schema import SYSTEM_DATABASES, Schema
from mysqlcapture_api.schema.types import UnsupportedColumnTypeError, charset_name

__all__ = ["DdlParseError", "DdlResult", "UnsupportedColumnTypeError", "apply_ddl"]

log = logging.getLogger(__name__)

# Whatever may precede the first keyword: blanks, comments, the opening of an executable comment.
_LEAD = re.compile(r"(?:\s+|/\*(?!!|M!).*?\*/|/\*M?!\d*|--(?=\s|$)[^\n]*|#[^\n]*)*", re.S)
_DDL_WORDS = ("CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE")
_SET_STATEMENT = re.compile(r"SET\s+STATEMENT\b")


@dataclass(frozen=True)
class DdlResult:
    schema: Schema
    events: list[dict[str, Any]] = field(default_factory=list)
    # Tables (as named after the statement) whose rows it added or removed without row events in the binlog:
    # partition operations (TRUNCATE, DROP, EXCHANGE, CONVERT PARTITION) and IMPORT TABLESPACE. Only a new read
    # of such a table (a snapshot) tells what it holds. (TRUNCATE TABLE has its own event: every row is gone.)
    unlogged: tuple[tuple[str, str], ...] = ()


def _may_be_ddl(sql: str) -> bool:
    """Cheap pre-check: does the statement start (after comments) with a DDL verb or SET STATEMENT?"""
    start = _LEAD.match(sql)
    head = sql[start.end() if start else 0 :][:20].upper()
    return head.startswith(_DDL_WORDS) or _SET_STATEMENT.match(head) is not None


def apply_ddl(schema: Schema, sql: str, default_db: str) -> DdlResult:
    """The schema after `sql` (run with `default_db` current) and Maxwell's DDL events for it.

    Recognised: CREATE/ALTER/DROP DATABASE|SCHEMA, CREATE [OR REPLACE] TABLE (definition or LIKE),
    ALTER [ONLINE] [IGNORE] TABLE, DROP TABLE(S), RENAME TABLE(S), TRUNCATE [TABLE], also behind MariaDB's
    SET STATEMENT ... FOR. Every other statement (DML, BEGIN, GRANT, views, triggers, routines,
    events, indexes, temporary tables, ...) returns `schema` unchanged and no events.

    TRUNCATE TABLE removes every row without a row event in the binlog. Maxwell drops it; here it is a
    `table-truncate` event (no definition; the schema is unchanged), so a consumer that rebuilds tables from
    the change log (compaction) can empty the table where the source did.

    Maxwell's conventions: a RENAME TABLE (or ALTER TABLE ... RENAME) is a `table-alter` whose
    `database` and `table` are the old names and whose `old`/`def` differ in name; `table-drop` and
    `database-drop` carry no definition; `database-create`/`database-alter` carry the charset.
    Statements on tables the schema does not hold (excluded at capture, system-versioned, sequences,
    system databases) change nothing and produce no event: rows of such tables, if captured at all,
    are decoded from the binlog's own metadata.

    Raises DdlParseError for a statement the parser cannot read (or that does not fit the schema),
    UnsupportedColumnTypeError for a column type the capture cannot decode. Both leave `schema` as
    it was; the caller decides whether to stop.
    """
    if not _may_be_ddl(sql):
        return DdlResult(schema)
    return _Statement(schema, sql, default_db or None).apply()


def _table_event(
    kind: str,
    database: str,
    table: str,
    sql: str,
    *,
    old: TableDef | None = None,
    new: TableDef | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = {"type": kind, "database": database, "table": table}
    if old is not None:
        event["old"] = old.to_maxwell()
    if new is not None:
        event["def"] = new.to_maxwell()
    event["sql"] = sql
    return event


def _renamed(table: TableDef, database: str, name: str, *, keys: bool = True) -> TableDef:
    """The table under another name; with its foreign keys (a rename), or without them (CREATE TABLE ... LIKE, a
    partition converted: the server does not copy them)."""
    if not keys:
        return replace(table, database=database, name=name, foreign_keys=())
    # A foreign key the server named (`<table>_ibfk_<n>`) takes the table's new name.
    generated = f"{table.name}_ibfk_".lower()
    renamed = tuple(
        replace(f, name=f"{name}_ibfk_{f.name[len(generated) :]}") if f.name.lower().startswith(generated) else f
        for f in table.foreign_keys
    )
    return replace(table, database=database, name=name, foreign_keys=renamed)


class _Statement:
    def __init__(self, schema: Schema, sql: str, default_db: str | None) -> None:
        self.schema = schema
        self.sql = sql
        self.default_db = default_db
        self.cur = Cursor(sql)
        self.events: list[dict[str, Any]] = []
        self.unlogged: list[tuple[str, str]] = []

    def apply(self) -> DdlResult:
        cur = self.cur
        if cur.accept("SET", "STATEMENT"):  # MariaDB: SET STATEMENT var=value[, ...] FOR <statement>
            while not (cur.at("FOR") or cur.at_end()):
                if cur.at_op("("):
                    cur.skip_parens()
                else:
                    cur.next()
            cur.expect("FOR")
        if cur.accept("CREATE"):
            or_replace = cur.accept("OR", "REPLACE")
            if cur.accept("DATABASE") or cur.accept("SCHEMA"):
                self._create_database(or_replace)
            elif not cur.accept("TEMPORARY") and cur.accept("TABLE"):
                self._create_table(or_replace)
        elif cur.accept("ALTER"):
            if cur.accept("DATABASE") or cur.accept("SCHEMA"):
                self._alter_database()
            else:
                while cur.accept("ONLINE") or cur.accept("IGNORE"):
                    pass
                if cur.accept("TABLE"):
                    self._alter_table()
        elif cur.accept("DROP"):
            if cur.accept("DATABASE") or cur.accept("SCHEMA"):
                self._drop_database()
            elif not cur.accept("TEMPORARY") and (cur.accept("TABLE") or cur.accept("TABLES")):
                self._drop_tables()
        elif cur.accept("RENAME") and (cur.accept("TABLE") or cur.accept("TABLES")):
            self._rename_tables()
        elif cur.accept("TRUNCATE"):
            self._truncate_table()
        return self._without_system_databases()

    def _without_system_databases(self) -> DdlResult:
        """Like capture_schema, leave the system databases out (a table renamed into one is dropped)."""
        schema, events = self.schema, self.events
        if any(name.lower() in SYSTEM_DATABASES for name in schema.databases):
            for name in list(schema.databases):
                if name.lower() in SYSTEM_DATABASES:
                    schema = schema.without_database(name)
        kept = [e for e in events if str(e["database"]).lower() not in SYSTEM_DATABASES]
        unlogged = tuple(t for t in dict.fromkeys(self.unlogged) if t[0].lower() not in SYSTEM_DATABASES)
        return DdlResult(schema, kept, unlogged)

    # -- databases -----------------------------------------------------------------------------
    def _database_options(self) -> str | None:
        cur, charset = self.cur, None
        while not cur.at_end():
            cur.accept("DEFAULT")
            if cur.accept_charset():
                cur.accept_op("=")
                charset = charset_name(cur.name("a charset name", strings=True))
            elif cur.accept("COLLATE"):
                charset = collation_charset(cur, charset)
            elif cur.accept("COMMENT") or cur.accept("ENCRYPTION"):
                cur.accept_op("=")
                cur.string()
            else:
                raise cur.error("unknown database option")
        cur.expect_end()
        return charset

    def _create_database(self, or_replace: bool) -> None:
        if_not_exists = self.cur.accept("IF", "NOT", "EXISTS")
        name = self.cur.name("a database name")
        charset = self._database_options() or self.schema.charset
        existing = self.schema.database(name)
        if existing is not None and if_not_exists:
            return
        if or_replace:
            self.schema = self.schema.without_database(name)
        self.schema = self.schema.with_database(name, charset)
        self.events.append({"type": "database-create", "database": name, "charset": charset, "sql": self.sql})

    def _alter_database(self) -> None:
        cur = self.cur
        name = self.default_db
        if not cur.at("DEFAULT", "CHARACTER", "CHAR", "CHARSET", "COLLATE", "COMMENT", "ENCRYPTION"):
            name = cur.name("a database name")
        if cur.accept("UPGRADE"):
            return
        charset = self._database_options()
        existing = self.schema.database(name) if name else None
        if existing is None:
            return
        self.schema = self.schema.with_database(existing.name, charset)
        new_charset = charset or existing.charset
        self.events.append(
            {"type": "database-alter", "database": existing.name, "charset": new_charset, "sql": self.sql}
        )

    def _drop_database(self) -> None:
        self.cur.accept("IF", "EXISTS")
        name = self.cur.name("a database name")
        self.cur.expect_end()
        existing = self.schema.database(name)
        if existing is None:
            return
        self.schema = self.schema.without_database(existing.name)
        self.events.append({"type": "database-drop", "database": existing.name, "sql": self.sql})

    # -- tables --------------------------------------------------------------------------------
    def _create_table(self, or_replace: bool) -> None:
        cur = self.cur
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        db, name = cur.qualified(self.default_db)
        existing = self.schema.table(db, name, exact=True)  # lower_case_table_names=0: t and T differ
        if existing is not None and if_not_exists:
            return
        if cur.accept("LIKE") or (cur.at_op("(") and cur.at("LIKE", ahead=1)):
            definition = self._like(db, name)
        else:
            if not cur.at_op("("):
                refuse_select(cur)
            specs, primary, foreign = parse_create_body(cur, (db, name))
            options = parse_table_options(cur)
            if options.system_versioning:
                definition = None
            else:
                charset = options.charset
                tb = TableBuilder(db, name, self._charset_or_default(charset, db))
                for spec in specs:
                    tb.add(spec, None, cur)
                if primary is not None:
                    tb.set_primary_key(primary, cur)
                for key in foreign:
                    tb.add_foreign_key(key)
                definition = tb.build()
        if existing is not None:
            self.schema = self.schema.without_table(existing.database, existing.name)
        if definition is None:
            log.info("not tracking %s.%s (its source is not in the schema or it is system-versioned)", db, name)
            return
        self.schema = self.schema.with_table(definition)
        created = self.schema.table(db, name)
        assert created is not None
        self.events.append(_table_event("table-create", created.database, created.name, self.sql, new=created))

    def _charset_or_default(self, charset: str | None, db: str) -> str:
        return charset if charset not in (None, "default") else self.schema.database_charset(db)

    def _like(self, db: str, name: str) -> TableDef | None:
        cur = self.cur
        parens = cur.accept_op("(")
        if parens:
            cur.expect("LIKE")
        src_db, src_name = cur.qualified(self.default_db)
        if parens:
            cur.expect_op(")")
        cur.expect_end()
        source = self.schema.table(src_db, src_name)
        return None if source is None else _renamed(source, db, name, keys=False)

    def _alter_table(self) -> None:
        cur = self.cur
        cur.accept("IF", "EXISTS")
        db, name = cur.qualified(self.default_db)
        table = self.schema.table(db, name)
        if table is None:
            log.info("ALTER TABLE of %s.%s, which the schema does not track: ignored", db, name)
            return
        plan = parse_alter_specs(cur, (table.database, table.name), self.default_db)
        self._apply_alter(table, plan)

    def _apply_alter(self, table: TableDef, plan: AlterPlan) -> None:
        tb = TableBuilder.of(table)
        charset = plan.convert_to or plan.options.charset
        if charset is not None:
            tb.charset = self._charset_or_default(charset, table.database)
        if plan.convert_to is not None:
            convert_columns(tb, tb.charset)
        for position, edit in zip(plan.edit_positions, plan.edits, strict=True):
            self.cur.i = position  # an edit that cannot apply is reported at its specification
            edit(tb)
        after = tb.build()
        if plan.rename_to is not None:
            target_db = self.schema.database(plan.rename_to[0])
            after = _renamed(after, target_db.name if target_db else plan.rename_to[0], plan.rename_to[1])
        self.schema = self.schema.without_table(table.database, table.name)
        if plan.options.system_versioning:
            log.info("%s.%s became system-versioned: no longer tracked", table.database, table.name)
            return
        # The foreign keys referencing the table (its own too) follow a rename of it and of their columns.
        self.schema = self.schema.with_table(after).with_parent_renamed(
            (table.database, table.name), (after.database, after.name), tb.renamed
        )
        after = self.schema.table(after.database, after.name, exact=True) or after
        self.events.append(_table_event("table-alter", table.database, table.name, self.sql, old=table, new=after))
        if plan.rows_unlogged:
            self.unlogged.append((after.database, after.name))
        other = self.schema.table(*plan.exchanged_with) if plan.exchanged_with is not None else None
        if other is not None:
            self.unlogged.append((other.database, other.name))
        if plan.partition_to_table is not None:
            created = _renamed(after, *plan.partition_to_table, keys=False)
            self.schema = self.schema.with_table(created)
            self.events.append(_table_event("table-create", created.database, created.name, self.sql, new=created))
            self.unlogged.append((created.database, created.name))
        if plan.table_to_partition is not None:
            gone = self.schema.table(*plan.table_to_partition)
            if gone is not None:
                self.schema = self.schema.without_table(gone.database, gone.name)
                self.events.append(_table_event("table-drop", gone.database, gone.name, self.sql))

    def _drop_tables(self) -> None:
        cur = self.cur
        cur.accept("IF", "EXISTS")
        names = [cur.qualified(self.default_db)]
        while cur.accept_op(","):
            names.append(cur.qualified(self.default_db))
        if cur.accept("WAIT"):
            cur.integer()
        cur.accept("NOWAIT")
        cur.accept("RESTRICT") or cur.accept("CASCADE")
        cur.expect_end()
        for db, name in names:
            table = self.schema.table(db, name)
            if table is not None:
                self.schema = self.schema.without_table(table.database, table.name)
                self.events.append(_table_event("table-drop", table.database, table.name, self.sql))

    def _rename_tables(self) -> None:
        cur = self.cur
        cur.accept("IF", "EXISTS")
        pairs = []
        while True:
            source = cur.qualified(self.default_db)
            if cur.accept("WAIT"):
                cur.integer()
            cur.accept("NOWAIT")
            cur.expect("TO")
            pairs.append((source, cur.qualified(self.default_db)))
            if not cur.accept_op(","):
                break
        cur.expect_end()
        for (db, name), (new_db, new_name) in pairs:
            table = self.schema.table(db, name)
            if table is None:
                continue
            target_db = self.schema.database(new_db)
            renamed = _renamed(table, target_db.name if target_db else new_db, new_name)
            self.schema = self.schema.without_table(table.database, table.name).with_table(renamed)
            self.schema = self.schema.with_parent_renamed(
                (table.database, table.name), (renamed.database, renamed.name), {}
            )
            renamed = self.schema.table(renamed.database, renamed.name, exact=True) or renamed
            self.events.append(
                _table_event("table-alter", table.database, table.name, self.sql, old=table, new=renamed)
            )

    def _truncate_table(self) -> None:
        cur = self.cur
        cur.accept("TABLE")
        db, name = cur.qualified(self.default_db)
        if cur.accept("WAIT"):  # MariaDB
            cur.integer()
        cur.accept("NOWAIT")
        cur.expect_end()
        table = self.schema.table(db, name)
        if table is not None:
            self.events.append(_table_event("table-truncate", table.database, table.name, self.sql))
