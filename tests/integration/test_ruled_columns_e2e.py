"""spec.columns on real servers: a snapshot and a stream with DDL, into the Delta change log and the JSON lines at
once. No raw value of a ruled column is written anywhere (change log, schema-free Parquet values, checkpoints, logs,
JSON lines), and the replayed rows equal the source's rows with the same rules applied here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.javatext import java_double
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.delta import DeltaSink

from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest

KEY = "mask-key-Ω"
COLUMNS = {
    "exclude": ["*.*.password_hash", "ruled.users.ssn*"],
    "hash": {
        "columns": ["ruled.users.email", "ruled.users.photo", "ruled.users.score", "ruled.tokens.tok"],
        "algorithm": "sha256",
        "keyFrom": {"env": "MASK_KEY"},
    },
    "mask": [{"columns": ["ruled.users.card*"], "keep": 4, "with": "*"}],
    "truncate": [{"columns": ["ruled.users.note"], "length": 5}],
}


# Row filters, over snapshot and stream rows alike: tokens 281-319 (300 and below are snapshotted) and users 10-19.
ROWS = [
    {"table": "ruled.tokens", "exclude": "v > 280 AND v < 320"},
    {"table": "ruled.users", "exclude": "plain = /^plain-1[0-9]$/"},
]
FILTERED_USERS = set(range(10, 20))


def mac(raw: bytes) -> str:
    return hmac.new(KEY.encode(), raw, hashlib.sha256).hexdigest()


def secrets_of(i: int) -> dict[str, str]:
    """Values that must never be written: unique per row, long enough to find in any file."""
    return {
        "email": f"person{i}.secret@example.com",
        "password_hash": f"PWHASH-{i:06d}-do-not-leak",
        "card": f"41115555{i:08d}",
        "ssn": f"SSN-{i:07d}-XYZ",
        "note": f"note {i} with a private tail PRIVATE-{i:06d}",
        "tok": f"token-{i:06d}-opaque",
    }


def _insert(cur: Any, i: int, rnd: random.Random, card: str = "card") -> None:
    s = secrets_of(i)
    cur.execute(
        f"INSERT INTO ruled.users (id, email, password_hash, {card}, note, photo, score, plain, ssn) "
        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
        (
            i,
            s["email"],
            s["password_hash"],
            s["card"],
            s["note"] if i % 7 else "😀é日本 " + s["note"],
            bytes([i % 256]) + s["ssn"].encode() if i % 5 else None,
            rnd.choice([1.5, -0.25, 1e10, 3.0]),
            f"plain-{i}",
            s["ssn"],
        ),
    )
    cur.execute("INSERT INTO ruled.tokens (tok, v) VALUES (%s, %s)", (s["tok"], i))


def _caught_up(srv: PrivateServer, sink: DeltaSink, worker: WorkerProcess) -> bool:
    worker.running()
    status = srv.binlog_status()
    ckpt = sink.load_checkpoint()
    return ckpt is not None and ckpt.snapshot is None and ckpt.coordinate >= Coordinate(status.file, status.pos)


def _expected(row: dict[str, Any]) -> dict[str, Any]:
    """A source row (SELECT *) with the rules applied by hand: what every replay must hold."""
    out = {k: v for k, v in row.items() if k != "password_hash" and not k.startswith("ssn")}
    out["email"] = mac(row["email"].encode())
    out["photo"] = mac(row["photo"]) if row["photo"] is not None else None
    out["score"] = mac(java_double(row["score"]).encode())
    for card in [k for k in out if k.startswith("card")]:
        out[card] = "*" * (len(row[card]) - 4) + row[card][-4:]
    out["note"] = row["note"][:5] if row["note"] is not None else None
    return out


def test_ruled_columns_never_leave_the_database(tmp_path: Path, start_source: Callable[..., PrivateServer]) -> None:
    srv = start_source(91)
    conn = srv.connect()
    cur = conn.cursor()
    rnd = random.Random(91)
    cur.execute("CREATE DATABASE ruled")
    cur.execute(
        "CREATE TABLE ruled.users (id INT PRIMARY KEY, email VARCHAR(100), password_hash VARCHAR(100), "
        "card VARCHAR(20), note TEXT, photo BLOB, score DOUBLE, plain VARCHAR(40), ssn VARCHAR(30)) "
        "DEFAULT CHARSET utf8mb4"
    )
    cur.execute("CREATE TABLE ruled.tokens (tok VARCHAR(40) PRIMARY KEY, v INT)")
    for i in range(1, 301):  # before the capture: the snapshot reads them
        _insert(cur, i, rnd)
    conn.commit()
    srv.flush_and_purge()  # a capture from `earliest` must snapshot
    delta_uri = str(tmp_path / "changelog")
    lines_path = tmp_path / "events.jsonl"
    spec = {"columns": COLUMNS, "rows": ROWS, "snapshot": {"chunkRows": 40}}
    docs = {
        "ruled-delta": {"type": "delta", "delta": {"uri": delta_uri}},
        "ruled-lines": {
            "type": "jsonl",
            "jsonl": {"path": str(lines_path), "outputDdl": True, "outputPrimaryKeys": True},
        },
    }
    paths = {
        name: write_manifest(
            tmp_path / f"{name}.yaml",
            manifest(
                name,
                port=srv.port,
                server_id=9001 + n,
                sink=sink,
                tables={"include": ["ruled.*"]},
                flush={"maxIntervalMs": 200, "maxEvents": 25},  # the snapshot commits many checkpoints
                extra_spec=spec,
            ),
        )
        for n, (name, sink) in enumerate(docs.items())
    }
    env = {"MASK_KEY": KEY}
    checked = run_cli("check", str(paths["ruled-delta"]), env=env)
    assert checked.returncode == 0, checked.stderr
    assert "column ruled.users.email: hash (HMAC-SHA256)" in checked.stdout
    assert "column ruled.users.photo: hash (HMAC-SHA256, of the bytes)" in checked.stdout
    assert "column ruled.users.password_hash: exclude" in checked.stdout
    assert "column ruled.users.card: mask with '*', keep the last 4" in checked.stdout
    assert "column ruled.tokens.tok: hash (HMAC-SHA256)" in checked.stdout
    assert "rows ruled.tokens: 1 exclude and 0 include filters" in checked.stdout
    sink = DeltaSink(delta_uri, app_id="mysqlcapture-ruled-delta")
    for statement in (
        "SET GLOBAL log_output = 'TABLE'",
        "TRUNCATE TABLE mysql.general_log",
        "SET GLOBAL general_log = ON",
    ):
        cur.execute(statement)
    # The Delta capture on the compiled path, the JSON-lines one on the reference path: both must give the same rows.
    workers = [
        WorkerProcess(paths["ruled-delta"], log_path=tmp_path / "ruled-delta.log", env=env),
        WorkerProcess(
            paths["ruled-lines"],
            log_path=tmp_path / "ruled-lines.log",
            env={**env, "MYSQLCAPTURE_DECODER": "reference"},
        ),
    ]
    try:
        wait_until(lambda: _caught_up(srv, sink, workers[0]), timeout=180, what="the snapshot")
        wait_until(lambda: '"id":300' in lines_path.read_text(), timeout=180, what="the reference path's snapshot")
        cur.execute("SET GLOBAL general_log = OFF")
        cur.execute("SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log")
        reads = [q for (q,) in cur.fetchall() if "from `ruled`.`users`" in q.lower()]
        # Both paths read the snapshot's rows without the excluded columns: the server never sends their values.
        assert len(reads) >= 2 * 300 // 40 and all("password_hash" not in q and "`ssn`" not in q for q in reads), reads
        for i in range(301, 401):
            _insert(cur, i, rnd)
        cur.execute("UPDATE ruled.users SET password_hash = 'PWHASH-CHANGED-do-not-leak' WHERE id <= 20")
        cur.execute("UPDATE ruled.users SET card = CONCAT(card, '9'), note = CONCAT(note, ' more') WHERE id > 380")
        cur.execute("UPDATE ruled.tokens SET tok = CONCAT(tok, '-x') WHERE v BETWEEN 50 AND 60")
        cur.execute("DELETE FROM ruled.users WHERE id BETWEEN 100 AND 120")
        cur.execute("ALTER TABLE ruled.users CHANGE card card_number VARCHAR(24), ADD COLUMN ssn_last VARCHAR(30)")
        for i in range(401, 451):
            _insert(cur, i, rnd, card="card_number")
            cur.execute("UPDATE ruled.users SET ssn_last = %s WHERE id = %s", (secrets_of(i)["ssn"], i))
        # The masked column's type changes; the truncated one is dropped and added back, then written again.
        cur.execute("ALTER TABLE ruled.users MODIFY card_number VARCHAR(40)")
        cur.execute("UPDATE ruled.users SET card_number = CONCAT(card_number, '77') WHERE id % 9 = 0")
        cur.execute("ALTER TABLE ruled.users DROP COLUMN note")
        cur.execute("ALTER TABLE ruled.users ADD COLUMN note TEXT AFTER card_number")
        cur.execute("UPDATE ruled.users SET note = CONCAT('PRIVATE-', LPAD(id, 6, '0'), ' again') WHERE id % 4 = 0")
        conn.commit()
        wait_until(lambda: _caught_up(srv, sink, workers[0]), timeout=180, what="the stream")
        wait_until(
            lambda: workers[1].running() and '"id":450' in lines_path.read_text(), timeout=180, what="the JSON lines"
        )
        cur.execute("SELECT * FROM ruled.users")
        names = [d[0] for d in cur.description]
        source = {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
        cur.execute("SELECT tok, v FROM ruled.tokens")
        tokens = {mac(t.encode()): v for t, v in cur.fetchall() if not 280 < v < 320}
    finally:
        for w in workers:
            w.stop()
        conn.close()
    changelog = read_changelog(delta_uri)
    lines = [json.loads(x) for x in lines_path.read_text().splitlines()]

    # Both sinks, snapshot and stream: the replayed rows are the source's, ruled.
    for rows, data_of in (
        (changelog, lambda r: json.loads(r["data"]) if r["data"] else None),
        (lines, lambda ln: ln.get("data", ln.get("def"))),
    ):
        users: dict[int, dict[str, Any]] = {}
        toks: dict[str, int] = {}
        for r in rows:
            data = data_of(r)
            if r["table"] == "users" and r["type"] in ("insert", "bootstrap-insert", "update"):
                users[data["id"]] = data
            elif r["table"] == "users" and r["type"] == "delete":
                users.pop(data["id"])
            elif r["table"] == "tokens" and r["type"] in ("insert", "bootstrap-insert", "update"):
                toks = {k: v for k, v in toks.items() if v != data["v"]} | {data["tok"]: data["v"]}
            elif r["table"] == "users" and r["type"] == "table-alter":  # the rows as the new definition has them
                names = [c["name"] for c in data["columns"]]
                for i, u in users.items():
                    if "card" in u and "card" not in names:  # the one rename of the workload
                        u["card_number"] = u.pop("card")
                    users[i] = {n: u.get(n) for n in names}
        assert users == {i: _expected(row) for i, row in source.items() if i not in FILTERED_USERS}
        assert toks == tokens
    # The update that changed only an excluded column still emits, with no `old`.
    # An update that changed only excluded columns (password_hash, ssn_last) still emits, with no `old`; every other
    # update has one.
    updates = [ln for ln in lines if ln["type"] == "update" and ln["table"] == "users"]
    without_old = [*range(1, 10), 20, *range(401, 451)]
    assert sorted(ln["data"]["id"] for ln in updates if "old" not in ln) == without_old
    kinds = ("insert", "update", "delete", "bootstrap-insert")
    user_rows = [ln["data"]["id"] for ln in lines if ln["table"] == "users" and ln["type"] in kinds]
    assert user_rows and not FILTERED_USERS & set(user_rows)
    ddl = [ln for ln in lines if ln["type"] == "table-alter"]
    assert len(ddl) == 4
    assert ddl and {c["name"] for c in ddl[0]["def"]["columns"]} == {
        "id",
        "email",
        "card_number",
        "note",
        "photo",
        "score",
        "plain",
    }
    assert {"type": "varchar", "name": "score", "charset": "ascii"} in ddl[0]["def"]["columns"]

    # No raw value of a ruled column in any file either capture wrote: Parquet values decoded, the rest as bytes.
    needles = set()
    for i in range(1, 451):
        s = secrets_of(i)
        needles |= {s["email"], s["password_hash"], s["card"], s["ssn"], f"PRIVATE-{i:06d}", s["tok"]}
        needles.add(base64.b64encode(bytes([i % 256]) + s["ssn"].encode()).decode())
    needles.add("PWHASH-CHANGED")
    scanned = 0
    for path in tmp_path.rglob("*"):
        if not path.is_file() or path.suffix == ".yaml":
            continue
        if path.suffix == ".parquet":
            text = json.dumps(pq.read_table(path).to_pylist(), default=str)
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        scanned += len(text)
        leaked = [n for n in needles if n in text]
        assert not leaked, f"{path} holds {leaked[:3]}"
    assert scanned > 100_000


def test_maxwells_filter_and_exclude_columns_carry_over(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(92)
    conn = srv.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE mw")
    cur.execute("CREATE TABLE mw.keep (id INT PRIMARY KEY, kind VARCHAR(10), secret VARCHAR(40))")
    cur.execute("CREATE TABLE mw.other (id INT PRIMARY KEY)")
    conn.commit()
    out = tmp_path / "mw.jsonl"
    maxwell = {
        "filter": "exclude: *.*, include: mw.keep, exclude: mw.keep.kind = debug",
        "excludeColumns": "secret",
    }
    doc = manifest(
        "mw",
        port=srv.port,
        sink={"type": "jsonl", "jsonl": {"path": str(out)}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 100},
        extra_spec={"maxwell": maxwell},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "mw.yaml", doc))
    try:
        wait_until(lambda: worker.running() and Path(f"{out}.checkpoint").exists(), timeout=60, what="a checkpoint")
        for i in range(1, 61):
            kind = "debug" if i % 3 == 0 else "info"
            cur.execute("INSERT INTO mw.keep VALUES (%s, %s, %s)", (i, kind, f"SECRET-{i:04d}-value"))
            cur.execute("INSERT INTO mw.other VALUES (%s)", (i,))
        cur.execute("UPDATE mw.keep SET secret = 'SECRET-changed-value' WHERE id = 1")
        cur.execute("INSERT INTO mw.keep VALUES (1000, 'info', 'SECRET-last-value')")
        conn.commit()
        wait_until(lambda: worker.running() and '"id":1000' in out.read_text(), timeout=120, what="the last row")
    finally:
        assert worker.stop() == 0, worker.log_text()
        conn.close()
    text = out.read_text()
    lines = [json.loads(x) for x in text.splitlines()]
    assert {(ln["database"], ln["table"]) for ln in lines} == {("mw", "keep")}
    inserted = [ln["data"]["id"] for ln in lines if ln["type"] == "insert"]
    assert inserted == [i for i in range(1, 61) if i % 3] + [1000]
    assert all(set(ln["data"]) == {"id", "kind"} for ln in lines)
    # The update changed only the excluded column: written, without `old`.
    assert [(ln["data"], "old" in ln) for ln in lines if ln["type"] == "update"] == [({"id": 1, "kind": "info"}, False)]
    assert "SECRET" not in text and "SECRET" not in worker.log_text()


def test_a_rotated_hash_key_is_taken_from_the_next_event_on_without_a_restart_by_hand(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(94)
    conn = srv.connect()
    cur = conn.cursor()
    cur.execute("CREATE DATABASE rot")
    cur.execute("CREATE TABLE rot.users (id INT PRIMARY KEY, email VARCHAR(60))")
    conn.commit()
    key_file = tmp_path / "key"
    key_file.write_text("first-key\n")
    out = tmp_path / "rot.jsonl"
    columns = {"hash": {"columns": ["rot.users.email"], "keyFrom": {"file": str(key_file)}}}
    doc = manifest(
        "rot",
        port=srv.port,
        sink={"type": "jsonl", "jsonl": {"path": str(out)}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 100},
        extra_spec={"columns": columns},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "rot.yaml", doc))

    def written(i: int) -> bool:
        return worker.running() and f'"id":{i},' in out.read_text()

    try:
        wait_until(lambda: worker.running() and Path(f"{out}.checkpoint").exists(), timeout=60, what="a checkpoint")
        cur.execute("INSERT INTO rot.users VALUES (1, 'a@example.com')")
        conn.commit()
        wait_until(lambda: written(1), timeout=60, what="the first row")
        key_file.write_text("second-key\n")
        wait_until(lambda: "the key changed" in worker.log_text(), timeout=60, what="the rotation")
        cur.execute("INSERT INTO rot.users VALUES (2, 'a@example.com')")
        conn.commit()
        wait_until(lambda: written(2), timeout=60, what="the row after the rotation")
    finally:
        assert worker.stop() == 0, worker.log_text()
        conn.close()
    emails = {ln["data"]["id"]: ln["data"]["email"] for ln in map(json.loads, out.read_text().splitlines())}
    assert emails == {
        1: hmac.new(b"first-key", b"a@example.com", hashlib.sha256).hexdigest(),
        2: hmac.new(b"second-key", b"a@example.com", hashlib.sha256).hexdigest(),
    }
    assert "first-key" not in worker.log_text() and "second-key" not in worker.log_text()
