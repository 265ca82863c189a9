"""The MySQLCapture resource: its spec (the worker's whole configuration), names, types, limits, defaults."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from mysqlcapture_api.base import Model, Rule
from mysqlcapture_api.columns import Columns
from mysqlcapture_api.maxwell_filter import Converted, MaxwellFilterError
from mysqlcapture_api.maxwell_filter import convert as convert_maxwell
from mysqlcapture_api.row_predicate import PredicateError
from mysqlcapture_api.row_predicate import parse as parse_predicate
from mysqlcapture_api.sinks import Sink
from mysqlcapture_api.source import Source
from mysqlcapture_api.status import MySQLCaptureStatus

GROUP = "cdc.mysqlcapture.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "MySQLCapture"
PLURAL = "mysqlcaptures"
SINGULAR = "mysqlcapture"
SHORT_NAME = "mcap"

# One unbracketed dot between two non-empty globs; a dot inside [...] is part of a name.
TABLE_PATTERN = r"^(?:[^.\[\]]|\[[^\]]+\])+\.(?:[^.\[\]]|\[[^\]]+\])+$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _cron_field(number: str, names: str = "") -> str:
    """One cron field: items (`*`, a value, a range a-b; each with an optional /step) joined by commas."""
    value = f"(?:{number}{'|' + names if names else ''})"
    item = rf"(?:\*|{value}(?:-{value})?)(?:/[0-9]+)?"
    return rf"{item}(?:,{item})*"


_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"
# Five fields, each within its range (minute hour day-of-month month day-of-week), or a macro.
CRON = (
    r"(?i)^(?:@(?:yearly|annually|monthly|weekly|daily|hourly)|"
    + r"\s+".join(
        [
            _cron_field("[0-5]?[0-9]"),
            _cron_field("[01]?[0-9]|2[0-3]"),
            _cron_field("0?[1-9]|[12][0-9]|3[01]"),
            _cron_field("0?[1-9]|1[0-2]", _MONTHS),
            _cron_field("[0-7]", _DAYS),
        ]
    )
    + r")$"
)
CRON_MESSAGE = (
    "not a cron schedule: five fields, minute (0-59) hour (0-23) day-of-month (1-31) month (1-12 or jan-dec) "
    "day-of-week (0-7 or sun-sat), each *, a value, a range a-b or a list a,b (with /step), e.g. '*/15 * * * *' "
    "or '30 2 * * mon-fri'; or @hourly, @daily, @weekly, @monthly, @yearly"
)
TABLE_MESSAGE = (
    "not a db.table pattern: it needs exactly one '.' outside [...] with a glob on each side, e.g. 'shop.*' or "
    "'*.orders'"
)


def _checked(regex: str, message: str, max_length: int) -> dict[str, object]:
    """A string's CRD schema: the regex as a CEL rule with a message for people, not the regex as `pattern`."""
    return {
        "type": "string",
        "maxLength": max_length,
        "x-kubernetes-validations": [{"rule": f"self.matches(r'{regex}')", "message": message}],
    }


# Bounds the API server needs to estimate the cost of the CEL rules (a list of unbounded strings has no bound).
MAX_GLOBS = 64
MAX_GLOB = 128


def _table_pattern(value: str) -> str:
    if len(value) > MAX_GLOB or not re.fullmatch(TABLE_PATTERN, value):
        raise PydanticCustomError(
            "table_pattern", "'{pattern}' is {message}", {"pattern": value, "message": TABLE_MESSAGE}
        )
    return value


def _cron(value: str) -> str:
    if len(value) > 100 or not re.fullmatch(CRON, value):
        raise PydanticCustomError("cron", "'{schedule}' is {message}", {"schedule": value, "message": CRON_MESSAGE})
    return value


# The spec's choices, named so the worker's settings carry the same types (`mysqlcapture_worker.settings`).
StartFrom = Literal["earliest", "latest", "gtid", "position"]
"""spec.start.from."""
SnapshotMode = Literal["initial", "never", "when-needed"]
"""spec.snapshot.mode."""
FailoverMode = Literal["auto", "gtid", "heartbeat"]
"""spec.failover.mode."""
OnPurged = Literal["fail", "resnapshot"]
"""spec.failover.onPurged."""

TablePattern = Annotated[
    str, AfterValidator(_table_pattern), WithJsonSchema(_checked(TABLE_PATTERN, TABLE_MESSAGE, MAX_GLOB))
]
CronSchedule = Annotated[str, AfterValidator(_cron), WithJsonSchema(_checked(CRON, CRON_MESSAGE, 100))]


class Tables(Model):
    """Which tables are captured, as `db.table` globs (*, ?, [...]); the server's own schemas never are."""

    include: tuple[TablePattern, ...] = Field(
        default=("*.*",),
        max_length=MAX_GLOBS,
        description="Globs of tables to capture, e.g. 'shop.*'. Default: ['*.*'] (every table).",
    )
    exclude: tuple[TablePattern, ...] = Field(
        default=(),
        max_length=MAX_GLOBS,
        description="Globs of tables to skip; they win over include. Default: [] (none).",
    )


def _predicate(value: str) -> str:
    try:
        parse_predicate(value)
    except PredicateError as exc:
        context = {"predicate": value, "message": str(exc)}
        raise PydanticCustomError("predicate", "'{predicate}': {message}", context) from exc
    return value


Predicate = Annotated[
    str,
    AfterValidator(_predicate),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": 1000}),
]


class RowRule(Model):
    """Which rows of matching tables leave the database: Maxwell's value filters, as simple predicates."""

    table: TablePattern = Field(description="A db.table glob, as in spec.tables.")
    exclude: Predicate | None = Field(
        default=None,
        description="Rows for which this holds are left out, e.g. \"kind = 'debug'\" (see README for the grammar).",
    )
    include: Predicate | None = Field(
        default=None, description="Only rows for which this holds are written, e.g. 'tenant_id = 42'."
    )

    rules = (
        Rule(
            holds=lambda r: (r.exclude is None) != (r.include is None),
            cel="has(self.exclude) != has(self.include)",
            message="set exactly one of exclude, include",
        ),
    )


class MaxwellFilters(Model):
    """Maxwell's `filter` and `exclude_columns` settings as Maxwell takes them, converted to spec.tables,
    spec.columns.exclude and spec.rows (README: what converts, and what is refused)."""

    filter: str | None = Field(
        default=None,
        min_length=1,
        max_length=4000,
        description="Maxwell's filter, e.g. 'exclude: *.*, include: shop.orders, exclude: shop.events.kind = debug'.",
    )
    exclude_columns: str | None = Field(
        default=None,
        min_length=1,
        max_length=4000,
        description="Maxwell's exclude_columns: column names left out of every table, comma-separated.",
    )

    @model_validator(mode="after")
    def _converts(self) -> MaxwellFilters:
        try:
            self.converted()
        except MaxwellFilterError as exc:
            raise PydanticCustomError("maxwell_filter", "{message}", {"message": str(exc)}) from exc
        return self

    def converted(self) -> Converted:
        """The settings as this capture's (MaxwellFilterError for what it cannot say)."""
        return convert_maxwell(self.filter, self.exclude_columns)


def _only_when(start_from: str, field: str, attr: str) -> tuple[Rule, Rule]:
    """`field` is required when start.from is `start_from`, and refused otherwise (it would be ignored)."""
    return (
        Rule(
            holds=lambda s: s.from_ != start_from or getattr(s, attr) is not None,
            cel=f"self.from != '{start_from}' || has(self.{field})",
            message=f"required when from is {start_from}",
            field=field,
        ),
        Rule(
            holds=lambda s: s.from_ == start_from or getattr(s, attr) is None,
            cel=f"self.from == '{start_from}' || !has(self.{field})",
            message=f"only used when from is {start_from}: set from: {start_from} or remove {field}",
            field=field,
        ),
    )


class Start(Model):
    """Where a new capture starts reading; a capture with a checkpoint resumes from it instead."""

    from_: StartFrom = Field(
        default="earliest",
        alias="from",
        description=(
            "earliest (the oldest binlog still on the server), latest (the current end), gtid (after "
            "gtidSet) or position (binlogFile at binlogPosition). Default: earliest."
        ),
    )
    gtid_set: str | None = Field(
        default=None,
        min_length=1,
        description="GTID set already captured; required when from is gtid, refused otherwise.",
    )
    binlog_file: str | None = Field(
        default=None,
        min_length=1,
        description=("Binlog file name, e.g. mysql-bin.000042; required when from is position, refused otherwise."),
    )
    binlog_position: int | None = Field(
        default=None,
        ge=4,
        description=(
            "Byte offset of a transaction boundary in binlogFile (4 or more); required when from is "
            "position, refused otherwise."
        ),
    )

    rules = (
        *_only_when("gtid", "gtidSet", "gtid_set"),
        *_only_when("position", "binlogFile", "binlog_file"),
        *_only_when("position", "binlogPosition", "binlog_position"),
    )


class Flush(Model):
    """When pending events are committed to the sink: as soon as any limit is reached."""

    max_events: int = Field(
        default=50000,
        ge=1,
        description="Commit once this many events are pending. Default: 50000.",
    )
    max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description=("Commit once pending events take this many bytes (1024 or more). Default: 67108864 (64 MiB)."),
    )
    max_interval_ms: int = Field(
        default=1000,
        ge=10,
        description="Commit pending events at least this often, in milliseconds (10 or more). Default: 1000.",
    )


class Heartbeat(Model):
    """Heartbeat rows the worker writes to the source, to measure lag and keep positions moving when idle."""

    interval_seconds: int = Field(
        default=10,
        ge=0,
        description="Seconds between heartbeat writes; 0 disables them. Default: 10.",
    )
    database: str = Field(
        default="mysqlcapture",
        min_length=1,
        max_length=64,
        description=("Database on the source holding the heartbeat table; never captured. Default: mysqlcapture."),
    )


class Snapshot(Model):
    """The initial copy of existing rows."""

    mode: SnapshotMode = Field(
        default="initial",
        description=(
            "initial (snapshot a new capture once), never, or when-needed (also when the binlog no longer "
            "reaches the checkpoint). Default: initial."
        ),
    )
    chunk_rows: int = Field(default=10000, ge=1, description="Rows read per snapshot chunk. Default: 10000.")
    parallelism: int = Field(
        default=4,
        ge=1,
        le=64,
        description=(
            "Connections reading chunks at once: key ranges of one table, and the tables after it. Each is one "
            "more connection to the source. Default: 4."
        ),
    )
    max_buffered_rows: int = Field(
        default=200000,
        ge=1,
        description=(
            "Rows read but not yet committed that the snapshot may hold at once, over all its connections: a "
            "chunk is at most this divided by parallelism (and at most chunkRows). Default: 200000."
        ),
    )


class Failover(Model):
    """What happens when the source's server_id changes or the binlogs the capture needs are purged."""

    enabled: bool = Field(
        default=True,
        description="Follow the source to a new server by GTID when its server_id changes. Default: true.",
    )
    mode: FailoverMode = Field(
        default="auto",
        description=(
            "How to find the place to continue on the new server: gtid (the checkpoint's GTID set), heartbeat "
            "(search the new server's binlogs for the last heartbeat seen; needs spec.heartbeat), or auto (gtid "
            "when the checkpoint has a GTID set). Default: auto."
        ),
    )
    on_purged: OnPurged = Field(
        default="fail",
        description="When the binlogs needed are gone: fail (status Error) or resnapshot. Default: fail.",
    )


class Metrics(Model):
    """The worker's HTTP endpoint: /metrics (Prometheus), /healthz, /readyz."""

    port: int = Field(
        default=9187,
        ge=0,
        le=65535,
        description="TCP port of the endpoint; 0 picks a free port (tests). Default: 9187.",
    )


class Compaction(Model):
    """The Spark job that folds the change log into current-state tables."""

    schedule: CronSchedule = Field(
        default="*/15 * * * *",
        description=(
            "Cron schedule (five fields or @hourly, @daily, ...) of the compaction job. Default: */15 * * * *."
        ),
    )
    output_uri: str | None = Field(
        default=None,
        min_length=1,
        description=(
            "Where current-state tables are written (local path or s3:// URI). Default: beside the change log."
        ),
    )
    retention_hours: int = Field(
        default=168,
        ge=1,
        description="Hours of change log kept before VACUUM removes older files. Default: 168 (7 days).",
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="Container image of the Spark job. Default: the operator's.",
    )
    spark_conf: dict[str, str] = Field(
        default={},
        description="Extra Spark configuration, key to value. Default: {}.",
    )


# Kubernetes' own quantity syntax (resource.Quantity): a worker Deployment with anything else is refused by the API
# server with an internal error, so the capture is refused at apply instead, with an example.
QUANTITY = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
QUANTITY_MESSAGE = "not a Kubernetes quantity: e.g. '500m' or '2' for cpu, '512Mi' or '2Gi' for memory"


def _quantity(value: str) -> str:
    if len(value) > 32 or not re.fullmatch(QUANTITY, value):
        raise PydanticCustomError("quantity", "'{value}' is {message}", {"value": value, "message": QUANTITY_MESSAGE})
    return value


Quantity = Annotated[str, AfterValidator(_quantity), WithJsonSchema(_checked(QUANTITY, QUANTITY_MESSAGE, 32))]


class Resources(Model):
    """Container resources of the worker, as Kubernetes quantity strings."""

    requests: dict[str, Quantity] = Field(
        default={},
        max_length=8,
        description="Requests, e.g. {cpu: '500m', memory: '1Gi'} (quote plain numbers). Default: {}.",
    )
    limits: dict[str, Quantity] = Field(
        default={},
        max_length=8,
        description="Limits, e.g. {memory: '2Gi'}. Default: {}.",
    )


class MySQLCaptureSpec(Model):
    """The desired capture: one source server, which tables, where the change log goes."""

    source: Source = Field(description="The server to capture.")
    tables: Tables = Field(default=Tables(), description="Which tables to capture. Default: every table.")
    columns: Columns = Field(
        default=Columns(),
        description="Columns excluded, hashed, truncated or masked before anything is written. Default: none.",
    )
    maxwell: MaxwellFilters | None = Field(
        default=None,
        description="Maxwell's filter and exclude_columns, carried over as they are. Default: none.",
    )
    rows: tuple[RowRule, ...] = Field(
        default=(),
        max_length=32,
        description=(
            "Row filters: a row of a matching table is written when no exclude holds for it and every include does "
            "(its new values for an update). Default: [] (every row)."
        ),
    )
    start: Start = Field(default=Start(), description="Where a new capture starts. Default: from earliest.")
    sink: Sink = Field(description="Where change events go.")
    flush: Flush = Field(default=Flush(), description="When the sink commits.")
    heartbeat: Heartbeat = Field(default=Heartbeat(), description="Heartbeat writes to the source.")
    snapshot: Snapshot = Field(default=Snapshot(), description="The initial snapshot.")
    failover: Failover = Field(default=Failover(), description="Failover and purged-binlog policy.")
    metrics: Metrics = Field(default=Metrics(), description="The metrics and health endpoint.")
    compaction: Compaction = Field(default=Compaction(), description="The Spark compaction job.")
    paused: bool = Field(
        default=False,
        description="Stop the worker (scale it to zero) and keep the checkpoint. Default: false.",
    )
    resources: Resources | None = Field(
        default=None,
        description="Worker container resources. Default: the operator's.",
    )
    worker_image: str | None = Field(
        default=None,
        min_length=1,
        description="Worker container image. Default: the operator's.",
    )
    service_account_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description=(
            "ServiceAccount the worker pod runs as, e.g. one carrying a cloud identity for the change log's store; "
            "its API token is never mounted. Must be one the operator allows (chart value "
            "allowedServiceAccounts). Default: the namespace's default."
        ),
    )
    image_pull_secrets: tuple[str, ...] = Field(
        default=(),
        max_length=8,
        description="Names of Secrets the kubelet pulls the worker image with. Default: [].",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description="Worker log level. Default: info.",
    )

    @model_validator(mode="after")
    def _one_table_filter(self) -> MySQLCaptureSpec:
        if self.maxwell is not None and self.maxwell.filter is not None and "tables" in self.model_fields_set:
            raise PydanticCustomError(
                "maxwell_filter",
                "spec.maxwell.filter names the tables already: remove spec.tables, or write the filter as spec.tables",
                {},
            )
        return self

    def effective(self) -> tuple[Tables, Columns, tuple[RowRule, ...]]:
        """spec.tables, spec.columns and spec.rows with spec.maxwell's settings converted into them."""
        if self.maxwell is None:
            return self.tables, self.columns, self.rows
        found = self.maxwell.converted()
        tables = (
            Tables(include=tuple(found.include), exclude=tuple(found.exclude)) if self.maxwell.filter else self.tables
        )
        columns = self.columns.model_copy(update={"exclude": (*self.columns.exclude, *found.exclude_columns)})
        rows = (*self.rows, *(RowRule.model_validate(r) for r in found.rows))
        return tables, columns, rows


def _dns_subdomain(value: str) -> str:
    if len(value) > 253 or not re.fullmatch(DNS_SUBDOMAIN, value):
        raise PydanticCustomError(
            "dns_subdomain",
            "'{name}' is not a DNS-1123 subdomain: use lowercase letters, digits, '-' and '.', start and end "
            "with a letter or digit, at most 253 characters",
            {"name": value},
        )
    return value


class Metadata(BaseModel):
    """Kubernetes object metadata; only the name matters to the worker, the rest is kept as given."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: Annotated[str, AfterValidator(_dns_subdomain)] = Field(
        description="Name of the capture; its worker, metrics and Delta application id are named after it.",
    )
    namespace: str | None = Field(default=None, description="Namespace of the capture (Kubernetes only).")


# Children are named <name>-worker (a Service: a DNS-1035 label), <name>-config, <name>-alerts and
# <name>-compaction (a CronJob: at most 52 characters). The longest suffix decides how long a name may be.
MAX_NAME = 52 - len("-compaction")
NAME_PATTERN = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


class MySQLCapture(Model):
    """MySQLCapture streams one MySQL/MariaDB server's binlog into an exactly-once Delta Lake change log."""

    api_version: Literal["cdc.mysqlcapture.io/v1alpha1"] = Field(description="cdc.mysqlcapture.io/v1alpha1.")
    kind: Literal["MySQLCapture"] = Field(description="MySQLCapture.")
    metadata: Metadata = Field(description="Object metadata; metadata.name is required.")
    spec: MySQLCaptureSpec = Field(description="The desired capture.")
    status: MySQLCaptureStatus | None = Field(
        default=None,
        description="Observed state, written by the operator; the worker ignores it.",
    )

    rules = (
        Rule(
            holds=lambda c: len(c.metadata.name) <= MAX_NAME and re.match(NAME_PATTERN, c.metadata.name) is not None,
            cel=f"self.metadata.name.size() <= {MAX_NAME} && self.metadata.name.matches('{NAME_PATTERN}')",
            message=(
                f"metadata.name: use at most {MAX_NAME} lowercase letters, digits and '-', starting with a letter "
                "and ending with a letter or digit, e.g. orders-db1 (the capture's Service and its "
                "<name>-compaction CronJob are named after it)"
            ),
        ),
    )
