"""Decoded values as Maxwell's JSON text, and whether a column's value changed as that text sees it."""

from __future__ import annotations

import orjson


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
