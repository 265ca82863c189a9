"""The compiled fast path: a table's column plan for `mysqlcapture_native.RowRenderer`, or None.

The renderer reads full row images and writes Maxwell's JSON text (`data`, `old`, primary key and
its hash) without Python objects per value. It covers every column type but the pre-5.6 temporal
formats: JSON, GEOMETRY, VECTOR and the multi-byte charsets are "blob" columns, rendered in Rust with
the reference converter as the fallback for values it leaves alone. A table with a pre-5.6 temporal
column stays on the reference path, which `MYSQLCAPTURE_DECODER=reference` selects for every table.
The plan mirrors `columns.compile_column` decision for decision; the type-fidelity corpus runs
through both paths and compares their change logs byte for byte.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from mysqlcapture_api.javatext import jackson_fragment, jackson_string
from mysqlcapture_api.schema.model import TableDef

from mysqlcapture_worker.charsets import CODECS, text_decoder, utf8_decode
from mysqlcapture_worker.decode import columns as C
from mysqlcapture_worker.decode import values as V
from mysqlcapture_worker.decode.decoder import column_specs
from mysqlcapture_worker.decode.geometry import wkt
from mysqlcapture_worker.decode.mysql_json import json_text_fragment, mysql_json_fragment
from mysqlcapture_worker.replication.events import TableMap

if TYPE_CHECKING:
    import mysqlcapture_native

log = logging.getLogger(__name__)

RowRenderer: type[mysqlcapture_native.RowRenderer] | None
try:
    from mysqlcapture_native import RowRenderer
except ImportError:  # not built: everything runs on the reference path
    RowRenderer = None

DECODER_ENV = "MYSQLCAPTURE_DECODER"

# Column kinds, as lib.rs numbers them.
K_INT, K_DOUBLE, K_DECIMAL, K_DATE, K_DATETIME2, K_TIMESTAMP2, K_TIME2, K_YEAR = range(8)
K_ENUM, K_SET, K_UTF8, K_BYTE_TABLE, K_BASE64, K_BIT, K_FLOAT, K_BLOB = range(8, 16)
# Blob kinds, as blob.rs numbers them.
B_JSON_TEXT, B_JSON_REPARSE, B_JSON_BINARY, B_GEOMETRY, B_TABLE, B_UTF16BE, B_UTF16LE, B_UTF32BE, B_VECTOR = range(9)

# Multi-byte charsets: by table (two bytes at most per character, the lead byte says how many), or by code units.
# Charsets rendered from a table of their one- and two-byte characters; a longer sequence (ujis's JIS X 0212 in three
# bytes, gb18030's four-byte ones) is not in the table, and its value goes to the reference converter.
_DOUBLE_BYTE = frozenset({"big5", "sjis", "euckr", "gb2312", "gbk", "cp932", "ujis", "gb18030"})
_CODE_UNITS = {"ucs2": B_UTF16BE, "utf16": B_UTF16BE, "utf16le": B_UTF16LE, "utf32": B_UTF32BE}

# Charsets whose Python codec decodes byte by byte: one table of 256 fragments renders them exactly.
_SINGLE_BYTE = frozenset(
    {
        "latin1",
        "latin2",
        "ascii",
        "hebrew",
        "tis620",
        "greek",
        "cp1250",
        "latin5",
        "macroman",
        "cp850",
        "cp852",
        "cp1251",
        "cp866",
        "cp1256",
        "cp1257",
    }
)
_INT_WIDTHS = {C.TINY: 1, C.SHORT: 2, C.INT24: 3, C.LONG: 4, C.LONGLONG: 8}
_TEMPORAL2 = {C.DATETIME2: K_DATETIME2, C.TIMESTAMP2: K_TIMESTAMP2, C.TIME2: K_TIME2}
_BLOBS = {C.TINY_BLOB: 1, C.BLOB: 2, C.MEDIUM_BLOB: 3, C.LONG_BLOB: 4}

Column = tuple[int, int, int, list[str]]
Fallback = Callable[[bytes], str] | None


def fast_path_enabled() -> bool:
    """The fast path unless `MYSQLCAPTURE_DECODER=reference` (or the extension is not installed)."""
    choice = os.environ.get(DECODER_ENV, "fast").strip().lower()
    if choice not in ("fast", "reference"):
        raise ValueError(f"{DECODER_ENV} must be 'fast' or 'reference', not {choice!r}")
    if choice == "reference":
        return False
    if RowRenderer is None:
        _warn_missing()
        return False
    return True


@functools.cache
def _warn_missing() -> None:
    log.warning(
        "mysqlcapture_native is not installed: every table is decoded and snapshotted on the pure-Python "
        "reference path, about 15x slower (make setup builds it; the worker image installs it)"
    )


def _json(text: str) -> str:
    """A string's JSON text as Maxwell writes it."""
    return jackson_string(text).decode()


def _byte_table(decode: Callable[[bytes], str]) -> list[str]:
    return [_json(decode(bytes([b])))[1:-1] for b in range(256)]


@functools.cache
def charset_table(codec: str) -> list[str]:
    """A double-byte charset's characters, escaped: 256 single bytes, then 65536 two-byte sequences ("": none)."""

    def piece(raw: bytes) -> str:
        try:
            text = raw.decode(codec)
        except UnicodeDecodeError:
            return ""
        return _json(text)[1:-1] if len(text) == 1 else ""

    singles = [piece(bytes([b])) for b in range(256)]
    pairs = [""] * 65536
    for lead in range(256):
        if not singles[lead]:
            for trail in range(256):
                pairs[lead << 8 | trail] = piece(bytes([lead, trail]))
    return singles + pairs


def json_text_of(convert: Callable[[bytes], Any]) -> Callable[[bytes], str]:
    """A reference converter as a blob column's fallback: raw bytes -> the value's JSON text."""
    return lambda raw: orjson.dumps(convert(raw)).decode()


def blob_column(spec_type: str, charset: str | None, *, binary_json: bool) -> tuple[int, list[str], Fallback] | None:
    """(blob kind, table, fallback) for JSON, GEOMETRY, VECTOR and multi-byte text; None for anything else."""
    if spec_type == "json":
        if binary_json:
            return B_JSON_BINARY, [], json_text_of(mysql_json_fragment)
        return B_JSON_TEXT, [], json_text_of(json_text_fragment)
    if spec_type == "geometry":
        return B_GEOMETRY, [], json_text_of(wkt)
    if spec_type == "vector":
        return B_VECTOR, [], json_text_of(V.vector_value)
    decode = text_decoder(charset) if charset else None
    if decode is None:
        return None
    fallback = json_text_of(lambda raw: jackson_fragment(decode(raw)))
    if charset in _CODE_UNITS:
        return _CODE_UNITS[charset], [], fallback
    if charset in _DOUBLE_BYTE:
        return B_TABLE, charset_table(CODECS[charset]), fallback
    return None


def _blob(prefix: int, found: tuple[int, list[str], Fallback] | None) -> tuple[Column, Fallback] | None:
    if found is None:
        return None
    kind, table, fallback = found
    return (K_BLOB, prefix, kind, table), fallback


def _string(spec: C.ColumnSpec, prefix: int) -> tuple[Column, Fallback] | None:
    """`columns._string_op`'s choices."""
    if spec.type_name == "json":
        return _blob(prefix, blob_column("json", None, binary_json=False))
    if C._is_binary(spec):
        return (K_BASE64, prefix, 0, []), None
    charset = spec.charset or spec.table_charset
    decode = text_decoder(charset)
    if decode is utf8_decode:
        return (K_UTF8, prefix, 0, []), None
    if decode is not None and charset in _SINGLE_BYTE:
        return (K_BYTE_TABLE, prefix, 0, _byte_table(decode)), None
    return _blob(prefix, blob_column("text", charset, binary_json=False))


def native_column(spec: C.ColumnSpec) -> tuple[Column, Fallback] | None:
    """((kind, a, b, members), fallback) for one column, None when only the reference path renders it."""
    meta = spec.meta
    code = meta.type_code
    if code in (C.VARCHAR, C.VAR_STRING, C.STRING) and not (code == C.STRING and C._is_binary(spec)):
        return _string(spec, 1 if (meta.max_length or 0) <= 255 else 2)
    if code in _BLOBS:
        return _string(spec, meta.length_size or _BLOBS[code])
    blob = _BLOB_TYPES.get(code)
    if blob is not None:
        return _blob(meta.length_size or 4, blob_column(blob, None, binary_json=True))
    fixed = _fixed_column(spec)
    return None if fixed is None else (fixed, None)


_BLOB_TYPES = {C.JSON: "json", C.GEOMETRY: "geometry", C.VECTOR: "vector"}


def _fixed_column(spec: C.ColumnSpec) -> Column | None:
    """Columns of a fixed size, and BINARY(N)."""
    meta = spec.meta
    code = meta.type_code
    if code in _INT_WIDTHS:
        return (K_INT, _INT_WIDTHS[code], 0 if spec.unsigned else 1, [])
    if code == C.DOUBLE:
        return (K_DOUBLE, 8, 0, [])
    if code == C.FLOAT:
        return (K_FLOAT, 4, 0, [])
    if code == C.NEWDECIMAL:
        precision = meta.precision if meta.precision is not None else spec.precision or 10
        scale = meta.decimals if meta.decimals is not None else spec.scale or 0
        return (K_DECIMAL, precision, scale, []) if 0 <= scale <= precision and 1 <= precision <= 65 else None
    if code == C.YEAR:
        return (K_YEAR, 1, 0, [])
    if code == C.DATE:
        return (K_DATE, 3, 0, [])
    if code in _TEMPORAL2:
        fsp = meta.fsp if meta.fsp is not None else spec.fsp or 0
        return (_TEMPORAL2[code], fsp, 0, []) if 0 <= fsp <= 6 else None
    if code == C.BIT:
        return (K_BIT, meta.bits or spec.length or 1, 0, [])
    if code in (C.ENUM, C.SET):
        if spec.enum_values is None:
            return None
        size = meta.size or 1
        if code == C.ENUM:
            # The reference path unpacks 1 and 2 bytes as integers (other sizes never occur).
            return (K_ENUM, size, 0, [_json(m) for m in ("", *spec.enum_values)]) if size in (1, 2) else None
        return (K_SET, size, 0, [_json(m) for m in spec.enum_values]) if 1 <= size <= 8 else None
    if code == C.STRING and C._is_binary(spec):
        prefix = 1 if (meta.max_length or 0) <= 255 else 2
        pad = spec.length if spec.type_name == "binary" and spec.length else meta.max_length or 0
        return (K_BASE64, prefix, pad, [])
    return None


def native_renderer(
    table_map: TableMap,
    table: TableDef,
    pk_idx: tuple[int, ...],
    redactor: mysqlcapture_native.Redactor | None = None,
    *,
    key_hashes: bool = True,
) -> mysqlcapture_native.RowRenderer | None:
    """A RowRenderer for the table's full row images (writing each column under `redactor`'s rules, spec.columns),
    None when any column needs the reference path. `key_hashes`: with each row's `pk_hash` (the Delta change log's;
    no other sink writes it)."""
    if RowRenderer is None:
        return None
    cols: list[Column] = []
    fallbacks: list[Fallback] = []
    for spec in column_specs(table_map, table):
        found = native_column(spec)
        if found is None:
            return None
        cols.append(found[0])
        fallbacks.append(found[1])
    keys = [_json(name) for name in table.column_names()]
    prefix = f"{table_map.database}\x00{table_map.table}\x00".encode() if key_hashes else None
    return RowRenderer(cols, keys, list(pk_idx), prefix, fallbacks, redactor)
