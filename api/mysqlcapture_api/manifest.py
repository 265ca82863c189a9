"""Load a MySQLCapture manifest from YAML, with errors that name the manifest's field paths."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from mysqlcapture_api.spec import MySQLCapture


class ManifestError(ValueError):
    """The manifest is not a valid MySQLCapture; the message lists each problem with its field path."""


def _path(loc: tuple[object, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def load_manifest(source: str | Path) -> MySQLCapture:
    """Parse a path or YAML text into a MySQLCapture, or raise ManifestError."""
    text = Path(source).read_text() if isinstance(source, Path) or "\n" not in str(source) else str(source)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ManifestError("the manifest must be a YAML mapping with apiVersion, kind, metadata and spec")
    try:
        return MySQLCapture.model_validate(doc, by_alias=True)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = _path(tuple(err["loc"])) or "(top level)"
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            problems.append(f"{where}: {msg}")
        raise ManifestError("invalid MySQLCapture: " + "; ".join(problems)) from None
