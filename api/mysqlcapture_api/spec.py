"""Pydantic models of the MySQLCapture spec: field names, types, limits, defaults and descriptions."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

_PATTERN = re.compile(r"^[^.\s]+\.[^.\s]+$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel)


class SecretKeyRef(_Model):
    name: str = Field(description="Name of a Secret in the capture's namespace.")
    key: str = Field(description="Key within the Secret.")


class PasswordFrom(_Model):
    env: str | None = Field(default=None, description="Name of an environment variable holding the password.")
    file: str | None = Field(default=None, description="Path of a file holding the password (trailing newline ignored).")
    secret_key_ref: SecretKeyRef | None = Field(default=None, description="A Kubernetes Secret key holding the password.")

    @model_validator(mode="after")
    def _exactly_one(self) -> PasswordFrom:
        if sum(v is not None for v in (self.env, self.file, self.secret_key_ref)) != 1:
            raise ValueError("set exactly one of env, file, secretKeyRef")
        return self


class Tls(_Model):
    mode: Literal["disabled", "preferred", "required", "verify-ca", "verify-identity"] = Field(
        default="preferred", description="TLS to the source: disabled, preferred, required, verify-ca, verify-identity."
    )
    ca_file: str | None = Field(default=None, description="CA bundle path for verify-ca / verify-identity.")


class Source(_Model):
    host: str = Field(min_length=1, description="Host name or address of the MySQL/MariaDB server.")
    port: int = Field(default=3306, ge=1, le=65535, description="TCP port of the server.")
    user: str = Field(min_length=1, description="User with REPLICATION SLAVE, REPLICATION CLIENT and SELECT.")
    password_from: PasswordFrom = Field(description="Where the user's password comes from.")
    tls: Tls = Field(default_factory=Tls, description="TLS settings.")
    server_id: int = Field(ge=1, le=4294967295, description="The worker's own replica server_id; unique in the topology.")
    flavor: Literal["auto", "mysql", "mariadb"] = Field(default="auto", description="Server flavor; auto detects it.")
    connect_timeout_seconds: int = Field(default=10, ge=1, le=600, description="Connect timeout in seconds.")


class Tables(_Model):
    include: list[str] = Field(default_factory=lambda: ["*.*"], description="Glob patterns `db.table` to capture.")
    exclude: list[str] = Field(default_factory=list, description="Glob patterns `db.table` to skip; win over include.")

    @model_validator(mode="after")
    def _patterns(self) -> Tables:
        for pattern in [*self.include, *self.exclude]:
            if not _PATTERN.match(pattern):
                raise ValueError(f"table pattern {pattern!r} must look like db.table (globs allowed, one dot)")
        return self


class Start(_Model):
    from_: Literal["earliest", "latest", "gtid", "position"] = Field(
        default="earliest", alias="from", description="Where a new capture starts: earliest, latest, gtid or position."
    )
    gtid_set: str | None = Field(default=None, description="GTID set to start after (from: gtid).")
    binlog_file: str | None = Field(default=None, description="Binlog file name (from: position).")
    binlog_position: int | None = Field(default=None, ge=4, description="Byte offset in binlogFile (from: position).")

    @model_validator(mode="after")
    def _required(self) -> Start:
        if self.from_ == "gtid" and not self.gtid_set:
            raise ValueError("from: gtid needs gtidSet")
        if self.from_ == "position" and (self.binlog_file is None or self.binlog_position is None):
            raise ValueError("from: position needs binlogFile and binlogPosition")
        return self


class DeltaSinkSpec(_Model):
    uri: str = Field(min_length=1, description="Change log location: a local path or an s3:// URI.")
    storage_options: dict[str, str] = Field(default_factory=dict, description="delta-rs storage options.")


class JsonlSinkSpec(_Model):
    path: str = Field(default="-", description="Output file for Maxwell JSON lines; '-' is stdout.")


class Sink(_Model):
    type: Literal["delta", "jsonl"] = Field(default="delta", description="delta (the change log) or jsonl.")
    delta: DeltaSinkSpec | None = Field(default=None, description="Delta Lake change log settings.")
    jsonl: JsonlSinkSpec | None = Field(default=None, description="JSON lines settings.")

    @model_validator(mode="after")
    def _required(self) -> Sink:
        if self.type == "delta" and self.delta is None:
            raise ValueError("type: delta needs delta.uri")
        return self


class Flush(_Model):
    max_events: int = Field(default=50000, ge=1, description="Commit once this many events are pending.")
    max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, description="Commit once pending events reach this many bytes.")
    max_interval_ms: int = Field(default=1000, ge=10, description="Commit pending events at least this often, in milliseconds.")


class Heartbeat(_Model):
    interval_seconds: int = Field(default=10, ge=0, description="Seconds between heartbeat writes; 0 disables.")
    database: str = Field(default="mysqlcapture", description="Metadata database on the source for heartbeats.")


class Snapshot(_Model):
    mode: Literal["initial", "never", "when-needed"] = Field(default="initial", description="Initial snapshot policy.")
    chunk_rows: int = Field(default=10000, ge=1, description="Rows per snapshot chunk.")


class Failover(_Model):
    enabled: bool = Field(default=True, description="Follow a server_id change to the new server.")
    on_purged: Literal["fail", "resnapshot"] = Field(default="fail", description="What to do when needed binlogs are gone.")


class Metrics(_Model):
    port: int = Field(default=9187, ge=0, le=65535, description="Port of /metrics, /healthz and /readyz (0: any).")


class Compaction(_Model):
    schedule: str = Field(default="*/15 * * * *", description="Cron schedule of the compaction job.")
    output_uri: str | None = Field(default=None, description="Where current-state tables are written.")
    retention_hours: int = Field(default=168, ge=1, description="Hours of compacted change log to keep before VACUUM.")
    image: str | None = Field(default=None, description="Spark image for the compaction job.")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="Extra Spark configuration.")


class Resources(_Model):
    requests: dict[str, str] = Field(default_factory=dict, description="Resource requests (cpu, memory).")
    limits: dict[str, str] = Field(default_factory=dict, description="Resource limits (cpu, memory).")


class MySQLCaptureSpec(_Model):
    source: Source = Field(description="The server to capture.")
    tables: Tables = Field(default_factory=Tables, description="Which tables to capture.")
    start: Start = Field(default_factory=Start, description="Where a new capture starts.")
    sink: Sink = Field(description="Where change events go.")
    flush: Flush = Field(default_factory=Flush, description="Sink commit limits.")
    heartbeat: Heartbeat = Field(default_factory=Heartbeat, description="Heartbeat writes to the source.")
    snapshot: Snapshot = Field(default_factory=Snapshot, description="Initial snapshot.")
    failover: Failover = Field(default_factory=Failover, description="Failover and purge policy.")
    metrics: Metrics = Field(default_factory=Metrics, description="Metrics endpoint.")
    compaction: Compaction = Field(default_factory=Compaction, description="Spark compaction.")
    paused: bool = Field(default=False, description="Scale the worker to zero.")
    resources: Resources | None = Field(default=None, description="Worker container resources.")
    worker_image: str | None = Field(default=None, description="Worker image override.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(default="info", description="Worker log level.")


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$", max_length=253)
    namespace: str | None = None


class MySQLCapture(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    api_version: Literal["cdc.mysqlcapture.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["MySQLCapture"]
    metadata: Metadata
    spec: MySQLCaptureSpec
    status: dict[str, object] | None = None
