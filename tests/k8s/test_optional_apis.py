"""The Monitoring and CompactionScheduler conditions: what a capture gets on a cluster without the Prometheus or the
Spark operator's CRDs, said on the capture (pure parts: status.compute and the reconcile's record; no cluster)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mysqlcapture_api.manifest import validate_manifest
from mysqlcapture_operator import reconcile
from mysqlcapture_operator.builders import Owner
from mysqlcapture_operator.settings import OperatorSettings
from mysqlcapture_operator.status import Observation, OptionalApis, changed, compute

from tests.support import manifest

pytestmark = pytest.mark.unit
T0 = datetime(2026, 1, 1, tzinfo=UTC)
OWNER = Owner("orders", "shop", "uid-1")
SERVED = OptionalApis(
    monitoring=(("ServiceMonitor", "orders-worker"), ("PrometheusRule", "orders-alerts")),
    compaction=("ScheduledSparkApplication", "orders-compaction"),
)
NOTHING_SERVED = OptionalApis(
    missing_monitoring=("ServiceMonitor", "PrometheusRule"), compaction=("CronJob", "orders-compaction")
)
MONITORING_OK = (
    "ServiceMonitor orders-worker and PrometheusRule orders-alerts applied: Prometheus scrapes the worker and "
    "alerts on it"
)
MONITORING_MISSING = (
    "the cluster does not serve ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1): no scrape config "
    "(ServiceMonitor) and no alert rules (PrometheusRule) were created for this capture. Fix: install the Prometheus "
    "operator's CRDs (tested with v0.93.0); the operator creates both within its discovery and resync intervals"
)
SPARK_MISSING = (
    "the cluster does not serve ScheduledSparkApplication (sparkoperator.k8s.io/v1beta2): compaction runs as CronJob "
    "orders-compaction (spark-submit), which reports no failed runs. To run it with the Spark operator, install its "
    "CRDs (tested with v2.5.2) and the operator: a ScheduledSparkApplication replaces the CronJob within this "
    "operator's discovery and resync intervals"
)


def optional_conditions(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["message"])
        for c in status["conditions"]
        if c["type"] in ("Monitoring", "CompactionScheduler")
    }


@pytest.mark.parametrize(
    ("apis", "expected"),
    [
        (
            SERVED,
            {
                "Monitoring": ("True", "PrometheusOperator", MONITORING_OK),
                "CompactionScheduler": (
                    "True",
                    "SparkOperator",
                    "compaction runs as ScheduledSparkApplication orders-compaction (the Spark operator)",
                ),
            },
        ),
        (
            NOTHING_SERVED,
            {
                "Monitoring": ("False", "PrometheusOperatorMissing", MONITORING_MISSING),
                "CompactionScheduler": ("False", "SparkOperatorMissing", SPARK_MISSING),
            },
        ),
        # One of the two monitoring kinds served: neither child is built (alerts without scraping, or the
        # reverse, would be half a setup); the message names only the missing kind.
        (
            OptionalApis(missing_monitoring=("PrometheusRule",), compaction=("CronJob", "orders-compaction")),
            {
                "Monitoring": (
                    "False",
                    "PrometheusOperatorMissing",
                    MONITORING_MISSING.replace("ServiceMonitor and PrometheusRule (", "PrometheusRule ("),
                ),
                "CompactionScheduler": ("False", "SparkOperatorMissing", SPARK_MISSING),
            },
        ),
        # A JSON-lines sink has no compaction: no CompactionScheduler condition at all.
        (OptionalApis(monitoring=SERVED.monitoring), {"Monitoring": ("True", "PrometheusOperator", MONITORING_OK)}),
    ],
    ids=["both-operators", "neither", "prometheus-rule-missing", "no-compaction"],
)
def test_conditions_say_which_optional_children_were_applied(
    apis: OptionalApis, expected: dict[str, tuple[str, str, str]]
) -> None:
    status, _ = compute({}, Observation(2, T0, unreachable="refused", apis=apis))
    assert optional_conditions(status) == expected
    assert all(c["observedGeneration"] == 2 for c in status["conditions"])


def test_no_reconcile_yet_keeps_the_last_conditions_and_adds_none() -> None:
    fresh, _ = compute({}, Observation(1, T0, unreachable="refused"))
    assert optional_conditions(fresh) == {}
    missing, _ = compute({}, Observation(1, T0, unreachable="refused", apis=NOTHING_SERVED))
    # An operator restarted: no reconcile has run in it yet, so it does not know; what was said stays.
    kept, _ = compute(missing, Observation(1, T0 + timedelta(minutes=1), unreachable="refused"))
    assert optional_conditions(kept) == optional_conditions(missing) and changed(missing, kept) is None


def test_a_capture_switched_to_jsonl_loses_its_compaction_condition() -> None:
    delta, _ = compute({}, Observation(1, T0, unreachable="refused", apis=NOTHING_SERVED))
    jsonl, _ = compute(delta, Observation(2, T0, unreachable="refused", apis=OptionalApis()))
    assert set(optional_conditions(jsonl)) == {"Monitoring"}
    assert changed(delta, jsonl) == {"conditions": jsonl["conditions"], "observedGeneration": 2}


def test_installing_the_crds_flips_both_conditions_once_and_a_missing_api_is_an_event_once() -> None:
    missing, events = compute({}, Observation(1, T0, unreachable="refused", apis=NOTHING_SERVED))
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Warning", "PrometheusOperatorMissing", MONITORING_MISSING),
        ("Normal", "SparkOperatorMissing", SPARK_MISSING),
    ]
    later = T0 + timedelta(minutes=3)
    same, events = compute(missing, Observation(1, later, unreachable="refused", apis=NOTHING_SERVED))
    assert events == [] and changed(missing, same) is None
    served, events = compute(same, Observation(1, later, unreachable="refused", apis=SERVED))
    assert events == []
    times = {c["type"]: c["lastTransitionTime"] for c in served["conditions"]}
    assert times["Monitoring"] == times["CompactionScheduler"] == "2026-01-01T00:03:00Z"
    assert times["Ready"] == "2026-01-01T00:00:00Z"  # not flipped: not moved
    assert {k: v[:2] for k, v in optional_conditions(served).items()} == {
        "Monitoring": ("True", "PrometheusOperator"),
        "CompactionScheduler": ("True", "SparkOperator"),
    }


def capture(**spec: Any) -> Any:
    doc = manifest("orders", port=3306, sink={"type": "delta", "delta": {"uri": "s3://b/orders"}}, extra_spec=spec)
    doc["spec"]["source"]["passwordFrom"] = {"secretKeyRef": {"name": "mysql", "key": "password"}}
    return validate_manifest(doc)


@pytest.mark.parametrize(
    ("spec", "missing", "spark_operator", "expected"),
    [
        ({}, (), True, SERVED),
        ({}, ("ServiceMonitor", "PrometheusRule"), False, NOTHING_SERVED),
        ({"sink": {"type": "jsonl", "jsonl": {"path": "-"}}}, (), True, OptionalApis(monitoring=SERVED.monitoring)),
    ],
    ids=["both-operators", "neither", "jsonl"],
)
def test_the_reconcile_records_the_optional_children_it_built(
    spec: dict[str, Any], missing: tuple[str, ...], spark_operator: bool, expected: OptionalApis
) -> None:
    children = reconcile.desired_children(
        capture(**spec), OWNER, settings=OperatorSettings(), monitoring=not missing, spark_operator=spark_operator
    )
    assert reconcile.optional_apis(children, missing) == expected
