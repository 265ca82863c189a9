"""A transaction of many one-row rows events, held whole until its commit: what the worker holds per event is
the event's bytes, not the renderer's working buffers (a one-row event's were 16 KiB vectors; handed to Python as
they were, 30,000 such events took 150-350 MiB more)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable
from mysqlcapture_dev.embedded.server import PrivateServer

from tests.support import manifest, run_worker_to_end, write_manifest

EVENTS = 60_000


def test_one_row_events_held_until_their_commit_cost_their_bytes(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(86)
    srv.execute("CREATE DATABASE small", "CREATE TABLE small.t (id INT PRIMARY KEY, v VARCHAR(20))")
    conn = srv.connect()
    with conn.cursor() as cur:
        for i in range(EVENTS):  # one INSERT, one rows event each, in one transaction
            cur.execute("INSERT INTO small.t VALUES (%s, 'x')", (i,))
    conn.commit()
    conn.close()
    uri = str(tmp_path / "small")
    doc = manifest(
        "small",
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        tables={"include": ["small.*"]},
        flush={"maxEvents": 2 * EVENTS},  # held whole: no spill before the commit
    )
    path = write_manifest(tmp_path / "small.yaml", doc)
    code, peak, err = run_worker_to_end(path)
    assert code == 0, err[-3000:]
    kinds = DeltaTable(uri).to_pyarrow_table(columns=["type"]).column("type").to_pylist()
    assert kinds.count("insert") == EVENTS
    mib = peak / 2**20
    print(f"{EVENTS:,} one-row events in one transaction: worker peak RSS {mib:.0f} MiB")
    # 60,000 events: 318-410 MiB with the events' bytes held; with the renderer's buffers 30,000 took 456-698.
    assert mib < 520, f"peak RSS {mib:.0f} MiB"
