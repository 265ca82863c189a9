"""The Helm chart: rendered and linted by Helm's own Go SDK (helm-python-sdk), values refused by its schema,
its copies of the CRD, alert rules and dashboard equal to their sources, and every manifest it renders accepted
by a real API server (server-side dry run, strict field validation, third-party CRDs installed)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from mysqlcapture_operator.rbac import RULES
from mysqlcapture_operator.settings import OperatorSettings

from tests.k8s.fixtures import Cluster, KubeError
from tests.support import REPO

CHART = REPO / "charts" / "mysqlcapture-operator"
RELEASE = "mcap"
# Every optional object on.
ALL_ON: dict[str, Any] = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "grafanaDashboard": {"enabled": True, "annotations": {"grafana_folder": "CDC"}},
    "crds": {"install": True, "keep": True},
    "podAnnotations": {"example.com/team": "data"},
    "imagePullSecrets": [{"name": "registry"}],
}
# The chart's copies and the single sources they must equal (`make crds` writes the copies).
COPIES = {
    "files/crds/cdc.mysqlcapture.io_mysqlcaptures.yaml": REPO / "crds" / "cdc.mysqlcapture.io_mysqlcaptures.yaml",
    "files/alerts.yaml": REPO / "monitoring" / "alerts.yaml",
    "files/dashboards/mysqlcapture.json": REPO / "monitoring" / "dashboards" / "mysqlcapture.json",
}


def render(values: dict[str, Any] | None = None, *, namespace: str = "mysqlcapture") -> list[dict[str, Any]]:
    """Every object the chart renders with `values`, in template order."""
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values=values or {}, name=RELEASE, namespace=namespace, is_install=True)
    docs: list[dict[str, Any]] = []
    for template in sorted(rendered):
        docs.extend(d for d in yaml.safe_load_all(rendered[template]) if d)
    return docs


def operator_docs(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator's own objects: not the compaction driver's ServiceAccount, Role and RoleBinding."""
    return [d for d in docs if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "compaction"]


def kinds(docs: list[dict[str, Any]]) -> Counter[str]:
    return Counter(d["kind"] for d in docs)


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


# -- offline: lint, render, schema, drift ----------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    "values", [{}, ALL_ON, {**ALL_ON, "watchNamespaces": ["a", "b"]}], ids=["defaults", "all-on", "namespaced"]
)
def test_lint_is_clean(values: dict[str, Any]) -> None:
    report = helm.lint(CHART, values, strict=True, namespace="mysqlcapture")
    # Severity 1 is informational (e.g. "icon is recommended"); warnings (2) and errors (3) fail.
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["total_charts_linted"] == 1
    assert not problems and not report["errors"], report


@pytest.mark.unit
def test_defaults_render_the_operator_crd_rbac_and_dashboard() -> None:
    docs = render()
    assert kinds(docs) == Counter(
        {
            "CustomResourceDefinition": 1,
            "ServiceAccount": 1,
            "ClusterRole": 2,  # namespaces and CRDs (discovery), and the operator's rules for every namespace
            "ClusterRoleBinding": 2,
            "Role": 1,  # the leader-election Lease, in the release namespace
            "RoleBinding": 1,
            "Deployment": 1,
            "ConfigMap": 1,  # the Grafana dashboard
        }
    )
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "mysqlcapture-operator:0.1.0"
    # No --namespace: every namespace.
    assert container["command"] == ["python", "-m", "mysqlcapture_operator"]
    assert "args" not in container
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["ports"] == [{"name": "health", "containerPort": 8080, "protocol": "TCP"}]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["MYSQLCAPTURE_WORKER_IMAGE"] == "mysqlcapture-worker:0.1.0"
    assert env["MYSQLCAPTURE_COMPACTION_IMAGE"] == "mysqlcapture-compaction:0.1.0"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"] == "mcap-mysqlcapture-operator"
    dashboard = one(docs, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    crd = one(docs, "CustomResourceDefinition")
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


@pytest.mark.unit
def test_every_optional_object_renders_when_switched_on() -> None:
    everything = render(
        {**ALL_ON, "watchNamespaces": ["team-a", "team-b"], "replicaCount": 0, "compaction": {"namespaces": ["lake"]}}
    )
    # The compaction driver's account, Role and binding in each watched namespace and each listed one.
    compaction = [d for d in everything if d not in operator_docs(everything)]
    assert sorted((d["kind"], d["metadata"]["namespace"]) for d in compaction) == sorted(
        (kind, ns) for kind in ("ServiceAccount", "Role", "RoleBinding") for ns in ("team-a", "team-b", "lake")
    )
    docs = operator_docs(everything)
    assert kinds(docs) == Counter(
        {
            "CustomResourceDefinition": 1,
            "ServiceAccount": 1,
            "ClusterRole": 1,  # only discovery stays cluster-wide
            "ClusterRoleBinding": 1,
            "Role": 3,  # one per watched namespace, and leader election
            "RoleBinding": 3,
            "Deployment": 1,
            "Service": 1,
            "ServiceMonitor": 1,
            "PrometheusRule": 1,
            "ConfigMap": 1,
        }
    )
    assert sorted(d["metadata"]["namespace"] for d in docs if d["kind"] == "Role") == [
        "mysqlcapture",
        "team-a",
        "team-b",
    ]
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["--namespace=team-a", "--namespace=team-b"]
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    # The operator's metrics carry each capture's namespace label: Prometheus must not rename it.
    assert monitor["spec"]["endpoints"] == [
        {"port": "health", "path": "/metrics", "interval": "30s", "honorLabels": True}
    ]
    assert one(docs, "Service")["spec"]["ports"][0]["targetPort"] == "health"
    assert one(docs, "ConfigMap")["metadata"]["annotations"] == {"grafana_folder": "CDC"}


@pytest.mark.unit
def test_the_operator_understands_the_deployment_it_is_given() -> None:
    """The chart's arguments are the operator's flags, and its environment the settings the operator reads."""
    values = {
        "watchNamespaces": ["team-a"],
        "logLevel": "debug",
        "allowedImages": ["registry.example.com/cdc/*", "mysqlcapture-worker:0.1.1"],
        "compaction": {"allowedSparkConf": ["spark.hadoop.fs.s3a.endpoint"]},
        "networkPolicy": {"enabled": True, "metricsNamespaces": ["monitoring"]},
        "allowedServiceAccounts": ["lake-writer"],
    }
    container = one(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    usage = subprocess.run(
        [sys.executable, *container["command"][1:], "--help"], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout
    for arg in container["args"]:
        assert arg.split("=")[0] in usage, f"the operator has no flag {arg!r}:\n{usage}"
    pod = {"metadata.name": "mcap-mysqlcapture-operator-7d9f-x2x", "metadata.namespace": "mysqlcapture"}
    env = {
        e["name"]: e["value"] if "value" in e else pod[e["valueFrom"]["fieldRef"]["fieldPath"]]
        for e in container["env"]
    }
    settings = OperatorSettings.from_env(env)
    assert settings.worker_image == "mysqlcapture-worker:0.1.0"
    assert settings.compaction_image == "mysqlcapture-compaction:0.1.0"
    assert settings.compaction_service_account == "mysqlcapture-compaction"
    assert settings.allowed_images == ("registry.example.com/cdc/*", "mysqlcapture-worker:0.1.1")
    assert settings.allowed_spark_conf[-1] == "spark.hadoop.fs.s3a.endpoint"
    assert "spark.executor.memory" in settings.allowed_spark_conf  # the defaults stay
    assert settings.network_policy is True and settings.metrics_namespaces == ("monitoring",)
    assert settings.allowed_service_accounts == ("lake-writer",)
    assert OperatorSettings.from_env({**env, "MYSQLCAPTURE_NETWORK_POLICY": "false"}).network_policy is False
    assert (settings.lease_namespace, settings.lease_name) == ("mysqlcapture", "mcap-mysqlcapture-operator")
    assert settings.identity == "mcap-mysqlcapture-operator-7d9f-x2x"
    # The operator serves /healthz and /metrics on the port the probes and the Service use.
    assert settings.http_port == container["ports"][0]["containerPort"] == 8080
    # The leader-election Role is in the namespace the operator looks for its Lease in.
    role = next(d for d in render() if d["metadata"]["name"].endswith("-leader-election") and d["kind"] == "Role")
    assert role["metadata"]["namespace"] == settings.lease_namespace


@pytest.mark.unit
@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_every_replica_count_gets_probes_on_the_served_port(replicas: int) -> None:
    # Every replica serves /healthz from start (standbys too): probes are safe for any replica count.
    deployment = one(render({"replicaCount": replicas, "logLevel": "debug", "health": {"port": 9100}}), "Deployment")
    assert deployment["spec"]["replicas"] == replicas
    # One replica is replaced (Recreate), more roll.
    assert ("strategy" in deployment["spec"]) is (replicas == 1)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["ports"] == [{"name": "health", "containerPort": 9100, "protocol": "TCP"}]
    assert container["args"] == ["--verbose"]
    env = {e["name"]: e for e in container["env"]}
    assert env["MYSQLCAPTURE_HTTP_PORT"]["value"] == "9100"
    assert env["MYSQLCAPTURE_LEASE_NAME"]["value"] == "mcap-mysqlcapture-operator"
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("values", "off"),
    [
        ({"crds": {"install": False}}, "CustomResourceDefinition"),
        ({"grafanaDashboard": {"enabled": False}}, "ConfigMap"),
        ({"serviceAccount": {"create": False, "name": "existing"}}, "ServiceAccount"),
    ],
    ids=["no-crds", "no-dashboard", "existing-service-account"],
)
def test_values_switch_objects_off(values: dict[str, Any], off: str) -> None:
    assert off in kinds(render())
    assert off not in kinds(render(values))


@pytest.mark.unit
def test_crd_keep_annotation_is_a_value() -> None:
    crd = one(render({"crds": {"keep": False}}), "CustomResourceDefinition")
    assert "annotations" not in crd["metadata"]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": -1}, "at '/replicaCount': minimum: got -1, want 0"),
        ({"logLevel": "loud"}, "at '/logLevel': value must be one of 'info', 'debug'"),
        # A tag belongs in image.tag, not in the repository.
        ({"image": {"repository": "mysqlcapture-operator:1.0"}}, "at '/image/repository'"),
        ({"watchNamespaces": ["Team_A"]}, "at '/watchNamespaces/0': 'Team_A' does not match pattern"),
        ({"serviceMonitor": {"interval": "soon"}}, "at '/serviceMonitor/interval': 'soon' does not match pattern"),
        # Grafana's sidecar matches label values as strings; YAML 1 would be a number.
        ({"grafanaDashboard": {"labels": {"grafana_dashboard": 1}}}, "got number, want string"),
        ({"crds": {"instal": True}}, "at '/crds': additional properties 'instal' not allowed"),
        ({"prometheusrule": {"enabled": True}}, "additional properties 'prometheusrule' not allowed"),
        # A non-root process cannot bind a port below 1024.
        ({"health": {"port": 80}}, "at '/health/port': minimum: got 80, want 1,024"),
    ],
    ids=["replicas", "log-level", "tag-in-repository", "namespace", "interval", "label-type", "typo", "case", "port"],
)
def test_schema_refuses_bad_values_with_the_path(values: dict[str, Any], message: str) -> None:
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError) as refused:
            chart.validate_schema(chart.merge_values(values))
        assert message in str(refused.value)
        # `helm install` checks the same schema before rendering anything.
        with pytest.raises(helm.HelmValuesError, match="mysqlcapture-operator"):
            chart.render(values=values, name=RELEASE, namespace="mysqlcapture")


@pytest.mark.unit
def test_schema_accepts_the_defaults_and_every_optional_object() -> None:
    with helm.Chart.load(CHART) as chart:
        for values in (
            {},
            ALL_ON,
            {"watchNamespaces": ["a"], "image": {"repository": "registry:5000/op", "tag": "v1"}},
        ):
            chart.validate_schema(chart.merge_values(values))


@pytest.mark.unit
@pytest.mark.parametrize("copy", sorted(COPIES), ids=lambda c: Path(c).name)
def test_chart_copies_equal_their_sources(copy: str) -> None:
    source = COPIES[copy]
    assert (CHART / copy).read_text() == source.read_text(), (
        f"charts/mysqlcapture-operator/{copy} differs from {source.relative_to(REPO)}: run `make crds`"
    )


@pytest.mark.unit
def test_rendered_crd_alerts_and_dashboard_are_the_sources() -> None:
    docs = render(ALL_ON)
    crd = one(docs, "CustomResourceDefinition")
    source_crd = yaml.safe_load(COPIES["files/crds/cdc.mysqlcapture.io_mysqlcaptures.yaml"].read_text())
    labels = crd["metadata"].pop("labels")
    crd["metadata"].pop("annotations")
    assert labels["app.kubernetes.io/managed-by"] == "Helm"
    assert crd == source_crd
    rule = one(docs, "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(COPIES["files/alerts.yaml"].read_text())
    assert len(rule["spec"]["groups"][0]["rules"]) == 9
    dashboard = one(docs, "ConfigMap")
    assert json.loads(dashboard["data"]["mysqlcapture.json"]) == json.loads(
        COPIES["files/dashboards/mysqlcapture.json"].read_text()
    )


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) triples a list of RBAC rules grants."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.unit
@pytest.mark.parametrize("values", [{}, {"watchNamespaces": ["team-a"]}], ids=["cluster-wide", "namespaced"])
def test_rbac_grants_exactly_what_the_operator_declares(values: dict[str, Any]) -> None:
    docs = render(values)
    bound = {
        (b["roleRef"]["kind"], b["roleRef"]["name"], b["metadata"].get("namespace")) for b in docs if "roleRef" in b
    }
    granted: set[tuple[str, str, str]] = set()
    for role in (d for d in operator_docs(docs) if d["kind"] in ("Role", "ClusterRole")):
        namespace = role["metadata"].get("namespace")
        bound_here = (role["kind"], role["metadata"]["name"], namespace) in bound
        assert bound_here, f"{role['kind']} {role['metadata']['name']} is bound to nobody"
        granted |= _grants(role["rules"])
    # Not one permission more or less than operator/mysqlcapture_operator/rbac.py lists.
    assert granted == _grants(list(RULES))
    # Never cluster-wide when namespaces are listed: only discovery is.
    if values.get("watchNamespaces"):
        (cluster_role,) = (d for d in docs if d["kind"] == "ClusterRole")
        assert {r for _, r, _ in _grants(cluster_role["rules"])} == {"namespaces", "customresourcedefinitions"}


# -- against the test API server ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "values", [{}, ALL_ON, {**ALL_ON, "watchNamespaces": ["WATCHED"]}], ids=["defaults", "all-on", "namespaced"]
)
def test_every_rendered_manifest_passes_a_server_side_dry_run(
    cluster: Cluster, namespace: str, values: dict[str, Any]
) -> None:
    if values.get("watchNamespaces"):
        values = {**values, "watchNamespaces": [cluster.new_namespace("watched")]}
    docs = render(values, namespace=namespace)
    accepted = []
    for doc in docs:
        answer = cluster.kube.apply(doc, dry_run=True)
        assert answer["kind"] == doc["kind"] and answer["metadata"]["name"] == doc["metadata"]["name"]
        accepted.append(doc["kind"])
    assert Counter(accepted) == kinds(docs) and len(accepted) >= 8


def test_the_dry_run_really_validates_against_the_prometheus_operator_schema(cluster: Cluster, namespace: str) -> None:
    """The check above could fail: a rendered PrometheusRule with a malformed duration is refused, by path."""
    rule = one(render(ALL_ON, namespace=namespace), "PrometheusRule")
    rule["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    with pytest.raises(KubeError) as refused:
        cluster.kube.apply(rule, dry_run=True)
    assert refused.value.status == 422
    assert "spec.groups[0].rules[0].for" in refused.value.message


@pytest.mark.parametrize(
    "example",
    ["secret.yaml", "capture-cluster.yaml", "capture-local.yaml", "capture-maxwell.yaml", "capture-kafka.yaml"],
)
def test_examples_pass_a_server_side_dry_run(cluster: Cluster, namespace: str, example: str) -> None:
    applied = cluster.apply_yaml((REPO / "examples" / example).read_text(), namespace=namespace, dry_run=True)
    assert [a["metadata"]["namespace"] for a in applied] == [namespace]
    if applied[0]["kind"] == "MySQLCapture":
        # The API server filled in the CRD's defaults: the example is a complete, valid capture.
        assert applied[0]["spec"]["flush"]["maxEvents"] == 50000


def _can(cluster: Cluster, user: str, verb: str, resource: str, namespace: str | None, group: str = "") -> bool:
    """The API server's own answer (a SubjectAccessReview): may `user` do `verb` on `resource` there?"""
    attributes: dict[str, Any] = {"verb": verb, "resource": resource, "group": group}
    if namespace is not None:
        attributes["namespace"] = namespace
    review = cluster.kube.request(
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated"],
                     "resourceAttributes": attributes},
        },
    )  # fmt: skip
    return bool(review["status"].get("allowed"))


@pytest.mark.parametrize("mode", ["cluster-wide", "watchNamespaces"])
def test_the_operators_service_account_reads_no_secret_anywhere(cluster: Cluster, mode: str) -> None:
    """The chart's RBAC, installed for real, asked of the API server (SubjectAccessReview) for the operator's
    ServiceAccount: no Secret can be read, listed or watched in any namespace, in either mode; workload writes
    reach every namespace only in the cluster-wide mode, and only the listed namespaces with watchNamespaces."""
    home = cluster.new_namespace("rbac")
    team, other = cluster.new_namespace("team"), cluster.new_namespace("other")
    values: dict[str, Any] = {"fullnameOverride": f"op-{home}", "grafanaDashboard": {"enabled": False}}
    if mode == "watchNamespaces":
        values["watchNamespaces"] = [team]
    docs = render(values, namespace=home)
    for doc in docs:
        if doc["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            cluster.kube.apply(doc)
    (account,) = (d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount" and d in operator_docs(docs))
    user = f"system:serviceaccount:{home}:{account}"
    table: list[tuple[str, str, str, bool]] = []
    for namespace in (team, other, "kube-system", None):
        for verb in ("get", "list", "watch"):
            table.append((verb, "secrets", namespace or "(all)", _can(cluster, user, verb, "secrets", namespace)))
        for verb, resource, group in (("create", "deployments", "apps"), ("patch", "configmaps", "")):
            allowed = _can(cluster, user, verb, resource, namespace, group)
            table.append((verb, resource, namespace or "(all)", allowed))
    print(f"\n{mode}: what the operator's ServiceAccount may do")
    for verb, resource, where, allowed in table:
        print(f"  {verb:6} {resource:12} {where:24} {'allowed' if allowed else 'denied'}")
    assert not any(allowed for _, resource, _, allowed in table if resource == "secrets"), table
    writes = {(resource, where): allowed for _, resource, where, allowed in table if resource != "secrets"}
    if mode == "cluster-wide":
        assert all(writes.values()), writes
    else:
        assert writes[("deployments", team)] and writes[("configmaps", team)], writes
        assert not any(allowed for (_, where), allowed in writes.items() if where != team), writes
        # The compaction driver's account, created in the watched namespace: executor pods there, nothing more.
        driver = f"system:serviceaccount:{team}:mysqlcapture-compaction"
        assert _can(cluster, driver, "create", "pods", team) and _can(cluster, driver, "delete", "services", team)
        assert not _can(cluster, driver, "get", "secrets", team)
        assert not _can(cluster, driver, "create", "pods", other)
        assert not _can(cluster, driver, "create", "deployments", team, "apps")
