"""SIGKILL the worker again and again while a workload runs: every event lands exactly once."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.sinks.delta import DeltaSink

from tests import servers
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, wait_until, write_manifest
from tests.workload import Workload

pytestmark = pytest.mark.slow

KILLS = 22


class _Background:
    """Runs workload steps in a thread until stopped; errors are re-raised on join."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.steps = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.workload.step()
                self.steps += 1
                time.sleep(0.01)
        except BaseException as exc:  # surfaced by join()
            self.error = exc

    def join(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        if self.error is not None:
            raise self.error


def _version(uri: str) -> int:
    return DeltaTable(uri).version() if Path(uri, "_delta_log").exists() else -1


@pytest.mark.parametrize(
    ("flavor", "settings"),
    [
        pytest.param("mariadb", {}, marks=pytest.mark.mariadb, id="mariadb"),
        pytest.param("mysql", {}, marks=pytest.mark.mysql, id="mysql"),
        # Every transaction a TRANSACTION_PAYLOAD: kills land inside compressed transactions too.
        pytest.param("mysql", {"binlog_transaction_compression": "ON"}, marks=pytest.mark.mysql, id="mysql-compressed"),
    ],
)
def test_sigkill_at_random_points_loses_and_doubles_nothing(
    tmp_path: Path, flavor: str, settings: dict[str, str]
) -> None:
    srv = servers.start(flavor, 31, **settings)  # type: ignore[arg-type]
    conn = srv.connect()
    rng = random.Random(2024)
    workload = Workload(conn, "killed", seed=31, ddl=True)
    workload.setup(n_tables=3)
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "killed",
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "earliest"},
        # Small flushes: many commits, so the kills land before, inside and after them.
        flush={"maxIntervalMs": 100, "maxEvents": 50},
    )
    path = write_manifest(tmp_path / "killed.yaml", doc)
    sink = DeltaSink(uri, app_id="mysqlcapture-killed")
    background = _Background(workload)
    commits_seen: list[int] = []
    try:
        for i in range(KILLS):
            before = _version(uri)
            worker = WorkerProcess(path, log_path=tmp_path / f"run{i}.log")
            # Kill only once this run has committed (start-up time varies with the machine's load), then
            # at a random point of its streaming: before, inside or after the next commits.
            wait_until(
                lambda w=worker, b=before: not w.alive() or _version(uri) > b,
                timeout=90,
                what=f"run {i} of the worker to commit",
            )
            time.sleep(rng.uniform(0.0, 1.5))
            assert worker.alive(), worker.log_text()
            worker.kill()
            commits_seen.append(_version(uri))
        background.join()
        assert background.steps > 100, "the workload barely ran"
        file, pos = srv.binlog_status().file, srv.binlog_status().pos
        final = WorkerProcess(path, log_path=tmp_path / "final.log")
        try:

            def caught_up() -> bool:
                ckpt = sink.load_checkpoint()
                return ckpt is not None and ckpt.coordinate >= Coordinate(str(file), int(pos))

            wait_until(caught_up, timeout=180, what="the restarted worker to reach the binlog's end")
        finally:
            assert final.stop() == 0, final.log_text()
        rows = read_changelog(uri)
        tables = source_tables(conn, ["killed"])
        payloads = sum(
            1
            for name, *_ in srv.query("SHOW BINARY LOGS")
            for event in srv.query(f"SHOW BINLOG EVENTS IN '{name}'")
            if event[2] == "Transaction_payload"
        )
    finally:
        background.join()
        conn.close()
        srv.stop()
    if settings.get("binlog_transaction_compression") == "ON":
        # The binlog really is compressed: every row transaction is one TRANSACTION_PAYLOAD event.
        assert payloads > 100, f"only {payloads} Transaction_payload events in the binlog"
    # The kills interrupted a moving change log, not one standing still.
    assert len(set(commits_seen)) >= KILLS // 2, commits_seen
    identities = [(r["server_id"], r["binlog_file"], r["binlog_pos"], r["row_index"]) for r in rows]
    assert len(identities) == len(set(identities)), "an event was written twice"
    assert [r["order_key"] for r in rows] == sorted(r["order_key"] for r in rows)
    assert len({r["order_key"] for r in rows}) == len(rows)
    assert_replay_equals_source(replay(rows), tables)
