"""Where change events go: the Delta change log, Maxwell JSON lines, or Maxwell's JSON on Kafka topics."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mysqlcapture_api.base import Model, Rule
from mysqlcapture_api.source import SecretFrom


def _needed_when(choice: tuple[str, str], value: str, needed: tuple[str, str], message: str) -> Rule:
    """`needed` (attribute, manifest name) must be set when `choice` is `value`."""
    return Rule(
        holds=lambda m: getattr(m, choice[0]) != value or getattr(m, needed[0]) is not None,
        cel=f"self.{choice[1]} != '{value}' || has(self.{needed[1]})",
        message=message,
        field=needed[1],
    )


def _only_when(choice: tuple[str, str], value: str, block: tuple[str, str]) -> Rule:
    """`block` (attribute, manifest name) may be set only when `choice` is `value`: a leftover block of another
    sink would otherwise be ignored without a word."""
    return Rule(
        holds=lambda m: getattr(m, choice[0]) == value or getattr(m, block[0]) is None,
        cel=f"self.{choice[1]} == '{value}' || !has(self.{block[1]})",
        message=f"{block[1]} is set but {choice[1]} is not {value}: remove {block[1]}, or set {choice[1]}: {value}",
        field=block[1],
    )


SinkType = Literal["delta", "jsonl", "kafka"]
"""spec.sink.type."""
PartitionBy = Literal["database", "table", "primaryKey", "transactionId", "threadId", "column", "random"]
"""spec.sink.kafka.partitionBy."""


class DeltaSink(Model):
    """The Delta Lake change log."""

    uri: str = Field(
        min_length=1,
        description="Location of the change log table: a local path or an s3:// URI.",
    )
    storage_options: dict[str, str] = Field(
        default={},
        description=(
            "delta-rs storage options (e.g. AWS_REGION, AWS_ENDPOINT_URL); prefer the worker's environment "
            "for credentials. Default: {}."
        ),
    )


def _maxwell_flag(default: bool, what: str) -> bool:
    return Field(
        default=default, description=f"{what} (Maxwell's option of the same name). Default: {str(default).lower()}."
    )


class MaxwellOutput(Model):
    """Maxwell's output options, with Maxwell's defaults: which fields a change event's JSON has."""

    output_binlog_position: bool = _maxwell_flag(False, "Add 'position': the binlog file and the event's start")
    output_gtid_position: bool = _maxwell_flag(False, "Add 'gtid': the transaction's GTID")
    output_commit_info: bool = _maxwell_flag(True, "Add 'xid' and 'commit'")
    output_xoffset: bool = _maxwell_flag(True, "Add 'xoffset', the row's offset in its transaction (with xid)")
    output_nulls: bool = _maxwell_flag(True, "Keep NULL columns in 'data' and 'old'")
    output_server_id: bool = _maxwell_flag(False, "Add 'server_id'")
    output_thread_id: bool = _maxwell_flag(False, "Add 'thread_id'")
    output_primary_keys: bool = _maxwell_flag(False, "Add 'primary_key', the row's key values")
    output_primary_key_columns: bool = _maxwell_flag(False, "Add 'primary_key_columns'")
    output_ddl: bool = _maxwell_flag(False, "Write DDL events (database-* and table-*)")
    output_order_key: bool = Field(
        default=False,
        description="Add '_order_key', the capture's total order of events (not a Maxwell field). Default: false.",
    )
    output_truncate: bool = Field(
        default=False,
        description="Write each TRUNCATE TABLE as a 'table-truncate' line (not a Maxwell event: Maxwell writes "
        "nothing for it, so a consumer's copy keeps the rows it removed). Default: false.",
    )


class JsonlSink(MaxwellOutput):
    """Maxwell-compatible JSON lines. The output options are Maxwell's, with Maxwell's defaults."""

    path: str = Field(
        default="-",
        min_length=1,
        description="File the JSON lines are appended to; '-' is standard output. Default: '-'.",
    )


# Producer settings a Kafka sink sets itself: changed, they would break what it promises (each event once, in order),
# or they have a field of their own (the connection's security, the size limit).
KAFKA_OWN_SETTINGS = ("transactional.id", "enable.idempotence", "acks", "isolation.level", "bootstrap.servers")
KAFKA_FIELD_SETTINGS = {
    "security.protocol": "tls and sasl",
    "sasl.mechanism": "sasl.mechanism",
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.username": "sasl.username",
    "sasl.password": "sasl.passwordFrom",
    "ssl.ca.location": "tls.caFrom",
    "ssl.ca.pem": "tls.caFrom",
    "enable.ssl.certificate.verification": "tls.verifyCertificate",
    "ssl.endpoint.identification.algorithm": "tls.verifyHostname",
    "message.max.bytes": "maxMessageBytes",
}
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
"""spec.sink.kafka.sasl.mechanism."""


class KafkaTls(Model):
    """TLS to the brokers (security.protocol SSL, or SASL_SSL with sasl)."""

    ca_from: SecretFrom | None = Field(
        default=None,
        description="The CA certificates (PEM) the brokers' certificates are checked against: env, file or "
        "secretKeyRef, as passwordFrom. Default: the system's trusted CAs.",
    )
    verify_certificate: bool = Field(
        default=True,
        description="Check the brokers' certificates against the CAs; false encrypts without checking who "
        "answers (for tests only). Default: true.",
    )
    verify_hostname: bool = Field(
        default=True,
        description="Check that a broker's certificate names the host it was reached at. Default: true.",
    )


class KafkaSasl(Model):
    """SASL authentication to the brokers (security.protocol SASL_PLAINTEXT, or SASL_SSL with tls)."""

    mechanism: SaslMechanism = Field(description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.")
    username: str = Field(min_length=1, description="The user the capture authenticates as.")
    password_from: SecretFrom = Field(
        description="Where the user's password comes from: env, file or secretKeyRef, as spec.source.passwordFrom. "
        "It is read when the worker starts its producer."
    )


class KafkaTopics(Model):
    """How the sink creates a topic it writes that does not exist yet."""

    partitions: int = Field(ge=1, le=10000, description="Partitions of each topic the sink creates.")
    replication_factor: int = Field(
        default=-1,
        ge=-1,
        le=32,
        description="Replicas of each partition; -1: the brokers' default.replication.factor. Default: -1.",
    )


OversizedPolicy = Literal["fail", "deadLetter"]
"""spec.sink.kafka.oversized."""


class KafkaSink(MaxwellOutput):
    """Maxwell's JSON values on Kafka topics, with Maxwell's keys, topics and partitions, each event exactly once
    (Kafka transactions; the checkpoint is written in the same transaction)."""

    bootstrap_servers: str = Field(min_length=1, description="The brokers to connect to: host:port[,host:port...].")
    schema_history_uri: str = Field(
        min_length=1,
        description="Where the capture keeps its schema history (the table definitions at each DDL, which decode "
        "rows written before a later ALTER and name tables dropped since a restart): a Delta table, a local path "
        "or an s3:// URI (credentials from the worker's environment). On a cluster, use s3:// or a persistent "
        "volume.",
    )
    topic: str = Field(
        default="maxwell",
        min_length=1,
        description="Topic of row events; %{database}, %{table} and %{type} are replaced by the event's. "
        "Default: maxwell.",
    )
    ddl_topic: str | None = Field(
        default=None,
        min_length=1,
        description="Topic of DDL events (with outputDdl), taken as written (no substitution). Default: topic.",
    )
    partition_by: PartitionBy = Field(
        default="database",
        description="What picks a row's partition (Maxwell's producer_partition_by): database, table, primaryKey, "
        "transactionId, threadId, column (partitionColumns' values) or random. Default: database.",
    )
    partition_columns: list[str] = Field(
        default=[],
        max_length=64,
        description="Columns whose values pick the partition when partitionBy is column. Default: none.",
    )
    partition_by_fallback: Literal["database", "table", "primaryKey", "transactionId", "threadId", "random"] = Field(
        default="database",
        description="What picks the partition of a row none of partitionColumns has a value in. Default: database.",
    )
    partition_hash: Literal["default", "murmur3"] = Field(
        default="default",
        description="The hash of the partition string: default (Java's String.hashCode) or murmur3. Default: default.",
    )
    key_format: Literal["hash", "array"] = Field(
        default="hash",
        description='Message keys as Maxwell writes them: hash ({"database":..,"table":..,"pk.id":..}) or array. '
        "Default: hash.",
    )
    exactly_once: bool = Field(
        default=True,
        description="Each commit's events and its checkpoint in one Kafka transaction (consumers read with "
        "isolation.level read_committed see each event once); false: an idempotent producer, the checkpoint "
        "written after the events are acknowledged (a crash between them repeats those events). Default: true.",
    )
    checkpoint_topic: str = Field(
        default="mysqlcapture-checkpoints",
        min_length=1,
        description="Compacted topic holding each capture's position, written in the transaction of its events "
        "(created with one partition when missing). Default: mysqlcapture-checkpoints.",
    )
    transaction_timeout_ms: int = Field(
        default=60000,
        ge=1000,
        le=900000,
        description="How long a commit's transaction may stay open (the broker's transaction.max.timeout.ms "
        "caps it). Default: 60000.",
    )
    producer_config: dict[str, str] = Field(
        default={},
        max_length=64,
        description="librdkafka producer settings passed through (e.g. compression.type: zstd). The settings the "
        "sink sets itself (" + ", ".join(KAFKA_OWN_SETTINGS) + ") are refused, and so are those with a field of "
        "their own (" + ", ".join(KAFKA_FIELD_SETTINGS) + "). Default: {}.",
    )
    create_topics: KafkaTopics | None = Field(
        default=None,
        description="Create a missing topic (rows, DDL, dead letters) with these partitions and replicas, and "
        "max.message.bytes allowing maxMessageBytes. Default: none (the brokers create it when they allow it, "
        "with their defaults; otherwise the worker stops with one line naming the topic).",
    )
    confirmed_partitions: dict[str, int] = Field(
        default={},
        max_length=64,
        description="Partition counts a person has confirmed, by topic. A topic whose count changed since the "
        "capture's messages began (Maxwell's partition of a key follows the count, so a key's later messages could "
        "overtake its earlier ones) stops the worker until its new count is listed here. Default: {}.",
    )
    tls: KafkaTls | None = Field(
        default=None, description="TLS to the brokers; set (even as {}) to encrypt. Default: no TLS."
    )
    sasl: KafkaSasl | None = Field(default=None, description="SASL authentication. Default: none.")
    max_message_bytes: int = Field(
        default=1000000,
        ge=1024,
        le=1000000000,
        description="The largest message (key and value) the sink writes; the topic's max.message.bytes on the "
        "brokers must allow it (their default, 1048588, allows the default). Default: 1000000.",
    )
    oversized: OversizedPolicy = Field(
        default="fail",
        description="A message over maxMessageBytes: fail (the worker stops with one line naming the table, key "
        "and size; nothing after it is written) or deadLetter (a record of it, its key and its binlog "
        "coordinates, goes to deadLetterTopic in the same transaction, and the capture goes on). Default: fail.",
    )
    dead_letter_topic: str | None = Field(
        default=None,
        min_length=1,
        description="Topic of the records of oversized messages; required with oversized: deadLetter.",
    )

    rules = (
        Rule(
            holds=lambda k: k.partition_by != "column" or len(k.partition_columns) > 0,
            cel="self.partitionBy != 'column' || size(self.partitionColumns) > 0",
            message="partitionBy column needs partitionColumns: name the columns whose values pick the partition",
            field="partitionColumns",
        ),
        Rule(
            holds=lambda k: not (k.output_ddl or k.output_truncate) or k.ddl_topic is not None or "%{" not in k.topic,
            cel="!(self.outputDdl || self.outputTruncate) || has(self.ddlTopic) || !self.topic.contains('%{')",
            message="DDL events go to ddlTopic as written (no substitution, as Maxwell does), and topic holds %{...}: "
            "set ddlTopic",
            field="ddlTopic",
        ),
        Rule(
            holds=lambda k: not any(key in k.producer_config for key in KAFKA_OWN_SETTINGS),
            cel="!(" + " || ".join(f"'{key}' in self.producerConfig" for key in KAFKA_OWN_SETTINGS) + ")",
            message="the sink sets " + ", ".join(KAFKA_OWN_SETTINGS) + " itself (exactly once, in order): remove "
            "them from producerConfig",
            field="producerConfig",
        ),
        Rule(
            holds=lambda k: not any(key in k.producer_config for key in KAFKA_FIELD_SETTINGS),
            cel="!(" + " || ".join(f"'{key}' in self.producerConfig" for key in KAFKA_FIELD_SETTINGS) + ")",
            message="producerConfig holds a setting that has a field of its own: security.protocol, sasl.* and ssl.* "
            "are set by tls and sasl (the password from sasl.passwordFrom, never in the manifest), message.max.bytes "
            "by maxMessageBytes",
            field="producerConfig",
        ),
        _needed_when(
            ("oversized", "oversized"),
            "deadLetter",
            ("dead_letter_topic", "deadLetterTopic"),
            "oversized: deadLetter needs deadLetterTopic, the topic the records of oversized messages go to",
        ),
    )


class Sink(Model):
    """Where change events go."""

    type: SinkType = Field(
        default="delta",
        description="delta (the Delta Lake change log), jsonl (Maxwell JSON lines) or kafka (Maxwell's JSON on "
        "Kafka topics). Default: delta.",
    )
    delta: DeltaSink | None = Field(
        default=None,
        description="Delta Lake settings; required when type is delta.",
    )
    jsonl: JsonlSink | None = Field(default=None, description="JSON lines settings. Default: path '-'.")
    kafka: KafkaSink | None = Field(default=None, description="Kafka settings; required when type is kafka.")

    rules = (
        _needed_when(("type", "type"), "delta", ("delta", "delta"), "required when type is delta: set delta.uri"),
        _needed_when(
            ("type", "type"), "kafka", ("kafka", "kafka"), "required when type is kafka: set kafka.bootstrapServers"
        ),
        *(_only_when(("type", "type"), kind, (kind, kind)) for kind in ("delta", "jsonl", "kafka")),
    )
