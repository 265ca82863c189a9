"""Test support: poll-until, manifests, running the worker as a real process, reading the change log back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent


def wait_until(check: Callable[[], T], *, timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll `check` until it returns a truthy value; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")


def manifest(
    name: str,
    *,
    port: int,
    server_id: int = 9001,
    sink: dict[str, Any],
    start: dict[str, Any] | None = None,
    tables: dict[str, Any] | None = None,
    flush: dict[str, Any] | None = None,
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "source": {
            "host": "127.0.0.1",
            "port": port,
            "user": "root",
            "passwordFrom": {"env": "MYSQL_PASSWORD"},
            "serverId": server_id,
            "tls": {"mode": "disabled"},
        },
        "sink": sink,
        "start": start or {"from": "earliest"},
        "metrics": {"port": 0},
    }
    if tables:
        spec["tables"] = tables
    if flush:
        spec["flush"] = flush
    spec["heartbeat"] = {"intervalSeconds": 0}
    if extra_spec:
        spec.update(extra_spec)
    return {
        "apiVersion": "cdc.mysqlcapture.io/v1alpha1",
        "kind": "MySQLCapture",
        "metadata": {"name": name},
        "spec": spec,
    }


def write_manifest(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def worker_env(password: str = "root", extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["MYSQL_PASSWORD"] = password
    env.update(extra or {})
    return env


class WorkerProcess:
    """`mysqlcapture run MANIFEST` as a child process."""

    def __init__(
        self,
        manifest_path: Path,
        *,
        password: str = "root",
        log_path: Path | None = None,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        self.manifest_path = manifest_path
        self.log_path = log_path or manifest_path.with_suffix(".log")
        self._log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mysqlcapture_worker.cli", "run", str(manifest_path), "--plain-logs", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=worker_env(password, env),
            cwd=REPO,
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._log.close()

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=timeout)
        self._log.close()
        return code

    def alive(self) -> bool:
        return self.proc.poll() is None

    def running(self) -> bool:
        """True while the worker runs; fails the test with its exit code and log tail once it has exited."""
        if not self.alive():
            raise AssertionError(f"the worker exited with {self.proc.returncode}: {self.log_text()[-3000:]}")
        return True

    def metrics_port(self) -> int:
        """The port the worker logged for its metrics endpoint (spec.metrics.port 0 picks a free one)."""
        for line in self.log_text().splitlines():
            if "metrics on :" in line:
                return int(line.rsplit(":", 1)[1])
        raise AssertionError("the worker logged no metrics port")

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")


def run_cli(
    *args: str, password: str = "root", timeout: float = 120.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mysqlcapture_worker.cli", *args],
        capture_output=True,
        text=True,
        env=worker_env(password, env),
        cwd=REPO,
        timeout=timeout,
    )


def read_changelog(uri: str) -> list[dict[str, Any]]:
    """Every change-log row as a dict, in ordering-key order."""
    from deltalake import DeltaTable

    table = DeltaTable(uri).to_pyarrow_table()
    rows = table.to_pylist()
    rows.sort(key=lambda r: r["order_key"])
    return rows


def streaming_worker_status(**overrides: Any) -> dict[str, Any]:
    """A worker's GET /status answer (every key of `WorkerStatus`): streaming, comfortable headroom, no error."""
    return {
        "phase": "Streaming",
        "server_id": 1,
        "server_identity": "mariadb:0-1",
        "gtid_set": "0-1-10",
        "binlog_file": "mysql-bin.000004",
        "binlog_pos": 1234,
        "order_key": 99,
        "lag_seconds": 0.5,
        "purge_headroom_bytes": 9000,
        "purge_headroom_files": 3,
        "reading_active_file": False,
        "purge_headroom_seconds": None,
        "binlog_purged": False,
        "last_heartbeat": None,
        "failovers": 0,
        "snapshot": None,
        "snapshot_tables": None,
        "unlogged_foreign_keys": None,
        "error": None,
        "error_reason": None,
        "retry_seconds": None,
        **overrides,
    }


def run_worker_to_end(manifest_path: Path) -> tuple[int, int, str]:
    """`mysqlcapture run --exit-at-end` as a child process, its resident memory sampled every 20 ms: (exit code,
    peak RSS in bytes, its stderr)."""
    import tempfile

    import psutil

    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a chatty worker never blocks on it
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mysqlcapture_worker.cli",
                "run",
                str(manifest_path),
                "--exit-at-end",
                "--plain-logs",
            ],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env=worker_env(),
            cwd=REPO,
        )
        peak = 0
        watched = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        proc.wait()
        errors.seek(0)
        return proc.returncode, peak, errors.read().decode(errors="replace")
