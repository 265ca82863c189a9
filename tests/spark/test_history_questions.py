"""A DBA's questions to the typed histories, on real MariaDB and MySQL: `history` with every filter and format,
`undo` scripts run by the server's own client, `as-of` against a copy of the source, windows outside the
histories said, not answered as empty."""

from __future__ import annotations

import base64
import contextlib
import csv
import io
import json
import re
import struct
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from mysqlcapture_api.changelog import read_delta
from mysqlcapture_compaction import as_of, cli, history_scope, job, targets
from mysqlcapture_dev.embedded.server import PrivateServer
from pyspark.sql import SparkSession

from tests.fidelity_corpus import cases_for
from tests.spark.compare import arrow_type, assert_state_equals_source, source_tables
from tests.spark.test_typed_e2e import _capture, _corpus_tables, _wait_caught_up, create_corpus_table
from tests.support import REPO, wait_until
from tests.workload import Workload

pytestmark = [pytest.mark.spark]

APP = "hq"
# MySQL's JSON can hold opaque scalars (a DATE, a TIME, a DECIMAL, bytes) that Maxwell's JSON text, and so the change
# log and the history, writes as strings and numbers: such a document cannot be written back as it was. Its undo
# stops at its check (the guard finds no row holding the history's text) and commits nothing.
OPAQUE = "json_opaque"


def _ask(*args: str) -> tuple[int, str, str]:
    """`mysqlcapture-compact <args>` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def _json(manifest: Path, *args: str) -> list[dict[str, Any]]:
    code, out, err = _ask("history", str(manifest), *args, "--format", "json")
    assert code == 0, err
    return [json.loads(line, parse_float=Decimal) for line in out.splitlines()]


def _apply(server: PrivateServer, script: str) -> subprocess.CompletedProcess[str]:
    """Run a script with the server's own command-line client, as a DBA would."""
    return subprocess.run(
        server.client_command(), input=script, capture_output=True, text=True, env=server.client_env(), timeout=300
    )


def _state_at(output: str, key: tuple[str, str], at: int, pk: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """`as_of.keyed_state` as compare.current_tables lays a table out: column types, rows by key."""
    image = read_delta(targets.Target(output, *key).history).schema.field("after").type
    types = {image.field(i).name: arrow_type(image.field(i)) for i in range(image.num_fields)}
    types.pop("_cdc_raw")
    rows = {}
    for row in as_of.keyed_state(output, *key, at, None).to_pylist():
        rows[json.dumps([row[c] for c in pk], default=str)] = {**row, "_cdc_raw": dict(row["_cdc_raw"] or [])}
    return types, rows


def _next_second(after: float) -> int:
    """Wait until the clock has passed the second `after` fell in: changes made from now on are stamped later."""
    mark = int(after)
    wait_until(lambda: time.time() >= mark + 1, timeout=10, what="the next second")
    return mark


def test_history_undo_and_as_of_answer_from_the_typed_history(
    spark: SparkSession, flavor: str, tmp_path: Path, start_source
) -> None:
    server = start_source(7611)
    manifest, uri, worker = _capture(server, tmp_path, APP)
    output = uri + "-compacted"  # where the manifest's compaction output is by default
    conn = server.connect()
    cases = cases_for(flavor)
    corpus = _corpus_tables(flavor, [c for c in cases if c.name != OPAQUE])
    corpus += _corpus_tables(flavor, [c for c in cases if c.name == OPAQUE])  # its own table (MySQL only), last
    lossy = [("typed", f"t{n:03d}") for n, (_, _, group, _) in enumerate(corpus) if group[0].name == OPAQUE]
    counts = {}
    workload = Workload(conn, "wl", seed=3311, ddl=False)
    try:
        with conn.cursor() as cur:
            # Phase A: every corpus type, a small table whose changes the filters are checked on, random tables.
            cur.execute("CREATE DATABASE typed CHARACTER SET utf8mb4")
            for n, table in enumerate(corpus):
                counts[n] = create_corpus_table(cur, n, table)
            cur.execute("SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'")
            cur.execute("CREATE TABLE typed.audit (id INT PRIMARY KEY, a INT, b VARCHAR(10), g INT AS (a * 2))")
            cur.execute("CREATE TABLE typed.audit2 (id INT PRIMARY KEY, note VARCHAR(10))")
            cur.execute("INSERT INTO typed.audit (id, a, b) VALUES (1, 1, 'x'), (2, 2, 'y')")
        workload.setup(3)
        for _ in range(40):
            workload.step()
        _wait_caught_up(server, uri, APP)
        before = source_tables(conn, ["typed", "wl"])
        t_a = _next_second(time.time())

        # Phase B: every corpus row takes another row's values, one is deleted, one inserted; controlled changes of
        # typed.audit; one transaction across two tables; more random changes.
        with conn.cursor() as cur:
            for n, (setup, _, cases, names) in enumerate(corpus):
                cur.execute("SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'")
                for stmt in setup:
                    cur.execute(stmt)
                for i in range(counts[n]):
                    sets = ", ".join(
                        f"{t} = {c.values[(i + 1) % len(c.values)]}" for c, t in zip(cases, names, strict=True)
                    )
                    cur.execute(f"UPDATE typed.t{n:03d} SET {sets} WHERE id = {i}")
                cur.execute(f"DELETE FROM typed.t{n:03d} WHERE id = 0")
                values = ", ".join(c.values[0] for c in cases)
                cur.execute(f"INSERT INTO typed.t{n:03d} (id, {', '.join(names)}) VALUES (500, {values})")
            cur.execute("SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'")
            cur.execute("UPDATE typed.audit SET a = 5 WHERE id = 1")
            cur.execute("UPDATE typed.audit SET b = 'z' WHERE id = 2")
            cur.execute("DELETE FROM typed.audit WHERE id = 2")
        for _ in range(40):
            workload.step()
        g_statements = ("UPDATE typed.audit SET a = 10 WHERE id = 1", "INSERT INTO typed.audit2 VALUES (1, 'g')")
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for stmt in g_statements:
                cur.execute(stmt)
            cur.execute("COMMIT")
            cur.execute("INSERT INTO typed.audit (id, a, b) VALUES (3, 3, 'w')")
        _wait_caught_up(server, uri, APP)
        after_b = source_tables(conn, ["typed", "wl"])
    finally:
        assert worker.stop() == 0, worker.log_text()
    job.run(spark, changelog=uri, output=output)
    log = read_delta(uri).to_pylist()
    rows_of = {
        r["order_key"]: r
        for r in log
        if r["type"] in ("insert", "update", "delete") and r["database"] != "mysqlcapture"
    }
    gtid = next(r["gtid"] for r in rows_of.values() if r["table"] == "audit2")

    # -- history: every version in a window, with the change log's metadata ------------------------------------
    for key in [("typed", "audit"), ("typed", "t000"), *[("wl", t) for t in workload.tables]]:
        listed = _json(manifest, "--table", ".".join(key), "--since", str(t_a + 1), "--oldest")
        want = [k for k, r in sorted(rows_of.items()) if (r["database"], r["table"]) == key and r["ts"] > t_a]
        assert [v["order_key"] for v in listed] == want, key
        for v in listed:
            r = rows_of[v["order_key"]]
            assert (v["type"], v["gtid"], v["thread_id"], v["xid"]) == (r["type"], r["gtid"], r["thread_id"], r["xid"])
            assert v["position"] == f"{r['binlog_file']}:{r['event_pos']}"
    newest = _json(manifest, "--table", "typed.audit")
    assert [v["type"] for v in newest][:2] == ["insert", "update"] and newest[0]["after"]["id"] == 3
    trail = _json(manifest, "--table", "typed.audit", "--pk", "2", "--oldest")
    assert [(v["type"], (v["before"] or {}).get("b"), (v["after"] or {}).get("b")) for v in trail] == [
        ("insert", None, "y"),
        ("update", "y", "z"),
        ("delete", "z", None),
    ]
    assert trail[1]["changed"] == ["b"] and trail[1]["after"]["g"] == 4  # a generated column is in the images
    changed_a = _json(manifest, "--table", "typed.audit", "--changed", "a", "--type", "update", "--oldest")
    assert [(v["pk"], v["before"]["a"], v["after"]["a"]) for v in changed_a] == [([1], 1, 5), ([1], 5, 10)]
    with_inserts = _json(manifest, "--table", "typed.audit", "--changed", "a", "--since", str(t_a + 1))
    assert sorted(v["type"] for v in with_inserts) == ["delete", "insert", "update", "update"]
    by_value = _json(manifest, "--table", "typed.audit", "--where", "b = 'y'", "--oldest")
    assert [(v["type"], v["pk"]) for v in by_value] == [("insert", [2]), ("update", [2])]
    assert [v["pk"] for v in _json(manifest, "--table", "typed.audit", "--where", "a >= 5", "--oldest")] == [[1], [1]]
    assert len(_json(manifest, "--table", "typed.audit", "--limit", "1")) == 1
    assert _json(manifest, "--table", "typed.audit", "--oldest", "--limit", "1")[0]["after"] == {
        "id": 1, "a": 1, "b": "x", "g": 2,
    }  # fmt: skip
    deletes = _json(manifest, "--table", "wl.t1", "--type", "delete")
    assert len(deletes) == sum(1 for r in rows_of.values() if r["table"] == "t1" and r["type"] == "delete")
    one = _json(manifest, "--gtid", gtid)
    assert sorted((v["table"], v["type"]) for v in one) == [("audit", "update"), ("audit2", "insert")]

    # -- every corpus type through --format json (Maxwell's `data`, value for value) and csv ---------------------
    definitions, recorded = history_scope.definitions(uri)
    assert recorded == flavor
    compared = 0
    for n in range(len(corpus)):
        table = f"typed.t{n:03d}"
        inserted = _json(manifest, "--table", table, "--type", "insert", "--until", str(t_a), "--oldest")
        assert len(inserted) == counts[n]
        for v in inserted:
            data = json.loads(rows_of[v["order_key"]]["data"], parse_float=Decimal)
            assert v["after"] == data, (table, v["after"], data)
            compared += len(data)
        code, text, err = _ask("history", str(manifest), "--table", table, "--format", "csv", "--oldest")
        assert code == 0, err
        lines = list(csv.DictReader(io.StringIO(text)))
        versions = _json(manifest, "--table", table, "--oldest")
        assert len(lines) == len(versions)
        for line, v in zip(lines, versions, strict=True):
            for side in ("before", "after"):
                documents = _json_null_documents(rows_of[v["order_key"]], side)
                for column, value in (v[side] or {}).items():
                    kind = definitions[("typed", f"t{n:03d}")].column(column).type
                    cell = line[f"{side}.{column}"]
                    assert _csv_matches(cell, value, kind, column in documents), (table, column, line, value)
                    documents.discard(column)
                assert not documents, (table, side, documents)  # each JSON null document shown as one
    assert compared >= sum(counts.values()) * 2

    # -- as-of: each table as the source held it at t_a ----------------------------------------------------------
    held = {key: rows for key, rows in before.items() if DeltaTable.is_deltatable(targets.Target(output, *key).history)}
    assert all(not before[key][1] for key in set(before) - set(held))  # a table never written has no history
    pks = {key: ["id"] for key in held}
    state = {key: _state_at(output, key, t_a, pks[key]) for key in held}
    assert assert_state_equals_source(state, held, pks) > 0
    code, out, err = _ask("as-of", str(manifest), "--table", "typed.audit", "--at", str(t_a), "--format", "json")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"id": 1, "a": 1, "b": "x", "g": 2},
        {"id": 2, "a": 2, "b": "y", "g": 4},
    ]
    code, out, err = _ask("as-of", str(manifest), "--table", "typed.audit", "--at", str(t_a), "--pk", "2")
    assert code == 0 and "(1 row)" in out and " y " in out, (out, err)

    # -- undo: one transaction by GTID, run by the server's client, then done again ------------------------------
    code, g_undo, err = _ask("undo", str(manifest), "--gtid", gtid)
    assert code == 0, err
    assert f"GTID {gtid}" in g_undo and "UPDATE `typed`.`audit` SET `a` = 5 WHERE" in g_undo, g_undo
    assert "`g`" not in g_undo  # the generated column is the server's to compute
    done = _apply(server, g_undo)
    assert done.returncode == 0, done.stderr
    assert server.query("SELECT a FROM typed.audit WHERE id = 1") == [(5,)]
    assert server.query("SELECT COUNT(*) FROM typed.audit2") == [(0,)]
    server.execute(*g_statements)

    # -- undo: everything since t_a, table by table: the source is back to its copy at t_a -----------------------
    for key in before:
        code, script, err = _ask("undo", str(manifest), "--table", ".".join(key), "--since", str(t_a + 1))
        assert code == 0, (key, err)
        done = _apply(server, script)
        if key in lossy:
            assert done.returncode != 0 and "1172" in done.stderr, (key, done.stderr)
            continue
        assert done.returncode == 0, (key, done.stderr, script[-3000:])
    _assert_same(source_tables(conn, ["typed", "wl"]), {**before, **{key: after_b[key] for key in lossy}})
    assert before != after_b

    # The GTID's undo again: its rows moved on (they are back at t_a), so it stops and commits nothing.
    refused = _apply(server, g_undo)
    assert refused.returncode != 0 and "1172" in refused.stderr, refused.stderr
    _assert_same(source_tables(conn, ["typed", "wl"]), {**before, **{key: after_b[key] for key in lossy}})

    # -- windows the histories do not cover are said ------------------------------------------------------------
    span = history_scope.coverage(uri, output)
    assert span.first is not None and span.last is not None and span.first <= t_a < span.last
    code, out, err = _ask("history", str(manifest), "--table", "typed.audit", "--until", str(span.first - 60))
    assert code == 1 and "before the capture began" in err and out == "", err
    code, out, err = _ask("as-of", str(manifest), "--table", "typed.audit", "--at", str(span.first - 60))
    assert code == 1 and "before the capture began" in err, err
    code, out, err = _ask("history", str(manifest), "--table", "typed.audit", "--since", str(span.last + 60))
    assert code == 1 and "after the last compacted change" in err, err
    code, out, err = _ask("history", str(manifest), "--table", "typed.audit", "--pk", "1")
    assert code == 0 and "note: the capture began at" in err and "(3 versions)" in out, (out, err)

    # Malformed questions: one line naming the flag and the fix, exit 2 (1: a table the capture does not know).
    for args, code_wanted, said in [
        (["--table", "typed.audit", "--pk", "1", "--pk", "2"], 2, "typed.audit's primary key is (id): give 1 value"),
        (["--table", "typed.audit", "--pk", "[1,"], 2, "--pk [1,: not a JSON array"),
        (["--table", "typed.audit", "--since", "yesterday"], 2, "--since yesterday: not a time"),
        (["--table", "typed.audit", "--changed", "nosuch"], 2, "--changed nosuch: not a column of typed.audit"),
        (["--table", "typed.audit", "--where", "nosuch = 1"], 2, "--where: nosuch is not a column"),
        (["--table", "typed.audit", "--where", "a = 'x'"], 2, "'x' is not a value of a"),
        (["--table", "typed.nosuch"], 1, "--table typed.nosuch: no such table in this capture"),
        (["--table", "audit"], 2, "--table audit: give it as database.table"),
        (["--since", str(t_a)], 2, "--table database.table is required"),
        (["--table", "typed.audit", "--pk", "abc"], 2, "--pk abc: typed.audit.id is INT: give a number"),
        (["--table", "typed.audit", "--pk", "1.5"], 2, "--pk 1.5: typed.audit.id is INT"),
        (["--table", "typed.audit", "--where", "a >>= 1"], 2, "one operator (= != <> < <= > >=) between"),
        (["--table", "typed.audit", "--where", "id >= abc"], 2, "'abc' is not a value of id (int32)"),
    ]:
        code, out, err = _ask("history", str(manifest), *args)
        assert code == code_wanted and said in err and out == "", (args, code, err)
        assert len([line for line in err.splitlines() if not line.startswith("note:")]) == 1, err
    at = str(span.last)
    empty = tmp_path / "empty"
    empty.mkdir()
    for command, args, code_wanted, said in [
        ("as-of", [str(manifest), "--table", "typed.nosuch", "--at", at], 1, "no such table in this capture"),
        ("as-of", [str(manifest), "--table", "typed.audit", "--at", at, "--pk", "x"], 2, "typed.audit.id is INT"),
        ("show", [str(manifest), "--table", "typed.audit", "--limit", "0"], 2, "--limit must be 1 or more"),
        ("history", ["--table", "typed.audit"], 2, "give the capture's manifest (the worker's MySQLCapture file), or"),
        ("history", ["--changelog", str(tmp_path / "nowhere"), "--table", "typed.audit"], 2, "nowhere does not exist"),
        ("undo", ["--changelog", str(empty), "--table", "typed.audit"], 2, "holds no Delta table (no _delta_log)"),
        ("run", ["--changelog", str(empty)], 2, "holds no Delta table (no _delta_log): give the change log"),
        ("compact", ["--changelog", str(tmp_path / "nowhere")], 2, "nowhere does not exist"),
    ]:
        code, out, err = _ask(command, *args)
        assert code == code_wanted and said in err and out == "", (command, args, code, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    code, out, err = _ask("show", str(manifest), "--table", "typed.audit", "--limit", "1", "--format", "json")
    shown = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(shown) == 1 and {"id", "a", "b"} <= set(shown[0]), (out, err)
    assert re.fullmatch(r"note: the first 1 of \d+ rows by key \(--limit\)\n", err), err

    # A VACUUM of the histories (after OPTIMIZE rewrote their files) loses no answer.
    asked = _json(manifest, "--table", "typed.t000", "--oldest")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    path = targets.Target(output, "typed", "t000").history
    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    assert _json(manifest, "--table", "typed.t000", "--oldest") == asked

    # The command as a user runs it: a cold process, no Spark.
    cold = subprocess.run(
        [sys.executable, "-m", "mysqlcapture_compaction.cli", "history", str(manifest), "--table", "typed.audit"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert cold.returncode == 0 and "(7 versions)" in cold.stdout, cold.stderr
    conn.close()


def _documents(tables: dict[Any, Any]) -> dict[Any, Any]:
    """`source_tables` results with each JSON column's text parsed (MariaDB's JSON is a text, and the change log
    holds a document `null` unspaced and line breaks as spaces), SQL NULL left None: a document is never NULL."""
    out = {}
    for key, (cols, rows) in tables.items():
        docs = [c for c, (kind, *_rest) in cols.items() if kind == "json"]
        out[key] = (cols, [{**r, **{c: ("json", json.loads(r[c])) for c in docs if r[c] is not None}} for r in rows])
    return out


def _assert_same(have: dict[Any, Any], want: dict[Any, Any]) -> None:
    """Equal `source_tables` results (JSON columns as documents, `_documents`); otherwise the first differing rows,
    value by value."""
    have, want = _documents(have), _documents(want)
    for key, (cols, rows) in want.items():
        got = have[key][1]
        for a, b in zip(got, rows, strict=False):
            assert a == b, (key, {c: (a[c], b[c]) for c in cols if a[c] != b[c]})
        assert len(got) == len(rows), (key, len(got), len(rows))
    assert have == want


def _f32(value: Any) -> bytes:
    return struct.pack("<f", float(value))


def _json_null_documents(event: dict[str, Any], side: str) -> set[str]:
    """The JSON columns holding the JSON document null in the `side` image of a change-log row event (its after
    image: `data`; its before image: a delete's `data`, an update's `data` with `old` put back)."""
    marked = set(json.loads(event["json_null"] or "[]"))
    if side == "after":
        return marked if event["type"] != "delete" else set()
    if event["type"] == "delete":
        return marked
    if event["type"] != "update":
        return set()
    old = json.loads(event["old"] or "{}")
    return (marked - set(old)) | set(json.loads(event["old_json_null"] or "[]"))


def _csv_matches(cell: str, value: Any, kind: str | None, document: bool = False) -> bool:
    """Whether a CSV cell reads as the --format json value of a column of type `kind` (history_output: NULL
    empty, binary as 0x hex, a SET as a,b, a JSON document as its text, numbers exact). `document`: the value is
    the JSON document null, which --format json writes `null` as it writes SQL NULL (Maxwell's form)."""
    if value is None:
        return cell == ("null" if document else "")
    if kind in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return cell == "0x" + base64.b64decode(value).hex().upper()
    if kind == "json":
        return json.loads(cell, parse_float=Decimal) == value
    if kind == "vector":  # float32s: the shortest text in the CSV, Java's in the JSON; the same floats
        return [_f32(v) for v in json.loads(cell)] == [_f32(v) for v in value]
    if kind == "float":
        return _f32(cell) == _f32(value)
    if kind == "double":
        return float(cell) == float(value)
    if kind == "set":
        return cell == ",".join(value)
    if isinstance(value, Decimal):
        return Decimal(cell) == value
    return cell == str(value)
