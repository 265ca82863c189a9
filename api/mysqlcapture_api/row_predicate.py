"""spec.rows predicates: `col = 'value' AND n > 3`, as simple as Maxwell's value filters, read once and checked.

A predicate is one or more conditions joined by AND (any case):
- `column op literal`, op one of = != <> < <= > >=, the literal a 'quoted string' ('' or \\' inside), a number, or
  for = and != a /regular expression/ (searched in the value's text);
- `column IS NULL`, `column IS NOT NULL`.
A condition on a NULL value is false (but IS NULL), as in SQL.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'(?:[^'\\]|\\.|'')*')
    | (?P<re>/(?:[^/\\]|\\.)*/)
    | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<op><=|>=|!=|<>|=|<|>)
    | (?P<word>`(?:[^`]|``)+`|[A-Za-z_$][A-Za-z0-9_$]*)
    )""",
    re.VERBOSE,
)


class PredicateError(ValueError):
    """A predicate that does not parse: what was expected, and where."""


@dataclass(frozen=True)
class Condition:
    """One condition: `op` is one of = != < <= > >= ~ !~ (regular expressions), null, notnull."""

    column: str
    op: str
    value: str | float | re.Pattern[str] | None = None

    def holds(self, value: Any) -> bool:
        """Whether the condition holds for a column's value (as JSON gives it: str, int, float, bool, None...)."""
        if self.op == "null":
            return value is None
        if self.op == "notnull":
            return value is not None
        if value is None:
            return False
        if isinstance(self.value, re.Pattern):
            found = self.value.search(value if isinstance(value, str) else _text(value)) is not None
            return found if self.op == "~" else not found
        left: Any
        right: Any
        if isinstance(self.value, float):
            if isinstance(value, bool):
                return False
            try:
                left, right = float(value), self.value
            except (TypeError, ValueError):
                return self.op == "!="
        else:
            left, right = (value if isinstance(value, str) else _text(value)), self.value
        if self.op == "=":
            return bool(left == right)
        if self.op == "!=":
            return bool(left != right)
        if self.op == "<":
            return bool(left < right)
        if self.op == "<=":
            return bool(left <= right)
        if self.op == ">":
            return bool(left > right)
        return bool(left >= right)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out = []
    i = 0
    while i < len(text):
        if text[i:].strip() == "":
            break
        m = _TOKEN.match(text, i)
        if m is None or m.end() == i:
            raise PredicateError(f"cannot read {text[i:].strip()[:20]!r} at character {i + 1}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind), m.start(kind)))
        i = m.end()
    return out


def parse(text: str) -> tuple[Condition, ...]:
    """The conditions of `text`; PredicateError when it is not a predicate of this grammar."""
    tokens = _tokens(text)
    conditions: list[Condition] = []
    i = 0

    def expect(what: str) -> tuple[str, str, int]:
        if i >= len(tokens):
            raise PredicateError(f"expected {what} at the end")
        return tokens[i]

    while True:
        kind, value, at = expect("a column name")
        if kind != "word" or value.upper() in ("AND", "IS", "NOT", "NULL"):
            raise PredicateError(f"expected a column name at character {at + 1}, found {value!r}")
        column = value[1:-1].replace("``", "`") if value.startswith("`") else value
        i += 1
        kind, value, at = expect("an operator (= != <> < <= > >=) or IS [NOT] NULL")
        if kind == "word" and value.upper() == "IS":
            i += 1
            kind, value, at = expect("NULL or NOT NULL")
            negated = value.upper() == "NOT"
            if negated:
                i += 1
                kind, value, at = expect("NULL")
            if value.upper() != "NULL":
                raise PredicateError(f"expected NULL at character {at + 1}, found {value!r}")
            conditions.append(Condition(column, "notnull" if negated else "null"))
            i += 1
        elif kind == "op":
            op = "!=" if value == "<>" else value
            i += 1
            kind, literal, at = expect("a value")
            if kind == "str":
                body = literal[1:-1]
                conditions.append(Condition(column, op, re.sub(r"''|\\(.)", lambda m: m.group(1) or "'", body)))
            elif kind == "num":
                conditions.append(Condition(column, op, float(literal)))
            elif kind == "re" and op in ("=", "!="):
                try:
                    pattern = re.compile(literal[1:-1].replace("\\/", "/"))
                except re.error as exc:
                    raise PredicateError(
                        f"the regular expression at character {at + 1} does not compile: {exc}"
                    ) from exc
                conditions.append(Condition(column, "~" if op == "=" else "!~", pattern))
            else:
                raise PredicateError(
                    f"expected a 'string' or a number at character {at + 1} (a /regex/ only after = or !=), "
                    f"found {literal!r}"
                )
            i += 1
        else:
            raise PredicateError(
                f"expected an operator (= != <> < <= > >=) or IS at character {at + 1}, found {value!r}"
            )
        if i == len(tokens):
            return tuple(conditions)
        kind, value, at = tokens[i]
        if kind != "word" or value.upper() != "AND":
            raise PredicateError(f"expected AND at character {at + 1}, found {value!r} (conditions join with AND)")
        i += 1
