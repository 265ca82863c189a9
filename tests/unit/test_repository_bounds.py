"""Nothing in the repository's code, tests, scripts or Makefile names a path above the repository root.

A clone anywhere must pass `make test` with no file from outside it (only the package registries and the cache
its own scripts fill, ~/.cache/mysqlcapture). Checked here, statically:

- Python (read with `ast`): a chain from `__file__` (`Path(__file__).parents[k]`, `.parent`, `os.path.dirname`)
  or from a name bound to one (`REPO`, imported or assigned) that climbs past the repository root; a string
  holding a `..` path component; a string naming this kind of machine's absolute places (/work, /root, /home).
- Shell scripts, the Makefile and .ci/: a `..` path component, unless it hangs off the script's own directory
  (`$(dirname "$0")/..`) and stays inside the repository; the same absolute places.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
# Build output, caches and VCS metadata: not the repository's code.
SKIP_DIRS = {".git", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "target", "build", "demo-output"}
SKIP_DIRS_SUFFIX = ".egg-info"
# Names other modules import as the repository root (tests.support.REPO, bench.common.REPO).
ROOT_NAMES = {"REPO"}
PY_UP_COMPONENT = re.compile(r"(^|/)\.\.(/|$)|(?<![\w.])\.\./")
# A piece of an f-string between two values: `..` only with a slash beside it (f"{a}..{b}" is a range).
PY_UP_IN_FSTRING = re.compile(r"/\.\.(/|$)|(?<![\w.])\.\./")
MACHINE_PATH = re.compile(r"(?<![\w.~$}-])/(work|root|home|Users)(/|$)", re.MULTILINE)
SH_SELF_DIR = re.compile(r"""\$\(\s*dirname\s+"?\$(?:0|\{BASH_SOURCE(?:\[0\])?\}|BASH_SOURCE)"?\s*\)((?:/\.\.)+)""")
SH_UP_COMPONENT = re.compile(r"""(?:^|(?<=[\s"'=:(/]))\.\.(?=/|$|[\s"';:)}])""", re.MULTILINE)


def _ups(node: ast.AST, names: dict[str, int]) -> int | None:
    """How many directories above the file `node` denotes (0: the file itself); None when it is no such path."""
    if isinstance(node, ast.Name):
        return 0 if node.id == "__file__" else names.get(node.id)
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _ups(node.value, names)
        return None if inner is None else inner + 1
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        inner = _ups(node.value.value, names)
        index = node.slice
        if inner is None or not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
            return None
        return inner + index.value + 1
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("resolve", "absolute", "expanduser") and isinstance(func, ast.Attribute) and not node.args:
            return _ups(func.value, names)
        if name in ("Path", "PurePath", "abspath", "realpath", "normpath") and len(node.args) == 1:
            return _ups(node.args[0], names)
        if name == "dirname" and len(node.args) == 1:
            inner = _ups(node.args[0], names)
            return None if inner is None else inner + 1
    return None


def python_escapes(rel: Path, source: str) -> list[str]:
    """`line N: why` for each place in a Python module (at `rel` in the repository) that leaves the repository."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:  # unreadable is not clean: say where
        return [f"line {exc.lineno}: cannot be read as Python ({exc.msg})"]
    root = len(rel.parts)  # directories above the file up to and including the repository root
    names: dict[str, int] = {}
    found: dict[int, str] = {}
    in_fstrings = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in ROOT_NAMES:
                    names[alias.asname or alias.name] = root
    # Assignments in source order, so a name bound from another bound name resolves (twice: order inside
    # functions versus module level does not matter then).
    assigns = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=lambda n: n.lineno)
    for _ in range(2):
        for assign in assigns:
            ups = _ups(assign.value, names)
            for target in assign.targets:
                if isinstance(target, ast.Name) and ups is not None:
                    names[target.id] = ups
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        ups = _ups(node, names) if isinstance(node, ast.Attribute | ast.Subscript | ast.Call) else None
        if ups is not None and ups > root:
            found.setdefault(line, f"line {line}: climbs {ups - root} directory(ies) above the repository root")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            for pattern, what in (
                (PY_UP_IN_FSTRING if id(node) in in_fstrings else PY_UP_COMPONENT, "a '..' path component"),
                (MACHINE_PATH, "an absolute path of a machine"),
            ):
                if match := pattern.search(text):
                    at = line + text[: match.start()].count("\n")  # the line inside a docstring
                    snippet = text[max(0, match.start() - 30) : match.end() + 30]
                    found.setdefault(at, f"line {at}: {what} in {snippet!r}")
    return [found[line] for line in sorted(found)]


def shell_escapes(rel: Path, text: str) -> list[str]:
    """The same for a shell script or Makefile at `rel` (a Makefile's commands run at the repository root)."""
    depth = len(rel.parent.parts)  # the script's directory, in directories below the repository root
    found: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in SH_SELF_DIR.finditer(line):
            ups = match.group(1).count("/")
            if ups > depth:
                found.append(f"line {number}: climbs {ups - depth} directory(ies) above the repository root")
        rest = SH_SELF_DIR.sub("", line)
        if SH_UP_COMPONENT.search(rest):
            found.append(f"line {number}: a '..' path component: {line.strip()[:100]}")
        if MACHINE_PATH.search(rest):
            found.append(f"line {number}: an absolute path of a machine: {line.strip()[:100]}")
    return found


def _is_shell(path: Path) -> bool:
    if path.name == "Makefile" or path.suffix in (".sh", ".mk") or path.parent.name == ".ci":
        return True
    if path.suffix:
        return False
    try:
        with path.open("rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and b"sh" in first and b"python" not in first


def repository_files() -> list[Path]:
    """Every Python module, shell script and Makefile in the repository (build output and caches left out)."""
    out = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        if any(p in SKIP_DIRS or p.endswith(SKIP_DIRS_SUFFIX) for p in rel.parts[:-1]) or not path.is_file():
            continue
        if path.suffix == ".py" or _is_shell(path):
            out.append(rel)
    return sorted(out)


def escapes(rel: Path) -> list[str]:
    text = (REPO / rel).read_text(errors="replace")
    return python_escapes(rel, text) if rel.suffix == ".py" else shell_escapes(rel, text)


def test_nothing_names_a_path_above_the_repository_root() -> None:
    files = repository_files()
    # The scan sees what it must: the Makefile, CI's entry point, the fetch scripts, test and bench modules.
    for expected in ("Makefile", ".ci/run", "tests/k8s/build-control-plane.sh", "tests/support.py", "bench/bench.py"):
        assert Path(expected) in files, f"{expected} was not scanned"
    assert sum(1 for f in files if f.parts[0] == "tests" and f.suffix == ".py") > 50
    found = {str(rel): problems for rel in files if (problems := escapes(rel))}
    assert found == {}, "\n".join(f"{rel}: {p}" for rel, problems in found.items() for p in problems)


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        # parents[2] of tests/unit/x.py is the root; parents[3] is its parent.
        ("tests/unit/x.py", "R = Path(__file__).resolve().parents[2]", []),
        ("tests/k8s/x.py", 'C = Path(__file__).resolve().parents[3] / "shared"', ["line 1: climbs 1"]),
        ("tests/support.py", "REPO = Path(__file__).resolve().parent.parent\nUP = REPO.parent", ["line 2: climbs 1"]),
        # REPO imported from another module is the root wherever it is used.
        ("tests/k8s/x.py", "from tests.support import REPO\nX = REPO.parent / 'shared'", ["line 2: climbs 1"]),
        ("tests/k8s/x.py", "from tests.support import REPO\nX = REPO / 'crds'", []),
        ("bench/x.py", "import os\nD = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))", []),
        ("bench/x.py", "D = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))", ["line 1: climbs 1"]),
        # A name bound from a bound name.
        ("tests/x.py", "HERE = Path(__file__).parent\nTOP = HERE.parent\nOUT = TOP.parent", ["line 3: climbs 1"]),
        ("tests/x.py", 'P = Path(os.environ.get("X", "<up>/shared/thirdparty-crds"))', ["line 1: a '<up>' path"]),
        ("tests/x.py", 'P = os.path.join(ROOT, "<up>", "shared")', ["line 1: a '<up>' path"]),
        ("tests/x.py", 'P = Path("<machine>/shared/crds")', ["line 1: an absolute path"]),
        ("tests/x.py", 'subprocess.run("cp <up>/shared/x .", shell=True)', ["line 1: a '<up>' path"]),
        ("tests/x.py", 'P = "<root>/.cache/mysqlcapture"', ["line 1: an absolute path"]),
        # Prose with an ellipsis, an S3 key and the user's cache are not paths out of the repository.
        ("tests/x.py", 'M = "reading ... and more .."\nU = "s3://lake/home/x"\nC = "~/.cache/x"', []),
        # In an f-string, `..` between two values is a range; after a value and a slash it is a path.
        ("tests/x.py", 'M = f"keys {a}..{b}"\nP = f"{REPO}/<up>/shared"', ["line 2: a '<up>' path"]),
        ("tests/k8s/kind/e2e.sh", 'cd "$(dirname "$0")/<up>/<up>/<up>"', []),
        ("tests/k8s/kind/e2e.sh", 'cd "$(dirname "${BASH_SOURCE[0]}")/<up>/<up>/<up>/<up>"', ["line 1: climbs 1"]),
        ("tests/k8s/x.sh", "cp <up>/shared/thirdparty-crds/*.yaml .", ["line 1: a '<up>' path"]),
        ("Makefile", "CRDS := $(CURDIR)/<up>/shared", ["line 1: a '<up>' path"]),
        ("Makefile", "\tcd <up> && ls", ["line 1: a '<up>' path"]),
        ("Makefile", "\tfor i in {1..3}; do :; done", []),
        (".ci/run", "cp <machine>/shared/x .\nexport C=$HOME/.cache/x", ["line 1: an absolute path"]),
    ],
    ids=[
        "py-parents-to-root",
        "py-parents-above-root",
        "py-root-name-parent",
        "py-imported-root-parent",
        "py-imported-root-child",
        "py-dirname-to-root",
        "py-dirname-above-root",
        "py-bound-chain",
        "py-dotdot-string",
        "py-dotdot-component",
        "py-work-path",
        "py-shell-command",
        "py-root-home",
        "py-prose-not-paths",
        "py-fstring",
        "sh-self-dir-to-root",
        "sh-self-dir-above-root",
        "sh-relative-dotdot",
        "make-curdir-dotdot",
        "make-cd-dotdot",
        "make-brace-range",
        "ci-absolute",
    ],
)
def test_the_scan_finds_what_leaves_the_repository(rel: str, source: str, expected: list[str]) -> None:
    path = Path(rel)
    # The cases name the places they stand for, so that this module passes its own scan.
    places = {"<up>": "." * 2, "<machine>": "/" + "work", "<root>": "/" + "root"}
    for placeholder, value in places.items():
        source = source.replace(placeholder, value)
        expected = [e.replace(placeholder, value) for e in expected]
    found = python_escapes(path, source) if path.suffix == ".py" else shell_escapes(path, source)
    assert len(found) == len(expected), found
    for problem, start in zip(found, expected, strict=True):
        assert problem.startswith(start), found
