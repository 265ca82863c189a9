"""The Kafka sink beside the physical limit: a raw transactional producer writing the same messages.

On a private server (MariaDB by default) bench.events is filled with --rows rows; a private broker (Apache Kafka's
own jars, KRaft, tests/kafka) takes:
1. the worker end to end: read the binlog, decode, render Maxwell's values, keys and partitions, commit them in
   Kafka transactions with the checkpoint (flush.maxEvents 50,000 a transaction);
2. the baseline: the same messages (keys, values, partitions, read back from 1), produced by a bare
   confluent-kafka transactional producer (produce_batch, one call a partition) in transactions of as many
   messages, already in memory (no source, no decoding, no rendering): what the client and broker can take on
   this machine.

Both meet a warm broker: the topics exist and the transaction coordinator is loaded before either starts.

    python bench/bench_kafka.py [--rows 300000] [--flavor mariadb]
"""

from __future__ import annotations

import argparse
import os
import pickle
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


def _messages(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None, int]]:
    """(key, value, partition) of every committed message of `topic`."""
    from tests.kafka.broker import read_topic

    return [(m.key(), m.value(), m.partition()) for m in read_topic(bootstrap, topic)]


def raw_produce(bootstrap: str, path: str) -> None:
    """The baseline's child: produce the pickled messages in transactions of TRANSACTION, as fast as it can."""
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
            if producer.produce_batch(RAW_TOPIC, batch, partition=partition) != len(batch):
                raise SystemExit("the raw producer's queue refused messages")
        producer.commit_transaction(60)


def _warm(bootstrap: str) -> None:
    """A broker as a capture meets it: its topics there and its transaction coordinator loaded (a new broker's
    first transactional producer waits for that), so that neither run pays the broker's own start."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, num_partitions=3, replication_factor=1) for t in (TOPIC, RAW_TOPIC)]
    topics.append(NewTopic("mysqlcapture-checkpoints", 1, 1, config={"cleanup.policy": "compact"}))
    for future in admin.create_topics(topics).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-warm-up"})
    producer.init_transactions(120)
    producer.begin_transaction()
    producer.produce(RAW_TOPIC, b"warm-up", partition=0)
    producer.commit_transaction(60)


def measure(rows: int, flavor: str) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    server = start_server(81, flavor=flavor, max_binlog_size="1G")  # type: ignore[arg-type]
    try:
        server.execute("CREATE DATABASE bench")
        log_file = server.binlog_status().file
        fill(server, "events", rows)
        with KafkaBroker(partitions=3) as kafka:
            _warm(kafka.bootstrap)
            manifest = bench_manifest(
                server.port,
                "bench-kafka",
                str(work / "unused"),
                server_id=4344,
                start={"from": "position", "binlogFile": log_file, "binlogPosition": 4},
            )
            manifest["spec"]["sink"] = {
                "type": "kafka",
                "kafka": {"bootstrapServers": kafka.bootstrap, "topic": TOPIC, "schemaHistoryUri": str(work / "h")},
            }
            path = work / "kafka.yaml"
            path.write_text(yaml.safe_dump(manifest))
            env = child_env(MYSQL_PASSWORD="root")
            broker_before = _cpu_seconds(kafka)
            worker = run_child([*worker_args(path), "--log-level", "warning"], rows, env=env, what="worker (kafka)")
            broker_worker = _cpu_seconds(kafka) - broker_before
            messages = _messages(kafka.bootstrap, TOPIC)
            if len(messages) != rows:
                raise SystemExit(f"the worker wrote {len(messages)} messages, the binlog holds {rows} rows")
            dump = work / "messages.pickle"
            with open(dump, "wb") as f:
                pickle.dump(messages, f)
            size = sum(len(v or b"") + len(k or b"") for k, v, _ in messages) / len(messages)
            args = [sys.executable, __file__, "--raw", f"{kafka.bootstrap},{dump}"]
            broker_before = _cpu_seconds(kafka)
            raw = run_child(args, rows, what="raw producer")
            broker_raw = _cpu_seconds(kafka) - broker_before
    finally:
        server.stop()
    return _lines(server.version, worker, raw, size, (broker_worker, broker_raw))


def _cpu_seconds(kafka: KafkaBroker) -> float:
    """The broker JVM's CPU time so far (user + system, from /proc)."""
    assert kafka.proc is not None
    fields = Path(f"/proc/{kafka.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _lines(version: str, worker: Run, raw: Run, size: float, broker: tuple[float, float]) -> list[str]:
    on_worker, on_raw = broker
    share_worker, share_raw = on_worker / (on_worker + worker.cpu_seconds), on_raw / (on_raw + raw.cpu_seconds)
    return [
        f"{version}: Kafka sink, bench.events, {worker.rows:,} rows, {size:,.0f}-byte messages, 3 partitions, "
        f"transactions of {TRANSACTION:,}",
        f"  raw transactional producer, same messages (baseline) {raw.rate:>10,.0f} msgs/s  1.00x",
        f"  worker end to end: binlog to Kafka, exactly once     {worker.rate:>10,.0f} rows/s  "
        f"{worker.rate / raw.rate:.2f}x  ({worker.cpu_seconds:.1f} CPU s, peak RSS {worker.peak_rss_mib:,.0f} MiB)",
        f"  the broker's CPU: {on_worker:.1f} s during the worker's run ({share_worker:.0%} of the two processes'), "
        f"{on_raw:.1f} s during the baseline's ({share_raw:.0%}); raw producer peak RSS {raw.peak_rss_mib:,.0f} MiB",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--flavor", default="mariadb")
    parser.add_argument("--raw", help=argparse.SUPPRESS)  # bootstrap,path: the baseline's child
    args = parser.parse_args()
    if args.raw:
        bootstrap, path = args.raw.split(",", 1)
        raw_produce(bootstrap, path)
        return
    for line in measure(args.rows, args.flavor):
        print(line, flush=True)


if __name__ == "__main__":
    main()
