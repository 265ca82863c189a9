"""Record what real Maxwell prints for the compatibility workload (run by hand; the output is checked in).

    python -m tests.maxwell.record --flavor mariadb --maxwell-home DIR --out tests/maxwell/recorded-mariadb.jsonl

DIR is an unpacked Maxwell distribution (bin/, lib/), built from its published source with `mvn package`. A private
server is started, Maxwell follows it with every output option on, the workload runs, and Maxwell's lines are kept
once the workload's last insert has been printed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mysqlcapture_dev.embedded.server import PrivateServer

from tests import servers
from tests.maxwell.workload import DB, END_TABLE, OUTPUT_OPTIONS
from tests.maxwell.workload import run as run_workload

# Maxwell's flags for OUTPUT_OPTIONS: outputBinlogPosition -> --output_binlog_position=true.
MAXWELL_OUTPUT = tuple(
    "--" + re.sub("([A-Z])", lambda m: "_" + m.group(1).lower(), name) + "=" + str(on).lower()
    for name, on in OUTPUT_OPTIONS.items()
)


def maxwell_command(maxwell_home: Path, srv: PrivateServer, *flags: str) -> list[str]:
    """Maxwell following `srv` as root by GTID, with the workload's output options and `flags`."""
    return [
        "java",
        "-cp",
        f"{maxwell_home}/lib/*:{maxwell_home}/lib/kafka-clients/*",
        "com.zendesk.maxwell.Maxwell",
        "--host=127.0.0.1",
        f"--port={srv.port}",
        "--user=root",
        f"--password={srv.root_password}",
        "--gtid_mode=true",
        *MAXWELL_OUTPUT,
        *flags,
    ]


def _wait_for(path: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise SystemExit(f"maxwell exited with {proc.returncode}")
        time.sleep(0.5)
    raise SystemExit(f"no {needle!r} in {path} after {timeout:.0f} s")


def record(flavor: str, maxwell_home: Path, out: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp, servers.running(flavor, 7801) as srv:  # type: ignore[arg-type]
        lines = Path(tmp) / "maxwell.jsonl"
        log_path = Path(os.environ.get("MAXWELL_LOG", Path(tmp) / "maxwell.log"))
        log = open(log_path, "wb")  # noqa: SIM115
        cmd = maxwell_command(
            maxwell_home, srv, "--replica_server_id=7899", "--producer=file", f"--output_file={lines}"
        )
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            srv.execute("CREATE DATABASE maxwell_ready", "CREATE TABLE maxwell_ready.t (id int PRIMARY KEY)")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # Maxwell has captured its schema once it prints this row
                srv.execute("INSERT INTO maxwell_ready.t VALUES (1) ON DUPLICATE KEY UPDATE id = 1")
                if lines.exists() and '"maxwell_ready"' in lines.read_text():
                    break
                if proc.poll() is not None:
                    log.flush()
                    sys.stderr.write(log_path.read_text()[-4000:])
                    raise SystemExit(f"maxwell exited with {proc.returncode}")
                time.sleep(1)
            run_workload(srv)
            _wait_for(lines, f'"table":"{END_TABLE}","type":"insert"', proc, 120)
        finally:
            proc.terminate()
            proc.wait(30)
        kept = [line for line in lines.read_text().split("\n") if f'"database":"{DB}' in line]
        out.write_text("".join(line + "\n" for line in kept))
        print(f"{len(kept)} lines from Maxwell ({os.path.basename(maxwell_home)}) on {srv.version} -> {out}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flavor", choices=("mariadb", "mysql"), default="mariadb")
    p.add_argument("--maxwell-home", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    return record(a.flavor, a.maxwell_home.resolve(), a.out)


if __name__ == "__main__":
    sys.exit(main())
