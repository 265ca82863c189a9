"""CREATE TABLE bodies and table options, and the working copy of a table that CREATE and ALTER edit."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mysqlcapture_api.schema.ddl_columns import (
    ColumnSpec,
    ForeignKey,
    collation_charset,
    key_parts,
    parse_column,
    parse_references,
)
from mysqlcapture_api.schema.ddl_tokens import EOF, IDENT, NUMBER, STRING, WORD, Cursor
from mysqlcapture_api.schema.model import ColumnDef, ForeignKeyDef, TableDef
from mysqlcapture_api.schema.types import charset_name

CONSTRAINT_WORDS = (
    "CONSTRAINT",
    "PRIMARY",
    "KEY",
    "INDEX",
    "UNIQUE",
    "FULLTEXT",
    "SPATIAL",
    "FOREIGN",
    "CHECK",
)

# Table options that may be written without `=` (any `name = value` is accepted as an option).
TABLE_OPTIONS = (
    "ENGINE",
    "TYPE",
    "AUTO_INCREMENT",
    "AVG_ROW_LENGTH",
    "CHECKSUM",
    "TABLE_CHECKSUM",
    "COMMENT",
    "COMPRESSION",
    "CONNECTION",
    "DELAY_KEY_WRITE",
    "ENCRYPTION",
    "ENCRYPTED",
    "ENCRYPTION_KEY_ID",
    "INSERT_METHOD",
    "KEY_BLOCK_SIZE",
    "MAX_ROWS",
    "MIN_ROWS",
    "PACK_KEYS",
    "PAGE_CHECKSUM",
    "PAGE_COMPRESSED",
    "PAGE_COMPRESSION_LEVEL",
    "PASSWORD",
    "ROW_FORMAT",
    "STATS_AUTO_RECALC",
    "STATS_PERSISTENT",
    "STATS_SAMPLE_PAGES",
    "TRANSACTIONAL",
    "UNION",
    "SEQUENCE",
    "IETF_QUOTES",
    "ENGINE_ATTRIBUTE",
    "SECONDARY_ENGINE_ATTRIBUTE",
    "AUTOEXTEND_SIZE",
)
Position = tuple[str, str] | None  # ("FIRST", "") or ("AFTER", column); None: append (ADD) or stay (MODIFY)


@dataclass
class TableBuilder:
    """A mutable copy of a table while one statement is applied to it."""

    database: str
    name: str
    charset: str
    columns: list[ColumnDef] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    foreign_keys: list[ForeignKeyDef] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # columns renamed by the statement: old -> new name

    @classmethod
    def of(cls, table: TableDef) -> TableBuilder:
        return cls(
            table.database,
            table.name,
            table.charset,
            list(table.columns),
            list(table.primary_key),
            list(table.foreign_keys),
        )

    def build(self) -> TableDef:
        return TableDef(
            self.database,
            self.name,
            tuple(self.columns),
            tuple(self.primary_key),
            self.charset,
            tuple(sorted(self.foreign_keys, key=lambda f: f.name.lower())),  # as information_schema lists them
        )

    def add_foreign_key(self, key: ForeignKey) -> None:
        """The foreign key, named as the server names one declared without a name (`<table>_ibfk_<n>`)."""
        name = key.name
        if name is None:
            prefix = f"{self.name}_ibfk_".lower()
            taken = [f.name[len(prefix) :] for f in self.foreign_keys if f.name.lower().startswith(prefix)]
            name = f"{self.name}_ibfk_{max([int(n) for n in taken if n.isdigit()] or [0]) + 1}"
        parent = (key.parent[0] or self.database, key.parent[1])
        self.foreign_keys.append(
            ForeignKeyDef(
                name, key.columns, parent[0], parent[1], key.parent_columns, key.on_delete, key.on_update, key.index
            )
        )

    def drop_foreign_key(self, name: str) -> None:
        """The foreign key of that name dropped; else the one of that index (MariaDB names a foreign key declared
        with an index name but no constraint name after the index)."""
        lowered = name.lower()
        named = [f for f in self.foreign_keys if f.name.lower() == lowered]
        if not named:
            named = [f for f in self.foreign_keys if (f.index or "").lower() == lowered][:1]
        self.foreign_keys = [f for f in self.foreign_keys if f not in named]

    def _rename_in_keys(self, old: str, new: str) -> None:
        lowered = old.lower()
        self.renamed[old] = new
        self.foreign_keys = [
            replace(f, columns=tuple(new if c.lower() == lowered else c for c in f.columns)) for f in self.foreign_keys
        ]

    def find(self, name: str) -> int:
        lowered = name.lower()
        return next((i for i, c in enumerate(self.columns) if c.name.lower() == lowered), -1)

    def has(self, name: str) -> bool:
        return self.find(name) >= 0

    def _where(self, position: Position, cur: Cursor) -> int:
        if position is None:
            return len(self.columns)
        if position[0] == "FIRST":
            return 0
        at = self.find(position[1])
        if at < 0:
            raise cur.error(
                drift=True,
                problem=f"{self.database}.{self.name} has no column {position[1]!r} to put a column AFTER",
            )
        return at + 1

    def add(self, spec: ColumnSpec, position: Position, cur: Cursor) -> None:
        col = spec.resolve(self.charset)
        if self.find(col.name) >= 0:  # the server refuses it: the schema held here is not the server's
            raise cur.error(f"{self.database}.{self.name} has a column {col.name!r} already", drift=True)
        self.columns.insert(self._where(position, cur), col)
        if spec.primary_key:
            self.set_primary_key([col.name], cur)
        if spec.references is not None:
            self.add_foreign_key(spec.references)

    def drop(self, name: str, cur: Cursor) -> None:
        at = self.find(name)
        if at < 0:
            raise cur.error(f"{self.database}.{self.name} has no column {name!r} to drop", drift=True)
        gone = self.columns.pop(at).name
        self.primary_key = [k for k in self.primary_key if k.lower() != gone.lower()]

    def change(self, old: str, spec: ColumnSpec, position: Position, cur: Cursor) -> None:
        """Replace column `old` by `spec` (MODIFY: same name; CHANGE: maybe renamed), optionally moving it."""
        at = self.find(old)
        if at < 0:
            raise cur.error(f"{self.database}.{self.name} has no column {old!r} to change", drift=True)
        previous = self.columns.pop(at)
        col = spec.resolve(self.charset)  # a column-level json_valid() check goes with the old definition
        self.columns.insert(at if position is None else self._where(position, cur), col)
        self.primary_key = [col.name if k.lower() == previous.name.lower() else k for k in self.primary_key]
        if col.name != previous.name:
            self._rename_in_keys(previous.name, col.name)
        if spec.primary_key:
            self.set_primary_key([col.name], cur)

    def rename_column(self, old: str, new: str, cur: Cursor) -> None:
        at = self.find(old)
        if at < 0:
            raise cur.error(f"{self.database}.{self.name} has no column {old!r} to rename", drift=True)
        old = self.columns[at].name
        self.columns[at] = self.columns[at].renamed(new)
        self.primary_key = [new if k.lower() == old.lower() else k for k in self.primary_key]
        self._rename_in_keys(old, new)

    def drop_primary_key(self) -> None:
        self.primary_key = []  # its columns stay NOT NULL

    def set_primary_key(self, names: list[str], cur: Cursor) -> None:
        keys = []
        for name in names:
            at = self.find(name)
            if at < 0:
                raise cur.error(f"the primary key names column {name!r}, which {self.name} does not have", drift=True)
            self.columns[at] = replace(self.columns[at], nullable=False)
            keys.append(self.columns[at].name)
        self.primary_key = keys


@dataclass
class TableOptions:
    charset: str | None = None  # from CHARACTER SET or COLLATE; "default" for CHARACTER SET DEFAULT
    system_versioning: bool = False


def at_constraint(cur: Cursor) -> bool:
    return cur.at(*CONSTRAINT_WORDS) or (cur.at("PERIOD") and cur.at("FOR", ahead=1))


@dataclass(frozen=True)
class Constraint:
    """A table constraint or index: the columns of a PRIMARY KEY, or a FOREIGN KEY (None: neither)."""

    primary: list[str] | None = None
    foreign: ForeignKey | None = None


def parse_constraint(cur: Cursor) -> Constraint:
    """A table constraint or index: a PRIMARY KEY's columns, a FOREIGN KEY, or (skipped) anything else."""
    name = None
    if cur.accept("CONSTRAINT") and not cur.at("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
        name = cur.name("a constraint name")
    if cur.accept("PRIMARY", "KEY"):
        while not cur.at_op("(") and not cur.at_end():
            cur.next()  # USING BTREE and the like
        names = key_parts(cur)
        cur.skip_until_comma_or_close()
        return Constraint(primary=names)
    if cur.accept("FOREIGN", "KEY"):
        cur.accept("IF", "NOT", "EXISTS")
        index = None if cur.at_op("(") else cur.name("an index name")
        columns = tuple(key_parts(cur))
        cur.expect("REFERENCES")
        parent, parent_columns, on_delete, on_update = parse_references(cur)
        cur.skip_until_comma_or_close()
        return Constraint(foreign=ForeignKey(name, columns, parent, parent_columns, on_delete, on_update, index))
    cur.skip_until_comma_or_close()
    return Constraint()


def parse_create_body(
    cur: Cursor, table: tuple[str, str]
) -> tuple[list[ColumnSpec], list[str] | None, list[ForeignKey]]:
    """The `( ... )` of CREATE TABLE: column specs in order, the primary key (None when not declared) and the
    foreign keys."""
    cur.expect_op("(")
    specs: list[ColumnSpec] = []
    primary: list[str] | None = None
    foreign: list[ForeignKey] = []
    while True:
        if at_constraint(cur):
            found = parse_constraint(cur)
            if found.primary is not None:
                primary = found.primary
            if found.foreign is not None:
                foreign.append(found.foreign)
        else:
            spec = parse_column(cur, cur.name("a column name"), table)
            specs.append(spec)
            if spec.primary_key:
                primary = [spec.name]
        if not cur.accept_op(","):
            break
    cur.expect_op(")")
    return specs, primary, foreign


def _option_value(cur: Cursor) -> None:
    cur.accept_op("=")
    if cur.at_op("("):
        cur.skip_parens()
    elif cur.peek().kind in (WORD, IDENT, STRING, NUMBER):
        cur.next()
    else:
        raise cur.error("expected a table option value")


def parse_table_option(cur: Cursor, options: TableOptions) -> bool:
    """One table option (CHARSET, COLLATE, ENGINE=..., ...) into `options`; False when none comes next."""
    if cur.at("DEFAULT") and cur.at("CHARACTER", "CHAR", "CHARSET", "COLLATE", ahead=1):
        cur.next()
    if cur.accept_charset():
        cur.accept_op("=")
        options.charset = charset_name(cur.name("a charset name", strings=True))
    elif cur.accept("COLLATE"):
        options.charset = collation_charset(cur, options.charset)
    elif cur.accept("WITH", "SYSTEM", "VERSIONING"):
        options.system_versioning = True
    elif cur.accept("DATA", "DIRECTORY") or cur.accept("INDEX", "DIRECTORY"):
        _option_value(cur)
    elif cur.accept("TABLESPACE"):
        cur.name("a tablespace name")
        if cur.accept("STORAGE"):
            cur.next()
    elif cur.at("PARTITION", "SELECT", "AS", "IGNORE", "REPLACE") or cur.at_op("(", ",", ";") or cur.at_end():
        return False
    elif cur.peek().kind == WORD and (cur.at_op("=", ahead=1) or cur.at(*TABLE_OPTIONS)):
        cur.next()
        _option_value(cur)
    else:
        return False
    return True


def parse_table_options(cur: Cursor) -> TableOptions:
    """Table options up to the end, a PARTITION BY clause (skipped) or a SELECT (refused)."""
    options = TableOptions()
    while parse_table_option(cur, options):
        cur.accept_op(",")
    if cur.accept("PARTITION", "BY"):
        while cur.peek().kind != EOF:
            cur.next()
    refuse_select(cur)
    cur.accept("START", "TRANSACTION")  # MySQL 8.0.21+ logs an atomic CREATE TABLE ... SELECT with it
    cur.expect_end()
    return options


def refuse_select(cur: Cursor) -> None:
    """CREATE TABLE ... SELECT: its columns come from the query, which this parser does not evaluate."""
    if cur.at("SELECT", "AS", "IGNORE", "REPLACE") or cur.at_op("("):
        raise cur.error(
            "CREATE TABLE ... SELECT is not supported (with binlog_format=ROW the server logs the resulting "
            "CREATE TABLE instead)"
        )
