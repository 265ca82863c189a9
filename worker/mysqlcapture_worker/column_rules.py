"""spec.columns applied: each captured column's rule, and the rendered rows, keys and definitions in their ruled form.

Rules work on Maxwell's JSON text of a value (what every decode path renders), so that the compiled renderers (given
a table's `TableRules.native`, a `mysqlcapture_native.Redactor`, they rule each column as they write a row) and this
module, the reference path's, give the same bytes:

- exclude: the column is left out of `data`, `old` and the DDL definition;
- hash: HMAC-SHA256/512 (spec.columns.hash.keyFrom) of the value's text: a string's characters as UTF-8, a binary
  column's bytes (its base64 decoded), any other value's JSON text (a number as rendered, a JSON document as
  rendered); written as a lowercase hex string;
- truncate: a text column's first `length` characters;
- mask: a text column's characters replaced by `with`, all but the last `keep`.

NULL stays NULL under every rule. A primary-key column may only be hashed (a key must stay unique and stable);
truncate and mask take text columns only (CHAR, VARCHAR, TEXT, ENUM).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, overload

import orjson
import pyarrow as pa
from mysqlcapture_api.changelog import pk_hash
from mysqlcapture_api.columns import Columns, rule_index
from mysqlcapture_api.javatext import jackson_string
from mysqlcapture_api.schema.model import BINARY_TYPES, STRING_TYPES, ColumnDef, TableDef

try:
    from mysqlcapture_native import Redactor
except ImportError:  # the reference path alone
    Redactor = None  # type: ignore[assignment,misc]

EXCLUDE, HASH, MASK, TRUNCATE = 0, 1, 2, 3  # mirrored by worker/native/src/redact.rs
_NAMES = {EXCLUDE: "exclude", HASH: "hash", MASK: "mask", TRUNCATE: "truncate"}


class ColumnRuleError(ValueError):
    """A rule that cannot apply to the column it matches (one line: the column, the rule, the fix)."""


class KeyRotated(Exception):
    """spec.columns.hash's key changed (its file or mounted Secret): the worker commits and runs again with it."""


@dataclass(frozen=True, slots=True)
class Action:
    """One column's rule: `n` is truncate's length or mask's `keep`; `binary`: hash the value's bytes."""

    kind: int
    n: int = 0
    with_: str = "*"
    binary: bool = False

    def describe(self, algorithm: str) -> str:
        if self.kind == HASH:
            return f"hash (HMAC-{algorithm.upper()}{', of the bytes' if self.binary else ''})"
        if self.kind == TRUNCATE:
            return f"truncate to {self.n} characters"
        if self.kind == MASK:
            return f"mask with {self.with_!r}, keep the last {self.n}"
        return "exclude"


def text_column(col: ColumnDef) -> bool:
    """Whether truncate and mask apply: characters, not bytes or numbers."""
    return (col.type in STRING_TYPES and col.charset != "binary") or col.type == "enum"  # a SET is an array


def binary_column(col: ColumnDef) -> bool:
    return col.type in BINARY_TYPES or (col.type in STRING_TYPES and col.charset == "binary")


class ColumnRules:
    """The capture's column rules, compiled once; `for_table` resolves them for one table definition."""

    def __init__(self, spec: Columns, key: bytes | None = None, reread: Callable[[], bytes] | None = None) -> None:
        """`reread`: reads the key again (a file's, a mounted Secret's), for `key_changed`."""
        self.spec = spec
        self._reread = reread
        self.algorithm = spec.hash.algorithm if spec.hash is not None else "sha256"
        if spec.hash is not None and key is None:
            raise ColumnRuleError("spec.columns.hash: no key was read (spec.columns.hash.keyFrom)")
        self.key = key or b""
        self.for_table = lru_cache(maxsize=4096)(self._for_table)

    def empty(self) -> bool:
        return self.spec.empty()

    def key_changed(self) -> bool:
        """Whether the key's file now holds another key (a key being replaced, unreadable for a moment: no)."""
        if self._reread is None:
            return False
        try:
            return self._reread() != self.key
        except Exception:
            return False

    def action(self, database: str, table: str, column: str) -> Action | None:
        """The rule of `database`.`table`.`column` by its name alone (the first that matches), or None."""
        found = rule_index(self.spec, database, table, column)
        if found is None:
            return None
        kind, i = found
        if kind == "mask":
            return Action(MASK, self.spec.mask[i].keep, self.spec.mask[i].with_)
        if kind == "truncate":
            return Action(TRUNCATE, self.spec.truncate[i].length)
        return Action(HASH if kind == "hash" else EXCLUDE)

    def actions(self, table: TableDef) -> dict[str, Action]:
        """Column name -> its action, for the ruled columns of `table`; ColumnRuleError when a rule cannot apply."""
        found: dict[str, Action] = {}
        key = {c.lower() for c in table.primary_key}
        for col in table.columns:
            action = self.action(table.database, table.name, col.name)
            if action is None:
                continue
            where = f"{table.database}.{table.name}.{col.name}"
            rule = f"spec.columns.{_NAMES[action.kind]}"
            if col.name.lower() in key and action.kind != HASH:
                raise ColumnRuleError(
                    f"{rule}: {where} is in the primary key of {table.database}.{table.name}, which must stay "
                    "unique and stable: hash it (spec.columns.hash) or leave it out of the rule"
                )
            if action.kind in (MASK, TRUNCATE) and not text_column(col):
                raise ColumnRuleError(
                    f"{rule}: {where} is {col.type.upper()}{' (binary)' if col.charset == 'binary' else ''}; "
                    "truncate and mask apply to text columns (CHAR, VARCHAR, TEXT, ENUM): hash or exclude it"
                )
            found[col.name] = (
                Action(action.kind, action.n, action.with_, binary_column(col)) if action.kind == HASH else action
            )
        return found

    def lines(self, tables: Iterable[TableDef]) -> list[str]:
        """`mysqlcapture check`'s lines: the effective rule of each ruled column of `tables` (ColumnRuleError when
        one cannot apply)."""
        out = []
        for table in sorted(tables, key=lambda t: (t.database, t.name)):
            for name, action in self.actions(table).items():
                out.append(f"column {table.database}.{table.name}.{name}: {action.describe(self.algorithm)}")
        return out

    def definition(self, definition: dict[str, Any]) -> dict[str, Any]:
        """A table's Maxwell definition (a DDL event's `def`/`old`): excluded columns gone, hashed ones varchar."""
        columns = definition.get("columns")
        if not isinstance(columns, list) or "table" not in definition:
            return definition
        db, table = str(definition.get("database")), str(definition["table"])
        out = []
        for col in columns:
            action = self.action(db, table, str(col.get("name")))
            if action is None or action.kind in (MASK, TRUNCATE):
                out.append(col)
            elif action.kind == HASH:
                out.append({"type": "varchar", "name": col["name"], "charset": "ascii"})
        return {**definition, "columns": out}

    def _for_table(self, table: TableDef) -> TableRules | None:
        actions = self.actions(table)
        return TableRules(self, table, actions) if actions else None


def _unquote(token: str) -> str:
    value = orjson.loads(token)
    assert isinstance(value, str)
    return value


def _skip_string(text: str, i: int) -> int:
    """The index after the JSON string starting at `i`."""
    i += 1
    while True:
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        else:
            i += 1


def _skip_value(text: str, i: int) -> int:
    """The index after the JSON value starting at `i`."""
    c = text[i]
    if c == '"':
        return _skip_string(text, i)
    if c in "{[":
        depth = 0
        while True:
            c = text[i]
            if c == '"':
                i = _skip_string(text, i)
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
    while text[i] not in ",}]":
        i += 1
    return i


def members(obj: str) -> list[tuple[str, str]]:
    """A rendered JSON object's (key token, value token) pairs, in order, tokens as written."""
    out: list[tuple[str, str]] = []
    i = 1
    if obj[i] == "}":
        return out
    while True:
        end = _skip_string(obj, i)
        key = obj[i:end]
        start = end + 1  # past ':'
        stop = _skip_value(obj, start)
        out.append((key, obj[start:stop]))
        if obj[stop] == "}":
            return out
        i = stop + 1


def elements(array: str) -> list[str]:
    """A rendered JSON array's value tokens, in order."""
    out: list[str] = []
    i = 1
    if array[i] == "]":
        return out
    while True:
        stop = _skip_value(array, i)
        out.append(array[i:stop])
        if array[stop] == "]":
            return out
        i = stop + 1


class TableRules:
    """One table's ruled columns: rows, keys and its definition in their ruled form (the reference path)."""

    def __init__(self, rules: ColumnRules, table: TableDef, actions: dict[str, Action]) -> None:
        self.rules = rules
        self.table = table
        self.actions = actions
        self._by_key = {jackson_string(name).decode(): a for name, a in actions.items()}
        self._digest: Callable[[], Any] = getattr(hashlib, rules.algorithm)
        lowered = {c.lower(): c for c in actions}
        self.key_actions = tuple(self.actions.get(lowered.get(c.lower(), ""), None) for c in table.primary_key)
        self.rekeys = any(a is not None for a in self.key_actions)
        # The compiled rules: the renderers apply them as they write each row (`RowRenderer`/`TextRenderer`).
        self.native = (
            Redactor(
                [(k, a.kind, a.n, jackson_string(a.with_).decode()[1:-1], a.binary) for k, a in self._by_key.items()],
                [a.binary if a is not None else None for a in self.key_actions],
                rules.key,
                rules.algorithm,
                f"{table.database}\x00{table.name}\x00".encode(),
            )
            if Redactor is not None
            else None
        )

    def value(self, action: Action, token: str) -> str:
        """One value token in its ruled form (never called for exclude)."""
        if token == "null":
            return token
        if action.kind == HASH:
            if token.startswith('"'):
                text = _unquote(token)
                raw = base64.b64decode(text) if action.binary else text.encode("utf-8", "surrogatepass")
            else:
                raw = token.encode()
            return '"' + hmac.new(self.rules.key, raw, self._digest).hexdigest() + '"'
        text = _unquote(token)
        if action.kind == TRUNCATE:
            return jackson_string(text[: action.n]).decode()
        kept = text[max(0, len(text) - action.n) :] if action.n else ""
        return jackson_string(action.with_ * (len(text) - len(kept)) + kept).decode()

    @overload
    def object(self, obj: str) -> str: ...
    @overload
    def object(self, obj: None) -> None: ...
    def object(self, obj: str | None) -> str | None:
        """A rendered `data`/`old` object in its ruled form."""
        if obj is None:
            return None
        parts = []
        for key, token in members(obj):
            action = self._by_key.get(key)
            if action is None:
                parts.append(f"{key}:{token}")
            elif action.kind != EXCLUDE:
                parts.append(f"{key}:{self.value(action, token)}")
        return "{" + ",".join(parts) + "}"

    @overload
    def key(self, pk_json: str) -> str: ...
    @overload
    def key(self, pk_json: None) -> None: ...
    def key(self, pk_json: str | None) -> str | None:
        """A rendered primary-key array with its hashed columns hashed."""
        if pk_json is None or not self.rekeys:
            return pk_json
        tokens = elements(pk_json)
        return (
            "["
            + ",".join(t if a is None else self.value(a, t) for t, a in zip(tokens, self.key_actions, strict=True))
            + "]"
        )

    def batch(
        self, data: pa.StringArray, old: pa.StringArray | None, pk: pa.StringArray | None, hashes: pa.StringArray | None
    ) -> tuple[pa.StringArray, pa.StringArray | None, pa.StringArray | None, pa.StringArray | None]:
        """A batch's rendered columns in their ruled form, row by row (the reference path's snapshot chunks)."""
        new_data = pa.array([self.object(v) for v in data.to_pylist()], pa.string())
        new_old = pa.array([self.object(v) for v in old.to_pylist()], pa.string()) if old is not None else None
        if pk is None or not self.rekeys:
            return new_data, new_old, pk, hashes
        keys = [self.key(v) for v in pk.to_pylist()]
        db, table = self.table.database, self.table.name
        return (
            new_data,
            new_old,
            pa.array(keys, pa.string()),
            pa.array([pk_hash(db, table, k) for k in keys], pa.string()),
        )
