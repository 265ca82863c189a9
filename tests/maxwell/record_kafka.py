"""Record what real Maxwell's Kafka producer writes for the compatibility workload (run by hand; checked in).

    python -m tests.maxwell.record_kafka --flavor mariadb --maxwell-home DIR

DIR is an unpacked Maxwell 1.44.1 distribution (bin/, lib/, lib/kafka-clients/), built from its published source
with `mvn package`. A private server and a private Kafka broker (topics of kafka_cases.PARTITIONS partitions) are
started; one Maxwell per case of kafka_cases.CASES follows the server with its Kafka flags; the workload runs once;
every message of the workload's database is kept, topic by topic and partition by partition in its order, as one
JSON object per line: {"topic", "partition", "key", "value"} (key and value as Maxwell's text).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests import servers
from tests.kafka.broker import KafkaBroker, has_message
from tests.maxwell.kafka_cases import CASES, PARTITIONS, KafkaCase, recording, workload_messages
from tests.maxwell.record import maxwell_command
from tests.maxwell.workload import DB, END_TABLE, statements
from tests.maxwell.workload import run as run_workload


def _wait(
    what: str,
    ready: Callable[[], bool],
    procs: list[subprocess.Popen[bytes]],
    logs: Path,
    act: Callable[[], object] | None = None,
) -> None:
    deadline = time.monotonic() + 300
    while not ready():
        if act is not None:
            act()
        failed = [proc.returncode for proc in procs if proc.poll() is not None]
        if failed or time.monotonic() > deadline:
            sys.stderr.write("".join(p.read_text()[-3000:] for p in sorted(logs.glob("*.log"))))
            raise SystemExit(f"a Maxwell exited ({failed[0]})" if failed else f"no {what} after 300 s")
        time.sleep(1)


def _start(
    case: KafkaCase, n: int, home: Path, srv: servers.PrivateServer, kafka: KafkaBroker, logs: Path
) -> subprocess.Popen[bytes]:
    flags = [f"--{name}={value}" for name, value in case.maxwell.items()]
    cmd = maxwell_command(
        home,
        srv,
        f"--replica_server_id={7900 + n}",
        f"--client_id=mx{n}",
        "--producer=kafka",
        f"--kafka.bootstrap.servers={kafka.bootstrap}",
        *flags,
    )
    with open(logs / f"{case.name}.log", "wb") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def _create_table_topics(bootstrap: str, flavor: str) -> None:
    """The topics of the cases whose topic names a table, made before Maxwell writes to them: on MySQL, Maxwell
    1.44.1 lost the first rows it sent to a topic the broker was still creating, 5 and 7 rows in two runs (its
    default ignore_producer_error drops them), which a recording to compare with cannot hold."""
    tables = [("maxwell_ready", "t")]
    tables += [(DB, t) for t in re.findall(rf"(?:CREATE TABLE|TO) {DB}\.`?(\w+)`?", " ".join(statements(flavor)))]
    names = {c.row_topic(db, t) for c in CASES if "%{" in str(c.sink["topic"]) for db, t in tables}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=PARTITIONS, replication_factor=1) for name in sorted(names)]
    )
    for future in futures.values():
        future.result(60)


def record(flavor: str, home: Path, out: Path) -> int:
    with (
        tempfile.TemporaryDirectory() as tmp,
        servers.running(flavor, 7801) as srv,  # type: ignore[arg-type]
        KafkaBroker(partitions=PARTITIONS) as kafka,
    ):
        logs = Path(tmp)
        _create_table_topics(kafka.bootstrap, flavor)
        srv.execute("CREATE DATABASE maxwell_ready", "CREATE TABLE maxwell_ready.t (id int AUTO_INCREMENT PRIMARY KEY)")
        procs = [_start(case, n, home, srv, kafka, logs) for n, case in enumerate(CASES)]
        try:
            # Each Maxwell has captured its schema once the readiness row reaches its topic.
            for case in CASES:
                _wait(
                    f"readiness row from {case.name}",
                    lambda c=case: has_message(kafka.bootstrap, c.row_topic("maxwell_ready", "t"), b'"maxwell_ready"'),
                    procs,
                    logs,
                    lambda: srv.execute(
                        "INSERT INTO maxwell_ready.t VALUES (NULL)"
                    ),  # a new row each time: each is logged
                )
            run_workload(srv)
            end = f'"table":"{END_TABLE}","type":"insert"'.encode()
            for case in CASES:
                _wait(
                    f"the workload's last insert from {case.name}",
                    lambda c=case: has_message(kafka.bootstrap, c.row_topic(DB, END_TABLE), end),
                    procs,
                    logs,
                )
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(60)
        kept = [{k: v for k, v in m.items() if k != "offset"} for m in workload_messages(kafka.bootstrap)]
        counts = {case.name: sum(case.owns(str(m["topic"])) for m in kept) for case in CASES}
        if len(set(counts.values())) != 1:  # the first rows sent to a topic being created
            raise SystemExit(f"the Maxwells wrote different numbers of messages {counts}: one dropped some")
        out.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in kept))
        print(f"{len(kept)} messages from {len(CASES)} Maxwells ({home.name}) on {srv.version} -> {out}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flavor", choices=("mariadb", "mysql"), default="mariadb")
    p.add_argument("--maxwell-home", type=Path, required=True)
    a = p.parse_args()
    return record(a.flavor, a.maxwell_home.resolve(), Path(__file__).parent / recording(a.flavor))


if __name__ == "__main__":
    sys.exit(main())
