"""Typed current-state tables against real MariaDB and MySQL: every column type of the fidelity corpus, and a
randomized workload with DDL, a mid-stream snapshot and a SIGKILLed compaction, compared with `SELECT *`."""

from __future__ import annotations

import decimal
import functools
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from mysqlcapture_api.changelog import read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_compaction import cli, history, job, targets
from mysqlcapture_compaction import output as layout
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.delta import DeltaSink
from pyspark.sql import SparkSession

from tests.fidelity_corpus import Case, cases_for
from tests.spark.compare import (
    arrow_type,
    assert_history_matches_state,
    assert_state_equals_source,
    current_tables,
    source_tables,
)
from tests.support import REPO, WorkerProcess, manifest, run_cli, wait_until, write_manifest
from tests.workload import COLUMN_TYPES, Workload, random_value

pytestmark = [pytest.mark.spark]


def _wait_caught_up(server: PrivateServer, uri: str, app: str) -> None:
    """Wait until the change log's checkpoint reaches where the server's binlog is now (a fixed place: the worker's
    own heartbeats keep moving the binlog's end, which a loaded machine's worker could trail for good)."""
    status = server.binlog_status()
    target = Coordinate(str(status.file), int(status.pos))
    sink = DeltaSink(uri, app_id=f"mysqlcapture-{app}")

    def reached() -> bool:
        ckpt = sink.load_checkpoint()
        return ckpt is not None and ckpt.coordinate >= target

    wait_until(reached, timeout=120, what="the change log to catch up")


def _execute(server: PrivateServer, conn: Any, uri: str, app: str, *statements: str) -> None:
    """Run `statements` on the source, then wait until the change log holds them."""
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
    _wait_caught_up(server, uri, app)


def _capture(server: PrivateServer, tmp_path: Path, name: str) -> tuple[Path, str, WorkerProcess]:
    uri = str(tmp_path / "changelog")
    doc = manifest(name, port=server.port, sink={"type": "delta", "delta": {"uri": uri}}, start={"from": "latest"})
    doc["spec"]["flush"] = {"maxIntervalMs": 200}
    doc["spec"]["heartbeat"] = {"intervalSeconds": 1}
    path = write_manifest(tmp_path / f"{name}.yaml", doc)
    worker = WorkerProcess(path)
    sink = DeltaSink(uri, app_id=f"mysqlcapture-{name}")
    wait_until(
        lambda: sink.load_checkpoint() is not None or not worker.alive(), timeout=60, what="the worker's first commit"
    )
    assert worker.alive(), worker.log_text()
    return path, uri, worker


# Corpus cases that share a session setup share a table, a column each (named after the case): a compaction's
# cost is mostly Spark's and Delta's fixed cost per table, and one table per case made this test take minutes.
CASES_PER_TABLE = 10


def _corpus_tables(
    flavor: str, cases: list[Case] | None = None
) -> list[tuple[tuple[str, ...], str, list[Case], list[str]]]:
    """(session setup, the table's columns, its cases, the column each case's values go to), for the flavor's
    corpus or `cases`. A case whose definition names its column `v` (an index expression) or a base column `b`
    (generated columns) keeps a table of its own, as the corpus lays it out."""
    chosen = cases_for(flavor) if cases is None else cases
    own = [c for c in chosen if c.base or re.search(r"\bv\b", c.ddl)]
    alone = [
        (c.setup, f"id int PRIMARY KEY, {f'b {c.base}, ' if c.base else ''}v {c.ddl}", [c], ["b" if c.base else "v"])
        for c in own
    ]
    by_setup: dict[tuple[str, ...], list[Case]] = {}
    for c in chosen:
        if c not in own:
            by_setup.setdefault(c.setup, []).append(c)
    grouped = []
    for setup, cases in by_setup.items():
        for i in range(0, len(cases), CASES_PER_TABLE):
            part = cases[i : i + CASES_PER_TABLE]
            columns = "id int PRIMARY KEY, " + ", ".join(f"`{c.name}` {c.ddl}" for c in part)
            grouped.append((setup, columns, part, [f"`{c.name}`" for c in part]))
    return alone + grouped


def create_corpus_table(cur: Any, n: int, table: tuple[tuple[str, ...], str, list[Case], list[str]]) -> int:
    """typed.t<n> as `_corpus_tables` lays it out, row i holding each case's i-th value (a shorter case repeats its
    values), written in the cases' session setup; returns its row count."""
    setup, columns, cases, targets = table
    cur.execute("SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'")
    cur.execute(f"CREATE TABLE typed.t{n:03d} ({columns}) DEFAULT CHARSET=utf8mb4")
    for stmt in setup:
        cur.execute(stmt)
    count = max(len(c.values) for c in cases)
    rows = ", ".join(
        "(" + ", ".join([str(i), *(c.values[i % len(c.values)] for c in cases)]) + ")" for i in range(count)
    )
    cur.execute(f"INSERT INTO typed.t{n:03d} (id, {', '.join(targets)}) VALUES {rows}")
    return count


def test_every_corpus_type_lands_typed_and_exact(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source
) -> None:
    """Each corpus column (every MySQL/MariaDB type, zero dates, DECIMAL(65,30), every charset) in its Spark type,
    each value equal to the source's, unrepresentable ones null with their text in `_cdc_raw`."""
    server = start_source(7601)
    _, uri, worker = _capture(server, tmp_path, "types")
    conn = server.connect()
    tables = _corpus_tables(flavor)
    values = rows_total = 0
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE typed CHARACTER SET utf8mb4")
            for n, table in enumerate(tables):
                count = create_corpus_table(cur, n, table)
                cases = table[2]
                # Every row moves to another key: its history shows the typed before image under the old key.
                cur.execute(f"UPDATE typed.t{n:03d} SET id = id + 1000")
                values += count * (1 + len(cases) + sum(1 for c in cases if c.base))
                rows_total += count
        _wait_caught_up(server, uri, "types")
    finally:
        assert worker.stop() == 0, worker.log_text()
    result = job.run(spark, changelog=uri, output=str(tmp_path / "out"))
    assert result.events >= len(tables) + 2 * rows_total  # a CREATE per table, each row's insert and update
    compared = assert_state_equals_source(current_tables(str(tmp_path / "out")), source_tables(conn, ["typed"]))
    assert compared == values
    # The history, typed as the tables: each row's insert, then its move (before image = the insert's after).
    assert assert_history_matches_state(str(tmp_path / "out"), "typed") >= 2 * rows_total
    conn.close()


def _kinds(uri: str) -> list[str]:
    return [str(r["type"]) for r in DeltaTable(uri).to_pyarrow_table(columns=["type"]).to_pylist()]


def _compact_cli(manifest_path: Path, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "mysqlcapture_compaction.cli", "compact", str(manifest_path), "--master", "local[2]"]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _requests_done(server: PrivateServer) -> int:
    return int(str(server.query("SELECT COUNT(*) FROM mysqlcapture.snapshot_requests WHERE done_at IS NOT NULL")[0][0]))


def _wait_snapshot(server: PrivateServer, worker: WorkerProcess, tables: str, requests: int = 1) -> None:
    """Until the worker marks that many snapshot requests done (the worker's log in the failure)."""
    try:
        wait_until(
            lambda: worker.running() and _requests_done(server) >= requests,
            timeout=300,
            what=f"the snapshot of {tables}",
        )
    except AssertionError as failed:
        raise AssertionError(f"{failed}; the worker's log ends:\n{worker.log_text()[-4000:]}") from None


def test_randomized_workload_with_ddl_snapshot_and_a_killed_run_equals_the_source(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source
) -> None:
    """Three incremental runs (the second SIGKILLed, then rerun) over a randomized typed workload with every kind
    of DDL and a snapshot requested mid-stream, a third of its steps logged with a session's partial row images
    (MINIMAL or NOBLOB) and some beside a rolled-back transaction; then every table equals `SELECT *`, type and
    value."""
    server = start_source(7602)
    conn = server.connect()
    workload = Workload(conn, "shop", seed=1066, ddl=True, truncate=True)
    workload.setup(n_tables=3)
    for table in list(workload.tables.values()):
        workload.insert(table, 20)  # rows the capture first sees in its snapshot
    path, uri, worker = _capture(server, tmp_path, "cmp")
    output = layout.default_output(uri)
    log = tmp_path / "compact.log"
    images = random.Random(1066)
    rollbacks: list[str] = []

    def step() -> None:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = {images.choice(['FULL', 'FULL', 'MINIMAL', 'NOBLOB'])}")
            if images.random() < 0.15:  # a transaction rolled back: nothing of it may reach a table
                name = images.choice(sorted(workload.tables))
                cur.execute("BEGIN")
                cur.execute(f"UPDATE `shop`.`{name}` SET rev = rev + 1000")
                cur.execute(f"DELETE FROM `shop`.`{name}` WHERE id % 2 = 0")
                cur.execute("ROLLBACK")
                rollbacks.append(name)
        workload.step()

    try:
        for _ in range(25):
            step()
        _wait_caught_up(server, uri, "cmp")
        first = job.run(spark, changelog=uri, output=output)
        requested = run_cli("resnapshot", str(path))
        assert requested.returncode == 0, requested.stderr
        for _ in range(25):
            step()
        # Done when the worker marks the request done: the workload renames and drops tables meanwhile, and a table
        # gone by the time the snapshot reaches it is skipped, so the bootstrap-completes are no count to wait for.
        _wait_snapshot(server, worker, "every table")
        _wait_caught_up(server, uri, "cmp")
        assert {"bootstrap-start", "bootstrap-insert", "table-alter"} <= set(_kinds(uri))
        # The second run is killed once some table has taken its commit, and run again.
        proc = _compact_cli(path, log)
        tables = Path(output) / "tables" / "shop"
        commits = {t: len(list((t / "_delta_log").glob("*.json"))) for t in tables.iterdir()}
        wait_until(
            lambda: (
                proc.poll() is not None
                or any(len(list((t / "_delta_log").glob("*.json"))) > n for t, n in commits.items())
            ),
            timeout=300,
            what="a table's commit in the second run",
            interval=0.01,
        )
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # Killed before its run ended: nothing of it is marked compacted. Killed after (its run printed its end, the
        # kill landed in the OPTIMIZE that follows on a loaded machine): the marker is that end.
        finished = re.search(
            r"compacted change-log version \d+: \d+ events, ordering keys \d+\.\.(\d+)", log.read_text()
        )
        expected = int(finished.group(1)) if finished else first.end_key
        assert layout.last_compacted(output) == expected or proc.returncode == 0
        rerun = _compact_cli(path, log)
        assert rerun.wait(timeout=600) == 0, log.read_text()
        for _ in range(15):
            step()
        _wait_caught_up(server, uri, "cmp")
        job.run(spark, changelog=uri, output=output)
        assert "table-truncate" in set(_kinds(uri))
        absent = [e["absent"] for e in read_delta(uri).to_pylist() if e["type"] == "update"]
        assert sum(1 for a in absent if a) >= 5, absent  # updates whose after images left columns out
        assert len(rollbacks) >= 5, rollbacks
    finally:
        assert worker.stop() == 0, worker.log_text()
    compared = assert_state_equals_source(current_tables(output), source_tables(conn, ["shop"]))
    assert compared >= 500
    # A fresh compaction of the whole change log in one run gives the same tables.
    again = str(tmp_path / "once")
    job.run(spark, changelog=uri, output=again)
    assert current_tables(again) == current_tables(output)
    conn.close()


class _KeylessWorkload:
    """Tables without a primary key (random typed columns) under seeded random statements: new rows, copies of
    rows (equal rows), updates and deletes of one of several candidates (LIMIT)."""

    def __init__(self, conn: Any, seed: int) -> None:
        self.conn, self.rng = conn, random.Random(seed)
        self.cols = {name: {f"c{i}": t for i, t in enumerate(self.rng.sample(COLUMN_TYPES, 5))} for name in "pq"}

    def create(self) -> list[str]:
        bodies = {n: ", ".join(f"`{c}` {t}" for c, t in defs.items()) for n, defs in self.cols.items()}
        return ["CREATE DATABASE ms", *(f"CREATE TABLE ms.{n} (g INT NOT NULL, {b})" for n, b in bodies.items())]

    def steps(self, n: int) -> None:
        rng = self.rng
        with self.conn.cursor() as cur:
            for _ in range(n):
                name = rng.choice(list(self.cols))
                defs, g, r = self.cols[name], rng.randint(0, 4), rng.random()
                if r < 0.35:
                    values = [g, *(random_value(rng, t) for t in defs.values())]
                    cur.execute(f"INSERT INTO ms.{name} VALUES ({', '.join(['%s'] * len(values))})", values)
                elif r < 0.55:  # a row equal to one already there
                    cur.execute(f"INSERT INTO ms.{name} SELECT * FROM ms.{name} WHERE g = %s LIMIT 1", (g,))
                elif r < 0.75:
                    c, t = rng.choice(list(defs.items()))
                    cur.execute(f"UPDATE ms.{name} SET `{c}` = %s WHERE g = %s LIMIT 1", (random_value(rng, t), g))
                elif r < 0.9:
                    cur.execute(f"DELETE FROM ms.{name} WHERE g = %s LIMIT 1", (g,))
                else:
                    cur.execute(f"UPDATE ms.{name} SET g = %s WHERE g = %s LIMIT 2", (rng.randint(0, 4), g))


def test_tables_without_a_primary_key_are_compacted_as_the_multisets_of_their_rows(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows without a primary key are matched by value: equal rows are held as often as the source holds them, and
    an update or delete of one of them changes one. Its history lists every version (`pk` null). Through an ADD
    COLUMN (held values hashed again), a RENAME, a keyed table whose primary key is dropped (its rows matched by
    value from there), and ADD PRIMARY KEY then a snapshot (keyed again). Beside them, a table with a composite key
    whose update moves a row, and two tables under a seeded random workload (`_KeylessWorkload`, an ADD COLUMN and
    a snapshot, read in one scan, mid-stream). Every table equals `SELECT *` after each of three runs."""
    server = start_source(7604)
    path, uri, worker = _capture(server, tmp_path, "nk")
    output = str(tmp_path / "out")
    keyless = targets.Target(output, "nk", "log")
    keys: dict[tuple[str, str], list[str]] = {("nk", "keyed"): ["k", "id"], ("nk", "log"): [], ("nk", "bag"): []}
    conn = server.connect()
    randomized = _KeylessWorkload(conn, seed=4242)

    sql = functools.partial(_execute, server, conn, uri, "nk")

    def equal(compared: int) -> None:
        state = {k: v for k, v in current_tables(output).items() if k[0] == "nk"}
        assert assert_state_equals_source(state, source_tables(conn, ["nk"]), pk=keys) == compared

    try:
        sql(
            "CREATE DATABASE nk",
            "CREATE TABLE nk.log (a INT, b VARCHAR(10))",
            "CREATE TABLE nk.bag (a INT, at DATETIME(6), d DATE)",
            "INSERT INTO nk.bag VALUES (7, '2024-01-01 00:00:00.000001', '2024-01-01'), "
            "(7, '2024-01-01 00:00:00.000001', '2024-01-01'), (7, '2024-01-01 00:00:00.000002', NULL)",
            "CREATE TABLE nk.keyed (id INT, k VARCHAR(5), v INT, PRIMARY KEY (k, id))",  # a composite key
            "INSERT INTO nk.log VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, NULL), (1, 'x')",
            "UPDATE nk.log SET b = 'z' WHERE a = 2",
            "DELETE FROM nk.log WHERE a = 3",
            "UPDATE nk.log SET b = 'w' WHERE a = 1 LIMIT 1",  # one of three equal rows
            "DELETE FROM nk.log WHERE b = 'x' LIMIT 1",  # one of the two left
            "INSERT INTO nk.keyed VALUES (1, 'a', 1), (2, 'b', 2), (3, 'b', 3)",
            "UPDATE nk.keyed SET k = 'c' WHERE id = 2",  # the row moves to key ('c', 2)
            "UPDATE nk.bag SET d = '2025-02-02' WHERE at = '2024-01-01 00:00:00.000001' LIMIT 1",
            *randomized.create(),
        )
        randomized.steps(60)
        sql()
        job.run(spark, changelog=uri, output=output)
        assert targets.by_value(keyless.path) and targets.dropped_for(keyless.path) is None
        versions = read_delta(keyless.history).to_pylist()
        assert {v["pk"] for v in versions} == {None}
        images = sorted(
            (v["type"], *((v[i]["a"], v[i]["b"]) if v[i] else (None, None) for i in ("before", "after")))
            for v in versions
        )
        assert images == [
            ("delete", (1, "x"), (None, None)),
            ("delete", (3, None), (None, None)),
            *[("insert", (None, None), (1, "x"))] * 3,
            ("insert", (None, None), (2, "y")),
            ("insert", (None, None), (3, None)),
            ("update", (1, "x"), (1, "w")),
            ("update", (2, "y"), (2, "z")),
        ]
        equal(3 * 3 + 3 * 2 + 3 * 3)  # log: (1, x), (1, w), (2, z); bag: three rows, two still equal
        show = ["show", "--changelog", uri, "--output", output, "--table", "nk.log"]
        capsys.readouterr()
        assert cli.main(show) == 0 and capsys.readouterr().out.endswith("(3 rows)\n")

        randomized.steps(20)
        sql(
            "INSERT INTO nk.log VALUES (1, 'x')",
            "ALTER TABLE nk.log ADD COLUMN c INT NOT NULL DEFAULT 9",  # every held row's value changes
            "DELETE FROM nk.log WHERE b = 'x' LIMIT 1",  # matches a row written before the ALTER
            "UPDATE nk.log SET c = 10 WHERE b = 'w'",
            "RENAME TABLE nk.bag TO nk.bag2",
            "UPDATE nk.bag2 SET a = 8 WHERE d IS NULL",
            "ALTER TABLE nk.keyed DROP PRIMARY KEY",  # its rows are matched by value from here on
            "UPDATE nk.keyed SET v = 30 WHERE id = 3",
            "INSERT INTO nk.keyed VALUES (3, 'b', 30)",  # equal to the row just updated
            "ALTER TABLE ms.p ADD COLUMN extra INT NOT NULL DEFAULT 3",
        )
        randomized.cols["p"]["extra"] = "INT NOT NULL"
        randomized.steps(20)
        sql()
        job.run(spark, changelog=uri, output=output)
        keys = {("nk", "keyed"): [], ("nk", "log"): [], ("nk", "bag2"): []}
        assert all(targets.by_value(targets.Target(output, "nk", t).path) for t in ("log", "bag2", "keyed"))
        assert targets.dropped_for(targets.Target(output, "nk", "bag").path) == "true"
        equal(3 * 3 + 3 * 3 + 4 * 3)

        # The key the ALTER adds numbers rows the change log never re-sends; a snapshot re-sends them, keyed.
        sql("ALTER TABLE nk.log ADD COLUMN id INT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST")
        for table in ("nk.log", "ms.q"):
            requested = run_cli("resnapshot", str(path), "--table", table)
            assert requested.returncode == 0, requested.stderr
        randomized.steps(30)
        _wait_snapshot(server, worker, "nk.log and ms.q", requests=2)
        randomized.steps(10)
        sql("UPDATE nk.log SET b = 'u' WHERE b = 'x' LIMIT 1", "DELETE FROM nk.keyed WHERE v = 30 LIMIT 1")
        job.run(spark, changelog=uri, output=output)
        assert "bootstrap-insert" in set(_kinds(uri))
    finally:
        assert worker.stop() == 0, worker.log_text()
    assert not targets.by_value(keyless.path)
    keys[("nk", "log")] = ["id"]
    equal(3 * 4 + 3 * 3 + 3 * 3)
    capsys.readouterr()
    assert cli.main(show) == 0 and capsys.readouterr().out.endswith("(3 rows)\n")
    source = source_tables(conn, ["ms"])
    rows = [r for _, table in source.values() for r in table]
    assert len(rows) >= 30 and len({repr(sorted(r.items())) for r in rows}) < len(rows)  # equal rows among them
    state = {k: v for k, v in current_tables(output).items() if k[0] == "ms"}
    assert assert_state_equals_source(state, source, pk={("ms", "p"): [], ("ms", "q"): []}) >= 30 * 6
    assert all(targets.by_value(targets.Target(output, "ms", t).path) for t in ("p", "q"))
    conn.close()


def test_truncate_table_empties_the_compacted_table_and_ends_each_rows_history(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRUNCATE TABLE removes rows without row events: the change log carries a `table-truncate` event, and
    compaction empties the table there and lists a delete version of each row it held. Tables truncated after a
    compaction, within one batch, with no current state yet (rows the capture never saw), and a table without a
    primary key that got one (the truncate makes its contents known: no snapshot needed). One run is killed
    between the history's commit and the table's, and run again: every delete version is listed once."""
    server = start_source(7605)
    with server.connect() as before, before.cursor() as cur:
        cur.execute("CREATE DATABASE tr")
        cur.execute("CREATE TABLE tr.pre (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO tr.pre VALUES (1, 'unseen'), (2, 'unseen')")  # before the capture starts
    _, uri, worker = _capture(server, tmp_path, "tr")
    output = str(tmp_path / "out")
    conn = server.connect()

    sql = functools.partial(_execute, server, conn, uri, "tr")

    try:
        sql(
            "CREATE TABLE tr.t (id INT PRIMARY KEY, v VARCHAR(10), d DATE, amount DECIMAL(10,2))",
            "INSERT INTO tr.t VALUES (1, 'a', '2024-01-31', 1.50), (2, 'b', NULL, -2.25), (3, 'c', '1999-12-31', 0)",
            "CREATE DATABASE trk",
            "CREATE TABLE trk.nk (a INT, b VARCHAR(5))",
            "INSERT INTO trk.nk VALUES (1, 'x'), (1, 'x')",
        )
        job.run(spark, changelog=uri, output=output)
        assert targets.by_value(targets.Target(output, "trk", "nk").path)
        sql(
            "UPDATE tr.t SET v = 'a2' WHERE id = 1",
            "TRUNCATE TABLE tr.t",
            "INSERT INTO tr.t VALUES (3, 'again', '2025-06-01', 3.00)",  # a key the truncate freed, used again
            "CREATE TABLE tr.u (id INT PRIMARY KEY, v INT)",
            "INSERT INTO tr.u VALUES (1, 10), (2, 20)",
            "TRUNCATE tr.u",  # created, filled and truncated within one batch
            "INSERT INTO tr.u VALUES (2, 21)",
            "TRUNCATE TABLE tr.pre",  # no current state yet: the rows it removes were never captured
            "INSERT INTO tr.pre VALUES (5, 'seen')",
            "ALTER TABLE trk.nk ADD COLUMN id INT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST",
            "TRUNCATE TABLE trk.nk",  # the table is empty and keyed from here on
            "INSERT INTO trk.nk (a, b) VALUES (7, 'y'), (7, 'y')",
        )
        events = sorted(read_delta(uri).to_pylist(), key=lambda e: e["order_key"])
        truncates = [e for e in events if e["type"] == "table-truncate"]
        named = [(e["database"], e["table"]) for e in truncates]
        assert named == [("tr", "t"), ("tr", "u"), ("tr", "pre"), ("trk", "nk")]
        assert [e["sql"] for e in truncates][:2] == ["TRUNCATE TABLE tr.t", "TRUNCATE tr.u"]
        # The run dies once the history of tr.t holds its delete versions, before the table is emptied.
        real = targets.delete_older

        def crash(*args: object, **kwargs: object) -> None:
            raise RuntimeError("killed between the history's commit and the table's")

        monkeypatch.setattr(targets, "delete_older", crash)
        with pytest.raises(RuntimeError, match="killed between"):
            job.run(spark, changelog=uri, output=output)
        monkeypatch.setattr(targets, "delete_older", real)
        job.run(spark, changelog=uri, output=output)
    finally:
        assert worker.stop() == 0, worker.log_text()
    source = source_tables(conn, ["tr", "trk"])
    assert {k: len(rows) for k, (_, rows) in source.items()} == {
        ("tr", "t"): 1,
        ("tr", "u"): 1,
        ("tr", "pre"): 1,
        ("trk", "nk"): 2,
    }
    assert assert_state_equals_source(current_tables(output), source) == 4 + 2 + 2 + 3 * 2
    assert not targets.by_value(targets.Target(output, "trk", "nk").path)  # keyed again since the TRUNCATE
    assert assert_history_matches_state(output, "tr") > 0
    truncated = {e["table"]: e for e in truncates}
    one = history.row_history(output, database="tr", table="t", pk="[1]")
    assert [v["type"] for v in one] == ["insert", "update", "delete"]
    gone = one[-1]
    assert gone["after"] is None and gone["before"] == one[1]["after"]
    assert gone["before"]["v"] == "a2" and gone["before"]["amount"] == decimal.Decimal("1.50")
    at = truncated["t"]
    assert (gone["order_key"], gone["gtid"], gone["binlog_file"], gone["event_pos"]) == (
        at["order_key"],
        at["gtid"],
        at["binlog_file"],
        at["event_pos"],
    )
    three = history.row_history(output, database="tr", table="t", pk="[3]")
    assert [v["type"] for v in three] == ["insert", "delete", "insert"]
    assert three[-1]["after"]["v"] == "again"
    two = history.row_history(output, database="tr", table="u", pk="[2]")
    assert [(v["type"], (v["after"] or v["before"])["v"]) for v in two] == [
        ("insert", 20),
        ("delete", 20),
        ("insert", 21),
    ]
    deletes = [v for v in read_delta(targets.Target(output, "tr", "t").history).to_pylist() if v["type"] == "delete"]
    assert sorted(v["pk"] for v in deletes) == ["[1]", "[2]", "[3]"]  # once each, despite the killed run
    conn.close()


# Each ALTER below runs on a table with rows already compacted and rows still in the change log, none re-sent:
# what the compacted table shows for them is compaction's own doing (defaults, casts, renames), and must equal
# what the server did to its rows.
EVOLUTION = [
    "ALTER TABLE evo.t ADD COLUMN d_num INT NOT NULL DEFAULT 42",
    "ALTER TABLE evo.t ADD COLUMN d_text VARCHAR(20) NOT NULL DEFAULT 'it''s', ADD COLUMN d_null DATE",
    "ALTER TABLE evo.t ADD COLUMN d_implicit DECIMAL(8,3) NOT NULL FIRST, ADD COLUMN d_enum ENUM('x','y') NOT NULL",
    "ALTER TABLE evo.t ADD COLUMN d_set SET('p','q','r') NOT NULL DEFAULT 'r,p', ADD COLUMN d_bin BINARY(3) "
    "NOT NULL DEFAULT 'a', ADD COLUMN d_time TIME NOT NULL DEFAULT '-01:02:03', ADD COLUMN d_neg BIGINT DEFAULT -7",
    "ALTER TABLE evo.t MODIFY COLUMN small INT, MODIFY COLUMN f DOUBLE, MODIFY COLUMN amount DECIMAL(20,4)",
    "ALTER TABLE evo.t MODIFY COLUMN label VARCHAR(200), MODIFY COLUMN n VARCHAR(30)",
    "ALTER TABLE evo.t CHANGE COLUMN label title VARCHAR(200), DROP COLUMN gone",
    "ALTER TABLE evo.t RENAME TO evo.renamed",
]


def test_alter_table_evolves_compacted_rows_as_the_server_does(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source
) -> None:
    server = start_source(7603)
    _, uri, worker = _capture(server, tmp_path, "evo")
    output = str(tmp_path / "out")
    conn = server.connect()
    next_id = iter(range(1, 10_000))

    def insert(n: int) -> None:
        table = "renamed" if step >= len(EVOLUTION) else "t"
        label = "title" if step >= len(EVOLUTION) - 1 else "label"
        with conn.cursor() as cur:
            for _ in range(n):
                i = next(next_id)
                cur.execute(
                    f"INSERT INTO evo.{table} (id, small, f, amount, {label}, n) VALUES (%s, %s, %s, %s, %s, %s)",
                    (i, -i, i / 3, f"{i}.25", f"row {i}", i * 1000),
                )

    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = ''")  # inserts leave the NOT NULL columns added later implicit
            cur.execute("CREATE DATABASE evo")
            cur.execute(
                "CREATE TABLE evo.t (id INT PRIMARY KEY, small SMALLINT, f FLOAT, amount DECIMAL(10,2), "
                "label VARCHAR(20), n INT, gone TEXT)"
            )
        step = 0
        insert(5)
        for step, statement in enumerate(EVOLUTION, start=1):
            with conn.cursor() as cur:
                cur.execute(statement)
            insert(3)
            if step % 3 == 0:  # some ALTERs meet a compacted table, others only the change log
                _wait_caught_up(server, uri, "evo")
                job.run(spark, changelog=uri, output=output)
        _wait_caught_up(server, uri, "evo")
        job.run(spark, changelog=uri, output=output)
    finally:
        assert worker.stop() == 0, worker.log_text()
    compared = assert_state_equals_source(current_tables(output), source_tables(conn, ["evo"]))
    assert compared == 29 * 15  # 29 rows, 15 columns
    # The history keeps what was, in the newest types: rewritten (cast) when MODIFY changed a column's type after
    # a run had written it; the column dropped keeps its field; the renamed table's history starts at the rename.
    versions = read_delta(targets.Target(output, "evo", "t").history)
    after = versions.schema.field("after").type
    assert (arrow_type(after.field("small")), arrow_type(after.field("n"))) == ("int32", "string")
    assert "gone" in [after.field(i).name for i in range(after.num_fields)]
    images = [v["after"] for v in versions.to_pylist()]
    assert len(images) == 26 and all(a["small"] == -a["id"] and a["n"] == str(a["id"] * 1000) for a in images)
    assert sorted(
        v["after"]["id"] for v in read_delta(targets.Target(output, "evo", "renamed").history).to_pylist()
    ) == [
        27,
        28,
        29,
    ]
    conn.close()


def test_partial_row_images_are_completed_from_each_rows_previous_version(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source
) -> None:
    """A session's MINIMAL or NOBLOB images carry only some columns. The change log lists the others (`absent`);
    compaction takes an update's from the row's previous version (in the same run, or the history of an earlier
    one; a moved row's from its old key, along a chain of moves), an insert's from the column defaults, and gives a
    partial update or delete the previous version as its before image. The tables equal `SELECT *` and every
    before image in the history is the previous version's after image. A table without a primary key (MySQL logs
    a MINIMAL update's after image partly there) is matched by value as whole rows. Through an ADD COLUMN (rows
    before it hold its default) and a RENAME COLUMN between a row's previous version and its partial image, and
    into a table whose definition (its defaults) the worker read from information_schema at its start."""
    server = start_source(7606)
    server.execute(
        "CREATE DATABASE pt",
        "CREATE TABLE pt.pre (id INT PRIMARY KEY, a INT NOT NULL DEFAULT 7, b VARCHAR(10) DEFAULT 'x''y', "
        "d DATE DEFAULT '2024-02-29')",
    )
    _, uri, worker = _capture(server, tmp_path, "pt")
    output = str(tmp_path / "out")
    conn = server.connect()
    sql = functools.partial(_execute, server, conn, uri, "pt")
    keys: dict[tuple[str, str], list[str]] = {
        ("pt", "t"): ["id"], ("pt", "pre"): ["id"], ("pta", "u"): ["id"], ("ptk", "k"): []
    }  # fmt: skip

    def equal() -> int:
        return assert_state_equals_source(current_tables(output), source_tables(conn, ["pt", "pta", "ptk"]), pk=keys)

    try:
        sql(
            "CREATE TABLE pt.t (id INT PRIMARY KEY, a INT NOT NULL DEFAULT 7, b VARCHAR(10) DEFAULT 'dflt', c TEXT, "
            "d DECIMAL(8,2), dt DATETIME(3) DEFAULT '2020-01-02 03:04:05.678', j JSON)",
            "CREATE DATABASE ptk",
            "CREATE TABLE ptk.k (a INT, b INT, c TEXT)",
            "INSERT INTO pt.t VALUES "
            + ", ".join(
                f"({i}, {i * 10}, 'b{i}', 'text {i}', {i}.25, '2024-05-0{i} 10:00:00.125', '{{\"n\": {i}}}')"
                for i in range(1, 7)
            ),
            "INSERT INTO ptk.k VALUES (1, 2, 'x'), (1, 2, 'x'), (3, 4, 'y')",
            "CREATE DATABASE pta",
            "CREATE TABLE pta.u (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
            "INSERT INTO pta.u VALUES (1, 1, 'x'), (2, 2, 'y')",
        )
        job.run(spark, changelog=uri, output=output)
        sql(
            "SET SESSION binlog_row_image = MINIMAL",
            "UPDATE pt.t SET d = 9.50 WHERE id = 1",  # its previous version is in the history
            "UPDATE pt.t SET b = 'b1-2' WHERE id = 1",  # and then in this run
            "UPDATE pt.t SET id = 20 WHERE id = 2",  # a move: the other columns from key 2
            "UPDATE pt.t SET id = 21, a = 100 WHERE id = 20",  # and on: from key 20, which has them from key 2
            "INSERT INTO pt.t (id, d) VALUES (30, 1.25)",  # a, b, dt: their defaults; c, j: null
            "UPDATE pt.t SET c = 'late' WHERE id = 30",
            "DELETE FROM pt.t WHERE id = 3",  # logs the key only
            "UPDATE ptk.k SET b = 5 WHERE a = 3",  # MySQL: the after image holds b only
            "DELETE FROM ptk.k WHERE a = 1 LIMIT 1",
            "INSERT INTO pt.pre (id) VALUES (1)",  # defaults read from information_schema
            "INSERT INTO pt.pre (id, b) VALUES (2, 'two')",
            "ALTER TABLE pta.u ADD COLUMN e INT NOT NULL DEFAULT 3",
            "UPDATE pta.u SET a = 10 WHERE id = 1",  # b from the compacted row, e its default
            "ALTER TABLE pta.u RENAME COLUMN b TO bb",
            "UPDATE pta.u SET a = 20 WHERE id = 2",  # bb: the compacted row's b
            "UPDATE pta.u SET a = 11 WHERE id = 1",  # bb: b of its previous version, in this run
            "SET SESSION binlog_row_image = NOBLOB",
            "UPDATE pt.t SET d = 4.50 WHERE id = 4",  # c and j (blobs) not logged
            "UPDATE pt.t SET c = 'blob' WHERE id = 5",
            "INSERT INTO pt.t (id, a) VALUES (40, 1)",
            "SET SESSION binlog_row_image = FULL",
            "UPDATE pt.t SET a = a + 1 WHERE id = 6",
        )
        partial = [e for e in read_delta(uri).to_pylist() if e["table"] == "t" and e["absent"] is not None]
        assert len(partial) == 10, [(e["data"], e["absent"]) for e in partial]
        # NOBLOB leaves JSON out on MariaDB (a LONGTEXT there), not on MySQL: there id 5's after image is whole, its
        # before image without `c` (listed as partial, nothing absent from `data`).
        blob = next(e for e in partial if e["primary_key"] == "[5]")
        assert blob["absent"] == (["j"] if flavor == "mariadb" else []), blob
        assert {e["type"] for e in partial} == {"insert", "update", "delete"}
        job.run(spark, changelog=uri, output=output)
        equal()
        assert assert_history_matches_state(output, "pt") == 18
        # A third run: partial images whose previous versions are all in the history.
        sql(
            "SET SESSION binlog_row_image = MINIMAL",
            "UPDATE pt.t SET a = 8 WHERE id IN (21, 30, 40)",
            "UPDATE pt.t SET id = 50 WHERE id = 1",
        )
        job.run(spark, changelog=uri, output=output)
        assert equal() == 7 * 7 + 2 * 3 + 2 * 4 + 2 * 4
        assert assert_history_matches_state(output, "pt") == 22
    finally:
        assert worker.stop() == 0, worker.log_text()
        conn.close()
