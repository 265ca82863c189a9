"""`make bench`: on one binlog, mysql-replication's raw decode rate next to the worker's end-to-end rate.

Prints figures, not pass/fail: machines here are shared and noisy, so the worker's rate is always
shown beside a baseline measured in the same run, as a ratio.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mysqlcapture_worker.embedded.mariadb import start_server  # noqa: E402

BENCH_TABLE = """CREATE TABLE bench.events (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  account INT NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  ratio DOUBLE,
  status ENUM('new','paid','shipped','cancelled') NOT NULL,
  name VARCHAR(64) CHARACTER SET utf8mb4,
  note VARCHAR(32) CHARACTER SET latin1,
  created DATETIME(6) NOT NULL,
  day DATE,
  flags TINYINT UNSIGNED,
  payload BLOB
)"""

FILL = """INSERT INTO bench.{table}
SELECT seq, seq % 100000, (seq % 100000) / 100, seq / 7, ELT(1 + seq % 4, 'new','paid','shipped','cancelled'),
       CONCAT('customer-', seq), CONCAT('note ', seq % 1000),
       TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq % 1000000) MICROSECOND,
       DATE('2024-01-01') + INTERVAL (seq % 3650) DAY, seq % 256, UNHEX(MD5(seq))
FROM bench.seq_{lo}_to_{hi}"""


@dataclass(frozen=True)
class Run:
    """One measured child process."""

    rows: int
    seconds: float
    cpu_seconds: float  # user + system: less sensitive than wall time to other load on the machine
    peak_rss_kib: int

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    def describe(self) -> str:
        return (
            f"{self.rows} rows in {self.seconds:.1f}s = {self.rate:,.0f} rows/s "
            f"({self.cpu_seconds:.1f} CPU s), peak RSS {self.peak_rss_kib / 1024:.0f} MiB"
        )


def _child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, int]:
    """Run a child process to its end: (wall s, CPU s, peak RSS KiB, exit status)."""
    started = time.perf_counter()
    proc = subprocess.Popen(args, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss), status


def raw_decode(port: int, log_file: str) -> int:
    """mysql-replication alone: read the binlog and decode every row (the library's `.rows`); returns rows."""
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": port, "user": "root", "passwd": "root"},
        server_id=4242,
        blocking=False,
        resume_stream=True,
        log_file=log_file,
        log_pos=4,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
    )
    rows = 0
    for ev in stream:
        rows += len(ev.rows)
    stream.close()
    return rows


def run_raw(port: int, log_file: str, rows: int) -> Run:
    """`raw_decode` in its own process, so that its time and peak RSS are its own."""
    seconds, cpu, rss, status = _child([sys.executable, __file__, "--raw-decode", f"{port}:{log_file}:{rows}"])
    if status != 0:
        raise SystemExit(f"raw decode failed with status {status}")
    return Run(rows, seconds, cpu, rss)


def bench_manifest(port: int, name: str, uri: str, *, server_id: int, **spec: Any) -> dict[str, Any]:
    """A MySQLCapture for the private bench server (root, no TLS, no heartbeats), with `spec` added."""
    return {
        "apiVersion": "cdc.mysqlcapture.io/v1alpha1",
        "kind": "MySQLCapture",
        "metadata": {"name": name},
        "spec": {
            "source": {
                "host": "127.0.0.1",
                "port": port,
                "user": "root",
                "passwordFrom": {"env": "MYSQL_PASSWORD"},
                "serverId": server_id,
                "tls": {"mode": "disabled"},
            },
            "sink": {"type": "delta", "delta": {"uri": uri}},
            "metrics": {"port": 0},
            "heartbeat": {"intervalSeconds": 0},
            **spec,
        },
    }


def run_worker(
    port: int, workdir: Path, name: str, log_file: str, pos: int = 4, *, rows: int, decoder: str = "fast"
) -> Run:
    """The worker end to end (read, decode, render, commit to Delta) as a child process."""
    manifest = bench_manifest(
        port,
        name,
        str(workdir / name),
        server_id=4343,
        start={"from": "position", "binlogFile": log_file, "binlogPosition": pos},
    )
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    env = dict(os.environ, MYSQL_PASSWORD="root", MYSQLCAPTURE_DECODER=decoder)
    args = [sys.executable, "-m", "mysqlcapture_worker.cli", "run", str(path), "--exit-at-end", "--plain-logs"]
    seconds, cpu, rss, status = _child([*args, "--log-level", "warning"], env)
    if status != 0:
        raise SystemExit(f"worker failed with status {status}")
    committed = sum(1 for _ in _changelog_rows(workdir / name))
    if committed != rows:
        raise SystemExit(f"the worker committed {committed} row events, the binlog holds {rows}")
    return Run(rows, seconds, cpu, rss)


def _changelog_rows(uri: Path) -> list[int]:
    from deltalake import DeltaTable

    table = DeltaTable(str(uri)).to_pyarrow_table(columns=["order_key", "sql"])
    return [k for k, sql in zip(table["order_key"].to_pylist(), table["sql"].to_pylist(), strict=True) if sql is None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="row events in the benchmark binlog")
    parser.add_argument("--big-txn-rows", type=int, default=1_000_000, help="rows of the single large transaction")
    parser.add_argument(
        "--reference", action="store_true", help="also run the worker on its reference (pure-Python) decoder"
    )
    parser.add_argument("--raw-decode", help=argparse.SUPPRESS)  # port:file:rows, the child of run_raw
    args = parser.parse_args()
    if args.raw_decode:
        port, log_file, expected = args.raw_decode.split(":")
        rows = raw_decode(int(port), log_file)
        if rows != int(expected):
            raise SystemExit(f"mysql-replication decoded {rows} rows, the binlog holds {expected}")
        return
    workdir = Path(tempfile.mkdtemp(prefix="mysqlcapture-bench-"))
    server = start_server(77, max_binlog_size="1G")
    try:
        server.execute("CREATE DATABASE bench", BENCH_TABLE)
        log_file = str(server.query("SHOW MASTER STATUS")[0][0])
        step = 20000
        for lo in range(1, args.rows + 1, step):
            server.execute(FILL.format(table="events", lo=lo, hi=min(lo + step - 1, args.rows)))
        print(
            f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; table bench.events, "
            f"11 columns, {args.rows} rows in {-(-args.rows // step)} transactions"
        )
        raw = run_raw(server.port, log_file, args.rows)
        print(f"mysql-replication raw decode:     {raw.describe()}")
        fast = run_worker(server.port, workdir, "bench", log_file, rows=args.rows)
        print(f"worker end to end (fast path):    {fast.describe()}")
        print(
            f"  ratio to raw decode: {fast.rate / raw.rate:.2f}x wall, "
            f"{raw.cpu_seconds / fast.cpu_seconds:.2f}x CPU (rows per CPU second)"
        )
        if args.reference:
            ref = run_worker(server.port, workdir, "reference", log_file, rows=args.rows, decoder="reference")
            print(f"worker end to end (reference):    {ref.describe()}")
            print(f"  fast path / reference path: {fast.rate / ref.rate:.2f}x wall")
        # One transaction of --big-txn-rows rows: bounded memory, not speed, is the point here.
        server.execute("CREATE TABLE bench.big LIKE bench.events")
        big_file, big_pos = server.query("SHOW MASTER STATUS")[0][:2]
        server.execute(FILL.format(table="big", lo=1, hi=args.big_txn_rows))
        big = run_worker(server.port, workdir, "bigtxn", str(big_file), int(big_pos), rows=args.big_txn_rows)
        print(f"single transaction (fast path):   {big.describe()}")
        print(
            f"load average at the end {os.getloadavg()[0]:.1f}; bench process peak RSS "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
        )
    finally:
        server.stop()
    # -- the other throughput figures of `make bench` ------------------------------------------------------------
    # Snapshot rows/s (bench/bench_snapshot.py) and compaction events/s (bench/bench_compaction.py) are
    # measured by their own scripts; the lead wires them in here (or the Makefile runs them after this one).


if __name__ == "__main__":
    main()
