"""The Kafka sink failing closed on a real broker: a second worker of the capture fences the first (which stops
without writing), a broker restarted mid-stream loses and repeats nothing (away for longer than a commit may wait,
it stops the worker with one line), partition leaders moving mid-stream lose and repeat nothing, and a topic whose
partition count changes stops the capture until a person confirms the new count; a start while no broker hosts the
transaction coordinator is one line, and the next start goes on."""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ElectionType, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.kafka_routing import java_hash

from tests.kafka.broker import KafkaBroker, read_topic
from tests.support import WorkerProcess, manifest, wait_until, write_manifest


@pytest.fixture
def kafka() -> Iterator[KafkaBroker]:
    with KafkaBroker(partitions=3) as broker:
        yield broker


def _insert(conn: Any, ids: range) -> None:
    with conn.cursor() as cur:
        for i in ids:
            cur.execute("INSERT INTO kf.t VALUES (%s, %s)", (i, f"row {i}"))
            conn.commit()


def _checkpoint(kafka: KafkaBroker, capture: str) -> dict[str, Any] | None:
    found = [m for m in read_topic(kafka.bootstrap, "mysqlcapture-checkpoints") if m.key() == capture.encode()]
    return json.loads(found[-1].value()) if found else None


def _at_end(kafka: KafkaBroker, srv: PrivateServer, capture: str, *workers: WorkerProcess) -> Callable[[], bool]:
    status = srv.binlog_status()

    def done() -> bool:
        for w in workers:
            w.running()
        pos = _checkpoint(kafka, capture)
        return pos is not None and (pos["binlog_file"], pos["binlog_pos"]) >= (status.file, status.pos)

    return done


def _ids(kafka: KafkaBroker, topic: str) -> list[int]:
    return sorted(json.loads(m.value())["data"]["id"] for m in read_topic(kafka.bootstrap, topic, settled=True))


def _setup(srv: PrivateServer) -> Any:
    conn = srv.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE kf")
        cur.execute("CREATE TABLE kf.t (id INT PRIMARY KEY, note VARCHAR(20))")
    conn.commit()
    return conn


def _one_line(worker: WorkerProcess) -> str:
    wait_until(lambda: not worker.alive(), timeout=120, what="the worker to stop")
    worker.kill()  # exited: closes its log
    said = [ln for ln in worker.log_text().splitlines() if ln.startswith("mysqlcapture: ")]
    assert worker.proc.returncode == 1 and len(said) == 1, worker.log_text()
    assert "Traceback" not in worker.log_text()
    return said[0]


def test_a_second_worker_fences_the_first_and_broker_restarts_lose_and_repeat_nothing(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    """A second worker fences the first; the broker away for a few seconds (producing and committing wait), then
    for longer than a commit may wait (45 s: the worker stops with one line naming the brokers, and the next start
    aborts its open transaction and goes on from the last checkpoint)."""
    srv = start_source(44)
    conn = _setup(srv)
    sink = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "h"), "topic": "kf",
            "transactionTimeoutMs": 45000}  # fmt: skip
    doc = manifest("fence", port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "earliest"},
                   flush={"maxIntervalMs": 100}, extra_spec={"heartbeat": {"intervalSeconds": 1}})  # fmt: skip
    path = write_manifest(tmp_path / "fence.yaml", doc)
    first = WorkerProcess(path, log_path=tmp_path / "first.log")
    second: WorkerProcess | None = None
    third: WorkerProcess | None = None
    said: list[str] = []
    try:
        _insert(conn, range(0, 50))
        wait_until(_at_end(kafka, srv, "fence", first), timeout=120, what="the first worker to write")
        # The same capture run elsewhere (its own replica server_id: the same one is refused by the source).
        other = write_manifest(tmp_path / "other.yaml", {**doc, "spec": {**doc["spec"], "source": {
            **doc["spec"]["source"], "serverId": 9002}}})  # fmt: skip
        second = WorkerProcess(other, log_path=tmp_path / "second.log")
        line = _one_line(first)  # its next commit (a heartbeat's, at the latest) finds itself fenced
        assert "another worker of capture fence took over its Kafka transactions" in line, line
        assert "this one stopped without writing; run one worker per capture" in line, line
        _insert(conn, range(50, 100))
        wait_until(_at_end(kafka, srv, "fence", second), timeout=120, what="the second worker to go on")
        # The broker goes away for a while, rows are written meanwhile, and it comes back.
        kafka.restart(down=lambda: (_insert(conn, range(100, 150)), time.sleep(3)))
        _insert(conn, range(150, 200))
        wait_until(_at_end(kafka, srv, "fence", second), timeout=240, what="the worker to go on after the restart")
        running = second

        def away() -> None:
            _insert(conn, range(200, 250))
            wait_until(lambda: not running.alive(), timeout=300, what="the worker to stop")
            said.append(_one_line(running))

        kafka.restart(down=away)
        assert "the Kafka brokers did not acknowledge the commit within 45 s" in said[0], said[0]
        assert f"check that the brokers of {kafka.bootstrap} are up and reachable" in said[0], said[0]
        third = WorkerProcess(path, log_path=tmp_path / "third.log")
        _insert(conn, range(250, 300))
        wait_until(_at_end(kafka, srv, "fence", third), timeout=240, what="the worker to go on after the outage")
        assert third.stop() == 0, third.log_text()
    finally:
        for worker in (first, second, third):
            if worker is not None:
                worker.kill()
        conn.close()
    assert _ids(kafka, "kf") == list(range(300)), "a row missing or written twice"


def test_a_changed_partition_count_stops_the_capture_until_it_is_confirmed(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    srv = start_source(45)
    conn = _setup(srv)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic("pc", num_partitions=2, replication_factor=1)])["pc"].result(60)
    sink: dict[str, Any] = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "h"),
                            "topic": "pc", "partitionBy": "primaryKey"}  # fmt: skip

    def run(name: str) -> WorkerProcess:
        doc = manifest("parts", port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "earliest"},
                       flush={"maxIntervalMs": 100}, extra_spec={"heartbeat": {"intervalSeconds": 1}})  # fmt: skip
        return WorkerProcess(write_manifest(tmp_path / "parts.yaml", doc), log_path=tmp_path / f"{name}.log")

    worker = run("first")
    try:
        _insert(conn, range(0, 40))
        wait_until(_at_end(kafka, srv, "parts", worker), timeout=120, what="the rows over 2 partitions")
        admin.create_partitions([NewPartitions("pc", 3)])["pc"].result(60)
        _insert(conn, range(40, 60))  # noticed within RECOUNT_SECONDS: the worker stops
        said = ("topic pc has 3 partitions, but the capture's messages so far were partitioned over 2: a key's "
                "partition follows the count")  # fmt: skip
        assert said in _one_line(worker)
        worker = run("unconfirmed")  # the count is kept with the checkpoint: a restart refuses it too
        line = _one_line(worker)
        assert said in line and "confirm it with spec.sink.kafka.confirmedPartitions: {pc: 3}" in line, line
        sink["confirmedPartitions"] = {"pc": 3}
        worker = run("confirmed")
        _insert(conn, range(60, 80))
        wait_until(_at_end(kafka, srv, "parts", worker), timeout=120, what="the capture to go on over 3 partitions")
        assert worker.stop() == 0, worker.log_text()
    finally:
        worker.kill()
        conn.close()
    messages = read_topic(kafka.bootstrap, "pc", settled=True)
    ids = [json.loads(m.value())["data"]["id"] for m in messages]
    assert sorted(ids) == list(range(80)), "a row missing or written twice"
    over = {i: (m.partition(), abs(java_hash(str(i)))) for i, m in zip(ids, messages, strict=True)}
    assert all(p == h % 2 for i, (p, h) in over.items() if i < 40)
    assert all(p == h % 3 for i, (p, h) in over.items() if i >= 60)


def test_a_missing_topic_is_one_line_unless_the_capture_may_create_it(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(46)
    conn = _setup(srv)
    with KafkaBroker(partitions=1, auto_create=False) as kafka:
        sink: dict[str, Any] = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "h"),
                                "topic": "made", "maxMessageBytes": 200000}  # fmt: skip

        def run(name: str) -> WorkerProcess:
            doc = manifest("made", port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "earliest"},
                           flush={"maxIntervalMs": 100})  # fmt: skip
            return WorkerProcess(write_manifest(tmp_path / "made.yaml", doc), log_path=tmp_path / f"{name}.log")

        try:
            _insert(conn, range(0, 10))
            worker = run("refused")
            line = _one_line(worker)
            assert line.startswith("mysqlcapture: topic made cannot be written (Broker: Unknown topic or partition)")
            assert "set spec.sink.kafka.createTopics" in line, line
            sink["createTopics"] = {"partitions": 4}
            worker = run("created")
            wait_until(_at_end(kafka, srv, "made", worker), timeout=120, what="the rows in the created topic")
            assert worker.stop() == 0, worker.log_text()
        finally:
            worker.kill()
            conn.close()
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        assert len(admin.list_topics("made", timeout=30).topics["made"].partitions) == 4
        from confluent_kafka.admin import ConfigResource

        config = admin.describe_configs([ConfigResource("topic", "made")])
        entries = next(iter(config.values())).result(30)
        assert entries["max.message.bytes"].value == str(200000 + 4096)
        assert _ids(kafka, "made") == list(range(10))


def test_a_deleted_checkpoint_topic_stops_the_capture_with_one_line_and_writes_nothing(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    srv = start_source(47)
    conn = _setup(srv)
    history = tmp_path / "h"
    sink = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(history), "topic": "gone"}
    doc = manifest("gone", port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "earliest"},
                   flush={"maxIntervalMs": 100})  # fmt: skip
    path = write_manifest(tmp_path / "gone.yaml", doc)
    worker = WorkerProcess(path, log_path=tmp_path / "first.log")
    try:
        _insert(conn, range(0, 10))
        wait_until(_at_end(kafka, srv, "gone", worker), timeout=120, what="the first rows")
        assert worker.stop() == 0, worker.log_text()
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        for future in admin.delete_topics(["mysqlcapture-checkpoints"]).values():
            future.result(30)
        wait_until(lambda: "mysqlcapture-checkpoints" not in admin.list_topics(timeout=30).topics, timeout=60,
                   what="the checkpoint topic to be gone")  # fmt: skip
        _insert(conn, range(10, 20))
        for attempt in ("refused", "refused again"):  # a refusal leaves nothing that lets the next start go on
            worker = WorkerProcess(path, log_path=tmp_path / f"{attempt}.log")
            wait_until(lambda w=worker: not w.alive(), timeout=120, what="the worker to stop")
            worker.kill()
            said = [ln for ln in worker.log_text().splitlines() if ln.startswith("mysqlcapture: ")]
            assert worker.proc.returncode == 4, worker.log_text()
            assert said == [
                f"mysqlcapture: the checkpoint topic mysqlcapture-checkpoints is missing, but the schema history at "
                f"{history} shows capture gone has run: going on would start it over and repeat or skip events. "
                "Restore the topic, point spec.sink.kafka.bootstrapServers and checkpointTopic at where the "
                "capture's checkpoints are, or remove the schema history to start the capture over (from "
                "spec.start); nothing was written"
            ], worker.log_text()
            assert "Traceback" not in worker.log_text()
            assert "mysqlcapture-checkpoints" not in admin.list_topics(timeout=30).topics
            assert _ids(kafka, "gone") == list(range(10)), "the refused worker wrote"
    finally:
        worker.kill()
        conn.close()


def test_a_message_the_topic_refuses_is_named_in_one_line_and_nothing_is_written(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    """A topic whose max.message.bytes is below the messages: the brokers refuse them in the commit's transaction.
    The row batches went through the producer's handle, which names no message; the sink aborts, commits the same
    events again through produce_batch, and stops with the refused message and the fix. Nothing is written."""
    srv = start_source(47)
    conn = srv.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE kf")
        cur.execute("CREATE TABLE kf.big (id INT PRIMARY KEY, note TEXT)")
        for i in range(20):
            cur.execute("INSERT INTO kf.big VALUES (%s, %s)", (i, "x" * (3000 if i == 13 else 10)))
    conn.commit()
    conn.close()
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    small = NewTopic("small", num_partitions=1, replication_factor=1, config={"max.message.bytes": "2000"})
    for future in admin.create_topics([small]).values():
        future.result(60)
    sink = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "h"), "topic": "small"}
    doc = manifest("small", port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "earliest"})
    worker = WorkerProcess(write_manifest(tmp_path / "small.yaml", doc), log_path=tmp_path / "small.log")
    try:
        line = _one_line(worker)
    finally:
        worker.kill()
    refused = "mysqlcapture: Kafka refused a message: Broker: Message size too large (topic small: a record batch from "
    assert line.startswith(refused + 'the message of key {"database":"kf","table":"big","pk.id":'), line
    assert "the topic's max.message.bytes is below spec.sink.kafka.maxMessageBytes" in line, line
    assert "committing the same events again, message by message" in worker.log_text()
    assert read_topic(kafka.bootstrap, "small") == []


REFUSED = "ProduceRequest failed: Broker: Not leader for partition"  # librdkafka's debug line of such a refusal
# The one lines a worker stops with while node 2 (which holds the transaction coordinator) restarts: a commit not
# acknowledged in time, or a start the coordinator did not take in time.
RESTARTED = ("did not acknowledge the commit", "the transaction coordinator of mysqlcapture-moves did not take")


def _writes(srv: PrivateServer, stop: threading.Event, done: list[tuple[int, str]]) -> None:
    """Commit small transactions as fast as one connection can until `stop`: inserts of new ids and updates of
    earlier ones, each write (id, note) recorded in commit order."""
    conn = srv.connect()
    rng = random.Random(32)
    try:
        with conn.cursor() as cur:
            n = 0
            while not stop.is_set():
                wrote = []
                for _ in range(rng.randint(1, 4)):
                    if done and rng.random() < 0.3:
                        row = (rng.choice(done)[0], f"u{n}")
                        cur.execute("UPDATE kf.t SET note = %s WHERE id = %s", (row[1], row[0]))
                    else:
                        row = (n, f"i{n}")
                        cur.execute("INSERT INTO kf.t VALUES (%s, %s)", row)
                    wrote.append(row)
                    n += 1
                conn.commit()
                done.extend(wrote)
    finally:
        conn.close()


def _replicated(admin: AdminClient, topics: list[str]) -> bool:
    """Whether every partition of `topics` has all its replicas in sync (a restarted node has caught up)."""
    listed = admin.list_topics(timeout=30).topics
    return all(
        t in listed and all(sorted(p.isrs) == sorted(p.replicas) for p in listed[t].partitions.values()) for t in topics
    )


def _stable_end(admin: AdminClient, topic: str) -> int:
    """The last stable offset of `topic`'s partition 0 (past every transaction decided there: the rows of one
    commit at least, hashed to partition 0 among others); 0 while the topic is missing."""
    part = TopicPartition(topic, 0)
    asked = admin.list_offsets({part: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
    try:
        return int(asked[part].result(30).offset)
    except KafkaException:
        return 0


def _stable_checkpoint(kafka: KafkaBroker, capture: str) -> dict[str, Any] | None:
    """The newest committed checkpoint of `capture`, read up to the checkpoint topic's last stable offset (a
    consumer reading to the topic's end does not get there while the worker keeps committing)."""
    topic = "mysqlcapture-checkpoints"
    end = _stable_end(AdminClient({"bootstrap.servers": kafka.bootstrap}), topic)
    if end == 0:
        return None
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, max(0, end - 100))])  # a commit: its checkpoint and a marker
        found = None
        deadline = time.monotonic() + 60
        while consumer.position([TopicPartition(topic, 0)])[0].offset < end:
            assert time.monotonic() < deadline, f"reading {topic} did not reach offset {end}"
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None and msg.key() == capture.encode():
                found = msg.value()
        return json.loads(found) if found else None
    finally:
        consumer.close()


@pytest.mark.parametrize("flavor", ["mysql"])  # the source plays no part in it: the sink's start is what is shown
def test_a_start_while_the_transaction_coordinator_is_away_is_one_line_and_the_next_start_goes_on(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    """A two-broker cluster whose __transaction_state has one replica: while its broker is down the other one
    answers, but nobody takes the capture's producer. The worker started then stops after the transaction timeout
    with one line that says so (not "check bootstrapServers"), writes nothing, and the start after the broker is back
    goes on from the checkpoint: every row once."""
    srv = start_source(46)
    conn = _setup(srv)
    _insert(conn, range(1, 11))
    with KafkaBroker(partitions=2, brokers=2) as kafka:
        sink = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "h"), "topic": "co",
                "transactionTimeoutMs": 30000}  # fmt: skip
        doc = manifest("co", port=srv.port, sink={"type": "kafka", "kafka": sink})
        path = write_manifest(tmp_path / "co.yaml", doc)
        first = WorkerProcess(path, log_path=tmp_path / "worker-0.log")
        wait_until(_at_end(kafka, srv, "co", first), timeout=180, what="the first worker's rows")
        assert first.stop() == 0, first.log_text()[-3000:]
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        coordinator = _leaders(admin, "__transaction_state")[0]
        said: list[str] = []

        def away() -> None:
            said.append(_one_line(WorkerProcess(path, log_path=tmp_path / "worker-1.log")))

        kafka.restart(node=coordinator, down=away)
        assert (
            "answer, but the transaction coordinator of mysqlcapture-co did not take the producer within 30 s"
            in (said[0])
        ), said[0]
        assert "a broker holding the topic __transaction_state is down or starting" in said[0], said[0]
        _insert(conn, range(11, 21))
        last = WorkerProcess(path, log_path=tmp_path / "worker-2.log")
        wait_until(_at_end(kafka, srv, "co", last), timeout=180, what="the next start to reach the last row")
        assert last.stop() == 0, last.log_text()[-3000:]
        assert _ids(kafka, "co") == list(range(1, 21))
    conn.close()


def _leaders(admin: AdminClient, topic: str, *, preferred: bool = False) -> dict[int, int]:
    """Each partition's leader (`preferred`: the first of its replicas, the one an election prefers)."""
    parts = admin.list_topics(topic, timeout=30).topics[topic].partitions
    return {p: meta.replicas[0] if preferred else meta.leader for p, meta in parts.items()}


def test_partition_leaders_moving_mid_stream_lose_and_repeat_nothing(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    """A rolling restart of a two-broker cluster while rows are written as fast as one connection commits: the
    partitions node 2 leads move to node 1 as it shuts down, and back when it has caught up (a preferred leader
    election), so the producer's requests in flight meet NOT_LEADER_OR_FOLLOWER mid-transaction. Every write reaches
    the topic once, in its key's order. A worker whose commit the brokers did not acknowledge in time (node 2 holds
    the transaction coordinator, and a loaded machine can stall the cluster longer) stops with its one line and is
    started again, as its Deployment would."""
    srv = start_source(45)
    _setup(srv).close()
    stop = threading.Event()
    done: list[tuple[int, str]] = []
    with KafkaBroker(partitions=4, brokers=2) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        # librdkafka's broker debug log names each request a broker refused (REQERR): the moves' effect is seen.
        sink = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "h"), "topic": "lm",
                "partitionBy": "primaryKey", "producerConfig": {"debug": "broker"}}  # fmt: skip
        doc = manifest("moves", port=srv.port, sink={"type": "kafka", "kafka": sink}, flush={"maxIntervalMs": 50},
                       extra_spec={"logLevel": "debug"})  # fmt: skip
        path = write_manifest(tmp_path / "moves.yaml", doc)
        workers = [WorkerProcess(path, log_path=tmp_path / "worker-0.log")]

        def running() -> bool:
            """The worker runs, started again when it stopped for a commit not acknowledged in time or for the
            transaction coordinator being away while node 2 restarts (5 times at most)."""
            last = workers[-1]
            if last.alive():
                return True
            last.kill()
            said = [ln for ln in last.log_text().splitlines() if ln.startswith("mysqlcapture: ")]
            assert last.proc.returncode == 1 and said, last.log_text()[-3000:]
            assert any(r in said[-1] for r in RESTARTED) and len(workers) < 6, said[-1]
            workers.append(WorkerProcess(path, log_path=tmp_path / f"worker-{len(workers)}.log"))
            return True

        def refused() -> int:
            return sum(w.log_text().count(REFUSED) for w in workers)

        writer = threading.Thread(target=_writes, args=(srv, stop, done), daemon=True)
        moved = 0
        try:
            writer.start()
            # (A consumer would not see the end of the topics while the worker keeps a transaction open.)
            wait_until(lambda: running() and _stable_end(admin, "lm") > 0, timeout=120,
                       what="the worker's first commit of rows")  # fmt: skip
            topics = ["lm", "mysqlcapture-checkpoints"]
            preferred = {t: _leaders(admin, t, preferred=True) for t in topics}
            assert {2} <= set(preferred["lm"].values()), f"node 2 leads no partition of lm: {preferred}"
            # Until the producer has had requests refused for a moved leader twice (at least two moves, at most 8).
            while moved < 2 or (moved < 8 and refused() < 2):
                kafka.restart(node=2, down=lambda: time.sleep(2))
                wait_until(lambda: running() and _replicated(admin, topics), timeout=180, what="node 2 to catch up")
                wanted = len(done) + 200
                parts = [TopicPartition(t, p) for t in topics for p, lead in preferred[t].items() if lead == 2]
                elected = admin.elect_leaders(ElectionType.PREFERRED, parts).result(60)
                assert not [e for e in elected.values() if e and e.code() != KafkaError.ELECTION_NOT_NEEDED], elected
                wait_until(lambda: running() and _leaders(admin, "lm") == preferred["lm"], timeout=120,
                           what="the election")  # fmt: skip
                wait_until(lambda n=wanted: running() and len(done) > n, timeout=120, what="writes after it")
                moved += 1
            stop.set()
            writer.join(timeout=60)
            last = srv.binlog_status()

            def at_end() -> bool:
                pos = _stable_checkpoint(kafka, "moves")
                return pos is not None and (pos["binlog_file"], pos["binlog_pos"]) >= (last.file, last.pos)

            wait_until(lambda: running() and at_end(), timeout=300, what="the worker to reach the last write")
            assert workers[-1].stop() == 0, workers[-1].log_text()[-3000:]
        finally:
            stop.set()
            for w in workers:
                w.kill()
            for node in kafka.ports:
                shutil.copy(kafka.log(node), tmp_path / kafka.log(node).name)
        assert refused() >= 2, f"{moved} moves, {refused()} produce request(s) refused for a moved leader"
        got: dict[int, list[str]] = {}
        for m in read_topic(kafka.bootstrap, "lm", settled=True):
            data = json.loads(m.value())["data"]
            got.setdefault(data["id"], []).append(data["note"])
    wrote: dict[int, list[str]] = {}
    for i, note in done:
        wrote.setdefault(i, []).append(note)
    missing = sum(len(v) for v in wrote.values()) - sum(len(v) for v in got.values())
    assert got == wrote, f"{len(done):,} writes, {missing} fewer messages; first differing id: " + str(
        next(i for i in sorted(wrote.keys() | got.keys()) if got.get(i) != wrote.get(i))
    )
