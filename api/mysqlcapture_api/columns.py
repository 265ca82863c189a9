"""spec.columns: which columns leave the database, and in what form (excluded, hashed, truncated, masked).

Every rule names columns by `db.table.column` globs (*, ?, [...]), matched as `spec.tables` matches tables.
A column matched by several rules takes the first of: exclude, hash, mask, truncate.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from mysqlcapture_api.base import Model, Rule
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_api.schema.schema import Schema
from mysqlcapture_api.source import SecretFrom

# Two unbracketed dots between three non-empty globs; a dot inside [...] is part of a name.
_PART = r"(?:[^.\[\]]|\[[^\]]+\])+"
COLUMN_PATTERN = rf"^{_PART}\.{_PART}\.{_PART}$"
COLUMN_MESSAGE = (
    "not a db.table.column pattern: it needs exactly two '.' outside [...] with a glob between them, e.g. "
    "'shop.users.email' or '*.*.password_hash'"
)
MAX_COLUMN_GLOBS = 64
MAX_COLUMN_GLOB = 192


def _column_pattern(value: str) -> str:
    if len(value) > MAX_COLUMN_GLOB or not re.fullmatch(COLUMN_PATTERN, value):
        raise PydanticCustomError(
            "column_pattern", "'{pattern}' is {message}", {"pattern": value, "message": COLUMN_MESSAGE}
        )
    return value


ColumnPattern = Annotated[
    str,
    AfterValidator(_column_pattern),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": MAX_COLUMN_GLOB,
            "x-kubernetes-validations": [{"rule": f"self.matches(r'{COLUMN_PATTERN}')", "message": COLUMN_MESSAGE}],
        }
    ),
]
Globs = tuple[ColumnPattern, ...]


KeyFrom = SecretFrom
"""spec.columns.hash.keyFrom (as spec.source.passwordFrom)."""


_SOME_COLUMNS = (
    Rule(
        holds=lambda r: len(r.columns) > 0,
        cel="size(self.columns) > 0",
        message="name at least one db.table.column glob",
        field="columns",
    ),
)


class HashRule(Model):
    """Columns replaced by a keyed hash: equal values give equal hashes, so hashed columns still join."""

    rules = _SOME_COLUMNS

    columns: Globs = Field(max_length=MAX_COLUMN_GLOBS, description="Globs of the columns to hash.")
    algorithm: Literal["sha256", "sha512"] = Field(
        default="sha256",
        description=(
            "HMAC-SHA256 (or -SHA512) of the value's text as Maxwell renders it (its bytes for binary columns), "
            "keyed by keyFrom, as lowercase hex. Default: sha256."
        ),
    )
    key_from: KeyFrom = Field(description="Where the HMAC key comes from.")


class TruncateRule(Model):
    """Text columns cut to their first `length` characters."""

    rules = _SOME_COLUMNS

    columns: Globs = Field(max_length=MAX_COLUMN_GLOBS, description="Globs of the text columns.")
    length: int = Field(ge=0, le=1_000_000, description="Characters kept (not bytes).")


class MaskRule(Model):
    """Text columns whose characters are replaced by `with`, all but the last `keep`."""

    rules = _SOME_COLUMNS

    columns: Globs = Field(max_length=MAX_COLUMN_GLOBS, description="Globs of the text columns.")
    keep: int = Field(default=0, ge=0, le=1000, description="Characters kept at the end. Default: 0.")
    with_: str = Field(
        default="*",
        alias="with",
        min_length=1,
        max_length=1,
        description="The character that replaces the others. Default: '*'.",
    )


class Columns(Model):
    """What leaves the database of each captured column: every event kind, every sink, before anything is written."""

    exclude: Globs = Field(
        default=(),
        max_length=MAX_COLUMN_GLOBS,
        description="Globs of columns left out of data, old and the DDL definition. Default: [] (none).",
    )
    hash: HashRule | None = Field(default=None, description="Columns replaced by a keyed hash. Default: none.")
    truncate: tuple[TruncateRule, ...] = Field(
        default=(), max_length=16, description="Text columns cut to a length. Default: [] (none)."
    )
    mask: tuple[MaskRule, ...] = Field(
        default=(), max_length=16, description="Text columns masked but for their last characters. Default: []."
    )

    def empty(self) -> bool:
        """Whether no rule is set (every column leaves as it is)."""
        return not (self.exclude or self.hash or self.truncate or self.mask)


RuleKind = Literal["exclude", "hash", "mask", "truncate"]


@lru_cache(maxsize=64)
def _compiled(columns: Columns) -> tuple[tuple[tuple[re.Pattern[str], ...], RuleKind], ...]:
    def globs(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(fnmatch.translate(p)) for p in patterns)

    ordered: list[tuple[tuple[re.Pattern[str], ...], RuleKind]] = [(globs(columns.exclude), "exclude")]
    if columns.hash is not None:
        ordered.append((globs(columns.hash.columns), "hash"))
    ordered += [(globs(m.columns), "mask") for m in columns.mask]
    ordered += [(globs(t.columns), "truncate") for t in columns.truncate]
    return tuple(ordered)


def rule_index(columns: Columns, database: str, table: str, column: str) -> tuple[RuleKind, int] | None:
    """The rule of `database`.`table`.`column` (the first of exclude, hash, mask, truncate whose globs match) and
    its place in its list (mask and truncate are lists), or None."""
    name = f"{database}.{table}.{column}"
    seen: dict[str, int] = {}
    for patterns, kind in _compiled(columns):
        i = seen.get(kind, -1) + 1
        seen[kind] = i
        if any(p.match(name) for p in patterns):
            return kind, i
    return None


def ruled_table(columns: Columns, table: TableDef) -> TableDef:
    """`table` as the change log holds it under `columns`: excluded columns gone, hashed ones ASCII text (the
    other rules keep a text column's type)."""
    out = []
    for col in table.columns:
        found = rule_index(columns, table.database, table.name, col.name)
        if found is None or found[0] in ("mask", "truncate"):
            out.append(col)
        elif found[0] == "hash":
            out.append(ColumnDef(col.name, "varchar", charset="ascii", nullable=col.nullable))
    return (
        dataclasses.replace(table, columns=tuple(out))
        if len(out) != len(table.columns) or out != list(table.columns)
        else table
    )


def to_property(columns: Columns) -> str:
    """`columns` as the change log records them with each commit: what compaction needs to type ruled columns (no
    key source)."""
    doc = columns.model_dump(mode="json", by_alias=True, exclude={"hash": {"key_from"}})
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def from_property(text: str | None) -> Columns | None:
    """The rules a change log records (`to_property`), None when it records none."""
    if not text:
        return None
    doc = json.loads(text)
    if doc.get("hash") is not None:
        doc["hash"]["keyFrom"] = {"env": "UNUSED"}  # compaction types columns, it never hashes
    return Columns.model_validate(doc)


def ruled_schema(columns: Columns | None, schema: Schema) -> Schema:
    """Every table of `schema` as the change log holds it under `columns` (`ruled_table`)."""
    if columns is None or columns.empty():
        return schema
    databases = {
        name: dataclasses.replace(db, tables={t: ruled_table(columns, table) for t, table in db.tables.items()})
        for name, db in schema.databases.items()
    }
    return dataclasses.replace(schema, databases=databases)
