"""Column definitions in DDL: the data type, its attributes, and the ColumnDef they resolve to."""

from __future__ import annotations

from dataclasses import dataclass

from mysqlcapture_api.schema import types as T
from mysqlcapture_api.schema.ddl_tokens import EOF, NUMBER, OP, STRING, WORD, Cursor
from mysqlcapture_api.schema.model import ColumnDef

# Words that end a column definition inside ALTER TABLE (a position) or start the next clause.
_POSITION = ("FIRST", "AFTER")
_NO_EFFECT_ATTRIBUTES = (
    ("INVISIBLE",),
    ("VISIBLE",),
    ("WITH", "SYSTEM", "VERSIONING"),
    ("WITHOUT", "SYSTEM", "VERSIONING"),
)


@dataclass
class ColumnSpec:
    """A parsed column definition, before charset inheritance resolves it to a ColumnDef."""

    name: str
    type: str
    length: int | None = None  # the (N) or (P) after the type name
    scale: int | None = None
    signed: bool = True
    charset: str | None = None  # explicit CHARACTER SET, or implied by COLLATE / ASCII / UNICODE / NATIONAL
    enum_values: tuple[str, ...] | None = None
    nullable: bool | None = None  # None: not said
    primary_key: bool = False
    auto_increment: bool = False
    generated: bool = False
    json_check: bool = False  # CHECK (json_valid(col)): MariaDB's spelling of a JSON column
    default: str | None = None  # a constant DEFAULT, as text
    references: ForeignKey | None = None  # an inline `REFERENCES parent (column)`: a foreign key of the column

    def resolve(self, table_charset: str) -> ColumnDef:
        """The ColumnDef MariaDB creates for this definition in a table whose default charset is given."""
        type_name = self.type
        charset: str | None = None
        if type_name in T.CHARSET_TYPES:
            charset = "utf8mb4" if type_name == "json" and self.charset is None else self.charset or table_charset
        if type_name == "text" and self.length is not None:
            type_name = T.text_type_for(self.length, charset or table_charset)
        elif type_name == "blob" and self.length is not None:
            type_name = T.blob_type_for(self.length)
        if charset == "binary" and type_name in T.STRING_TYPES:
            type_name = T.binary_form(type_name)
        if type_name in T.BINARY_TYPES:
            charset = "binary"
        if type_name == "longtext" and self.json_check:
            type_name = "json"
        fsp = (self.length or 0) if type_name in ("time", "datetime", "timestamp") else None
        precision = scale = None
        if type_name == "decimal":
            precision, scale = self.length or 10, self.scale or 0
        length = None
        if type_name in ("char", "binary", "bit"):
            length = 1 if self.length is None else self.length
        nullable = not (self.primary_key or self.auto_increment) if self.nullable is None else self.nullable
        return ColumnDef(
            name=self.name,
            type=type_name,
            signed=self.signed or type_name not in T.NUMERIC_TYPES,
            charset=charset,
            column_length=fsp,
            length=length,
            precision=precision,
            scale=scale,
            enum_values=self.enum_values,
            nullable=nullable and not self.primary_key,
            generated=self.generated,
            default=self.default,
        )


def _charset(cur: Cursor) -> str:
    cur.accept_op("=")
    return T.charset_name(cur.name("a charset name", strings=True))


def collation_charset(cur: Cursor, current: str | None) -> str | None:
    """The charset a COLLATE names (cursor after COLLATE); `current` when the collation does not say."""
    cur.accept_op("=")
    return T.charset_of_collation(cur.name("a collation name", strings=True)) or current


def _length_args(cur: Cursor, spec: ColumnSpec) -> None:
    if cur.accept_op("("):
        spec.length = cur.integer()
        if cur.accept_op(","):
            spec.scale = cur.integer()
        cur.expect_op(")")


def _string_list(cur: Cursor) -> tuple[str, ...]:
    cur.expect_op("(")
    values = [cur.string()]
    while cur.accept_op(","):
        values.append(cur.string())
    cur.expect_op(")")
    return tuple(v.rstrip(" ") for v in values)  # MariaDB drops trailing spaces of members


def parse_type(cur: Cursor, spec: ColumnSpec, table: tuple[str, str]) -> None:
    """Read the data type (with its own attributes) into `spec`; the cursor is after the column name."""
    tok = cur.peek()
    if tok.kind != WORD:
        raise cur.error("expected a data type")
    word = cur.next().value.lower()
    if word == "national":
        spec.charset = "utf8mb3"
        word = cur.next().value.lower()
    elif word in ("nchar", "nvarchar"):
        spec.charset = "utf8mb3"
    if word in ("char", "character", "nchar") and cur.accept("VARYING"):
        word = "varchar"
    elif word == "double":
        cur.accept("PRECISION")
    elif word == "long":
        if cur.accept("VARBINARY"):
            word = "mediumblob"
        else:
            if not cur.accept("VARCHAR"):
                cur.accept("CHAR", "VARYING")
            word = "mediumtext"
    elif word == "serial":
        spec.type, spec.signed, spec.nullable, spec.auto_increment = "bigint", False, False, True
        return
    word = T.ALIASES.get(word, word)
    if word not in T.KNOWN_TYPES:
        raise T.unsupported(table[0], table[1], spec.name, word)
    spec.type = word
    if word in T.ENUM_TYPES:
        spec.enum_values = _string_list(cur)
    else:
        _length_args(cur, spec)
    if word == "float" and spec.length is not None and spec.scale is None:
        spec.type = "double" if spec.length > 24 else "float"


def _skip_operand(cur: Cursor) -> None:
    while cur.at_op("-", "+", "~", "!"):
        cur.next()
    tok = cur.peek()
    if tok.kind == OP and tok.value == "(":
        cur.skip_parens()
    elif tok.kind == STRING:
        cur.string()
    elif tok.kind in (NUMBER, WORD) or tok.kind == "ident":
        cur.next()
        if tok.upper == "NEXT" and cur.accept("VALUE", "FOR"):
            cur.qualified(".")
        elif cur.at_op("("):
            cur.skip_parens()
        elif tok.kind == WORD and cur.peek().kind == STRING:  # _utf8mb4'x', DATE '2020-01-01'
            cur.string()
        elif cur.at_op(".") and cur.peek(1).kind != EOF:
            cur.next()
            cur.next()
    else:
        raise cur.error("expected an expression")


def default_literal(cur: Cursor) -> str | None:
    """A DEFAULT clause's value when it is a constant (a number, a string, NULL), as text; else None (an
    expression, CURRENT_TIMESTAMP...), skipped."""
    start = cur.i
    sign = "-" if cur.accept_op("-") else ""
    tok = cur.peek()
    value: str | None = None
    if tok.kind == NUMBER:
        value = sign + cur.next().value
    elif tok.kind == STRING and not sign:
        value = cur.string()
    elif tok.kind == WORD and tok.upper == "NULL" and not sign:
        cur.next()
    if value is not None and not cur.at_op("+", "-", "*", "/", "%", "||", "&", "|", "^", "<<", ">>"):
        return value
    cur.i = start
    skip_expression(cur)
    return None


def skip_expression(cur: Cursor) -> None:
    """Skip a DEFAULT / ON UPDATE value: operands joined by symbolic operators (AND, NOT ... end it)."""
    _skip_operand(cur)
    while cur.at_op("+", "-", "*", "/", "%", "||", "&", "|", "^", "<<", ">>", "=", "<", ">", "<=", ">="):
        cur.next()
        _skip_operand(cur)


def _is_json_check(cur: Cursor, column: str) -> bool:
    """Skip `(expr)` of a CHECK; True when it is exactly json_valid(column)."""
    start = cur.i
    cur.skip_parens()
    toks = cur.tokens[start : cur.i]
    return (
        len(toks) == 6
        and toks[1].upper == "JSON_VALID"
        and toks[2].value == "("
        and toks[3].value.lower() == column.lower()
        and toks[4].value == ")"
    )


def key_parts(cur: Cursor) -> list[str]:
    """The columns of `(col [(n)] [ASC|DESC], ...)`; functional parts `((expr))` are skipped."""
    cur.expect_op("(")
    names: list[str] = []
    while True:
        if cur.at_op("("):
            cur.skip_parens()
        else:
            names.append(cur.name("a column name"))
            if cur.at_op("("):
                cur.skip_parens()
        cur.accept("ASC") or cur.accept("DESC")
        if not cur.accept_op(","):
            break
    cur.expect_op(")")
    return names


@dataclass(frozen=True)
class ForeignKey:
    """A FOREIGN KEY clause as written: its name (None: the server names it), columns, the parent (its database
    None: the child's) and the parent's columns, the actions (ForeignKeyDef's), and its index's name."""

    name: str | None
    columns: tuple[str, ...]
    parent: tuple[str | None, str]
    parent_columns: tuple[str, ...]
    on_delete: str = "RESTRICT"
    on_update: str = "RESTRICT"
    index: str | None = None


def _action(cur: Cursor) -> str:
    """A referential action; NO ACTION is RESTRICT (InnoDB checks both at once), as MariaDB lists it."""
    for words in (("CASCADE",), ("SET", "NULL"), ("SET", "DEFAULT"), ("RESTRICT",), ("NO", "ACTION")):
        if cur.accept(*words):
            return "RESTRICT" if words == ("NO", "ACTION") else " ".join(words)
    raise cur.error("expected CASCADE, SET NULL, SET DEFAULT, RESTRICT or NO ACTION")


def parse_references(cur: Cursor) -> tuple[tuple[str | None, str], tuple[str, ...], str, str]:
    """`REFERENCES tbl (cols) [MATCH ...] [ON DELETE action] [ON UPDATE action]` after REFERENCES: the parent,
    its columns, and the delete and update actions."""
    first = cur.name("a table name")
    parent: tuple[str | None, str] = (first, cur.name("a table name")) if cur.accept_op(".") else (None, first)
    columns = tuple(key_parts(cur)) if cur.at_op("(") else ()
    on_delete = on_update = "RESTRICT"
    while True:
        if cur.accept("MATCH"):
            cur.next()
        elif cur.accept("ON", "DELETE"):
            on_delete = _action(cur)
        elif cur.accept("ON", "UPDATE"):
            on_update = _action(cur)
        else:
            return parent, columns, on_delete, on_update


def parse_column(cur: Cursor, name: str, table: tuple[str, str]) -> ColumnSpec:
    """A column definition after its name: type and attributes, up to `,`, `)`, FIRST/AFTER or the end."""
    spec = ColumnSpec(name=name, type="")
    parse_type(cur, spec, table)
    while not (cur.at_op(",", ")", ";") or cur.peek().kind == EOF or cur.at(*_POSITION)):
        if cur.accept("UNSIGNED") or cur.accept("ZEROFILL"):
            spec.signed = False
        elif cur.accept("SIGNED"):
            pass
        elif cur.accept("NOT", "NULL"):
            spec.nullable = False
        elif cur.accept("NULL"):
            spec.nullable = True
        elif cur.accept_charset():
            spec.charset = _charset(cur)
        elif cur.accept("COLLATE"):
            spec.charset = collation_charset(cur, spec.charset)
        elif cur.accept("ASCII"):
            spec.charset = "latin1"
        elif cur.accept("UNICODE"):
            spec.charset = "ucs2"
        elif cur.accept("BYTE"):
            spec.charset = "binary"
        elif cur.accept("BINARY"):
            pass  # the charset's _bin collation: the charset stays
        elif cur.accept("DEFAULT"):
            spec.default = default_literal(cur)
        elif cur.accept("ON", "UPDATE"):
            skip_expression(cur)
        elif cur.accept("AUTO_INCREMENT"):
            spec.auto_increment = True
        elif cur.accept("SERIAL", "DEFAULT", "VALUE"):
            spec.auto_increment, spec.nullable = True, False
        elif cur.accept("PRIMARY", "KEY") or cur.accept("KEY"):
            spec.primary_key = True
        elif cur.accept("UNIQUE"):
            cur.accept("KEY")
        elif cur.accept("COMMENT"):
            cur.string()
        elif cur.accept("GENERATED", "ALWAYS", "AS") or cur.accept("AS"):
            if cur.at("ROW", "INVISIBLE"):
                raise cur.error("system-versioning period columns (AS ROW START/END) are not supported")
            cur.skip_parens()
            spec.generated = True
        elif cur.accept("VIRTUAL") or cur.accept("STORED") or cur.accept("PERSISTENT"):
            spec.generated = True
        elif cur.accept("CONSTRAINT"):
            if not cur.at("CHECK"):
                cur.name("a constraint name")
        elif cur.accept("CHECK"):
            spec.json_check |= _is_json_check(cur, name)
        elif cur.accept("REFERENCES"):
            parent, parent_columns, on_delete, on_update = parse_references(cur)
            spec.references = ForeignKey(None, (name,), parent, parent_columns, on_delete, on_update)
        elif cur.accept("COLUMN_FORMAT") or cur.accept("STORAGE"):
            cur.next()
        elif cur.accept_any(*_NO_EFFECT_ATTRIBUTES):
            pass
        elif cur.accept("COMPRESSED"):
            if cur.accept_op("="):
                cur.next()
        elif cur.accept("SRID"):
            cur.integer()
        elif cur.at("REF_SYSTEM_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
            cur.next()
            cur.accept_op("=")
            cur.next()
        else:
            raise cur.error(f"unknown attribute in the definition of column {name!r}")
    return spec
