"""The compiled fast path against the reference path: the whole type-fidelity corpus through the worker.

The same binlog is captured twice by the worker as a process, once with `MYSQLCAPTURE_DECODER=reference`
(the pure-Python decoder, then orjson) and once with the default fast path (the compiled renderer
where it covers a table); the two change logs must agree event by event, column by column, byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.decode.native import RowRenderer, native_renderer
from mysqlcapture_worker.replication.events import TableMap

from tests import servers
from tests.fidelity_corpus import cases_for
from tests.integration.test_type_fidelity import (
    DB,
    bare_table_def,
    info_schema_table_def,
    read_binlog,
    wide_cases,
    write_case,
)
from tests.support import manifest, read_changelog, run_cli, write_manifest

pytestmark = [
    # mysql-replication 1.0.17 opens its control connection with PyMySQL's deprecated `db=` argument.
    pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning"),
]

# Types the compiled renderer must cover (a regression to the reference path would go unnoticed otherwise).


def _write_corpus(server: PrivateServer) -> tuple[str, int]:
    """Every corpus case (insert, update, delete), a wide table of all types with mixed NULLs, partial images."""
    status = server.binlog_status()
    file, pos = status.file, status.pos
    WIDE = wide_cases(server.flavor)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
        for c in cases_for(server.flavor):
            write_case(conn, c)
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")
            cols = ", ".join(f"c{i} {c.ddl}" for i, c in enumerate(WIDE))
            cur.execute(f"CREATE TABLE {DB}.wide (id int PRIMARY KEY, {cols})")
            n_rows = max(len(c.values) for c in WIDE) + 2
            for j in range(n_rows):
                # Row j takes value j+i of column i, and NULL in every third column from j on: mixed patterns.
                values = ["NULL" if (i + j) % 3 == 0 else c.values[(j + i) % len(c.values)] for i, c in enumerate(WIDE)]
                cur.execute(f"INSERT INTO {DB}.wide VALUES ({j}, {', '.join(values)})")
            for j in range(n_rows):
                sets = ", ".join(f"c{i} = {c.values[(j + i + 1) % len(c.values)]}" for i, c in enumerate(WIDE))
                cur.execute(f"UPDATE {DB}.wide SET {sets} WHERE id = {j}")
            cur.execute(f"DELETE FROM {DB}.wide WHERE id % 2 = 0")
            # A session logging partial images: the fast path hands these events to the reference path.
            cur.execute(f"CREATE TABLE {DB}.partial (id int PRIMARY KEY, a int, b varchar(10), c decimal(5,2))")
            cur.execute(f"INSERT INTO {DB}.partial VALUES (1, 5, 'x', 1.50), (2, 6, 'y', -2.25)")
            cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
            cur.execute(f"UPDATE {DB}.partial SET a = a + 1")
            cur.execute(f"DELETE FROM {DB}.partial")
    finally:
        conn.close()
    return str(file), int(pos)


@pytest.fixture(scope="module", params=["FULL", "MINIMAL"], ids=["full-metadata", "minimal-metadata"])
def corpus(flavor: str, request: pytest.FixtureRequest) -> Iterator[tuple[PrivateServer, tuple[str, int]]]:
    server_id = 7320 if request.param == "FULL" else 7321
    with servers.running(flavor, server_id, binlog_row_metadata=request.param) as srv:  # type: ignore[arg-type]
        yield srv, _write_corpus(srv)


def _capture(
    server: PrivateServer, start: tuple[str, int], tmp_path: Path, decoder: str, monkeypatch: pytest.MonkeyPatch
) -> list[dict[str, Any]]:
    uri = str(tmp_path / decoder)
    doc = manifest(
        decoder,
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "position", "binlogFile": start[0], "binlogPosition": start[1]},
        tables={"include": [f"{DB}.*"]},
    )
    monkeypatch.setenv("MYSQLCAPTURE_DECODER", decoder)
    result = run_cli("run", str(write_manifest(tmp_path / f"{decoder}.yaml", doc)), "--exit-at-end", "--plain-logs")
    assert result.returncode == 0, f"{decoder} worker failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return read_changelog(uri)


def test_fast_path_change_log_equals_reference_byte_for_byte(
    corpus: tuple[PrivateServer, tuple[str, int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, start = corpus
    reference = _capture(server, start, tmp_path, "reference", monkeypatch)
    fast = _capture(server, start, tmp_path, "fast", monkeypatch)
    rows = [r for r in reference if r["sql"] is None]
    tables = {r["table"] for r in rows}
    cases = cases_for(server.flavor)
    assert {c.name for c in cases} | {"wide", "partial"} <= tables, "every corpus table reached the change log"
    assert len(rows) > 4 * len(cases)
    assert len(fast) == len(reference)
    for ref, got in zip(reference, fast, strict=True):
        assert got == ref, f"event {ref['order_key']} ({ref['table']} {ref['type']}) differs"


def test_the_renderer_covers_every_type(corpus: tuple[PrivateServer, tuple[str, int]]) -> None:
    """The comparison above only means something where the fast path actually renders: every corpus table, JSON,
    spatial and multi-byte charsets included, and the wide table that holds them all.

    With FULL metadata the plans come from the TABLE_MAP (names only from the schema); with MINIMAL, from
    the schema as information_schema describes it, as the worker's schema history does.
    """
    server, start = corpus
    full = server.query("SELECT @@binlog_row_metadata")[0][0] == "FULL"
    assert RowRenderer is not None, "mysqlcapture_native is not installed (make setup builds it)"
    json_cases = {c.name for c in cases_for(server.flavor) if c.ddl.split()[0] == "json"}
    covered = set()
    tables = read_binlog(server, start)
    for table, events in tables.items():
        tm = next(ev for ev in events if isinstance(ev, TableMap))
        if full:
            table_def = bare_table_def(tm, {"v"} if table in json_cases else set())
        else:
            table_def = info_schema_table_def(server, DB, table)
        if native_renderer(tm, table_def, (0,)) is not None:
            covered.add(table)
    assert "wide" in tables and len(tables) > 100
    assert covered == set(tables), f"not rendered natively: {sorted(set(tables) - covered)}"
