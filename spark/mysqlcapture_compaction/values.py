"""Exact text of Maxwell-rendered values: a row image's columns as their literal JSON, never re-parsed as floats.

The columns Spark's JSON reader cannot keep exact (JSON documents, DECIMAL over 38 digits, and every column of a
change log without a schema history) are cut out here (`raw_members`): a JSON document as its exact text, a
column without a definition as its natural text (a JSON string unquoted, a number exactly as written).
"""

from __future__ import annotations

import decimal
import json
from typing import Any

from mysqlcapture_api.changelog import pk_hash

_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


def raw_items(text: str) -> list[tuple[str, str]]:
    """The (key, raw JSON value text) pairs of a JSON object, in order, values untouched."""
    out: list[tuple[str, str]] = []
    i, n = _skip(text, 0), len(text)
    if i >= n or text[i] != "{":
        raise ValueError(f"not a JSON object: {text[:60]!r}")
    i = _skip(text, i + 1)
    if i < n and text[i] == "}":
        return out
    while True:
        key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        i = _skip(text, i)
        if text[i] != ":":
            raise ValueError(f"expected ':' at {i} in {text[:60]!r}")
        i = _skip(text, i + 1)
        _, end = _DECODER.raw_decode(text, i)
        out.append((key, text[i:end]))
        i = _skip(text, end)
        if text[i] == "}":
            return out
        if text[i] != ",":
            raise ValueError(f"expected ',' at {i} in {text[:60]!r}")
        i = _skip(text, i + 1)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def natural(raw: str) -> str | None:
    """A raw JSON value as the text stored in a current-state column (None for JSON null)."""
    if raw == "null":
        return None
    if raw.startswith('"'):
        value: Any = json.loads(raw)
        return str(value)
    return raw


def plain_decimal(raw: str) -> str:
    """A DECIMAL's text (the change log's: Java's BigDecimal.toString, `0E-10`, `1.5E-8`) in plain notation with
    every digit, as the server prints it (`0.0000000000`, `0.000000015`): exact, and exact as an SQL literal too,
    where `1.5E-8` would be read as a DOUBLE."""
    if "E" not in raw and "e" not in raw:
        return raw
    return format(decimal.Decimal(raw), "f")


def raw_members(
    data: str | None,
    names: tuple[str, ...],
    modes: tuple[str, ...],
    *,
    keys: bool = False,
    json_null: str | None = None,
) -> tuple[Any, ...] | None:
    """The row image without the named members, then those members cut out verbatim: "json" keeps a value's
    exact JSON text (a JSON document), "decimal" a DECIMAL wider than Spark's in plain notation (`plain_decimal`),
    "natural" its natural text; null and absent
    ones are None, except a JSON column's JSON document null, which `json_null` (the change log's JSON array of
    such columns of this image) lists: its text `null`. The rest goes to Spark's JSON reader, which then never meets
    those values (Jackson refuses a number of over 1,000 digits, and a JSON document's doubles are printed in full).
    With `keys`, the image's member names come last (an update's `old`: which columns it changed, for an image
    Jackson refuses)."""
    if data is None:
        return None
    items = raw_items(data)
    found = dict(items)
    wanted = set(names)
    rest = "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{v}" for k, v in items if k not in wanted) + "}"
    out: list[str | None] = [rest]
    documents = frozenset(json.loads(json_null)) if json_null else frozenset()
    for name, mode in zip(names, modes, strict=True):
        raw = found.get(name)
        if raw == "null" and name in documents:
            out.append(raw)
            continue
        if raw is None or raw == "null":
            out.append(None)
        else:
            out.append(raw if mode == "json" else plain_decimal(raw) if mode == "decimal" else natural(raw))
    return (*out, [k for k, _ in items]) if keys else tuple(out)


def before_pk(data: str, old: str, pk_columns: str) -> str:
    """The primary-key JSON of an update's before image, rendered as the worker renders `primary_key`."""
    previous = dict(raw_items(old))
    current = dict(raw_items(data))
    names = json.loads(pk_columns)
    return "[" + ",".join(previous.get(c, current[c]) for c in names) + "]"


def row_hash(database: str, table: str, pk_json: str) -> str:
    """The change log's `pk_hash` of a row (the worker's function; history files are sorted on it)."""
    return pk_hash(database, table, pk_json)
