"""Versions (history.select) and rows (as_of) as a terminal table, JSON lines or CSV.

JSON lines: one object per version, images in Maxwell's forms (history_json.py, rendered column by column).
The terminal table shows the images as that JSON. CSV: a header, one line per version, one column per image
field (`before.<col>`, `after.<col>`) as the mysql client prints values; every value quoted, NULL an empty
unquoted field (so NULL and '' differ).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import ColumnDef, TableDef

from mysqlcapture_compaction import history, history_json
from mysqlcapture_compaction.history_values import text_value
from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.transforms import PK

FORMATS = ("table", "json", "csv")
Definitions = Mapping[tuple[str, str], TableDef | None]


def _columns(defs: Definitions, row: Mapping[str, Any]) -> dict[str, ColumnDef]:
    found = defs.get((row["database"], row["table"]))
    return {c.name: c for c in found.columns} if found is not None else {}


def image_fields(image: Mapping[str, Any] | None) -> list[tuple[str, Any, str | None]]:
    """(name, value, raw text) of an image's columns (`_cdc_raw` holds the exact text of a value no type holds)."""
    if image is None:
        return []
    raw = image.get(RAW)
    raws = dict(raw) if isinstance(raw, list) else (raw or {})
    return [(k, v, raws.get(k)) for k, v in image.items() if k != RAW]


def changed(row: Mapping[str, Any]) -> list[str] | None:
    """The columns an update changed (None for an insert or a delete: they set or remove every column)."""
    before, after = row.get("before"), row.get("after")
    if row[Col.TYPE] != "update" or before is None or after is None:
        return None
    if not before.get(RAW) and not after.get(RAW):
        return [k for k, v in after.items() if k != RAW and before.get(k) != v]
    was = {k: (v, raw) for k, v, raw in image_fields(before)}  # a zero date is null with its text in `_cdc_raw`
    return [k for k, v, raw in image_fields(after) if was.get(k) != (v, raw)]


def _when(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _shown(defs: Definitions, found: history.Found) -> list[tuple[str | None, str | None, str | None]]:
    """Per version, in output order: its changed columns (comma-joined; None for an insert or a delete) and its
    images as JSON text (None for none)."""
    per_part = []
    for part in found.parts:
        part = part.combine_chunks()
        before, after = part["before"].chunk(0), part["after"].chunk(0)
        table = defs.get((part["database"][0].as_py(), part["table"][0].as_py()))
        _, change = history_json.changed_columns(part[Col.TYPE].chunk(0), before, after)
        images = [history_json.image_texts(side, table).to_pylist() for side in (before, after)]
        per_part.append(list(zip(change.to_pylist(), *images, strict=True)))
    return found.in_order(per_part)


def terminal(defs: Definitions, found: history.Found, *, tables: bool) -> str:
    """A plain-text table, one version per line (`tables`: with a table column, for a listing across tables)."""
    head = ["time (UTC)", "type", *(["table"] if tables else []), "pk", "gtid", "position", "thread", "xid"]
    head += ["changed", "before", "after"]
    lines = [head]
    meta = found.in_order([p.drop_columns(["before", "after"]).to_pylist() for p in found.parts])
    for r, (change, before, after) in zip(meta, _shown(defs, found), strict=True):
        lines.append(
            [
                _when(r[Col.TS]),
                r[Col.TYPE],
                *([f"{r['database']}.{r['table']}"] if tables else []),
                r[PK] or "",
                r[Col.GTID] or "",
                f"{r[Col.BINLOG_FILE]}:{r[Col.EVENT_POS]}",
                "" if r[Col.THREAD_ID] is None else str(r[Col.THREAD_ID]),
                "" if r[Col.XID] is None else str(r[Col.XID]),
                change or "",
                before or "",
                after or "",
            ]
        )
    return _aligned(lines) + f"\n({len(meta)} version{'s' if len(meta) != 1 else ''})\n"


def _aligned(lines: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _csv_cell(text: str | None) -> str:
    return "" if text is None else '"' + text.replace('"', '""') + '"'


def _image_names(rows: list[dict[str, Any]], side: str) -> list[str]:
    names: dict[str, None] = {}
    for r in rows:
        for k, _, _ in image_fields(r.get(side)):
            names.setdefault(k)
    return list(names)


def _cells(defs: Definitions, row: Mapping[str, Any], sides: list[tuple[str, list[str]]]) -> list[str | None]:
    """The row's image values under the CSV's columns (`sides`: each image's column names), as text."""
    columns = _columns(defs, row)
    out: list[str | None] = []
    for side, names in sides:
        fields = {k: (v, raw) for k, v, raw in image_fields(row.get(side))}
        for name in names:
            v, raw = fields.get(name, (None, None))
            out.append(None if v is None and raw is None else text_value(v, columns.get(name), raw))
    return out


def csv(defs: Definitions, found: history.Found) -> str:
    rows = found.rows()
    meta = ["time", "type", "database", "table", "pk", "gtid", "binlog_file", "event_pos", "thread_id", "xid"]
    meta += ["changed"]
    sides = [(side, _image_names(rows, side)) for side in ("before", "after")]
    header = meta + [f"{side}.{n}" for side, names in sides for n in names]
    out = [",".join(_csv_cell(h) for h in header)]
    for r, (change, _, _) in zip(rows, _shown(defs, found), strict=True):
        cells = [
            _when(r[Col.TS]),
            r[Col.TYPE],
            r["database"],
            r["table"],
            r[PK],
            r[Col.GTID],
            r[Col.BINLOG_FILE],
            str(r[Col.EVENT_POS]),
            None if r[Col.THREAD_ID] is None else str(r[Col.THREAD_ID]),
            None if r[Col.XID] is None else str(r[Col.XID]),
            change,
        ]
        cells += _cells(defs, r, sides)
        out.append(",".join(_csv_cell(c) for c in cells))
    return "\n".join(out) + "\n"


def render(fmt: str, defs: Definitions, found: history.Found, *, tables: bool = False) -> str:
    if fmt == "json":
        return b"".join(history_json.json_lines(defs, found)).decode()
    if fmt == "csv":
        return csv(defs, found)
    return terminal(defs, found, tables=tables)


def rows_render(fmt: str, table: TableDef | None, images: pa.Array, where: tuple[str, str]) -> str:
    """Rows (as_of: images) in `fmt`: JSON lines of Maxwell-form objects, CSV or a terminal table."""
    if fmt == "json":
        texts = history_json.image_texts(images, table).to_pylist()
        return "".join(t + "\n" for t in texts if t is not None)
    defs = {where: table}
    keyed = [{"database": where[0], "table": where[1], "after": r} for r in images.to_pylist()]
    names = _image_names(keyed, "after")
    cells = [_cells(defs, r, [("after", names)]) for r in keyed]
    if fmt == "csv":
        lines = [",".join(_csv_cell(n) for n in names)] + [",".join(_csv_cell(c) for c in line) for line in cells]
        return "\n".join(lines) + "\n"
    text = [names] + [["NULL" if c is None else c for c in line] for line in cells]
    return (_aligned(text) if names else "") + f"\n({len(keyed)} row{'s' if len(keyed) != 1 else ''})\n"
