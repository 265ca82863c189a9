"""Maxwell's JSON line for a change event, field for field as Maxwell 1.44 writes it.

Which fields a line has follows Maxwell's output options (`spec.sink.jsonl`, named as Maxwell's flags, with
Maxwell's defaults); their order is Maxwell's `RowMap.toJSON` (rows) and `DDLMap.toJSON` (DDL). Values were
rendered once, at decode time, in Maxwell's text (mysqlcapture_api/javatext.py); envelope strings are escaped here as
Jackson escapes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import orjson
from mysqlcapture_api.javatext import jackson_string, jackson_writer_string
from mysqlcapture_api.sinks import MaxwellOutput

from mysqlcapture_worker.changes import DATA, OLD, PRIMARY_KEY, ChangeEvent, Event, RowBatch

if TYPE_CHECKING:
    from mysqlcapture_native import BatchPlan, KafkaRoute, Messages, OwnedBuffer

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


def _without_nulls(obj: str, documents: str | None = None) -> bytes:
    """A rendered object without its null members (output_nulls: false), other values kept as written; the JSON
    document null of a JSON column (`documents`: the event's json_null or old_json_null) is a value, and Maxwell
    keeps it."""
    kept_nulls = frozenset(orjson.loads(documents)) if documents else frozenset()
    kept = [(k, v) for k, v in raw_members(obj) if v != "null" or k in kept_nulls]
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
    # A table without a primary key: empty arrays, as Maxwell writes them.
    if out.output_primary_keys:
        parts += [b',"primary_key":', e.pk_json.encode() if e.pk_json is not None else b"[]"]
    if out.output_primary_key_columns:
        parts += [b',"primary_key_columns":', orjson.dumps(list(e.pk_columns) if e.pk_json is not None else [])]
    data = e.data_json or "{}"
    parts += [b',"data":', data.encode() if out.output_nulls else _without_nulls(data, e.json_null)]
    if e.old_json is not None and e.old_json != "{}":
        old = e.old_json.encode() if out.output_nulls else _without_nulls(e.old_json, e.old_json_null)
        parts += [b',"old":', old]
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


def _head(b: RowBatch, out: MaxwellOutput) -> bytes:
    parts = [b'{"database":', _string(b.database), b',"table":', _string(b.table or ""), b',"type":', _string(b.type)]
    parts += [b',"ts":', str(b.ts).encode()]
    if out.output_commit_info and b.xid is not None:
        parts += [b',"xid":', str(b.xid).encode()]
    return b"".join(parts)


def _middle(b: RowBatch, out: MaxwellOutput) -> bytes:
    parts = _position(b, out, _string)
    if out.output_server_id:
        parts += [b',"server_id":', str(b.server_id).encode()]
    if out.output_thread_id and b.thread_id is not None:
        parts += [b',"thread_id":', str(b.thread_id).encode()]
    return b"".join(parts)


def _plan(b: RowBatch, out: MaxwellOutput, route: KafkaRoute | None = None) -> BatchPlan:
    """What the compiled renderer (`mysqlcapture_native.maxwell_rows`) needs to write `b`'s rows as `row_line`
    does: the fields its rows share, rendered once, and its columns."""
    commit_info = out.output_commit_info
    xoffset = (b.row_index, b.row_step) if commit_info and out.output_xoffset and b.xid is not None else None
    columns = (
        b',"primary_key_columns":' + orjson.dumps(list(b.pk_columns) if b.keyed else [])
        if out.output_primary_key_columns
        else None
    )
    order_key = (b.order_key, 1 if b.order_key else 0) if out.output_order_key else None
    data = b.texts.parts(DATA)
    assert data is not None
    return (
        _head(b, out),
        _middle(b, out),
        out.output_primary_keys,
        columns,
        xoffset,
        commit_info and b.commit,
        order_key,
        data,
        b.texts.parts(OLD),
        b.texts.parts(PRIMARY_KEY),
        route,
    )


# Row batches come from the compiled path only: where they exist, so does its renderer (imported where used).


def _batch_lines(run: Sequence[RowBatch], out: MaxwellOutput) -> OwnedBuffer:
    from mysqlcapture_native import maxwell_rows

    return maxwell_rows([_plan(b, out) for b in run])


def batch_messages(run: Sequence[tuple[RowBatch, KafkaRoute]], out: MaxwellOutput, *, murmur: bool) -> Messages:
    """Consecutive batches' Kafka messages, each batch with its route (`Router.batch_route` and its topic's
    group), grouped by topic and partition: `mysqlcapture_native.maxwell_rows`."""
    from mysqlcapture_native import maxwell_rows

    return maxwell_rows([_plan(b, out, route) for b, route in run], messages=True, murmur=murmur)


def lines(events: Sequence[Event], out: MaxwellOutput) -> bytes:
    """Every event's line (each with its line end), in order."""
    return b"".join(line_parts(events, out))


def line_parts(events: Sequence[Event], out: MaxwellOutput) -> list[bytes | OwnedBuffer]:
    """Every event's line (each with its line end), in order, in pieces to write one after the other (a run's
    lines in one buffer, not copied): runs of row batches by the compiled renderer (row by row under
    `output_nulls: false`, which rewrites each object), other events one by one."""
    parts: list[bytes | OwnedBuffer] = []
    run: list[RowBatch] = []
    for e in events:
        if type(e) is RowBatch and out.output_nulls:
            run.append(e)
            continue
        if run:
            parts.append(_batch_lines(run, out))
            run = []
        for one in e.events() if type(e) is RowBatch else [e]:
            assert isinstance(one, ChangeEvent)
            line = maxwell_line(one, out)
            if line is not None:
                parts.append(line + b"\n")
    if run:
        parts.append(_batch_lines(run, out))
    return parts
