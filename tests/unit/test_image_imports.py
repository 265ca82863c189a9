"""Each deployable imports with exactly what its image installs.

The operator image installs `.[operator]`, the worker image the base dependencies (and its native module), the
compaction image `.[spark]`. A child interpreter refuses every third-party module outside the image's
distributions (the extras' requirements and all they require, from the installed metadata), then imports every
module of the deployable: an import that only works because the development environment has more fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib, importlib.abc, importlib.metadata as md, json, pkgutil, re, sys

packages, extras, first_party = json.loads(sys.argv[1])

def name_of(requirement):
    return re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")

def closure(roots):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [name_of(r) for r in requires if "extra ==" not in r]
    return seen

own = md.requires("mysqlcapture") or []
roots = [name_of(r) for r in own if "extra ==" not in r]
roots += [name_of(r) for r in own if any(f'extra == "{e}"' in r for e in extras)]
allowed = closure(roots)
owners = md.packages_distributions()

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top in first_party or top.startswith("_"):
            return None
        dists = {d.lower().replace("_", "-") for d in owners.get(top, [])}
        if dists and not dists & allowed:
            raise ModuleNotFoundError(f"{fullname!r} ({', '.join(sorted(dists))}) is not in this image", name=fullname)
        return None

sys.meta_path.insert(0, Refuse())
failed = []
for package in packages:
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    for name in names:
        if name.endswith("__main__"):
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\n".join(failed))
sys.exit(1 if failed else 0)
"""

FIRST_PARTY = ["mysqlcapture_api", "mysqlcapture_worker", "mysqlcapture_operator", "mysqlcapture_compaction"]


def _import_all(packages: list[str], extras: list[str]) -> subprocess.CompletedProcess[str]:
    paths = [str(REPO / d) for d in ("api", "worker", "operator", "spark")]
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([packages, extras, FIRST_PARTY])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("packages", "extras"),
    [
        (["mysqlcapture_operator", "mysqlcapture_api"], ["operator"]),
        (["mysqlcapture_worker", "mysqlcapture_api"], []),
        (["mysqlcapture_compaction"], ["spark"]),
    ],
    ids=["operator image", "worker image", "compaction image"],
)
def test_each_image_imports_every_module_with_only_its_dependencies(packages: list[str], extras: list[str]) -> None:
    done = _import_all(packages, extras)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_guard_refuses_what_an_image_lacks() -> None:
    """The check itself: the operator's image has no pyspark, so importing compaction's Spark session fails."""
    done = _import_all(["mysqlcapture_compaction"], ["operator"])
    assert done.returncode == 1
    assert "mysqlcapture_compaction.session: ModuleNotFoundError: 'pyspark" in done.stdout, done.stdout
