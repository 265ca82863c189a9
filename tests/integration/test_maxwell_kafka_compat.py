"""A Maxwell-on-Kafka consumer reads the Kafka sink unchanged: what real Maxwell 1.44.1's Kafka producer wrote for
the compatibility workload under each of tests/maxwell/kafka_cases.CASES (recorded once per flavor by
tests/maxwell/record_kafka.py) against what the sink writes for the same workload on a fresh server, under the
same settings:
- the same topics, partitions and messages;
- every key byte for byte, but for Maxwell's random parts (a DDL's key, a keyless table's `_uuid`), compared by shape;
- every value as the JSON-lines compatibility test compares lines (tests/maxwell/compare.py).
Messages are compared in binlog order, each with its topic and partition (so each partition holds the same
messages in the same order). Where a case partitions by a value that differs from run to run (a transaction or
connection id), each side's partition is checked against that value's own hash instead.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.kafka_routing import partition_of
from mysqlcapture_worker.sinks.maxwell import raw_members

from tests.kafka.broker import KafkaBroker, has_message
from tests.maxwell import differences
from tests.maxwell.compare import compare, event_starts
from tests.maxwell.kafka_cases import CASES, PARTITIONS, KafkaCase, Message, recording, workload_messages
from tests.maxwell.workload import DB, END_TABLE, OUTPUT_OPTIONS, compat_cases
from tests.maxwell.workload import run as run_workload
from tests.support import WorkerProcess, manifest, wait_until, write_manifest

RECORDED = Path(__file__).parents[1] / "maxwell"
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture
def kafka() -> Iterator[KafkaBroker]:
    with KafkaBroker(partitions=PARTITIONS) as broker:
        yield broker


def _our_messages(srv: PrivateServer, kafka: KafkaBroker, tmp_path: Path) -> list[Message]:
    """Every case's sink over the workload, each in its own worker from the workload's start."""
    start = srv.binlog_status()
    run_workload(srv)
    workers = []
    try:
        for n, case in enumerate(CASES):
            sink = {
                "bootstrapServers": kafka.bootstrap,
                "schemaHistoryUri": str(tmp_path / f"history-{case.name}"),
                **OUTPUT_OPTIONS,
                **case.sink,
            }
            doc = manifest(
                f"mx-{case.name}",
                port=srv.port,
                sink={"type": "kafka", "kafka": sink},
                start={"from": "position", "binlogFile": start.file, "binlogPosition": start.pos},
                server_id=9101 + n,  # one replica per case
            )
            path = write_manifest(tmp_path / f"{case.name}.yaml", doc)
            workers.append(WorkerProcess(path, log_path=tmp_path / f"{case.name}.log"))
        end = f'"table":"{END_TABLE}","type":"insert"'.encode()
        for case in CASES:
            wait_until(
                lambda c=case: has_message(kafka.bootstrap, c.row_topic(DB, END_TABLE), end),
                timeout=300,
                interval=1.0,
                what=f"the workload's last insert in case {case.name}",
            )
    finally:
        codes = [w.stop() for w in workers]
        assert codes == [0] * len(workers), "\n".join(w.log_text()[-2000:] for w in workers)
    return workload_messages(kafka.bootstrap)


def _beyond_committed(kafka: KafkaBroker, ours: list[Message]) -> list[str]:
    """Where messages are missing, what a read_uncommitted consumer sees beyond the read_committed one: messages
    in the log but in no committed transaction (aborted, or undecided), or nothing (never written)."""
    seen = {(m["topic"], m["partition"], m["offset"]) for m in ours}
    everything = workload_messages(kafka.bootstrap, committed=False)
    extra = [m for m in everything if (m["topic"], m["partition"], m["offset"]) not in seen]
    lines = [f"read_uncommitted sees {len(extra)} message(s) more than read_committed"]
    for m in extra[:10]:
        line = json.loads(str(m["value"]))
        lines.append(f"  {m['topic']} [{m['partition']}] @{m['offset']}: {line.get('position')} {line.get('table')} "
                     f"{line.get('type')}")  # fmt: skip
    return lines


BROKER_NEWS = re.compile(r" (WARN|ERROR) |[Tt]runcat|[Dd]elet|[Ss]tray|[Ff]enc|[Aa]bort")


def _broker_warnings(kafka: KafkaBroker) -> list[str]:
    """What the broker said that could explain a loss (warnings, errors, truncated or deleted logs, fenced
    producers, aborted transactions), the first few lines."""
    lines = (kafka.dir / "broker.log").read_text(errors="replace").splitlines()
    started = next((n for n, line in enumerate(lines) if "Finished waiting for the broker to be unfenced" in line), 0)
    found = [line[:300] for line in lines[started + 1 :] if line[:1].isdigit() and BROKER_NEWS.search(line)]
    return [f"the broker logged {len(found)} line(s) of note", *(f"  {line}" for line in found[:20])]


def _key_shape(key: str) -> str:
    """A key with Maxwell's random parts replaced: a DDL's bare UUID, a keyless table's `_uuid`."""
    return re.sub(UUID, "<uuid>", key)


def _position(value: str) -> tuple[str, int, int, str]:
    """Where a message's row is in the binlog: (file, offset, xoffset, its key), the key where Maxwell gives two
    rows of one event one xoffset (as the worker does after it)."""
    line = json.loads(value)
    file, offset = line["position"].split(":")
    return file, int(offset), line.get("xoffset", 0), json.dumps(line.get("primary_key"))


def _in_binlog_order(messages: list[Message]) -> list[Message]:
    return sorted(messages, key=lambda m: _position(str(m["value"])))


def _partitioned_by_a_difference(case: KafkaCase, theirs: Message, ours: Message, random_tables: set[str]) -> bool:
    """Whether the two messages' partitions may differ: partitioned by a JSON column (PARTITION_BY_JSON), or by a
    value Maxwell prints differently (differences.VALUES)."""
    if case.name != "column":
        return False
    table = json.loads(str(ours["value"])).get("table")
    if table in random_tables:
        return True
    t, o = (dict(raw_members(dict(raw_members(str(m["value"])))["data"])) for m in (theirs, ours))
    columns = case.sink["partitionColumns"]
    return any(t.get(c) != o.get(c) and (table, c) in differences.VALUES for c in columns)  # type: ignore[attr-defined]


def _partition_problems(
    case: KafkaCase, theirs: list[Message], ours: list[Message], random_tables: set[str]
) -> list[str]:
    """Each message's partition: Maxwell's where it is determined by the workload; where the case partitions by a
    run's own values, each side's against the hash of its message's own value."""
    problems: list[str] = []
    for n, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        line = json.loads(str(b["value"]))
        if case.volatile_by is not None and "sql" not in line:
            for who, m in (("Maxwell", a), ("ours", b)):
                value = json.loads(str(m["value"])).get(case.volatile_by)
                expected = partition_of("null" if value is None else str(value), PARTITIONS, "default")
                if m["partition"] != expected:
                    problems.append(f"{case.name} {who} message {n + 1}: partition {m['partition']}, not {expected}")
        elif a["partition"] != b["partition"] and not _partitioned_by_a_difference(case, a, b, random_tables):
            problems.append(f"{case.name} message {n + 1} ({line.get('table')}): partition {b['partition']}, "
                            f"Maxwell's {a['partition']}")  # fmt: skip
    return problems


def _compare_case(
    case: KafkaCase, theirs: list[Message], ours: list[Message], positions: dict[str, str], random_tables: set[str]
) -> list[str]:
    """The case's messages in binlog order: topic, partition, key and value of each."""
    theirs, ours = _in_binlog_order(theirs), _in_binlog_order(ours)
    if len(theirs) != len(ours):
        return [f"{case.name}: {len(ours)} messages, Maxwell wrote {len(theirs)}"]
    problems = _partition_problems(case, theirs, ours, random_tables)
    for n, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        if a["topic"] != b["topic"]:
            problems.append(f"{case.name} message {n + 1}: topic {b['topic']}, Maxwell's {a['topic']}")
        if _key_shape(str(a["key"])) != _key_shape(str(b["key"])):
            problems.append(f"{case.name} message {n + 1} key: Maxwell {a['key']} | ours {b['key']}")
    values = (
        [str(m["value"]) for m in theirs],
        [str(m["value"]) for m in ours],
    )
    return problems + compare(*values, positions, f"{case.name} message")


def test_kafka_messages_equal_maxwells_kafka_producer(
    tmp_path: Path, flavor: str, start_source: Callable[..., PrivateServer], kafka: KafkaBroker
) -> None:
    srv = start_source(7801)  # record_kafka.py's server_id: server_id values compare too
    ours = _our_messages(srv, kafka, tmp_path)
    positions = event_starts(srv)
    theirs = [json.loads(line) for line in (RECORDED / recording(flavor)).read_text().split("\n") if line]
    # Maxwell partitions a row by a JSON column's value at random (differences.PARTITION_BY_JSON).
    random_tables = {c.name for c in compat_cases(flavor) if c.ddl.lower().startswith("json")}
    problems: list[str] = []
    for case in CASES:
        problems += _compare_case(
            case,
            [m for m in theirs if case.owns(str(m["topic"]))],
            [m for m in ours if case.owns(str(m["topic"]))],
            positions,
            random_tables,
        )
    kept = tmp_path / "ours.jsonl"  # beside the recording's lines, for a look at what differs
    kept.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in ours))
    if problems:
        problems = [*_beyond_committed(kafka, ours), *_broker_warnings(kafka), *problems]
        shutil.copy(kafka.dir / "broker.log", tmp_path / "broker.log")
    assert not problems, f"{len(problems)} differences from Maxwell (ours: {kept}):\n" + "\n".join(problems[:40])
