"""Current-state tables read back and compared with the source's `SELECT *`, value by value and type by type.

The expected Spark type of each source column is written out here from information_schema, independently of
mysqlcapture_compaction.types (README "Compaction: types"). Values are compared as Python objects: PyMySQL's on
one side (session time zone UTC), delta-rs's on the other.
"""

from __future__ import annotations

import datetime
import itertools
import json
import re
import struct
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
from mysqlcapture_api.changelog import read_delta

from tests.replay import json_column_test

Key = tuple[str, str]
META_PREFIX = "_cdc_"
SIGNED = {"tinyint": "int8", "smallint": "int16", "mediumint": "int32", "int": "int32", "bigint": "int64"}
UNSIGNED = {
    "tinyint": "int16",
    "smallint": "int32",
    "mediumint": "int32",
    "int": "int64",
    "bigint": "decimal128(20, 0)",
}
STRINGS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "json"}
BINARIES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
GEOMETRIES = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon"}


def expected_type(data_type: str, column_type: str, precision: int | None, scale: int | None) -> str:
    """The Arrow type (as delta-rs reads it) a current-state column of this source type must have."""
    unsigned = "unsigned" in column_type
    if data_type in SIGNED:
        return (UNSIGNED if unsigned else SIGNED)[data_type]
    if data_type == "decimal":
        return f"decimal128({precision}, {scale})" if (precision or 0) <= 38 else "string"
    if data_type in ("float", "double"):
        return {"float": "float", "double": "double"}[data_type]
    if data_type == "bit":
        return "int64" if (precision or 1) < 64 else "decimal128(20, 0)"
    if data_type == "year":
        return "int16"
    if data_type == "date":
        return "date32[day]"
    if data_type == "datetime":
        return "timestamp[us]"
    if data_type == "timestamp":
        return "timestamp[us, tz=UTC]"
    if data_type == "time":
        return "int64"
    if data_type == "set":
        return "list<element: string>"
    if data_type == "vector":
        return "list<element: float>"
    if data_type in BINARIES:
        return "binary"
    if data_type in STRINGS or data_type in GEOMETRIES or data_type in ("geomcollection", "geometrycollection"):
        return "string"
    raise AssertionError(f"no expected type for {data_type} ({column_type})")


def arrow_type(field: pa.Field) -> str:
    kind = field.type
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "string"
    if pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return "binary"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        value = kind.value_type
        strings = pa.types.is_string(value) or pa.types.is_large_string(value) or pa.types.is_string_view(value)
        inner = "string" if strings else str(value)
        return f"list<element: {inner}>"
    return str(kind)


def current_tables(output: str) -> dict[Key, tuple[dict[str, str], dict[str, dict[str, Any]]]]:
    """Every live (not dropped) current-state table: column types, and rows by `_cdc_pk` (metadata left out but
    `_cdc_raw`)."""
    from mysqlcapture_compaction import targets

    out: dict[Key, tuple[dict[str, str], dict[str, dict[str, Any]]]] = {}
    root = Path(output) / "tables"
    for db_dir in sorted(root.iterdir()) if root.is_dir() else []:
        for table_dir in sorted(db_dir.iterdir()):
            if targets.is_dropped(str(table_dir)):
                continue
            data = read_delta(str(table_dir))  # delta-rs's query engine: deletion vectors applied
            types = {f.name: arrow_type(f) for f in data.schema if not f.name.startswith(META_PREFIX)}
            rows = {}
            by_value = targets.by_value(str(table_dir))  # rows without a key: `<value hash>#<instance>`
            for row in data.to_pylist():
                pk = row["_cdc_pk"]
                key = pk if by_value else json.dumps(json.loads(pk, parse_float=Decimal), default=str)
                raw = dict(row["_cdc_raw"] or [])
                rows[key] = {k: v for k, v in row.items() if not k.startswith(META_PREFIX)} | {"_cdc_raw": raw}
            out[(db_dir.name, table_dir.name)] = (types, rows)
    return out


def source_tables(conn: Any, databases: list[str]) -> dict[Key, tuple[dict[str, tuple[str, str, int, int]], list]]:
    """`SELECT *` of every table of `databases` (UTC session), with each column's (data type, column type,
    precision, scale); JSON columns reported as json on both flavors."""
    out: dict[Key, tuple[dict[str, tuple[str, str, int, int]], list]] = {}
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        is_json = json_column_test(cur)
        marks = ",".join(["%s"] * len(databases))
        cur.execute(
            "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, "
            f"COALESCE(c.NUMERIC_PRECISION, 0), COALESCE(c.NUMERIC_SCALE, 0), {is_json} "
            "FROM information_schema.COLUMNS c JOIN information_schema.TABLES t USING (TABLE_SCHEMA, TABLE_NAME) "
            f"WHERE c.TABLE_SCHEMA IN ({marks}) AND t.TABLE_TYPE = 'BASE TABLE' "
            "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION",
            databases,
        )
        columns: dict[Key, dict[str, tuple[str, str, int, int]]] = {}
        for db, table, name, dtype, ctype, precision, scale, json_col in cur.fetchall():
            kind = "json" if json_col else str(dtype).lower()
            columns.setdefault((db, table), {})[name] = (kind, str(ctype).lower(), int(precision), int(scale))
        for key, cols in columns.items():
            picks = ", ".join(_pick(c, kind) for c, (kind, *_rest) in cols.items())
            cur.execute(f"SELECT {picks} FROM `{key[0]}`.`{key[1]}`")
            out[key] = (cols, [dict(zip(cols, raw, strict=True)) for raw in cur.fetchall()])
    return out


_FRACTION = re.compile(r"^-?[\d:\- ]+\.\d+$")


def _temporal_fractions(value: Any) -> Any:
    """A JSON document as Maxwell prints MySQL's opaque values in it (and so the change log): temporal strings
    without trailing fraction zeros (MySQL prints six digits), binary values as base64 (MySQL adds a
    `base64:typeNN:` prefix)."""
    if isinstance(value, list):
        return [_temporal_fractions(v) for v in value]
    if isinstance(value, dict):
        return {k: _temporal_fractions(v) for k, v in value.items()}
    if isinstance(value, str) and _FRACTION.match(value):
        return value.rstrip("0").rstrip(".")
    if isinstance(value, str) and value.startswith("base64:type"):  # an opaque binary value: Maxwell prints its base64
        return value.split(":", 2)[2]
    return value


def _pick(column: str, kind: str) -> str:
    """How `SELECT` reads a column for comparison: geometry as WKT, FLOAT as the double it holds (the text
    protocol prints FLOAT with 6 significant digits)."""
    if kind in GEOMETRIES or kind in ("geomcollection", "geometrycollection"):
        return f"ST_AsText(`{column}`)"
    if kind == "float":
        return f"CAST(`{column}` AS DOUBLE)"
    if kind == "vector":  # PyMySQL would decode its bytes as text
        return f"HEX(`{column}`)"
    return f"`{column}`"


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _wkt(text: str) -> tuple[str, list[float]]:
    """A WKT text as its geometry type names and its coordinates (servers and JTS space, nest MULTIPOINT's
    parentheses and print numbers differently)."""
    number = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
    return re.sub(r"[^A-Z]", "", re.sub(number, "", text).upper()), [float(n) for n in re.findall(number, text)]


class _Document(tuple[Any]):
    """A JSON column's value (the document `null` too) compared as a document: never equal to SQL NULL (None)."""

    def __new__(cls, parsed: Any) -> _Document:
        return super().__new__(cls, (parsed,))


def expected_value(value: Any, kind: str) -> tuple[Any, str | None]:
    """(the current-state value, the `_cdc_raw` text) a source value must become."""
    if value is None:
        return None, None
    if kind in GEOMETRIES or kind in ("geomcollection", "geometrycollection"):
        return _wkt(value.decode() if isinstance(value, bytes) else value), None
    if kind == "vector":
        data = bytes.fromhex(value)
        return [_float32(v) for v in struct.unpack(f"<{len(data) // 4}f", data)], None
    if kind in ("date", "datetime", "timestamp") and isinstance(value, str):  # a zero date PyMySQL cannot convert
        return None, value
    if kind == "bit":
        return int.from_bytes(value, "big"), None
    if kind == "time":
        return value // datetime.timedelta(microseconds=1), None
    if kind == "set":
        return sorted(value.split(",") if isinstance(value, str) and value else value or []), None
    if kind == "json":  # numbers as the doubles a JSON document holds (Maxwell prints them in full)
        return _Document(_temporal_fractions(json.loads(value))), None
    if kind == "float":
        return _float32(value), None
    if kind == "decimal" and isinstance(value, Decimal):
        return value, None
    return value, None


def actual_value(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind in GEOMETRIES or kind in ("geomcollection", "geometrycollection"):
        return _wkt(value)
    if kind == "vector":
        return [_float32(v) for v in value]
    if kind == "set":
        return sorted(value)
    if kind == "json":
        return _Document(_temporal_fractions(json.loads(value)))
    if kind == "timestamp":
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    if kind == "float":
        return _float32(value)
    if kind == "decimal" and isinstance(value, str):  # DECIMAL over 38 digits: exact text
        return Decimal(value)
    if kind in ("year",) or isinstance(value, bytes | bytearray):
        return bytes(value) if isinstance(value, bytes | bytearray) else value
    return value


def _pk_of(row: dict[str, Any], pk_cols: list[str]) -> str:
    return json.dumps([row[c] for c in pk_cols], default=str)


def assert_state_equals_source(
    state: dict[Key, tuple[dict[str, str], dict[str, dict[str, Any]]]],
    source: dict[Key, tuple[dict[str, tuple[str, str, int, int]], list]],
    pk: str | dict[Key, list[str]] = "id",
) -> int:
    """Every table, column type and value equal; returns the number of values compared. `pk`: every table's
    primary-key column, or each table's primary-key columns in key order."""
    assert sorted(state) == sorted(source), f"tables differ: compacted {sorted(state)} source {sorted(source)}"
    compared = 0
    for key, (cols, rows) in source.items():
        types, got = state[key]
        want_types = {c: expected_type(k, ct, p, s) for c, (k, ct, p, s) in cols.items()}
        assert types == want_types, f"{key}: column types {types} != {want_types}"
        if not isinstance(pk, str) and pk[key] == []:  # no primary key: equal as multisets of rows
            compared += _assert_same_rows(key, cols, rows, list(got.values()))
            continue
        by_pk = {_pk_of(r, [pk] if isinstance(pk, str) else pk[key]): r for r in rows}
        missing, extra = set(by_pk) - set(got), set(got) - set(by_pk)
        assert not missing and not extra, f"{key}: keys differ: missing {missing}, extra {extra}"
        for pk_text, row in by_pk.items():
            actual = got[pk_text]
            raw: dict[str, str] = {}
            for col, value in row.items():
                kind = cols[col][0]
                want, want_raw = expected_value(value, kind)
                have = actual_value(actual[col], kind)
                assert have == want, f"{key} {pk_text} {col} ({kind}): compacted {actual[col]!r}, source {value!r}"
                if want_raw is not None:
                    raw[col] = want_raw
                compared += 1
            assert actual["_cdc_raw"] == raw, f"{key} {pk_text}: _cdc_raw {actual['_cdc_raw']} != {raw}"
    return compared


def _assert_same_rows(key: Key, cols: dict[str, tuple[str, str, int, int]], rows: list, got: list) -> int:
    """A table without a primary key: the same rows as often, each value compared as for a keyed table."""

    def wanted(row: dict[str, Any]) -> str:
        pairs = [(c, *expected_value(v, cols[c][0])) for c, v in row.items()]
        raw = {c: text for c, _, text in pairs if text is not None}
        return json.dumps([[c, v] for c, v, _ in pairs] + [raw], default=repr, sort_keys=True)

    def held(row: dict[str, Any]) -> str:
        values = [[c, actual_value(row[c], kind)] for c, (kind, *_rest) in cols.items()]
        return json.dumps([*values, row["_cdc_raw"]], default=repr, sort_keys=True)

    want, have = Counter(wanted(r) for r in rows), Counter(held(r) for r in got)
    assert have == want, f"{key}: rows differ: missing {want - have}, extra {have - want}"
    return len(rows) * len(cols)


def assert_history_matches_state(output: str, database: str) -> int:
    """Every table's typed history against its current state, for tables whose definition did not change since
    their rows were written: the keys whose last version is not a delete (nor a move away) are the table's keys,
    that version's after image is the row (every column, same type, `_cdc_raw` included), and every before image
    is the previous version's after image. Returns how many images were compared."""
    from mysqlcapture_compaction import targets

    compared = 0
    for table_dir in sorted((Path(output) / "tables" / database).iterdir()):
        state = read_delta(str(table_dir))
        hist = read_delta(targets.Target(output, database, table_dir.name).history)
        image_type = hist.schema.field("after").type
        columns = [f.name for f in state.schema if not f.name.startswith(META_PREFIX)]
        assert [image_type.field(i).name for i in range(image_type.num_fields)] == [*columns, "_cdc_raw"]
        for name in columns:
            assert arrow_type(image_type.field(name)) == arrow_type(state.schema.field(name)), (table_dir, name)
        rows = {r["_cdc_pk"]: r for r in state.to_pylist()}
        versions: dict[str, list[dict[str, Any]]] = {}
        for v in sorted(hist.to_pylist(), key=lambda v: v["order_key"]):
            versions.setdefault(v["pk"], []).append(v)
        live = {pk for pk, vs in versions.items() if vs[-1]["type"] != "delete" and not vs[-1]["moved_away"]}
        assert live == set(rows), table_dir
        for pk, vs in versions.items():
            for earlier, later in itertools.pairwise(vs):
                if later["before"] is not None:
                    assert later["before"] == earlier["after"], (table_dir, pk, earlier, later)
                    compared += 1
            if pk in rows:
                after, row = vs[-1]["after"], rows[pk]
                assert after == {c: row[c] for c in [*columns, "_cdc_raw"]}, (table_dir, pk, after, row)
                compared += 1
    return compared
