"""Level-based reconciliation: one idempotent `reconcile` (children) and `observe` (status), for any trigger.

Both read the capture as it is now and converge on what it asks for; neither cares whether it was called
for a create, an update, a resume or a timer. Problems the user must fix (an invalid spec, an image the policy
refuses, a child the API server refuses) become a condition and a kopf error, never an exception that
crash-loops the operator; what the worker cannot do (a grant, a Secret) it says on /status, read by `observe`.
"""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import kopf
from mysqlcapture_api.manifest import ManifestError, validate_manifest
from mysqlcapture_api.spec import API_VERSION, KIND, MySQLCapture
from mysqlcapture_api.worker_status import WorkerStatus, parse_worker_status

from mysqlcapture_operator import builders
from mysqlcapture_operator.builders import Owner
from mysqlcapture_operator.kube import Kube, KubeError
from mysqlcapture_operator.metrics import CompactionRuns, OperatorMetrics
from mysqlcapture_operator.policy import policy_problem
from mysqlcapture_operator.settings import OperatorSettings
from mysqlcapture_operator.status import Event, Observation, OptionalApis, Problem, changed, compute

log = logging.getLogger(__name__)


def owner_of(body: dict[str, Any]) -> Owner:
    meta = body["metadata"]
    return Owner(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])


def parse(body: dict[str, Any]) -> MySQLCapture | Problem:
    """The capture's spec as the worker will read it, or the problem that prevents that."""
    meta = body["metadata"]
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
        "spec": body.get("spec", {}),
    }
    try:
        return validate_manifest(doc, source=f"{meta.get('namespace')}/{meta['name']}")
    except ManifestError as exc:
        return Problem("InvalidSpec", "; ".join(exc.problems))


MONITORING_API = "monitoring.coreos.com/v1"
MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")


def desired_children(
    capture: MySQLCapture,
    owner: Owner,
    *,
    settings: OperatorSettings,
    monitoring: bool,
    spark_operator: bool,
) -> list[dict[str, Any]]:
    """Every child the capture should have, given which optional APIs the cluster serves."""
    children = [
        builders.build_config_map(capture, owner),
        builders.build_worker_deployment(capture, owner, settings=settings),
        builders.build_service(capture, owner),
    ]
    if settings.network_policy:
        children.append(builders.build_network_policy(capture, owner, settings=settings))
    if monitoring:
        children.append(builders.build_service_monitor(capture, owner))
        children.append(builders.build_prometheus_rule(capture, owner, rules=settings.alert_rules()))
    compaction = builders.build_compaction(capture, owner, settings=settings, spark_operator=spark_operator)
    if compaction is not None:
        children.append(compaction)
    return children


# Captures whose children the API server refused, by (namespace, name): (generation, problem). `observe` keeps
# showing the problem until a reconcile of that generation succeeds, rather than overwriting it every few
# seconds with what it reads from a worker that does not run (the status flapped between the two).
_REJECTED: dict[tuple[str, str], tuple[int, Problem]] = {}


# What the last successful reconcile of each capture applied of its optional children, by (namespace, name):
# (generation, apis). `observe` shows it as the Monitoring and CompactionScheduler conditions.
_APPLIED: dict[tuple[str, str], tuple[int, OptionalApis]] = {}


def rejected(owner: Owner, generation: int) -> Problem | None:
    """The refusal the last reconcile of this generation met, if it did."""
    found = _REJECTED.get((owner.namespace, owner.name))
    return found[1] if found is not None and found[0] == generation else None


def applied_apis(owner: Owner, generation: int) -> OptionalApis | None:
    """Which optional children the last successful reconcile of this generation applied, if one did."""
    found = _APPLIED.get((owner.namespace, owner.name))
    return found[1] if found is not None and found[0] == generation else None


def optional_apis(children: list[dict[str, Any]], missing_monitoring: tuple[str, ...]) -> OptionalApis:
    """What `children` hold of the optional kinds, and which monitoring kinds the cluster lacked."""
    named = [(c["kind"], c["metadata"]["name"]) for c in children]
    compaction_kinds = {kind for _, kind in builders.COMPACTION_KINDS}
    return OptionalApis(
        monitoring=tuple((kind, name) for kind, name in named if kind in MONITORING_KINDS),
        missing_monitoring=missing_monitoring,
        compaction=next(((kind, name) for kind, name in named if kind in compaction_kinds), None),
    )


def forget(namespace: str, name: str) -> None:
    _REJECTED.pop((namespace, name), None)
    _APPLIED.pop((namespace, name), None)


def retry_delay(settings: OperatorSettings, retry: int) -> float:
    """Seconds before retrying a failed reconcile: retry_seconds, doubling per retry, at most 16 times it."""
    return float(settings.retry_seconds * 2 ** min(max(retry, 0), 4))


def reconcile(
    kube: Kube,
    body: dict[str, Any],
    *,
    settings: OperatorSettings,
    metrics: OperatorMetrics | None = None,
    retry: int = 0,
) -> list[str]:
    """Apply every child of the capture (server-side apply, so repeats are no-ops); names of what was applied."""
    owner = owner_of(body)
    generation = int(body["metadata"].get("generation") or 0)
    capture = parse(body)
    if isinstance(capture, Problem):
        write_problem(kube, body, capture, metrics)
        raise kopf.PermanentError(capture.message)
    refused = policy_problem(capture, settings)
    if refused is not None:  # the children stay as they were: nothing runs what the policy refuses
        write_problem(kube, body, refused, metrics)
        raise kopf.PermanentError(refused.message)
    # Optional APIs (third-party CRDs), as discovery last saw them: without them the children they would hold are
    # left out (monitoring) or replaced (a CronJob for compaction), which the capture's conditions say.
    missing_monitoring = tuple(kind for kind in MONITORING_KINDS if not kube.serves(MONITORING_API, kind))
    spark_operator = kube.serves("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication")
    children = desired_children(
        capture,
        owner,
        settings=settings,
        monitoring=not missing_monitoring,
        spark_operator=spark_operator,
    )
    applied = []
    try:
        for child in children:
            kube.apply(child)
            applied.append(f"{child['kind']}/{child['metadata']['name']}")
        if not settings.network_policy:  # switched off since: the worker's policy goes
            kube.delete("networking.k8s.io/v1", "NetworkPolicy", builders.worker_name(owner), owner.namespace)
        kinds = {(c["apiVersion"], c["kind"]) for c in children}
        for api_version, kind in builders.COMPACTION_KINDS:
            if (api_version, kind) not in kinds and kube.serves(api_version, kind):
                kube.delete(api_version, kind, f"{owner.name}-compaction", owner.namespace)
    except KubeError as exc:
        if 400 <= exc.status < 500 and exc.status not in (404, 409, 429):
            problem = Problem("ChildRejected", f"the API server refused a child: {exc.message}")
            _REJECTED[(owner.namespace, owner.name)] = (generation, problem)
            write_problem(kube, body, problem, metrics)
        raise kopf.TemporaryError(f"applying children: {exc}", delay=retry_delay(settings, retry)) from exc
    _REJECTED.pop((owner.namespace, owner.name), None)
    _APPLIED[(owner.namespace, owner.name)] = (generation, optional_apis(children, missing_monitoring))
    return applied


def write_problem(
    kube: Kube, body: dict[str, Any], problem: Problem, metrics: OperatorMetrics | None = None
) -> list[Event]:
    obs = Observation(generation=int(body["metadata"].get("generation") or 0), now=_now(), problem=problem)
    return write_status(kube, body, obs, metrics=metrics)


def write_status(
    kube: Kube, body: dict[str, Any], obs: Observation, *, metrics: OperatorMetrics | None = None
) -> list[Event]:
    """Patch the status subresource when the observation changes it; the Events to post."""
    previous = body.get("status") or {}
    new_status, events = compute(previous, obs)
    patch = changed(previous, new_status)
    meta = body["metadata"]
    if patch is not None:
        kube.patch_status(API_VERSION, KIND, meta["name"], meta["namespace"], patch)
    if metrics is not None:
        metrics.set_phase(meta["namespace"], meta["name"], str(new_status["phase"]))
    for event in events:
        # kopf.event, not kopf.info: info is dropped below the posting level (WARNING, for kopf's own messages).
        kopf.event(cast(kopf.Body, body), type=event.type, reason=event.reason, message=event.message)
    return events


def worker_url(capture: MySQLCapture, owner: Owner, settings: OperatorSettings) -> str:
    return settings.worker_url.format(
        service=builders.worker_name(owner),
        namespace=owner.namespace,
        name=owner.name,
        port=builders.metrics_port(capture),
    )


def fetch_status(url: str, timeout: float = 3.0) -> WorkerStatus:
    """GET {url}/status as a WorkerStatus; WorkerStatusError (a ValueError) when the answer is not one."""
    with urllib.request.urlopen(f"{url.rstrip('/')}/status", timeout=timeout) as resp:
        return parse_worker_status(resp.read())


def compaction_runs(kube: Kube, owner: Owner) -> CompactionRuns | None:
    """What the capture's CronJob or ScheduledSparkApplication status says about its runs; None without one."""
    name = f"{owner.name}-compaction"
    for api_version, kind in builders.COMPACTION_KINDS:
        if not kube.serves(api_version, kind):
            continue
        obj = kube.get(api_version, kind, name, owner.namespace)
        if obj is None:
            continue
        status = obj.get("status") or {}
        if kind == "CronJob":
            # A CronJob's status keeps only the last success: each new lastSuccessfulTime is one more run.
            found = status.get("lastSuccessfulTime")
            return CompactionRuns(str(found) if found else None, succeeded=(str(found),) if found else ())
        succeeded = tuple(str(n) for n in status.get("pastSuccessfulRunNames") or ())
        failed = tuple(str(n) for n in status.get("pastFailedRunNames") or ())
        # lastRun is when the last run started, whatever its outcome: a success only if it is listed as one.
        last_run, last_name = status.get("lastRun"), status.get("lastRunName")
        success = last_run if last_run and (last_name in succeeded or not (succeeded or failed)) else None
        return CompactionRuns(str(success) if success else None, succeeded=succeeded, failed=failed)
    return None


def last_compaction(kube: Kube, owner: Owner) -> str | None:
    runs = compaction_runs(kube, owner)
    return runs.last_success if runs else None


def observe(
    kube: Kube,
    body: dict[str, Any],
    *,
    settings: OperatorSettings,
    fetch: Callable[[str], WorkerStatus] = fetch_status,
    metrics: OperatorMetrics | None = None,
) -> list[Event]:
    """Read the worker's /status (through its Service) and its compaction's runs into the capture's status."""
    owner = owner_of(body)
    generation = int(body["metadata"].get("generation") or 0)
    capture = parse(body)
    base = Observation(
        generation=generation,
        now=_now(),
        purge_risk_seconds=settings.purge_risk_seconds,
        purge_risk_files=settings.purge_risk_files,
        apis=applied_apis(owner, generation),
    )
    if isinstance(capture, Problem):
        return write_status(kube, body, replace(base, problem=capture), metrics=metrics)
    problem = policy_problem(capture, settings) or rejected(owner, generation)
    runs = compaction_runs(kube, owner)
    if metrics is not None:
        metrics.observe_compaction(owner.namespace, owner.name, runs)
    compacted = runs.last_success if runs else None
    if problem is not None or capture.spec.paused:
        obs = replace(base, problem=problem, paused=capture.spec.paused, last_compaction=compacted)
        return write_status(kube, body, obs, metrics=metrics)
    url = worker_url(capture, owner, settings)
    try:
        obs = replace(base, worker=fetch(url), last_compaction=compacted)
    except (OSError, ValueError, urllib.error.URLError) as exc:
        # ValueError: an answer that is not a WorkerStatus (WorkerStatusError names each wrong key), e.g. a
        # worker of another version: shown as unreadable, with what is wrong, never as a half-read status.
        reason = f"{url}/status: {getattr(exc, 'reason', None) or exc}"
        obs = replace(base, unreachable=reason, last_compaction=compacted)
    return write_status(kube, body, obs, metrics=metrics)


def _now() -> datetime:
    return datetime.now(UTC)
