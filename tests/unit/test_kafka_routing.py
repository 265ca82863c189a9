"""The Kafka sink's topics, keys and partitions: Maxwell 1.44's, from its source and its own tests' examples."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest
from mysqlcapture_api.sinks import KafkaSink
from mysqlcapture_worker.changes import ChangeEvent, RowBatch, RowTexts
from mysqlcapture_worker.sinks.kafka_routing import Router, java_hash, murmur3, partition_of

pytestmark = pytest.mark.unit


def _row(**changes: object) -> ChangeEvent:
    ev = ChangeEvent(
        order_key=5,
        database="MyDatabase",
        table="MyTable",
        type="insert",
        ts=1,
        server_id=9,
        thread_id=7,
        xid=77,
        commit=False,
        gtid=None,
        binlog_file="mysql-bin.000001",
        binlog_pos=100,
        event_pos=200,
        row_index=3,
        pk_json="[111,123]",
        pk_columns=("ID", "Account"),
        data_json='{"ID":111,"Account":123,"name":"x","n":null}',
        old_json=None,
    )
    return replace(ev, **changes)  # type: ignore[arg-type]


def _with(spec: KafkaSink, **changes: object) -> KafkaSink:
    return KafkaSink.model_validate({**spec.model_dump(), **changes})


def test_java_string_hash_code_and_murmur3_x86_32() -> None:
    assert [java_hash(s) for s in ("", "a", "hello", "database", "polygenelubricants")] == [
        0,
        97,
        99162322,
        1789464955,
        -2147483648,  # Integer.MIN_VALUE: |h| mod n still works
    ]
    assert java_hash("😀é") == 0xD83D * 31 * 31 + 0xDE00 * 31 + 0xE9  # over UTF-16 code units
    assert murmur3(b"", 0) == 0
    assert murmur3(b"", 1) == 0x514E28B7
    assert murmur3(b"hello", 0) == 613153351
    assert murmur3(b"The quick brown fox jumps over the lazy dog", 0) == 0x2E4FF723
    assert partition_of("polygenelubricants", 3, "default") == 2**31 % 3


def test_keys_as_maxwell_writes_them() -> None:
    router = Router(KafkaSink(bootstrap_servers="k:9092", schema_history_uri="/h"))
    assert router.key(_row()) == b'{"database":"MyDatabase","table":"MyTable","pk.id":111,"pk.account":123}'
    array = Router(KafkaSink(bootstrap_servers="k:9092", schema_history_uri="/h", key_format="array"))
    assert array.key(_row()) == b'["MyDatabase","MyTable",[{"id":111},{"account":123}]]'
    keyless = router.key(_row(pk_json=None, pk_columns=()))
    assert keyless.startswith(b'{"database":"MyDatabase","table":"MyTable","_uuid":"') and len(keyless) == 90
    assert array.key(_row(pk_json=None, pk_columns=())) == b'["MyDatabase","MyTable",[]]'
    ddl = router.key(_row(type="table-create", sql="CREATE TABLE t (id int)", table="t"))
    assert len(ddl) == 36 and ddl.count(b"-") == 4  # a bare UUID, whatever the key format


def test_topics_and_partition_strings_by_every_mode() -> None:
    spec = KafkaSink(bootstrap_servers="k:9092", schema_history_uri="/h", topic="cdc.%{database}.%{table}.%{type}")
    router = Router(spec)
    assert router.topic(_row()) == "cdc.MyDatabase.MyTable.insert"
    assert router.topic(_row(type="table-create", sql="CREATE TABLE t (id int)")) == "cdc.%{database}.%{table}.%{type}"
    by = {
        "database": "MyDatabase",
        "table": "MyTable",
        "primaryKey": "111123",
        "transactionId": "77",
        "threadId": "7",
    }
    for how, text in by.items():
        assert Router(_with(spec, partition_by=how)).partition_text(_row()) == text, how
    assert Router(_with(spec, partition_by="primaryKey")).partition_text(_row(pk_json='[9001,"example"]')) == (
        "9001example"
    )
    assert Router(_with(spec, partition_by="primaryKey")).partition_text(_row(pk_json="[null]")) == "None"
    assert Router(_with(spec, partition_by="transactionId")).partition_text(_row(xid=None)) == "null"
    column = _with(spec, partition_by="column", partition_columns=["name", "n"], partition_by_fallback="table")
    assert Router(column).partition_text(_row()) == "x"
    assert Router(column).partition_text(_row(data_json='{"name":null}')) == "MyTable"
    # Maxwell's row map: a SET is a java.util.List ("[a, c]"); empty values leave nothing, so the fallback decides
    assert Router(column).partition_text(_row(data_json='{"name":["a","c"],"n":7}')) == "[a, c]7"
    assert Router(column).partition_text(_row(data_json='{"name":[]}')) == "[]"
    assert Router(column).partition_text(_row(data_json='{"name":"","n":""}')) == "MyTable"
    assert len(Router(_with(spec, partition_by="random")).partition_text(_row())) == 10
    ddl = _row(type="table-create", sql="CREATE TABLE t (id int)")
    assert Router(_with(spec, partition_by="primaryKey")).partition_text(ddl) == "MyDatabase"
    assert Router(_with(spec, partition_by="table")).partition_text(ddl) == "MyTable"
    assert router.partition(_row(), 7) == abs(java_hash("MyDatabase")) % 7
    hashed = Router(_with(spec, partition_hash="murmur3"))
    assert hashed.partition(_row(), 7) == abs(murmur3(b"MyDatabase", 25342)) % 7


def _batch(rnd: random.Random, table: str) -> RowBatch:
    """A batch of a one-column key's rows, the key values of every JSON kind a key can be."""
    import pyarrow as pa

    values = ['"é\\"x"', "12", "-5", '"a"', "18446744073709551615", '"😀 \\u00e9\\n"', '"\\ud83d\\ude00"', "1.5",
              '"Straße"', '""', '["a","b c"]', "-2147483648"]  # fmt: skip
    n = rnd.randint(1, 40)
    ids = [rnd.choice(values) for _ in range(n)]
    batch = RowBatch(
        order_key=rnd.choice([0, 9]),
        database=rnd.choice(["shop", "δb"]),
        table=table,
        type=rnd.choice(["insert", "update"]),
        ts=1,
        server_id=1,
        thread_id=rnd.choice([None, 4]),
        xid=rnd.choice([None, 7]),
        commit=rnd.random() < 0.5,
        gtid=None,
        binlog_file="b.1",
        binlog_pos=4,
        event_pos=4,
        row_index=0,
        pk_columns=(rnd.choice(["ID", "Ünï"]),),
        texts=RowTexts.of(
            pa.array([f'{{"id":{v},"n":{i}}}' for i, v in enumerate(ids)]),
            pa.array(["{}"] * n),
            pa.array([f"[{v}]" for v in ids]),
            pa.array(["h"] * n),
        ),
    )
    return batch.split(1)[1] if n > 1 and rnd.random() < 0.3 else batch


def test_a_batch_is_routed_as_its_rows_are() -> None:
    """Runs of batches keyed and partitioned by the compiled renderer get, row for row, the value `row_line`
    writes and the key and partition the router gives each of their events, under every routing setting, grouped
    by topic and partition in the rows' order."""
    from mysqlcapture_worker.sinks.maxwell import batch_messages, row_line

    rnd = random.Random(32)
    base = KafkaSink(bootstrap_servers="k:9092", schema_history_uri="/h", topic="t_%{table}")
    for how in ("database", "table", "primaryKey", "transactionId", "threadId"):
        for key_format in ("hash", "array"):
            for hashing in ("default", "murmur3"):
                router = Router(_with(base, partition_by=how, key_format=key_format, partition_hash=hashing))
                for _ in range(10):
                    run = [_batch(rnd, rnd.choice(["orders", "Lines"])) for _ in range(rnd.randint(1, 4))]
                    topics = sorted({router.row_topic(b.database, b.table, b.type) for b in run})
                    count = rnd.choice([1, 5, 7])
                    routed = []
                    for b in run:
                        route = router.batch_route(b, count)
                        assert route is not None
                        routed.append((b, (topics.index(router.row_topic(b.database, b.table, b.type)), *route)))
                    messages = batch_messages(routed, router.spec, murmur=hashing == "murmur3")
                    groups, size, largest = messages.dicts(), messages.total, messages.largest
                    want: dict[tuple[int, int], list[dict[str, bytes]]] = {}
                    for e in (e for b in run for e in b.events()):
                        where = (topics.index(router.topic(e)), router.partition(e, count))
                        want.setdefault(where, []).append({"key": router.key(e), "value": row_line(e, router.spec)})
                    assert [(g, p) for g, p, _ in groups] == list(want)
                    assert {(g, p): m for g, p, m in groups} == want
                    sizes = [len(m["key"]) + len(m["value"]) for ms in want.values() for m in ms]
                    assert (size, largest, len(messages)) == (sum(sizes), max(sizes), len(sizes))
    assert Router(_with(base, partition_by="random")).batch_route(_batch(rnd, "t"), 5) is None
    by_column = _with(base, partition_by="column", partition_columns=["id"])
    assert Router(by_column).batch_route(_batch(rnd, "t"), 5) is None


def test_a_topic_is_written_once_every_partition_has_a_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_existing` waits for a leader on every partition of a topic the brokers are still creating, then for the
    leaders to host them, and says so in one line when they do not. Stand-ins for the metadata and the leaders'
    answers: no real broker here keeps a partition without a leader, or unhosted for long."""
    from types import SimpleNamespace

    from mysqlcapture_worker.sinks import kafka as kafka_sink
    from mysqlcapture_worker.sinks.kafka import KafkaSinkError

    def metadata(leaders: list[int]) -> Any:
        parts = {i: SimpleNamespace(leader=leader, error=None) for i, leader in enumerate(leaders)}
        return SimpleNamespace(topics={"t": SimpleNamespace(error=None, partitions=parts)})

    answers = [metadata([0, -1, 0]), metadata([-1, -1, 0]), metadata([0, 0, 0])]
    producer = SimpleNamespace(list_topics=lambda topic, timeout: answers.pop(0) if len(answers) > 1 else answers[0])
    clock = [0.0]
    monkeypatch.setattr(kafka_sink.time, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    monkeypatch.setattr(kafka_sink.time, "monotonic", lambda: clock[0])
    sink = kafka_sink.KafkaSink(KafkaSink(bootstrap_servers="k:9092", schema_history_uri="/h"), capture="c")
    hosted = [False, False, True]  # the leaders' answers once every partition has a leader
    asked: list[list[int]] = []
    monkeypatch.setattr(sink, "_hosted", lambda topic, parts: asked.append(parts) or hosted.pop(0))
    assert sink._existing(producer, "t") == 3 and answers == [metadata([0, 0, 0])]  # type: ignore[arg-type]
    assert asked == [[0, 1, 2]] * 3 and hosted == []
    stuck = SimpleNamespace(list_topics=lambda topic, timeout: metadata([0, -1]))
    with pytest.raises(KafkaSinkError, match=r"topic t cannot be written \(partitions without a leader\): create it"):
        sink._existing(stuck, "t")  # type: ignore[arg-type]
    monkeypatch.setattr(sink, "_hosted", lambda topic, parts: False)
    with pytest.raises(KafkaSinkError, match=r"topic t cannot be written \(partitions their leaders do not host yet\)"):
        sink._existing(SimpleNamespace(list_topics=lambda topic, timeout: metadata([0, 0])), "t")  # type: ignore[arg-type]


def test_a_commit_is_refused_only_for_what_the_brokers_refused() -> None:
    """Delivery reports: a purged message (its transaction aborted for another reason) says nothing; a message
    timed out is the brokers not answering, said as such; a refusal names the message. `_failed` raises the line
    of each (no producer: the sink's transaction is not open)."""
    from types import SimpleNamespace

    from confluent_kafka import KafkaError, KafkaException
    from mysqlcapture_worker.sinks import kafka as kafka_sink
    from mysqlcapture_worker.sinks.kafka import KafkaSinkError

    spec = KafkaSink(bootstrap_servers="k1:9092,k2:9092", schema_history_uri="/h", transaction_timeout_ms=45000)
    sink = kafka_sink.KafkaSink(spec, capture="c")
    msg = SimpleNamespace(value=lambda: b"v" * 10, key=lambda: b'{"id":1}', topic=lambda: "t")

    def raised(*reports: int, commit: int = KafkaError._FAIL) -> str:
        sink._failure = sink._unanswered = None
        for code in reports:
            sink._delivered(KafkaError(code), msg)
        with pytest.raises(KafkaSinkError) as caught:
            sink._failed(None, KafkaException(KafkaError(commit)), None)  # type: ignore[arg-type]
        return str(caught.value)

    assert raised(KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT) == (
        "the Kafka commit failed (Local: Communication failure with broker); nothing of it was committed"
    )
    timed_out = raised(KafkaError._PURGE_QUEUE, KafkaError._MSG_TIMED_OUT)
    assert timed_out.startswith("the Kafka brokers did not acknowledge the commit within 45 s (Local: Message timed")
    assert "check that the brokers of k1:9092,k2:9092 are up and reachable" in timed_out
    assert "the Kafka brokers did not acknowledge the commit within 45 s" in raised(commit=KafkaError._TIMED_OUT)
    sink._failure = sink._unanswered = None
    sink._delivered(KafkaError(KafkaError._MSG_TIMED_OUT), msg)  # exactlyOnce false: a flush that left one behind
    assert "did not acknowledge the commit" in str(sink._undelivered())
    refused = raised(KafkaError._MSG_TIMED_OUT, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert refused == 'Kafka refused a message: Broker: Topic authorization failed (topic t, key {"id":1}, 18 bytes)'
