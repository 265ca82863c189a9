"""Kubernetes manifests of the compaction job, as pure builders returning dicts (the operator creates them).

Kubeflow Spark operator (sparkoperator.k8s.io/v1beta2): `build_spark_application`, and
`build_scheduled_spark_application` for the schedule. Without that operator: `build_spark_submit_cronjob`, a
CronJob whose pod runs `spark-submit --master k8s://...` in client mode (the pod is the driver).
"""

from __future__ import annotations

from typing import Any

from mysqlcapture_api.compaction_image import ENTRYPOINT, IMAGE_JARS, SPARK_VERSION

LABEL = "cdc.mysqlcapture.io/capture"


def _arguments(changelog_uri: str, output_uri: str | None, retention_hours: int) -> list[str]:
    args = ["run", "--changelog", changelog_uri, "--retention-hours", str(retention_hours)]
    return [*args, "--output", output_uri] if output_uri else args


SPARK_UID = 185  # the `spark` user of the Apache Spark images
# The driver and executors run like the worker: not root, no privilege escalation, no capabilities, the runtime's
# default seccomp profile. The root filesystem stays writable: Spark writes its scratch and work directories there.
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": SPARK_UID,
    "runAsGroup": SPARK_UID,
    "fsGroup": SPARK_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
# spark-submit in client mode: this pod is the driver (spark.driver.memory 1g plus the JVM's overhead).
SUBMIT_RESOURCES = {"requests": {"cpu": "500m", "memory": "1536Mi"}, "limits": {"memory": "2Gi"}}


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "mysqlcapture-compaction", LABEL: name}


def _spark_conf(extra: dict[str, str] | None) -> dict[str, str]:
    return {"spark.jars": IMAGE_JARS, "spark.sql.shuffle.partitions": "8", **(extra or {})}


def _application_spec(
    *,
    name: str,
    image: str,
    changelog_uri: str,
    output_uri: str | None,
    retention_hours: int,
    service_account: str,
    spark_conf: dict[str, str] | None,
) -> dict[str, Any]:
    return {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "mainApplicationFile": ENTRYPOINT,
        "arguments": _arguments(changelog_uri, output_uri, retention_hours),
        "sparkVersion": SPARK_VERSION,
        "sparkConf": _spark_conf(spark_conf),
        "restartPolicy": {"type": "Never"},
        "driver": {
            "cores": 1,
            "coreLimit": "1",
            "memory": "1g",
            "serviceAccount": service_account,
            "labels": _labels(name),
            "podSecurityContext": POD_SECURITY,
            "securityContext": CONTAINER_SECURITY,
        },
        "executor": {
            "instances": 1,
            "cores": 1,
            "coreLimit": "1",
            "memory": "2g",
            "labels": _labels(name),
            "podSecurityContext": POD_SECURITY,
            "securityContext": CONTAINER_SECURITY,
        },
    }


def build_spark_application(
    *,
    name: str,
    namespace: str,
    image: str,
    changelog_uri: str,
    output_uri: str | None = None,
    retention_hours: int = 168,
    service_account: str = "mysqlcapture-compaction",
    spark_conf: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One compaction run as a SparkApplication named `<name>-compaction`."""
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": f"{name}-compaction", "namespace": namespace, "labels": _labels(name)},
        "spec": _application_spec(
            name=name,
            image=image,
            changelog_uri=changelog_uri,
            output_uri=output_uri,
            retention_hours=retention_hours,
            service_account=service_account,
            spark_conf=spark_conf,
        ),
    }


def build_scheduled_spark_application(
    *,
    name: str,
    namespace: str,
    image: str,
    schedule: str,
    changelog_uri: str,
    output_uri: str | None = None,
    retention_hours: int = 168,
    service_account: str = "mysqlcapture-compaction",
    spark_conf: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Compaction on `schedule` (cron); runs never overlap (a run must see the previous one's commits)."""
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "ScheduledSparkApplication",
        "metadata": {"name": f"{name}-compaction", "namespace": namespace, "labels": _labels(name)},
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "successfulRunHistoryLimit": 1,
            "failedRunHistoryLimit": 3,
            "template": _application_spec(
                name=name,
                image=image,
                changelog_uri=changelog_uri,
                output_uri=output_uri,
                retention_hours=retention_hours,
                service_account=service_account,
                spark_conf=spark_conf,
            ),
        },
    }


def build_spark_submit_cronjob(
    *,
    name: str,
    namespace: str,
    image: str,
    schedule: str,
    changelog_uri: str,
    output_uri: str | None = None,
    retention_hours: int = 168,
    service_account: str = "mysqlcapture-compaction",
    spark_conf: dict[str, str] | None = None,
    api_server: str = "https://kubernetes.default.svc",
) -> dict[str, Any]:
    """Compaction with Spark's native Kubernetes scheduler, from a CronJob (no Spark operator needed)."""
    conf = {
        **_spark_conf(spark_conf),
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.container.image": image,
        "spark.kubernetes.authenticate.driver.serviceAccountName": service_account,
        "spark.kubernetes.executor.label." + LABEL: name,
        "spark.driver.host": "$(POD_IP)",
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.executor.instances": "1",
    }
    command = ["/opt/spark/bin/spark-submit", "--master", f"k8s://{api_server}", "--deploy-mode", "client"]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command += [ENTRYPOINT.removeprefix("local://"), *_arguments(changelog_uri, output_uri, retention_hours)]
    pod = {
        "serviceAccountName": service_account,
        "restartPolicy": "Never",
        "securityContext": POD_SECURITY,
        "containers": [
            {
                "name": "spark-submit",
                "image": image,
                "command": command,
                "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "resources": SUBMIT_RESOURCES,
                "securityContext": CONTAINER_SECURITY,
            }
        ],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": f"{name}-compaction", "namespace": namespace, "labels": _labels(name)},
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {"backoffLimit": 2, "template": {"metadata": {"labels": _labels(name)}, "spec": pod}}
            },
        },
    }
