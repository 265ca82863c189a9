"""A JSON object's members as the exact text each value was written with, for byte-for-byte comparisons."""

from __future__ import annotations

import json

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def raw_members(text: str, start: int = 0) -> dict[str, str]:
    """{key: the value's text} of the JSON object at `start` in `text` (one level; values kept verbatim)."""
    i = start
    while text[i] in _SPACE:
        i += 1
    if text[i] != "{":
        raise ValueError(f"not an object at {i}: {text[i : i + 20]!r}")
    i += 1
    out: dict[str, str] = {}
    while True:
        while text[i] in _SPACE + ",":
            i += 1
        if text[i] == "}":
            return out
        key, i = _DECODER.raw_decode(text, i)
        while text[i] in _SPACE + ":":
            i += 1
        _, end = _DECODER.raw_decode(text, i)
        out[key] = text[i:end]
        i = end
