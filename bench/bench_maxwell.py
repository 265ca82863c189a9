"""Real Maxwell beside the worker on the same binlog: what a user would run instead of the JSON-lines sink.

Maxwell 1.44.1 is not in any registry this project fetches from (Maven Central's newest is 1.22.6, which cannot log
in to MySQL 9), so the bench cannot install it: it runs the build named by MAXWELL_HOME (an unpacked distribution,
bin/ and lib/, built from Maxwell's published source with `mvn -DskipTests package`) and otherwise prints one line
saying so. Maxwell is measured as the worker is, from its process's start to the last row written: its file
producer, its default output options, from the binlog position after the table's CREATE TABLE.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from common import Run, fill, run_worker, warm_bytecode  # noqa: E402
from mysqlcapture_dev.embedded import start_server  # noqa: E402

POLL_SECONDS = 0.05


def home() -> Path | None:
    """The Maxwell build MAXWELL_HOME names, when it holds one."""
    found = os.environ.get("MAXWELL_HOME")
    if not found or not (Path(found) / "lib").is_dir():
        return None
    return Path(found)


def missing() -> str:
    """The one line printed instead of Maxwell's figures."""
    if shutil.which("java") is None:
        return "Maxwell 1.44.1: not measured (no java on PATH)"
    return (
        "Maxwell 1.44.1: not measured (set MAXWELL_HOME to an unpacked build of its source: git clone "
        "https://github.com/zendesk/maxwell -b v1.44.1, mvn -DskipTests package, target/maxwell-*/maxwell-*)"
    )


def rows_start(server: Any, log_file: str, table: str) -> int:
    """The binlog offset just after `CREATE TABLE bench.<table>` in `log_file`: where Maxwell starts, its schema
    (captured when it starts) being the table's own from there on."""
    offset = 4
    while True:
        events = server.query(f"SHOW BINLOG EVENTS IN '{log_file}' FROM {offset} LIMIT 200")
        if not events:
            raise SystemExit(f"no CREATE TABLE bench.{table} in {log_file}")
        for event in events:
            if event[2] == "Query" and f"CREATE TABLE bench.{table} " in str(event[5]):
                return int(event[4])  # End_log_pos: the next event's start
        offset = int(events[-1][4])


def run(maxwell: Path, server: Any, log_file: str, pos: int, rows: int, out: Path, server_id: int = 4545) -> Run:
    """Maxwell from `log_file:pos` until its file holds `rows` lines, then stopped; SystemExit when it fails."""
    cmd = [
        "java",
        "-cp",
        f"{maxwell}/lib/*:{maxwell}/lib/kafka-clients/*",
        "com.zendesk.maxwell.Maxwell",
        "--host=127.0.0.1",
        f"--port={server.port}",
        "--user=root",
        f"--password={server.root_password}",
        f"--replica_server_id={server_id}",
        f"--client_id=bench{server_id}",
        f"--init_position={log_file}:{pos}:0",
        "--producer=file",
        f"--output_file={out}",
        "--log_level=warn",
    ]
    log = out.with_suffix(".log")
    # A schema Maxwell stored in an earlier run is from before the tables created since: it captures anew.
    server.execute("DROP DATABASE IF EXISTS maxwell")
    started = time.perf_counter()
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    lines, read, seconds = 0, 0, 0.0
    deadline = time.monotonic() + 1800
    try:
        while lines < rows:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"Maxwell wrote {lines} of {rows} rows:\n{log.read_text()[-3000:]}")
            time.sleep(POLL_SECONDS)
            if out.exists():
                with open(out, "rb") as f:
                    f.seek(read)
                    chunk = f.read()
                lines += chunk.count(b"\n")
                read += len(chunk)
        seconds = time.perf_counter() - started
    finally:
        if proc.returncode is None:  # not reaped by poll() (it exited when it failed)
            proc.terminate()
            _, _, usage = os.wait4(proc.pid, 0)
    return Run(rows, seconds, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss))


def main() -> None:
    """`python bench/bench_maxwell.py --rows N --flavor F`: the JSON-lines worker and Maxwell alone, twice each."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--flavor", default="mariadb", choices=("mariadb", "mysql"))
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    build = home()
    if build is None:
        raise SystemExit(missing())
    work = Path(tempfile.mkdtemp(prefix="bench-maxwell-"))
    warm_bytecode()
    server = start_server(83, flavor=args.flavor, max_binlog_size="1G")
    try:
        server.execute("CREATE DATABASE bench")
        log_file = server.binlog_status().file
        fill(server, "events", args.rows)
        start = rows_start(server, log_file, "events")
        print(f"{server.version}: bench.events (12 columns, one JSON), {args.rows:,} rows")
        # The worker's runs first: Maxwell writes its own schema tables into the binlog, which a later worker from
        # the same start would read as well. One unmeasured run first reads the fresh binlog into the page cache
        # (in `make bench` the raw decode before does).
        run_worker(server.port, work, "warm", log_file, rows=args.rows, jsonl=True)
        ours = [
            run_worker(server.port, work, f"lines-{n}", log_file, rows=args.rows, jsonl=True)
            for n in range(args.repeat)
        ]
        theirs = [
            run(build, server, log_file, start, args.rows, work / f"mx-{n}.jsonl", 4545 + n) for n in range(args.repeat)
        ]
        for a, b in zip(ours, theirs, strict=True):
            print(f"  worker, JSON lines: {a.describe()}")
            print(f"  Maxwell 1.44.1:     {b.describe()}")
            print(f"  ratio {a.rate / b.rate:.2f}x Maxwell's rate, {b.cpu_seconds / a.cpu_seconds:.1f}x less CPU")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
