"""The worker's GET /status document: written by the worker, read by the operator, defined once here.

Every key is always present (null when not known yet), so the document's shape is the same in every
state, and a key renamed on one side fails `parse_worker_status` on the other instead of reading as
"not known". The JSON keys are the snake_case field names, not the camelCase of the manifest models.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, ValidationError

from mysqlcapture_api.base import Model

WorkerPhase = Literal["Pending", "Snapshotting", "Streaming", "Degraded", "Error"]


class SnapshotTable(Model):
    """One table a running snapshot is reading."""

    model_config = ConfigDict(alias_generator=None)

    table: str = Field(description="database.table")
    rows: int = Field(description="Rows of the table committed so far (bootstrap-inserts).")
    rows_estimated: int = Field(description="Rows the table holds, as the server estimates them (at least `rows`).")
    chunks: int = Field(description="Key ranges (chunks) of the table committed so far.")
    chunks_estimated: int = Field(
        description="Chunks the table will take: its estimated rows over spec.snapshot.chunkRows (at least `chunks`)."
    )
    rows_per_second: float = Field(description="Rows committed per second since this run began the table.")
    eta_seconds: float | None = Field(description="Seconds left at that rate; null before the first rows.")


class WorkerStatusError(ValueError):
    """A /status answer that is not a WorkerStatus; the message names each wrong key, on one line."""


class WorkerStatus(Model):
    """What one worker is doing: its phase, the committed position, lag, purge headroom and failure, if any."""

    model_config = ConfigDict(alias_generator=None)  # the JSON keys are the field names (snake_case)

    phase: WorkerPhase = Field(
        description="Pending (starting), Snapshotting, Streaming, Degraded (reconnecting to the source) or Error."
    )
    server_id: int | None = Field(
        description="server_id of the source server the committed position belongs to; null before the first commit."
    )
    server_identity: str | None = Field(
        description="That server's identity: MySQL server_uuid or MariaDB 'domain:server_id'; null before the first "
        "commit."
    )
    gtid_set: str | None = Field(
        description="GTID set of the committed position (empty when the source has none); null before the first commit."
    )
    binlog_file: str | None = Field(
        description="Binlog file of the committed position (a transaction boundary); null before the first commit."
    )
    binlog_pos: int | None = Field(
        description="Byte offset of the committed position in binlog_file; null before the first commit."
    )
    order_key: int | None = Field(
        description="Last ordering key handed out (strictly increasing over the capture); null before the first commit."
    )
    lag_seconds: float | None = Field(
        description="Seconds between the source commit of the last committed event and that sink commit (0 once "
        "caught up); null when the worker is not running."
    )
    purge_headroom_bytes: int | None = Field(
        description="Binlog bytes between the source's oldest binlog and the checkpoint (0 when already purged); "
        "null until measured."
    )
    purge_headroom_files: int | None = Field(
        description="Whole binlog files older than the checkpoint's (0: the next purge removes the file being "
        "read); null until measured."
    )
    reading_active_file: bool | None = Field(
        description="True while the checkpoint is in the binlog file the source is writing, which no purge "
        "removes; null until measured."
    )
    purge_headroom_seconds: float | None = Field(
        description="Headroom bytes divided by the source's binlog growth rate (bytes/s), in seconds; null until "
        "the rate is known."
    )
    binlog_purged: bool = Field(
        description="True when the binlog file the checkpoint needs is already gone from the source."
    )
    last_heartbeat: int | None = Field(
        description="Time carried by the last heartbeat seen in the stream, in milliseconds since the Unix epoch; "
        "null before the first."
    )
    failovers: int | None = Field(
        description="Changes of the source server followed since the worker started; null when the worker is not "
        "running."
    )
    snapshot: float | None = Field(
        description="Overall progress of the running snapshot, 0 to 100 percent; null while none runs."
    )
    snapshot_tables: list[SnapshotTable] | None = Field(
        description="The tables the running snapshot is reading now, with their progress; null while none runs."
    )
    unlogged_foreign_keys: list[str] | None = Field(
        default=None,
        description="Captured foreign keys (`database.table.constraint`) whose ON DELETE / ON UPDATE actions the "
        "source does not log (MariaDB; MySQL before 9.6 or with innodb_native_foreign_keys=ON): the worker writes a "
        "referential-action event for each change of their parent instead. Null before the schema is known.",
    )
    error: str | None = Field(description="What stopped the worker, one line for a person; null without an error.")
    error_reason: str | None = Field(
        description="CamelCase reason of the error a person must fix (AccessDenied, MissingGrant, BinlogPurged...), "
        "set while the worker waits to run again (run --retry-errors); null otherwise."
    )
    retry_seconds: float | None = Field(
        description="Seconds after the error until the worker runs again (run --retry-errors); null otherwise."
    )

    @classmethod
    def starting(cls) -> WorkerStatus:
        """The document before the worker knows anything: phase Pending, nothing measured."""
        return cls(
            phase="Pending",
            server_id=None,
            server_identity=None,
            gtid_set=None,
            binlog_file=None,
            binlog_pos=None,
            order_key=None,
            lag_seconds=None,
            purge_headroom_bytes=None,
            purge_headroom_files=None,
            reading_active_file=None,
            purge_headroom_seconds=None,
            binlog_purged=False,
            last_heartbeat=None,
            failovers=None,
            snapshot=None,
            snapshot_tables=None,
            error=None,
            error_reason=None,
            retry_seconds=None,
        )

    @classmethod
    def failed(cls, *, reason: str, message: str, retry_seconds: float) -> WorkerStatus:
        """The document of a worker stopped by an error a person must fix, running again in `retry_seconds`."""
        return cls.starting().model_copy(
            update={"phase": "Error", "error": message, "error_reason": reason, "retry_seconds": retry_seconds}
        )


def parse_worker_status(answer: str | bytes) -> WorkerStatus:
    """The /status answer (JSON text) as a WorkerStatus, or WorkerStatusError naming every wrong key.

    Strict: every key present, none unknown, no value of another type (`"1234"` is not a binlog position).
    """
    try:
        return WorkerStatus.model_validate_json(answer, strict=True)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc'])) or '(the document)'}: {e['msg']}" for e in exc.errors()]
        raise WorkerStatusError(f"not a worker status document: {'; '.join(problems)}") from None
