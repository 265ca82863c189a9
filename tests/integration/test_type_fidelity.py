"""Type fidelity on real MariaDB and MySQL servers: each corpus value, inserted, updated, deleted, renders as Maxwell
does."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pymysql
import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.decode import ABSENT, UnsupportedTypeError, compile_decoder
from mysqlcapture_worker.replication.events import RowsEvent, RowsKind, TableMap
from mysqlcapture_worker.replication.stream import BinlogStream, ConnectionSettings

from tests import servers
from tests.fidelity_corpus import Case, cases_for

pytestmark = [
    # mysql-replication 1.0.17 opens its control connection with PyMySQL's deprecated `db=` argument.
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]

DB = "fidelity"
_replica_ids = iter(range(7400, 7500))


# --------------------------------------------------------------------------------------- capture
@dataclass
class Captured:
    """What one server's binlog says about every table written since `start`."""

    server: PrivateServer
    events: dict[str, list[TableMap | RowsEvent]] = field(default_factory=lambda: defaultdict(list))
    updated: dict[str, set[int]] = field(default_factory=dict)  # ids whose UPDATE changed the row


def read_binlog(server: PrivateServer, start: tuple[str, int]) -> dict[str, list[TableMap | RowsEvent]]:
    """Normalized TABLE_MAP and rows events per table, from `start` to the end of the binlog (the worker's own
    narrow interface to the binlog library: what it cannot read is read there)."""
    settings = ConnectionSettings("127.0.0.1", server.port, "root", server.root_password, ssl_disabled=True)
    stream = BinlogStream(
        settings, replica_server_id=next(_replica_ids), start=Coordinate(start[0], start[1]), blocking=False
    )
    out: dict[str, list[TableMap | RowsEvent]] = defaultdict(list)
    names: dict[int, str] = {}
    try:
        for ev in stream:
            if isinstance(ev, TableMap):
                names[ev.table_id] = ev.table
                out[ev.table].append(ev)
            elif isinstance(ev, RowsEvent):
                out[names[ev.table_id]].append(ev)
    finally:
        stream.close()
    return out


def _columns_sql(c: Case) -> str:
    if c.base is not None:
        return f"id int PRIMARY KEY, b {c.base}, v {c.ddl}"
    return f"id int PRIMARY KEY, v {c.ddl}"


def write_case(conn: pymysql.connections.Connection, c: Case) -> set[int]:
    """Create the case's table, insert every value, rotate them with UPDATEs, delete all rows."""
    target = "b" if c.base is not None else "v"
    n = len(c.values)
    updated: set[int] = set()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'")
        cur.execute(f"CREATE TABLE {DB}.`{c.name}` ({_columns_sql(c)}) DEFAULT CHARSET=utf8mb4")
        for stmt in c.setup:
            cur.execute(stmt)
        rows = ", ".join(f"({i}, {value})" for i, value in enumerate(c.values))
        cur.execute(f"INSERT INTO {DB}.`{c.name}` (id, {target}) VALUES {rows}")
        for i in range(n):
            if cur.execute(f"UPDATE {DB}.`{c.name}` SET {target} = {c.values[(i + 1) % n]} WHERE id = {i}"):
                updated.add(i)
        cur.execute(f"DELETE FROM {DB}.`{c.name}`")
    return updated


def _start(server: PrivateServer) -> tuple[str, int]:
    status = server.binlog_status()
    return status.file, status.pos


def capture_corpus(server: PrivateServer) -> Captured:
    file, pos = _start(server)
    captured = Captured(server)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
        for c in cases_for(server.flavor):
            captured.updated[c.name] = write_case(conn, c)
    finally:
        conn.close()
    captured.events = read_binlog(server, (str(file), int(pos)))
    return captured


class Corpora:
    """The corpus captured once per (flavor, binlog_row_metadata), on a server of its own kept for the module."""

    def __init__(self) -> None:
        self._captured: dict[tuple[str, str], Captured | BaseException] = {}
        self._servers: list[PrivateServer] = []

    def get(self, flavor: str, metadata: str) -> Captured:
        key = (flavor, metadata)
        if key not in self._captured:
            server_id = 7301 if metadata == "FULL" else 7302
            try:
                srv = servers.start(flavor, server_id, binlog_row_metadata=metadata)  # type: ignore[arg-type]
                self._servers.append(srv)
                self._captured[key] = capture_corpus(srv)
            except BaseException as exc:  # every later test of this corpus fails with it, without a new server
                self._captured[key] = exc
        found = self._captured[key]
        if isinstance(found, BaseException):
            raise AssertionError(f"capturing the {flavor} {metadata} corpus failed: {found!r}") from found
        return found

    def close(self) -> None:
        for srv in self._servers:
            srv.stop()


@pytest.fixture(scope="module")
def corpora() -> Iterator[Corpora]:
    store = Corpora()
    yield store
    store.close()


@pytest.fixture(scope="module")
def full(flavor: str, corpora: Corpora) -> Captured:
    return corpora.get(flavor, "FULL")


@pytest.fixture(scope="module")
def minimal(flavor: str, corpora: Corpora) -> Captured:
    return corpora.get(flavor, "MINIMAL")


# --------------------------------------------------------------------------------------- table definitions
def bare_table_def(tm: TableMap, json_columns: set[str]) -> TableDef:
    """Names only (from the FULL TABLE_MAP): types, signedness, charsets and members must come from the map.

    MariaDB's JSON is a LONGTEXT in the binlog; only the schema knows it is JSON.
    """
    assert tm.column_names is not None
    cols = tuple(ColumnDef(name=n, type="json" if n in json_columns else "") for n in tm.column_names)
    return TableDef(database=tm.database, name=tm.table, columns=cols)


_ENUM_MEMBER = re.compile(r"'((?:[^'\\]|''|\\.)*)'")


def _members(column_type: str) -> tuple[str, ...]:
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return tuple(m.replace("''", "'").replace("\\\\", "\\") for m in _ENUM_MEMBER.findall(body))


def info_schema_table_def(server: PrivateServer, database: str, table: str) -> TableDef:
    """A TableDef read from information_schema (stand-in for the schema capture module)."""
    rows = server.query(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, DATETIME_PRECISION, "
        "NUMERIC_PRECISION, NUMERIC_SCALE, CHARACTER_MAXIMUM_LENGTH, IS_NULLABLE, EXTRA "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "ORDER BY ORDINAL_POSITION",
        (database, table),
    )
    checks = (
        [
            str(r[0])
            for r in server.query(
                "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS "
                "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
                (database, table),
            )
        ]
        if server.flavor == "mariadb"  # MySQL's JSON is a type; its CHECK_CONSTRAINTS has no TABLE_NAME
        else []
    )
    columns = []
    for name, data_type, column_type, charset, fsp, precision, scale, max_len, nullable, extra in rows:
        type_name = str(data_type).lower()
        if type_name == "longtext" and f"json_valid(`{name}`)" in checks:
            type_name = "json"
        columns.append(
            ColumnDef(
                name=str(name),
                type=type_name,
                signed="unsigned" not in str(column_type).lower(),
                charset=str(charset) if charset is not None else None,
                column_length=int(fsp) if fsp is not None else None,
                length=int(max_len) if max_len is not None and type_name in ("char", "binary") else None,
                precision=int(precision) if precision is not None and type_name == "decimal" else None,
                scale=int(scale) if scale is not None and type_name == "decimal" else None,
                enum_values=_members(str(column_type)) if type_name in ("enum", "set") else None,
                nullable=nullable == "YES",
                generated="GENERATED" in str(extra).upper() or "VIRTUAL" in str(extra).upper(),
            )
        )
    return TableDef(database=database, name=table, columns=tuple(columns))


def _stripped(tm: TableMap) -> TableMap:
    """The same map as binlog_row_metadata=NO_LOG would send it: nothing optional."""
    return dataclasses.replace(tm, column_names=None, unsigned=None, charsets=None, enum_values=None, primary_key=None)


# --------------------------------------------------------------------------------------- decoding
@dataclass
class Decoded:
    inserts: dict[int, list[Any]] = field(default_factory=dict)
    updates: dict[int, tuple[list[Any], list[Any]]] = field(default_factory=dict)
    deletes: dict[int, list[Any]] = field(default_factory=dict)


def decode_all(events: list[TableMap | RowsEvent], table_def_for: Any) -> Decoded:
    out = Decoded()
    decoder = None
    for ev in events:
        if isinstance(ev, TableMap):
            decoder = compile_decoder(ev, table_def_for(ev))
            continue
        assert decoder is not None, "rows event before its table map"
        for before, after in decoder.decode(ev):
            if ev.kind is RowsKind.INSERT:
                assert before is None and after is not None
                out.inserts[after[0]] = after
            elif ev.kind is RowsKind.UPDATE:
                assert before is not None and after is not None
                key = before[0] if after[0] is ABSENT else after[0]
                assert after[0] in (key, ABSENT)
                out.updates[key] = (before, after)
            else:
                assert before is not None and after is None
                out.deletes[before[0]] = before
    return out


def render(value: Any) -> str:
    assert value is not ABSENT
    return orjson.dumps(value).decode()


def check_case(c: Case, flavor: str, decoded: Decoded, updated: set[int]) -> None:
    n = len(c.values)
    v = 2 if c.base is not None else 1
    expected = c.expected_for(flavor)
    final = [expected[(i + 1) % n] if i in updated else expected[i] for i in range(n)]
    got_inserts = {i: render(row[v]) for i, row in decoded.inserts.items()}
    assert got_inserts == dict(enumerate(expected)), "insert images"
    got_updates = {i: (render(b[v]), render(a[v])) for i, (b, a) in decoded.updates.items()}
    assert got_updates == {i: (expected[i], expected[(i + 1) % n]) for i in updated}, "update images"
    got_deletes = {i: render(row[v]) for i, row in decoded.deletes.items()}
    assert got_deletes == dict(enumerate(final)), "delete images"
    for row in [*decoded.inserts.values(), *decoded.deletes.values()]:
        assert len(row) == v + 1 and ABSENT not in row


# (flavor, case) pairs: each server runs the cases its SQL accepts (the marks select by flavor).
PAIRS = [
    pytest.param(param.values[0], c, marks=param.marks, id=f"{param.id}-{c.name}")
    for param in servers.FLAVORS
    for c in cases_for(str(param.values[0]))
]


def test_the_corpus_ran_with_binlog_checksums(full: Captured, minimal: Captured) -> None:
    """Rows bodies must stop before the CRC32: the decoder checks every body ends exactly at its last row."""
    for captured in (full, minimal):
        assert captured.server.query("SELECT @@binlog_checksum")[0][0] == "CRC32"


@pytest.mark.parametrize(("case_flavor", "c"), PAIRS)
def test_full_metadata_decodes_from_the_table_map(corpora: Corpora, case_flavor: str, c: Case) -> None:
    full = corpora.get(case_flavor, "FULL")
    events = full.events[c.name]
    json_cols = {"v"} if c.ddl.split()[0] == "json" else set()
    check_case(c, case_flavor, decode_all(events, lambda tm: bare_table_def(tm, json_cols)), full.updated[c.name])


@pytest.mark.parametrize(("case_flavor", "c"), PAIRS)
def test_minimal_metadata_decodes_from_the_schema(corpora: Corpora, case_flavor: str, c: Case) -> None:
    minimal = corpora.get(case_flavor, "MINIMAL")
    table_def = info_schema_table_def(minimal.server, DB, c.name)
    events = minimal.events[c.name]
    assert all(ev.column_names is None for ev in events if isinstance(ev, TableMap))
    check_case(c, case_flavor, decode_all(events, lambda tm: table_def), minimal.updated[c.name])
    stripped = [_stripped(ev) if isinstance(ev, TableMap) else ev for ev in events]
    check_case(c, case_flavor, decode_all(stripped, lambda tm: table_def), minimal.updated[c.name])


# --------------------------------------------------------------------------------------- whole tables
def wide_cases(flavor: str) -> list[Case]:
    """The cases that fit one wide table: no table-level clause in their DDL (an index), no invisible column
    (VALUES does not list it), no session setup but sql_mode."""
    return [
        c
        for c in cases_for(flavor)
        if c.base is None and all("sql_mode" in s for s in c.setup) and not {"INDEX", "INVISIBLE"} & set(c.ddl.split())
    ]


def test_one_wide_table_with_every_type_and_mixed_nulls(full: Captured) -> None:
    """All corpus columns side by side: fixed-width runs interleaved with NULLs and variable columns."""
    server = full.server
    WIDE = wide_cases(server.flavor)
    file, pos = _start(server)
    n_rows = max(len(c.values) for c in WIDE) + 2
    cols = ", ".join(f"c{i} {c.ddl}" for i, c in enumerate(WIDE))

    def row_values(j: int) -> list[str]:
        return [c.values[(j + i) % len(c.values)] for i, c in enumerate(WIDE)]

    def row_expected(j: int) -> list[str]:
        return [c.expected_for(server.flavor)[(j + i) % len(c.values)] for i, c in enumerate(WIDE)]

    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(f"CREATE TABLE {DB}.wide (id int PRIMARY KEY, {cols}) ROW_FORMAT=DYNAMIC")
            for j in range(n_rows):
                cur.execute(f"INSERT INTO {DB}.wide VALUES ({j}, {', '.join(row_values(j))})")
            names = [f"c{i}" for i in range(len(WIDE))]
            for j in range(n_rows):
                sets = ", ".join(f"{n} = {v}" for n, v in zip(names, row_values(j + 1), strict=True))
                assert cur.execute(f"UPDATE {DB}.wide SET {sets} WHERE id = {j}") == 1
            cur.execute(f"DELETE FROM {DB}.wide")
    finally:
        conn.close()
    events = read_binlog(server, (str(file), int(pos)))["wide"]
    json_cols = {f"c{i}" for i, c in enumerate(WIDE) if c.ddl == "json"}
    decoded = decode_all(events, lambda tm: bare_table_def(tm, json_cols))
    assert sorted(decoded.inserts) == list(range(n_rows))
    for j in range(n_rows):
        assert [render(v) for v in decoded.inserts[j][1:]] == row_expected(j), f"insert of row {j}"
        before, after = decoded.updates[j]
        assert [render(v) for v in before[1:]] == row_expected(j), f"update before image of row {j}"
        assert [render(v) for v in after[1:]] == row_expected(j + 1), f"update after image of row {j}"
        assert [render(v) for v in decoded.deletes[j][1:]] == row_expected(j + 1), f"delete of row {j}"


def _write(server: PrivateServer, *statements: str) -> dict[str, list[TableMap | RowsEvent]]:
    file, pos = _start(server)
    server.execute(*statements)
    return read_binlog(server, (str(file), int(pos)))


def test_minimal_row_image_leaves_absent_columns_out(full: Captured) -> None:
    events = _write(
        full.server,
        f"CREATE TABLE {DB}.partial (id int PRIMARY KEY, a int, b varchar(10), c decimal(5,2))",
        f"INSERT INTO {DB}.partial VALUES (1, 5, 'x', 1.50)",
        "SET SESSION binlog_row_image = 'MINIMAL'",
        f"UPDATE {DB}.partial SET a = 6 WHERE id = 1",
        f"DELETE FROM {DB}.partial",
    )["partial"]
    decoded = decode_all(events, lambda tm: bare_table_def(tm, set()))
    assert [render(v) for v in decoded.inserts[1]] == ["1", "5", '"x"', "1.50"]
    before, after = decoded.updates[1]
    assert before[0] == 1 and before[1:] == [ABSENT, ABSENT, ABSENT]
    assert after[0] is ABSENT and after[1] == 6 and after[2:] == [ABSENT, ABSENT]
    assert decoded.deletes[1] == [1, ABSENT, ABSENT, ABSENT]


def test_unsupported_charset_names_table_column_and_charset(full: Captured) -> None:
    events = _write(
        full.server,
        f"CREATE TABLE {DB}.koi (id int, name varchar(5) CHARACTER SET koi8r)",
        f"INSERT INTO {DB}.koi VALUES (1, 'x')",
    )["koi"]
    tm = next(ev for ev in events if isinstance(ev, TableMap))
    with pytest.raises(UnsupportedTypeError, match=r"fidelity\.koi column 'name' uses charset 'koi8r'"):
        compile_decoder(tm, bare_table_def(tm, set()))
    with pytest.raises(UnsupportedTypeError, match="koi8r"):
        compile_decoder(tm, info_schema_table_def(full.server, DB, "koi"))


TABLE_MAP_DDL = (
    f"CREATE TABLE {DB}.meta (id int unsigned NOT NULL, g point, s varchar(5) CHARACTER SET latin1, "
    "y year, e enum('é','x') CHARACTER SET latin1, st set('a','b'), n tinyint NOT NULL, "
    "b binary(3), t text CHARACTER SET utf8mb4, d decimal(5,2) unsigned, PRIMARY KEY (n, id))"
)


# The collation of a utf8mb4 column without one: MariaDB's utf8mb4_general_ci, MySQL 8+'s utf8mb4_0900_ai_ci.
_DEFAULT_UTF8MB4 = {"mariadb": 45, "mysql": 255}


def test_table_map_carries_the_full_metadata(full: Captured) -> None:
    events = _write(full.server, TABLE_MAP_DDL, f"INSERT INTO {DB}.meta (id, n) VALUES (1, 2)")["meta"]
    tm = next(ev for ev in events if isinstance(ev, TableMap))
    assert (tm.database, tm.table) == (DB, "meta")
    assert tm.column_names == ("id", "g", "s", "y", "e", "st", "n", "b", "t", "d")
    assert [c.type_code for c in tm.columns] == [3, 255, 15, 13, 247, 248, 1, 254, 252, 246]
    assert tm.unsigned == (True, False, False, True, False, False, False, False, False, True)
    utf8mb4 = _DEFAULT_UTF8MB4[full.server.flavor]
    assert tm.charsets == (None, None, 8, None, 8, utf8mb4, None, 63, utf8mb4, None)
    assert tm.enum_values == (None, None, None, None, ("é", "x"), ("a", "b"), None, None, None, None)
    assert tm.primary_key == (6, 0)
    assert [c.nullable for c in tm.columns] == [False, True, True, True, True, True, False, True, True, True]
    assert (tm.columns[2].max_length, tm.columns[7].max_length, tm.columns[8].length_size) == (5, 3, 2)
    assert (tm.columns[9].precision, tm.columns[9].decimals) == (5, 2)
    assert (tm.columns[4].size, tm.columns[5].size) == (1, 1)


def test_table_map_with_minimal_metadata(minimal: Captured) -> None:
    events = _write(minimal.server, TABLE_MAP_DDL, f"INSERT INTO {DB}.meta (id, n) VALUES (1, 2)")["meta"]
    tm = next(ev for ev in events if isinstance(ev, TableMap))
    assert (tm.column_names, tm.enum_values, tm.primary_key) == (None, None, None)
    # MINIMAL still logs signedness and the string columns' charsets (not ENUM/SET ones), on both flavors.
    assert tm.unsigned == (True, False, False, True, False, False, False, False, False, True)
    assert tm.charsets == (None, None, 8, None, None, None, None, 63, _DEFAULT_UTF8MB4[minimal.server.flavor], None)
