"""Versions and images as JSON text, rendered column by column in Arrow: a busy table's hour is hundreds of
thousands of versions, and a value at a time in Python costs most of the answer.

Every value has history_values.json_renderer's form, which stays the reference: the types Arrow formats exactly
(integers, strings, DECIMAL, DATE, DATETIME/TIMESTAMP with their fraction digits, DOUBLEs in Java's plain range,
SETs) are formatted here, the rest by json_renderer one value at a time; the tests hold the two to each other.
Strings are escaped as orjson escapes them (`"`, `\\` and control characters).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from mysqlcapture_api.arrowtext import utf8_bytes
from mysqlcapture_api.changelog import Col
from mysqlcapture_api.schema.model import ColumnDef, TableDef

from mysqlcapture_compaction import history
from mysqlcapture_compaction.history_values import json_renderer, shown_as_is
from mysqlcapture_compaction.images import RAW
from mysqlcapture_compaction.transforms import PK

Definitions = Mapping[tuple[str, str], TableDef | None]
NULL = "null"
_CONTROL = r"[\x00-\x1f]"


def _one_by_one(values: pa.Array, col: ColumnDef | None) -> pa.Array:
    render = json_renderer(col)
    return pa.array([None if v is None else orjson.dumps(render(v)).decode() for v in values.to_pylist()], pa.string())


def quoted(texts: pa.Array) -> pa.Array:
    """JSON strings of a string array (nulls stay null)."""
    if pc.any(pc.match_substring_regex(texts, _CONTROL)).as_py():
        return pa.array([None if v is None else orjson.dumps(v).decode() for v in texts.to_pylist()], pa.string())
    escaped = pc.replace_substring(pc.replace_substring(texts, "\\", "\\\\"), '"', '\\"')
    return pc.binary_join_element_wise('"', escaped, '"', "")


def _doubles(values: pa.Array) -> pa.Array:
    """Java's Double.toString: Arrow's shortest text has Java's digits in its plain range [10^-3, 10^7) and at
    zero (".0" added to a whole number); the others one by one."""
    size = pc.abs(values)
    plain = pc.or_(pc.and_(pc.greater_equal(size, 1e-3), pc.less(size, 1e7)), pc.equal(size, 0.0))
    text = values.cast(pa.string())
    text = pc.if_else(pc.match_substring(text, "."), text, pc.binary_join_element_wise(text, ".0", ""))
    others = pc.invert(pc.fill_null(plain, True))
    if pc.any(others).as_py():
        text = pc.replace_with_mask(text, others, _one_by_one(values.filter(others), ColumnDef("", "double")))
    return text


def _members(values: pa.ListArray) -> pa.Array:
    """A SET (a list of strings) as a JSON array of strings."""
    offsets = values.offsets
    first = offsets[0].as_py()
    inner = values.values.slice(first, offsets[len(offsets) - 1].as_py() - first)
    if inner.null_count:
        return _one_by_one(values, None)
    from_zero = pc.subtract(offsets, pa.scalar(first, offsets.type))
    each = pa.ListArray.from_arrays(from_zero, quoted(inner), mask=values.is_null())
    return pc.binary_join_element_wise("[", pc.binary_join(each, ","), "]", "")


def value_texts(values: pa.Array, col: ColumnDef | None) -> pa.Array:
    """Each value's --format json text (json_renderer's form), null for a null value."""
    kind = values.type
    declared = col.type if col is not None else None
    if pa.types.is_null(kind):
        return pa.nulls(len(values), pa.string())
    if pa.types.is_decimal(kind):  # Arrow's decimal text is BigDecimal.toString's ("1.0E-7", "0E-10")
        return values.cast(pa.string())
    if pa.types.is_date32(kind):
        return quoted(values.cast(pa.string()))
    if pa.types.is_timestamp(kind) and col is not None:
        fsp = col.column_length or 0
        assert isinstance(kind, pa.TimestampType)
        text = values.cast(pa.timestamp("us", kind.tz)).cast(pa.string())  # "YYYY-MM-DD HH:MM:SS.ffffff[Z]" (UTC)
        return quoted(pc.utf8_slice_codeunits(text, 0, 20 + fsp if fsp else 19))
    if kind == pa.float64() and declared in ("double", None):
        return _doubles(values)
    if declared == "json" and pa.types.is_string(kind):
        return values  # the document itself
    if col is not None and not shown_as_is(col):
        return _one_by_one(values, col)
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return values.cast(pa.string())
    if pa.types.is_string(kind):
        return quoted(values)
    if isinstance(values, pa.ListArray) and pa.types.is_string(kind.value_type):
        return _members(values)
    return _one_by_one(values, col)


def _key(name: str) -> str:
    return orjson.dumps(name).decode() + ":"


def _entries(maps: pa.Array) -> int:
    """The number of key-value pairs in a map array."""
    assert isinstance(maps, pa.MapArray)
    offsets = maps.offsets
    return int(offsets[len(offsets) - 1].as_py() - offsets[0].as_py()) if len(maps) else 0


def image_texts(images: pa.Array, table: TableDef | None) -> pa.Array:
    """Each image's JSON object, null for no image. A value no Spark type holds (null, its exact text in
    `_cdc_raw`: a zero date) is shown as that text."""
    assert isinstance(images, pa.StructArray)
    kind = images.type
    assert isinstance(kind, pa.StructType)
    columns = {c.name: c for c in table.columns} if table is not None else {}
    raws = images.field(RAW) if kind.get_field_index(RAW) >= 0 else None
    if raws is not None and _entries(raws) == 0:
        raws = None
    pieces: list[pa.Array | str] = []
    for i, name in enumerate(f.name for f in kind if f.name != RAW):
        text = value_texts(images.field(name), columns.get(name))
        if raws is not None:
            exact = pc.map_lookup(raws, pa.scalar(name), "first")
            text = pc.if_else(pc.is_valid(exact), quoted(exact), text)
        pieces += [("{" if i == 0 else ",") + _key(name), pc.fill_null(text, NULL)]
    if not pieces:
        return pc.if_else(images.is_valid(), "{}", pa.nulls(len(images), pa.string()))
    pieces.append("}")
    whole = pc.binary_join_element_wise(*pieces, "")
    return pc.if_else(images.is_valid(), whole, pa.nulls(len(images), pa.string()))


def changed_columns(kinds: pa.Array, before: pa.Array, after: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Per version: the columns an update changed (by value or `_cdc_raw` text), in the after image's order, as a
    JSON array and as comma-joined text; null for an insert or a delete (they set or remove every column)."""
    assert isinstance(before, pa.StructArray) and isinstance(after, pa.StructArray)
    old_kind, new_kind = before.type, after.type
    assert isinstance(old_kind, pa.StructType) and isinstance(new_kind, pa.StructType)
    raw_old = before.field(RAW) if old_kind.get_field_index(RAW) >= 0 else None
    raw_new = after.field(RAW) if new_kind.get_field_index(RAW) >= 0 else None
    as_json: list[pa.Array | str] = []
    as_text: list[pa.Array | str] = []
    for f in new_kind:
        if f.name == RAW:
            continue
        at = old_kind.get_field_index(f.name)
        if at < 0:
            differs = pa.array([True] * len(after))
        else:
            differs = history.differ(pa.chunked_array([before.field(at)]), pa.chunked_array([after.field(f.name)]))
            if raw_old is not None and raw_new is not None:
                texts = [pa.chunked_array([pc.map_lookup(m, pa.scalar(f.name), "first")]) for m in (raw_old, raw_new)]
                differs = pc.or_(differs, history.differ(*texts))
        as_json.append(pc.if_else(differs, "," + orjson.dumps(f.name).decode(), ""))
        as_text.append(pc.if_else(differs, "," + f.name, ""))
    updates = pc.and_(pc.equal(kinds, "update"), pc.and_(before.is_valid(), after.is_valid()))
    nothing = pa.nulls(len(after), pa.string())
    if not as_json:
        return pc.if_else(updates, "[]", nothing), pc.if_else(updates, "", nothing)
    joined_json = pc.utf8_slice_codeunits(pc.binary_join_element_wise(*as_json, ""), 1)
    joined_text = pc.utf8_slice_codeunits(pc.binary_join_element_wise(*as_text, ""), 1)
    listed = pc.binary_join_element_wise("[", joined_json, "]", "")
    return pc.if_else(updates, listed, nothing), pc.if_else(updates, joined_text, nothing)


def _when(ts: pa.Array) -> pa.Array:
    return ts.cast(pa.timestamp("s")).cast(pa.string())


def _number(values: pa.Array) -> pa.Array:
    return pc.fill_null(values.cast(pa.string()), NULL)


def _string(values: pa.Array) -> pa.Array:
    return pc.fill_null(quoted(values.cast(pa.string())), NULL)


def version_lines(defs: Definitions, part: pa.Table) -> pa.Array:
    """One table's versions (a part of history.select's) as JSON lines, each with its line end."""
    part = part.combine_chunks()
    if part.num_rows == 0:
        return pa.array([], pa.string())
    column = {name: part[name].chunk(0) for name in part.column_names}
    table = defs.get((column["database"][0].as_py(), column["table"][0].as_py()))
    before, after = column["before"], column["after"]
    as_json, _ = changed_columns(column[Col.TYPE], before, after)
    position = pc.binary_join_element_wise(column[Col.BINLOG_FILE], column[Col.EVENT_POS].cast(pa.string()), ":")
    pieces: list[pa.Array | str] = [
        '{"database":',
        _string(column["database"]),
        ',"table":',
        _string(column["table"]),
        ',"type":',
        _string(column[Col.TYPE]),
        ',"ts":',
        _number(column[Col.TS]),
        ',"time":',
        _string(_when(column[Col.TS])),
        ',"order_key":',
        _number(column[Col.ORDER_KEY]),
        ',"gtid":',
        _string(column[Col.GTID]),
        ',"position":',
        _string(position),
        ',"thread_id":',
        _number(column[Col.THREAD_ID]),
        ',"xid":',
        _number(column[Col.XID]),
        ',"pk":',
        pc.fill_null(column[PK], NULL),
        ',"changed":',
        pc.fill_null(as_json, NULL),
        ',"before":',
        pc.fill_null(image_texts(before, table), NULL),
        ',"after":',
        pc.fill_null(image_texts(after, table), NULL),
        "}\n",
    ]
    return pc.binary_join_element_wise(*pieces, "")


# Versions rendered at a time: bounds the memory of a long window (and a string array's 2 GiB).
BATCH = 65_536


def json_lines(defs: Definitions, found: history.Found) -> Iterator[bytes]:
    """Versions as JSON lines (UTF-8, a batch at a time): database, table, type, ts, time, order_key, gtid,
    position, thread_id, xid, pk, changed, and both images in Maxwell's forms."""
    if found.order is None:
        for part in found.parts:
            for start in range(0, part.num_rows, BATCH):
                yield utf8_bytes(version_lines(defs, part.slice(start, BATCH)))
        return
    texts = found.in_order([version_lines(defs, p).to_pylist() for p in found.parts])
    for start in range(0, len(texts), BATCH):
        yield "".join(texts[start : start + BATCH]).encode()
