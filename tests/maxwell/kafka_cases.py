"""The Kafka settings real Maxwell's Kafka producer was recorded with (record_kafka.py) and the Kafka sink is
compared under (tests/integration/test_maxwell_kafka_compat.py): each case is Maxwell's flags and the same settings
in `spec.sink.kafka`, its own topics, on topics of PARTITIONS partitions. Every case carries the compatibility
workload's output options (workload.OUTPUT_OPTIONS).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.kafka.broker import read_topics, topics
from tests.maxwell.workload import DB

PARTITIONS = 5  # of every topic the broker creates (num.partitions): a prime, so that partitions spread


@dataclass(frozen=True)
class KafkaCase:
    name: str
    maxwell: dict[str, str]  # Maxwell's flags, without the leading --
    sink: dict[str, object]  # the same in spec.sink.kafka
    # Partitioning by a value that differs from run to run (a transaction or connection id): the partition is
    # checked against the value's own field in each message instead of Maxwell's recorded partition.
    volatile_by: str | None = None

    def owns(self, topic: str) -> bool:
        """Whether this case's Maxwell (or sink) writes `topic`: its row topic, %{...} matching any name, or its
        DDL topic."""
        rows = re.escape(str(self.sink["topic"])).replace(re.escape("%{database}"), "[^-]+")
        rows = rows.replace(re.escape("%{table}"), ".+")
        return re.fullmatch(rows, topic) is not None or topic == self.sink.get("ddlTopic")

    def row_topic(self, database: str, table: str) -> str:
        """Where a row of `database`.`table` goes."""
        return str(self.sink["topic"]).replace("%{database}", database).replace("%{table}", table)


CASES = [
    KafkaCase("database", {"kafka_topic": "mx-database"}, {"topic": "mx-database"}),
    KafkaCase(
        "table",
        {"kafka_topic": "mx-%{database}-%{table}", "ddl_kafka_topic": "mx-table-ddl", "producer_partition_by": "table"},
        {"topic": "mx-%{database}-%{table}", "ddlTopic": "mx-table-ddl", "partitionBy": "table"},
    ),
    KafkaCase(
        "primary-key-murmur3-array",
        {
            "kafka_topic": "mx-pk",
            "producer_partition_by": "primary_key",
            "kafka_partition_hash": "murmur3",
            "kafka_key_format": "array",
        },
        {"topic": "mx-pk", "partitionBy": "primaryKey", "partitionHash": "murmur3", "keyFormat": "array"},
    ),
    KafkaCase(
        "column",
        {
            "kafka_topic": "mx-column",
            "producer_partition_by": "column",
            "producer_partition_columns": "v,b",
            "producer_partition_by_fallback": "primary_key",
        },
        {
            "topic": "mx-column",
            "partitionBy": "column",
            "partitionColumns": ["v", "b"],
            "partitionByFallback": "primaryKey",
        },
    ),
    KafkaCase(
        "transaction-id",
        {"kafka_topic": "mx-xid", "producer_partition_by": "transaction_id"},
        {"topic": "mx-xid", "partitionBy": "transactionId"},
        volatile_by="xid",
    ),
    KafkaCase(
        "thread-id",
        {"kafka_topic": "mx-thread", "producer_partition_by": "thread_id"},
        {"topic": "mx-thread", "partitionBy": "threadId"},
        volatile_by="thread_id",
    ),
]


Message = dict[str, object]  # {"topic", "partition", "offset", "key", "value"}, key and value as text


def workload_messages(bootstrap: str, *, committed: bool = True) -> list[Message]:
    """Every message of the workload's database on the broker, topic by topic, each partition in its order (once the
    writers have stopped: every transaction decided); `committed=False`: every one in the log, aborted ones too."""
    return [
        {
            "topic": topic,
            "partition": m.partition(),
            "offset": m.offset(),
            "key": m.key().decode(),
            "value": m.value().decode(),
        }
        for topic, messages in read_topics(bootstrap, topics(bootstrap), settled=True, committed=committed).items()
        for m in messages
        if f'"database":"{DB}"'.encode() in m.value()
    ]


def recording(flavor: str) -> str:
    """The recording's file name, next to this file."""
    return f"maxwell-1.44.1-kafka-{flavor}.jsonl"
