"""Pure builders: one MySQLCapture in, the manifests of its children out (no API calls, no clock)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import yaml
from mysqlcapture_api.source import SecretKeyRef
from mysqlcapture_api.spec import API_VERSION, KIND, MySQLCapture

from mysqlcapture_operator.compaction_jobs import build_scheduled_spark_application, build_spark_submit_cronjob
from mysqlcapture_operator.settings import OperatorSettings

LABEL = "cdc.mysqlcapture.io/capture"
CONFIG_HASH = "cdc.mysqlcapture.io/config-hash"
CONFIG_DIR = "/etc/mysqlcapture"
CONFIG_KEY = "capture.yaml"
PASSWORD_FILE_VARIABLE = "MYSQLCAPTURE_SOURCE_PASSWORD_FILE"  # where the worker reads passwordFrom.secretKeyRef
PASSWORD_DIR = "/var/run/secrets/mysqlcapture"
COLUMN_KEY_FILE_VARIABLE = "MYSQLCAPTURE_COLUMN_KEY_FILE"  # where the worker reads spec.columns.hash.keyFrom
COLUMN_KEY_DIR = "/var/run/secrets/mysqlcapture-column-key"
KAFKA_PASSWORD_FILE_VARIABLE = "MYSQLCAPTURE_KAFKA_PASSWORD_FILE"  # where the worker reads kafka.sasl.passwordFrom
KAFKA_PASSWORD_DIR = "/var/run/secrets/mysqlcapture-kafka-password"
KAFKA_CA_FILE_VARIABLE = "MYSQLCAPTURE_KAFKA_CA_FILE"  # where the worker reads kafka.tls.caFrom
KAFKA_CA_DIR = "/var/run/secrets/mysqlcapture-kafka-ca"
DEFAULT_METRICS_PORT = 9187
WORKER_UID = 10001
DEFAULT_RESOURCES = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}


@dataclass(frozen=True)
class Owner:
    """The capture as its children's owner: name, namespace and uid (from the API server)."""

    name: str
    namespace: str
    uid: str

    def reference(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def worker_name(owner: Owner) -> str:
    """The Deployment's and the Service's name."""
    return f"{owner.name}-worker"


def config_name(owner: Owner) -> str:
    return f"{owner.name}-config"


def labels(owner: Owner, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/managed-by": "mysqlcapture-operator",
        LABEL: owner.name,
    }


def worker_selector(owner: Owner) -> dict[str, str]:
    """The labels that pick a capture's worker pods (Deployment, Service, ServiceMonitor, NetworkPolicy)."""
    return {LABEL: owner.name, "app.kubernetes.io/name": "mysqlcapture-worker"}


def _metadata(owner: Owner, name: str, component: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner, component),
        "ownerReferences": [owner.reference()],
    }


def metrics_port(capture: MySQLCapture) -> int:
    """The worker's metrics port in the pod (spec 0, "any free port", only makes sense outside a pod)."""
    return capture.spec.metrics.port or DEFAULT_METRICS_PORT


def worker_config(capture: MySQLCapture, owner: Owner) -> str:
    """The manifest the worker runs from: the capture's spec as the API server defaulted it, as YAML."""
    doc = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": owner.name, "namespace": owner.namespace},
        "spec": capture.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    return yaml.safe_dump(doc, sort_keys=True)


def config_hash(config_text: str) -> str:
    return hashlib.sha256(config_text.encode()).hexdigest()[:16]


def build_config_map(capture: MySQLCapture, owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(owner, config_name(owner), "mysqlcapture-worker"),
        "data": {CONFIG_KEY: worker_config(capture, owner)},
    }


Mounted = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]
"""(env, volume mounts, volumes) of the pod."""


def _secret_file(ref: SecretKeyRef | None, *, volume: str, variable: str, directory: str, file: str) -> Mounted:
    """One Secret key mounted as a file, its path in `variable`.

    The Secret's key is never read by the operator: the kubelet resolves it with the pod's own rights and keeps
    it current, and the worker reads the file. `optional`: a missing Secret or key does not hold the pod in
    ContainerCreating; the worker says what is missing on /status, which the operator shows as the capture's
    condition.
    """
    if ref is None:  # env / file: the worker resolves it itself from its own environment/files
        return [], [], []
    return (
        [{"name": variable, "value": f"{directory}/{file}"}],
        [{"name": volume, "mountPath": directory, "readOnly": True}],
        [
            {
                "name": volume,
                "secret": {
                    "secretName": ref.name,
                    "items": [{"key": ref.key, "path": file}],
                    "optional": True,
                    "defaultMode": 0o440,  # root and the worker's group (fsGroup)
                },
            }
        ],
    )


def _secrets(capture: MySQLCapture) -> Mounted:
    """The worker's Secret keys: passwordFrom.secretKeyRef, spec.columns.hash.keyFrom.secretKeyRef, and the Kafka
    sink's sasl.passwordFrom and tls.caFrom."""
    spec = capture.spec
    kafka = spec.sink.kafka if spec.sink.type == "kafka" else None
    sasl = kafka.sasl if kafka is not None else None
    tls = kafka.tls if kafka is not None else None
    wanted = [
        (spec.source.password_from.secret_key_ref, "password", PASSWORD_FILE_VARIABLE, PASSWORD_DIR, "password"),
        (
            spec.columns.hash.key_from.secret_key_ref if spec.columns.hash is not None else None,
            "column-key",
            COLUMN_KEY_FILE_VARIABLE,
            COLUMN_KEY_DIR,
            "key",
        ),
        (
            sasl.password_from.secret_key_ref if sasl is not None else None,
            "kafka-password",
            KAFKA_PASSWORD_FILE_VARIABLE,
            KAFKA_PASSWORD_DIR,
            "password",
        ),
        (
            tls.ca_from.secret_key_ref if tls is not None and tls.ca_from is not None else None,
            "kafka-ca",
            KAFKA_CA_FILE_VARIABLE,
            KAFKA_CA_DIR,
            "ca.pem",
        ),
    ]
    env: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    for ref, volume, variable, directory, file in wanted:
        more = _secret_file(ref, volume=volume, variable=variable, directory=directory, file=file)
        env, mounts, volumes = env + more[0], mounts + more[1], volumes + more[2]
    return env, mounts, volumes


def _identity(capture: MySQLCapture) -> dict[str, Any]:
    """The pod's serviceAccountName and imagePullSecrets, where the capture names them (the policy allowed them)."""
    spec = capture.spec
    fields: dict[str, Any] = {}
    if spec.service_account_name:
        fields["serviceAccountName"] = spec.service_account_name
    if spec.image_pull_secrets:
        fields["imagePullSecrets"] = [{"name": name} for name in spec.image_pull_secrets]
    return fields


def build_worker_deployment(capture: MySQLCapture, owner: Owner, *, settings: OperatorSettings) -> dict[str, Any]:
    """Exactly one worker (two must never stream one server): replicas 1 (0 when paused), Recreate.

    The pod template carries the config hash, so a spec change rolls the worker. `--retry-errors`: an error
    a person must fix (a grant, a server setting, a missing Secret) keeps the pod up, saying why on /status,
    and the worker runs again after a backoff, rather than crash-looping with its reason in a log.
    """
    config_text = worker_config(capture, owner)
    port = metrics_port(capture)
    args = ["run", f"{CONFIG_DIR}/{CONFIG_KEY}", "--retry-errors"]
    if capture.spec.metrics.port == 0:
        args += ["--metrics-port", str(port)]
    annotations = {CONFIG_HASH: config_hash(config_text)}
    secret_env, secret_mounts, secret_volumes = _secrets(capture)
    pod_labels = labels(owner, "mysqlcapture-worker")
    probe: dict[str, Any] = {"httpGet": {"port": "metrics"}, "periodSeconds": 10, "timeoutSeconds": 5}
    resources = (
        capture.spec.resources.model_dump(mode="json", by_alias=True)
        if capture.spec.resources is not None
        else DEFAULT_RESOURCES
    )
    container = {
        "name": "worker",
        "image": capture.spec.worker_image or settings.worker_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "mysqlcapture_worker.cli"],
        "args": args,
        "env": [*secret_env, {"name": "TMPDIR", "value": "/tmp"}],
        "ports": [{"name": "metrics", "containerPort": port, "protocol": "TCP"}],
        # The main loop beats; a worker stalled for minutes is restarted (its checkpoint makes that safe).
        "livenessProbe": {**probe, "httpGet": {**probe["httpGet"], "path": "/healthz"}, "failureThreshold": 6},
        "readinessProbe": {**probe, "httpGet": {**probe["httpGet"], "path": "/readyz"}, "failureThreshold": 3},
        "resources": resources,
        "securityContext": {
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},  # transaction spill files; the root filesystem is read-only
            *secret_mounts,
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(owner, worker_name(owner), "mysqlcapture-worker"),
        "spec": {
            "replicas": 0 if capture.spec.paused else 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": worker_selector(owner)},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": annotations},
                "spec": {
                    # The worker talks to no Kubernetes API: no token in the pod, whichever account it runs as.
                    "automountServiceAccountToken": False,
                    **_identity(capture),
                    "terminationGracePeriodSeconds": 60,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": WORKER_UID,
                        "runAsGroup": WORKER_UID,
                        "fsGroup": WORKER_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [container],
                    "volumes": [
                        {"name": "config", "configMap": {"name": config_name(owner)}},
                        {"name": "tmp", "emptyDir": {}},
                        *secret_volumes,
                    ],
                },
            },
        },
    }


def build_service(capture: MySQLCapture, owner: Owner) -> dict[str, Any]:
    """The worker's metrics and status endpoint (what the ServiceMonitor scrapes and the operator reads)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, worker_name(owner), "mysqlcapture-worker"),
        "spec": {
            "selector": worker_selector(owner),
            "ports": [{"name": "metrics", "port": metrics_port(capture), "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def build_network_policy(capture: MySQLCapture, owner: Owner, *, settings: OperatorSettings) -> dict[str, Any]:
    """Who may reach the worker's unauthenticated /status and /metrics: the operator's namespace (it reads /status)
    and the metrics namespaces (Prometheus). Egress stays open: the source server and the change log's store."""
    namespaces = sorted({settings.lease_namespace, *settings.metrics_namespaces})
    peers = [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}} for namespace in namespaces
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(owner, worker_name(owner), "mysqlcapture-worker"),
        "spec": {
            "podSelector": {"matchLabels": worker_selector(owner)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": metrics_port(capture)}]}],
        },
    }


def build_service_monitor(capture: MySQLCapture, owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _metadata(owner, worker_name(owner), "mysqlcapture-worker"),
        "spec": {
            "selector": {"matchLabels": worker_selector(owner)},
            "namespaceSelector": {"matchNames": [owner.namespace]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": "30s"}],
        },
    }


_METRIC = re.compile(r"\b(mysqlcapture_[a-z_]+)\b(?!\s*\()(\s*\{)?")


def scope_expr(expr: str, owner: Owner) -> str:
    """`expr` with every mysqlcapture_* selector narrowed to this capture's series (beside its own matchers)."""
    matchers = f'capture="{owner.name}",namespace="{owner.namespace}"'
    return _METRIC.sub(lambda m: m.group(1) + "{" + matchers + ("," if m.group(2) else "}"), expr)


def build_prometheus_rule(capture: MySQLCapture, owner: Owner, *, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """The alert rules (monitoring/alerts.yaml) scoped to this capture, so N captures do not alert N times."""
    scoped = [{**rule, "expr": scope_expr(str(rule["expr"]), owner)} for rule in rules]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _metadata(owner, f"{owner.name}-alerts", "mysqlcapture-worker"),
        "spec": {"groups": [{"name": f"mysqlcapture-{owner.namespace}-{owner.name}", "rules": scoped}]},
    }


def build_compaction(
    capture: MySQLCapture, owner: Owner, *, settings: OperatorSettings, spark_operator: bool
) -> dict[str, Any] | None:
    """A ScheduledSparkApplication when the Spark operator is installed, else a spark-submit CronJob.

    None for a JSON-lines or Kafka sink: there is no change log to compact.
    """
    spec = capture.spec
    if spec.sink.type != "delta" or spec.sink.delta is None:
        return None
    common: dict[str, Any] = {
        "name": owner.name,
        "namespace": owner.namespace,
        "image": spec.compaction.image or settings.compaction_image,
        "schedule": spec.compaction.schedule,
        "changelog_uri": spec.sink.delta.uri,
        "output_uri": spec.compaction.output_uri,
        "retention_hours": spec.compaction.retention_hours,
        "service_account": settings.compaction_service_account,
        "spark_conf": dict(spec.compaction.spark_conf),
    }
    build = build_scheduled_spark_application if spark_operator else build_spark_submit_cronjob
    obj = build(**common)
    obj["metadata"]["ownerReferences"] = [owner.reference()]
    return obj


COMPACTION_KINDS = (
    ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication"),
    ("batch/v1", "CronJob"),
)
"""The kinds build_compaction may return; the one not built is removed when present."""
