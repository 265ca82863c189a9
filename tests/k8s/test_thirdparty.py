"""The third-party CRDs: pinned once, fetched from their Go modules into the cache, a failure reported with its reason.

The fetch tests run the real script with a private cache directory: through the Go module proxy (or the machine's
Go module cache, which holds what the proxy served and sum.golang.org checked), or with the proxy turned off.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from mysqlcapture_operator import status

from tests.k8s import thirdparty
from tests.support import REPO

pytestmark = pytest.mark.unit
SPARK = "github.com/kubeflow/spark-operator/v2"
PROMETHEUS = "github.com/prometheus-operator/prometheus-operator"
# CRD name per fetched file: each file holds the CRD it is named after.
CRDS = {
    "sparkoperator.k8s.io_sparkapplications.yaml": "sparkapplications.sparkoperator.k8s.io",
    "sparkoperator.k8s.io_scheduledsparkapplications.yaml": "scheduledsparkapplications.sparkoperator.k8s.io",
    "monitoring.coreos.com_servicemonitors.yaml": "servicemonitors.monitoring.coreos.com",
    "monitoring.coreos.com_podmonitors.yaml": "podmonitors.monitoring.coreos.com",
    "monitoring.coreos.com_prometheusrules.yaml": "prometheusrules.monitoring.coreos.com",
}


def test_the_pins() -> None:
    assert thirdparty.pins() == (
        thirdparty.Pin(
            SPARK,
            "v2.5.2",
            "h1:6nX2UhwSfnYi1mtwczgFfJTMeLSL/1ajTvkFe8R7Vdc=",
            (
                "charts/spark-operator-chart/crds/sparkoperator.k8s.io_sparkapplications.yaml",
                "charts/spark-operator-chart/crds/sparkoperator.k8s.io_scheduledsparkapplications.yaml",
            ),
        ),
        thirdparty.Pin(
            PROMETHEUS,
            "v0.93.0",
            "h1:AohlYJT+En8TmNpAcEUJ3GsaJTAqfEBwHmGTVpRm/Io=",
            (
                "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
                "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
                "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
            ),
        ),
    )


def test_the_operator_and_the_readme_name_the_pinned_versions() -> None:
    # Copies of the pins (the operator's image has no tests/): they must not drift from them.
    assert thirdparty.pin(SPARK).version == status.TESTED_SPARK_OPERATOR
    assert thirdparty.pin(PROMETHEUS).version == status.TESTED_PROMETHEUS_OPERATOR
    readme = (REPO / "README.md").read_text()
    for pin in thirdparty.pins():
        assert f"`{pin.module}@{pin.version}`" in readme, pin.module


def private_cache(tmp_path: Path, **env: str) -> dict[str, str]:
    return {**os.environ, "MYSQLCAPTURE_CACHE": str(tmp_path / "cache"), **env}


def test_a_fetch_copies_the_pinned_files_into_a_versioned_directory_once(tmp_path: Path) -> None:
    env = private_cache(tmp_path)
    first = thirdparty.fetch(env=env)
    assert first == tmp_path / "cache" / "thirdparty-crds-spark-operator-v2.5.2-prometheus-operator-v0.93.0"
    assert sorted(p.name for p in first.iterdir()) == sorted([*CRDS, "pins"])
    for name, crd in CRDS.items():
        docs = [d for d in yaml.safe_load_all((first / name).read_text()) if d]
        assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [("CustomResourceDefinition", crd)]
    times = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    # Cached: the same directory, nothing copied again, even with no way to download.
    again = thirdparty.fetch(env={**env, "GOPROXY": "off", "GOMODCACHE": str(tmp_path / "empty-module-cache")})
    assert again == first and {p.name: p.stat().st_mtime_ns for p in again.iterdir()} == times


def test_a_failed_fetch_fails_with_its_reason_and_the_next_one_retries(tmp_path: Path) -> None:
    offline = private_cache(tmp_path, GOPROXY="off", GOMODCACHE=str(tmp_path / "empty-module-cache"))
    with pytest.raises(AssertionError) as failed:
        thirdparty.fetch(env=offline)
    assert str(failed.value).startswith(
        "the Spark and Prometheus operators' CRDs are not available: fetching the third-party CRDs failed: go mod "
        f"download: {SPARK}@v2.5.2: module lookup disabled by GOPROXY=off"
    )
    assert str(failed.value).endswith("(`make thirdparty-crds` tries again)")
    dest = tmp_path / "cache" / "thirdparty-crds-spark-operator-v2.5.2-prometheus-operator-v0.93.0"
    assert [p.name for p in dest.iterdir()] == ["FAILED"]
    assert thirdparty.fetch(env=private_cache(tmp_path)) == dest
    assert sorted(p.name for p in dest.iterdir()) == sorted([*CRDS, "pins"])


def test_a_module_whose_sum_differs_from_the_pin_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "fetch-thirdparty-crds.sh"
    shutil.copy(thirdparty.SCRIPT, script)
    pins = thirdparty.PINS.read_text()
    (tmp_path / "thirdparty-crds.pins").write_text(pins.replace("h1:AohlYJT+", "h1:BohlYJT+"))
    with pytest.raises(AssertionError) as failed:
        thirdparty.fetch(script=script, env=private_cache(tmp_path))
    assert (
        f"{PROMETHEUS}@v0.93.0 has sum h1:AohlYJT+En8TmNpAcEUJ3GsaJTAqfEBwHmGTVpRm/Io=, "
        f"{tmp_path}/thirdparty-crds.pins pins h1:BohlYJT+En8TmNpAcEUJ3GsaJTAqfEBwHmGTVpRm/Io="
    ) in str(failed.value)
