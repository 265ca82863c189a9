"""The third-party CRDs the Kubernetes tests install: the Spark operator's and the Prometheus operator's.

Pinned in `thirdparty-crds.pins` (module, version, go.sum hash, files), fetched from their projects' Go modules by
`fetch-thirdparty-crds.sh` into ~/.cache/mysqlcapture (`make thirdparty-crds`, part of `make setup`). `crd_dir()`
runs that script, which is instant when cached, so a plain `pytest` finds them too; a failed fetch fails the tests
that need them with the reason the script recorded, never a skip.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
PINS = HERE / "thirdparty-crds.pins"
SCRIPT = HERE / "fetch-thirdparty-crds.sh"


@dataclass(frozen=True)
class Pin:
    """One Go module the CRDs come from."""

    module: str  # e.g. github.com/kubeflow/spark-operator/v2
    version: str  # e.g. v2.5.2
    sum: str  # the module's go.sum hash (h1:...)
    files: tuple[str, ...]  # paths of CRD files inside the module


def pins() -> tuple[Pin, ...]:
    """The pins, as `thirdparty-crds.pins` lists them."""
    found: list[Pin] = []
    for line in PINS.read_text().splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "module":
            module, version, h1 = words[1:]
            found.append(Pin(module, version, h1, ()))
        else:
            last = found[-1]
            found[-1] = Pin(last.module, last.version, last.sum, (*last.files, words[0]))
    return tuple(found)


def pin(module_prefix: str) -> Pin:
    """The pin of the module whose path starts with `module_prefix`."""
    (found,) = [p for p in pins() if p.module.startswith(module_prefix)]
    return found


def fetch(*, script: Path = SCRIPT, env: dict[str, str] | None = None) -> Path:
    """Run the fetch script (instant when cached); the directory holding the CRDs, or AssertionError with the
    reason the script recorded."""
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False, env=env, timeout=900)
    lines = done.stdout.split()
    if done.returncode != 0 or not lines:
        raise AssertionError(f"{script} exited with {done.returncode}: {done.stderr.strip()[-2000:]}")
    dest = Path(lines[-1])
    failed = dest / "FAILED"
    if failed.exists():
        raise AssertionError(
            f"the Spark and Prometheus operators' CRDs are not available: {failed.read_text().strip()} "
            "(`make thirdparty-crds` tries again)"
        )
    return dest


@functools.cache
def crd_dir() -> Path:
    """The cache directory holding the fetched CRDs (fetched once per test session when missing)."""
    return fetch()


def crd_files() -> list[Path]:
    """Every pinned CRD file, fetched."""
    directory = crd_dir()
    files = [directory / PurePosixPath(f).name for p in pins() for f in p.files]
    missing = [str(f) for f in files if not f.is_file()]
    assert not missing, f"{SCRIPT.name} left out {missing}"
    return files


def crd_file(name: str) -> Path:
    """One fetched CRD file by its name (e.g. sparkoperator.k8s.io_sparkapplications.yaml)."""
    (found,) = [f for f in crd_files() if f.name == name]
    return found
