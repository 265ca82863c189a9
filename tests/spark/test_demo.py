"""`make demo` as a new user meets it (`python -m mysqlcapture_dev.demo`, what the target runs after its setup): a
private server of the flavor, the shop workload, the worker's change log and its summary, then the compaction, one
table's rows and one row's history, each as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support import worker_env


def test_the_demo_captures_compacts_and_answers_as_it_says(tmp_path: Path, flavor: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mysqlcapture_dev.demo", "--flavor", flavor],
        cwd=tmp_path,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    changelog = tmp_path / "demo-output" / "changelog"
    # 200 orders placed, every third paid, every tenth deleted; the database and its table created.
    assert f"change log at {changelog}: 288 events\n" in out, out
    summary = out.split(f"change log at {changelog}: 288 events\n", 1)[1].split("checkpoint:", 1)[0]
    assert summary.split("\n")[:-1] == [
        "  shop.- database-create: 1",
        "  shop.orders delete: 20",
        "  shop.orders insert: 200",
        "  shop.orders table-create: 1",
        "  shop.orders update: 66",
    ], summary
    assert re.search(r"compacted change-log version \d+: 288 events, ordering keys 0\.\.288, 1 tables", out), out
    # `show`: the current state, the source's values as the server holds them.
    table = out.split("--table shop.orders --limit 5\n", 1)[1].split("\n$ ", 1)[0]
    lines = table.splitlines()
    assert lines[0].split() == ["id", "customer", "total", "status", "placed"], table
    rows = [line.split()[:5] for line in lines[2:7]]
    assert rows == [[str(i), "customer", str(i), f"{i}.25", "paid" if i % 3 == 0 else "new"] for i in range(1, 6)]
    assert "(5 rows)" in table, table
    assert "note: the first 5 of 180 rows by key (--limit)" in done.stderr, done.stderr[-3000:]  # notes: stderr
    # `history`: the order paid after it was placed, newest first.
    history = out.split("--table shop.orders --pk 3\n", 1)[1]
    versions = [line for line in history.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", line)]
    assert [v.split()[2:4] for v in versions] == [["update", "[3]"], ["insert", "[3]"]], history
    assert '"status":"new"' in versions[0] and '"status":"paid"' in versions[0] and "status" in versions[0].split()
    assert "(2 versions)" in history, history
