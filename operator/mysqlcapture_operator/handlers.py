"""kopf handlers: the only module with decorators; each one calls reconcile or observe and nothing else."""

from __future__ import annotations

import logging
from typing import Any

import kopf
from mysqlcapture_api.spec import GROUP, PLURAL, VERSION
from prometheus_client import CollectorRegistry

from mysqlcapture_operator import reconcile
from mysqlcapture_operator.kube import Kube, load_api_client
from mysqlcapture_operator.metrics import OperatorMetrics
from mysqlcapture_operator.settings import OperatorSettings

SETTINGS = OperatorSettings.from_env()
RESOURCE = (GROUP, VERSION, PLURAL)
log = logging.getLogger("mysqlcapture_operator")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Progress and the last-handled spec in annotations: the CRD's status schema has no room for kopf's.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    # Only warnings become Events by themselves; status.compute's Events are posted explicitly.
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 60
    memo.kube = Kube(load_api_client(), discovery_ttl=SETTINGS.discovery_interval)
    if getattr(memo, "metrics", None) is None:  # `python -m mysqlcapture_operator` passes the served one in
        memo.metrics = OperatorMetrics(CollectorRegistry())


@kopf.on.resume(*RESOURCE)
@kopf.on.create(*RESOURCE)
@kopf.on.update(*RESOURCE, field="spec")
def apply_children(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
    with memo.metrics.counting_reconcile():
        applied = reconcile.reconcile(memo.kube, dict(body), settings=SETTINGS, metrics=memo.metrics, retry=retry)
    log.info("reconciled %s/%s: %s", body.metadata.namespace, body.metadata.name, ", ".join(applied))


@kopf.timer(*RESOURCE, interval=SETTINGS.resync_interval, initial_delay=SETTINGS.resync_interval)
def resync(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    # Level-based: children deleted or edited by hand come back without a change to the capture.
    with memo.metrics.counting_reconcile():
        reconcile.reconcile(memo.kube, dict(body), settings=SETTINGS, metrics=memo.metrics)


@kopf.timer(*RESOURCE, interval=SETTINGS.status_interval)
def read_worker_status(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    reconcile.observe(memo.kube, dict(body), settings=SETTINGS, metrics=memo.metrics)


@kopf.on.event(*RESOURCE)
def capture_event(type: str | None, name: str, namespace: str | None, memo: kopf.Memo, **_: Any) -> None:
    if type == "DELETED" and namespace:
        memo.metrics.forget(namespace, name)
        reconcile.forget(namespace, name)
