"""The Kafka sink beside the physical limit: a raw transactional producer writing the same messages.

On a private server (MariaDB by default) bench.events is filled with --rows rows; a private broker (Apache Kafka's
own jars, KRaft, tests/kafka) takes, --repeat times in turn, each on topics of its own:
1. the worker end to end: read the binlog, decode, render Maxwell's values, keys and partitions, commit them in
   Kafka transactions with the checkpoint (flush.maxEvents 50,000 a transaction), a new capture each time;
2. the baseline: the same messages (keys, values, partitions, read back from 1), produced by a bare
   confluent-kafka transactional producer (produce_batch, one call a partition) in transactions of as many
   messages, already in memory (no source, no decoding, no rendering): what the client and broker can take on
   this machine.

Each is timed as a process from its start to its last commit; the best of each is compared. Taking turns, both
meet a broker in the same state: a new broker's JVM compiles its hot paths during its first minutes, and the run
that met it cold lost up to half its rate.

    python bench/bench_kafka.py [--rows 1000000] [--flavor mariadb] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from common import Run, bench_manifest, child_env, fill, run_child, worker_args  # noqa: E402
from mysqlcapture_dev.embedded import start_server  # noqa: E402

from tests.kafka.broker import KafkaBroker  # noqa: E402

TOPIC, RAW_TOPIC, TRANSACTION = "bench-events", "bench-raw", 50_000
CHECKPOINTS = "mysqlcapture-checkpoints"


def dump_messages(bootstrap: str, topic: str, path: str) -> None:
    """A child's work: pickle (key, value, partition) of every committed message of `topic` to `path` and print
    how many there are and their mean size. In a child, so that no later child inherits the parent's memory
    (a child's peak RSS counts what its parent held when it was started)."""
    from tests.kafka.broker import read_topic

    messages = [(m.key(), m.value(), m.partition()) for m in read_topic(bootstrap, topic)]
    with open(path, "wb") as f:
        pickle.dump(messages, f)
    print(len(messages), sum(len(v or b"") + len(k or b"") for k, v, _ in messages) / max(1, len(messages)))


def _dumped(bootstrap: str, topic: str, path: Path) -> tuple[int, float]:
    """(messages, mean bytes of a message's key and value) of `topic`, dumped to `path` by a child."""
    args = [sys.executable, __file__, "--dump", f"{bootstrap},{topic},{path}"]
    count, size = subprocess.run(args, check=True, capture_output=True, text=True).stdout.split()
    return int(count), float(size)


def raw_produce(bootstrap: str, topic: str, path: str) -> None:
    """The baseline's child: produce the pickled messages to `topic` in transactions of TRANSACTION, as fast as
    it can."""
    from confluent_kafka import Producer

    with open(path, "rb") as f:
        messages = pickle.load(f)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench-raw", "linger.ms": 5, "acks": "all",
         "queue.buffering.max.messages": 2**31 - 1}
    )  # fmt: skip
    producer.init_transactions(60)
    for lo in range(0, len(messages), TRANSACTION):
        producer.begin_transaction()
        by_partition: dict[int, list[dict[str, bytes | None]]] = {}
        for key, value, partition in messages[lo : lo + TRANSACTION]:
            by_partition.setdefault(partition, []).append({"key": key, "value": value})
        for partition, batch in by_partition.items():  # librdkafka's fastest way in: one call a partition
            if producer.produce_batch(topic, batch, partition=partition) != len(batch):
                raise SystemExit("the raw producer's queue refused messages")
        producer.commit_transaction(60)


def _warm(bootstrap: str, rounds: int) -> None:
    """A broker as a capture meets it: every round's topics there and its transaction coordinator loaded (a new
    broker's first transactional producer waits for that), so that no run pays the broker's own start."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"{t}-{r}" for r in range(rounds) for t in (TOPIC, RAW_TOPIC)]
    topics = [NewTopic(t, num_partitions=3, replication_factor=1) for t in names]
    topics.append(NewTopic(CHECKPOINTS, 1, 1, config={"cleanup.policy": "compact"}))
    for future in admin.create_topics(topics).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-warm-up"})
    producer.init_transactions(120)
    producer.begin_transaction()
    producer.produce(CHECKPOINTS, b"warm-up", key=b"warm-up", partition=0)
    producer.commit_transaction(60)


def _worker(kafka: KafkaBroker, port: int, log_file: str, work: Path, rows: int, turn: int) -> tuple[Run, float]:
    """The worker as a new capture writing topic TOPIC-`turn`: its run and the broker's CPU seconds meanwhile."""
    manifest = bench_manifest(
        port,
        f"bench-kafka-{turn}",
        str(work / "unused"),
        server_id=4344 + turn,
        start={"from": "position", "binlogFile": log_file, "binlogPosition": 4},
    )
    sink = {"bootstrapServers": kafka.bootstrap, "topic": f"{TOPIC}-{turn}", "schemaHistoryUri": str(work / f"h{turn}")}
    manifest["spec"]["sink"] = {"type": "kafka", "kafka": sink}
    path = work / f"kafka-{turn}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    before = _cpu_seconds(kafka)
    run = run_child([*worker_args(path), "--log-level", "warning"], rows, env=child_env(MYSQL_PASSWORD="root"),
                    what="worker (kafka)")  # fmt: skip
    return run, _cpu_seconds(kafka) - before


def _raw(kafka: KafkaBroker, dump: Path, rows: int, turn: int) -> tuple[Run, float]:
    """The raw producer writing the dumped messages to RAW_TOPIC-`turn`, and the broker's CPU seconds meanwhile."""
    before = _cpu_seconds(kafka)
    args = [sys.executable, __file__, "--raw", f"{kafka.bootstrap},{RAW_TOPIC}-{turn},{dump}"]
    run = run_child(args, rows, what="raw producer")
    return run, _cpu_seconds(kafka) - before


def measure(rows: int, flavor: str, repeat: int = 2) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    server = start_server(81, flavor=flavor, max_binlog_size="1G")  # type: ignore[arg-type]
    try:
        server.execute("CREATE DATABASE bench")
        log_file = server.binlog_status().file
        fill(server, "events", rows)
        with KafkaBroker(partitions=3) as kafka:
            _warm(kafka.bootstrap, repeat)
            workers, raws = [], []
            for turn in range(repeat):
                workers.append(_worker(kafka, server.port, log_file, work, rows, turn))
                dump = work / f"messages-{turn}.pickle"
                count, size = _dumped(kafka.bootstrap, f"{TOPIC}-{turn}", dump)
                if count != rows:
                    raise SystemExit(f"the worker wrote {count} messages, the binlog holds {rows} rows")
                raws.append(_raw(kafka, dump, rows, turn))
                dump.unlink()
    finally:
        server.stop()
    worker, on_worker = max(workers, key=lambda r: r[0].rate)
    raw, on_raw = max(raws, key=lambda r: r[0].rate)
    return _lines(server.version, worker, raw, size, (on_worker, on_raw), [r.rate for r, _ in workers],
                  [r.rate for r, _ in raws])  # fmt: skip


def _cpu_seconds(kafka: KafkaBroker) -> float:
    """The broker JVMs' CPU time so far (user + system, from /proc)."""
    assert kafka.procs, "no broker runs"
    ticks = 0
    for proc in kafka.procs.values():
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _lines(
    version: str,
    worker: Run,
    raw: Run,
    size: float,
    broker: tuple[float, float],
    worker_rates: list[float],
    raw_rates: list[float],
) -> list[str]:
    on_worker, on_raw = broker
    share_worker, share_raw = on_worker / (on_worker + worker.cpu_seconds), on_raw / (on_raw + raw.cpu_seconds)
    turns = ", ".join(f"{w:,.0f} / {r:,.0f}" for w, r in zip(worker_rates, raw_rates, strict=True))
    return [
        f"{version}: Kafka sink, bench.events, {worker.rows:,} rows, {size:,.0f}-byte messages, 3 partitions, "
        f"transactions of {TRANSACTION:,}; best of {len(worker_rates)} turns each (worker / raw: {turns})",
        f"  raw transactional producer, same messages (baseline) {raw.rate:>10,.0f} msgs/s  1.00x  "
        f"({raw.cpu_seconds:.1f} CPU s, peak RSS {raw.peak_rss_mib:,.0f} MiB)",
        f"  worker end to end: binlog to Kafka, exactly once     {worker.rate:>10,.0f} rows/s  "
        f"{worker.rate / raw.rate:.2f}x  ({worker.cpu_seconds:.1f} CPU s, peak RSS {worker.peak_rss_mib:,.0f} MiB)",
        f"  the broker's CPU: {on_worker:.1f} s during the worker's best run ({share_worker:.0%} of the two "
        f"processes'), {on_raw:.1f} s during the baseline's ({share_raw:.0%})",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--flavor", default="mariadb")
    parser.add_argument("--repeat", type=int, default=2, help="turns of each, the best compared")
    parser.add_argument("--raw", help=argparse.SUPPRESS)  # bootstrap,topic,path: the baseline's child
    parser.add_argument("--dump", help=argparse.SUPPRESS)  # bootstrap,topic,path: read a topic back, in a child
    args = parser.parse_args()
    if args.dump:
        dump_messages(*args.dump.split(",", 2))
        return
    if args.raw:
        bootstrap, topic, path = args.raw.split(",", 2)
        raw_produce(bootstrap, topic, path)
        return
    for line in measure(args.rows, args.flavor, args.repeat):
        print(line, flush=True)


if __name__ == "__main__":
    main()
