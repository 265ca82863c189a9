"""A Maxwell consumer reads mysqlcapture's lines unchanged: the lines real Maxwell 1.44.1 printed for a workload
(every fidelity-corpus value inserted, updated and deleted, multi-row transactions, a rollback, a primary-key
change, DDL), recorded once per flavor (tests/maxwell/record.py), against the worker's lines for the same workload
on a fresh server: the same lines in the same order, the same fields in the same order, every value byte for byte,
but for the differences tests/maxwell/differences.py lists (and README explains).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mysqlcapture_dev.embedded.server import PrivateServer

from tests.maxwell.compare import compare, event_starts
from tests.maxwell.workload import DB, END_TABLE, OUTPUT_OPTIONS
from tests.maxwell.workload import run as run_workload
from tests.support import WorkerProcess, manifest, wait_until, write_manifest

RECORDED = Path(__file__).parents[1] / "maxwell"


def _our_lines(srv: PrivateServer, tmp_path: Path) -> list[str]:
    start = srv.binlog_status()
    run_workload(srv)
    out = tmp_path / "lines.jsonl"
    doc = manifest(
        "compat",
        port=srv.port,
        sink={"type": "jsonl", "jsonl": {"path": str(out), **OUTPUT_OPTIONS}},
        start={"from": "position", "binlogFile": start.file, "binlogPosition": start.pos},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "compat.yaml", doc), log_path=tmp_path / "worker.log")
    try:
        end = f'"table":"{END_TABLE}","type":"insert"'
        wait_until(lambda: out.exists() and end in out.read_text(), timeout=180, what="the workload's last insert")
    finally:
        assert worker.stop() == 0, worker.log_text()
    return [line for line in out.read_text().split("\n") if f'"database":"{DB}' in line]


def test_lines_equal_maxwells_but_for_the_documented_differences(
    tmp_path: Path, flavor: str, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(7801)  # record.py's server_id: server_id values compare too
    ours = _our_lines(srv, tmp_path)
    positions = event_starts(srv)
    theirs = [ln for ln in (RECORDED / f"maxwell-1.44.1-{flavor}.jsonl").read_text().split("\n") if ln]
    problems = compare(theirs, ours, positions)
    assert not problems, f"{len(problems)} differences from Maxwell:\n" + "\n".join(problems[:40])
