"""The column-kind numbers the Python plans pass to the compiled renderer are the numbers the Rust source gives them.

The plans (`decode.native`: K_* and B_*, `snapshot.fast`: T_*) are built in Python and read in Rust; a kind
renumbered on one side only would render every column of that kind as another kind. The Rust source is read, not
the built module: the numbers are private constants there, and this must hold whether or not the module is built.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
from mysqlcapture_worker.decode import native
from mysqlcapture_worker.snapshot import fast

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "worker" / "native" / "src"
# `const K_INT: u8 = 0;`, `pub const B_TABLE: i64 = 4;` (the comment after it ignored)
_CONST = re.compile(
    r"^\s*(?:pub(?:\([a-z]+\))?\s+)?const\s+([A-Z][A-Z0-9_]*)\s*:\s*[ui](?:8|16|32|64|size)\s*=\s*(\d+)\s*;"
)


def rust_constants(file: str, prefix: str) -> dict[str, int]:
    """The integer constants named `prefix`* in worker/native/src/`file`."""
    found = {}
    for line in (SRC / file).read_text().splitlines():
        m = _CONST.match(line)
        if m and m.group(1).startswith(prefix):
            found[m.group(1)] = int(m.group(2))
    return found


def python_constants(module: ModuleType, prefix: str) -> dict[str, int]:
    return {
        name: value
        for name, value in vars(module).items()
        if name.startswith(prefix) and name.isupper() and isinstance(value, int)
    }


@pytest.mark.parametrize(
    ("file", "prefix", "module", "rust_only"),
    [
        ("lib.rs", "K_", native, set()),  # the binlog renderer's column kinds
        ("blob.rs", "B_", native, {"B_LAST"}),  # blob kinds; B_LAST is Rust's bound check, checked below
        ("text.rs", "T_", fast, set()),  # the snapshot renderer's column kinds
    ],
    ids=["column kinds", "blob kinds", "text column kinds"],
)
def test_python_kinds_equal_rusts(file: str, prefix: str, module: ModuleType, rust_only: set[str]) -> None:
    rust = rust_constants(file, prefix)
    assert len(rust) >= 9, f"the constants of {file} were not found: has its syntax changed?"
    expected = {name: value for name, value in rust.items() if name not in rust_only}
    assert python_constants(module, prefix) == expected


def test_blob_kinds_end_at_rusts_bound() -> None:
    # Rust refuses a blob kind above B_LAST: every kind Python may send must be within it.
    rust = rust_constants("blob.rs", "B_")
    assert max(python_constants(native, "B_").values()) == rust["B_LAST"]


def test_text_blob_kinds_do_not_collide_with_text_kinds() -> None:
    # The snapshot plan sends T_BLOB + a blob kind: every such number lies above the plain text kinds.
    plain = [v for name, v in python_constants(fast, "T_").items() if name != "T_BLOB"]
    assert max(plain) < fast.T_BLOB
