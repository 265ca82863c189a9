"""`--where "col = value"`: one comparison of one column, matched against a version's before or after image.

Grammar: `<column> <op> <literal>` with op one of = != <> < <= > >=, or `<column> IS [NOT] NULL`. A literal is
a quoted string ('it''s' or "..."), a number, 0x<hex> for binary columns, TRUE/FALSE, or NULL. The literal is
read as the column's type in the history (an exact DECIMAL, a DATE, a DATETIME with fractions, ...), so
`amount = 10.5` and `created >= '2026-11-27 10:00:00'` compare values, not text. A version matches when either
image (an update's before or after, an insert's after, a delete's before) satisfies it.
"""

from __future__ import annotations

import datetime
import decimal
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

OPERATORS = {"=": "equal", "!=": "not_equal", "<>": "not_equal", "<": "less", "<=": "less_equal"}
OPERATORS |= {">": "greater", ">=": "greater_equal"}
_COMPARISON = re.compile(r"\s*(`[^`]+`|[A-Za-z0-9_$]+)\s*(<=|>=|!=|<>|=|<|>)\s*(.+?)\s*\Z", re.S)
_NULL_TEST = re.compile(r"\s*(`[^`]+`|[A-Za-z0-9_$]+)\s+IS\s+(NOT\s+)?NULL\s*\Z", re.I)


class WhereError(ValueError):
    """A --where that cannot be read, or that cannot be compared with its column."""


@dataclass(frozen=True)
class Predicate:
    column: str
    op: str  # a key of OPERATORS, or "is null" / "is not null"
    literal: str | None  # the literal's text (unquoted); None for NULL tests

    def matches(self, found: pa.Table) -> pa.ChunkedArray:
        """Per version of `found` (with `before` and `after` structs): whether either image satisfies it."""
        hits = None
        for side in ("before", "after"):
            image = found[side]
            kind = image.type
            assert isinstance(kind, pa.StructType)
            if kind.get_field_index(self.column) < 0:
                raise WhereError(f"--where: {self.column} is not a column of this table's history")
            values = pc.struct_field(image, self.column)
            present = pc.is_valid(image)
            if self.op == "is null":
                test = pc.and_(present, pc.is_null(values))
            elif self.op == "is not null":
                test = pc.is_valid(values)
            else:
                scalar = literal_scalar(self.literal, values.type, self.column)
                if scalar is None:  # `col = NULL` is never true, as in SQL
                    test = pa.chunked_array([pa.nulls(len(values), pa.bool_())])
                else:
                    test = getattr(pc, OPERATORS[self.op])(values, scalar)
            test = pc.fill_null(test, False)
            hits = test if hits is None else pc.or_(hits, test)
        assert hits is not None
        return hits


def parse(text: str) -> Predicate:
    """A --where expression (module doc)."""
    found = _NULL_TEST.match(text)
    if found:
        return Predicate(_name(found.group(1)), "is not null" if found.group(2) else "is null", None)
    found = _COMPARISON.match(text)
    if not found:
        raise WhereError(
            f"--where {text!r}: expected `column = value` (or != <> < <= > >=, or `column IS [NOT] NULL`), e.g. "
            "--where \"status = 'paid'\""
        )
    literal = found.group(3)
    if literal[:1] in ("=", "<", ">", "!"):
        raise WhereError(f"--where {text!r}: one operator (= != <> < <= > >=) between the column and the value")
    unquoted = _unquoted(literal)
    if unquoted is None and literal.upper() == "NULL":
        return Predicate(_name(found.group(1)), found.group(2), None)
    return Predicate(_name(found.group(1)), found.group(2), literal if unquoted is None else "\x00" + unquoted)


def _name(token: str) -> str:
    return token[1:-1] if token.startswith("`") else token


def _unquoted(literal: str) -> str | None:
    """The text of a quoted literal ('' or "" doubling a quote inside), None when `literal` is not quoted."""
    if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "'\"":
        quote = literal[0]
        body = literal[1:-1]
        if body.replace(quote * 2, "").count(quote):
            raise WhereError(f"--where: {literal} has an unescaped {quote} (double it inside the quotes)")
        return body.replace(quote * 2, quote)
    return None


def literal_scalar(literal: str | None, kind: pa.DataType, column: str) -> pa.Scalar | None:
    """`literal` (quoted ones start with NUL, parse()) as a scalar of the history's type for `column`."""
    if literal is None:
        return None
    quoted = literal.startswith("\x00")
    text = literal[1:] if quoted else literal
    try:
        value = _value(text, kind, quoted)
    except ValueError as exc:
        raise WhereError(f"--where: {text!r} is not a value of {column} ({_kind_name(kind)}): {exc}") from exc
    except ArithmeticError as exc:  # decimal.Decimal's (its message is a list of condition classes)
        raise WhereError(f"--where: {text!r} is not a value of {column} ({_kind_name(kind)})") from exc
    return pa.scalar(value, kind)


def _kind_name(kind: pa.DataType) -> str:
    """A history column's type as a person reads it: `decimal(10, 2)`, not Arrow's `decimal128(10, 2)`."""
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision}, {kind.scale})"
    return str(kind)


def _value(text: str, kind: pa.DataType, quoted: bool) -> Any:
    if pa.types.is_integer(kind):
        return int(text)
    if pa.types.is_decimal(kind):
        return decimal.Decimal(text)
    if pa.types.is_floating(kind):
        return float(text)
    if pa.types.is_boolean(kind):
        return text.lower() in ("1", "true")
    if pa.types.is_date(kind):
        return datetime.date.fromisoformat(text)
    if pa.types.is_timestamp(kind):
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if kind.tz is not None and moment.tzinfo is None:  # a TIMESTAMP column: the history holds UTC instants
            moment = moment.replace(tzinfo=datetime.UTC)
        return moment
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        if not quoted and text.lower().startswith("0x"):
            return bytes.fromhex(text[2:])
        return text.encode()
    if pa.types.is_nested(kind):
        raise ValueError("a SET or VECTOR column is not compared by --where; use --changed or --format json")
    return text
