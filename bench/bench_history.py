"""A DBA's questions to a row history of --events versions (default 5,000,000), asked the way a user asks them
(a cold `mysqlcapture-compact history` process, delta-rs and pyarrow, no JVM), beside the same questions asked
through Spark (a cold process that starts a session and reads the history table, and the query alone in a
started session).

The history is made by the compaction job itself, from a change log synthesized as bench_compaction.py does
(one table, --keys keys, --per-second versions stamped with each second: a busy table), so its files are laid
out as a real history's (disjoint key-hash ranges, sorted by key hash).

- one key: every version of one row (`--pk K --format json`);
- one hour: every version of the table in its last hour (`--since T-3600 --until T --format json`).

    python bench/bench_history.py [--events 5000000] [--keys 500000] [--per-second 50]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from bench_compaction import synthesize  # noqa: E402

SPARK_QUESTION = """
import sys, time, json
began = time.monotonic()
from pyspark.sql import functions as F
from mysqlcapture_compaction.session import build_session
from mysqlcapture_compaction import values
path, kind, a, b = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
spark = build_session(master="local[2]", app_name="history-question")
started = time.monotonic()
versions = spark.read.format("delta").load(path)
if kind == "key":
    digest = values.row_hash("bench", "t0", a)
    found = versions.where((F.col("pk_hash") == digest) & (F.col("pk") == a))
else:
    found = versions.where(F.col("ts").between(int(a), int(b)) & ~F.col("moved_away"))
lines = found.orderBy(F.col("order_key").desc()).toJSON().collect()
with open("/dev/null", "w") as sink:
    sink.write("\\n".join(lines))
done = time.monotonic()
spark.stop()
print(json.dumps({"rows": len(lines), "process": done - began, "query": done - started}))
"""


def _cli(changelog: str, *args: str) -> tuple[float, int]:
    """One cold `mysqlcapture-compact history` process: (seconds, versions printed)."""
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "mysqlcapture_compaction.cli", "history", "--changelog", changelog, *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return time.monotonic() - began, len(out.stdout.splitlines())


def _spark(history: str, kind: str, a: str, b: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", SPARK_QUESTION, history, kind, a, b], capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def measure(events: int, keys: int, per_second: int, repeat: int) -> list[str]:
    import mysqlcapture_compaction.job as job
    import mysqlcapture_compaction.targets as targets
    from mysqlcapture_compaction.session import build_session

    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    uri = str(work / "changelog")
    child = multiprocessing.get_context("spawn").Process(
        target=synthesize, args=(uri,), kwargs={"events": events, "tables": 1, "keys": keys, "per_second": per_second}
    )
    child.start()
    child.join()
    assert child.exitcode == 0, "synthesizing the change log failed"
    spark = build_session(master="local[2]", conf={"spark.driver.memory": "4g"})
    output = uri + "-compacted"
    job.run(spark, changelog=uri, output=output)
    history = targets.Target(output, "bench", "t0").history
    versions = spark.read.format("delta").load(history)
    total = versions.count()
    key = versions.groupBy("pk").count().orderBy("count", ascending=False).first()
    last = versions.agg({"ts": "max"}).first()
    assert last is not None
    last_ts = last[0]
    spark.stop()
    assert key is not None
    pk = str(key["pk"])
    since, until = str(last_ts - 3600), str(last_ts)
    lines = [f"row history: {total:,} versions of bench.t0 ({keys:,} keys, {per_second} changes/s), best of {repeat}"]
    questions = [
        ("one key, every version (--pk)", "key", pk, "", ["--table", "bench.t0", "--pk", pk]),
        ("one hour of the table (--since/--until)", "window", since, until,
         ["--table", "bench.t0", "--since", since, "--until", until]),
    ]  # fmt: skip
    for label, kind, a, b, flags in questions:
        runs = [_cli(uri, *flags, "--format", "json") for _ in range(repeat)]
        best, median, count = min(t for t, _ in runs), statistics.median(t for t, _ in runs), runs[0][1]
        spark_run = _spark(history, kind, a, b)
        assert spark_run["rows"] == count, (label, spark_run, count)
        lines.append(
            f"  {label:<42} {count:>9,} versions  cold CLI {best:6.2f} s (median {median:.2f})  "
            f"Spark: cold process {spark_run['process']:6.2f} s ({spark_run['process'] / best:.1f}x the CLI), "
            f"query in a started session {spark_run['query']:6.2f} s ({spark_run['query'] / best:.1f}x)"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--per-second", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for line in measure(args.events, args.keys, args.per_second, args.repeat):
        print(line, flush=True)


if __name__ == "__main__":
    main()
