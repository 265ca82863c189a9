"""The worker's runtime settings, derived from a MySQLCapture manifest (the one place that reads the spec)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mysqlcapture_api.columns import Columns
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.sinks import JsonlSink, KafkaSink, SinkType
from mysqlcapture_api.source import Flavor
from mysqlcapture_api.spec import FailoverMode, MySQLCapture, OnPurged, RowRule, SnapshotMode, StartFrom

from mysqlcapture_worker.column_rules import ColumnRules


class SettingsError(RuntimeError):
    """The manifest is valid but cannot be run here (for example a password that cannot be read). `reason`: the
    condition's reason the operator shows (which secret is missing)."""

    def __init__(self, message: str, reason: str = "PasswordNotFound") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class SourceSettings:
    """spec.source: the server captured and how to connect to it."""

    host: str
    """spec.source.host: host name or IP address of the source server."""
    port: int
    """spec.source.port: TCP port of the source server. Default (spec): 3306."""
    user: str
    """spec.source.user: the replication user."""
    password: str = field(repr=False)
    """spec.source.passwordFrom: the user's password as read at start (never printed)."""
    replica_server_id: int
    """spec.source.serverId: this worker's own replica server_id, unique in the topology."""
    flavor: Flavor = "auto"
    """spec.source.flavor: mysql, mariadb, or auto (detected at connect). Default: auto."""
    ssl: dict[str, Any] | None = None
    """spec.source.tls: PyMySQL's `ssl` argument (check_hostname, verify_mode, ca) for modes required,
    verify-ca and verify-identity; None for disabled and preferred. Default: None."""
    ssl_disabled: bool = False
    """spec.source.tls.mode disabled: PyMySQL otherwise tries TLS whenever the server offers it (its PREFERRED
    default). Default: False."""
    connect_timeout: float = 10.0
    """spec.source.connectTimeoutSeconds: connect timeout, in seconds. Default: 10.0."""
    password_file: str | None = None
    """spec.source.passwordFrom.file, or the Secret key the operator mounts: read again at each connection, so a
    rotated password needs no restart. Default: None (the password read at start is used)."""


@dataclass(frozen=True)
class TablesSettings:
    """spec.tables: which tables are captured."""

    include: tuple[str, ...] = ("*.*",)
    """spec.tables.include: `db.table` globs of the tables captured. Default: ("*.*",), every table."""
    exclude: tuple[str, ...] = ()
    """spec.tables.exclude: `db.table` globs of tables skipped; they win over include. Default: () (none)."""


@dataclass(frozen=True)
class StartSettings:
    """spec.start: where a capture without a checkpoint starts."""

    from_: StartFrom = "earliest"
    """spec.start.from: where a capture without a checkpoint starts (earliest, latest, gtid, position).
    Default: earliest."""
    gtid_set: str | None = None
    """spec.start.gtidSet: the GTID set already captured, when from_ is gtid. Default: None."""
    at: Coordinate | None = None
    """spec.start.binlogFile and binlogPosition: where to start, when from_ is position. Default: None."""


@dataclass(frozen=True)
class SinkSettings:
    """spec.sink: where change events go."""

    type: SinkType = "delta"
    """spec.sink.type: delta (the Delta Lake change log) or jsonl (Maxwell JSON lines). Default: delta."""
    delta_uri: str = ""
    """spec.sink.delta.uri: the change log's location, a local path or s3:// URI; "" when type is jsonl.
    Default: ""."""
    storage_options: dict[str, str] = field(default_factory=dict)
    """spec.sink.delta.storageOptions: delta-rs storage options. Default: {} (none)."""
    jsonl: JsonlSink = field(default_factory=JsonlSink)
    """spec.sink.jsonl: the JSON lines file and Maxwell's output options. Default: standard output, Maxwell's
    defaults."""
    kafka: KafkaSink | None = None
    """spec.sink.kafka: the brokers, Maxwell's topic, key and partition options and output options. Default: None
    (set when type is kafka)."""
    kafka_security: dict[str, str] = field(default_factory=dict, repr=False)
    """spec.sink.kafka.tls and .sasl as librdkafka settings, the password and CA read (never printed). Default: {}
    (plaintext)."""

    @property
    def schema_history_uri(self) -> str | None:
        """Where the schema history lives: beside the change log (a `_`-prefixed folder VACUUM leaves alone)."""
        if self.type == "delta":
            return self.delta_uri.rstrip("/") + "/_mysqlcapture_schema"
        if self.type == "kafka" and self.kafka is not None:
            return self.kafka.schema_history_uri
        if self.jsonl.path != "-":
            return self.jsonl.path + ".schema"
        return None


@dataclass(frozen=True)
class FlushSettings:
    """spec.flush: when the sink commits."""

    max_events: int = 50000
    """spec.flush.maxEvents: commit once this many events are pending. Default: 50000."""
    max_bytes: int = 64 * 1024 * 1024
    """spec.flush.maxBytes: commit once pending events take this many bytes. Default: 67108864 (64 MiB)."""
    interval_s: float = 1.0
    """spec.flush.maxIntervalMs, in seconds: commit pending events at least this often. Default: 1.0."""


@dataclass(frozen=True)
class HeartbeatSettings:
    """spec.heartbeat: the heartbeat writes to the source."""

    interval_s: float = 10.0
    """spec.heartbeat.intervalSeconds: seconds between heartbeat writes to the source; 0 disables them.
    Default: 10.0."""
    database: str = "mysqlcapture"
    """spec.heartbeat.database: the source database of the heartbeat and snapshot-request tables; never
    captured. Default: mysqlcapture."""


@dataclass(frozen=True)
class FailoverSettings:
    """spec.failover: following the source to a new server, and what to do when binlogs are purged."""

    enabled: bool = True
    """spec.failover.enabled: follow the source to a new server when its server_id changes. Default: True."""
    mode: FailoverMode = "auto"
    """spec.failover.mode: how the place to continue on a new server is found (auto, gtid, heartbeat).
    Default: auto."""
    on_purged: OnPurged = "fail"
    """spec.failover.onPurged: what happens when the binlogs the checkpoint needs are gone (fail, resnapshot).
    Default: fail."""
    purge_check_s: float = 15.0
    """Not in the spec: seconds between checks of how far the oldest binlog is from the checkpoint (purge
    headroom). Default: 15.0."""


@dataclass(frozen=True)
class SnapshotSettings:
    """spec.snapshot: copying the rows that exist before the capture starts."""

    mode: SnapshotMode = "initial"
    """spec.snapshot.mode: when existing rows are copied (initial, never, when-needed). Default: initial."""
    chunk_rows: int = 10000
    """spec.snapshot.chunkRows: rows read per snapshot chunk. Default: 10000."""
    parallelism: int = 4
    """spec.snapshot.parallelism: connections reading chunks at once. Default: 4."""
    max_buffered_rows: int = 200000
    """spec.snapshot.maxBufferedRows: rows read and not yet committed, over all connections. Default: 200000."""

    @property
    def rows_per_chunk(self) -> int:
        """chunkRows, cut so that `parallelism` reads in flight hold at most maxBufferedRows rows (a read takes up
        to two chunks' worth of a range that grew since it was cut: `snapshot.parallel`)."""
        return max(1, min(self.chunk_rows, self.max_buffered_rows // (2 * self.parallelism)))


@dataclass(frozen=True)
class MetricsSettings:
    """spec.metrics: the metrics and health endpoint."""

    port: int = 9187
    """spec.metrics.port: TCP port of /metrics, /status, /healthz and /readyz; 0 picks a free port (tests).
    Default: 9187."""


@dataclass(frozen=True)
class WorkerSettings:
    """Everything one worker run needs, in one group per section of the spec: built from a manifest by
    `settings_from_capture` (or by hand in a test or the demo). Each field's docstring names the spec field it
    comes from."""

    name: str
    """metadata.name: the capture's name; the worker's metrics, Delta application id and heartbeat client id."""
    source: SourceSettings
    """spec.source: the server captured and how to connect to it."""
    tables: TablesSettings = field(default_factory=TablesSettings)
    """spec.tables: which tables are captured. Default: every table."""
    start: StartSettings = field(default_factory=StartSettings)
    """spec.start: where a capture without a checkpoint starts. Default: from the earliest binlog."""
    sink: SinkSettings = field(default_factory=SinkSettings)
    """spec.sink: where change events go. Default: SinkSettings(), a delta sink whose uri must still be set."""
    flush: FlushSettings = field(default_factory=FlushSettings)
    """spec.flush: when the sink commits. Default: FlushSettings(), the spec's defaults."""
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    """spec.heartbeat: the heartbeat writes to the source. Default: HeartbeatSettings(), the spec's defaults."""
    failover: FailoverSettings = field(default_factory=FailoverSettings)
    """spec.failover: failover and purged-binlog policy. Default: FailoverSettings(), the spec's defaults."""
    snapshot: SnapshotSettings = field(default_factory=SnapshotSettings)
    """spec.snapshot: the initial snapshot. Default: SnapshotSettings(), the spec's defaults."""
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    """spec.metrics: the metrics and health endpoint. Default: MetricsSettings(), port 9187."""
    columns: ColumnRules | None = None
    """spec.columns: the column rules with their hash key read. Default: None (every column as it is)."""
    rows: tuple[RowRule, ...] = ()
    """spec.rows: the row filters. Default: () (every row)."""
    spill_dir: str | None = None
    """Not in the spec: directory where a large open transaction's rows spill to disk. Default: None (the
    system's temporary directory)."""


PASSWORD_FILE_VARIABLE = "MYSQLCAPTURE_SOURCE_PASSWORD_FILE"  # the Secret's key, mounted in the worker pod
PASSWORD_VARIABLE = "MYSQLCAPTURE_SOURCE_PASSWORD"  # or the password itself (a local run)


def read_secret(
    source: Any,
    env: dict[str, str] | None,
    *,
    where: str,
    file_variable: str,
    value_variable: str,
    reason: str = "PasswordNotFound",
) -> str:
    """A secret from `source` (exactly one of env, file, secret_key_ref, as `where` in the spec names it). The
    operator mounts a Secret's key as a file named in `file_variable` (the kubelet keeps it current, the operator
    never reads it); a local run may give the value itself in `value_variable`. One trailing newline is ignored.
    `reason`: the SettingsError's when it cannot be read."""
    env = dict(os.environ) if env is None else env
    if source.env:
        if source.env not in env:
            raise SettingsError(f"{where}.env: environment variable {source.env} is not set", reason)
        return str(env[source.env])
    if source.file:
        try:
            return Path(source.file).read_text().rstrip("\n")
        except OSError as exc:
            raise SettingsError(f"{where}.file: cannot read {source.file}: {exc}", reason) from exc
    ref = source.secret_key_ref
    path = env.get(file_variable)
    if path:
        try:
            return Path(path).read_text().rstrip("\n")
        except OSError as exc:
            raise SettingsError(
                f"{where}.secretKeyRef: Secret {ref.name!r} with key {ref.key!r} is not in the "
                f"capture's namespace: create it (kubectl create secret generic {ref.name} "
                f"--from-literal={ref.key}=...) or fix {where}.secretKeyRef",
                reason,
            ) from exc
    if value_variable in env:
        return str(env[value_variable])
    raise SettingsError(
        f"{where}.secretKeyRef ({ref.name}/{ref.key}) is mounted by the operator in the worker "
        f"pod; for a local run set {value_variable} or use {where.rsplit('.', 1)[-1]}.env",
        reason,
    )


def read_password(spec_password: Any, env: dict[str, str] | None = None) -> str:
    return read_secret(
        spec_password,
        env,
        where="spec.source.passwordFrom",
        file_variable=PASSWORD_FILE_VARIABLE,
        value_variable=PASSWORD_VARIABLE,
    )


def password_file(spec_password: Any, env: dict[str, str] | None = None) -> str | None:
    """The file the password is read from again at each connection (a rotated password needs no restart)."""
    env = dict(os.environ) if env is None else env
    if spec_password.file:
        return str(spec_password.file)
    if spec_password.secret_key_ref is not None:
        return env.get(PASSWORD_FILE_VARIABLE) or None
    return None


COLUMN_KEY_FILE_VARIABLE = "MYSQLCAPTURE_COLUMN_KEY_FILE"  # spec.columns.hash.keyFrom's Secret key, mounted
COLUMN_KEY_VARIABLE = "MYSQLCAPTURE_COLUMN_KEY"  # or the key itself (a local run)


def read_column_key(key_from: Any, env: dict[str, str] | None = None) -> bytes:
    """spec.columns.hash.keyFrom's key (never logged): a missing or empty one is one line naming where it was looked."""
    where = "spec.columns.hash.keyFrom"
    value = read_secret(
        key_from,
        env,
        where=where,
        file_variable=COLUMN_KEY_FILE_VARIABLE,
        value_variable=COLUMN_KEY_VARIABLE,
        reason="ColumnKeyNotFound",
    )
    if not value:
        raise SettingsError(f"{where}: the key it gives is empty: a hash key must not be empty", "ColumnKeyNotFound")
    return value.encode()


KAFKA_PASSWORD_FILE_VARIABLE = "MYSQLCAPTURE_KAFKA_PASSWORD_FILE"  # spec.sink.kafka.sasl.passwordFrom's Secret key
KAFKA_PASSWORD_VARIABLE = "MYSQLCAPTURE_KAFKA_PASSWORD"  # a local run's SASL password
KAFKA_CA_FILE_VARIABLE = "MYSQLCAPTURE_KAFKA_CA_FILE"  # spec.sink.kafka.tls.caFrom's Secret key, mounted
KAFKA_CA_VARIABLE = "MYSQLCAPTURE_KAFKA_CA"  # a local run's CA bundle (PEM)


def kafka_security(spec: KafkaSink | None, env: dict[str, str] | None = None) -> dict[str, str]:
    """spec.sink.kafka's tls and sasl as librdkafka settings for every client of the sink (producer, consumer,
    admin), with the password and the CA bundle read."""
    if spec is None:
        return {}
    out: dict[str, str] = {}
    tls, sasl = spec.tls, spec.sasl
    out["security.protocol"] = {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                                (True, True): "SASL_SSL"}[(tls is not None, sasl is not None)]  # fmt: skip
    if tls is not None:
        if tls.ca_from is not None:
            where = "spec.sink.kafka.tls.caFrom"
            ca = read_secret(
                tls.ca_from,
                env,
                where=where,
                file_variable=KAFKA_CA_FILE_VARIABLE,
                value_variable=KAFKA_CA_VARIABLE,
                reason="KafkaCaNotFound",
            )
            if "-----BEGIN CERTIFICATE-----" not in ca:
                raise SettingsError(f"{where}: the value it gives is not a PEM certificate bundle (-----BEGIN "
                                    "CERTIFICATE-----): give the CA certificates that signed the brokers'",
                                    "KafkaCaNotFound")  # fmt: skip
            out["ssl.ca.pem"] = ca
        out["enable.ssl.certificate.verification"] = "true" if tls.verify_certificate else "false"
        out["ssl.endpoint.identification.algorithm"] = "https" if tls.verify_hostname else "none"
    if sasl is not None:
        out["sasl.mechanism"] = sasl.mechanism
        out["sasl.username"] = sasl.username
        out["sasl.password"] = read_secret(
            sasl.password_from,
            env,
            where="spec.sink.kafka.sasl.passwordFrom",
            file_variable=KAFKA_PASSWORD_FILE_VARIABLE,
            value_variable=KAFKA_PASSWORD_VARIABLE,
            reason="KafkaPasswordNotFound",
        )
    return out


def column_rules(spec_columns: Columns, env: dict[str, str] | None = None) -> ColumnRules | None:
    """spec.columns compiled, with its hash key read; None when no rule is set."""
    if spec_columns.empty():
        return None
    if spec_columns.hash is None:
        return ColumnRules(spec_columns)
    key_from = spec_columns.hash.key_from
    reread = None
    if key_from.env is None:  # a file or a mounted Secret: a rotated key is picked up (`Committer`)
        reread = functools.partial(read_column_key, key_from, env)
    return ColumnRules(spec_columns, read_column_key(key_from, env), reread)


_TLS = {
    "disabled": None,
    "preferred": None,
    "required": {"check_hostname": False, "verify_mode": False},
    "verify-ca": {"check_hostname": False},
    "verify-identity": {"check_hostname": True},
}


def settings_from_capture(capture: MySQLCapture, env: dict[str, str] | None = None) -> WorkerSettings:
    spec = capture.spec
    src = spec.source
    ssl: dict[str, Any] | None = None
    mode = src.tls.mode
    if _TLS.get(mode) is not None:
        ssl = dict(_TLS[mode] or {})
        if src.tls.ca_file:
            ssl["ca"] = src.tls.ca_file
    start = spec.start
    sink = spec.sink
    tables, columns, rows = spec.effective()  # spec.maxwell's filters converted in
    return WorkerSettings(
        name=capture.metadata.name,
        source=SourceSettings(
            host=src.host,
            port=src.port,
            user=src.user,
            password=read_password(src.password_from, env),
            password_file=password_file(src.password_from, env),
            replica_server_id=src.server_id,
            flavor=src.flavor,
            ssl=ssl,
            ssl_disabled=mode == "disabled",
            connect_timeout=float(src.connect_timeout_seconds),
        ),
        tables=TablesSettings(include=tuple(tables.include), exclude=tuple(tables.exclude)),
        start=StartSettings(
            from_=start.from_,
            gtid_set=start.gtid_set,
            at=(
                Coordinate(start.binlog_file, start.binlog_position)
                if start.binlog_file is not None and start.binlog_position is not None
                else None
            ),
        ),
        sink=SinkSettings(
            type=sink.type,
            delta_uri=sink.delta.uri if sink.delta is not None else "",
            storage_options=dict(sink.delta.storage_options) if sink.delta is not None else {},
            jsonl=sink.jsonl if sink.jsonl is not None else JsonlSink(),
            kafka=sink.kafka,
            kafka_security=kafka_security(sink.kafka if sink.type == "kafka" else None, env),
        ),
        flush=FlushSettings(
            max_events=spec.flush.max_events,
            max_bytes=spec.flush.max_bytes,
            interval_s=spec.flush.max_interval_ms / 1000.0,
        ),
        heartbeat=HeartbeatSettings(
            interval_s=float(spec.heartbeat.interval_seconds), database=spec.heartbeat.database
        ),
        failover=FailoverSettings(
            enabled=spec.failover.enabled, mode=spec.failover.mode, on_purged=spec.failover.on_purged
        ),
        snapshot=SnapshotSettings(
            mode=spec.snapshot.mode,
            chunk_rows=spec.snapshot.chunk_rows,
            parallelism=spec.snapshot.parallelism,
            max_buffered_rows=spec.snapshot.max_buffered_rows,
        ),
        metrics=MetricsSettings(port=spec.metrics.port),
        columns=column_rules(columns, env),
        rows=rows,
    )
