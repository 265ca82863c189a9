"""ALTER TABLE: its specifications parsed into edits, then applied to a working copy of the table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from mysqlcapture_api.schema import types as T
from mysqlcapture_api.schema.ddl_columns import (
    ColumnSpec,
    collation_charset,
    parse_column,
    skip_expression,
)
from mysqlcapture_api.schema.ddl_table import (
    Position,
    TableBuilder,
    TableOptions,
    at_constraint,
    parse_constraint,
    parse_table_option,
)
from mysqlcapture_api.schema.ddl_tokens import EOF, Cursor

Edit = Callable[[TableBuilder], None]

_PARTITION_OPS = ("COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR", "TRUNCATE")


@dataclass
class AlterPlan:
    """What one ALTER TABLE does: column edits in order, table-level changes, and a new name."""

    edits: list[Edit]
    options: TableOptions
    edit_positions: list[int] = field(default_factory=list)  # token index of the specification of each edit
    convert_to: str | None = None
    rename_to: tuple[str, str] | None = None
    partition_to_table: tuple[str, str] | None = None  # CONVERT PARTITION p TO TABLE t (MariaDB 10.7)
    table_to_partition: tuple[str, str] | None = None  # CONVERT TABLE t TO PARTITION p
    # The statement adds or removes rows of the table without row events in the binlog (TRUNCATE, DROP, EXCHANGE,
    # CONVERT PARTITION, IMPORT TABLESPACE); EXCHANGE also those of the table it names.
    rows_unlogged: bool = False
    exchanged_with: tuple[str, str] | None = None


def _position(cur: Cursor) -> Position:
    if cur.accept("FIRST"):
        return ("FIRST", "")
    if cur.accept("AFTER"):
        return ("AFTER", cur.name("a column name"))
    return None


def _if_exists(cur: Cursor) -> bool:
    return cur.accept("IF", "EXISTS")


def _add(cur: Cursor, table: tuple[str, str], plan: AlterPlan) -> None:
    if cur.accept("PARTITION"):
        cur.accept("IF", "NOT", "EXISTS")
        cur.skip_parens()
        return
    if cur.accept("SYSTEM", "VERSIONING"):
        plan.options.system_versioning = True
        return
    if cur.at("PERIOD"):
        cur.skip_until_comma_or_close()
        return
    column_kw = cur.accept("COLUMN")
    if not column_kw and at_constraint(cur):
        found = parse_constraint(cur)
        names, foreign = found.primary, found.foreign
        if names is not None:
            plan.edits.append(lambda tb: tb.set_primary_key(names, cur))
        if foreign is not None:
            plan.edits.append(lambda tb: tb.add_foreign_key(foreign))
        return
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    specs: list[tuple[ColumnSpec, Position]] = []
    if cur.accept_op("("):
        while True:
            specs.append((parse_column(cur, cur.name("a column name"), table), None))
            if not cur.accept_op(","):
                break
        cur.expect_op(")")
    else:
        spec = parse_column(cur, cur.name("a column name"), table)
        specs.append((spec, _position(cur)))
    for spec, position in specs:
        plan.edits.append(_adder(spec, position, if_not_exists, cur))


def _adder(spec: ColumnSpec, position: Position, if_not_exists: bool, cur: Cursor) -> Edit:
    def edit(tb: TableBuilder) -> None:
        if not (if_not_exists and tb.has(spec.name)):
            tb.add(spec, position, cur)

    return edit


def _drop(cur: Cursor, plan: AlterPlan) -> None:
    if cur.accept("PRIMARY", "KEY"):
        plan.edits.append(TableBuilder.drop_primary_key)
    elif cur.accept("FOREIGN", "KEY"):
        _if_exists(cur)
        name = cur.name("a foreign key name")
        plan.edits.append(lambda tb: tb.drop_foreign_key(name))
    elif cur.accept("INDEX") or cur.accept("KEY") or cur.accept("CONSTRAINT") or cur.accept("CHECK"):
        _if_exists(cur)
        cur.name("an index or constraint name")
    elif cur.accept("PARTITION"):
        plan.rows_unlogged = True
        _if_exists(cur)
        cur.name("a partition name")
        while cur.at_op(",") and cur.peek(1).kind != EOF and not _at_spec(cur, ahead=1):
            cur.next()
            cur.name("a partition name")
    elif cur.accept("SYSTEM", "VERSIONING"):
        pass  # only a system-versioned table has it, and those are not tracked
    elif cur.accept("PERIOD", "FOR"):
        cur.name("a period name")
    else:
        cur.accept("COLUMN")
        if_exists = _if_exists(cur)
        name = cur.name("a column name")
        cur.accept("RESTRICT") or cur.accept("CASCADE")

        def edit(tb: TableBuilder) -> None:
            if not (if_exists and not tb.has(name)):
                tb.drop(name, cur)

        plan.edits.append(edit)


def _change(cur: Cursor, table: tuple[str, str], plan: AlterPlan, renames: bool) -> None:
    cur.accept("COLUMN")
    if_exists = _if_exists(cur)
    old = cur.name("a column name")
    spec = parse_column(cur, cur.name("a column name") if renames else old, table)
    position = _position(cur)

    def edit(tb: TableBuilder) -> None:
        if not (if_exists and not tb.has(old)):
            tb.change(old, spec, position, cur)

    plan.edits.append(edit)


def _rename(cur: Cursor, plan: AlterPlan, default_db: str | None) -> None:
    if cur.accept("COLUMN"):
        if_exists = _if_exists(cur)
        old = cur.name("a column name")
        cur.expect("TO")
        new = cur.name("a column name")

        def edit(tb: TableBuilder) -> None:
            if not (if_exists and not tb.has(old)):
                tb.rename_column(old, new, cur)

        plan.edits.append(edit)
    elif cur.accept("INDEX") or cur.accept("KEY"):
        cur.name("an index name")
        cur.expect("TO")
        cur.name("an index name")
    else:
        cur.accept("TO") or cur.accept("AS")
        plan.rename_to = cur.qualified(default_db)  # unqualified: the session's database, not the table's


def _alter_column(cur: Cursor) -> None:
    if cur.at("INDEX", "KEY"):
        cur.next()
        cur.name("an index name")
        cur.accept("NOT")
        cur.next()  # IGNORED | VISIBLE | INVISIBLE
        return
    cur.accept("COLUMN")
    _if_exists(cur)
    cur.name("a column name")
    if cur.accept("SET", "DEFAULT"):
        skip_expression(cur)
    elif not (cur.accept("DROP", "DEFAULT") or cur.accept("SET", "VISIBLE") or cur.accept("SET", "INVISIBLE")):
        raise cur.error("expected SET DEFAULT, DROP DEFAULT or SET [IN]VISIBLE")


def _convert(cur: Cursor, plan: AlterPlan, default_db: str | None) -> None:
    if cur.accept("TO"):
        if not (cur.accept_charset()):
            raise cur.error("expected CHARACTER SET")
        charset = T.charset_name(cur.name("a charset name", strings=True))
        if cur.accept("COLLATE"):
            charset = collation_charset(cur, charset) or charset
        plan.convert_to = charset
    elif cur.accept("PARTITION"):
        cur.name("a partition name")
        cur.expect("TO", "TABLE")
        plan.partition_to_table = cur.qualified(default_db)
        plan.rows_unlogged = True
    elif cur.accept("TABLE"):
        plan.table_to_partition = cur.qualified(default_db)
        plan.rows_unlogged = True
        cur.expect("TO")
        cur.skip_until_comma_or_close()
    else:
        raise cur.error("expected CONVERT TO CHARACTER SET")


_SPECS = (
    "ADD",
    "DROP",
    "MODIFY",
    "CHANGE",
    "RENAME",
    "ALTER",
    "CONVERT",
    "ORDER",
    "ENABLE",
    "DISABLE",
    "DISCARD",
    "IMPORT",
    "FORCE",
    "ALGORITHM",
    "LOCK",
    "WITH",
    "WITHOUT",
    "EXCHANGE",
    "REMOVE",
    "PARTITION",
    *_PARTITION_OPS,
)


def _at_spec(cur: Cursor, ahead: int = 0) -> bool:
    return cur.at(*_SPECS, ahead=ahead)


def _spec(cur: Cursor, table: tuple[str, str], plan: AlterPlan, default_db: str | None) -> None:
    if cur.accept("ADD"):
        _add(cur, table, plan)
    elif cur.accept("DROP"):
        _drop(cur, plan)
    elif cur.accept("MODIFY"):
        _change(cur, table, plan, renames=False)
    elif cur.accept("CHANGE"):
        _change(cur, table, plan, renames=True)
    elif cur.accept("RENAME"):
        _rename(cur, plan, default_db)
    elif cur.accept("ALTER"):
        _alter_column(cur)
    elif cur.accept("CONVERT"):
        _convert(cur, plan, default_db)
    elif cur.accept("ORDER", "BY"):
        cur.name("a column name")
        cur.accept("ASC") or cur.accept("DESC")
        while cur.at_op(",") and not _at_spec(cur, ahead=1) and cur.peek(1).kind != EOF:
            cur.next()
            cur.name("a column name")
            cur.accept("ASC") or cur.accept("DESC")
    elif cur.accept("ENABLE", "KEYS") or cur.accept("DISABLE", "KEYS") or cur.accept("FORCE"):
        pass
    elif cur.at("DISCARD") or cur.at("IMPORT"):
        plan.rows_unlogged = plan.rows_unlogged or cur.next().upper == "IMPORT"
        while not (cur.at("TABLESPACE") or cur.at_end()):
            cur.next()  # PARTITION names | ALL
        cur.expect("TABLESPACE")
    elif cur.accept("ALGORITHM") or cur.accept("LOCK"):
        cur.accept_op("=")
        cur.next()
    elif cur.accept_any(("WITH", "VALIDATION"), ("WITHOUT", "VALIDATION"), ("REMOVE", "PARTITIONING")):
        pass
    elif cur.accept("EXCHANGE", "PARTITION"):
        cur.name("a partition name")
        cur.expect("WITH", "TABLE")
        plan.exchanged_with = cur.qualified(default_db)
        plan.rows_unlogged = True
        while not cur.at_end():
            cur.next()  # WITH | WITHOUT VALIDATION
    elif cur.accept("PARTITION", "BY"):
        while not cur.at_end():
            cur.next()  # the rest of the statement belongs to the partition clause
    elif cur.at(*_PARTITION_OPS) and cur.at("PARTITION", ahead=1):
        plan.rows_unlogged = plan.rows_unlogged or cur.next().upper == "TRUNCATE"
        cur.next()
        while not cur.at_end():
            cur.next()
    elif not parse_table_option(cur, plan.options):
        raise cur.error("unknown ALTER TABLE specification")


def parse_alter_specs(cur: Cursor, table: tuple[str, str], default_db: str | None) -> AlterPlan:
    """The specifications after `ALTER TABLE name` up to the end of the statement."""
    plan = AlterPlan(edits=[], options=TableOptions())
    if cur.accept("WAIT"):
        cur.integer()
    else:
        cur.accept("NOWAIT")
    while not cur.at_end():
        start, known = cur.i, len(plan.edits)
        _spec(cur, table, plan, default_db)
        plan.edit_positions += [start] * (len(plan.edits) - known)
        if not cur.accept_op(","):
            break
    if cur.accept("PARTITION", "BY"):
        while not cur.at_end():
            cur.next()
    cur.expect_end()
    return plan


def convert_columns(tb: TableBuilder, charset: str) -> None:
    """CONVERT TO CHARACTER SET: every character column takes `charset`; TEXT grows to keep its length."""
    for i, col in enumerate(tb.columns):
        if col.type not in T.CHARSET_TYPES or col.charset == "binary":
            continue
        new_type = col.type
        if col.type in T.TEXT_TYPES and charset != "binary":
            new_type = T.converted_text_type(col.type, col.charset, charset)
        elif charset == "binary":
            new_type = T.binary_form(col.type)
        tb.columns[i] = replace(col, type=new_type, charset=charset)
