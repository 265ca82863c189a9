"""The Kafka sink through a SASL_SSL listener of a real broker (SCRAM and PLAIN, a test CA, the secrets mounted as
the operator mounts them), messages over maxMessageBytes (a dead-letter record, or a stop that loses nothing), and
brokers that refuse the credentials, fail the TLS handshake or do not answer: one line each."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_dev.embedded.server import PrivateServer, free_port

from tests.kafka.broker import KafkaBroker, read_topic
from tests.pki import make_ca
from tests.support import WorkerProcess, manifest, run_cli, wait_until, write_manifest

BIG = 30_000  # characters of the rows over the limit below
LIMIT = 20_000  # spec.sink.kafka.maxMessageBytes of these tests


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaBroker]:
    with KafkaBroker(partitions=2, secure=True) as broker:
        yield broker


def _secrets(tmp_path: Path, kafka: KafkaBroker) -> dict[str, str]:
    """The worker's environment as the operator sets it: the Secrets' keys mounted as files."""
    assert kafka.ca is not None
    password = tmp_path / "kafka-password"
    password.write_text(kafka.PASSWORD + "\n")
    return {"MYSQLCAPTURE_KAFKA_PASSWORD_FILE": str(password), "MYSQLCAPTURE_KAFKA_CA_FILE": str(kafka.ca)}


def _sink(tmp_path: Path, kafka: KafkaBroker, *, topic: str, mechanism: str, **more: Any) -> dict[str, Any]:
    return {
        "bootstrapServers": kafka.secure_bootstrap,
        "schemaHistoryUri": str(tmp_path / "schema-history"),
        "topic": topic,
        "checkpointTopic": f"{topic}-checkpoints",
        "tls": {"caFrom": {"secretKeyRef": {"name": "kafka-ca", "key": "ca.crt"}}},
        "sasl": {
            "mechanism": mechanism,
            "username": kafka.USER,
            "passwordFrom": {"secretKeyRef": {"name": "kafka-user", "key": "password"}},
        },
        "maxMessageBytes": LIMIT,
        "outputBinlogPosition": True,
        **more,
    }


def _docs(conn: Any, database: str) -> None:
    """60 small rows and three over the limit: two inserted, one small row updated into a big one."""
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {database}")
        cur.execute(f"CREATE TABLE {database}.docs (id INT PRIMARY KEY, body LONGTEXT)")
        for i in range(60):
            cur.execute(f"INSERT INTO {database}.docs VALUES (%s, %s)", (i, f"small-{i}"))
            if i in (20, 40):
                cur.execute(f"INSERT INTO {database}.docs VALUES (%s, %s)", (1000 + i, "B" * BIG))
        cur.execute(f"UPDATE {database}.docs SET body = %s WHERE id = 7", ("U" * BIG,))
        cur.execute(f"UPDATE {database}.docs SET body = 'after' WHERE id = 8")
    conn.commit()


def _caught_up(kafka: KafkaBroker, topic: str, capture: str, srv: PrivateServer) -> Callable[[], bool]:
    status = srv.binlog_status()

    def done() -> bool:
        found = [m for m in read_topic(kafka.bootstrap, f"{topic}-checkpoints") if m.key() == capture.encode()]
        if not found:
            return False
        pos = json.loads(found[-1].value())
        return (pos["binlog_file"], pos["binlog_pos"]) >= (status.file, status.pos)

    return done


def _run(
    tmp_path: Path, srv: PrivateServer, name: str, sink: dict[str, Any], env: dict[str, str], log: str
) -> WorkerProcess:
    """The capture `name` with `sink`, started from the binlog's end, committing every 100 ms."""
    doc = manifest(name, port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "latest"},
                   flush={"maxIntervalMs": 100})  # fmt: skip
    return WorkerProcess(write_manifest(tmp_path / f"{name}.yaml", doc), log_path=tmp_path / f"{log}.log", env=env)


def _started(kafka: KafkaBroker, worker: WorkerProcess, topic: str) -> None:
    """Wait for the capture's first checkpoint: it has pinned its start and connects through the secure listener."""
    wait_until(lambda: worker.running() and bool(read_topic(kafka.bootstrap, f"{topic}-checkpoints")), timeout=120,
               what="the first checkpoint, over SASL_SSL")  # fmt: skip


def test_sasl_ssl_scram_and_dead_letters_for_rows_over_the_limit(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker, flavor: str
) -> None:
    srv = start_source(41)
    conn = srv.connect()
    topic = f"dl-{flavor}"  # the broker serves both flavors' runs
    sink = _sink(tmp_path, kafka, topic=topic, mechanism="SCRAM-SHA-512", oversized="deadLetter",
                 deadLetterTopic=f"{topic}-dead")  # fmt: skip
    worker = _run(tmp_path, srv, "dl", sink, _secrets(tmp_path, kafka), "dl")
    try:
        _started(kafka, worker, topic)
        _docs(conn, "dl")
        wait_until(_caught_up(kafka, topic, "dl", srv), timeout=180, interval=1.0, what="the end of the binlog")
        assert worker.stop() == 0, worker.log_text()
    finally:
        worker.kill()
        conn.close()
    lines = [json.loads(m.value()) for m in read_topic(kafka.bootstrap, topic, settled=True)]
    assert sorted((ln["type"], ln["data"]["id"]) for ln in lines) == sorted(
        [("insert", i) for i in range(60)] + [("update", 8)]
    ), "a row under the limit is missing or was written twice"
    dead = read_topic(kafka.bootstrap, f"{topic}-dead", settled=True)
    records = [json.loads(m.value()) for m in dead]
    assert sorted((r["type"], r["table"]) for r in records) == [("insert", "docs")] * 2 + [("update", "docs")]
    for m, r in zip(dead, records, strict=True):
        assert r["bytes"] > LIMIT and r["max_message_bytes"] == LIMIT and r["topic"] == topic
        assert r["database"] == "dl" and r["position"].startswith(r["transaction_position"].split(":")[0])
        assert b"BBBB" not in m.value() and b"UUUU" not in m.value(), "a dead-letter record holds the row's values"
    keys = {m.key() for m in dead}
    assert keys == {b'{"database":"dl","table":"docs","pk.id":%d}' % i for i in (1020, 1040, 7)}  # Maxwell's keys
    # The coordinates find the row: Maxwell's position, that of the row event, sits between its neighbours'.
    at = {ln["data"]["id"]: int(ln["position"].split(":")[1]) for ln in lines if ln["type"] == "insert"}
    for r in records:
        pos = int(r["position"].split(":")[1])
        if r["type"] == "insert":
            before = 20 if pos < at[30] else 40
            assert at[before] < pos < at[before + 1], (r, at[before], at[before + 1])
        assert isinstance(r["xid"], int) and r["ts"] >= lines[0]["ts"]
    assert f"over maxMessageBytes: recorded on {topic}-dead" in worker.log_text()
    assert kafka.PASSWORD not in worker.log_text()


def test_a_row_over_the_limit_stops_with_one_line_and_a_larger_limit_writes_it(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker, flavor: str
) -> None:
    srv = start_source(42)
    conn = srv.connect()
    topic = f"fail-{flavor}"
    sink = _sink(tmp_path, kafka, topic=topic, mechanism="PLAIN")
    env = _secrets(tmp_path, kafka)
    worker = _run(tmp_path, srv, "fail", sink, env, "fail")
    try:
        _started(kafka, worker, topic)
        _docs(conn, "fail")
        wait_until(lambda: not worker.alive(), timeout=120, what="the worker to stop at the row over the limit")
        worker.kill()  # exited: closes its log
        assert worker.proc.returncode == 1
        said = [ln for ln in worker.log_text().splitlines() if ln.startswith("mysqlcapture: ")]
        assert len(said) == 1 and "Traceback" not in worker.log_text(), worker.log_text()
        line = said[0]
        assert 'an insert of fail.docs (key {"database":"fail","table":"docs","pk.id":1020}' in line, line
        assert "bytes, over spec.sink.kafka.maxMessageBytes (20,000)" in line and "deadLetter" in line, line
        before = [json.loads(m.value())["data"]["id"] for m in read_topic(kafka.bootstrap, topic)]
        assert before == sorted(before) and max(before, default=-1) < 21, "rows after the big one were written"
        # With the limit raised, the capture goes on from its checkpoint: every row once, the big ones included.
        sink["maxMessageBytes"] = 100_000
        worker = _run(tmp_path, srv, "fail", sink, env, "fail2")
        wait_until(_caught_up(kafka, topic, "fail", srv), timeout=180, interval=1.0, what="the end of the binlog")
        assert worker.stop() == 0, worker.log_text()
    finally:
        worker.kill()
        conn.close()
    lines = [json.loads(m.value()) for m in read_topic(kafka.bootstrap, topic, settled=True)]
    got = sorted((ln["type"], ln["data"]["id"]) for ln in lines)
    want = [("insert", i) for i in [*range(60), 1020, 1040]] + [("update", 7), ("update", 8)]
    assert got == sorted(want)
    assert next(ln for ln in lines if ln["data"]["id"] == 1040)["data"]["body"] == "B" * BIG


def _run_once(
    tmp_path: Path, srv: PrivateServer, name: str, sink: dict[str, Any], env: dict[str, str], code: int = 1
) -> str:
    doc = manifest(name, port=srv.port, sink={"type": "kafka", "kafka": sink}, start={"from": "latest"})
    path = write_manifest(tmp_path / f"{name}.yaml", doc)
    result = run_cli("run", str(path), "--plain-logs", env=env, timeout=180)
    return _one_line(result, code)


def _one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("mysqlcapture: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_refused_credentials_a_wrong_ca_and_no_broker_are_one_line_each(
    tmp_path: Path, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    srv = start_source(43)
    env = _secrets(tmp_path, kafka)
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password")
    line = _run_once(tmp_path, srv, "badpw", _sink(tmp_path, kafka, topic="x", mechanism="SCRAM-SHA-256"),
                     env | {"MYSQLCAPTURE_KAFKA_PASSWORD_FILE": str(wrong)})  # fmt: skip
    assert "SASL authentication error" in line and "check spec.sink.kafka.sasl" in line, line
    assert "not-the-password" not in line
    other_ca = make_ca(tmp_path, "other-ca")[0]
    line = _run_once(tmp_path, srv, "badca", _sink(tmp_path, kafka, topic="x", mechanism="PLAIN"),
                     env | {"MYSQLCAPTURE_KAFKA_CA_FILE": str(other_ca)})  # fmt: skip
    assert "certificate verify failed" in line and "check spec.sink.kafka.tls: caFrom" in line, line
    nobody = {"bootstrapServers": f"127.0.0.1:{free_port()}", "schemaHistoryUri": str(tmp_path / "h"),
              "transactionTimeoutMs": 1000}  # fmt: skip
    line = _run_once(tmp_path, srv, "nobroker", nobody, {})
    assert "Connection refused" in line and "no broker answered within 30 s" in line, line
    assert "spec.sink.kafka.bootstrapServers" in line, line
    missing = _run_once(tmp_path, srv, "nosecret", _sink(tmp_path, kafka, topic="x", mechanism="PLAIN"), {}, code=2)
    assert "spec.sink.kafka.tls.caFrom.secretKeyRef (kafka-ca/ca.crt)" in missing, missing
