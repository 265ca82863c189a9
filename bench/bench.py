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
from pathlib import Path

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


def raw_decode(port: int, log_file: str) -> tuple[int, float]:
    """mysql-replication alone: read the binlog and decode every row (the library's `.rows`)."""
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
    started = time.perf_counter()
    for ev in stream:
        rows += len(ev.rows)
    elapsed = time.perf_counter() - started
    stream.close()
    return rows, elapsed


def run_worker(port: int, workdir: Path, name: str, log_file: str, pos: int = 4) -> tuple[float, int]:
    """The worker end to end (read, decode, render, commit to Delta) as a child process; returns (s, peak KiB)."""
    manifest = {
        "apiVersion": "cdc.mysqlcapture.io/v1alpha1",
        "kind": "MySQLCapture",
        "metadata": {"name": name},
        "spec": {
            "source": {
                "host": "127.0.0.1",
                "port": port,
                "user": "root",
                "passwordFrom": {"env": "MYSQL_PASSWORD"},
                "serverId": 4343,
                "tls": {"mode": "disabled"},
            },
            "start": {"from": "position", "binlogFile": log_file, "binlogPosition": pos},
            "sink": {"type": "delta", "delta": {"uri": str(workdir / name)}},
            "metrics": {"port": 0},
            "heartbeat": {"intervalSeconds": 0},
        },
    }
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    env = dict(os.environ, MYSQL_PASSWORD="root")
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mysqlcapture_worker.cli",
            "run",
            str(path),
            "--exit-at-end",
            "--plain-logs",
            "--log-level",
            "warning",
        ],
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"worker failed with status {status}")
    return elapsed, int(usage.ru_maxrss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="row events in the benchmark binlog")
    parser.add_argument("--big-txn-rows", type=int, default=1_000_000, help="rows of the single large transaction")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mysqlcapture-bench-"))
    server = start_server(77, max_binlog_size="1G")
    try:
        server.execute("CREATE DATABASE bench", BENCH_TABLE)
        log_file = str(server.query("SHOW MASTER STATUS")[0][0])
        step = 20000
        for lo in range(1, args.rows + 1, step):
            server.execute(FILL.format(table="events", lo=lo, hi=min(lo + step - 1, args.rows)))
        print(
            f"machine: {os.cpu_count()} cores; table bench.events, 11 columns, {args.rows} rows in "
            f"{args.rows // step} transactions"
        )
        rows, raw_s = raw_decode(server.port, log_file)
        raw_rate = rows / raw_s
        print(f"mysql-replication raw decode: {rows} rows in {raw_s:.1f}s = {raw_rate:,.0f} rows/s")
        worker_s, worker_rss = run_worker(server.port, workdir, "bench", log_file)
        worker_rate = rows / worker_s
        print(
            f"worker end to end (decode, render, Delta commit): {worker_s:.1f}s = {worker_rate:,.0f} rows/s "
            f"(ratio to raw decode: {worker_rate / raw_rate:.2f}x), peak RSS {worker_rss / 1024:.0f} MiB"
        )
        # One transaction of --big-txn-rows rows: bounded memory, not speed, is the point here.
        server.execute("CREATE TABLE bench.big LIKE bench.events")
        big_file, big_pos = server.query("SHOW MASTER STATUS")[0][:2]
        server.execute(FILL.format(table="big", lo=1, hi=args.big_txn_rows))
        big_s, big_rss = run_worker(server.port, workdir, "bigtxn", str(big_file), int(big_pos))
        print(f"single transaction of {args.big_txn_rows} rows: {big_s:.1f}s, worker peak RSS {big_rss / 1024:.0f} MiB")
        print(f"bench process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
