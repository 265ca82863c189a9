"""The Kafka sink on a real broker (Apache Kafka's own jars, KRaft): Maxwell's values, keys, topics and partitions,
each event exactly once across SIGKILLs (Kafka transactions, the checkpoint in the same transaction)."""

from __future__ import annotations

import json
import random
import time
import urllib.request
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_api.sinks import KafkaSink
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.changes import ChangeEvent
from mysqlcapture_worker.sinks.kafka_routing import Router, java_hash

from tests.integration.test_jsonl_sink import EVERY_FIELD, _as_changelog_row
from tests.kafka.broker import KafkaBroker, read_topic
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, run_cli, wait_until, write_manifest
from tests.workload import Workload

ROWS_TOPIC, DDL_TOPIC, CHECKPOINTS = "cdc-%{database}", "cdc-ddl", "mysqlcapture-checkpoints"


@pytest.fixture
def kafka() -> Iterator[KafkaBroker]:
    with KafkaBroker(partitions=3) as broker:
        yield broker


def _kafka_metrics(worker: WorkerProcess) -> dict[str, float]:
    """The worker's Kafka and error series, by name with labels, as /metrics shows them."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/metrics", timeout=5).read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("mysqlcapture_kafka_", "mysqlcapture_errors_total")):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def _checkpoint(bootstrap: str, capture: str) -> dict[str, Any] | None:
    found = [m for m in read_topic(bootstrap, CHECKPOINTS) if m.key() == capture.encode()]
    return json.loads(found[-1].value()) if found else None


def _begun(bootstrap: str) -> bool:
    return any(
        b'"type":"bootstrap-start"' in m.value() and b'"table":"snap"' in m.value()
        for m in read_topic(bootstrap, "cdc-topics")
    )


def _done(bootstrap: str) -> bool:
    return any(
        b'"type":"bootstrap-complete"' in m.value() and b'"table":"snap"' in m.value()
        for m in read_topic(bootstrap, "cdc-topics")
    )


def _event(line: dict[str, Any]) -> ChangeEvent:
    """What the router needs of a row line (its key, partition string)."""
    pk = line.get("primary_key")
    return ChangeEvent(
        order_key=line["_order_key"],
        database=line["database"],
        table=line.get("table"),
        type=line["type"],
        ts=0,
        server_id=0,
        thread_id=line.get("thread_id"),
        xid=line.get("xid"),
        commit=False,
        gtid=None,
        binlog_file="",
        binlog_pos=0,
        event_pos=0,
        row_index=0,
        pk_json=json.dumps(pk, separators=(",", ":")) if pk is not None else None,
        pk_columns=tuple(line.get("primary_key_columns") or ()),
        data_json=None,
        old_json=None,
    )


def test_kafka_sink_is_maxwells_and_exactly_once_across_kills(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    srv = start_source(36)
    conn = srv.connect()
    sink = {
        "bootstrapServers": kafka.bootstrap,
        "schemaHistoryUri": str(tmp_path / "schema-history"),
        "topic": ROWS_TOPIC,
        "ddlTopic": DDL_TOPIC,
        "partitionBy": "primaryKey",
        **EVERY_FIELD,
    }
    doc = manifest(
        "topics",
        port=srv.port,
        sink={"type": "kafka", "kafka": sink},
        start={"from": "latest"},
        flush={"maxIntervalMs": 100, "maxEvents": 30},
        extra_spec={"heartbeat": {"intervalSeconds": 1}, "snapshot": {"chunkRows": 20}},
    )
    path = write_manifest(tmp_path / "topics.yaml", doc)
    rng = random.Random(6)
    try:
        workload = Workload(conn, "topics", seed=36, ddl=True, truncate=True)
        workload.setup(n_tables=3)
        with conn.cursor() as cur:  # a table the workload leaves alone, for a requested snapshot
            cur.execute("CREATE TABLE topics.snap (id INT PRIMARY KEY, note VARCHAR(20))")
            cur.executemany("INSERT INTO topics.snap VALUES (%s, %s)", [(i, f"n{i}") for i in range(10000)])
        conn.commit()
        for i in range(4):
            worker = WorkerProcess(path, log_path=tmp_path / f"run{i}.log")
            try:
                if i == 0:  # a new capture starts at "latest": let it pin that before writing
                    wait_until(
                        lambda w=worker: w.running() and _checkpoint(kafka.bootstrap, "topics") is not None,
                        timeout=120,
                        what="the first checkpoint",
                    )
                for _ in range(80):
                    workload.step()
                if i == 2:  # a snapshot of every table, killed once it has begun: its events too are written once
                    asked = run_cli("resnapshot", str(path), "--table", "topics.snap")
                    assert asked.returncode == 0, asked.stderr
                    wait_until(
                        lambda w=worker: w.running() and "snapshot progress topics.snap" in w.log_text(),
                        timeout=120,
                        interval=0.05,
                        what="the requested snapshot to make progress",
                    )
                    worker.kill()  # part way through the snapshot
                    assert _begun(kafka.bootstrap) and not _done(kafka.bootstrap), (
                        "the kill was not during the snapshot"
                    )
                    continue
                time.sleep(rng.uniform(0.2, 1.0))
                worker.kill()
            except BaseException:  # a failed wait: no worker left running after the test
                worker.kill()
                raise
        status = srv.binlog_status()
        end = (status.file, status.pos)
        final = WorkerProcess(path, log_path=tmp_path / "final.log")
        try:

            def caught_up() -> bool:
                final.running()
                pos = _checkpoint(kafka.bootstrap, "topics")
                if pos is None or pos.get("snapshot"):  # a snapshot still running
                    return False
                return (pos["binlog_file"], pos["binlog_pos"]) >= (str(end[0]), int(end[1]))

            wait_until(caught_up, timeout=180, interval=1.0, what="the Kafka checkpoint to reach the binlog's end")
        finally:
            assert final.stop() == 0, final.log_text()
        tables = source_tables(conn, ["topics"])
    finally:
        conn.close()
    rows = read_topic(kafka.bootstrap, "cdc-topics", settled=True)
    ddl = read_topic(kafka.bootstrap, DDL_TOPIC, settled=True)
    lines = [(m, json.loads(m.value(), parse_float=Decimal)) for m in rows + ddl]
    assert rows and ddl and all(m.value().count(b"\n") == 0 for m, _ in lines)
    identities = [(ln.get("server_id"), ln["position"], ln["_order_key"]) for _, ln in lines]
    assert len(identities) == len(set(identities)), "an event was written twice"
    # Maxwell's partitions and keys: rows by their key values' text (Java's String.hashCode), DDL by database.
    router = Router(KafkaSink.model_validate(sink))
    for m, ln in lines:
        if "sql" in ln:
            assert m.partition() == abs(java_hash(ln["database"])) % 3 and len(m.key()) == 36
            continue
        e = _event(ln)
        assert m.key() == router.key(e) if ln.get("primary_key") else m.key().startswith(b'{"database":"topics"')
        assert m.partition() == abs(java_hash(router.partition_text(e))) % 3, ln
    for p in range(3):  # each partition in the capture's order
        keys = [ln["_order_key"] for m, ln in lines if m.topic() == "cdc-topics" and m.partition() == p]
        assert keys == sorted(keys)
    assert any(ln["type"] == "table-truncate" for _, ln in lines)
    snap = [ln for _, ln in lines if ln.get("table") == "snap" and ln["type"].startswith("bootstrap")]
    assert sorted(ln["data"]["id"] for ln in snap if ln["type"] == "bootstrap-insert") == list(range(10000))
    assert [ln["type"] for ln in snap].count("bootstrap-complete") == 1
    ordered = sorted((ln for _, ln in lines), key=lambda ln: ln["_order_key"])
    assert_replay_equals_source(replay([_as_changelog_row(ln) for ln in ordered]), tables)


def test_kafka_sink_with_maxwells_default_options(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    """Maxwell's defaults (no DDL messages, partitions by database, hash keys), a DDL and a kill between changes:
    every row change once, in Maxwell's default shape, in the database's partition."""
    srv = start_source(37)
    conn = srv.connect()
    sink = {"bootstrapServers": kafka.bootstrap, "schemaHistoryUri": str(tmp_path / "schema-history")}
    doc = manifest("plain", port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "latest"})
    path = write_manifest(tmp_path / "plain.yaml", doc)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE shop")
        cur.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    conn.commit()
    steps = [
        ["INSERT INTO shop.orders VALUES " + ",".join(f"({i}, 'n{i}')" for i in range(lo, lo + 100))]
        for lo in range(0, 500, 100)
    ]
    steps += [
        ["ALTER TABLE shop.orders ADD COLUMN qty INT DEFAULT 1"],
        ["UPDATE shop.orders SET qty = 2 WHERE id < 100"],
    ]
    steps += [["DELETE FROM shop.orders WHERE id >= 100 AND id < 150"]]
    worker = WorkerProcess(path, log_path=tmp_path / "run0.log")
    try:
        wait_until(lambda: worker.running() and _checkpoint(kafka.bootstrap, "plain") is not None, timeout=120,
                   what="the first checkpoint")  # fmt: skip
        for i, statements in enumerate(steps):
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
            conn.commit()
            if i in (2, 5):  # a kill after some of the changes, and one after the DDL
                time.sleep(0.5)
                worker.kill()
                worker = WorkerProcess(path, log_path=tmp_path / f"run{i}.log")
        status = srv.binlog_status()

        def caught_up() -> bool:
            worker.running()
            pos = _checkpoint(kafka.bootstrap, "plain")
            return pos is not None and (pos["binlog_file"], pos["binlog_pos"]) >= (status.file, status.pos)

        wait_until(caught_up, timeout=180, interval=1.0, what="the Kafka checkpoint to reach the binlog's end")
        unacked = 'mysqlcapture_kafka_unacknowledged_bytes{capture="plain"}'
        metrics = wait_until(  # between commits (an idle one may be under way)
            lambda: (m := _kafka_metrics(worker))[unacked] == 0 and m, timeout=60, what="no open Kafka transaction"
        )
        assert worker.stop() == 0, worker.log_text()
    finally:
        worker.kill()  # a worker a failed check left running (its log closed either way)
        conn.close()
    # The sink's metrics of the last run: its commits counted and timed, none aborted, none fenced.
    committed = metrics['mysqlcapture_kafka_transactions_total{capture="plain",outcome="committed"}']
    assert committed >= 1
    assert metrics['mysqlcapture_kafka_transaction_seconds_count{capture="plain"}'] == committed
    assert metrics['mysqlcapture_kafka_transaction_seconds_sum{capture="plain"}'] > 0
    assert metrics['mysqlcapture_kafka_transactions_total{capture="plain",outcome="aborted"}'] == 0
    assert metrics['mysqlcapture_errors_total{capture="plain",kind="kafka_fenced"}'] == 0
    messages = read_topic(kafka.bootstrap, "maxwell", settled=True)
    lines = [json.loads(m.value()) for m in messages]
    changes = sorted((ln["type"], ln["data"]["id"]) for ln in lines)
    want = sorted([("insert", i) for i in range(500)] + [("update", i) for i in range(100)])
    assert changes == sorted(want + [("delete", i) for i in range(100, 150)]), "a change missing or twice"
    assert {tuple(ln) for ln in lines} <= {
        ("database", "table", "type", "ts", "xid", "xoffset", "data"),
        ("database", "table", "type", "ts", "xid", "commit", "data"),
        ("database", "table", "type", "ts", "xid", "xoffset", "data", "old"),
        ("database", "table", "type", "ts", "xid", "commit", "data", "old"),
    }
    assert {m.partition() for m in messages} == {abs(java_hash("shop")) % 3}
    assert all(m.key() == b'{"database":"shop","table":"orders","pk.id":%d}' % ln["data"]["id"] for m, ln in
               zip(messages, lines, strict=True))  # fmt: skip
    updated = [ln for ln in lines if ln["type"] == "update"]
    assert all(ln["data"]["qty"] == 2 and ln["old"] == {"qty": 1} for ln in updated)


def test_batches_queued_on_the_producers_handle_are_the_messages_produce_batch_queues(
    kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The two ways a commit's row batches reach librdkafka (the compiled path on the producer's own handle, and
    `produce_batch`, which the sink falls back to) write the same messages: topics, partitions, keys, values, the
    order in each partition; random batches of every key kind, committed in two transactions each, two thirds of
    each staged ahead of its commit."""
    from mysqlcapture_api.coordinates import Coordinate
    from mysqlcapture_worker.positions import Position
    from mysqlcapture_worker.sinks import kafka as kafka_sink

    from tests.unit.test_kafka_routing import _batch

    rnd = random.Random(35)
    batches = [_batch(rnd, rnd.choice(["orders", "Lines"])) for _ in range(60)]
    rows = sum(len(b) for b in batches)
    written: dict[str, list[tuple[str, int, bytes, bytes]]] = {}
    for how in ("handle", "produce_batch"):
        if how == "produce_batch":
            monkeypatch.setattr(kafka_sink, "direct_producer", lambda _producer: None)
        history = str(tmp_path / how)
        spec = KafkaSink.model_validate({"bootstrapServers": kafka.bootstrap, "topic": f"eq-{how}-%{{table}}",
                                         "partitionBy": "primaryKey", "schemaHistoryUri": history})  # fmt: skip
        sink = kafka_sink.KafkaSink(spec, capture=f"eq-{how}")
        sink.load_checkpoint()
        for half, at in ((batches[:30], 100), (batches[30:], 200)):
            for lo in range(0, 20, 7):  # staged ahead as the committer does with chunks (taken only on the handle)
                sink.stage(half[lo : min(lo + 7, 20)])
            assert sink._staged == (20 if how == "handle" else 0)
            sink.commit(half, Position(server_id=1, coordinate=Coordinate("b.1", at)))
        assert (sink._direct is not None) == (how == "handle")
        sink.close()
        messages = [
            (t, m) for t in ("orders", "Lines") for m in read_topic(kafka.bootstrap, f"eq-{how}-{t}", settled=True)
        ]
        messages.sort(key=lambda tm: (tm[0], tm[1].partition(), tm[1].offset()))
        written[how] = [(t, m.partition(), m.key(), m.value()) for t, m in messages]
    assert len(written["handle"]) == rows
    assert {p for _, p, _, _ in written["handle"]} == {0, 1, 2}
    assert written["handle"] == written["produce_batch"]
