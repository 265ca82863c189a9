"""Each image imports every module it ships with exactly what it installs.

Each image's Dockerfile copies the contracts (api/) and its own package's folder and installs its own extra:
`.[operator]`, `.[worker]` (and its native module), `.[spark]`; the test reads both from the Dockerfile. A child
interpreter refuses every third-party module outside the image's distributions (the extras' requirements and all
they require, from the installed metadata), then imports every module the image ships: an import that only works
because the development environment has more fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib, importlib.abc, importlib.metadata as md, importlib.util, json, pkgutil, re, sys

packages, extras, first_party, skip = json.loads(sys.argv[1])

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

def refused(fullname):
    top = fullname.partition(".")[0]
    if top in sys.stdlib_module_names or top in first_party or top.startswith("_"):
        return None
    dists = {d.lower().replace("_", "-") for d in owners.get(top, [])}
    return dists if dists and not dists & allowed else None

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        dists = refused(fullname)
        if dists:
            raise ModuleNotFoundError(f"{fullname!r} ({', '.join(sorted(dists))}) is not in this image", name=fullname)
        return None

sys.meta_path.insert(0, Refuse())
# A library that probes for an optional module (python-json-logger asks for orjson) is told it is absent, as it
# would be in the image.
probe = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: None if refused(name) else probe(name, package)
failed = []
for package in packages:
    root = importlib.import_module(package)
    names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
    for name in names:
        if name.endswith("__main__") or name in skip:
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\n".join(failed))
sys.exit(1 if failed else 0)
"""

FIRST_PARTY = ["mysqlcapture_api", "mysqlcapture_worker", "mysqlcapture_operator", "mysqlcapture_compaction"]
PACKAGE_OF_DIR = {
    "api": "mysqlcapture_api",
    "worker": "mysqlcapture_worker",
    "operator": "mysqlcapture_operator",
    "spark": "mysqlcapture_compaction",
}
# Modules of the contracts that read or write Delta tables through delta-rs and Arrow, Arrow text, and Maxwell's
# number and string text (orjson): the worker's and the compaction's images have those, the operator's has not,
# and `.importlinter` forbids the operator to import them.
NOT_FOR_THE_OPERATOR = [
    "mysqlcapture_api.changelog",
    "mysqlcapture_api.schema.history",
    "mysqlcapture_api.javatext",
    "mysqlcapture_api.arrowtext",
]


@dataclass(frozen=True)
class Image:
    """What a Dockerfile ships: the source folders it copies (each a package) and the extras it installs."""

    packages: list[str]
    extras: list[str]


def image_of(dockerfile: Path) -> Image:
    text = dockerfile.read_text()
    dirs = re.findall(r"^COPY (\w+) \./\1$", text, flags=re.MULTILINE)
    extras = re.findall(r"pip install [^\n]*'\.\[([a-z,]+)\]'", text)
    return Image(
        packages=[PACKAGE_OF_DIR[d] for d in dirs if d in PACKAGE_OF_DIR],
        extras=sorted({e for group in extras for e in group.split(",")}),
    )


def _import_all(packages: list[str], extras: list[str], skip: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    paths = [str(REPO / d) for d in ("api", "worker", "operator", "spark")]
    env = {"PYTHONPATH": ":".join(paths), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([packages, extras, FIRST_PARTY, list(skip)])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("dockerfile", "shipped", "skip"),
    [
        (
            "operator/Dockerfile",
            Image(["mysqlcapture_api", "mysqlcapture_operator"], ["operator"]),
            NOT_FOR_THE_OPERATOR,
        ),
        ("worker/Dockerfile", Image(["mysqlcapture_api", "mysqlcapture_worker"], ["worker"]), []),
        ("spark/Dockerfile", Image(["mysqlcapture_api", "mysqlcapture_compaction"], ["spark"]), []),
    ],
    ids=["operator image", "worker image", "compaction image"],
)
def test_each_image_imports_every_module_it_ships_with_only_its_dependencies(
    dockerfile: str, shipped: Image, skip: list[str]
) -> None:
    image = image_of(REPO / dockerfile)
    # What the Dockerfile copies and installs is what this case checks: a folder or an extra added to the image
    # without this test knowing fails here.
    assert image == shipped
    done = _import_all(image.packages, image.extras, skip)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_guard_refuses_what_an_image_lacks() -> None:
    """The check itself: the operator's image has no pyspark and no pyarrow."""
    done = _import_all(["mysqlcapture_compaction"], ["operator"])
    assert done.returncode == 1
    assert "mysqlcapture_compaction.session: ModuleNotFoundError: 'pyspark" in done.stdout, done.stdout
    done = _import_all(["mysqlcapture_api"], ["operator"])
    assert done.returncode == 1
    assert "mysqlcapture_api.changelog: ModuleNotFoundError: 'pyarrow" in done.stdout, done.stdout
