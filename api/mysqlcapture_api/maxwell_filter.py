"""Maxwell's `filter` and `exclude_columns` settings, carried over: converted to spec.tables, spec.columns.exclude
and spec.rows, or refused with one line naming the rule this capture cannot say.

Maxwell reads `filter` left to right, the last matching rule deciding, every table included by default:
    exclude: foodb.*, include: foodb.tbl, exclude: db.tbl.col = val, blacklist: bad_db.*
Here tables are included by globs with exclusions winning, so a rule list converts when it says the same thing:
exclusions, then inclusions after `exclude: *.*` (which starts from nothing), and value rules of whole tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_RULE = re.compile(r"^\s*(include|exclude|blacklist)\s*:\s*(.+?)\s*$", re.IGNORECASE)
_NAME = r"(?:`[^`]+`|/(?:[^/\\]|\\.)*/|[^.\s=/`]+)"
_TARGET = re.compile(rf"^({_NAME})\.({_NAME})(?:\.({_NAME})\s*=\s*(.+))?$")


class MaxwellFilterError(ValueError):
    """A Maxwell filter this capture cannot express, or one that does not parse."""


@dataclass
class Converted:
    """A Maxwell filter as spec.tables (include, exclude globs), spec.columns.exclude globs and spec.rows entries."""

    include: list[str] = field(default_factory=lambda: ["*.*"])
    exclude: list[str] = field(default_factory=list)
    exclude_columns: list[str] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)


def _split(text: str) -> list[str]:
    """Rules separated by commas outside /regex/ and quotes."""
    out, current, in_regex, quote = [], "", False, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`" and not in_regex:
            quote = ch
        elif ch == "/":
            in_regex = not in_regex
        elif ch == "," and not in_regex:
            out.append(current)
            current = ""
            continue
        current += ch
    out.append(current)
    return [r for r in (s.strip() for s in out) if r]


def _glob(name: str, rule: str) -> str:
    if name.startswith("/"):
        raise MaxwellFilterError(
            f"filter rule {rule!r}: a /regex/ name has no glob here; name the tables with globs (* ?) in spec.tables"
        )
    return name[1:-1] if name.startswith("`") else name


def _literal(value: str, rule: str) -> str:
    """Maxwell's value (compared as text) as a predicate's right-hand side."""
    value = value.strip()
    if value.startswith("/") and value.endswith("/") and len(value) > 1:
        return value
    if value.lower() == "null":
        return "IS NULL"
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    if "\n" in value:
        raise MaxwellFilterError(f"filter rule {rule!r}: a value on several lines")
    return "'" + value.replace("'", "''") + "'"


def _predicate(column: str, literal: str) -> str:
    name = "`" + column.replace("`", "``") + "`"
    return f"{name} {literal}" if literal == "IS NULL" else f"{name} = {literal}"


def convert(filter_text: str | None, exclude_columns: str | None) -> Converted:
    """Maxwell's settings as this capture's; MaxwellFilterError names the first rule that cannot be said here."""
    out = Converted()
    started_empty = False
    for rule in _split(filter_text or ""):
        m = _RULE.match(rule)
        if m is None:
            raise MaxwellFilterError(f"filter rule {rule!r}: expected include:, exclude: or blacklist: then db.table")
        kind, target = m.group(1).lower(), m.group(2)
        t = _TARGET.match(target)
        if t is None:
            raise MaxwellFilterError(f"filter rule {rule!r}: expected db.table or db.table.column = value")
        db, table, column, value = t.groups()
        name = f"{_glob(db, rule)}.{_glob(table, rule)}"
        if column is not None:
            col = _glob(column, rule)
            if kind == "blacklist":
                raise MaxwellFilterError(f"filter rule {rule!r}: blacklist takes databases and tables, not values")
            predicate = _predicate(col, _literal(value, rule))
            if kind == "exclude":
                out.rows.append({"table": name, "exclude": predicate})
            elif started_empty and name not in out.include:
                # `exclude: *.*, include: db.tbl.col = v`: only those rows of that table.
                out.include.append(name)
                out.rows.append({"table": name, "include": predicate})
            else:
                raise MaxwellFilterError(
                    f"filter rule {rule!r}: an include of values re-admits rows an earlier rule excluded only after "
                    "'exclude: *.*'; write the rows you keep as spec.rows include"
                )
            continue
        if kind in ("exclude", "blacklist"):
            if name == "*.*":
                out.include, out.exclude, started_empty = [], [], True
                out.rows = [r for r in out.rows if "include" in r]
            else:
                out.exclude.append(name)
        elif started_empty or "*.*" not in out.include:
            if any(_overlaps(name, e) for e in out.exclude):
                raise MaxwellFilterError(
                    f"filter rule {rule!r} re-admits tables an earlier exclude removed; here exclusions win over "
                    "inclusions: list the tables to keep in spec.tables.include instead"
                )
            out.include.append(name)
        elif any(_overlaps(name, e) for e in out.exclude):
            raise MaxwellFilterError(
                f"filter rule {rule!r} re-admits tables an earlier exclude removed; here exclusions win over "
                "inclusions: start with 'exclude: *.*' and include what you keep, or write spec.tables"
            )
    if started_empty and not out.include:
        raise MaxwellFilterError("filter excludes every table (exclude: *.*) and includes none back")
    for name in (exclude_columns or "").split(","):
        name = name.strip()
        if name:
            out.exclude_columns.append(f"*.*.{name}")
    return out


def _overlaps(include: str, exclude: str) -> bool:
    """Whether a table named by `include` may be one `exclude` removes (globs compared part by part)."""
    import fnmatch

    for a, b in zip(include.split("."), exclude.split("."), strict=True):
        if not (fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a) or "*" in a or "?" in a):
            return False
    return True
