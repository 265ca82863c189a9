"""Pure status computation: the worker's /status answer and the previous status in, the new status out.

Conditions follow the Kubernetes shape (type, status, reason, message, lastTransitionTime,
observedGeneration); lastTransitionTime moves only when a condition's status flips, so an unchanged
observation yields an identical status and no patch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mysqlcapture_api.worker_status import WorkerStatus

CONDITION_TYPES = (
    "Ready",
    "Streaming",
    "BinlogPurgeRisk",
    "FailedOver",
    "Compacted",
    "Monitoring",
    "CompactionScheduler",
)
# The third-party CRD versions the children are validated against, named in the conditions' fixes. Copies of the pins
# in tests/k8s/thirdparty-crds.pins (the tests install those CRDs; tests/k8s/test_thirdparty.py fails on a difference).
TESTED_PROMETHEUS_OPERATOR = "v0.93.0"
TESTED_SPARK_OPERATOR = "v2.5.2"


@dataclass(frozen=True)
class Problem:
    """Why the operator cannot run the worker (a missing Secret, an invalid spec): a condition, not a crash."""

    reason: str
    message: str


@dataclass(frozen=True)
class OptionalApis:
    """Which optional children the last reconcile applied, as the cluster's APIs allowed (kube.serves)."""

    monitoring: tuple[tuple[str, str], ...] = ()
    """(kind, name) of the ServiceMonitor and PrometheusRule applied; none when `missing_monitoring` is not empty."""
    missing_monitoring: tuple[str, ...] = ()
    """The monitoring.coreos.com/v1 kinds the cluster does not serve (the Prometheus operator's CRDs)."""
    compaction: tuple[str, str] | None = None
    """(kind, name) of the compaction job applied: a ScheduledSparkApplication when the Spark operator's CRDs are
    served, else a CronJob; None when the capture has no compaction (a JSON-lines or Kafka sink)."""


@dataclass(frozen=True)
class Observation:
    """What one status poll saw."""

    generation: int
    now: datetime
    worker: WorkerStatus | None = None
    """The worker's GET /status answer; None when it could not be read (or was not a WorkerStatus)."""
    unreachable: str = ""
    """Why /status could not be read."""
    paused: bool = False
    problem: Problem | None = None
    last_compaction: str | None = None
    """RFC 3339 time of the compaction job's last success, when known."""
    purge_risk_seconds: float = 3600.0
    purge_risk_files: int = 2
    apis: OptionalApis | None = None
    """What the last successful reconcile of this generation applied; None when none has run in this process
    (the Monitoring and CompactionScheduler conditions then keep their last value)."""


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post on the capture."""

    type: str  # Normal or Warning
    reason: str
    message: str


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(value: float | None) -> float | None:
    """A finite number from the worker's document, else None (JSON has no inf or nan: they arrive as null)."""
    if value is None:
        return None
    return float(value) if math.isfinite(value) else None


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _condition(
    previous: dict[str, dict[str, Any]], obs: Observation, kind: str, status: str, reason: str, message: str
) -> dict[str, Any]:
    old = previous.get(kind)
    since = old["lastTransitionTime"] if old and old.get("status") == status else rfc3339(obs.now)
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": obs.generation,
    }


def _purge_risk(w: WorkerStatus, obs: Observation) -> tuple[str, str, str]:
    if w.binlog_purged:
        return "True", "BinlogPurged", "the binlog file the checkpoint needs is gone from the source"
    files, seconds = w.purge_headroom_files, _number(w.purge_headroom_seconds)
    if files is None:
        return "Unknown", "NotMeasured", "the worker has not measured the purge headroom yet"
    if w.reading_active_file:
        return (
            "False",
            "ReadingActiveFile",
            f"the checkpoint is in the binlog file the source is writing, which no purge removes ({files} whole "
            "file(s) before it)",
        )
    if files < obs.purge_risk_files:
        return (
            "True",
            "LowHeadroom",
            f"{files} whole binlog file(s) ({w.purge_headroom_bytes} bytes) before the checkpoint's: "
            "the source's next purge may remove events not captured yet",
        )
    if seconds is not None and seconds < obs.purge_risk_seconds:
        return "True", "LowHeadroom", f"about {seconds:.0f} s of binlog growth before the checkpoint's file is purged"
    return "False", "HeadroomOK", f"{files} binlog file(s) before the checkpoint's"


def _kinds(kinds: tuple[str, ...]) -> str:
    return " and ".join(kinds)


def _monitoring(apis: OptionalApis) -> tuple[str, str, str]:
    if not apis.missing_monitoring:
        applied = _kinds(tuple(f"{kind} {name}" for kind, name in apis.monitoring))
        return "True", "PrometheusOperator", f"{applied} applied: Prometheus scrapes the worker and alerts on it"
    return (
        "False",
        "PrometheusOperatorMissing",
        f"the cluster does not serve {_kinds(apis.missing_monitoring)} (monitoring.coreos.com/v1): no scrape config "
        "(ServiceMonitor) and no alert rules (PrometheusRule) were created for this capture. Fix: install the "
        f"Prometheus operator's CRDs (tested with {TESTED_PROMETHEUS_OPERATOR}); the operator creates both within its "
        "discovery and resync intervals",
    )


def _compaction_scheduler(kind: str, name: str) -> tuple[str, str, str]:
    if kind == "ScheduledSparkApplication":
        return "True", "SparkOperator", f"compaction runs as ScheduledSparkApplication {name} (the Spark operator)"
    return (
        "False",
        "SparkOperatorMissing",
        f"the cluster does not serve ScheduledSparkApplication (sparkoperator.k8s.io/v1beta2): compaction runs as "
        f"{kind} {name} (spark-submit), which reports no failed runs. To run it with the Spark operator, install "
        f"its CRDs (tested with {TESTED_SPARK_OPERATOR}) and the operator: a ScheduledSparkApplication replaces the "
        f"{kind} within this operator's discovery and resync intervals",
    )


def compute(previous_status: dict[str, Any] | None, obs: Observation) -> tuple[dict[str, Any], list[Event]]:
    """The new status and the Events its changes call for."""
    prev = dict(previous_status or {})
    prev_conditions = {c["type"]: c for c in prev.get("conditions", []) if isinstance(c, dict) and "type" in c}
    w = obs.worker
    status: dict[str, Any] = {
        k: prev.get(k)
        for k in (
            "serverId",
            "serverIdentity",
            "gtidSet",
            "binlogFile",
            "binlogPosition",
            "lagSeconds",
            "purgeHeadroomBytes",
            "purgeHeadroomSeconds",
            "failovers",
            "lastCompaction",
        )
    }
    events: list[Event] = []
    if obs.last_compaction is not None:
        status["lastCompaction"] = obs.last_compaction
    conditions: dict[str, tuple[str, str, str]] = {}

    if obs.problem is not None:
        phase, message = "Error", obs.problem.message
        conditions["Ready"] = ("False", obs.problem.reason, message)
        conditions["Streaming"] = ("False", obs.problem.reason, "the worker cannot run")
    elif obs.paused:
        phase, message = "Pending", "paused (spec.paused): the worker is scaled to zero"
        conditions["Ready"] = ("False", "Paused", message)
        conditions["Streaming"] = ("False", "Paused", message)
    elif w is None:
        seen = prev.get("binlogFile") is not None
        phase = "Degraded" if seen else "Pending"
        message = f"the worker's status endpoint cannot be read: {obs.unreachable}"
        conditions["Ready"] = ("False", "WorkerUnreachable", message)
        conditions["Streaming"] = ("Unknown", "WorkerUnreachable", message)
    else:
        status.update(
            serverId=w.server_id,
            serverIdentity=w.server_identity,
            gtidSet=w.gtid_set or None,
            binlogFile=w.binlog_file,
            binlogPosition=w.binlog_pos,
            lagSeconds=_rounded(_number(w.lag_seconds), 1),  # kubectl prints it as given: 1.7, not 1.72255...
            purgeHeadroomBytes=w.purge_headroom_bytes,
            purgeHeadroomSeconds=_number(w.purge_headroom_seconds),
            failovers=w.failovers,
            # The worker's `snapshot` is the running snapshot's percent; kept only while one runs.
            snapshotPercent=_number(w.snapshot) if w.phase == "Snapshotting" else None,
        )
        if isinstance(status["lagSeconds"], float) and status["lagSeconds"] < 0:
            status["lagSeconds"] = 0.0
        worker_phase: str = w.phase
        failovers, before = w.failovers or 0, int(prev.get("failovers") or 0)
        reason = None
        if w.binlog_purged or worker_phase == "Error":
            phase = "Error"
            message = w.error or "the binlog the checkpoint needs was purged"
            # The worker's own word for it (AccessDenied, MissingGrant, BinlogFormatNotRow, PasswordNotFound...).
            reason = w.error_reason or ("BinlogPurged" if w.binlog_purged else "Error")
        elif worker_phase == "Snapshotting":
            percent = _number(w.snapshot)
            phase, message = "Snapshotting", "copying existing rows" + (f" ({percent:.0f}%)" if percent else "")
        elif failovers > before and worker_phase != "Streaming":
            phase, message = "FailingOver", "following the source to a new server"
        elif worker_phase in ("Streaming", "Degraded", "Pending", "FailingOver"):
            phase = worker_phase
            message = {"Streaming": "streaming", "Degraded": "reconnecting to the source"}.get(phase, "starting")
        else:
            phase, message = "Degraded", f"the worker reports phase {worker_phase}"
        streaming = phase == "Streaming"
        conditions["Streaming"] = (
            ("True", "Streaming", f"at {w.binlog_file}:{w.binlog_pos}")
            if streaming
            else ("False", reason or phase, message)
        )
        conditions["Ready"] = ("True", "Streaming", "streaming") if streaming else ("False", reason or phase, message)
        conditions["BinlogPurgeRisk"] = _purge_risk(w, obs)
        if failovers > 0:
            conditions["FailedOver"] = (
                "True",
                "FailedOver",
                f"followed the source to server_id {w.server_id} ({failovers} failover(s) since start)",
            )
        else:
            conditions["FailedOver"] = ("False", "NoFailover", "the source has not changed servers")
        if failovers > before:
            # The worker counts a failover when it sees the new server, before its first commit there: the
            # committed server_id may still be the old one, so the Event names where the capture came from.
            was = prev.get("serverId")
            events.append(
                Event(
                    "Warning", "FailedOver", f"the source changed servers (was server_id {was}): failover {failovers}"
                )
            )
    if status.get("lastCompaction"):
        conditions["Compacted"] = ("True", "Succeeded", f"last compaction finished at {status['lastCompaction']}")
    else:
        conditions["Compacted"] = ("Unknown", "NotRunYet", "no compaction run has finished yet")
    dropped = set()
    if obs.apis is not None:
        conditions["Monitoring"] = _monitoring(obs.apis)
        if obs.apis.compaction is not None:
            conditions["CompactionScheduler"] = _compaction_scheduler(*obs.apis.compaction)
        else:
            dropped.add("CompactionScheduler")  # no compaction (a JSON-lines or Kafka sink): nothing to schedule

    # Conditions not observed this time keep their last value (e.g. purge risk while the worker is away).
    new_conditions = []
    for kind in CONDITION_TYPES:
        if kind in conditions:
            new_conditions.append(_condition(prev_conditions, obs, kind, *conditions[kind]))
        elif kind in prev_conditions and kind not in dropped:
            new_conditions.append(prev_conditions[kind])
    status.update(phase=phase, message=message, conditions=new_conditions, observedGeneration=obs.generation)

    old_phase = prev.get("phase")
    was_risk = prev_conditions.get("BinlogPurgeRisk", {}).get("status") == "True"
    risk = conditions.get("BinlogPurgeRisk")
    if risk is not None and risk[0] == "True" and not was_risk:
        events.append(Event("Warning", "BinlogPurgeRisk", risk[2]))
    if phase == "Snapshotting" and old_phase != "Snapshotting":
        events.append(Event("Normal", "SnapshotStarted", "the initial snapshot started"))
    if old_phase == "Snapshotting" and phase != "Snapshotting":
        events.append(Event("Normal", "SnapshotFinished", f"the snapshot ended; now {phase}"))
    if phase == "Error" and (old_phase != "Error" or prev.get("message") != message):
        events.append(Event("Warning", "Error", message))
    for kind, event_type in (("Monitoring", "Warning"), ("CompactionScheduler", "Normal")):
        now, was = conditions.get(kind), prev_conditions.get(kind, {})
        if now is not None and now[0] == "False" and (was.get("status"), was.get("reason")) != now[:2]:
            events.append(Event(event_type, now[1], now[2]))
    return {k: v for k, v in status.items() if v is not None}, events


def changed(previous_status: dict[str, Any] | None, new_status: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch turning the previous status into `new_status`, or None when nothing changed."""
    prev = previous_status or {}
    patch: dict[str, Any] = {k: v for k, v in new_status.items() if prev.get(k) != v}
    patch.update({k: None for k in prev if k not in new_status and k != "kopf"})
    return patch or None
