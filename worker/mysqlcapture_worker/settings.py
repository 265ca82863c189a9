"""The worker's runtime settings, derived from a MySQLCapture manifest (the one place that reads the spec)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mysqlcapture_api.spec import JsonlSink, MySQLCapture


class SettingsError(RuntimeError):
    """The manifest is valid but cannot be run here (for example a password that cannot be read)."""


@dataclass(frozen=True)
class WorkerSettings:
    name: str
    host: str
    port: int
    user: str
    password: str = field(repr=False)
    replica_server_id: int
    flavor: str = "auto"
    ssl: dict[str, Any] | None = None
    # tls.mode disabled: PyMySQL otherwise tries TLS whenever the server offers it (its PREFERRED default).
    ssl_disabled: bool = False
    connect_timeout: float = 10.0
    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()
    start_from: str = "earliest"
    start_gtid_set: str | None = None
    start_file: str | None = None
    start_pos: int | None = None
    sink_type: str = "delta"
    delta_uri: str = ""
    storage_options: dict[str, str] = field(default_factory=dict)
    jsonl: JsonlSink = field(default_factory=JsonlSink)
    flush_max_events: int = 50000
    flush_max_bytes: int = 64 * 1024 * 1024
    flush_interval_s: float = 1.0
    heartbeat_interval_s: float = 10.0
    heartbeat_db: str = "mysqlcapture"
    failover_enabled: bool = True
    purge_check_s: float = 15.0
    failover_mode: str = "auto"
    on_purged: str = "fail"
    snapshot_mode: str = "initial"
    snapshot_chunk_rows: int = 10000
    metrics_port: int = 9187
    spill_dir: str | None = None
    password_file: str | None = None  # read again at each connection: a rotated password needs no restart

    @property
    def schema_history_uri(self) -> str | None:
        """Where the schema history lives: beside the change log (a `_`-prefixed folder VACUUM leaves alone)."""
        if self.sink_type == "delta":
            return self.delta_uri.rstrip("/") + "/_mysqlcapture_schema"
        if self.jsonl.path != "-":
            return self.jsonl.path + ".schema"
        return None


PASSWORD_FILE_VARIABLE = "MYSQLCAPTURE_SOURCE_PASSWORD_FILE"  # the Secret's key, mounted in the worker pod
PASSWORD_VARIABLE = "MYSQLCAPTURE_SOURCE_PASSWORD"  # or the password itself (a local run)


def read_password(spec_password: Any, env: dict[str, str] | None = None) -> str:
    env = dict(os.environ) if env is None else env
    if spec_password.env:
        if spec_password.env not in env:
            raise SettingsError(f"spec.source.passwordFrom.env: environment variable {spec_password.env} is not set")
        return env[spec_password.env]
    if spec_password.file:
        try:
            return Path(spec_password.file).read_text().rstrip("\n")
        except OSError as exc:
            raise SettingsError(f"spec.source.passwordFrom.file: cannot read {spec_password.file}: {exc}") from exc
    ref = spec_password.secret_key_ref
    # In the worker pod the operator mounts the Secret's key as a file (the kubelet keeps it current, the
    # operator never reads it); a local run may set the password itself.
    path = env.get(PASSWORD_FILE_VARIABLE)
    if path:
        try:
            return Path(path).read_text().rstrip("\n")
        except OSError as exc:
            raise SettingsError(
                f"spec.source.passwordFrom.secretKeyRef: Secret {ref.name!r} with key {ref.key!r} is not in the "
                f"capture's namespace: create it (kubectl create secret generic {ref.name} "
                f"--from-literal={ref.key}=...) or fix spec.source.passwordFrom.secretKeyRef"
            ) from exc
    if PASSWORD_VARIABLE in env:
        return env[PASSWORD_VARIABLE]
    raise SettingsError(
        f"spec.source.passwordFrom.secretKeyRef ({ref.name}/{ref.key}) is mounted by the operator in the worker "
        f"pod; for a local run set {PASSWORD_VARIABLE} or use passwordFrom.env"
    )


def password_file(spec_password: Any, env: dict[str, str] | None = None) -> str | None:
    """The file the password is read from again at each connection (a rotated password needs no restart)."""
    env = dict(os.environ) if env is None else env
    if spec_password.file:
        return str(spec_password.file)
    if spec_password.secret_key_ref is not None:
        return env.get(PASSWORD_FILE_VARIABLE) or None
    return None


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
    return WorkerSettings(
        name=capture.metadata.name,
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
        include=tuple(spec.tables.include),
        exclude=tuple(spec.tables.exclude),
        start_from=start.from_,
        start_gtid_set=start.gtid_set,
        start_file=start.binlog_file,
        start_pos=start.binlog_position,
        sink_type=sink.type,
        delta_uri=sink.delta.uri if sink.delta is not None else "",
        storage_options=dict(sink.delta.storage_options) if sink.delta is not None else {},
        jsonl=sink.jsonl if sink.jsonl is not None else JsonlSink(),
        flush_max_events=spec.flush.max_events,
        flush_max_bytes=spec.flush.max_bytes,
        flush_interval_s=spec.flush.max_interval_ms / 1000.0,
        heartbeat_interval_s=float(spec.heartbeat.interval_seconds),
        heartbeat_db=spec.heartbeat.database,
        failover_enabled=spec.failover.enabled,
        failover_mode=spec.failover.mode,
        on_purged=spec.failover.on_purged,
        snapshot_mode=spec.snapshot.mode,
        snapshot_chunk_rows=spec.snapshot.chunk_rows,
        metrics_port=spec.metrics.port,
    )
