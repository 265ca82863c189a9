"""The Kafka sink's topics, keys and partitions: Maxwell 1.44's, from its source and its own tests' examples."""

from __future__ import annotations

from dataclasses import replace

import pytest
from mysqlcapture_api.sinks import KafkaSink
from mysqlcapture_worker.changes import ChangeEvent
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


def test_a_batch_is_routed_as_its_rows_are() -> None:
    """Keys and partitions computed a batch at a time (one key column) equal the row-by-row ones."""
    import pyarrow as pa
    from mysqlcapture_worker.changes import RowBatch

    ids = ['"é\\"x"', "12", "-5", '"a"', "18446744073709551615"]
    batch = RowBatch(
        order_key=9,
        database="shop",
        table="Orders",
        type="update",
        ts=1,
        server_id=1,
        thread_id=4,
        xid=7,
        commit=True,
        gtid=None,
        binlog_file="b.1",
        binlog_pos=4,
        event_pos=4,
        row_index=0,
        pk_columns=("ID",),
        data_json=pa.array(["{}"] * len(ids)),
        old_json=pa.array(["{}"] * len(ids)),
        pk_json=pa.array([f"[{v}]" for v in ids]),
        pk_hashes=pa.array(["h"] * len(ids)),
    )
    base = KafkaSink(bootstrap_servers="k:9092", schema_history_uri="/h")
    for how in ("database", "table", "primaryKey", "transactionId", "threadId"):
        for key_format in ("hash", "array"):
            for hashing in ("default", "murmur3"):
                router = Router(_with(base, partition_by=how, key_format=key_format, partition_hash=hashing))
                routed = router.batch(batch.split(1)[1], 5)
                assert routed is not None
                rows = batch.split(1)[1].events()
                assert routed == ([router.key(e).decode() for e in rows], [router.partition(e, 5) for e in rows])
    assert Router(_with(base, partition_by="random")).batch(batch, 5) is None
