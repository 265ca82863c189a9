"""The worker's process (`mysqlcapture run`) runs without pandas: PyArrow's shim would import it on the first
`pa.array` of a Python list, 0.2 s of every start and about 40 MiB, for nothing the worker uses."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from mysqlcapture_worker.commands import _without_pandas
_without_pandas()
import pyarrow as pa
import pyarrow.parquet as pq
from mysqlcapture_worker.sinks.delta import events_to_arrow
table = pa.table({"a": pa.array([1, 2, 3]), "b": pa.array(["x", None, "z"])})
pq.write_table(table, sys.argv[1])
print(sorted(m for m in sys.modules if m == "pandas" or m.startswith("pandas.")), pq.read_table(sys.argv[1]).num_rows)
try:
    import pandas
except ImportError as exc:
    print(type(exc).__name__)
"""


def test_the_worker_process_does_without_pandas(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path) + "/t.parquet"], capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:2] == ["[] 3", "ModuleNotFoundError"]
