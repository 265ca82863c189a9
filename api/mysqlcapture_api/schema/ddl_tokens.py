"""A tokenizer and token cursor for MySQL/MariaDB DDL, with comments and executable comments resolved."""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD, IDENT, STRING, NUMBER, OP, EOF = "word", "ident", "string", "number", "op", "eof"

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<ident>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<hex>[xX]'[0-9a-fA-F]*'|[bB]'[01]*'|0x[0-9a-fA-F]+\b|0b[01]+\b)
  | (?P<word>[0-9]*[A-Za-z_$\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*)
  | (?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<op><=>|<=|>=|<>|!=|:=|&&|\|\||<<|>>|->>|->|[-+*/%=<>!~^&|(),;.@?:{}\[\]])
    """,
    re.X | re.S,
)
_EXEC_OPEN = re.compile(r"/\*(?:!|M!)\d{0,6}")
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}


class DdlParseError(ValueError):
    """A DDL statement the parser cannot apply: nothing was changed; the message says where and what to do."""


@dataclass(frozen=True)
class Token:
    kind: str
    value: str  # identifiers unquoted, strings unescaped, everything else as written
    pos: int

    @property
    def upper(self) -> str:
        return self.value.upper() if self.kind == WORD else ""

    def show(self) -> str:
        return "end of statement" if self.kind == EOF else repr(self.value)


def _unescape(body: str, quote: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
        elif ch == quote and body[i + 1 : i + 2] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def tokenize(sql: str) -> list[Token]:
    """Tokens of `sql`, EOF last: comments dropped, the text of `/*! ... */` and `/*M! ... */` kept."""
    tokens: list[Token] = []
    i, n, in_exec = 0, len(sql), False
    while i < n:
        if sql.startswith("/*", i):
            opener = _EXEC_OPEN.match(sql, i)
            if opener is not None and not in_exec:
                in_exec, i = True, opener.end()
                continue
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if in_exec and sql.startswith("*/", i):
            in_exec, i = False, i + 2
            continue
        if sql[i] == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        m = _TOKEN.match(sql, i)
        if m is None:  # a stray character (say, an unterminated quote): the parser decides if it matters
            tokens.append(Token(OP, sql[i], i))
            i += 1
            continue
        kind, text = m.lastgroup, m.group()
        if kind == "ident":
            tokens.append(Token(IDENT, text[1:-1].replace("``", "`"), i))
        elif kind == "string":
            tokens.append(Token(STRING, _unescape(text[1:-1], text[0]), i))
        elif kind in ("hex", "number"):
            tokens.append(Token(NUMBER, text, i))
        elif kind == "word":
            tokens.append(Token(WORD, text, i))
        elif kind == "op":
            tokens.append(Token(OP, text, i))
        i = m.end()
    tokens.append(Token(EOF, "", n))
    return tokens


class Cursor:
    """A position in a token list with the small vocabulary a recursive-descent parser needs."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.i = 0

    # -- looking -------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, *words: str, ahead: int = 0) -> bool:
        return self.peek(ahead).upper in words

    def at_op(self, *ops: str, ahead: int = 0) -> bool:
        tok = self.peek(ahead)
        return tok.kind == OP and tok.value in ops

    def at_end(self) -> bool:
        return self.peek().kind == EOF or (self.at_op(";") and self.peek(1).kind == EOF)

    # -- consuming -----------------------------------------------------------------------------
    def next(self) -> Token:
        tok = self.peek()
        if tok.kind != EOF:
            self.i += 1
        return tok

    def accept(self, *words: str) -> bool:
        """Consume the keyword sequence `words` if it comes next."""
        if all(self.at(w, ahead=k) for k, w in enumerate(words)):
            self.i += len(words)
            return True
        return False

    def accept_charset(self) -> bool:
        """Consume CHARACTER SET, CHAR SET or CHARSET (MySQL's three spellings) if one comes next."""
        return self.accept("CHARACTER", "SET") or self.accept("CHAR", "SET") or self.accept("CHARSET")

    def accept_any(self, *sequences: tuple[str, ...]) -> bool:
        """Consume the first of the keyword sequences that comes next."""
        return any(self.accept(*seq) for seq in sequences)

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def expect(self, *words: str) -> None:
        for word in words:
            if not self.accept(word):
                raise self.error(f"expected {word}")

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"expected {op!r}")

    def expect_end(self) -> None:
        self.accept_op(";")
        if self.peek().kind != EOF:
            raise self.error("unexpected text after the statement")

    def name(self, what: str = "a name", *, strings: bool = False) -> str:
        """An identifier (plain or backquoted; with `strings`, a quoted string too)."""
        tok = self.peek()
        if tok.kind in (IDENT, WORD) or (strings and tok.kind == STRING):
            self.i += 1
            return tok.value
        raise self.error(f"expected {what}")

    def qualified(self, default_db: str | None) -> tuple[str, str]:
        """`name` or `db.name`; an unqualified name belongs to `default_db`."""
        first = self.name("a table name")
        if self.accept_op("."):
            return first, self.name("a table name")
        if not default_db:
            raise self.error(f"table {first!r} is not qualified and the statement has no default database")
        return default_db, first

    def string(self) -> str:
        """A string literal, adjacent literals concatenated ('a' 'b' is 'ab')."""
        tok = self.peek()
        if tok.kind != STRING:
            raise self.error("expected a string")
        parts = []
        while self.peek().kind == STRING:
            parts.append(self.next().value)
        return "".join(parts)

    def integer(self) -> int:
        tok = self.peek()
        if tok.kind != NUMBER or not tok.value.isdigit():
            raise self.error("expected a number")
        self.i += 1
        return int(tok.value)

    def skip_parens(self) -> None:
        """Skip a balanced `( ... )` group."""
        self.expect_op("(")
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == EOF:
                raise self.error("unbalanced parentheses")
            if tok.kind == OP and tok.value in ("(", ")"):
                depth += 1 if tok.value == "(" else -1

    def skip_until_comma_or_close(self) -> None:
        """Skip to the next top-level `,` or the `)` that closes the current group (neither consumed)."""
        while not (self.at_op(",", ")") or self.at_end()):
            if self.at_op("("):
                self.skip_parens()
            else:
                self.next()

    def error(self, problem: str, *, drift: bool = False) -> DdlParseError:
        """A DdlParseError naming the statement, the position and what to do (`drift`: the statement is
        fine but does not fit the schema the capture holds for its table)."""
        tok = self.peek()
        text = " ".join(self.sql.split())
        shown = text if len(text) <= 300 else text[:300] + "..."
        what = "cannot apply DDL statement" if drift else "cannot parse DDL statement"
        advice = (
            "The schema history no longer matches the server for this table: restart the capture from a "
            "binlog position after this statement so that the schema is captured again."
            if drift
            else "If the statement does not change the columns of a captured table, restart the capture "
            "from a binlog position after it; otherwise report it with the statement so the parser can "
            "learn it."
        )
        return DdlParseError(
            f"{what} {shown!r}: {problem} at position {tok.pos} (near {tok.show()}). "
            f"The schema was not changed. {advice}"
        )
