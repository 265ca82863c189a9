"""The compaction's Kubernetes manifests, validated against the Spark operator's published CRD schemas."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml
from mysqlcapture_operator import compaction_jobs as k8s

from tests.k8s import thirdparty

pytestmark = pytest.mark.unit
ARGS = {
    "name": "shop",
    "namespace": "cdc",
    "image": "registry.example/mysqlcapture-compaction:0.1.0",
    "changelog_uri": "s3://lake/shop/changelog",
}


def crd_schema(filename: str) -> dict[str, Any]:
    # The pinned Spark operator's CRD, fetched into the cache when missing; a failed fetch fails here, never skips.
    path = thirdparty.crd_file(filename)
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    versions = {v["name"]: v for v in docs[0]["spec"]["versions"]}
    return versions["v1beta2"]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(
    ("builder", "crd", "extra"),
    [
        (k8s.build_spark_application, "sparkoperator.k8s.io_sparkapplications.yaml", {}),
        (
            k8s.build_scheduled_spark_application,
            "sparkoperator.k8s.io_scheduledsparkapplications.yaml",
            {"schedule": "*/15 * * * *"},
        ),
    ],
    ids=["SparkApplication", "ScheduledSparkApplication"],
)
def test_operator_objects_match_the_crd_schema(builder: Any, crd: str, extra: dict[str, Any]) -> None:
    doc = builder(**ARGS, **extra)
    jsonschema.validate(doc, crd_schema(crd))
    spec = doc["spec"].get("template", doc["spec"])
    assert spec["mainApplicationFile"] == "local:///opt/mysqlcapture/entrypoint.py"
    assert spec["arguments"] == ["run", "--changelog", "s3://lake/shop/changelog", "--retention-hours", "168"]
    assert "io.delta_delta-spark_4.2_2.13-4.4.0.jar" in spec["sparkConf"]["spark.jars"]
    assert doc["metadata"] == {
        "name": "shop-compaction",
        "namespace": "cdc",
        "labels": {"app.kubernetes.io/name": "mysqlcapture-compaction", "cdc.mysqlcapture.io/capture": "shop"},
    }


def test_scheduled_runs_never_overlap() -> None:
    doc = k8s.build_scheduled_spark_application(**ARGS, schedule="@hourly", output_uri="s3://lake/shop/state")
    assert doc["spec"]["schedule"] == "@hourly"
    assert doc["spec"]["concurrencyPolicy"] == "Forbid"
    assert doc["spec"]["template"]["arguments"][-2:] == ["--output", "s3://lake/shop/state"]


def test_native_scheduler_cronjob_runs_spark_submit_against_the_cluster() -> None:
    doc = k8s.build_spark_submit_cronjob(**ARGS, schedule="*/5 * * * *", spark_conf={"spark.executor.memory": "4g"})
    assert (doc["apiVersion"], doc["kind"]) == ("batch/v1", "CronJob")
    assert doc["spec"]["concurrencyPolicy"] == "Forbid"
    container = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[:5] == [
        "/opt/spark/bin/spark-submit", "--master", "k8s://https://kubernetes.default.svc", "--deploy-mode", "client"
    ]  # fmt: skip
    confs = dict(command[i + 1].split("=", 1) for i, word in enumerate(command) if word == "--conf")
    assert confs["spark.kubernetes.container.image"] == ARGS["image"]
    assert confs["spark.kubernetes.namespace"] == "cdc"
    assert confs["spark.executor.memory"] == "4g"
    assert confs["spark.driver.host"] == "$(POD_IP)"
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert command[-6:] == [
        "/opt/mysqlcapture/entrypoint.py", "run", "--changelog", "s3://lake/shop/changelog", "--retention-hours", "168"
    ]  # fmt: skip


def test_compaction_pods_are_hardened_like_the_worker_and_have_resources() -> None:
    cron = k8s.build_spark_submit_cronjob(**ARGS, schedule="@hourly")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 185
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert container["resources"]["requests"]["memory"] == "1536Mi" and container["resources"]["limits"]
    spec = k8s.build_scheduled_spark_application(**ARGS, schedule="@hourly")["spec"]["template"]
    for role in ("driver", "executor"):
        assert spec[role]["podSecurityContext"]["runAsNonRoot"] is True, role
        assert spec[role]["securityContext"]["allowPrivilegeEscalation"] is False, role
        assert spec[role]["coreLimit"] == "1" and spec[role]["memory"], role
