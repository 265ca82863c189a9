"""The snapshot's compiled path: a packed chunk's text to Arrow `data`/primary-key/hash columns in Rust.

`mysqlcapture_native.TextRenderer` reads the chunk exactly as `convert.compile_row_converter` packs it
(rows joined by newlines, values by commas, `N` for NULL, HEX for strings and bytes) and writes the
same JSON text as the reference converters plus `render()`. It covers every packed column type but
FLOAT; a table with a FLOAT, an unsupported charset or large columns (not packed) stays on the
reference path, which `MYSQLCAPTURE_DECODER=reference` selects for every table. The type-fidelity
corpus runs through both and compares their `data` with the binlog path's byte for byte.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mysqlcapture_worker.decode.charsets import text_decoder, utf8_decode
from mysqlcapture_worker.decode.native import _SINGLE_BYTE, _byte_table, _json, fast_path_enabled
from mysqlcapture_worker.schema.model import INTEGER_TYPES, ColumnDef, TableDef
from mysqlcapture_worker.snapshot.convert import _TEMPORAL, RowConverter, _is_binary

try:
    from mysqlcapture_native import TextRenderer
except ImportError:  # not built (or an older build): the reference path
    TextRenderer = None

# Text column kinds, as lib.rs numbers them.
T_INT, T_VERBATIM, T_DOUBLE, T_BOOL, T_QUOTED, T_UTF8, T_BYTE_TABLE, T_BASE64, T_SET_UTF8, T_SET_BYTE_TABLE = range(10)
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum"})

TextColumn = tuple[int, list[str]]
Rendered = tuple[pa.StringArray, pa.StringArray | None, pa.StringArray | None]


def text_column(table: TableDef, col: ColumnDef) -> TextColumn | None:
    """(kind, members) for one packed column, mirroring `convert.column_converter`; None: reference only."""
    t = col.type
    if t in INTEGER_TYPES or t == "year":
        return (T_INT, [])
    if t == "decimal":
        return (T_VERBATIM, [])
    if t == "double":
        return (T_DOUBLE, [])
    if t == "bit":
        return (T_BOOL if (col.length or 1) == 1 else T_INT, [])
    if t in _TEMPORAL:
        return (T_QUOTED, [])
    if t == "json" or t == "float":
        return None
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


def text_renderer(converter: RowConverter, pk_names: tuple[str, ...]) -> Any | None:
    """A TextRenderer for the table's packed chunks, None when the reference path must convert them."""
    if TextRenderer is None or converter.hexed is None or not fast_path_enabled():
        return None
    table = converter.table
    cols: list[TextColumn] = []
    for col in table.columns:
        kind = text_column(table, col)
        if kind is None:
            return None
        cols.append(kind)
    keys = [_json(name) for name in converter.names]
    pk = [converter.names.index(n) for n in pk_names]
    prefix = f"{table.database}\x00{table.name}\x00".encode()
    return TextRenderer(cols, keys, pk, prefix)


def render_text(renderer: Any, text: bytes, rows: int) -> Rendered:
    """(data, primary key, hash) of a chunk's text; ValueError when it does not hold `rows` packed rows."""
    n, data, pk, hashes = renderer.render(text)
    if n != rows:
        raise ValueError(f"{n} rows rendered, {rows} read")

    def strings(column: tuple[bytes, bytes] | None) -> pa.StringArray | None:
        if column is None:
            return None
        values, offsets = column
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(values))

    out = strings(data)
    assert out is not None
    return out, strings(pk), strings(hashes)
