"""A private Kafka broker for the tests: Apache Kafka's own jars (tests/kafka/pom.xml, cached by fetch-kafka.sh),
one JVM that is broker and controller (KRaft), on free ports, its log in a temporary directory. `brokers=N` adds
N-1 broker-only JVMs (nodes 2..N) to the same cluster, topics then replicated to all N and their leaders moved only
when a test moves them (no automatic leader rebalance).

`secure=True` adds a SASL_SSL listener (PLAIN and SCRAM-SHA-256/512, a certificate for localhost signed by a test
CA) beside the PLAINTEXT one the tests read through."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from mysqlcapture_dev.embedded.server import free_port

from tests.pki import make_ca, server_cert
from tests.support import REPO

HOME = Path(os.environ.get("MYSQLCAPTURE_CACHE", Path.home() / ".cache" / "mysqlcapture")) / "kafka"
FETCH = REPO / "tests" / "kafka" / "fetch-kafka.sh"
LOG_TIMES = ["-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]


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

    # The users of the SASL_SSL listener: PLAIN's in the broker's JAAS settings, SCRAM's stored at format time.
    USER, PASSWORD = "cdc", "cdc-s3cret"

    def __init__(
        self, *, partitions: int = 3, secure: bool = False, auto_create: bool = True, brokers: int = 1
    ) -> None:
        self.partitions = partitions
        self.auto_create = auto_create
        self.ports = {node: free_port() for node in range(1, brokers + 1)}  # each node's PLAINTEXT port
        self.port = self.ports[1]
        self.controller = free_port()
        self.secure_port = free_port() if secure else 0
        self.dir = Path(tempfile.mkdtemp(prefix="kafka-"))
        self.ca: Path | None = None  # the CA that signed the secure listener's certificate
        self.procs: dict[int, subprocess.Popen[bytes]] = {}  # the running nodes

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    @property
    def secure_bootstrap(self) -> str:
        """The SASL_SSL listener, by the name its certificate holds."""
        return f"localhost:{self.secure_port}"

    def _security(self) -> tuple[list[str], list[str]]:
        """(listeners, properties) of the SASL_SSL listener, its certificate made here."""
        if not self.secure_port:
            return [], []
        ca = make_ca(self.dir, "kafka-ca")
        cert, key = server_cert(self.dir, ca, "kafka")
        keystore = self.dir / "keystore.pem"  # Kafka's PEM keystore: the key (PKCS#8) and the certificate chain
        keystore.write_text(key.read_text() + cert.read_text())
        self.ca = ca[0]
        name = "listener.name.sasl_ssl"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return [f"SASL_SSL://localhost:{self.secure_port}"], [
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            f"{name}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{self.USER}="{self.PASSWORD}";',
            f"{name}.scram-sha-256.sasl.jaas.config={scram}",
            f"{name}.scram-sha-512.sasl.jaas.config={scram}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={keystore}",
        ]

    def _properties(self, node: int) -> Path:
        props = self._settings(node)
        listeners, security = self._security() if node == 1 else ([], [])
        advertised = ",".join([f"PLAINTEXT://127.0.0.1:{self.ports[node]}", *listeners])
        if node == 1:
            roles = [
                "process.roles=broker,controller",
                f"listeners={advertised},CONTROLLER://127.0.0.1:{self.controller}",
            ]
        else:
            roles = ["process.roles=broker", f"listeners={advertised}"]
        replicas = len(self.ports)
        props.write_text(
            "\n".join(
                [
                    *roles,
                    f"node.id={node}",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller}",
                    f"advertised.listeners={advertised}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
                    *security,
                    f"log.dirs={self.dir / ('data' if node == 1 else f'data-{node}')}",
                    f"num.partitions={self.partitions}",
                    f"default.replication.factor={replicas}",
                    "min.insync.replicas=1",
                    "broker.session.timeout.ms=30000",  # a loaded machine does not fence a broker that is up
                    "auto.leader.rebalance.enable=false",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=1",
                    "group.initial.rebalance.delay.ms=0",
                    f"auto.create.topics.enable={str(self.auto_create).lower()}",
                    "",
                ]
            )
        )
        return props

    def _settings(self, node: int) -> Path:
        """Node `node`'s server.properties."""
        return self.dir / ("server.properties" if node == 1 else f"server-{node}.properties")

    def log(self, node: int = 1) -> Path:
        """Node `node`'s log."""
        return self.dir / ("broker.log" if node == 1 else f"broker-{node}.log")

    def start(self) -> KafkaBroker:
        classpath = f"{jars()}/*"
        java = shutil.which("java") or "java"
        cluster = subprocess.run(
            [java, "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        users = []
        if self.secure_port:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                users += ["--add-scram", f"{mechanism}=[name={self.USER},password={self.PASSWORD}]"]
        for node in self.ports:
            props = self._properties(node)
            format_args = ["format", "-t", cluster, "-c", str(props), *(users if node == 1 else [])]
            subprocess.run([java, "-cp", classpath, "kafka.tools.StorageTool", *format_args], capture_output=True,
                           check=True)  # fmt: skip
        for node in self.ports:
            self._launch(node)
        self._registered()
        return self

    def _registered(self) -> None:
        """Wait until every node is a broker of the cluster (a broker-only node listens before it has joined)."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + 120
        while len(admin.list_topics(timeout=30).brokers) < len(self.ports):
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the Kafka brokers did not all join the cluster ({len(self.ports)} started)")
            time.sleep(0.2)

    def _launch(self, node: int = 1) -> KafkaBroker:
        java = shutil.which("java") or "java"
        props = self._settings(node)
        port = self.ports[node]
        with open(self.log(node), "ab") as log:  # the child keeps its own descriptor
            proc = self.procs[node] = subprocess.Popen(
                [
                    java,
                    "-Xmx512m",
                    "-XX:+UseSerialGC",
                    *LOG_TIMES,
                    "-cp",
                    f"{HOME / 'libs'}/*",
                    "kafka.Kafka",
                    str(props),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 120
        secure = self.secure_port if node == 1 else 0
        while not (_listening(port) and (not secure or _listening(secure))):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log(node).read_text(errors="replace")[-3000:]
                self.stop()
                raise AssertionError(f"the Kafka broker (node {node}) did not start:\n{tail}")
            time.sleep(0.2)
        return self

    def _end(self, node: int = 1) -> None:
        proc = self.procs.pop(node, None)
        if proc is not None and proc.poll() is None:
            proc.terminate()  # a controlled shutdown: the node's partitions get other leaders first
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def restart(self, down: Callable[[], None] = lambda: None, node: int = 1) -> None:
        """Stop node `node` (SIGTERM, its data kept), call `down` while it is down, and start it again on the same
        ports."""
        self._end(node)
        down()
        self._launch(node)
        self._registered()

    def stop(self) -> None:
        for node in sorted(self.procs, reverse=True):
            self._end(node)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _ends(admin: AdminClient, parts: list[TopicPartition], level: IsolationLevel) -> list[int]:
    """Each partition's end as a consumer at `level` sees it: the high watermark, or the last stable offset."""
    asked = admin.list_offsets({p: OffsetSpec.latest() for p in parts}, isolation_level=level, request_timeout=30)
    return [asked[p].result().offset for p in parts]


def settle(bootstrap: str, topic: str, timeout: float = 120) -> None:
    """Wait until no transaction of `topic` is undecided: every partition's last stable offset is its high
    watermark. A committed transaction's markers are written to its partitions after the producer's commit returns,
    one partition at a time, so until then a read_committed consumer can see part of it (call this once the writers
    have stopped: a running one keeps opening transactions)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    parts = [TopicPartition(topic, p) for p in sorted(meta.partitions)]
    deadline = time.monotonic() + timeout
    while (stable := _ends(admin, parts, IsolationLevel.READ_COMMITTED)) != (
        high := _ends(admin, parts, IsolationLevel.READ_UNCOMMITTED)
    ):
        assert time.monotonic() < deadline, f"{topic} still holds an undecided transaction: {stable} < {high}"
        time.sleep(0.2)


def read_topic(bootstrap: str, topic: str, *, settled: bool = False, committed: bool = True) -> list[Any]:
    """Every message of `topic` a read_committed consumer sees (`committed=False`: every message in the log,
    aborted and undecided ones too), partition by partition, each in its order (`settled`: once every transaction
    of it is decided, see settle())."""
    return read_topics(bootstrap, [topic], settled=settled, committed=committed)[topic]


def read_topics(
    bootstrap: str, names: list[str], *, settled: bool = False, committed: bool = True
) -> dict[str, list[Any]]:
    """read_topic of each of `names`, by one consumer (a consumer's start costs about a second: a test reading
    dozens of topics one by one spent most of its time there)."""
    if settled:
        for topic in names:
            settle(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        # Topic by topic, as a consumer asks for one: a topic not there yet has no partitions (nothing to read).
        listed = {t: consumer.list_topics(t, timeout=30).topics[t] for t in names}
        parts = [TopicPartition(t, p, 0) for t in names for p in sorted(listed[t].partitions)]
        consumer.assign(parts)
        done: set[tuple[str, int]] = set()
        out: dict[str, list[Any]] = {t: [] for t in names}
        deadline = time.monotonic() + 120
        while len(done) < len(parts):
            assert time.monotonic() < deadline, (
                f"reading {sorted({p.topic for p in parts if (p.topic, p.partition) not in done})} did not reach "
                "their end"
            )
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            at_topic, at_partition, error = msg.topic(), msg.partition(), msg.error()
            assert at_topic is not None and at_partition is not None, msg
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                done.add((at_topic, at_partition))
                continue
            out[at_topic].append(msg)
        return out
    finally:
        consumer.close()


def has_message(bootstrap: str, topic: str, needle: bytes) -> bool:
    """Whether `topic` exists and a message of it holds `needle`."""
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    return topic in listed and any(needle in (m.value() or b"") for m in read_topic(bootstrap, topic))


def topics(bootstrap: str) -> list[str]:
    """The broker's topics but its own (__consumer_offsets, __transaction_state)."""
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics
    return sorted(t for t in listed if not t.startswith("__"))
