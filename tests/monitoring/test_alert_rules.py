"""The alert rules: promtool's own checks and unit tests, and every metric they use is really exported."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from mysqlcapture_dev.embedded.mariadb import start_server

from tests.support import WorkerProcess, manifest, wait_until, write_manifest

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
RULES = MONITORING / "alerts.yaml"


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: `make setup` installs Debian's prometheus package"
    return found


@pytest.mark.unit
def test_rules_are_valid() -> None:
    result = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 9 rules found" in result.stdout


@pytest.mark.unit
def test_rules_unit_tests_pass() -> None:
    result = subprocess.run(
        [_promtool(), "test", "rules", "alerts_test.yaml"], capture_output=True, text=True, cwd=MONITORING
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(mysqlcapture_[a-z_]+)", expr))


@pytest.mark.mariadb
def test_every_metric_the_rules_use_is_exported_by_a_running_worker(tmp_path: Path) -> None:
    rules = yaml.safe_load(RULES.read_text())
    used = set().union(*(_metric_names(r["expr"]) for g in rules["groups"] for r in g["rules"]))
    assert {"mysqlcapture_binlog_purge_headroom_seconds", "mysqlcapture_failovers_total"} <= used
    srv = start_server(36)
    sink = {"type": "delta", "delta": {"uri": str(tmp_path / "changelog")}}
    worker = WorkerProcess(write_manifest(tmp_path / "m.yaml", manifest("m", port=srv.port, sink=sink)))
    try:

        def scrape() -> str:
            ports = [int(ln.rsplit(":", 1)[1]) for ln in worker.log_text().splitlines() if "metrics on :" in ln]
            if not ports:
                return ""
            port = ports[0]
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()

        # The headroom appears with the first purge check, right after the stream starts.
        wait_until(
            lambda: "mysqlcapture_binlog_purge_headroom_seconds{" in scrape() or not worker.alive(),
            timeout=60,
            what="the worker to export its purge headroom",
        )
        exported = {line.split("{")[0].split(" ")[0] for line in scrape().splitlines() if not line.startswith("#")}
    finally:
        assert worker.stop() == 0, worker.log_text()
        srv.stop()
    assert used <= exported, f"rules use metrics the worker does not export: {sorted(used - exported)}"
