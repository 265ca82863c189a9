"""What only MariaDB writes, against a real MariaDB server and the worker as a process: compressed events
(`log_bin_compress=ON`) and ALTERs logged in two phases (`binlog_alter_two_phase=ON`).

mysql-replication skips the compressed event types, so before the worker read them itself a compressed rows event
was lost without a word (its transaction committed empty) and a compressed DDL statement stopped the capture.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.sinks.delta import DeltaSink

from tests import servers
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import manifest, read_changelog, run_cli, write_manifest
from tests.workload import Workload

pytestmark = pytest.mark.mariadb

TEXTS = ("data", "old", "sql")
COMPRESSED = {"Query_compressed", "Write_rows_compressed_v1", "Update_rows_compressed_v1", "Delete_rows_compressed_v1"}


def _events(server: Any) -> list[tuple[Any, ...]]:
    """Every binlog event: (file, start, type, end)."""
    return [
        (name, int(ev[1]), str(ev[2]), int(ev[4]))
        for name, *_ in server.query("SHOW BINARY LOGS")
        for ev in server.query(f"SHOW BINLOG EVENTS IN '{name}'")
    ]


def _rows_of(rows: list[dict[str, Any]], database: str) -> list[tuple[Any, ...]]:
    """The database's events, its name taken out (DDL events name their database in `data`, `old` and `sql`)."""
    name = f'"database":"{database}"'
    return [
        (r["table"], r["type"], *((r[k] or "").replace(name, "").replace(database, "<db>") for k in TEXTS))
        for r in rows
        if r["database"] == database
    ]


def test_compressed_events_render_as_uncompressed_ones(tmp_path: Path) -> None:
    """The same random workload with DDL, once with log_bin_compress OFF, once ON (every statement and row image of
    10 bytes or more compressed): the same events, each at its own place in the binlog, and the tables replayed
    from the change log equal the source's."""
    with servers.running("mariadb", 87) as srv:
        for database, compressed in (("zplain", "OFF"), ("zcomp", "ON")):
            srv.execute(f"SET GLOBAL log_bin_compress = {compressed}", "SET GLOBAL log_bin_compress_min_len = 10")
            conn = srv.connect()
            workload = Workload(conn, database, seed=87, ddl=True)
            workload.setup(n_tables=3)
            for _ in range(300):
                workload.step()
            conn.close()
        events = _events(srv)
        kinds = Counter(kind for _, _, kind, _ in events)
        assert all(kinds[k] > 0 for k in COMPRESSED), kinds
        status = srv.binlog_status()
        uri = str(tmp_path / "zz")
        doc = manifest(
            "zz", port=srv.port, sink={"type": "delta", "delta": {"uri": uri}},
            tables={"include": ["zplain.*", "zcomp.*"]},
        )  # fmt: skip
        result = run_cli("run", str(write_manifest(tmp_path / "zz.yaml", doc)), "--exit-at-end", "--plain-logs")
        assert result.returncode == 0, result.stderr[-3000:]
        rows = read_changelog(uri)
        plain, comp = _rows_of(rows, "zplain"), _rows_of(rows, "zcomp")
        assert len(comp) > 300 and sum(1 for r in comp if r[1].startswith("table-")) >= 3
        assert comp == plain, "a compressed event rendered differently"
        # Each event at its own place: a DDL event starts where its (compressed) statement does, a row event carries
        # its transaction's start, the GTID event's; the checkpoint is the binlog's end, exactly.
        starts = {(f, start): kind for f, start, kind, _ in events}
        ddl = [r for r in rows if r["database"] == "zcomp" and r["type"].startswith("table-")]
        assert {starts.get((r["binlog_file"], r["event_pos"])) for r in ddl} == {"Query_compressed"}
        changed = [r for r in rows if r["database"] == "zcomp" and r["type"] in ("insert", "update", "delete")]
        assert {starts.get((r["binlog_file"], r["binlog_pos"])) for r in changed} == {"Gtid"}
        ckpt = DeltaSink(uri, app_id="mysqlcapture-zz").load_checkpoint()
        assert ckpt is not None and ckpt.coordinate == Coordinate(status.file, status.pos)
        conn = srv.connect()
        replayed = replay([r for r in rows if r["database"] == "zcomp"])
        assert_replay_equals_source(replayed, source_tables(conn, ["zcomp"]))
        conn.close()


def test_an_alter_logged_in_two_phases_applies_once_at_its_commit(tmp_path: Path) -> None:
    """binlog_alter_two_phase=ON logs an ALTER twice, START ALTER as it begins and COMMIT ALTER (or ROLLBACK ALTER)
    as it ends, each with the statement's text; rows written meanwhile come in the table's old form. The worker
    applied both halves (a column added twice, every later row of the table misread) and a rolled-back one; now the
    schema changes once, at the commit, and the rows written during the ALTER are read in their old form."""
    with servers.running("mariadb", 90) as srv:
        start = srv.binlog_status()
        conn = srv.connect()
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_alter_two_phase = ON")
            cur.execute("CREATE DATABASE two")
            cur.execute("CREATE TABLE two.t (a INT PRIMARY KEY, b INT)")
            cur.execute("INSERT INTO two.t SELECT seq, seq % 7 FROM two.seq_1_to_300000")
        done = threading.Event()

        def write_meanwhile() -> None:  # rows while the ALTER runs: logged between its two halves
            writer = srv.connect()
            n = 1_000_000
            with writer.cursor() as cur:
                while not done.is_set():
                    n += 1
                    cur.execute(f"INSERT INTO two.t (a, b) VALUES ({n}, 1)")
            writer.close()

        thread = threading.Thread(target=write_meanwhile)
        thread.start()
        try:
            with conn.cursor() as cur:
                cur.execute("ALTER TABLE two.t ADD COLUMN c INT, FORCE, ALGORITHM=INPLACE, LOCK=NONE")
        finally:
            done.set()
            thread.join()
        with conn.cursor() as cur:
            with pytest.raises(Exception, match="Duplicate entry"):
                cur.execute("ALTER TABLE two.t ADD UNIQUE KEY (b)")  # rolled back: START, then ROLLBACK ALTER
            cur.execute("INSERT INTO two.t VALUES (2000000, 2, 3)")
        conn.close()
        events = srv.query(f"SHOW BINLOG EVENTS IN '{start.file}'")
        infos = [str(e[5]) for e in events]
        starts = [i for i, info in enumerate(infos) if info.endswith("START ALTER")]
        commit = next(i for i, info in enumerate(infos) if "COMMIT ALTER" in info)
        assert len(starts) == 2 and any("ROLLBACK ALTER" in info for info in infos)
        assert any(str(e[2]).startswith("Write_rows") for e in events[starts[0] : commit]), "no row inside the ALTER"
        uri = str(tmp_path / "two")
        doc = manifest(
            "two", port=srv.port, sink={"type": "delta", "delta": {"uri": uri}}, tables={"include": ["two.*"]},
            start={"from": "position", "binlogFile": start.file, "binlogPosition": start.pos},
        )  # fmt: skip
        result = run_cli("run", str(write_manifest(tmp_path / "two.yaml", doc)), "--exit-at-end", "--plain-logs")
        assert result.returncode == 0, result.stderr[-3000:]
        rows = read_changelog(uri)
        alters = [r for r in rows if r["type"] == "table-alter"]
        assert len(alters) == 1 and [c["name"] for c in json.loads(alters[0]["data"])["columns"]] == ["a", "b", "c"]
        inserts = [r for r in rows if r["type"] == "insert"]
        written = [json.loads(r["data"]) for r in inserts]
        begun, committed = int(events[starts[0]][1]), int(events[commit][1])
        meanwhile = [json.loads(r["data"]) for r in inserts if begun < r["binlog_pos"] < committed]
        after = [json.loads(r["data"]) for r in inserts if r["binlog_pos"] > committed]
        assert meanwhile and all(set(d) == {"a", "b"} and d["b"] == 1 for d in meanwhile)  # the old form
        assert after and all(set(d) == {"a", "b", "c"} for d in after)
        assert written[-1] == {"a": 2000000, "b": 2, "c": 3}
        source = {a: b for a, b in srv.query("SELECT a, b FROM two.t")}
        assert {d["a"]: d["b"] for d in written} == source
