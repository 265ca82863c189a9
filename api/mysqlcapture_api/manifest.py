"""Load a MySQLCapture manifest from YAML, with every problem named by its manifest field path."""

from __future__ import annotations

import datetime
import difflib
import json
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from mysqlcapture_api.base import RULE_ERROR
from mysqlcapture_api.spec import MySQLCapture


class ManifestError(ValueError):
    """The manifest is not a valid MySQLCapture; `problems` holds one `field.path: what is wrong` each."""

    def __init__(self, source: str, problems: Sequence[str]):
        self.source = source
        self.problems = tuple(problems)
        lines = "".join(f"\n  {problem}" for problem in self.problems)
        super().__init__(f"{source}: invalid MySQLCapture manifest:{lines}")


def load_manifest(path_or_text: str | Path) -> MySQLCapture:
    """Parse a MySQLCapture manifest, or raise ManifestError listing every problem.

    A Path, or a str without a newline, is a file to read; a str with a newline is the YAML text itself.
    """
    if isinstance(path_or_text, Path) or "\n" not in path_or_text:
        source = str(path_or_text)
        try:
            text = Path(path_or_text).read_text()
        except OSError as exc:
            raise ManifestError(source, [f"cannot read the file: {exc.strerror or exc}"]) from exc
    else:
        source, text = "manifest", path_or_text
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(source, [f"not valid YAML: {exc}"]) from exc
    if not isinstance(doc, dict):
        raise ManifestError(source, ["a manifest is a YAML mapping with apiVersion, kind, metadata and spec"])
    return validate_manifest(doc, source=source)


def validate_manifest(doc: dict[str, Any], *, source: str = "manifest") -> MySQLCapture:
    """Validate a parsed manifest (e.g. an object read from the API server), or raise ManifestError.

    Validation is strict over the document's JSON form, as the API server's: `port: "3306"` or `paused: 1`
    are type errors, not values to coerce. YAML timestamps become strings, as they do for kubectl. A null
    value means the key is absent: the API server prunes nulls of fields that are not nullable (no field
    of the generated CRD is), so `caFile: null`, what a template renders for an unset value, is "not set".
    """
    try:
        text = json.dumps(drop_nulls(doc), default=_json_scalar)
    except (TypeError, ValueError) as exc:
        raise ManifestError(source, [f"not a JSON-compatible document: {exc}"]) from exc
    try:
        return MySQLCapture.model_validate_json(text, strict=True, by_alias=True)
    except ValidationError as exc:
        raise ManifestError(source, [describe(error) for error in exc.errors()]) from None


def _json_scalar(value: Any) -> str:
    if isinstance(value, datetime.date):  # a YAML timestamp; datetime is a date too
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} {value!r} has no JSON form")


def drop_nulls(value: Any) -> Any:
    """`value` without the mapping entries whose value is null, at every depth."""
    if isinstance(value, dict):
        return {key: drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [drop_nulls(item) for item in value]
    return value


def describe(error: ErrorDetails) -> str:
    """One pydantic error as `spec.source.port: Input should be ... (got 70000)`, in manifest names."""
    loc = tuple(error["loc"])
    ctx = error.get("ctx") or {}
    if error["type"] == RULE_ERROR:
        if ctx.get("field"):
            loc = (*loc, ctx["field"])
        return f"{_path(loc)}: {ctx['message']}"
    if error["type"] == "extra_forbidden":
        allowed = _allowed_fields(loc[:-1])
        hint = ""
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        if close:
            hint = f" (did you mean {close[0]}?)"
        return f"{_path(loc)}: unknown field{hint}; allowed: {', '.join(allowed)}"
    got = error.get("input")
    # Numbers and booleans only: strings may be secrets (storageOptions) and the messages name what matters.
    shown = f" (got {got!r})" if isinstance(got, int | float) and error["type"] != "missing" else ""
    return f"{_path(loc)}: {error['msg']}{shown}"


def _path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the manifest)"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds directly, in an Optional, or as list items; None for scalars and maps."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, tuple, list):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _allowed_fields(loc: Sequence[int | str]) -> list[str]:
    """The manifest names of the fields of the object at `loc`."""
    model: type[BaseModel] = MySQLCapture
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((f for name, f in model.model_fields.items() if (f.alias or name) == part), None)
        inner = _model_in(field.annotation) if field is not None else None
        if inner is None:
            return []
        model = inner
    return [field.alias or name for name, field in model.model_fields.items()]
