"""Compaction against a real MariaDB: workload with DDL, the worker, interleaved compactions, a SIGKILL mid-run."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from mysqlcapture_api.changelog import read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_compaction import history, job, maintenance, targets, values
from mysqlcapture_compaction import output as layout
from mysqlcapture_compaction import versions as history_writes
from mysqlcapture_dev.embedded.mariadb import MariaDBServer, start_server
from pyspark.sql import SparkSession

from tests.spark.compare import assert_state_equals_source, current_tables, source_tables
from tests.support import REPO, WorkerProcess, manifest, read_changelog, wait_until, write_manifest
from tests.workload import Workload

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]


@pytest.fixture(scope="module")
def server() -> MariaDBServer:
    srv = start_server(31)
    yield srv
    srv.stop()


def _caught_up(server: MariaDBServer, uri: str, app: str) -> bool:
    from mysqlcapture_worker.sinks.delta import DeltaSink

    file, pos = server.query("SHOW MASTER STATUS")[0][:2]
    ckpt = DeltaSink(uri, app_id=f"mysqlcapture-{app}").load_checkpoint()
    return ckpt is not None and ckpt.coordinate >= Coordinate(str(file), int(pos))


def _capture(server: MariaDBServer, tmp_path: Path, name: str) -> tuple[Path, str, WorkerProcess]:
    uri = str(tmp_path / "changelog")
    doc = manifest(name, port=server.port, sink={"type": "delta", "delta": {"uri": uri}}, start={"from": "latest"})
    doc["spec"]["flush"] = {"maxIntervalMs": 200}
    path = write_manifest(tmp_path / f"{name}.yaml", doc)
    worker = WorkerProcess(path)
    wait_until(
        lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
        timeout=60,
        what="the worker's first commit",
    )
    assert worker.alive(), worker.log_text()
    return path, uri, worker


def _versions_of(rows: list[dict], table: str, pk: str) -> list[int]:
    """Ordering keys of the change-log events that touch `pk` in `table` (as the new or the old key)."""
    out = []
    for r in rows:
        if r["table"] != table or r["type"] not in ("insert", "update", "delete"):
            continue
        old = json.loads(r["old"]) if r["old"] else {}
        data = json.loads(r["data"])
        before = "[" + ",".join(json.dumps({**data, **old}[c]) for c in json.loads(r["primary_key_columns"])) + "]"
        if pk in (r["primary_key"], before):
            out.append(r["order_key"])
    return out


def test_compacted_tables_equal_the_source_and_history_lists_every_version(
    spark: SparkSession, server: MariaDBServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        history_writes, "HISTORY_ROWS_PER_FILE", 10
    )  # several history files per write, as a big table gets
    conn = server.connect()
    # Seed 1066 draws each kind of DDL once in 40 steps (add, drop, modify and rename a column, rename a table,
    # drop and re-create one), two of them before the first compaction and four before the second.
    workload = Workload(conn, "shop", seed=1066, ddl=True)
    workload.setup(n_tables=3)
    _, uri, worker = _capture(server, tmp_path, "cmp")
    output = str(tmp_path / "compacted")
    try:
        for _ in range(2):  # compaction runs interleaved with the workload
            for _ in range(20):
                workload.step()
            wait_until(lambda: _caught_up(server, uri, "cmp"), timeout=120, what="the change log to catch up")
            job.run(spark, changelog=uri, output=output)
    finally:
        assert worker.stop() == 0, worker.log_text()
    first = layout.last_compacted(output)
    again = job.run(spark, changelog=uri, output=output)  # nothing new: a no-op
    assert (again.events, layout.last_compacted(output)) == (0, first)
    assert_state_equals_source(current_tables(output), source_tables(conn, ["shop"]))

    rows = read_changelog(uri)
    table = sorted(workload.tables)[0]
    pk = f"[{max(workload.tables[table].ids)}]"
    versions = history.row_history(output, database="shop", table=table, pk=pk)
    assert [v["order_key"] for v in versions] == _versions_of(rows, table, pk)
    for earlier, later in itertools.pairwise(versions):
        # Each before image is the previous after image, typed, on the columns both hold (a DDL between them may
        # add, drop or rename columns: a column not there at the time is null); a re-insert after a delete has none.
        if later["before"] is None:
            assert (earlier["type"], later["type"]) == ("delete", "insert"), (earlier, later)
            continue
        after, before = earlier["after"], later["before"]
        both = {c for c in after if after[c] is not None and before.get(c) is not None}
        assert "id" in both and {c: after[c] for c in both} == {c: before[c] for c in both}, (earlier, later)
    assert versions[-1]["after"]["id"] == json.loads(pk)[0]
    late = history.row_history(output, database="shop", table=table, pk=pk, since=versions[-1]["ts"])
    assert late == [v for v in versions if v["ts"] >= versions[-1]["ts"]]
    before_all = history.row_history(output, database="shop", table=table, pk=pk, until=versions[0]["ts"] - 1)
    assert before_all == []

    # Each write spread the table's versions over files of disjoint key-hash ranges (HISTORY_ROWS_PER_FILE is
    # small here): the lookup opens at most one file per write, out of all of them, and the others lack the key.
    digest = values.row_hash("shop", table, pk)
    index = DeltaTable(targets.Target(output, "shop", table).history)
    opened = history.history_files(index, digest=digest)
    writes = sum(1 for c in index.history() if c.get("operation") == "WRITE")
    assert 1 <= len(opened) <= writes, (opened, writes)
    others = sorted({f.removeprefix("file://") for f in index.file_uris()} - set(opened))
    assert len(others) >= len(opened), (others, opened)
    for f in others:
        assert digest not in pq.read_table(f, columns=["pk_hash"])["pk_hash"].to_pylist()

    # File compaction: OPTIMIZE, then VACUUM with zero retention removes the small files, keeps every row.
    version = layout.last_compacted_version(output)
    assert version is not None and version <= DeltaTable(uri).version()
    files_before = len(list(Path(uri).glob("database=*/table=*/*.parquet")))
    assert maintenance.optimize(spark, uri) > 0
    assert maintenance.vacuum(spark, uri, configured_hours=0, compacted_version=version) < 0.1
    assert len(list(Path(uri).glob("database=*/table=*/*.parquet"))) < files_before
    assert read_changelog(uri) == rows
    # A commit not compacted yet raises the retention above its age: its files are never vacuumed.
    write_deltalake(
        uri, DeltaTable(uri).to_pyarrow_table().slice(0, 1), mode="append", partition_by=["database", "table"]
    )
    assert maintenance.safe_retention_hours(uri, configured_hours=0, compacted_version=version + 1) > 0
    assert maintenance.safe_retention_hours(uri, configured_hours=0, compacted_version=None) == float("inf")
    conn.close()


def _compact_cli(manifest_path: Path, log: Path) -> subprocess.Popen[bytes]:
    """The compaction CLI in its own process group (its JVM included), as a pod would run it."""
    cmd = [sys.executable, "-m", "mysqlcapture_compaction.cli", "compact", str(manifest_path), "--master", "local[2]"]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _commits(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


def _parquet(table: Path) -> set[Path]:
    return set(table.rglob("*.parquet"))


def _kill_when(proc: subprocess.Popen[bytes], moment: Callable[[], bool], *, what: str) -> None:
    """SIGKILL the whole process group (Python driver, JVM, Python workers) the moment `moment()` holds."""
    wait_until(lambda: moment() or proc.poll() is not None, timeout=300, what=what, interval=0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"the run ended by itself before {what}"


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = read_delta(str(path)).to_pylist()
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _everything(output: Path) -> dict[str, list[dict[str, Any]]]:
    """Every current-state table and every table's history, row by row (metadata columns included)."""
    out = {f"history {h.parent.name}.{h.name}": _rows(h) for h in layout.history_tables(str(output))}
    for table in sorted((output / "tables").glob("*/*")):
        out[f"{table.parent.name}.{table.name}"] = _rows(table)
    return out


def test_compaction_killed_mid_run_reruns_to_the_same_tables(
    spark: SparkSession, server: MariaDBServer, tmp_path: Path
) -> None:
    """SIGKILL during a MERGE after another table's commit; the rerun picks up the work, and the end state equals
    an unkilled run's, row for row, metadata included."""
    conn = server.connect()
    workload = Workload(conn, "kill", seed=9, ddl=False)
    workload.setup(n_tables=4)
    path, uri, worker = _capture(server, tmp_path, "kil")
    output = Path(layout.default_output(uri))
    histories, tables = output / "history" / "kill", output / "tables" / "kill"
    log = tmp_path / "compact.log"
    try:
        for _ in range(40):
            workload.step()
        wait_until(lambda: _caught_up(server, uri, "kil"), timeout=120, what="the change log to catch up")
        first_end = job.run(spark, changelog=uri, output=str(output)).end_key  # targets exist: later runs MERGE
        for _ in range(40):
            workload.step()
        wait_until(lambda: _caught_up(server, uri, "kil"), timeout=120, what="the change log to catch up")
    finally:
        assert worker.stop() == 0, worker.log_text()

    def snapshot() -> dict[Path, tuple[int, set[Path]]]:
        return {t: (_commits(t), _parquet(t)) for t in [*histories.iterdir(), *tables.iterdir()]}

    # One kill where it matters most: one table's history and MERGE committed, another's data files written but
    # not its commit, the run not recorded. The rerun must skip what is committed (the application
    # transactions), ignore the orphaned files and apply the rest exactly once.
    before = snapshot()
    targets = [t for t in before if t.parent == tables]
    history_dirs = [t for t in before if t.parent == histories]

    def mid_merge() -> bool:
        files = {t: _parquet(t) for t in targets}  # files before commits: a commit in between reads as done
        commits = {t: _commits(t) for t in targets}
        done = any(commits[t] > before[t][0] for t in targets)
        return done and any(files[t] - before[t][1] and commits[t] == before[t][0] for t in targets)

    proc = _compact_cli(path, log)
    _kill_when(proc, mid_merge, what="a MERGE's data files after another table's commit")
    assert any(_commits(h) > before[h][0] for h in history_dirs), "no history was committed before the kill"
    assert layout.last_compacted(str(output)) == first_end, "a killed run was recorded as finished"
    rerun = _compact_cli(path, log)
    assert rerun.wait(timeout=600) == 0, log.read_text()
    assert log.read_text().count("compacted change-log version") == 1, log.read_text()
    assert layout.last_compacted(str(output)) > first_end

    assert_state_equals_source(current_tables(str(output)), source_tables(conn, ["kill"]))
    unkilled = tmp_path / "unkilled"
    job.run(spark, changelog=uri, output=str(unkilled))
    assert _everything(output) == _everything(unkilled)
    history_rows = [r for k, rows in _everything(output).items() if k.startswith("history ") for r in rows]
    row_events = [r for r in read_changelog(uri) if r["type"] in ("insert", "update", "delete")]
    assert len({(r["order_key"], r["pk"]) for r in history_rows}) == len(history_rows), "history applied twice"
    assert {r["order_key"] for r in history_rows} == {r["order_key"] for r in row_events}
    conn.close()
