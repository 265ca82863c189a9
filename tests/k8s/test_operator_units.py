"""The operator's pure parts: status computation, builders, alert scoping, RBAC coverage (no cluster)."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import yaml
from mysqlcapture_api.manifest import validate_manifest
from mysqlcapture_api.worker_status import WorkerStatus, WorkerStatusError, parse_worker_status
from mysqlcapture_operator import builders, rbac, reconcile
from mysqlcapture_operator.builders import Owner
from mysqlcapture_operator.metrics import PHASES, CompactionRuns, OperatorMetrics
from mysqlcapture_operator.settings import OperatorSettings
from mysqlcapture_operator.status import Observation, Problem, changed, compute
from prometheus_client import CollectorRegistry

from tests.support import manifest, streaming_worker_status

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=UTC)
OWNER = Owner("orders", "shop", "uid-1")


def worker(**overrides: Any) -> WorkerStatus:
    """A /status answer of a streaming worker with comfortable headroom, parsed as the operator parses it."""
    return parse_worker_status(json.dumps(streaming_worker_status(**overrides)))


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


@pytest.mark.parametrize(
    ("obs", "phase", "ready"),
    [
        (Observation(1, T0, worker=worker()), "Streaming", ("True", "Streaming")),
        (Observation(1, T0, worker=worker(phase="Degraded")), "Degraded", ("False", "Degraded")),
        # A failover counted while the worker is not streaming yet.
        (Observation(1, T0, worker=worker(phase="Degraded", failovers=1)), "FailingOver", ("False", "FailingOver")),
        (Observation(1, T0, worker=worker(phase="Error", error="BinlogPurged: x")), "Error", ("False", "Error")),
        # The worker's reason word (run --retry-errors) becomes the condition's reason.
        (
            Observation(
                1, T0, worker=worker(phase="Error", error="user 'c' lacks RELOAD", error_reason="MissingGrant")
            ),
            "Error",
            ("False", "MissingGrant"),
        ),
        (Observation(1, T0, worker=worker(binlog_purged=True)), "Error", ("False", "BinlogPurged")),
        (
            Observation(1, T0, worker=worker(phase="Snapshotting", snapshot=40.0)),
            "Snapshotting",
            ("False", "Snapshotting"),
        ),
        # A finished snapshot's percent does not make a streaming worker look like it is snapshotting.
        (Observation(1, T0, worker=worker(snapshot=100.0)), "Streaming", ("True", "Streaming")),
        (Observation(1, T0, unreachable="refused"), "Pending", ("False", "WorkerUnreachable")),
        (Observation(1, T0, paused=True), "Pending", ("False", "Paused")),
        (Observation(1, T0, problem=Problem("SecretNotFound", "no secret")), "Error", ("False", "SecretNotFound")),
    ],
    ids=[
        "streaming",
        "degraded",
        "failing-over",
        "error",
        "error-reason-from-the-worker",
        "binlog-purged",
        "snapshot",
        "snapshot-done",
        "unreachable",
        "paused",
        "no-secret",
    ],
)
def test_phase_and_ready(obs: Observation, phase: str, ready: tuple[str, str]) -> None:
    status, _ = compute({}, obs)
    assert status["phase"] == phase
    assert conditions(status)["Ready"] == ready


def test_an_unchanged_observation_patches_nothing_and_keeps_transition_times() -> None:
    first, events = compute({}, Observation(3, T0, worker=worker()))
    again, more = compute(first, Observation(3, T0 + timedelta(minutes=5), worker=worker()))
    assert again == first and changed(first, again) is None and more == []
    assert all(
        c["lastTransitionTime"] == "2026-01-01T00:00:00Z" and c["observedGeneration"] == 3 for c in again["conditions"]
    )
    assert [e.reason for e in events] == []


def test_a_flip_moves_only_its_own_transition_time_and_posts_an_event() -> None:
    first, _ = compute({}, Observation(1, T0, worker=worker()))
    later = T0 + timedelta(minutes=1)
    risky, events = compute(first, Observation(1, later, worker=worker(purge_headroom_files=0)))
    times = {c["type"]: c["lastTransitionTime"] for c in risky["conditions"]}
    assert conditions(risky)["BinlogPurgeRisk"] == ("True", "LowHeadroom")
    assert times["BinlogPurgeRisk"] == "2026-01-01T00:01:00Z" and times["Ready"] == "2026-01-01T00:00:00Z"
    assert [(e.type, e.reason) for e in events] == [("Warning", "BinlogPurgeRisk")]
    assert changed(first, risky) == {"conditions": risky["conditions"]}


def test_failover_event_condition_and_counter() -> None:
    first, _ = compute({}, Observation(1, T0, worker=worker()))
    moved, events = compute(first, Observation(1, T0, worker=worker(server_id=2, failovers=1)))
    assert moved["failovers"] == 1 and moved["serverId"] == 2
    assert conditions(moved)["FailedOver"] == ("True", "FailedOver")
    assert [(e.reason, e.message) for e in events] == [
        ("FailedOver", "the source changed servers (was server_id 1): failover 1")
    ]
    _, again = compute(moved, Observation(1, T0, worker=worker(server_id=2, failovers=1)))
    assert again == []


def test_snapshot_start_and_end_events() -> None:
    started, events = compute(
        {"phase": "Pending"}, Observation(1, T0, worker=worker(phase="Snapshotting", snapshot=5.0))
    )
    assert [e.reason for e in events] == ["SnapshotStarted"]
    assert started["snapshotPercent"] == 5.0 and started["message"] == "copying existing rows (5%)"
    done, events = compute(started, Observation(1, T0, worker=worker()))
    assert [e.reason for e in events] == ["SnapshotFinished"]
    assert "snapshotPercent" not in done and changed(started, done)["snapshotPercent"] is None


def test_unreachable_after_streaming_is_degraded_and_keeps_the_last_position() -> None:
    first, _ = compute({}, Observation(1, T0, worker=worker()))
    gone, _ = compute(first, Observation(1, T0, unreachable="connection refused"))
    assert gone["phase"] == "Degraded" and gone["binlogFile"] == "mysql-bin.000004"
    assert conditions(gone)["BinlogPurgeRisk"] == conditions(first)["BinlogPurgeRisk"]  # kept, not guessed


@pytest.fixture
def status_server() -> Iterator[tuple[str, list[bytes]]]:
    """A real HTTP server answering GET /status with the last body appended to the list it yields."""
    bodies: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = bodies[-1]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_fetch_status_reads_the_answer_into_a_worker_status(status_server: tuple[str, list[bytes]]) -> None:
    url, bodies = status_server
    bodies.append(worker(binlog_pos=4321, failovers=2).model_dump_json().encode())
    got = reconcile.fetch_status(url)
    assert isinstance(got, WorkerStatus)
    assert (got.phase, got.binlog_file, got.binlog_pos, got.failovers) == ("Streaming", "mysql-bin.000004", 4321, 2)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        # The worker renamed binlog_pos: the old key is missing and the new one is unknown; both are named.
        (
            lambda doc: {**{k: v for k, v in doc.items() if k != "binlog_pos"}, "binlog_position": 1},
            ["binlog_pos: Field required", "binlog_position: Extra inputs are not permitted"],
        ),
        (lambda doc: {**doc, "failovers": "2"}, ["failovers: Input should be a valid integer"]),
        (lambda doc: ["not", "an", "object"], ["(the document): Input should be an object"]),
    ],
    ids=["renamed-key", "wrong-type", "not-an-object"],
)
def test_an_answer_that_is_no_worker_status_reads_as_unreachable_with_what_is_wrong(
    status_server: tuple[str, list[bytes]], body: Callable[[dict[str, Any]], Any], named: list[str]
) -> None:
    url, bodies = status_server
    bodies.append(json.dumps(body(worker().model_dump())).encode())
    with pytest.raises(WorkerStatusError) as err:
        reconcile.fetch_status(url)
    for problem in named:
        assert problem in str(err.value)
    assert "\n" not in str(err.value)  # one line in the condition's message, never a traceback
    status, _ = compute({}, Observation(1, T0, unreachable=str(err.value)))
    assert conditions(status)["Ready"] == ("False", "WorkerUnreachable")
    assert named[0] in status["message"]


def test_a_worker_waiting_to_retry_reports_its_reason() -> None:
    """The document `run --retry-errors` serves while it waits: the operator shows the worker's reason."""
    failed = WorkerStatus.failed(reason="MissingGrant", message="user 'c' lacks RELOAD", retry_seconds=10.0)
    status, events = compute({}, Observation(1, T0, worker=parse_worker_status(failed.model_dump_json())))
    assert (status["phase"], status["message"]) == ("Error", "user 'c' lacks RELOAD")
    assert conditions(status)["Ready"] == ("False", "MissingGrant")
    assert "failovers" not in status and "binlogFile" not in status
    assert [e.reason for e in events] == ["Error"]


def capture(**spec: Any) -> Any:
    doc = manifest("orders", port=3306, sink={"type": "delta", "delta": {"uri": "s3://b/orders"}}, extra_spec=spec)
    doc["spec"]["source"]["passwordFrom"] = {"secretKeyRef": {"name": "mysql", "key": "password"}}
    return validate_manifest(doc)


def test_worker_config_round_trips_and_its_hash_follows_the_spec() -> None:
    settings = OperatorSettings()
    base = builders.build_worker_deployment(capture(), OWNER, settings=settings)
    same = builders.build_worker_deployment(capture(), OWNER, settings=settings)
    other = builders.build_worker_deployment(capture(flush={"maxEvents": 5}), OWNER, settings=settings)
    hashes = [d["spec"]["template"]["metadata"]["annotations"][builders.CONFIG_HASH] for d in (base, same, other)]
    assert hashes[0] == hashes[1] != hashes[2]
    text = builders.build_config_map(capture(), OWNER)["data"]["capture.yaml"]
    parsed = validate_manifest(yaml.safe_load(text))
    assert parsed.spec == capture().spec and parsed.metadata.namespace == "shop"
    # Port 0 ("any free port") cannot be a containerPort: the pod uses the default and says so.
    assert base["spec"]["template"]["spec"]["containers"][0]["args"][-2:] == ["--metrics-port", "9187"]


def test_paused_scales_to_zero_and_jsonl_has_no_compaction() -> None:
    settings = OperatorSettings()
    paused = builders.build_worker_deployment(capture(paused=True), OWNER, settings=settings)
    assert paused["spec"]["replicas"] == 0
    jsonl = capture(sink={"type": "jsonl", "jsonl": {"path": "-"}})
    assert builders.build_compaction(jsonl, OWNER, settings=settings, spark_operator=True) is None
    cron = builders.build_compaction(capture(), OWNER, settings=settings, spark_operator=False)
    assert cron is not None and cron["kind"] == "CronJob" and cron["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


@pytest.mark.parametrize(
    ("expr", "scoped"),
    [
        ("mysqlcapture_lag_seconds > 300", "mysqlcapture_lag_seconds{S} > 300"),
        ("mysqlcapture_up == 0 or absent(mysqlcapture_up)", "mysqlcapture_up{S} == 0 or absent(mysqlcapture_up{S})"),
        ("increase(mysqlcapture_failovers_total[15m]) > 0", "increase(mysqlcapture_failovers_total{S}[15m]) > 0"),
        (
            "time() - mysqlcapture_checkpoint_timestamp_seconds > 900",
            "time() - mysqlcapture_checkpoint_timestamp_seconds{S} > 900",
        ),
        (
            'increase(mysqlcapture_errors_total{kind="dead_letter"}[15m]) > 0',
            'increase(mysqlcapture_errors_total{S,kind="dead_letter"}[15m]) > 0',
        ),
    ],
    ids=["comparison", "absent", "range", "time", "own-matchers"],
)
def test_alert_expressions_are_scoped_to_the_capture(expr: str, scoped: str) -> None:
    matchers = 'capture="orders",namespace="shop"'
    assert builders.scope_expr(expr, OWNER) == scoped.replace("{S}", "{" + matchers + "}").replace(
        "{S,", "{" + matchers + ","
    )


def test_every_alert_rule_is_scoped() -> None:
    rules = OperatorSettings().alert_rules()
    built = builders.build_prometheus_rule(capture(), OWNER, rules=rules)["spec"]["groups"][0]["rules"]
    assert len(built) == len(rules) >= 5
    for rule in built:
        bare = rule["expr"].replace('{capture="orders",namespace="shop"}', "")
        assert bare.count("mysqlcapture_") == rule["expr"].count('capture="orders"'), rule["expr"]


def test_rbac_covers_every_child_kind() -> None:
    settings = OperatorSettings()
    c = capture()
    built = [
        builders.build_config_map(c, OWNER),
        builders.build_worker_deployment(c, OWNER, settings=settings),
        builders.build_service(c, OWNER),
        builders.build_service_monitor(c, OWNER),
        builders.build_prometheus_rule(c, OWNER, rules=[]),
        builders.build_compaction(c, OWNER, settings=settings, spark_operator=True),
        builders.build_compaction(c, OWNER, settings=settings, spark_operator=False),
    ]
    plural = {"ConfigMap": "configmaps", "Deployment": "deployments", "Service": "services",
              "ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules",
              "ScheduledSparkApplication": "scheduledsparkapplications", "CronJob": "cronjobs"}  # fmt: skip
    for obj in built:
        assert obj is not None
        group = obj["apiVersion"].rpartition("/")[0]
        rule = next(r for r in rbac.RULES if group in r["apiGroups"] and plural[obj["kind"]] in r["resources"])
        assert {"get", "patch", "create", "delete"} <= set(rule["verbs"]), obj["kind"]
    assert copy.deepcopy(rbac.cluster_role()["rules"]) == [dict(r) for r in rbac.RULES]


def test_compacted_follows_the_compaction_jobs_last_success() -> None:
    none, _ = compute({}, Observation(1, T0, worker=worker()))
    assert conditions(none)["Compacted"] == ("Unknown", "NotRunYet") and "lastCompaction" not in none
    done, _ = compute(none, Observation(1, T0, worker=worker(), last_compaction="2026-01-01T00:15:00Z"))
    assert conditions(done)["Compacted"] == ("True", "Succeeded") and done["lastCompaction"] == "2026-01-01T00:15:00Z"
    kept, _ = compute(done, Observation(1, T0, unreachable="refused"))
    assert kept["lastCompaction"] == "2026-01-01T00:15:00Z"


def _runs_and_success(metrics: OperatorMetrics) -> tuple[float | None, float | None, float | None]:
    labels = {"namespace": "shop", "capture": "orders"}
    get = metrics.registry.get_sample_value
    return (
        get("mysqlcapture_compaction_runs_total", {**labels, "result": "succeeded"}),
        get("mysqlcapture_compaction_runs_total", {**labels, "result": "failed"}),
        get("mysqlcapture_compaction_last_success_timestamp_seconds", labels),
    )


def test_compaction_runs_are_counted_from_the_first_observation_on() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    # Runs listed when first seen (e.g. after an operator restart) were counted by whoever saw them finish.
    metrics.observe_compaction("shop", "orders", CompactionRuns("2026-01-01T00:00:00Z", ("a", "b"), ("c",)))
    assert _runs_and_success(metrics) == (0.0, 0.0, T0.timestamp())
    metrics.observe_compaction("shop", "orders", CompactionRuns("2026-01-01T00:15:00Z", ("d", "a"), ("e", "c")))
    assert _runs_and_success(metrics) == (1.0, 1.0, T0.timestamp() + 900)
    # Unchanged status: nothing more.
    metrics.observe_compaction("shop", "orders", CompactionRuns("2026-01-01T00:15:00Z", ("d", "a"), ("e", "c")))
    assert _runs_and_success(metrics) == (1.0, 1.0, T0.timestamp() + 900)
    # A CronJob's status (reconcile.compaction_runs): each new lastSuccessfulTime is one more run.
    metrics.observe_compaction("shop", "orders", CompactionRuns("2026-01-01T00:30:00Z", ("2026-01-01T00:30:00Z",)))
    assert _runs_and_success(metrics) == (2.0, 1.0, T0.timestamp() + 1800)
    metrics.forget("shop", "orders")
    assert _runs_and_success(metrics) == (None, None, None)


def test_the_phase_gauge_is_one_for_the_current_phase_only() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.set_phase("shop", "orders", "Streaming")
    metrics.set_phase("shop", "orders", "Degraded")
    values = {
        p: metrics.registry.get_sample_value(
            "mysqlcapture_capture_phase", {"namespace": "shop", "capture": "orders", "phase": p}
        )
        for p in PHASES
    }
    assert values == {p: float(p == "Degraded") for p in PHASES}
    assert metrics.registry.get_sample_value("mysqlcapture_operator_leader") == 0.0


@pytest.mark.parametrize(
    ("spec", "allowed", "reason"),
    [
        ({}, (), None),
        ({"workerImage": "mysqlcapture/worker:0.1.0"}, (), None),  # the default, named
        ({"workerImage": "evil/worker:1"}, (), "ImageNotAllowed"),
        ({"workerImage": "registry.test/cdc/worker:2"}, ("registry.test/cdc/*",), None),
        ({"workerImage": "registry.test/cdcx/worker:2"}, ("registry.test/cdc/*",), "ImageNotAllowed"),
        ({"workerImage": "registry.test/cdc/worker:2"}, ("registry.test/cdc/worker:1",), "ImageNotAllowed"),
        ({"compaction": {"image": "evil/spark:1"}}, (), "ImageNotAllowed"),
        ({"compaction": {"sparkConf": {"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": "8"}}}, (), None),
        ({"compaction": {"sparkConf": {"spark.jars": "https://x/y.jar"}}}, (), "SparkConfNotAllowed"),
        ({"compaction": {"sparkConf": {"spark.kubernetes.container.image": "x"}}}, (), "SparkConfNotAllowed"),
        (
            {"compaction": {"sparkConf": {"spark.kubernetes.authenticate.driver.serviceAccountName": "admin"}}},
            (),
            "SparkConfNotAllowed",
        ),
        ({"compaction": {"sparkConf": {"spark.driver.extraJavaOptions": "-javaagent:x"}}}, (), "SparkConfNotAllowed"),
        ({"compaction": {"sparkConf": {"spark.executor.memoryOverhead": "1g"}}}, (), "SparkConfNotAllowed"),
        ({"serviceAccountName": "cluster-admin-ish"}, (), "ServiceAccountNotAllowed"),
    ],
)
def test_the_policy_refuses_what_the_administrator_did_not_allow(
    spec: dict[str, Any], allowed: tuple[str, ...], reason: str | None
) -> None:
    from mysqlcapture_operator.policy import policy_problem

    problem = policy_problem(capture(**spec), OperatorSettings(allowed_images=allowed))
    assert (problem.reason if problem else None) == reason, problem


def test_allowed_spark_conf_extends_the_defaults_by_key_or_prefix() -> None:
    from mysqlcapture_operator.policy import policy_problem

    settings = OperatorSettings.from_env({"MYSQLCAPTURE_ALLOWED_SPARK_CONF": "spark.hadoop.fs.s3a., spark.ui.enabled"})
    conf = {"spark.hadoop.fs.s3a.endpoint": "http://minio:9000", "spark.ui.enabled": "false"}
    assert policy_problem(capture(compaction={"sparkConf": conf}), settings) is None
    refused = policy_problem(capture(compaction={"sparkConf": {**conf, "spark.ui.port": "1"}}), settings)
    assert refused is not None and "sets spark.ui.port," in refused.message


def test_lag_is_rounded_for_the_printer_column() -> None:
    status, _ = compute(None, Observation(1, T0, worker=worker(lag_seconds=1.7225522994995117)))
    assert status["lagSeconds"] == 1.7


def test_an_allowed_service_account_and_pull_secrets_reach_the_pod_and_no_token_does() -> None:
    from mysqlcapture_operator.policy import policy_problem

    settings = OperatorSettings(allowed_service_accounts=("lake-writer",))
    asked = capture(serviceAccountName="lake-writer", imagePullSecrets=["registry"])
    assert policy_problem(asked, settings) is None
    pod = builders.build_worker_deployment(asked, OWNER, settings=settings)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "lake-writer" and pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["automountServiceAccountToken"] is False
    plain = builders.build_worker_deployment(capture(), OWNER, settings=settings)["spec"]["template"]["spec"]
    assert "serviceAccountName" not in plain and "imagePullSecrets" not in plain


def test_no_purge_risk_while_the_checkpoint_is_in_the_file_being_written() -> None:
    """A fresh server has one binlog file, and the capture reads it: nothing can purge it (issue 15's false alarm)."""
    fresh = worker(purge_headroom_files=0, purge_headroom_bytes=900, reading_active_file=True)
    status, events = compute(None, Observation(1, T0, worker=fresh, purge_risk_files=2))
    assert conditions(status)["BinlogPurgeRisk"] == ("False", "ReadingActiveFile")
    assert not [e for e in events if e.reason == "BinlogPurgeRisk"]
    behind = worker(purge_headroom_files=0, purge_headroom_bytes=900, reading_active_file=False)
    status, events = compute(status, Observation(2, T0, worker=behind, purge_risk_files=2))
    assert conditions(status)["BinlogPurgeRisk"] == ("True", "LowHeadroom")
    assert [e.reason for e in events if e.type == "Warning"] == ["BinlogPurgeRisk"]


def _secret_mounts(doc: Any) -> tuple[dict[str, str], dict[str, Any], dict[str, str]]:
    """The worker pod's env values, Secret volumes and mount paths, each by name."""
    pod = builders.build_worker_deployment(doc, OWNER, settings=OperatorSettings())["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    volumes = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    return env, volumes, {m["name"]: m["mountPath"] for m in container["volumeMounts"]}


def test_the_column_hash_key_is_mounted_from_its_secret_beside_the_password() -> None:
    columns = {"hash": {"columns": ["shop.users.email"], "keyFrom": {"secretKeyRef": {"name": "mask", "key": "k"}}}}
    doc = capture(columns=columns)  # its password comes from a Secret too
    env, volumes, mounts = _secret_mounts(doc)
    assert env["MYSQLCAPTURE_COLUMN_KEY_FILE"] == "/var/run/secrets/mysqlcapture-column-key/key"
    assert env["MYSQLCAPTURE_SOURCE_PASSWORD_FILE"] == "/var/run/secrets/mysqlcapture/password"
    assert volumes["column-key"]["secretName"] == "mask"
    assert volumes["column-key"]["items"] == [{"key": "k", "path": "key"}]
    assert volumes["password"]["secretName"] == "mysql"
    assert mounts["column-key"] == "/var/run/secrets/mysqlcapture-column-key"
    # Without a Secret for the key (keyFrom.env), nothing is mounted for it.
    plain = builders.build_worker_deployment(
        capture(columns={"hash": {"columns": ["a.b.c"], "keyFrom": {"env": "K"}}}), OWNER, settings=OperatorSettings()
    )
    assert "column-key" not in {v["name"] for v in plain["spec"]["template"]["spec"]["volumes"]}


def test_the_kafka_password_and_ca_are_mounted_from_their_secrets() -> None:
    doc = capture(
        sink={
            "type": "kafka",
            "kafka": {
                "bootstrapServers": "kafka:9093",
                "schemaHistoryUri": "s3://b/h",
                "tls": {"caFrom": {"secretKeyRef": {"name": "kafka-ca", "key": "ca.crt"}}},
                "sasl": {
                    "mechanism": "SCRAM-SHA-512",
                    "username": "cdc",
                    "passwordFrom": {"secretKeyRef": {"name": "kafka-user", "key": "password"}},
                },
            },
        }
    )
    env, volumes, mounts = _secret_mounts(doc)
    assert env["MYSQLCAPTURE_KAFKA_PASSWORD_FILE"] == "/var/run/secrets/mysqlcapture-kafka-password/password"
    assert env["MYSQLCAPTURE_KAFKA_CA_FILE"] == "/var/run/secrets/mysqlcapture-kafka-ca/ca.pem"
    assert volumes["kafka-password"]["secretName"] == "kafka-user"
    assert volumes["kafka-password"]["items"] == [{"key": "password", "path": "password"}]
    assert volumes["kafka-ca"]["items"] == [{"key": "ca.crt", "path": "ca.pem"}]
    assert mounts["kafka-password"] == "/var/run/secrets/mysqlcapture-kafka-password"
    assert mounts["kafka-ca"] == "/var/run/secrets/mysqlcapture-kafka-ca"
    assert "password" in volumes  # the source's beside them
