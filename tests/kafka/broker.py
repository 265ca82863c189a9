"""A private Kafka broker for the tests: Apache Kafka's own jars (tests/kafka/pom.xml, cached by fetch-kafka.sh),
one JVM that is broker and controller (KRaft), on free ports, its log in a temporary directory."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from mysqlcapture_dev.embedded.server import free_port

from tests.support import REPO

HOME = Path(os.environ.get("MYSQLCAPTURE_CACHE", Path.home() / ".cache" / "mysqlcapture")) / "kafka"
FETCH = REPO / "tests" / "kafka" / "fetch-kafka.sh"


def jars() -> Path:
    """The broker's jars, fetched into the cache when missing (AssertionError with the reason when that fails)."""
    done = subprocess.run(["bash", str(FETCH), str(HOME)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"the Kafka broker's jars could not be fetched:\n{done.stderr[-3000:]}")
    return HOME / "libs"


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class KafkaBroker:
    """`with KafkaBroker() as kafka:` a running broker at `kafka.bootstrap`; stopped (and its data removed) after."""

    def __init__(self, *, partitions: int = 3) -> None:
        self.partitions = partitions
        self.port = free_port()
        self.controller = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> Path:
        props = self.dir / "server.properties"
        props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={self.dir / 'data'}",
                    f"num.partitions={self.partitions}",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=true",
                    "",
                ]
            )
        )
        return props

    def start(self) -> KafkaBroker:
        classpath = f"{jars()}/*"
        props = self._properties()
        java = shutil.which("java") or "java"
        cluster = subprocess.run(
            [java, "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        subprocess.run(
            [java, "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(props)],
            capture_output=True,
            check=True,
        )
        with open(self.dir / "broker.log", "wb") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [java, "-Xmx512m", "-XX:+UseSerialGC", "-cp", classpath, "kafka.Kafka", str(props)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 120
        while not _listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.dir / "broker.log").read_text(errors="replace")[-3000:]
                self.stop()
                raise AssertionError(f"the Kafka broker did not start:\n{tail}")
            time.sleep(0.2)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
