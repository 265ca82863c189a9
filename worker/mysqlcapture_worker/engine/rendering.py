"""Decoded values as Maxwell's JSON text, and whether a column's value changed as that text sees it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import orjson
from mysqlcapture_api.javatext import jackson_string

from mysqlcapture_worker.decode.mysql_json import JSON_NULL

if TYPE_CHECKING:
    from mysqlcapture_worker.column_rules import TableRules


def _default(obj: object) -> object:
    to_fragment = getattr(obj, "__json_fragment__", None)
    if to_fragment is not None:
        return to_fragment()
    raise TypeError(f"cannot render {type(obj).__name__} as JSON")


def render(obj: object) -> str:
    """`obj` as JSON text (DECIMALs and other pre-rendered values as their own text)."""
    return orjson.dumps(obj, default=_default).decode()


def changed(before: object, after: object) -> bool:
    """Whether a column's value changed, as Maxwell's `old` sees it: by rendered JSON, not Python equality.

    Python says 1 == True == 1.0 (JSON documents) and compares orjson fragments (DECIMAL) by identity.
    """
    if before is after:
        return False
    kind = type(before)
    if kind is not type(after):
        return True
    if kind is str or kind is int or kind is float:
        return before != after
    return orjson.dumps(before, default=_default) != orjson.dumps(after, default=_default)


def json_nulls(image: Mapping[str, object], rules: TableRules | None) -> str | None:
    """The columns of `image` holding the JSON document null, as the change log's `json_null` lists them (a ruled
    column is written in its ruled form, not marked), None for none."""
    names = [
        jackson_string(n) for n, v in image.items() if v is JSON_NULL and (rules is None or n not in rules.actions)
    ]
    return (b"[" + b",".join(names) + b"]").decode() if names else None  # named as `data` names them (Jackson)
