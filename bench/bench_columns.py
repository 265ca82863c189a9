"""spec.columns beside no rules: the same table and binlog, streamed and snapshotted with and without column rules.

On a private server bench.events is filled with --rows rows. The ruled capture hashes three columns (`name`, a
utf8mb4 VARCHAR; `amount`, a DECIMAL; `payload`, a BLOB, hashed as bytes) and excludes one (`attrs`, the JSON
document); the baseline is the same capture without rules. Each is run --repeat times, alternating, and the best
rate of each is kept (the machine is shared): streaming end to end into Delta, and the snapshot's first to last
commit.

    python bench/bench_columns.py [--rows 300000] [--flavors mariadb,mysql] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_snapshot import measure_snapshot, purge_history  # noqa: E402
from common import fill, run_worker  # noqa: E402
from mysqlcapture_dev.embedded import start_server  # noqa: E402

KEY_ENV = {"BENCH_MASK_KEY": "bench-key-0123456789"}
RULES: dict[str, Any] = {
    "columns": {
        "exclude": ["bench.*.attrs"],
        "hash": {
            "columns": ["bench.*.name", "bench.*.amount", "bench.*.payload"],
            "keyFrom": {"env": "BENCH_MASK_KEY"},
        },
    }
}
CASES: tuple[tuple[str, dict[str, Any]], ...] = (("no rules", {}), ("3 hashed + 1 excluded", RULES))


def measure(flavor: str, rows: int, repeat: int) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="bench-columns-"))
    server = start_server(83, flavor=flavor, max_binlog_size="1G")  # type: ignore[arg-type]
    streaming: dict[str, float] = {}
    snapshot: dict[str, float] = {}
    try:
        server.execute("CREATE DATABASE bench")
        log_file = server.binlog_status().file
        fill(server, "events", rows)
        for i in range(repeat):
            for case, spec in CASES:
                tag = "ruled" if spec else "plain"
                run = run_worker(server.port, work, f"cols-{tag}-{i}", log_file, rows=rows, spec=spec, env=KEY_ENV)
                streaming[case] = max(streaming.get(case, 0.0), run.rate)
        purge_history(server)
        for i in range(repeat):
            for case, spec in CASES:
                tag = "ruled" if spec else "plain"
                _, seconds = measure_snapshot(server.port, rows, work, tag=f"-{tag}-{i}", spec=spec, env=KEY_ENV)
                snapshot[case] = max(snapshot.get(case, 0.0), rows / seconds)
    finally:
        server.stop()
    base, ruled = (case for case, _ in CASES)
    return [
        f"{server.version}: spec.columns, bench.events, {rows:,} rows, best of {repeat} (target >= 0.90x)",
        f"  streaming, no rules (baseline)          {streaming[base]:>10,.0f} rows/s  1.00x",
        f"  streaming, {ruled:<28} {streaming[ruled]:>10,.0f} rows/s  {streaming[ruled] / streaming[base]:.2f}x",
        f"  snapshot, no rules (baseline)           {snapshot[base]:>10,.0f} rows/s  1.00x",
        f"  snapshot, {ruled:<29} {snapshot[ruled]:>10,.0f} rows/s  {snapshot[ruled] / snapshot[base]:.2f}x",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--flavors", default="mariadb,mysql")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    for flavor in args.flavors.split(","):
        for line in measure(flavor.strip(), args.rows, args.repeat):
            print(line, flush=True)


if __name__ == "__main__":
    main()
