"""Maxwell's JSON values on Kafka, each commit's events and its checkpoint in one Kafka transaction.

Exactly once: the producer's `transactional.id` is the capture's, so a restarted worker fences the one it replaces
and the broker aborts whatever that one left open; the checkpoint (the position after a commit's events) is a
message of the same transaction, keyed by the capture's name, on a compacted one-partition topic. At start the
worker reads its newest checkpoint there as a read_committed consumer sees it and resumes after it, so a consumer
reading with isolation.level=read_committed sees each event once. With `exactlyOnce: false` the producer is
idempotent and the checkpoint is written once the events are acknowledged: a crash between them repeats them.
"""

from __future__ import annotations

import ctypes
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from mysqlcapture_api.schema.history import SchemaHistory
from mysqlcapture_api.sinks import KafkaSink as KafkaSpec

from mysqlcapture_worker.changes import ChangeEvent, Event, RowBatch
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.sinks import SinkError, SinkMismatch
from mysqlcapture_worker.sinks.kafka_routing import Router
from mysqlcapture_worker.sinks.maxwell import batch_messages, lines, maxwell_line

if TYPE_CHECKING:
    from mysqlcapture_native import DirectProducer, KafkaRoute

log = logging.getLogger(__name__)


class KafkaSinkError(SinkError):
    """A Kafka sink cannot go on (one line naming the setting or the event, and the fix)."""


# What librdkafka's message.max.bytes allows beyond maxMessageBytes: a message's framing in its record batch, so that
# a message of exactly maxMessageBytes (key and value) is sent (the sink itself holds messages to maxMessageBytes).
FRAMING = 4096
# librdkafka's queue, in messages (its largest): a commit's batches are queued whole, one call each.
QUEUE_SIZE = 2**31 - 1
# How long a missing topic is waited for (brokers that create topics do so at once), in seconds.
MISSING_SECONDS = 10.0
# How often the partition counts of the topics written are looked at again while running, in seconds.
RECOUNT_SECONDS = 10.0
# The checkpoint message's header recording the partition count of each topic the capture wrote.
PARTITIONS_HEADER = "mysqlcapture.partitions"
# librdkafka's errors meaning another producer with the capture's transactional.id took over.
FENCED = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
# What the messages of an aborted transaction are reported with: not a refusal of theirs.
PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)
# What librdkafka's init_transactions ends with, once the brokers answered, when no broker hosts the transaction
# coordinator at the moment (it asks again until its timeout; a refusal for good, such as a transactional.id the
# brokers' ACLs deny, comes at once with its own code).
COORDINATOR_AWAY = (
    KafkaError._TIMED_OUT,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)
# A commit's messages not acknowledged in time (librdkafka fails the transaction with these): the brokers did not
# answer, they refused nothing.
UNANSWERED = (KafkaError._TIMED_OUT, KafkaError._MSG_TIMED_OUT)


def _nothing(*_: object) -> None:
    return None


@dataclass(frozen=True)
class KafkaMetrics:
    """What the sink reports to the worker's metrics (each does nothing unless given)."""

    dead_lettered: Callable[[], None] = _nothing  # a record went to the dead-letter topic
    fenced: Callable[[], None] = _nothing  # another worker took over the transactional.id
    transaction: Callable[[float, bool], None] = _nothing  # (seconds to acknowledge, committed) of each commit
    unacknowledged: Callable[[int], None] = _nothing  # bytes produced in the open transaction


class KafkaSink:
    """Writes each event as Maxwell's Kafka producer does (topic, key, partition), exactly once."""

    def __init__(
        self,
        spec: KafkaSpec,
        *,
        capture: str,
        security: dict[str, str] | None = None,
        metrics: KafkaMetrics = KafkaMetrics(),
        history_storage: dict[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.capture = capture
        self.metrics = metrics
        self._history_storage = history_storage or None  # the schema history's storage options
        self._open_bytes = 0  # keys and values produced in the open transaction
        self.router = Router(spec)
        self._partitions: dict[str, int] = {}  # the topics written in this run, their partition counts
        self._groups: dict[str, int] = {}  # the topics batches went to, numbered in order for the compiled renderer
        self._recorded: dict[str, int] = {}  # the counts the newest checkpoint recorded
        self._dead_letter_ready: set[str] = set()
        self._counted_at = time.monotonic()
        # Every client of the sink (producer, checkpoint consumer, admin) connects the same way, its latest errors
        # kept to say why the brokers cannot be reached, its log in the worker's.
        self._errors: deque[KafkaError] = deque(maxlen=64)
        self._client: dict[str, Any] = {"bootstrap.servers": spec.bootstrap_servers, **(security or {})}
        self._client |= {"error_cb": self._errors.append, "logger": logging.getLogger(f"{__name__}.librdkafka")}
        settings: dict[str, Any] = dict(spec.producer_config) | self._client
        settings |= {"enable.idempotence": True, "acks": "all", "message.max.bytes": spec.max_message_bytes + FRAMING}
        settings |= {"delivery.report.only.error": True, "on_delivery": self._delivered}
        settings["linger.ms"] = settings.get("linger.ms", "5")
        settings.setdefault("queue.buffering.max.messages", QUEUE_SIZE)
        if spec.exactly_once:
            settings["transactional.id"] = f"mysqlcapture-{capture}"
            settings["transaction.timeout.ms"] = spec.transaction_timeout_ms
        self._settings = settings
        self.producer: Producer | None = None
        self._direct: DirectProducer | None = None  # the producer's handle, for batches' messages (exactly once)
        self._open = False  # a transaction (or, with exactlyOnce false, a commit) is open
        self._staged = 0  # the open commit's events `stage` queued
        self._failure: str | None = None  # the first message the brokers refused in the open commit
        self._unanswered: str | None = None  # why a message of the open commit was not acknowledged in time

    # -- start ------------------------------------------------------------------------------------------------
    def _connect(self) -> Producer:
        if self.producer is None:
            try:
                producer = Producer(self._settings)
                self._reach(producer)
                if self.spec.exactly_once:
                    # Fences an older worker of this capture and ends what it left open.
                    init_transactions(producer, self._timeout)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() in COORDINATOR_AWAY:
                    # The brokers answer, but none hosts the capture's transaction coordinator yet (librdkafka asked
                    # again until the timeout): a broker holding __transaction_state is down or still loading it.
                    raise KafkaSinkError(
                        f"the Kafka brokers of {self.spec.bootstrap_servers} answer, but the transaction coordinator "
                        f"of mysqlcapture-{self.capture} did not take the producer within {self._timeout:.0f} s "
                        f"({_reason(exc)}): a broker holding the topic __transaction_state is down or starting; "
                        "the worker goes on from its last checkpoint when it starts again once that broker is up "
                        "(brokers with transaction.state.log.replication.factor of 3 keep the coordinator through "
                        "one broker's restart)",
                        "KafkaUnreachable",
                    ) from exc
                raise KafkaSinkError(
                    f"cannot start a Kafka producer on {self.spec.bootstrap_servers} ({_reason(exc)}): check "
                    "spec.sink.kafka.bootstrapServers and that the brokers allow transactions"
                ) from exc
            self.producer = producer
            self._direct = direct_producer(producer) if self.spec.exactly_once else None
        return self.producer

    def _reach(self, producer: Producer) -> None:
        """Wait until the brokers answer; stop at once when they refuse the credentials or the TLS handshake fails
        (librdkafka would retry those for ever), after the timeout when none answers."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                producer.list_topics(timeout=1.0)
                return
            except KafkaException:
                producer.poll(0)  # serves error_cb
            refused = [e for e in self._errors if e.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL)]
            if refused or time.monotonic() > deadline:
                raise KafkaSinkError(*_unreachable(self.spec, refused or self._errors, self._timeout))

    @property
    def _timeout(self) -> float:
        return max(30.0, self.spec.transaction_timeout_ms / 1000)

    def _checkpoint_topic(self) -> None:
        """Make the checkpoint topic when it is missing, unless the capture has run: then it was deleted."""
        admin = AdminClient(dict(self._client))
        topic = self.spec.checkpoint_topic
        if topic in admin.list_topics(timeout=self._timeout).topics:
            return
        # The capture's first start writes its schema history after making the topic: with a history, it has run.
        if SchemaHistory.open(self.spec.schema_history_uri, self._history_storage).latest_version() is not None:
            raise SinkMismatch(
                f"the checkpoint topic {topic} is missing, but the schema history at {self.spec.schema_history_uri} "
                f"shows capture {self.capture} has run: going on would start it over and repeat or skip events. "
                "Restore the topic, point spec.sink.kafka.bootstrapServers and checkpointTopic at where the "
                "capture's checkpoints are, or remove the schema history to start the capture over (from "
                "spec.start); nothing was written"
            )
        new = NewTopic(topic, num_partitions=1, replication_factor=-1, config={"cleanup.policy": "compact"})
        for future in admin.create_topics([new]).values():
            try:
                future.result(self._timeout)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaSinkError(
                        f"cannot create the checkpoint topic {topic} ({_reason(exc)}): create it (one partition, "
                        "cleanup.policy=compact) or set spec.sink.kafka.checkpointTopic"
                    ) from exc

    def load_checkpoint(self) -> Position | None:
        producer = self._connect()
        self._checkpoint_topic()
        self._existing(producer, self.spec.checkpoint_topic)  # hosted by its leader before the first checkpoint
        position = self._read_checkpoint()
        for topic in self._recorded:  # a count changed while no worker ran is refused before anything is written
            self._partition_count(producer, topic)
        return position

    def _read_checkpoint(self) -> Position | None:
        consumer = Consumer(
            self._client
            | {
                "group.id": f"mysqlcapture-{self.capture}-checkpoint",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                # The end of the topic is known once a fetch comes back empty: the brokers' default wait for
                # data (500 ms) would be part of every start.
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            part = TopicPartition(self.spec.checkpoint_topic, 0)
            low, high = consumer.get_watermark_offsets(part, timeout=self._timeout)
            if high <= low:
                return None
            consumer.assign([TopicPartition(self.spec.checkpoint_topic, 0, low)])
            found: bytes | None = None
            while True:
                msg = consumer.poll(self._timeout)
                if msg is None:
                    raise KafkaSinkError(
                        f"no answer reading the checkpoint topic {self.spec.checkpoint_topic} within "
                        f"{self._timeout:.0f} s: check the brokers"
                    )
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        break
                    raise KafkaSinkError(f"cannot read the checkpoint topic {self.spec.checkpoint_topic}: {err.str()}")
                if msg.key() == self.capture.encode():
                    found = msg.value()
                    headers = dict(msg.headers() or [])
                    self._recorded = json.loads(headers.get(PARTITIONS_HEADER) or b"{}")
            return Position.from_json(found.decode()) if found else None
        finally:
            consumer.close()

    # -- commit -----------------------------------------------------------------------------------------------
    def _partition_count(self, producer: Producer, topic: str) -> int:
        """The partitions of a topic rows or DDL go to (created when missing and allowed)."""
        count = self._partitions.get(topic)
        if count is None:
            count = self._existing(producer, topic)
            self._confirm(topic, self._recorded.get(topic), count)
            self._partitions[topic] = count
        return count

    def _existing(self, producer: Producer, topic: str) -> int:
        """The partitions of `topic`, once it exists: created by the sink (createTopics) or by the brokers
        (asking for a missing topic has them create it, when they allow that); one line when neither does."""
        started = time.monotonic()
        hosted = True
        while True:
            meta = producer.list_topics(topic, timeout=self._timeout).topics.get(topic)
            # Written once every partition has a leader that hosts it. A broker names itself a new partition's leader
            # in its metadata before it has made the partition's log; a message sent in between is refused
            # (NOT_LEADER_OR_FOLLOWER), and librdkafka 2.16's transactional producer has then dropped the refused
            # batch without a word, sending the partition's later messages and committing (README, issue 32).
            ready = meta is not None and meta.error is None and bool(meta.partitions)
            if ready and all(p.leader >= 0 and p.error is None for p in meta.partitions.values()):
                hosted = self._hosted(topic, sorted(meta.partitions))
                if hosted:
                    return len(meta.partitions)
            waited = time.monotonic() - started
            missing = meta is None or (meta.error is not None and meta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
            if missing and self.spec.create_topics is not None:
                self._create(topic)
            elif waited > self._timeout or (missing and waited > MISSING_SECONDS):
                why = (
                    meta.error.str()
                    if meta is not None and meta.error is not None
                    else "partitions their leaders do not host yet"
                    if not hosted
                    else "partitions without a leader"
                    if meta is not None and meta.partitions
                    else "no partitions"
                )
                raise KafkaSinkError(
                    f"topic {topic} cannot be written ({why}): create it, set spec.sink.kafka.createTopics, or let "
                    "the brokers create topics (auto.create.topics.enable)",
                    "KafkaTopicUnavailable",
                )
            time.sleep(0.2)

    def _hosted(self, topic: str, partitions: list[int]) -> bool:
        """Whether every partition's leader answers for it (a ListOffsets request, which a broker refuses for a
        partition it does not host yet)."""
        admin = AdminClient(dict(self._client))
        asked = admin.list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}, request_timeout=self._timeout
        )
        try:
            for future in asked.values():
                future.result(self._timeout)
        except KafkaException:
            return False
        return True

    def _create(self, topic: str) -> None:
        made = self.spec.create_topics
        assert made is not None
        config = {"max.message.bytes": str(self.spec.max_message_bytes + FRAMING)}
        new = NewTopic(topic, num_partitions=made.partitions, replication_factor=made.replication_factor,
                       config=config)  # fmt: skip
        admin = AdminClient(dict(self._client))  # held until its answer: a dropped client ends its requests
        for future in admin.create_topics([new]).values():
            try:
                future.result(self._timeout)
                log.info("created topic %s (%d partitions)", topic, made.partitions)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise KafkaSinkError(
                        f"cannot create topic {topic} ({_reason(exc)}): create it, or give the capture's user the "
                        "right to (CREATE on the cluster or the topic)",
                        "KafkaTopicUnavailable",
                    ) from exc

    def _fenced(self, err: KafkaError) -> KafkaSinkError:
        self.metrics.fenced()
        return KafkaSinkError(
            f"another worker of capture {self.capture} took over its Kafka transactions (transactional.id "
            f"mysqlcapture-{self.capture}; {err.str()}): this one stopped without writing; run one worker per capture",
            "ProducerFenced",
        )

    def _confirm(self, topic: str, was: int | None, count: int) -> None:
        """Refuse a partition count other than the one the capture's messages were partitioned over, unless a
        person confirmed it."""
        if was is None or was == count or self.spec.confirmed_partitions.get(topic) == count:
            return
        raise KafkaSinkError(
            f"topic {topic} has {count} partitions, but the capture's messages so far were partitioned over {was}: "
            "a key's partition follows the count, so its later messages could overtake its earlier ones; if the "
            f"change is intended, confirm it with spec.sink.kafka.confirmedPartitions: {{{topic}: {count}}}",
            "PartitionCountChanged",
        )

    def _recount(self, producer: Producer) -> None:
        """Look at the written topics' partition counts again (every RECOUNT_SECONDS): a change stops the worker
        before it writes more."""
        if time.monotonic() - self._counted_at < RECOUNT_SECONDS:
            return
        for topic, was in list(self._partitions.items()):
            meta = producer.list_topics(topic, timeout=self._timeout).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions and len(meta.partitions) != was:
                self._confirm(topic, was, len(meta.partitions))
                self._partitions[topic] = len(meta.partitions)
        self._counted_at = time.monotonic()

    def _produce(
        self,
        producer: Producer,
        topic: str,
        key: bytes | str,
        value: bytes,
        partition: int = -1,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        """Queue one message (partition -1: the default partitioner picks it by key)."""
        self._open_bytes += len(key) + len(value)
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=partition, headers=headers)
                return
            except BufferError:
                producer.poll(0.1)

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None and err.code() in PURGED:  # the transaction was aborted, for the reason raised
            return
        if err is not None and (err.code() in UNANSWERED or err.retriable()):
            self._unanswered = self._unanswered or err.str()  # not refused: no broker acknowledged it in time
            return
        if err is not None and self._failure is None:
            size = len(msg.value() or b"") + len(msg.key() or b"")
            which = f"key {_shown(msg.key() or b'')}, {size:,} bytes"
            if err.code() != KafkaError.MSG_SIZE_TOO_LARGE:
                self._failure = f"{err.str()} (topic {msg.topic()}, {which})"
                return
            # The brokers refuse a whole record batch: this message is its first, not necessarily the large one.
            self._failure = (
                f"{err.str()} (topic {msg.topic()}: a record batch from the message of {which}): the topic's "
                "max.message.bytes is below spec.sink.kafka.maxMessageBytes; raise the topic's (kafka-configs "
                "--alter --add-config max.message.bytes=...) or lower maxMessageBytes"
            )

    def _route(self, producer: Producer, e: ChangeEvent, topic: str, key: bytes | str, value: bytes, part: int) -> None:
        """Queue `e`'s message; one over maxMessageBytes stops the commit or, with deadLetter, is recorded instead."""
        raw_key = key.encode() if isinstance(key, str) else key
        size = len(raw_key) + len(value)
        if size <= self.spec.max_message_bytes:
            self._produce(producer, topic, raw_key, value, part)
            return
        article = "an" if e.type[:1] in "aeiou" else "a"
        where = f"{article} {e.type} of {e.database}.{e.table}" if e.table else f"{article} {e.type} of {e.database}"
        said = f"{where} (key {_shown(raw_key)}, binlog {e.binlog_file}:{e.event_pos}) is {size:,} bytes"
        if self.spec.oversized == "fail" or self.spec.dead_letter_topic is None:
            raise KafkaSinkError(
                f"{said}, over spec.sink.kafka.maxMessageBytes ({self.spec.max_message_bytes:,}): raise "
                "maxMessageBytes (and the topic's max.message.bytes), or set oversized: deadLetter with a "
                "deadLetterTopic; nothing from it on was written",
                "MessageTooLarge",
            )
        log.warning("%s, over maxMessageBytes: recorded on %s instead", said, self.spec.dead_letter_topic)
        if self.spec.dead_letter_topic not in self._dead_letter_ready:
            self._existing(producer, self.spec.dead_letter_topic)
            self._dead_letter_ready.add(self.spec.dead_letter_topic)
        record = dead_letter(e, topic=topic, partition=part, size=size, limit=self.spec.max_message_bytes)
        self._produce(producer, self.spec.dead_letter_topic, raw_key, record)
        self.metrics.dead_lettered()

    def stage(self, events: Sequence[Event]) -> None:
        """Queue `events`' messages in the open transaction ahead of its commit, so that librdkafka sends them while
        the reader reads on (a commit then waits only for its last messages). The next `commit` begins with every
        event staged since the last one, in order, and queues only the rest. Only on the producer's handle (exactly
        once); otherwise the commit queues everything."""
        producer = self._connect()
        if self._direct is None or not events:
            return
        try:
            self._begin(producer)
            self._queue(producer, events, self._direct)
            self._staged += len(events)
        except (KafkaException, KafkaSinkError) as exc:
            self._failed(producer, exc, self._direct)

    def commit(self, events: Sequence[Event], position: Position) -> None:
        producer = self._connect()
        if self._direct is None:
            self._commit(producer, events, position, None)
            return
        try:
            self._commit(producer, events, position, self._direct)
        except _Unnamed as exc:
            log.warning("%s; committing the same events again, message by message, to name the one refused", exc)
            self._commit(producer, events, position, None)

    def _begin(self, producer: Producer) -> None:
        """Open the commit's transaction (exactly once), unless `stage` did."""
        if self._open:
            return
        self._failure = self._unanswered = None
        self._open_bytes = 0
        if self.spec.exactly_once:
            producer.begin_transaction()
        self._open = True
        self._recount(producer)

    def _commit(
        self, producer: Producer, events: Sequence[Event], position: Position, direct: DirectProducer | None
    ) -> None:
        """One Kafka transaction (exactly once) of `events` and the checkpoint; `direct`: batches' messages queued
        on the producer's handle (no delivery report each: a refusal fails the commit, raised as `_Unnamed`)."""
        try:
            if self._staged > len(events):
                raise KafkaSinkError(f"{self._staged:,} events were staged for a commit of {len(events):,}")
            self._begin(producer)
            self._queue(producer, events[self._staged :], direct)
            if not self.spec.exactly_once:
                self._flush(producer)
            checkpoint = position.to_json().encode()
            counts = json.dumps(self._recorded | self._partitions, sort_keys=True).encode()
            self._produce(producer, self.spec.checkpoint_topic, self.capture.encode(), checkpoint, 0,
                          [(PARTITIONS_HEADER, counts)])  # fmt: skip
            self.metrics.unacknowledged(self._open_bytes)
            started = time.perf_counter()
            if self.spec.exactly_once:
                producer.commit_transaction(self._timeout)
            else:
                self._flush(producer)
            self._open, self._staged = False, 0
            if (undelivered := self._undelivered()) is not None:  # exactlyOnce false: flushed, not all delivered
                raise undelivered
            self.metrics.transaction(time.perf_counter() - started, True)
            self.metrics.unacknowledged(0)
        except (KafkaException, KafkaSinkError) as exc:
            self._failed(producer, exc, direct)

    def _queue(self, producer: Producer, events: Sequence[Event], direct: DirectProducer | None) -> None:
        """Queue `events`' messages in order: runs of row batches a run at a time, other events one by one."""
        run: list[tuple[RowBatch, KafkaRoute]] = []  # consecutive batches keyed and partitioned a batch at a time
        for e in events:
            if isinstance(e, RowBatch) and (route := self._batch_route(producer, e)) is not None:
                run.append((e, route))
                continue
            self._run(producer, run, direct)
            run = []
            self._one(producer, e)
        self._run(producer, run, direct)

    def _failed(
        self, producer: Producer, exc: KafkaException | KafkaSinkError, direct: DirectProducer | None
    ) -> NoReturn:
        """End the open transaction (aborted: none of it is visible) and raise what went wrong as one line."""
        opened, self._open, self._staged = self._open, False, 0
        self.metrics.unacknowledged(0)
        if self.spec.exactly_once and opened:
            self.metrics.transaction(0.0, False)
            try:
                producer.abort_transaction(self._timeout)
            except KafkaException as refused:
                log.warning("could not abort the Kafka transaction (%s); the next start ends it", _reason(refused))
        if isinstance(exc, KafkaSinkError):
            raise exc
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() in FENCED:
            raise self._fenced(err) from exc
        timed_out = isinstance(err, KafkaError) and (err.code() in UNANSWERED or err.retriable())
        if (undelivered := self._undelivered(_reason(exc) if timed_out else None)) is not None:
            raise undelivered from exc
        failed = KafkaSinkError if direct is None else _Unnamed
        raise failed(f"the Kafka commit failed ({_reason(exc)}); nothing of it was committed") from exc

    def _undelivered(self, timed_out: str | None = None) -> KafkaSinkError | None:
        """What the open commit's delivery reports say went wrong, as one line (`timed_out`: why the commit itself
        was not acknowledged in time); None when they say nothing."""
        if self._failure is not None:  # a delivery report named the message the brokers refused
            return KafkaSinkError(f"Kafka refused a message: {self._failure}")
        unanswered = self._unanswered or timed_out
        if unanswered is None:
            return None
        kept = "nothing of it was committed" if self.spec.exactly_once else "the checkpoint stays before it"
        return KafkaSinkError(  # not a refusal: the brokers did not answer in time
            f"the Kafka brokers did not acknowledge the commit within {self._timeout:.0f} s ({unanswered}); "
            f"{kept}: check that the brokers of {self.spec.bootstrap_servers} are up and "
            "reachable, or raise spec.sink.kafka.transactionTimeoutMs; the worker goes on from its last checkpoint "
            "when it starts again",
            "KafkaUnreachable",
        )

    def _batch_route(self, producer: Producer, b: RowBatch) -> KafkaRoute | None:
        """How `b`'s rows go to Kafka a batch at a time (its topic as its number in `_groups`), or None: row by row."""
        if not self.spec.output_nulls:  # each object rewritten: row by row
            return None
        topic = self.router.row_topic(b.database, b.table, b.type)
        route = self.router.batch_route(b, self._partition_count(producer, topic))
        if route is None:
            return None
        return (self._groups.setdefault(topic, len(self._groups)), *route)

    def _run(self, producer: Producer, run: list[tuple[RowBatch, KafkaRoute]], direct: DirectProducer | None) -> None:
        """Queue consecutive batches' messages, written by the compiled renderer: one call a topic and partition (on
        the producer's handle with `direct`, else produce_batch), each partition's messages in the rows' order (all
        the order Kafka keeps). A run holding a message over maxMessageBytes goes row by row instead, which stops at
        it or records it on the dead-letter topic."""
        if not run:
            return
        messages = batch_messages(run, self.spec, murmur=self.spec.partition_hash == "murmur3")
        if messages.largest > self.spec.max_message_bytes:
            for b, _ in run:
                self._one(producer, b)
            return
        self._open_bytes += messages.total
        topics = list(self._groups)  # numbered in the order they were added
        if direct is None:
            for group, partition, dicts in messages.dicts():
                self._produce_all(producer, topics[group], dicts, partition)
            return
        refused = direct.produce(messages, topics)
        if refused is not None:
            topic, partition, queued, code, text, key = refused
            what = f"message(s) of topic {topic} partition {partition} after {queued:,}"
            raise self._queue_refusal(KafkaError(code), text, what, key)

    def _one(self, producer: Producer, e: Event) -> None:
        """Queue an event's messages row by row: its lines (`lines`, `maxwell_line`), each row's key and partition
        by the router; none for an event the output options leave out."""
        if type(e) is RowBatch:
            rows: list[tuple[ChangeEvent, bytes]] = list(
                zip(e.events(), lines([e], self.spec).split(b"\n")[:-1], strict=True)
            )
        else:
            assert isinstance(e, ChangeEvent)
            line = maxwell_line(e, self.spec)
            rows = [] if line is None else [(e, line)]
        for event, value in rows:
            topic = self.router.topic(event)
            partition = self.router.partition(event, self._partition_count(producer, topic))
            key = self.router.key(event)
            try:
                self._route(producer, event, topic, key, value, partition)
            except KafkaException as exc:
                raise KafkaSinkError(_refused(exc, event, key)) from exc

    def _produce_all(self, producer: Producer, topic: str, messages: list[dict[str, Any]], partition: int) -> None:
        """Queue `messages` in one call. The queue holds a whole commit (QUEUE_SIZE), so a refusal here is an
        error of the commit, never a full queue to wait out (waiting could reorder the batch's messages)."""
        queued = producer.produce_batch(topic, messages, partition=partition)
        if queued != len(messages):
            failed = next(m for m in messages if m.get("_error") is not None)
            what = f"{len(messages) - queued:,} message(s) of topic {topic}"
            raise self._queue_refusal(failed["_error"], failed["_error"].str(), what, failed["key"])

    def _queue_refusal(self, err: KafkaError, text: str, what: str, key: bytes | str) -> KafkaSinkError:
        """Messages librdkafka would not queue: another worker took over, or one line with the fix."""
        if err.code() in FENCED:
            return self._fenced(err)
        return KafkaSinkError(
            f"Kafka refused {what} (key {_shown(key)}): {text}; if the producer's queue is full, raise "
            "queue.buffering.max.kbytes in spec.sink.kafka.producerConfig or lower spec.flush.maxBytes"
        )

    def _flush(self, producer: Producer) -> None:
        left = producer.flush(self._timeout)
        if left:
            raise KafkaSinkError(f"{left} Kafka message(s) not acknowledged within {self._timeout:.0f} s")

    def close(self) -> None:
        if self.producer is not None:
            try:
                self.producer.flush(10)
            except KafkaException as exc:  # a producer failed for good: what stopped the worker is said already
                log.warning("the Kafka producer did not close cleanly (%s)", _reason(exc))
        self.producer, self._direct, self._open, self._staged = None, None, False, 0


class _Unnamed(KafkaSinkError):
    """A commit whose batches went through the producer's handle failed: the refused message is not known."""


def direct_producer(producer: Producer) -> DirectProducer | None:
    """`producer`'s librdkafka handle for `DirectProducer`, or None (the slower `produce_batch` then).

    The handle is the first field of confluent-kafka's producer object after the object header (its `Handle` struct,
    unchanged through the 2.x releases); the library is the one the process mapped. Both are checked again by
    `DirectProducer` (the library must be loaded already, the handle a producer's) before it is used."""
    from confluent_kafka import libversion, version
    from mysqlcapture_native import DirectProducer

    found: object = version()  # a string in 2.16, (text, number) before
    release = str(found[0] if isinstance(found, tuple) else found)
    libraries = {line.split(None, 5)[5] for line in _maps() if "/librdkafka" in line and len(line.split(None, 5)) == 6}
    if not release.startswith("2.") or len(libraries) != 1:
        log.debug("queueing Kafka messages through produce_batch (confluent-kafka %s, librdkafka at %s)", release,
                  sorted(libraries))  # fmt: skip
        return None
    handle = ctypes.c_void_p.from_address(id(producer) + object.__basicsize__).value
    try:
        direct = DirectProducer(libraries.pop(), handle or 0)
    except ValueError as exc:
        log.debug("queueing Kafka messages through produce_batch: %s", exc)
        return None
    log.debug("queueing Kafka messages on %s (librdkafka %s)", direct.name, libversion()[0])
    return direct


def _maps() -> list[str]:
    """The process's mapped files (/proc/self/maps), one line each; none where there is no /proc."""
    try:
        with open("/proc/self/maps") as f:
            return [line.rstrip("\n") for line in f]
    except OSError:
        return []


def init_transactions(producer: Any, timeout: float) -> None:
    """The producer's transactions begun (an older producer of the capture fenced, what it left open ended), asked
    again while the brokers say the refusal passes: CONCURRENT_TRANSACTIONS, when the coordinator is still ending the
    transaction of the worker this one replaces (a worker restarted right after a commit not acknowledged in time
    met it during a broker's restart). Until `timeout` seconds in all; then the last refusal is raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            producer.init_transactions(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not (isinstance(error, KafkaError) and error.retriable()) or time.monotonic() + 0.5 >= deadline:
                raise
            log.info("the Kafka brokers refused the producer's start for now (%s): asking again", _reason(exc))
            time.sleep(0.5)


def _reason(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else str(exc)


def _refused(exc: KafkaException, e: ChangeEvent, key: bytes | str) -> str:
    where = f"{e.database}.{e.table}" if e.table else e.database
    return f"Kafka refused a message of {where} (key {_shown(key)}): {_reason(exc)}"


def _shown(key: bytes | str) -> str:
    """A message key as an error shows it: text, cut at 200 characters."""
    text = key.decode(errors="replace") if isinstance(key, bytes) else key
    return text if len(text) <= 200 else text[:200] + "..."


def _unreachable(spec: KafkaSpec, errors: Sequence[KafkaError], waited: float) -> tuple[str, str]:
    """(one line, condition reason) for brokers that cannot be reached: librdkafka's last error and what to check."""
    last = next((e for e in reversed(errors) if e.code() != KafkaError._ALL_BROKERS_DOWN), None)
    last = last or (errors[-1] if errors else None)
    said = last.str() if last is not None else "no answer"
    code = last.code() if last is not None else None
    if code == KafkaError._AUTHENTICATION:
        reason, fix = (
            "KafkaAuthFailed",
            "check spec.sink.kafka.sasl: mechanism, username and the password passwordFrom gives",
        )
    elif code == KafkaError._SSL:
        reason, fix = (
            "KafkaTlsFailed",
            "check spec.sink.kafka.tls: caFrom must hold the CA that signed the brokers' certificates",
        )
    else:
        reason, fix = (
            "KafkaUnreachable",
            (
                f"no broker answered within {waited:.0f} s: check spec.sink.kafka.bootstrapServers, that the brokers "
                "are up, and that tls and sasl match their listener"
            ),
        )
    return f"cannot reach the Kafka brokers at {spec.bootstrap_servers} ({said}): {fix}", reason


def dead_letter(e: ChangeEvent, *, topic: str, partition: int, size: int, limit: int) -> bytes:
    """The record of a message over maxMessageBytes: where its row is in the binlog (Maxwell's position, the GTID,
    the transaction's start and the row's index in it, the capture's order key) and where it would have gone; never
    its values."""
    record = {
        "database": e.database,
        "table": e.table,
        "type": e.type,
        "ts": e.ts,
        "xid": e.xid,
        "server_id": e.server_id,
        "gtid": e.gtid,
        "position": f"{e.binlog_file}:{e.event_pos}",
        "transaction_position": f"{e.binlog_file}:{e.binlog_pos}",
        "row_index": e.row_index,
        "_order_key": e.order_key,
        "topic": topic,
        "partition": partition,
        "bytes": size,
        "max_message_bytes": limit,
    }
    return json.dumps(record, separators=(",", ":")).encode()
