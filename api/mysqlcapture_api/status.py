"""The MySQLCapture status: what the operator observed. Not part of the worker's configuration."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from mysqlcapture_api.base import Model

Phase = Literal["Pending", "Snapshotting", "Streaming", "FailingOver", "Degraded", "Error"]
ConditionStatus = Literal["True", "False", "Unknown"]
REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class Condition(Model):
    """One aspect of the capture's state, in the Kubernetes condition shape."""

    type: str = Field(min_length=1, description="Condition type, e.g. Ready, Streaming, SourceReachable.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(pattern=REASON, description="CamelCase reason for the last transition, for machines.")
    message: str = Field(default="", description="Human-readable detail. Default: empty.")
    last_transition_time: datetime = Field(
        description="When status last changed (RFC 3339); unchanged while status stays the same.",
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="metadata.generation the condition was computed from.",
    )


class MySQLCaptureStatus(Model):
    """Observed state of a capture, written by the operator from the worker's checkpoint and metrics."""

    phase: Phase | None = Field(
        default=None,
        description="Pending, Snapshotting, Streaming, FailingOver, Degraded or Error.",
    )
    conditions: tuple[Condition, ...] = Field(
        default=(),
        description="Current conditions, one per type. Default: [].",
    )
    server_id: int | None = Field(
        default=None,
        ge=0,
        description="server_id of the source server the checkpoint belongs to.",
    )
    server_identity: str | None = Field(
        default=None,
        description=("Identity of that server (flavor, server_uuid or domain, server_id); a change means a failover."),
    )
    gtid_set: str | None = Field(default=None, description="GTID set of the last committed checkpoint.")
    binlog_file: str | None = Field(default=None, description="Binlog file of the last committed checkpoint.")
    binlog_position: int | None = Field(
        default=None,
        ge=0,
        description="Byte offset in binlogFile of the last committed checkpoint.",
    )
    lag_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Seconds between the source's newest event and the last committed one.",
    )
    purge_headroom_bytes: int | None = Field(
        default=None,
        description=(
            "Bytes of binlog the source can still purge before it removes what the checkpoint needs; "
            "negative once it has."
        ),
    )
    purge_headroom_seconds: float | None = Field(
        default=None,
        description="The same headroom in seconds, estimated from the binlog write rate and expire settings.",
    )
    failovers: int | None = Field(
        default=None,
        ge=0,
        description="Failovers the running worker has followed since it started (a new server identity each).",
    )
    last_compaction: datetime | None = Field(
        default=None,
        description="When the last compaction job finished (RFC 3339).",
    )
    snapshot_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Progress of a running snapshot, in percent (0 to 100).",
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="metadata.generation the status was computed from.",
    )
    message: str | None = Field(default=None, description="Human-readable summary of the phase.")
