"""The operator's own settings, from its environment (the chart sets them); nothing here is per capture."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# monitoring/alerts.yaml is the one source of the alert rules; an image copies it here or sets the variable.
DEFAULT_ALERTS = Path(__file__).resolve().parents[2] / "monitoring" / "alerts.yaml"


# sparkConf a capture may set by default: sizing, SQL and Delta settings. Nothing that picks an image, an
# identity, a namespace, a pod template, a Secret, environment, or code to load (spark.jars, extraClassPath, ...).
DEFAULT_SPARK_CONF = (
    "spark.sql.",
    "spark.databricks.delta.",
    "spark.driver.memory",
    "spark.driver.cores",
    "spark.executor.memory",
    "spark.executor.cores",
    "spark.executor.instances",
    "spark.dynamicAllocation.",
    "spark.memory.",
    "spark.default.parallelism",
    "spark.network.timeout",
    "spark.kubernetes.driver.request.cores",
    "spark.kubernetes.driver.limit.cores",
    "spark.kubernetes.executor.request.cores",
    "spark.kubernetes.executor.limit.cores",
)


def _list(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


@dataclass(frozen=True)
class OperatorSettings:
    """Defaults for the children and how the operator observes workers."""

    worker_image: str = "mysqlcapture/worker:0.1.0"
    """MYSQLCAPTURE_WORKER_IMAGE: the worker image when spec.workerImage is not set."""
    compaction_image: str = "mysqlcapture/compaction:0.1.0"
    """MYSQLCAPTURE_COMPACTION_IMAGE: the Spark job image when spec.compaction.image is not set."""
    allowed_images: tuple[str, ...] = ()
    """MYSQLCAPTURE_ALLOWED_IMAGES (comma-separated): images a capture may ask for besides the two defaults; an
    entry ending in `*` allows every image starting with the rest. Empty: only the defaults."""
    allowed_spark_conf: tuple[str, ...] = DEFAULT_SPARK_CONF
    """MYSQLCAPTURE_ALLOWED_SPARK_CONF (comma-separated): spec.compaction.sparkConf keys a capture may set, beside
    the defaults; an entry ending in `.` allows every key under it."""
    allowed_service_accounts: tuple[str, ...] = ()
    """MYSQLCAPTURE_ALLOWED_SERVICE_ACCOUNTS (comma-separated): ServiceAccounts a capture may run its worker as
    (spec.serviceAccountName). Empty: only the namespace's default."""
    network_policy: bool = False
    """MYSQLCAPTURE_NETWORK_POLICY ("true"): give each worker a NetworkPolicy: its unauthenticated /status and
    /metrics answer only the operator's namespace and the namespaces MYSQLCAPTURE_METRICS_NAMESPACES names."""
    metrics_namespaces: tuple[str, ...] = ()
    """MYSQLCAPTURE_METRICS_NAMESPACES (comma-separated): namespaces whose pods may scrape workers (Prometheus)."""
    compaction_service_account: str = "mysqlcapture-compaction"
    """MYSQLCAPTURE_COMPACTION_SERVICE_ACCOUNT: the Spark driver's service account."""
    worker_url: str = "http://{service}.{namespace}.svc:{port}"
    """MYSQLCAPTURE_WORKER_URL: where /status is read; {service}, {namespace}, {name}, {port} are filled in.
    Only tests change it (their workers run as local processes, which no Service can reach)."""
    status_interval: float = 15.0
    """MYSQLCAPTURE_STATUS_INTERVAL: seconds between reads of each worker's /status."""
    resync_interval: float = 120.0
    """MYSQLCAPTURE_RESYNC_INTERVAL: seconds between level-based re-reconciliations of each capture."""
    discovery_interval: float = 60.0
    """MYSQLCAPTURE_DISCOVERY_INTERVAL: seconds the operator keeps the API server's discovery answers: CRDs installed
    later (the Prometheus or Spark operator's) are used by the first reconcile after that (resync_interval)."""
    retry_seconds: float = 15.0
    """MYSQLCAPTURE_RETRY_SECONDS: delay before retrying a capture whose Secret or children failed."""
    purge_risk_seconds: float = 3600.0
    """MYSQLCAPTURE_PURGE_RISK_SECONDS: headroom below this many seconds is a purge risk (as the alert)."""
    purge_risk_files: int = 2
    """MYSQLCAPTURE_PURGE_RISK_FILES: fewer whole binlog files than this before the checkpoint's is a risk."""
    lease_name: str = "mysqlcapture-operator"
    """MYSQLCAPTURE_LEASE_NAME: the coordination.k8s.io Lease that elects the one acting replica."""
    lease_namespace: str = "default"
    """MYSQLCAPTURE_LEASE_NAMESPACE (else POD_NAMESPACE): where that Lease lives."""
    lease_seconds: float = 15.0
    """MYSQLCAPTURE_LEASE_SECONDS: a leader not renewing for this long is replaced."""
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    """POD_NAME (else host-pid): this replica's name in the Lease."""
    alerts_file: Path = DEFAULT_ALERTS
    """MYSQLCAPTURE_ALERTS_FILE: the alert rules each capture's PrometheusRule is built from."""
    http_port: int = 8080
    """MYSQLCAPTURE_HTTP_PORT: port of /metrics and /healthz, served by every replica from start; 0 picks a free
    port (logged as "metrics and health on :PORT")."""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> OperatorSettings:
        e = dict(os.environ) if env is None else env
        d = cls()
        return cls(
            worker_image=e.get("MYSQLCAPTURE_WORKER_IMAGE", d.worker_image),
            compaction_image=e.get("MYSQLCAPTURE_COMPACTION_IMAGE", d.compaction_image),
            allowed_images=_list(e.get("MYSQLCAPTURE_ALLOWED_IMAGES")),
            allowed_spark_conf=DEFAULT_SPARK_CONF + _list(e.get("MYSQLCAPTURE_ALLOWED_SPARK_CONF")),
            allowed_service_accounts=_list(e.get("MYSQLCAPTURE_ALLOWED_SERVICE_ACCOUNTS")),
            network_policy=e.get("MYSQLCAPTURE_NETWORK_POLICY", "").lower() in ("1", "true", "yes"),
            metrics_namespaces=_list(e.get("MYSQLCAPTURE_METRICS_NAMESPACES")),
            compaction_service_account=e.get("MYSQLCAPTURE_COMPACTION_SERVICE_ACCOUNT", d.compaction_service_account),
            worker_url=e.get("MYSQLCAPTURE_WORKER_URL", d.worker_url),
            status_interval=float(e.get("MYSQLCAPTURE_STATUS_INTERVAL", d.status_interval)),
            resync_interval=float(e.get("MYSQLCAPTURE_RESYNC_INTERVAL", d.resync_interval)),
            discovery_interval=float(e.get("MYSQLCAPTURE_DISCOVERY_INTERVAL", d.discovery_interval)),
            retry_seconds=float(e.get("MYSQLCAPTURE_RETRY_SECONDS", d.retry_seconds)),
            purge_risk_seconds=float(e.get("MYSQLCAPTURE_PURGE_RISK_SECONDS", d.purge_risk_seconds)),
            purge_risk_files=int(e.get("MYSQLCAPTURE_PURGE_RISK_FILES", d.purge_risk_files)),
            lease_name=e.get("MYSQLCAPTURE_LEASE_NAME", d.lease_name),
            lease_namespace=e.get("MYSQLCAPTURE_LEASE_NAMESPACE", e.get("POD_NAMESPACE", d.lease_namespace)),
            lease_seconds=float(e.get("MYSQLCAPTURE_LEASE_SECONDS", d.lease_seconds)),
            identity=e.get("POD_NAME", d.identity),
            alerts_file=Path(e.get("MYSQLCAPTURE_ALERTS_FILE", str(d.alerts_file))),
            http_port=int(e.get("MYSQLCAPTURE_HTTP_PORT", d.http_port)),
        )

    def alert_rules(self) -> list[dict[str, Any]]:
        """The rules of every group in the alerts file."""
        doc = yaml.safe_load(self.alerts_file.read_text())
        return [rule for group in doc["groups"] for rule in group["rules"]]
