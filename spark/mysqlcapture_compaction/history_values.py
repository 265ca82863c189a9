"""A typed history value as a person or a program reads it: JSON (Maxwell's forms), text (CSV and the terminal)
and an exact SQL literal (undo scripts).

The history holds each value in its column's Spark type (README "Compaction: types"): TIME as signed
microseconds, SET and VECTOR as lists, TIMESTAMP as a UTC instant, JSON, GEOMETRY (WKT) and DECIMALs wider than
38 digits as text; a value no Spark type holds (a zero date) is null with its exact text in `_cdc_raw`. The
column's definition (the schema history's newest) says which is which; without one a value is shown by its
Python type.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import re
import struct
from collections.abc import Callable
from typing import Any

import orjson
from mysqlcapture_api.javatext import float32_text, java_decimal, java_double, java_float
from mysqlcapture_api.schema.model import ColumnDef

from mysqlcapture_compaction.values import plain_decimal

MYSQL, MARIADB = "mysql", "mariadb"
_BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_GEOMETRY = frozenset(
    {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"}
    | {"geometrycollection"}
)


def _fraction(micros: int, col: ColumnDef | None) -> str:
    """Fractional seconds as the column declares them (fsp digits), or as many as the value needs without one."""
    fsp = col.column_length if col is not None and col.column_length is not None else None
    if fsp is None:
        return f".{micros:06d}".rstrip("0").rstrip(".") if micros else ""
    return f".{micros:06d}"[: fsp + 1] if fsp > 0 else ""


def time_text(micros: int, col: ColumnDef | None = None) -> str:
    """TIME microseconds as the server prints them: [-]HH:MM:SS[.fraction]."""
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    hours, rest = divmod(seconds, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{_fraction(fraction, col)}"


def _moment(value: datetime.datetime, col: ColumnDef | None = None) -> str:
    if value.tzinfo is not None:  # a TIMESTAMP: shown in UTC (undo scripts set time_zone '+00:00')
        value = value.astimezone(datetime.UTC).replace(tzinfo=None)
    v = value
    text = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    return text + _fraction(v.microsecond, col)


def _float32(value: float) -> bytes:
    return struct.pack("<f", value)


def _number(value: float, col: ColumnDef | None) -> orjson.Fragment:
    """A FLOAT or DOUBLE as Maxwell prints it (Java's Float/Double.toString)."""
    if col is not None and col.type in ("float", "vector"):
        raw = _float32(value)
        return orjson.Fragment(java_float(raw, float32_text(raw) or repr(value)))
    return orjson.Fragment(java_double(value))


def _plain_number(value: float, col: ColumnDef | None) -> str:
    """A FLOAT as its shortest float32 text, a DOUBLE as its shortest double text."""
    if col is not None and col.type in ("float", "vector"):
        return float32_text(_float32(value)) or repr(value)
    return repr(value)


def _identity(value: Any) -> Any:
    return value


def _date(value: datetime.date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _base64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _decimal(value: decimal.Decimal | str) -> orjson.Fragment:
    # A DECIMAL wider than 38 digits is held as its exact text.
    return orjson.Fragment(java_decimal(value if isinstance(value, str) else format(value, "f")))


def _double(value: float) -> orjson.Fragment:
    return orjson.Fragment(java_double(value))


def _float(value: float) -> orjson.Fragment:
    raw = _float32(value)
    return orjson.Fragment(java_float(raw, float32_text(raw) or repr(value)))


def json_renderer(col: ColumnDef | None) -> Callable[[Any], Any]:
    """The function giving a non-null value of `col` its --format json form (Maxwell's: binary as base64, JSON
    documents embedded, numbers as Maxwell prints them, times with the column's fraction digits), chosen once per
    column; without a definition, by each value's type."""
    kind = col.type if col is not None else None
    if kind == "json":
        return orjson.Fragment
    if kind == "time":
        return lambda v: time_text(v, col)
    if kind == "decimal":
        return _decimal
    if kind == "double":
        return _double
    if kind == "float":
        return _float
    if kind == "vector":
        return lambda v: [_float(x) for x in v]
    if kind in ("datetime", "timestamp"):
        return lambda v: _moment(v, col)
    if kind == "date":
        return _date
    if kind in _BINARY:
        return _base64
    if kind is not None:
        return _identity
    return lambda v: json_value(v, None)


def shown_as_is(col: ColumnDef) -> bool:
    """Whether `col`'s values are shown in --format json as they are (json_renderer's identity)."""
    return json_renderer(col) is _identity


def json_value(value: Any, col: ColumnDef | None, raw: str | None = None) -> Any:
    """For --format json: `json_renderer`'s form of one value (a zero date: its text)."""
    if raw is not None:
        return raw
    if value is None:
        return None
    if col is not None:
        return json_renderer(col)(value)
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, datetime.datetime):
        return _moment(value)
    if isinstance(value, datetime.date):
        return _date(value)
    if isinstance(value, bytes):
        return _base64(value)
    return value


def text_value(value: Any, col: ColumnDef | None, raw: str | None = None) -> str:
    """For --format csv and table: as the mysql client prints it (binary as 0x hex, a SET as a,b; NULL empty)."""
    if raw is not None:
        return raw
    if value is None:
        return ""
    kind = col.type if col is not None else None
    if isinstance(value, bytes):
        return "0x" + value.hex().upper()
    if kind == "set" and isinstance(value, list):
        return ",".join(value)
    if isinstance(value, list):
        return "[" + ",".join(_plain_number(v, col) for v in value) + "]"
    if kind == "json" or (kind == "decimal" and isinstance(value, str)):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return _plain_number(value, col)
    return str(json_value(value, col))


def _string(text: str) -> str:
    """A string literal that reads the same whatever the session's sql_mode: quotes doubled; text with a backslash
    or a control character as utf8mb4 hex."""
    if "\\" in text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        return f"_utf8mb4 X'{text.encode().hex().upper()}'" if text else "''"
    return "'" + text.replace("'", "''") + "'"


def sql_literal(value: Any, col: ColumnDef | None, raw: str | None = None, *, flavor: str = MYSQL) -> str:
    """An exact SQL literal of `value` for column `col` (undo scripts: time_zone '+00:00', utf8mb4)."""
    if raw is not None:
        return _string(raw)
    if value is None:
        return "NULL"
    kind = col.type if col is not None else None
    if kind == "json":
        return f"CAST({_string(value)} AS JSON)" if flavor == MYSQL else _string(value)
    if kind in _GEOMETRY:
        return f"ST_GeomFromText({_string(server_wkt(value))})"
    if kind == "vector" and isinstance(value, list):
        return f"STRING_TO_VECTOR('[{','.join(repr(float(v)) for v in value)}]')"
    if kind == "time" and isinstance(value, int):
        return f"'{time_text(value, col)}'"
    if kind == "decimal" and isinstance(value, str):  # wider than Spark's: plain digits (not a DOUBLE's `1E-30`)
        return plain_decimal(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):  # a FLOAT's widened value: equal to the column's in a comparison, and stored back
        return repr(value)  # as the same float32
    if isinstance(value, bytes):
        return f"X'{value.hex().upper()}'"
    if isinstance(value, datetime.datetime):
        return f"'{_moment(value, col)}'"
    if isinstance(value, datetime.date):
        return f"'{value.year:04d}-{value.month:02d}-{value.day:02d}'"
    if isinstance(value, list):  # a SET: its members, comma-separated
        return _string(",".join(value))
    return _string(str(value))


_MULTIPOINT = re.compile(r"MULTIPOINT\s*\(((?:\s*\([^()]*\)\s*,?)+)\)", re.I)


def server_wkt(text: str) -> str:
    """WKT as both servers read it: JTS (and so Maxwell) writes MULTIPOINT's points in parentheses,
    `MULTIPOINT ((1 1), (2 2))`, which MariaDB does not read; `MULTIPOINT (1 1, 2 2)` both do."""
    return _MULTIPOINT.sub(lambda m: "MULTIPOINT (" + re.sub(r"[()]", "", m.group(1)) + ")", text)


def guard(name: str, value: Any, col: ColumnDef | None, raw: str | None, *, flavor: str) -> str:
    """`name` holds exactly `value` (NULL-safe), as a WHERE condition."""
    ident = quote_name(name)
    literal = sql_literal(value, col, raw, flavor=flavor)
    kind = col.type if col is not None else None
    if value is None and raw is None:
        return f"{ident} IS NULL"
    if kind in _GEOMETRY:
        return f"ST_AsBinary({ident}) = ST_AsBinary({literal})"
    if kind == "vector":
        return f"VECTOR_TO_STRING({ident}) = VECTOR_TO_STRING({literal})"
    if kind == "json" and flavor != MYSQL:
        # MariaDB's JSON is text; the change log holds it with its line breaks made spaces, a `null` unspaced.
        return f"JSON_COMPACT({ident}) = JSON_COMPACT({literal})"
    return f"{ident} = {literal}"


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
