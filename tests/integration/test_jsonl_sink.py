"""The Maxwell JSON-lines sink: Maxwell's shape, and exactly once across SIGKILLs via its sidecar checkpoint."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from mysqlcapture_dev.embedded.server import PrivateServer

from tests.maxwell.workload import OUTPUT_OPTIONS
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest
from tests.workload import Workload

# Every field Maxwell's options can add (the replay needs keys and DDL), and the capture's own order key.
EVERY_FIELD = {**OUTPUT_OPTIONS, "outputOrderKey": True, "outputTruncate": True}


def _as_changelog_row(line: dict[str, Any]) -> dict[str, Any]:
    """A Maxwell line in the shape tests/replay.py reads (the Delta change log's columns)."""
    is_ddl = "sql" in line
    return {
        "database": line["database"],
        "table": line.get("table"),
        "type": line["type"],
        "data": (line["def"] if is_ddl else line["data"]) if ("def" in line or not is_ddl) else None,
        "old": line.get("old"),
        "primary_key": line.get("primary_key"),
        "primary_key_columns": line.get("primary_key_columns"),
    }


def test_jsonl_sink_is_maxwell_shaped_and_exactly_once_across_kills(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(35)
    conn = srv.connect()
    out = tmp_path / "events.jsonl"
    doc = manifest(
        "lines",
        port=srv.port,
        sink={"type": "jsonl", "jsonl": {"path": str(out), **EVERY_FIELD}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 100, "maxEvents": 30},
    )
    path = write_manifest(tmp_path / "lines.yaml", doc)
    rng = random.Random(5)
    try:
        workload = Workload(conn, "lines", seed=35, ddl=True, truncate=True)
        workload.setup(n_tables=3)
        for i in range(6):
            worker = WorkerProcess(path, log_path=tmp_path / f"run{i}.log")
            if i == 0:  # a new capture starts at "latest": let it pin that before writing
                wait_until(lambda: Path(str(out) + ".checkpoint").exists(), timeout=60, what="the first checkpoint")
            for _ in range(80):
                workload.step()
            time.sleep(rng.uniform(0.2, 1.0))
            worker.kill()
        status = srv.binlog_status()
        end = (status.file, status.pos)
        final = WorkerProcess(path, log_path=tmp_path / "final.log")
        try:
            wait_until(lambda: "metrics on :" in final.log_text() or not final.alive(), timeout=60, what="start-up")

            def caught_up() -> bool:
                ckpt = Path(str(out) + ".checkpoint")
                if not ckpt.exists():
                    return False
                pos = json.loads(ckpt.read_text().split("\n", 1)[1])
                return (pos["binlog_file"], pos["binlog_pos"]) >= (str(end[0]), int(end[1]))

            wait_until(caught_up, timeout=120, what="the JSON-lines checkpoint to reach the binlog's end")
        finally:
            assert final.stop() == 0, final.log_text()
        lines = [json.loads(raw, parse_float=Decimal) for raw in out.read_text().split("\n") if raw]
        tables = source_tables(conn, ["lines"])
    finally:
        conn.close()
        srv.stop()
    rows = [ln for ln in lines if ln["type"] in ("insert", "update", "delete")]
    assert rows and {"database", "table", "type", "ts", "xid", "position", "server_id", "data"} <= set(rows[0])
    identities = [(ln.get("server_id"), ln["position"], ln["_order_key"]) for ln in lines]  # DDL: no server_id
    assert len(identities) == len(set(identities)), "a line was written twice"
    keys = [ln["_order_key"] for ln in lines]
    assert keys == sorted(keys)
    assert any(ln["type"] == "table-truncate" for ln in lines)
    assert_replay_equals_source(replay([_as_changelog_row(ln) for ln in lines]), tables)


def test_a_lines_file_gone_or_cut_short_behind_its_checkpoint_stops_with_one_line_and_writes_nothing(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(38)
    conn = srv.connect()
    out = tmp_path / "events.jsonl"
    doc = manifest(
        "gone", port=srv.port, sink={"type": "jsonl", "jsonl": {"path": str(out)}}, start={"from": "earliest"}
    )
    path = write_manifest(tmp_path / "gone.yaml", doc)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE gone")
        cur.execute("CREATE TABLE gone.t (id INT PRIMARY KEY)")
        cur.executemany("INSERT INTO gone.t VALUES (%s)", [(i,) for i in range(20)])
    conn.commit()
    conn.close()
    first = run_cli("run", str(path), "--exit-at-end", "--plain-logs")
    assert first.returncode == 0, first.stderr
    written = out.read_bytes()
    assert written.count(b"\n") == 20
    checkpoint = Path(f"{out}.checkpoint")
    kept = checkpoint.read_text()
    for damage, said in (
        (lambda: out.unlink(), "is gone"),
        (lambda: out.write_bytes(written[:100]), "holds 100 bytes"),
    ):
        damage()
        result = run_cli("run", str(path), "--exit-at-end", "--plain-logs")
        assert result.returncode == 4, result.stderr
        assert "Traceback" not in result.stderr
        line = [ln for ln in result.stderr.splitlines() if ln.startswith("mysqlcapture: ")]
        assert line == [
            f"mysqlcapture: {out} {said}, but its checkpoint {checkpoint} says {len(written):,} bytes of lines were "
            f"committed: restore the file (the capture then goes on after its last line), or remove {checkpoint} to "
            "start a new capture (from spec.start)"
        ], result.stderr
        assert checkpoint.read_text() == kept, "the checkpoint moved"
        assert not out.exists() or out.read_bytes() == written[:100], "the file was written to"
    out.write_bytes(written)  # restored: it goes on, nothing repeated
    again = run_cli("run", str(path), "--exit-at-end", "--plain-logs")
    assert again.returncode == 0, again.stderr
    assert out.read_bytes() == written


def test_a_json_null_document_is_told_apart_from_sql_null_in_lines_and_the_change_log(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    """A JSON column's document `null` and SQL NULL both print `null`. An update between them is a change (`old`
    holds the column, as Maxwell's), `outputNulls: false` keeps the document (a value to Maxwell), and the change
    log marks it (`json_null`, `old_json_null`); on the compiled and the reference decoder alike."""
    srv = start_source(36)
    srv.execute("CREATE DATABASE jn", "CREATE TABLE jn.t (id INT PRIMARY KEY, j JSON, n INT)")
    status = srv.binlog_status()
    srv.execute(
        "INSERT INTO jn.t VALUES (1, NULL, NULL), (2, 'null', NULL), (3, '{\"a\": null}', NULL)",
        "UPDATE jn.t SET j = 'null' WHERE id = 1",
        "UPDATE jn.t SET j = NULL WHERE id = 2",
        "UPDATE jn.t SET n = 5 WHERE id = 1",
    )
    start = {"from": "position", "binlogFile": str(status.file), "binlogPosition": int(status.pos)}
    tables = {"include": ["jn.*"]}
    out = tmp_path / "jn.jsonl"
    lines_doc = manifest(
        "jnlines", port=srv.port, sink={"type": "jsonl", "jsonl": {"path": str(out), "outputNulls": False}},
        start=start, tables=tables,
    )  # fmt: skip
    result = run_cli("run", str(write_manifest(tmp_path / "lines.yaml", lines_doc)), "--exit-at-end", "--plain-logs")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(raw) for raw in out.read_text().splitlines() if raw]
    assert [(x["type"], x["data"], x.get("old")) for x in lines] == [
        ("insert", {"id": 1}, None),
        ("insert", {"id": 2, "j": None}, None),
        ("insert", {"id": 3, "j": {"a": None}}, None),
        ("update", {"id": 1, "j": None}, {}),  # before SQL NULL: in `old`, left out by outputNulls: false
        ("update", {"id": 2}, {"j": None}),  # before the document: kept
        ("update", {"id": 1, "j": None, "n": 5}, {}),
    ]
    for decoder in ("compiled", "reference"):
        uri = str(tmp_path / f"log-{decoder}")
        doc = manifest(f"jn{decoder}", port=srv.port, sink={"type": "delta", "delta": {"uri": uri}}, start=start,
                       tables=tables)  # fmt: skip
        env = {"MYSQLCAPTURE_DECODER": "reference"} if decoder == "reference" else {}
        path = write_manifest(tmp_path / f"{decoder}.yaml", doc)
        result = run_cli("run", str(path), "--exit-at-end", "--plain-logs", env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        rows = [r for r in read_changelog(uri) if r["table"] == "t"]
        assert [(r["type"], r["data"], r["old"], r["json_null"], r["old_json_null"]) for r in rows] == [
            ("insert", '{"id":1,"j":null,"n":null}', None, None, None),
            ("insert", '{"id":2,"j":null,"n":null}', None, '["j"]', None),
            ("insert", rows[2]["data"], None, None, None),
            ("update", '{"id":1,"j":null,"n":null}', '{"j":null}', '["j"]', None),
            ("update", '{"id":2,"j":null,"n":null}', '{"j":null}', None, '["j"]'),
            ("update", '{"id":1,"j":null,"n":5}', '{"n":null}', '["j"]', None),
        ], decoder
