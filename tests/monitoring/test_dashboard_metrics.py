"""The Grafana dashboard: valid PromQL (checked by promtool), thresholds that match the alerts, and every metric
and label a panel, a template variable or an alert rule uses is one the worker (or, for the operator's metrics,
a running operator against a real API server) really exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from mysqlcapture_dev.embedded.mariadb import free_port, start_server
from mysqlcapture_operator.metrics import OperatorMetrics
from mysqlcapture_worker.metrics import WorkerMetrics
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests.k8s.fixtures import Cluster
from tests.k8s.processes import OperatorProcess, wait_for
from tests.k8s.test_operator import TEST_OPERATOR_ENV, capture_doc, password_secret
from tests.support import WorkerProcess, manifest, wait_until, write_manifest

MONITORING = Path(__file__).resolve().parents[2] / "monitoring"
DASHBOARD = MONITORING / "dashboards" / "mysqlcapture.json"
RULES = MONITORING / "alerts.yaml"
# Labels Prometheus adds when it scrapes a worker pod (ServiceMonitor target labels), not the worker itself.
TARGET_LABELS = {"namespace", "pod", "service", "instance", "job", "container", "endpoint"}
# Grafana's variables, replaced by what Grafana would send, so promtool can parse the expressions.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "6h", "$capture": ".*", "$namespace": ".*"}
METRIC = re.compile(r"\b(mysqlcapture_[a-z_]+)\b")
BY_CLAUSE = re.compile(r"\bby\s*\(([^)]*)\)")


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _panel_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expression) of every query in every panel, rows' nested panels included."""
    found: list[tuple[str, str]] = []
    for panel in dashboard["panels"]:
        for sub in [panel, *panel.get("panels", [])]:
            found.extend((sub["title"], t["expr"]) for t in sub.get("targets", []))
    return found


def _variable_queries(dashboard: dict[str, Any]) -> list[str]:
    return [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]


def _rule_expressions() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())
    return [(r["alert"], r["expr"]) for g in rules["groups"] for r in g["rules"]]


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: `make setup` installs Debian's prometheus package"
    return found


def _declared_labels(metrics: object | None = None) -> dict[str, set[str]]:
    """Every sample name the metrics object can produce (default: the worker's and the operator's), mapped to that
    metric's label names."""
    if metrics is None:
        return {**_declared_labels(WorkerMetrics(CollectorRegistry(), "probe")), **_operator_declared()}
    labels: dict[str, set[str]] = {}
    for metric in vars(metrics).values():
        if not hasattr(metric, "_labelnames"):
            continue
        name, kind, names = metric._name, metric._type, set(metric._labelnames)
        suffixes = {
            "counter": ["_total", "_created"],
            "gauge": [""],
            "histogram": ["_bucket", "_sum", "_count", "_created"],
            "info": ["_info"],
        }[kind]
        for suffix in suffixes:
            labels[name + suffix] = names | ({"le"} if suffix == "_bucket" else set())
    return labels


def _operator_declared() -> dict[str, set[str]]:
    return _declared_labels(OperatorMetrics(CollectorRegistry()))


def _scraped_names(text: str) -> set[str]:
    """Sample names of an exposition, with the families that have no sample yet (only # TYPE) included."""
    names = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ", 3)
            if kind == "counter":  # the classic text format names a counter family with its _total suffix
                family = family.removesuffix("_total")
                names |= {f"{family}_total", f"{family}_created"}
            else:
                names.add(family)
    return names


def _dashboard_and_alert_uses() -> dict[str, set[str]]:
    """Metric name -> where (panel title, "variable" or alert) the dashboard and the alert rules use it."""
    dashboard = _dashboard()
    uses: dict[str, set[str]] = {}
    for where, expr in [
        *_panel_expressions(dashboard),
        *(("variable", q) for q in _variable_queries(dashboard)),
        *_rule_expressions(),
    ]:
        for name in METRIC.findall(expr):
            uses.setdefault(name, set()).add(where)
    return uses


@pytest.mark.unit
def test_worker_and_operator_metric_names_do_not_collide() -> None:
    worker = set(_declared_labels(WorkerMetrics(CollectorRegistry(), "probe")))
    operator = set(_operator_declared())
    assert not worker & operator, sorted(worker & operator)
    assert {
        "mysqlcapture_operator_leader",
        "mysqlcapture_operator_reconciles_total",
        "mysqlcapture_capture_phase",
        "mysqlcapture_compaction_last_success_timestamp_seconds",
        "mysqlcapture_compaction_runs_total",
    } <= operator


@pytest.mark.unit
def test_dashboard_shape() -> None:
    dashboard = _dashboard()
    titles = [p["title"] for p in dashboard["panels"] if p["type"] != "row"]
    for wanted in (
        "Events/s by table",
        "Lag",
        "Purge headroom",
        "Headroom (time)",
        "Checkpoint age",
        "Reconnects",
        "Failovers",
        "Sink commit latency",
        "Compaction runs",
    ):
        assert wanted in titles, f"the dashboard has no panel {wanted!r}: {titles}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource", "namespace", "capture"]
    for title, expr in _panel_expressions(dashboard):
        # Per capture: every query is filtered by the template variable.
        assert 'capture=~"$capture"' in expr, f"panel {title!r} ignores the capture variable: {expr}"
    # Panels tile the 24-column grid without overlapping.
    cells: set[tuple[int, int]] = set()
    for p in dashboard["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, f"panel {p['title']!r} is wider than the grid"
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"panel {p['title']!r} overlaps another"
        cells |= mine


@pytest.mark.unit
def test_every_dashboard_expression_is_valid_promql(tmp_path: Path) -> None:
    exprs = _panel_expressions(_dashboard())
    assert len(exprs) >= 20
    rules = []
    for i, (_, expr) in enumerate(exprs):
        for var, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(var, value)
        rules.append({"record": f"dashboard:panel_{i}", "expr": expr})
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def _thresholds(title: str) -> list[float]:
    panel = next(p for p in _dashboard()["panels"] if p["title"] == title)
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    return [s["value"] for s in steps if s["value"] is not None]


def _alert_bound(alert: str, metric: str) -> float:
    expr = dict(_rule_expressions())[alert]
    found = re.search(rf"{metric}\s*[<>]\s*([0-9.]+)", expr)
    assert found, f"{alert} has no bound on {metric}: {expr}"
    return float(found.group(1))


@pytest.mark.unit
def test_dashboard_thresholds_are_the_alerts_thresholds() -> None:
    seconds, files = "mysqlcapture_binlog_purge_headroom_seconds", "mysqlcapture_binlog_purge_headroom_files"
    critical_s, warning_s = (
        _alert_bound("MySQLCaptureBinlogPurgeCritical", seconds),
        _alert_bound("MySQLCaptureBinlogPurgeRisk", seconds),
    )
    assert (critical_s, warning_s) == (600, 3600)
    assert _thresholds("Purge headroom") == [critical_s, warning_s]
    assert _thresholds("Headroom (time)") == [critical_s, warning_s]
    assert _thresholds("Headroom (files)") == [
        _alert_bound("MySQLCaptureBinlogPurgeCritical", files),
        _alert_bound("MySQLCaptureBinlogPurgeRisk", files),
    ]
    stale = _alert_bound("MySQLCaptureCheckpointStale", "mysqlcapture_checkpoint_timestamp_seconds")
    assert _thresholds("Checkpoint age")[-1] == stale == 900
    assert _thresholds("Lag")[-1] == _alert_bound("MySQLCaptureLagHigh", "mysqlcapture_lag_seconds") == 300


@pytest.mark.unit
def test_every_grouping_label_is_one_the_metrics_carry() -> None:
    declared = _declared_labels()
    uses = [*_panel_expressions(_dashboard()), *_rule_expressions()]
    checked = 0
    for where, expr in uses:
        metrics = set(METRIC.findall(expr))
        available = set().union(*(declared.get(m, set()) for m in metrics)) | TARGET_LABELS
        for clause in BY_CLAUSE.findall(expr):
            wanted = {label.strip() for label in clause.split(",") if label.strip()}
            assert wanted <= available, f"{where!r} groups by {sorted(wanted - available)}, which {metrics} lack"
            checked += 1
    assert checked >= 10


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every sample name a running worker exports, after it has streamed a few events."""
    tmp_path = tmp_path_factory.mktemp("dashboard-worker")
    srv = start_server(37)
    srv.execute(
        "CREATE DATABASE shop",
        "CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))",
    )
    sink = {"type": "delta", "delta": {"uri": str(tmp_path / "changelog")}}
    worker = WorkerProcess(write_manifest(tmp_path / "m.yaml", manifest("dash", port=srv.port, sink=sink)))
    try:

        def scrape() -> str:
            ports = [int(ln.rsplit(":", 1)[1]) for ln in worker.log_text().splitlines() if "metrics on :" in ln]
            if not ports:
                return ""
            return urllib.request.urlopen(f"http://127.0.0.1:{ports[0]}/metrics", timeout=5).read().decode()

        wait_until(lambda: "mysqlcapture_up{" in scrape() or not worker.alive(), timeout=60, what="worker metrics")
        srv.execute("INSERT INTO shop.orders VALUES (1, 'a'), (2, 'b')", "UPDATE shop.orders SET note = 'c'")
        # Per-table event counters appear with the first commit; the headroom with the first purge check.
        wait_until(
            lambda: (
                ("mysqlcapture_events_total{" in (text := scrape()) and "purge_headroom_seconds{" in text)
                or not worker.alive()
            ),
            timeout=60,
            what="the worker to export per-table events and its purge headroom",
        )
        text = scrape()
    finally:
        assert worker.stop() == 0, worker.log_text()
        srv.stop()
    names = _scraped_names(text)
    assert "mysqlcapture_events_total" in names and "mysqlcapture_sink_commit_seconds_bucket" in names
    return names


@pytest.mark.mariadb
def test_every_metric_the_dashboard_and_alerts_use_is_exported_by_a_running_worker(exported: set[str]) -> None:
    operator = set(_operator_declared())
    uses = {name: where for name, where in _dashboard_and_alert_uses().items() if name not in operator}
    assert len(uses) >= 15, sorted(uses)
    missing = {name: sorted(where) for name, where in uses.items() if name not in exported}
    assert not missing, f"the dashboard or alerts use metrics the worker does not export: {missing}"


@pytest.fixture
def operator_exported(cluster: Cluster, tmp_path: Path) -> set[str]:
    """Every sample name a running operator exports once it has observed a capture and a compaction run."""
    env = {**TEST_OPERATOR_ENV, "MYSQLCAPTURE_LEASE_NAME": "dm-tests", "POD_NAME": "op-dm"}
    # The namespace exists before kopf starts: a namespace created while it starts can be missed until its next
    # listing, a minute later (seen once in CI).
    ns = cluster.new_namespace("dm")
    operator = OperatorProcess(cluster, tmp_path / "operator.log", namespaces=["dm-*"], env=env)
    try:
        url = operator.http_url()
        password_secret(cluster, ns)
        cluster.kube.apply(capture_doc("dash", ns, port=free_port()))
        wait_for(cluster, "sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication", "dash-compaction", ns)

        def scrape() -> str:
            return urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()

        # The operator baselines the runs first, then counts the one the (absent) Spark operator reports.
        wait_until(lambda: "mysqlcapture_compaction_runs_total{" in scrape(), timeout=30, what="compaction series")
        cluster.kube.patch_status(
            "sparkoperator.k8s.io/v1beta2",
            "ScheduledSparkApplication",
            "dash-compaction",
            ns,
            {"lastRun": "2026-11-23T10:00:00Z", "lastRunName": "dash-1", "pastSuccessfulRunNames": ["dash-1"]},
        )
        wait_until(
            lambda: (
                "mysqlcapture_compaction_last_success_timestamp_seconds{" in scrape()
                and "mysqlcapture_capture_phase{" in scrape()
            ),
            timeout=30,
            what="the operator to export the capture's phase and last compaction",
        )
        text = scrape()
    finally:
        operator.stop()
    return _scraped_names(text)


@pytest.mark.k8s
def test_every_operator_metric_the_dashboard_uses_is_exported_by_a_running_operator(
    operator_exported: set[str],
) -> None:
    operator = set(_operator_declared())
    uses = {name: where for name, where in _dashboard_and_alert_uses().items() if name in operator}
    assert set(uses) >= {
        "mysqlcapture_compaction_runs_total",
        "mysqlcapture_compaction_last_success_timestamp_seconds",
        "mysqlcapture_capture_phase",
    }, sorted(uses)
    missing = {name: sorted(where) for name, where in uses.items() if name not in operator_exported}
    assert not missing, f"the dashboard uses operator metrics a running operator does not export: {missing}"
