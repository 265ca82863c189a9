"""Compaction against a real MariaDB: workload with DDL, the worker, interleaved compactions, a SIGKILL mid-run."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from mysqlcapture_compaction import history, job, maintenance
from mysqlcapture_worker.embedded.mariadb import MariaDBServer, start_server
from pyspark.sql import SparkSession

from tests.replay import source_tables
from tests.spark.compare import assert_state_equals_source, current_tables
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
    return ckpt is not None and (ckpt.binlog_file, ckpt.binlog_pos) >= (str(file), int(pos))


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
    spark: SparkSession, server: MariaDBServer, tmp_path: Path
) -> None:
    conn = server.connect()
    workload = Workload(conn, "shop", seed=4, ddl=True)
    workload.setup(n_tables=3)
    _, uri, worker = _capture(server, tmp_path, "cmp")
    output = str(tmp_path / "compacted")
    try:
        for _ in range(2):  # compaction runs interleaved with the workload
            for _ in range(70):
                workload.step()
            wait_until(lambda: _caught_up(server, uri, "cmp"), timeout=120, what="the change log to catch up")
            job.run(spark, changelog=uri, output=output, buckets=4)
    finally:
        assert worker.stop() == 0, worker.log_text()
    first = job.last_compacted(output)
    again = job.run(spark, changelog=uri, output=output, buckets=4)  # nothing new: a no-op
    assert (again.events, job.last_compacted(output)) == (0, first)
    assert_state_equals_source(current_tables(output), source_tables(conn, ["shop"]))

    rows = read_changelog(uri)
    table = sorted(workload.tables)[0]
    pk = f"[{max(workload.tables[table].ids)}]"
    versions = history.row_history(job.history_path(output), database="shop", table=table, pk=pk, buckets=4)
    assert [v["order_key"] for v in versions] == _versions_of(rows, table, pk)
    for earlier, later in itertools.pairwise(versions):  # each before image is the previous after
        assert later["before"] == earlier["after"], (earlier, later)
    assert json.loads(versions[-1]["after"])["id"] == json.loads(pk)[0]

    # File compaction: OPTIMIZE, then VACUUM with zero retention removes the small files, keeps every row.
    version = job.last_compacted_version(output)
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
    cmd = [sys.executable, "-m", "mysqlcapture_compaction.cli", "compact", str(manifest_path), "--master", "local[2]"]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


def test_compaction_killed_mid_run_reruns_to_the_same_tables(server: MariaDBServer, tmp_path: Path) -> None:
    conn = server.connect()
    workload = Workload(conn, "kill", seed=9, ddl=False)
    workload.setup(n_tables=4)
    path, uri, worker = _capture(server, tmp_path, "kil")
    try:
        for _ in range(300):
            workload.step()
        wait_until(lambda: _caught_up(server, uri, "kil"), timeout=120, what="the change log to catch up")
    finally:
        assert worker.stop() == 0, worker.log_text()
    output = Path(job.default_output(uri))
    log = tmp_path / "compact.log"
    proc = _compact_cli(path, log)
    # Kill once the first table has committed and before the run is recorded.
    wait_until(
        lambda: any((output / "tables" / "kill").glob("*/_delta_log/*.json")) or proc.poll() is not None,
        timeout=240,
        what="the compaction's first table commit",
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert job.last_compacted(str(output)) == -1, "the run finished before it was killed"
    rerun = _compact_cli(path, log)
    assert rerun.wait(timeout=600) == 0, log.read_text()
    assert "compacted change-log version" in log.read_text()
    assert_state_equals_source(current_tables(str(output)), source_tables(conn, ["kill"]))
    history_rows = DeltaTable(job.history_path(str(output))).to_pyarrow_table(columns=["order_key", "pk"]).to_pylist()
    row_events = [r for r in read_changelog(uri) if r["type"] in ("insert", "update", "delete")]
    assert len({(r["order_key"], r["pk"]) for r in history_rows}) == len(history_rows), "history applied twice"
    assert {r["order_key"] for r in history_rows} == {r["order_key"] for r in row_events}
    conn.close()
