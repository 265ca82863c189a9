"""The compiled fast path: a table's column plan for `mysqlcapture_native.RowRenderer`, or None.

The renderer reads full row images and writes Maxwell's JSON text (`data`, `old`, primary key and
its hash) without Python objects per value. It covers the common column types; a table with any
other column (JSON, GEOMETRY, pre-5.6 temporals, multi-byte charsets other than UTF-8) stays
on the reference path, which `MYSQLCAPTURE_DECODER=reference` selects for every table.
The plan mirrors `columns.compile_column` decision for decision; the type-fidelity corpus runs
through both paths and compares their change logs byte for byte.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any

import orjson

from mysqlcapture_worker.decode import columns as C
from mysqlcapture_worker.decode.charsets import text_decoder, utf8_decode
from mysqlcapture_worker.decode.decoder import column_specs
from mysqlcapture_worker.replication.events import TableMap
from mysqlcapture_worker.schema.model import TableDef

log = logging.getLogger(__name__)

try:
    from mysqlcapture_native import RowRenderer
except ImportError:  # not built: everything runs on the reference path
    RowRenderer = None

DECODER_ENV = "MYSQLCAPTURE_DECODER"

# Column kinds, as lib.rs numbers them.
K_INT, K_DOUBLE, K_DECIMAL, K_DATE, K_DATETIME2, K_TIMESTAMP2, K_TIME2, K_YEAR = range(8)
K_ENUM, K_SET, K_UTF8, K_BYTE_TABLE, K_BASE64, K_BIT, K_FLOAT = range(8, 15)

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
    return orjson.dumps(text).decode()


def _byte_table(decode: Callable[[bytes], str]) -> list[str]:
    return [orjson.dumps(decode(bytes([b]))).decode()[1:-1] for b in range(256)]


def _string(spec: C.ColumnSpec, prefix: int) -> Column | None:
    """`columns._string_op`'s choices."""
    if spec.type_name == "json":
        return None
    if C._is_binary(spec):
        return (K_BASE64, prefix, 0, [])
    charset = spec.charset or spec.table_charset
    decode = text_decoder(charset)
    if decode is utf8_decode:
        return (K_UTF8, prefix, 0, [])
    if decode is not None and charset in _SINGLE_BYTE:
        return (K_BYTE_TABLE, prefix, 0, _byte_table(decode))
    return None


def native_column(spec: C.ColumnSpec) -> Column | None:
    """(kind, a, b, members) for one column, None when only the reference path renders it."""
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
    if code in (C.VARCHAR, C.VAR_STRING, C.STRING):
        prefix = 1 if (meta.max_length or 0) <= 255 else 2
        if code == C.STRING and C._is_binary(spec):
            pad = spec.length if spec.type_name == "binary" and spec.length else meta.max_length or 0
            return (K_BASE64, prefix, pad, [])
        return _string(spec, prefix)
    if code in _BLOBS:
        return _string(spec, meta.length_size or _BLOBS[code])
    return None


def native_renderer(table_map: TableMap, table: TableDef, pk_idx: tuple[int, ...]) -> Any | None:
    """A RowRenderer for the table's full row images, None when any column needs the reference path."""
    if RowRenderer is None:
        return None
    cols: list[Column] = []
    for spec in column_specs(table_map, table):
        col = native_column(spec)
        if col is None:
            return None
        cols.append(col)
    keys = [_json(name) for name in table.column_names()]
    prefix = f"{table_map.database}\x00{table_map.table}\x00".encode()
    return RowRenderer(cols, keys, list(pk_idx), prefix)
