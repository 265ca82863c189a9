"""The operator against a real API server and controller-manager: children, validation, rolls, GC, errors."""

from __future__ import annotations

import base64
import copy
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_api.manifest import validate_manifest
from mysqlcapture_dev.embedded.mariadb import free_port
from mysqlcapture_operator import builders
from mysqlcapture_operator import compaction_jobs as compaction_k8s
from mysqlcapture_operator.builders import Owner
from mysqlcapture_operator.kube import Kube, KubeError, load_api_client
from mysqlcapture_operator.settings import OperatorSettings

from tests.k8s.fixtures import Cluster
from tests.k8s.processes import LocalPod, OperatorProcess, wait_for
from tests.support import manifest, wait_until

CAPTURES = ("cdc.mysqlcapture.io/v1alpha1", "MySQLCapture")
# What the test operators change from the defaults: workers run as local processes (no Service reaches
# them), so /status is read at 127.0.0.1; short intervals keep the tests fast.
TEST_OPERATOR_ENV = {
    "MYSQLCAPTURE_WORKER_URL": "http://127.0.0.1:{port}",
    "MYSQLCAPTURE_STATUS_INTERVAL": "1",
    "MYSQLCAPTURE_RETRY_SECONDS": "2",
    "MYSQLCAPTURE_RESYNC_INTERVAL": "30",
    "MYSQLCAPTURE_PURGE_RISK_SECONDS": "0",  # test binlogs are tiny: only the files criterion is meaningful
    "MYSQLCAPTURE_LEASE_SECONDS": "6",
    "MYSQLCAPTURE_HTTP_PORT": "0",  # several operators run at once: each serves /metrics on a free port
    "MYSQLCAPTURE_ALLOWED_IMAGES": "registry.test/cdc/*",  # the administrator's image policy
    "MYSQLCAPTURE_NETWORK_POLICY": "true",
    "MYSQLCAPTURE_METRICS_NAMESPACES": "monitoring",
}


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """One operator for the module, watching the namespaces named op-*."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    env = {**TEST_OPERATOR_ENV, "MYSQLCAPTURE_LEASE_NAME": "op-tests", "POD_NAME": "op-main"}
    proc = OperatorProcess(cluster, log, namespaces=["op-*"], env=env)
    try:
        wait_until(lambda: "starting the operator" in proc.log_text() or not proc.alive(), timeout=30, what="leading")
        assert proc.alive(), proc.log_text()
        # Ready once it reconciles a capture in a namespace created after its start: kopf's watch of op-* namespaces
        # can miss one created while it starts, until its next listing (measured: 60 s once, over 180 s once), and
        # each test creates its own namespace right away. A probe in a namespace created later is seen by the watch.
        for attempt in range(1, 4):
            probe = cluster.new_namespace("op")
            password_secret(cluster, probe)
            cluster.kube.apply(capture_doc("probe", probe, port=free_port()))
            try:
                wait_until(
                    lambda probe=probe: f"reconciled {probe}/probe" in proc.log_text(),
                    timeout=90,
                    what=f"the operator's first reconcile (probe {attempt} of 3)",
                )
                break
            except AssertionError:
                if attempt == 3:
                    raise
        yield proc
    finally:
        proc.stop()
        print(proc.log_text()[-4000:])


@pytest.fixture
def ns(cluster: Cluster) -> str:
    return cluster.new_namespace("op")


def password_secret(cluster: Cluster, namespace: str, name: str = "mysql", password: str = "root") -> None:
    cluster.kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"password": base64.b64encode(password.encode()).decode()},
        }
    )


def capture_doc(name: str, namespace: str, *, port: int, secret: str = "mysql", **spec: Any) -> dict[str, Any]:
    doc = manifest(
        name,
        port=port,
        sink={"type": "delta", "delta": {"uri": f"/data/{name}/changelog"}},
        extra_spec={"metrics": {"port": free_port()}, **spec},
    )
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["source"]["passwordFrom"] = {"secretKeyRef": {"name": secret, "key": "password"}}
    return doc


def status_of(cluster: Cluster, name: str, namespace: str) -> dict[str, Any]:
    obj = cluster.kube.get(*CAPTURES, name, namespace) or {}
    return dict(obj.get("status") or {})


def status_where(
    cluster: Cluster, name: str, ns: str, pod: LocalPod, what: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The capture's status once `check` holds, failing at once if the worker run for it has exited."""

    def probe() -> dict[str, Any] | None:
        assert pod.alive(), f"the worker exited with {pod.proc.returncode}: {pod.log_text()[-3000:]}"
        status = status_of(cluster, name, ns)
        return status if check(status) else None

    return wait_until(probe, timeout=90, what=what, interval=0.3)  # type: ignore[no-any-return]


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == kind), {})


def children(name: str) -> list[tuple[str, str, str]]:
    return [
        ("v1", "ConfigMap", f"{name}-config"),
        ("apps/v1", "Deployment", f"{name}-worker"),
        ("v1", "Service", f"{name}-worker"),
        ("networking.k8s.io/v1", "NetworkPolicy", f"{name}-worker"),
        ("monitoring.coreos.com/v1", "ServiceMonitor", f"{name}-worker"),
        ("monitoring.coreos.com/v1", "PrometheusRule", f"{name}-alerts"),
        ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication", f"{name}-compaction"),
    ]


def test_apply_creates_every_child_owned_and_valid(cluster: Cluster, operator: OperatorProcess, ns: str) -> None:
    password_secret(cluster, ns)
    doc = capture_doc("orders", ns, port=free_port(), resources={"requests": {"cpu": "100m"}, "limits": {}})
    created = cluster.kube.apply(doc)
    uid = created["metadata"]["uid"]
    objs = {kind: wait_for(cluster, api, kind, name, ns) for api, kind, name in children("orders")}
    for kind, obj in objs.items():
        refs = obj["metadata"].get("ownerReferences", [])
        assert [(r["kind"], r["name"], r["uid"], r["controller"]) for r in refs] == [
            ("MySQLCapture", "orders", uid, True)
        ], kind

    dep = objs["Deployment"]["spec"]
    pod = dep["template"]["spec"]
    container = pod["containers"][0]
    assert dep["replicas"] == 1 and dep["strategy"] == {"type": "Recreate"}, dep
    # The password's Secret is mounted (the operator never reads it); the worker reads the file at each connection.
    assert container["env"][0] == {
        "name": "MYSQLCAPTURE_SOURCE_PASSWORD_FILE",
        "value": "/var/run/secrets/mysqlcapture/password",
    }
    assert {"name": "password", "mountPath": "/var/run/secrets/mysqlcapture", "readOnly": True} in container[
        "volumeMounts"
    ]
    (volume,) = (v for v in pod["volumes"] if v["name"] == "password")
    assert volume["secret"] == {
        "secretName": "mysql",
        "items": [{"key": "password", "path": "password"}],
        "optional": True,
        "defaultMode": 0o440,
    }
    assert "--retry-errors" in container["args"]
    port = doc["spec"]["metrics"]["port"]
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    assert container["resources"] == {"requests": {"cpu": "100m"}}
    assert builders.CONFIG_HASH in dep["template"]["metadata"]["annotations"]

    # The ConfigMap holds a manifest the worker itself accepts, with the API server's defaults filled in.
    config = validate_manifest(__import__("yaml").safe_load(objs["ConfigMap"]["data"]["capture.yaml"]))
    assert config.metadata.name == "orders" and config.spec.source.port == doc["spec"]["source"]["port"]
    assert config.spec.flush.max_events == 50000

    # Only the operator's namespace and the metrics namespace reach the worker's port.
    policy = objs["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"]["cdc.mysqlcapture.io/capture"] == "orders"
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": port}]
    allowed = [p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in rule["from"]]
    assert allowed == sorted({"default", "monitoring"}), allowed  # the operator's (lease) namespace here: default

    rules = objs["PrometheusRule"]["spec"]["groups"][0]["rules"]
    assert {r["alert"] for r in rules} >= {"MySQLCaptureBinlogPurgeRisk", "MySQLCaptureDown", "MySQLCaptureFailover"}
    assert all(f'capture="orders",namespace="{ns}"' in r["expr"] for r in rules)
    assert objs["ScheduledSparkApplication"]["spec"]["schedule"] == "*/15 * * * *"

    # The kube-controller-manager's Deployment and ReplicaSet controllers act on what the operator made.
    wait_until(lambda: cluster.kube.list("apps/v1", "ReplicaSet", ns), timeout=30, what="the Deployment's ReplicaSet")
    wait_until(lambda: cluster.kube.list("v1", "Pod", ns), timeout=30, what="the ReplicaSet's Pod")

    # No worker runs: the status says so, and which URL was tried.
    status = wait_until(lambda: (s := status_of(cluster, "orders", ns)).get("phase") and s, timeout=30, what="a status")
    assert status["phase"] == "Pending", status
    ready = condition(status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "WorkerUnreachable"), status
    assert f"127.0.0.1:{port}/status" in ready["message"], status


def test_every_built_object_passes_a_server_side_dry_run(cluster: Cluster, ns: str) -> None:
    """Both compaction variants and the one-off SparkApplication too, against the real third-party schemas."""
    password_secret(cluster, ns)
    doc = capture_doc("dry", ns, port=3306)
    owner_obj = cluster.kube.apply(doc)
    capture = validate_manifest(doc)
    owner = Owner("dry", ns, owner_obj["metadata"]["uid"])
    settings = OperatorSettings()
    objects = [
        builders.build_config_map(capture, owner),
        builders.build_worker_deployment(capture, owner, settings=settings),
        builders.build_service(capture, owner),
        builders.build_network_policy(capture, owner, settings=OperatorSettings(metrics_namespaces=("monitoring",))),
        builders.build_service_monitor(capture, owner),
        builders.build_prometheus_rule(capture, owner, rules=settings.alert_rules()),
        builders.build_compaction(capture, owner, settings=settings, spark_operator=True),
        builders.build_compaction(capture, owner, settings=settings, spark_operator=False),
        compaction_k8s.build_spark_application(name="dry", namespace=ns, image="img", changelog_uri="s3://b/changelog"),
    ]
    applied = [cluster.kube.apply(obj, dry_run=True) for obj in objects if obj is not None]
    assert [a["kind"] for a in applied] == [
        "ConfigMap",
        "Deployment",
        "Service",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
        "ScheduledSparkApplication",
        "CronJob",
        "SparkApplication",
    ]


@pytest.mark.parametrize(
    ("change", "field_path", "message"),
    [
        # A type/range error from the generated OpenAPI schema.
        ({"source": {"port": 70000}}, "spec.source.port", "should be less than or equal to 65535"),
        # A cross-field CEL rule (x-kubernetes-validations), reported at its object.
        (
            {"source": {"passwordFrom": {"env": "X", "secretKeyRef": {"name": "s", "key": "k"}}}},
            "spec.source.passwordFrom",
            "set exactly one of env, file, secretKeyRef",
        ),
        ({"compaction": {"schedule": "99 * * * *"}}, "spec.compaction.schedule", "e.g. '*/15 * * * *'"),
        ({"tables": {"include": ["shop"]}}, "spec.tables.include[0]", "e.g. 'shop.*' or '*.orders'"),
        ({"start": {"from": "gtid"}}, "spec.start.gtidSet", "required when from is gtid"),
    ],
    ids=["port-range", "password-one-of", "cron-minute-99", "table-glob", "gtid-required"],
)
def test_an_invalid_capture_is_refused_by_the_api_server(
    cluster: Cluster, ns: str, change: dict[str, Any], field_path: str, message: str
) -> None:
    doc = capture_doc("bad", ns, port=3306)
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(doc["spec"].get(key), dict):
            doc["spec"][key] = {**doc["spec"][key], **value}
        else:
            doc["spec"][key] = value
    with pytest.raises(KubeError) as err:
        cluster.kube.apply(doc)
    assert err.value.status == 422
    assert field_path in err.value.message and message in err.value.message, err.value.message
    assert cluster.kube.get(*CAPTURES, "bad", ns) is None


@pytest.mark.parametrize("name", ["a" * 42, "orders.v2"], ids=["too-long-for-its-cronjob", "with-a-dot"])
def test_a_name_its_children_cannot_take_is_refused_by_the_api_server(cluster: Cluster, ns: str, name: str) -> None:
    """Refused at apply, with a message naming the limit and an example, rather than a Deployment created and its
    Service refused."""
    with pytest.raises(KubeError) as err:
        cluster.kube.apply(capture_doc(name, ns, port=3306))
    assert err.value.status == 422
    assert "metadata.name: use at most 41 lowercase letters, digits and '-'" in err.value.message, err.value.message
    assert "e.g. orders-db1" in err.value.message
    assert cluster.kube.get(*CAPTURES, name, ns) is None


def _template(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    dep = cluster.kube.get("apps/v1", "Deployment", f"{name}-worker", ns)
    assert dep is not None
    return dict(dep["spec"])


def test_a_spec_change_rolls_the_worker_and_pause_scales_to_zero(
    cluster: Cluster, operator: OperatorProcess, ns: str
) -> None:
    password_secret(cluster, ns)
    doc = capture_doc("roll", ns, port=free_port())
    cluster.kube.apply(doc)
    wait_for(cluster, "apps/v1", "Deployment", "roll-worker", ns)
    before = _template(cluster, "roll", ns)["template"]["metadata"]["annotations"][builders.CONFIG_HASH]

    changed = copy.deepcopy(doc)
    changed["spec"]["flush"] = {"maxEvents": 777}
    cluster.kube.apply(changed)
    after = wait_until(
        lambda: (
            (h := _template(cluster, "roll", ns)["template"]["metadata"]["annotations"][builders.CONFIG_HASH]) != before
            and h
        ),
        timeout=30,
        what="the config hash to change",
    )
    assert after != before
    config = cluster.kube.get("v1", "ConfigMap", "roll-config", ns)
    assert config is not None and "maxEvents: 777" in config["data"]["capture.yaml"]
    # A new pod template: the Deployment controller makes a second ReplicaSet (Recreate: the old scales to 0).
    wait_until(lambda: len(cluster.kube.list("apps/v1", "ReplicaSet", ns)) == 2, timeout=30, what="a second ReplicaSet")

    changed["spec"]["paused"] = True
    cluster.kube.apply(changed)
    wait_until(lambda: _template(cluster, "roll", ns)["replicas"] == 0, timeout=30, what="replicas 0 when paused")
    status = wait_until(
        lambda: condition(s := status_of(cluster, "roll", ns), "Ready").get("reason") == "Paused" and s,
        timeout=30,
        what="the Paused condition",
    )
    assert status["phase"] == "Pending"


def test_deleting_the_capture_removes_its_children(cluster: Cluster, operator: OperatorProcess, ns: str) -> None:
    password_secret(cluster, ns)
    cluster.kube.apply(capture_doc("gone", ns, port=free_port()))
    for api, kind, name in children("gone"):
        wait_for(cluster, api, kind, name, ns)
    # kopf holds a finalizer on the capture (what examples/README.md's uninstall order is about).
    capture = cluster.kube.get(*CAPTURES, "gone", ns)
    assert capture is not None and capture["metadata"].get("finalizers"), capture["metadata"]
    assert cluster.kube.delete(*CAPTURES, "gone", ns)
    for api, kind, name in children("gone"):
        wait_until(
            lambda api=api, kind=kind, name=name: cluster.kube.get(api, kind, name, ns) is None,
            timeout=60,
            what=f"the garbage collector to delete {kind} {name}",
        )


def test_images_and_spark_conf_are_the_administrators_choice(
    cluster: Cluster, operator: OperatorProcess, ns: str
) -> None:
    """A capture asking for an image or a sparkConf key the operator's policy does not allow gets no children (nothing
    runs its image with its Secret, or its code under the compaction ServiceAccount): a condition names the field
    and the fix. An allowed image is used; a capture fixed to the policy gets its worker."""
    password_secret(cluster, ns)
    cluster.kube.apply(capture_doc("evil", ns, port=free_port(), workerImage="attacker.example/miner:1"))
    jars = {"schedule": "@hourly", "sparkConf": {"spark.jars": "https://attacker.example/x.jar"}}
    cluster.kube.apply(capture_doc("jars", ns, port=free_port(), compaction=jars))
    cluster.kube.apply(capture_doc("allowed", ns, port=free_port(), workerImage="registry.test/cdc/worker:2"))
    for name, reason, words in [
        ("evil", "ImageNotAllowed", ["spec.workerImage 'attacker.example/miner:1'", "allowedImages"]),
        ("jars", "SparkConfNotAllowed", ["spec.compaction.sparkConf sets spark.jars", "compaction.allowedSparkConf"]),
    ]:
        status = wait_until(
            lambda name=name, reason=reason: (
                condition(s := status_of(cluster, name, ns), "Ready").get("reason") == reason and s
            ),
            timeout=30,
            what=f"the {reason} condition",
        )
        ready = condition(status, "Ready")
        assert ready["status"] == "False" and status["phase"] == "Error", status
        assert all(w in ready["message"] for w in words), ready["message"]
    deployment = wait_for(cluster, "apps/v1", "Deployment", "allowed-worker", ns, timeout=30)
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.test/cdc/worker:2"
    time.sleep(3)  # a retry or resync would have created them by now
    for name in ("evil", "jars"):
        assert cluster.kube.get("apps/v1", "Deployment", f"{name}-worker", ns) is None
        assert cluster.kube.get("v1", "ConfigMap", f"{name}-config", ns) is None
    # The status stays what the policy says: the observation loop does not overwrite it.
    assert condition(status_of(cluster, "evil", ns), "Ready")["reason"] == "ImageNotAllowed"
    # Fixed to the policy: the worker is created.
    doc = capture_doc("evil", ns, port=free_port())
    cluster.kube.apply(doc)
    wait_for(cluster, "apps/v1", "Deployment", "evil-worker", ns, timeout=30)
    assert operator.alive()


def test_two_operator_replicas_only_one_acts(cluster: Cluster, tmp_path: Path) -> None:
    env = {**TEST_OPERATOR_ENV, "MYSQLCAPTURE_LEASE_NAME": "ha-tests", "MYSQLCAPTURE_LEASE_SECONDS": "4"}
    ns = cluster.new_namespace("ha")  # before kopf starts: one created while it starts can be missed for a minute
    first = OperatorProcess(cluster, tmp_path / "a.log", namespaces=["ha-*"], env={**env, "POD_NAME": "op-a"})
    wait_until(lambda: "starting the operator" in first.log_text(), timeout=30, what="the first to lead")
    second = OperatorProcess(cluster, tmp_path / "b.log", namespaces=["ha-*"], env={**env, "POD_NAME": "op-b"})
    try:
        wait_until(lambda: "waiting to lead" in second.log_text(), timeout=30, what="the second to wait")
        password_secret(cluster, ns)
        cluster.kube.apply(capture_doc("one", ns, port=free_port()))
        wait_for(cluster, "apps/v1", "Deployment", "one-worker", ns)
        wait_until(lambda: status_of(cluster, "one", ns).get("phase"), timeout=30, what="a status")
        lease = cluster.kube.get("coordination.k8s.io/v1", "Lease", "ha-tests", "default")
        assert lease is not None and lease["spec"]["holderIdentity"] == "op-a"
        wait_until(lambda: "reconciled" in first.log_text(), timeout=30, what="the leader's reconcile log")
        assert "reconciled" not in second.log_text() and "starting the operator" not in second.log_text()

        first.stop(sig=9)  # a crashed leader does not release the lease: the standby waits for it to expire
        wait_until(lambda: "starting the operator" in second.log_text(), timeout=30, what="the standby to lead")
        cluster.kube.apply(capture_doc("two", ns, port=free_port()))
        wait_for(cluster, "apps/v1", "Deployment", "two-worker", ns)
        lease = cluster.kube.get("coordination.k8s.io/v1", "Lease", "ha-tests", "default")
        assert lease is not None and lease["spec"]["holderIdentity"] == "op-b"
        assert lease["spec"]["leaseTransitions"] == 1
    finally:
        first.stop()
        second.stop()


def test_a_user_who_may_only_write_captures_gets_no_further_through_one(
    cluster: Cluster, operator: OperatorProcess, ns: str
) -> None:
    """A user allowed to manage MySQLCaptures in one namespace, and nothing else, acting through impersonation on the
    real API server: she cannot create a Deployment or read a Secret herself, and a capture cannot do it for her:
    one asking for her image or her Spark code gets no children, and the operator holds no Secret to hand over."""
    cluster.kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "capture-writer", "namespace": ns},
            "rules": [
                {
                    "apiGroups": ["cdc.mysqlcapture.io"],
                    "resources": ["mysqlcaptures"],
                    "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"],
                }
            ],
        }
    )
    cluster.kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "capture-writer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
        }
    )
    password_secret(cluster, ns)  # someone else's Secret in her namespace
    api = load_api_client(str(cluster.kubeconfig))
    api.set_default_header("Impersonate-User", "alice")
    alice = Kube(api, field_manager="alice")
    worker = builders.build_worker_deployment(
        validate_manifest(capture_doc("direct", ns, port=3306)),
        Owner("direct", ns, "0"),
        settings=OperatorSettings(),
    )
    worker["spec"]["template"]["spec"]["containers"][0]["image"] = "attacker.example/miner:1"
    for attempt in (
        lambda: alice.apply(worker),
        lambda: alice.get("v1", "Secret", "mysql", ns),
    ):
        with pytest.raises(KubeError) as denied:
            attempt()
        assert denied.value.status == 403, denied.value
    # Through a capture: refused by the operator's policy, nothing created.
    alice.apply(capture_doc("sneaky", ns, port=3306, workerImage="attacker.example/miner:1"))
    jars = {"sparkConf": {"spark.kubernetes.authenticate.driver.serviceAccountName": "default"}}
    alice.apply(capture_doc("sneakier", ns, port=3306, compaction=jars))
    for name, reason in (("sneaky", "ImageNotAllowed"), ("sneakier", "SparkConfNotAllowed")):
        wait_until(
            lambda name=name, reason=reason: condition(status_of(cluster, name, ns), "Ready").get("reason") == reason,
            timeout=30,
            what=f"{name}: {reason}",
        )
        assert cluster.kube.get("apps/v1", "Deployment", f"{name}-worker", ns) is None
        assert cluster.kube.get(*compaction_kind(), f"{name}-compaction", ns) is None
    # What she may do, she can: a capture within the policy gets its worker, with the operator's image.
    alice.apply(capture_doc("fine", ns, port=3306))
    deployment = wait_for(cluster, "apps/v1", "Deployment", "fine-worker", ns, timeout=30)
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == OperatorSettings().worker_image


def compaction_kind() -> tuple[str, str]:
    return ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication")
