"""Versions (history.select) and rows (as_of) as a terminal table, JSON lines or CSV.

JSON lines: one object per version, images in Maxwell's forms (history_values.json_value). CSV: a header, one
line per version, one column per image field (`before.<col>`, `after.<col>`) as the mysql client prints values;
every value quoted, NULL an empty unquoted field (so NULL and '' differ).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import ColumnDef, TableDef

from mysqlcapture_compaction import history
from mysqlcapture_compaction.history_values import column_json, json_renderer, json_value, text_value
from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.transforms import PK

FORMATS = ("table", "json", "csv")
Definitions = Mapping[tuple[str, str], TableDef | None]


def _column(defs: Definitions, row: Mapping[str, Any], name: str) -> ColumnDef | None:
    found = defs.get((row["database"], row["table"]))
    return next((c for c in found.columns if c.name == name), None) if found is not None else None


_RENDERERS: dict[int, tuple[TableDef, dict[str, Callable[[Any], Any]]]] = {}


def _renderers(defs: Definitions, row: Mapping[str, Any]) -> dict[str, Callable[[Any], Any]]:
    """Each column's --format json renderer of the row's table (history_values.json_renderer), made once per
    definition (the cache holds the definition, so its id cannot be another's)."""
    table = defs.get((row["database"], row["table"]))
    if table is None:
        return {}
    found = _RENDERERS.get(id(table))
    if found is None or found[0] is not table:
        found = (table, {c.name: json_renderer(c) for c in table.columns})
        _RENDERERS[id(table)] = found
    return found[1]


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


def _image_json(defs: Definitions, row: Mapping[str, Any], side: str) -> dict[str, Any] | None:
    image = row.get(side)
    if image is None:
        return None
    renderers = _renderers(defs, row)
    raw = image.get(RAW)
    raws = dict(raw) if isinstance(raw, list) else (raw or {})
    out: dict[str, Any] = {}
    for k, v in image.items():
        if k == RAW:
            continue
        if k in raws:  # a value no Spark type holds (a zero date): its exact text
            out[k] = raws[k]
        elif v is None:
            out[k] = None
        else:
            render = renderers.get(k)
            out[k] = render(v) if render is not None else json_value(v, None)
    return out


def version_json(defs: Definitions, row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "database": row["database"],
        "table": row["table"],
        "type": row[Col.TYPE],
        "ts": row[Col.TS],
        "time": _when(row[Col.TS]),
        "order_key": row[Col.ORDER_KEY],
        "gtid": row[Col.GTID],
        "position": f"{row[Col.BINLOG_FILE]}:{row[Col.EVENT_POS]}",
        "thread_id": row[Col.THREAD_ID],
        "xid": row[Col.XID],
        "pk": orjson.Fragment(row[PK]) if row[PK] is not None else None,
        "changed": changed(row),
        "before": _image_json(defs, row, "before"),
        "after": _image_json(defs, row, "after"),
    }


def json_lines(defs: Definitions, rows: list[dict[str, Any]]) -> str:
    return "".join(orjson.dumps(version_json(defs, r)).decode() + "\n" for r in rows)


@dataclass
class _Side:
    """One image column of some versions, column by column: typed values, `_cdc_raw` texts, JSON forms."""

    valid: list[bool]
    typed: dict[str, pa.Array]
    raws: list[dict[str, str]]
    shown: list[dict[str, Any] | None]


def _side(images: pa.ChunkedArray, table: TableDef | None) -> _Side:
    array = images.combine_chunks()
    assert isinstance(array, pa.StructArray)
    n = len(array)
    valid = array.is_valid().to_pylist()
    columns = {c.name: c for c in table.columns} if table is not None else {}
    typed: dict[str, pa.Array] = {}
    shown_cols: dict[str, list[Any]] = {}
    raws: list[dict[str, str]] = [{}] * n
    for i, f in enumerate(array.type):
        field = array.field(i)
        if f.name == RAW:
            raws = [dict(v) if v else {} for v in field.to_pylist()]
            continue
        typed[f.name] = field
        shown_cols[f.name] = column_json(field, columns.get(f.name))
    names = list(typed)
    rows = zip(*(shown_cols[name] for name in names), strict=True) if names else iter([()] * n)
    shown: list[dict[str, Any] | None] = [
        dict(zip(names, values, strict=True)) if ok else None for ok, values in zip(valid, rows, strict=True)
    ]
    for raw, row in zip(raws, shown, strict=True):
        if raw and row is not None:
            row.update(raw)  # a value no Spark type holds (a zero date): its exact text
    return _Side(valid, typed, raws, shown)


def _changes(kinds: pa.ChunkedArray, before: _Side, after: _Side) -> list[list[str] | None]:
    """Per version: the columns an update changed (value or `_cdc_raw` text), compared column by column in Arrow
    and joined into one text per version."""
    marks = []
    for name, values in after.typed.items():
        old = before.typed.get(name)
        differs = (
            pa.chunked_array([pa.array([True] * len(values))])
            if old is None
            else history.differ(pa.chunked_array([old]), pa.chunked_array([values]))
        )
        marks.append(pc.if_else(differs, name + "\x00", ""))
    if not marks:
        return [None] * len(kinds)
    joined = pc.binary_join_element_wise(*marks, "").to_pylist() if len(marks) > 1 else marks[0].to_pylist()
    updates = pc.and_(pc.equal(kinds, "update"), pc.and_(pa.array(before.valid), pa.array(after.valid)))
    out: list[list[str] | None] = []
    for r, update in enumerate(updates.to_pylist()):
        if not update:
            out.append(None)
            continue
        names = joined[r].split("\x00")[:-1]
        was, now = before.raws[r], after.raws[r]
        if was or now:  # a zero date: null, with its text in `_cdc_raw`
            names += [n for n in after.typed if n not in names and was.get(n) != now.get(n)]
            names.sort(key=list(after.typed).index)
        out.append(names)
    return out


def json_table(defs: Definitions, found: pa.Table) -> str:
    """JSON lines of versions (history.select's table), rendered column by column (version_json's objects)."""
    n = found.num_rows
    if n == 0:
        return ""
    meta = {c: found[c].to_pylist() for c in ("database", "table", *_META)}
    times = pc.strftime(found[Col.TS].cast(pa.timestamp("s")), format="%Y-%m-%d %H:%M:%S").to_pylist()
    befores: list[dict[str, Any] | None] = [None] * n
    afters: list[dict[str, Any] | None] = [None] * n
    changes: list[list[str] | None] = [None] * n
    places = sorted(set(zip(meta["database"], meta["table"], strict=True)))
    for place in places:
        rows = (
            list(range(n))
            if len(places) == 1
            else [i for i, p in enumerate(zip(meta["database"], meta["table"], strict=True)) if p == place]
        )
        part = found if len(places) == 1 else found.take(rows)
        table = defs.get(place)
        before, after = _side(part["before"], table), _side(part["after"], table)
        found_changes = _changes(part[Col.TYPE], before, after)
        for j, i in enumerate(rows):
            befores[i], afters[i], changes[i] = before.shown[j], after.shown[j], found_changes[j]
    out = []
    for i in range(n):
        ts, pk = meta[Col.TS][i], meta[PK][i]
        out.append(
            orjson.dumps(
                {
                    "database": meta["database"][i],
                    "table": meta["table"][i],
                    "type": meta[Col.TYPE][i],
                    "ts": ts,
                    "time": times[i],
                    "order_key": meta[Col.ORDER_KEY][i],
                    "gtid": meta[Col.GTID][i],
                    "position": f"{meta[Col.BINLOG_FILE][i]}:{meta[Col.EVENT_POS][i]}",
                    "thread_id": meta[Col.THREAD_ID][i],
                    "xid": meta[Col.XID][i],
                    "pk": orjson.Fragment(pk) if pk is not None else None,
                    "changed": changes[i],
                    "before": befores[i],
                    "after": afters[i],
                }
            ).decode()
        )
    return "\n".join(out) + "\n"


_META = (Col.TYPE, Col.TS, Col.ORDER_KEY, Col.GTID, Col.BINLOG_FILE, Col.EVENT_POS, Col.THREAD_ID, Col.XID, PK)


def _image_text(defs: Definitions, row: Mapping[str, Any], side: str) -> str:
    shown = _image_json(defs, row, side)
    return "" if shown is None else orjson.dumps(shown).decode()


def terminal(defs: Definitions, rows: list[dict[str, Any]], *, tables: bool) -> str:
    """A plain-text table, one version per line (`tables`: with a table column, for a listing across tables)."""
    head = ["time (UTC)", "type", *(["table"] if tables else []), "pk", "gtid", "position", "thread", "xid"]
    head += ["changed", "before", "after"]
    lines = [head]
    for r in rows:
        change = changed(r)
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
                ",".join(change) if change is not None else "",
                _image_text(defs, r, "before"),
                _image_text(defs, r, "after"),
            ]
        )
    return _aligned(lines) + f"\n({len(rows)} version{'s' if len(rows) != 1 else ''})\n"


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


def _cell(defs: Definitions, row: Mapping[str, Any], side: str, name: str) -> str | None:
    image = row.get(side)
    if image is None:
        return None
    for k, v, raw in image_fields(image):
        if k == name:
            return None if v is None and raw is None else text_value(v, _column(defs, row, k), raw)
    return None


def csv(defs: Definitions, rows: list[dict[str, Any]]) -> str:
    meta = ["time", "type", "database", "table", "pk", "gtid", "binlog_file", "event_pos", "thread_id", "xid"]
    meta += ["changed"]
    sides = [(side, _image_names(rows, side)) for side in ("before", "after")]
    header = meta + [f"{side}.{n}" for side, names in sides for n in names]
    out = [",".join(_csv_cell(h) for h in header)]
    for r in rows:
        change = changed(r)
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
            ",".join(change) if change is not None else None,
        ]
        cells += [_cell(defs, r, side, n) for side, names in sides for n in names]
        out.append(",".join(_csv_cell(c) for c in cells))
    return "\n".join(out) + "\n"


def render(fmt: str, defs: Definitions, rows: list[dict[str, Any]], *, tables: bool = False) -> str:
    if fmt == "json":
        return json_lines(defs, rows)
    if fmt == "csv":
        return csv(defs, rows)
    return terminal(defs, rows, tables=tables)


def rows_render(fmt: str, table: TableDef | None, rows: list[dict[str, Any]], where: tuple[str, str]) -> str:
    """Rows (as_of: images) in `fmt`: JSON lines of Maxwell-form objects, CSV or a terminal table."""
    defs = {where: table}
    keyed = [{"database": where[0], "table": where[1], "after": r} for r in rows]
    if fmt == "json":
        return "".join(orjson.dumps(_image_json(defs, r, "after")).decode() + "\n" for r in keyed)
    names = _image_names(keyed, "after")
    cells = [[_cell(defs, r, "after", n) for n in names] for r in keyed]
    if fmt == "csv":
        lines = [",".join(_csv_cell(n) for n in names)] + [",".join(_csv_cell(c) for c in line) for line in cells]
        return "\n".join(lines) + "\n"
    text = [names] + [["NULL" if c is None else c for c in line] for line in cells]
    return (_aligned(text) if names else "") + f"\n({len(rows)} row{'s' if len(rows) != 1 else ''})\n"
