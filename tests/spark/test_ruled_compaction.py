"""Compaction of a change log written under spec.columns: hashed columns are text (a hashed INT too), excluded ones
are gone, truncated and masked ones keep their text type; the values are the worker's ruled ones."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable
from mysqlcapture_api.changelog import recorded_columns
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_compaction import job
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.delta import DeltaSink
from pyspark.sql import SparkSession

from tests.spark.compare import current_tables
from tests.support import WorkerProcess, manifest, wait_until, write_manifest

pytestmark = pytest.mark.spark
KEY = b"compaction-key"


def test_compacted_tables_hold_the_ruled_columns_with_their_written_types(
    spark: SparkSession, tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(93)
    conn = srv.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE shop")
    cur.execute(
        "CREATE TABLE shop.users (id INT PRIMARY KEY, email VARCHAR(80), pin INT, pw VARCHAR(40), note TEXT, "
        "card VARCHAR(20), plain INT)"
    )
    conn.commit()
    uri = str(tmp_path / "changelog")
    columns = {
        "exclude": ["shop.users.pw"],
        "hash": {"columns": ["shop.users.email", "shop.users.pin"], "keyFrom": {"env": "MASK_KEY"}},
        "truncate": [{"columns": ["shop.users.note"], "length": 3}],
        "mask": [{"columns": ["shop.users.card"], "keep": 2}],
    }
    doc = manifest(
        "ruledcmp",
        port=srv.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 200},
        extra_spec={"columns": columns},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "ruledcmp.yaml", doc), env={"MASK_KEY": KEY.decode()})
    sink = DeltaSink(uri, app_id="mysqlcapture-ruledcmp")
    try:
        wait_until(lambda: worker.running() and sink.load_checkpoint() is not None, timeout=60, what="a checkpoint")
        for i in range(1, 21):
            cur.execute(
                "INSERT INTO shop.users VALUES (%s,%s,%s,%s,%s,%s,%s)",
                (i, f"u{i}@example.com", 1000 + i, f"pw{i}", f"note number {i}", f"card-{i:04d}", i * 7),
            )
        cur.execute("UPDATE shop.users SET pin = pin + 1, note = 'changed' WHERE id <= 5")
        cur.execute("DELETE FROM shop.users WHERE id = 20")
        conn.commit()
        status = srv.binlog_status()
        wait_until(
            lambda: (
                worker.running()
                and (c := sink.load_checkpoint()) is not None
                and c.coordinate >= Coordinate(status.file, status.pos)
            ),
            timeout=120,
            what="the change log to catch up",
        )
    finally:
        assert worker.stop() == 0, worker.log_text()
        conn.close()
    recorded = recorded_columns(DeltaTable(uri))
    assert recorded is not None and json.loads(recorded)["exclude"] == ["shop.users.pw"]
    output = str(tmp_path / "compacted")
    job.run(spark, changelog=uri, output=output)
    types, rows = current_tables(output)[("shop", "users")]
    assert "pw" not in types
    assert types["email"] == types["pin"] == types["note"] == types["card"] == "string"
    assert types["id"] == types["plain"] == "int32"

    def mac(text: str) -> str:
        return hmac.new(KEY, text.encode(), hashlib.sha256).hexdigest()

    got = sorted(
        ((r["id"], r["email"], r["pin"], r["note"], r["card"], r["plain"]) for r in rows.values()), key=lambda r: r[0]
    )
    want = [
        (
            i,
            mac(f"u{i}@example.com"),
            mac(str(1000 + i + (1 if i <= 5 else 0))),
            "cha" if i <= 5 else "not",
            "*******" + f"{i:04d}"[-2:],
            i * 7,
        )
        for i in range(1, 20)
    ]
    assert got == want
