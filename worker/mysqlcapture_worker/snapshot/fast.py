"""The snapshot's compiled path: a chunk's result set, off the wire, to Arrow `data`/key/hash columns.

The chunk's plain `SELECT` (one column per table column, `compile_row_converter(pack=False)`) is sent
on the view's connection and its bytes go to `mysqlcapture_native.ResultReader` as they arrive
(`snapshot.wire`): Rust walks the text-protocol packets and renders every row to the same JSON text
as the reference converters plus `render()`, with no Python object per row. It covers every column
type: JSON, the spatial types, VECTOR and multi-byte charsets are blob columns, rendered in Rust with
the column's reference converter as the fallback for values Rust leaves alone.
`MYSQLCAPTURE_DECODER=reference` selects the reference path for every table. The type-fidelity corpus
runs through both and compares their `data` with the binlog path's byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from mysqlcapture_api.schema.model import INTEGER_TYPES, ColumnDef, TableDef
from mysqlcapture_api.schema.types import GEOMETRY_TYPES

from mysqlcapture_worker.charsets import text_decoder, utf8_decode
from mysqlcapture_worker.decode.mysql_json import json_text_fragment
from mysqlcapture_worker.decode.native import (
    _SINGLE_BYTE,
    B_JSON_REPARSE,
    B_JSON_TEXT,
    Fallback,
    _byte_table,
    _json,
    blob_column,
    fast_path_enabled,
    json_text_of,
)
from mysqlcapture_worker.snapshot.text_values import _TEMPORAL, RowConverter, _is_binary

if TYPE_CHECKING:
    import mysqlcapture_native

ResultReader: type[mysqlcapture_native.ResultReader] | None
TextRenderer: type[mysqlcapture_native.TextRenderer] | None
try:
    from mysqlcapture_native import ResultReader, TextRenderer
except ImportError:  # not built (or an older build): the reference path
    ResultReader = TextRenderer = None

# Text column kinds, as worker/native/src/text.rs numbers them.
(T_INT, T_VERBATIM, T_DOUBLE, T_BIT1, T_QUOTED, T_UTF8, T_BYTE_TABLE, T_BASE64, T_SET_UTF8, T_SET_BYTE_TABLE,
 T_BITS, T_FLOAT) = range(12)  # fmt: skip
T_BLOB = 16  # + a blob kind (native.B_*)
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"})

TextColumn = tuple[int, list[str]]
Rendered = tuple[pa.StringArray, pa.StringArray | None, pa.StringArray | None, pa.StringArray | None]
"""A chunk's rows: data, primary key, its hash, the JSON null documents' columns (Col.JSON_NULL)."""
if TYPE_CHECKING:
    # `ResultReader.take()`: rows, then data, primary key and hash as Arrow string buffers (values, int32 offsets),
    # then the JSON null documents' columns (values, offsets, validity).
    Strings = mysqlcapture_native.ArrowStrings
    Taken = tuple[int, Strings, Strings | None, Strings | None, mysqlcapture_native.NullableStrings | None]


def text_column(table: TableDef, col: ColumnDef, convert: Callable[[bytes], Any]) -> tuple[TextColumn, Fallback] | None:
    """((kind, members), fallback) for one column's raw value, mirroring `text_values.column_converter` (whose
    converter, `convert`, is a blob column's fallback); None: reference only."""
    t = col.type
    blob_type = "json" if t == "json" else "vector" if t == "vector" else "geometry" if t in GEOMETRY_TYPES else None
    if blob_type is not None:
        found = blob_column(blob_type, None, binary_json=False)
        assert found is not None
        kind = found[0]
        if kind == B_JSON_TEXT and convert is not json_text_fragment:
            kind = B_JSON_REPARSE  # a MySQL snapshot: the server's text of its binary JSON
        return (T_BLOB + kind, found[1]), json_text_of(convert)
    fixed = _fixed_text_column(table, col)
    if fixed is not None:
        return fixed, None
    if _is_binary(col) or t not in _TEXT_TYPES:
        return None
    found = blob_column("text", col.charset or table.charset, binary_json=False)
    if found is None:
        return None
    return (T_BLOB + found[0], found[1]), json_text_of(convert)


def _fixed_text_column(table: TableDef, col: ColumnDef) -> TextColumn | None:
    t = col.type
    if t in INTEGER_TYPES or t == "year":
        return (T_INT, [])
    if t == "decimal":
        return (T_VERBATIM, [])
    if t == "double":
        return (T_DOUBLE, [])
    if t == "float":
        return (T_FLOAT, [])  # selected as DOUBLE (exact), narrowed back to float32 as the binlog path reads it
    if t == "bit":
        return (T_BITS, [])  # BIT(1) too: 0 or 1, as Maxwell prints it
    if t in _TEMPORAL:
        return (T_QUOTED, [])
    if _is_binary(col):
        return (T_BASE64, [])
    if t not in _TEXT_TYPES and t != "set":
        return None
    charset = col.charset or table.charset
    decode = text_decoder(charset)
    if decode is utf8_decode:
        return (T_SET_UTF8 if t == "set" else T_UTF8, [])
    if decode is not None and charset in _SINGLE_BYTE:
        return (T_SET_BYTE_TABLE if t == "set" else T_BYTE_TABLE, _byte_table(decode))
    return None


def text_renderer(
    converter: RowConverter,
    pk_names: tuple[str, ...],
    redactor: mysqlcapture_native.Redactor | None = None,
    *,
    key_hashes: bool = True,
) -> mysqlcapture_native.TextRenderer | None:
    """A TextRenderer for the table's chunks (read unpacked; each column written under `redactor`'s rules,
    spec.columns), None when the reference path must convert them. `key_hashes`: as for `native_renderer`."""
    if TextRenderer is None or converter.hexed is not None or not fast_path_enabled():
        return None
    table = converter.table
    cols: list[TextColumn] = []
    fallbacks: list[Fallback] = []
    for col, convert in zip(table.columns, converter.converters, strict=True):
        found = text_column(table, col, convert)
        if found is None:
            return None
        cols.append(found[0])
        fallbacks.append(found[1])
    keys = [_json(name) for name in converter.names]
    pk = [converter.names.index(n) for n in pk_names]
    prefix = f"{table.database}\x00{table.name}\x00".encode() if key_hashes else None
    return TextRenderer(cols, keys, pk, prefix, fallbacks, redactor)


def rendered_columns(taken: Taken) -> tuple[int, Rendered]:
    """`ResultReader.take()`'s buffers as Arrow string arrays: (rows, (data, primary key, hash, json_null))."""
    n, data, pk, hashes, nulls = taken

    def strings(column: Strings | tuple[Any, Any, Any] | None) -> pa.StringArray | None:
        if column is None:
            return None
        values, offsets, *validity = column
        valid = pa.py_buffer(validity[0]) if validity else None
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(values), valid)

    out = strings(data)
    assert out is not None
    return n, (out, strings(pk), strings(hashes), strings(nulls))
