"""Maxwell's JSON line for a change event, field for field as Maxwell 1.44 writes it.

Which fields a line has follows Maxwell's output options (`spec.sink.jsonl`, named as Maxwell's flags, with
Maxwell's defaults); their order is Maxwell's `RowMap.toJSON` (rows) and `DDLMap.toJSON` (DDL). Values were
rendered once, at decode time, in Maxwell's text (mysqlcapture_api/javatext.py); envelope strings are escaped here as
Jackson escapes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from mysqlcapture_api.arrowtext import utf8_bytes
from mysqlcapture_api.javatext import jackson_string, jackson_writer_string
from mysqlcapture_api.sinks import MaxwellOutput

from mysqlcapture_worker.changes import ChangeEvent, Event, RowBatch

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def raw_members(text: str) -> list[tuple[str, str]]:
    """(key, the value's text as written) of each member of a JSON object (one level)."""
    i = 0
    while text[i] in _SPACE:
        i += 1
    if text[i] != "{":
        raise ValueError(f"not a JSON object: {text[:40]!r}")
    i += 1
    out: list[tuple[str, str]] = []
    while True:
        while text[i] in _SPACE + ",":
            i += 1
        if text[i] == "}":
            return out
        key, i = _DECODER.raw_decode(text, i)
        while text[i] in _SPACE + ":":
            i += 1
        _, end = _DECODER.raw_decode(text, i)
        out.append((key, text[i:end]))
        i = end


def _without_nulls(obj: str) -> bytes:
    """A rendered object without its null members (output_nulls: false), other values kept as written."""
    kept = [(k, v) for k, v in raw_members(obj) if v != "null"]
    return b"{" + b",".join(jackson_string(k) + b":" + v.encode() for k, v in kept) + b"}"


def _string(value: str) -> bytes:
    return jackson_string(value)


def _position(e: ChangeEvent | RowBatch, out: MaxwellOutput, string: Callable[[str], bytes]) -> list[bytes]:
    """`position` and `gtid`, as the options ask (rows and DDL alike)."""
    parts = []
    if out.output_binlog_position:
        parts += [b',"position":', string(f"{e.binlog_file}:{e.event_pos}")]
    if out.output_gtid_position and e.gtid:
        parts += [b',"gtid":', string(e.gtid)]
    return parts


def row_line(e: ChangeEvent, out: MaxwellOutput) -> bytes:
    """A row event's line (insert, update, delete, bootstrap-*)."""
    parts = [b'{"database":', _string(e.database), b',"table":', _string(e.table or ""), b',"type":', _string(e.type)]
    parts += [b',"ts":', str(e.ts).encode()]
    if out.output_commit_info:
        if e.xid is not None:
            parts += [b',"xid":', str(e.xid).encode()]
            if out.output_xoffset and not e.commit:
                parts += [b',"xoffset":', str(e.row_index).encode()]
        if e.commit:
            parts.append(b',"commit":true')
    parts += _position(e, out, _string)
    if out.output_server_id:
        parts += [b',"server_id":', str(e.server_id).encode()]
    if out.output_thread_id and e.thread_id is not None:
        parts += [b',"thread_id":', str(e.thread_id).encode()]
    if out.output_primary_keys and e.pk_json is not None:
        parts += [b',"primary_key":', e.pk_json.encode()]
    if out.output_primary_key_columns and e.pk_json is not None:
        parts += [b',"primary_key_columns":', orjson.dumps(list(e.pk_columns))]
    data = e.data_json or "{}"
    parts += [b',"data":', data.encode() if out.output_nulls else _without_nulls(data)]
    if e.old_json is not None and e.old_json != "{}":
        parts += [b',"old":', e.old_json.encode() if out.output_nulls else _without_nulls(e.old_json)]
    if out.output_order_key:
        parts += [b',"_order_key":', str(e.order_key).encode()]
    parts.append(b"}")
    return b"".join(parts)


def ddl_line(e: ChangeEvent, out: MaxwellOutput) -> bytes:
    """A DDL event's line (database-* and table-*), as Maxwell's DDLMap writes it (through an ObjectMapper)."""
    _string = jackson_writer_string
    parts = [b'{"type":', _string(e.type), b',"database":', _string(e.database)]
    if e.table is not None:
        parts += [b',"table":', _string(e.table)]
    if e.type.startswith("database-") and e.data_json is not None:
        charset = orjson.loads(e.data_json).get("charset")
        if charset is not None:
            parts += [b',"charset":', _string(charset)]
    elif e.data_json is not None:
        if e.old_json is not None:
            parts += [b',"old":', e.old_json.encode()]
        parts += [b',"def":', e.data_json.encode()]
    parts += [b',"ts":', str(e.ts * 1000).encode(), b',"sql":', _string(e.sql or "")]
    parts += _position(e, out, _string)
    if out.output_order_key:
        parts += [b',"_order_key":', str(e.order_key).encode()]
    parts.append(b"}")
    return b"".join(parts)


def maxwell_line(e: ChangeEvent, out: MaxwellOutput) -> bytes | None:
    """The event's line, None when the options leave it out (DDL without output_ddl, TRUNCATE without
    output_truncate)."""
    if e.type == "table-truncate":
        return ddl_line(e, out) if out.output_truncate else None
    if e.sql is not None:
        return ddl_line(e, out) if out.output_ddl else None
    return row_line(e, out)


class _Run:
    """Consecutive row batches laid out row by row: what each batch shares, repeated for its rows."""

    def __init__(self, batches: list[RowBatch]) -> None:
        self.batches = batches
        self.sizes = [len(b) for b in batches]
        ends, total = [], 0
        for n in self.sizes:
            total += n
            ends.append(total)
        self.rows = total
        self._ends = pa.array(ends, pa.int64())
        self._index = pa.array(range(total), pa.int64())

    def shared(self, values: list[Any], kind: pa.DataType | None = None) -> pa.Array:
        """One value per batch, repeated for each of its rows (strings unless `kind` says)."""
        typed = pa.array(values, kind or pa.string())
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(self._ends, typed))

    def counting(self, firsts: list[int], steps: list[int]) -> pa.Array:
        """Per row: its batch's first value plus its place in the batch times the batch's step."""
        starts = [end - n for end, n in zip(self._ends.to_pylist(), self.sizes, strict=True)]
        within = pc.subtract(self._index, self.shared(starts, pa.int64()))
        counted = pc.add(self.shared(firsts, pa.int64()), pc.multiply(within, self.shared(steps, pa.int64())))
        return counted.cast(pa.string())

    def texts(self, arrays: list[pa.StringArray | None]) -> pa.Array:
        """Per row: the batch's text (null where a batch has none)."""
        return pa.concat_arrays(
            [a if a is not None else pa.nulls(n, pa.string()) for a, n in zip(arrays, self.sizes, strict=True)]
        )


def _head(b: RowBatch, out: MaxwellOutput) -> str:
    parts = [b'{"database":', _string(b.database), b',"table":', _string(b.table or ""), b',"type":', _string(b.type)]
    parts += [b',"ts":', str(b.ts).encode()]
    if out.output_commit_info and b.xid is not None:
        parts += [b',"xid":', str(b.xid).encode()]
    return b"".join(parts).decode()


def _middle(b: RowBatch, out: MaxwellOutput) -> str:
    parts = _position(b, out, _string)
    if out.output_server_id:
        parts += [b',"server_id":', str(b.server_id).encode()]
    if out.output_thread_id and b.thread_id is not None:
        parts += [b',"thread_id":', str(b.thread_id).encode()]
    return b"".join(parts).decode()


def _run_lines(batches: list[RowBatch], out: MaxwellOutput) -> bytes:
    """Consecutive batches' lines (each with its line end), column by column in Arrow: the bytes `row_line` writes
    for each of their events, without a Python object per row."""
    run = _Run([b for b in batches if len(b)])
    if run.rows == 0:
        return b""
    bs = run.batches
    pieces: list[pa.Array | str] = [run.shared([_head(b, out) for b in bs])]
    if out.output_commit_info:
        ends = pa.array([f for b, n in zip(bs, run.sizes, strict=True) for f in [False] * (n - 1) + [b.commit]])
        if out.output_xoffset:
            offsets = run.counting([b.row_index for b in bs], [b.row_step for b in bs])
            listed = pc.and_(run.shared([b.xid is not None for b in bs], pa.bool_()), pc.invert(ends))
            pieces.append(pc.if_else(listed, pc.binary_join_element_wise(',"xoffset":', offsets, ""), ""))
        pieces.append(pc.if_else(ends, ',"commit":true', ""))
    pieces.append(run.shared([_middle(b, out) for b in bs]))
    keys = run.texts([b.pk_json for b in bs])
    if out.output_primary_keys:
        pieces.append(pc.fill_null(pc.binary_join_element_wise(',"primary_key":', keys, ""), ""))
    if out.output_primary_key_columns:
        columns = [',"primary_key_columns":' + orjson.dumps(list(b.pk_columns)).decode() for b in bs]
        pieces.append(pc.if_else(pc.is_valid(keys), run.shared(columns), ""))
    pieces += [',"data":', pc.fill_null(run.texts([b.data_json for b in bs]), "{}")]
    if any(b.old_json is not None for b in bs):
        old = run.texts([b.old_json for b in bs])
        shown = pc.if_else(pc.equal(old, "{}"), "", pc.binary_join_element_wise(',"old":', old, ""))
        pieces.append(pc.fill_null(shown, ""))
    if out.output_order_key:
        keyed = [b.order_key for b in bs]
        pieces += [',"_order_key":', run.counting(keyed, [1 if k else 0 for k in keyed])]
    pieces.append("}\n")
    return utf8_bytes(pc.binary_join_element_wise(*pieces, ""))


def lines(events: Sequence[Event], out: MaxwellOutput) -> bytes:
    """Every event's line (each with its line end), in order: runs of row batches column by column (row by row
    under `output_nulls: false`, which rewrites each object), other events one by one."""
    parts: list[bytes] = []
    run: list[RowBatch] = []
    for e in events:
        if type(e) is RowBatch and out.output_nulls:
            run.append(e)
            continue
        if run:
            parts.append(_run_lines(run, out))
            run = []
        for one in e.events() if type(e) is RowBatch else [e]:
            assert isinstance(one, ChangeEvent)
            line = maxwell_line(one, out)
            if line is not None:
                parts.append(line + b"\n")
    if run:
        parts.append(_run_lines(run, out))
    return b"".join(parts)
