"""The source as its users run it: a non-root capture user, caching_sha2_password with and without TLS, a test CA, and
each misconfiguration answered with one line naming the setting and the fix (exit 3), never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_dev.embedded.server import PrivateServer, free_port

from tests import servers
from tests.pki import make_ca, server_cert
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest

GRANTS = "REPLICATION SLAVE, REPLICATION CLIENT, SELECT"  # what RDS and Aurora give: no RELOAD


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("pki")
    ca = make_ca(directory, "test-ca")
    other = make_ca(directory, "other-ca")
    cert, key = server_cert(directory, ca)
    return {"ca": ca[0], "other_ca": other[0], "cert": cert, "key": key}


@pytest.fixture(scope="module")
def tls_mysql(pki: dict[str, Path]) -> Iterator[PrivateServer]:
    """MySQL 9.7 serving a certificate of the test CA."""
    with servers.running("mysql", 91, ssl_ca=str(pki["ca"]), ssl_cert=str(pki["cert"]), ssl_key=str(pki["key"])) as srv:
        yield srv


@pytest.fixture(scope="module")
def source(flavor: str) -> Iterator[PrivateServer]:
    with servers.running(flavor, 92) as srv:  # type: ignore[arg-type]
        yield srv


def _user(server: PrivateServer, name: str, grants: str = GRANTS, password: str = "s3cret") -> None:
    """A capture user with `grants` on *.* (and the heartbeat database's), its password not yet in any cache."""
    plugin = " WITH caching_sha2_password" if server.flavor == "mysql" else ""
    statements = [
        f"DROP USER IF EXISTS '{name}'@'%'",
        f"CREATE USER '{name}'@'%' IDENTIFIED{plugin} BY '{password}'",
        "FLUSH PRIVILEGES",  # empties caching_sha2_password's cache: the full authentication runs
    ]
    if grants:
        statements.insert(2, f"GRANT {grants} ON *.* TO '{name}'@'%'")
    statements.insert(-1, f"GRANT CREATE, INSERT, UPDATE ON mysqlcapture.* TO '{name}'@'%'")
    server.execute(*statements)


def _doc(server: PrivateServer, tmp_path: Path, name: str, user: str, **tls: Any) -> dict[str, Any]:
    doc = manifest(
        name.replace("_", "-"),  # a resource name; `name` is also the database (and user) name
        port=server.port,
        sink={"type": "delta", "delta": {"uri": str(tmp_path / name)}},
        start={"from": "latest"},
        tables={"include": [f"{name}.*"]},
    )
    doc["spec"]["source"]["user"] = user
    doc["spec"]["source"]["tls"] = tls or {"mode": "disabled"}
    return doc


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line the CLI printed, whatever warnings it printed before (MariaDB's `check` says when it cannot
    look for a server_id clash), and no traceback."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("mysqlcapture: ")]
    assert len(lines) == 1, f"expected one error line, got:\n{result.stderr}"
    return lines[0]


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one error line the CLI printed (`check` prints nothing else; `run` also logs), and no traceback."""
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("mysqlcapture: ")]
    assert len(lines) == 1, f"expected one error line, got:\n{result.stderr}"
    if result.args[3] == "check":
        assert result.stderr.strip() == lines[0], result.stderr
    return lines[0]


@pytest.mark.mysql
@pytest.mark.parametrize(
    "tls",
    [{"mode": "required"}, {"mode": "verify-ca", "caFile": "ca"}, {"mode": "disabled"}],
    ids=["tls-required", "tls-verify-ca", "no-tls-rsa-key-exchange"],
)
def test_caching_sha2_user_checks_and_streams(
    tls_mysql: PrivateServer, pki: dict[str, Path], tmp_path: Path, tls: dict[str, str]
) -> None:
    """`check` and `run` as a non-root caching_sha2_password user: the binlog stream authenticates like the checks."""
    name = f"acc_{tls['mode'].replace('-', '_')}"
    tls = {k: str(pki[v]) if k == "caFile" else v for k, v in tls.items()}
    _user(tls_mysql, name)
    path = write_manifest(tmp_path / f"{name}.yaml", _doc(tls_mysql, tmp_path, name, name, **tls))
    checked = run_cli("check", str(path), password="s3cret")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("ok: 9.")
    tls_mysql.execute(f"CREATE DATABASE {name}", f"CREATE TABLE {name}.t (id INT PRIMARY KEY)")
    # From the start of the binlog file that holds these: a position, so the run ends at the binlog's end.
    status = tls_mysql.binlog_status()
    tls_mysql.execute(f"INSERT INTO {name}.t VALUES (1), (2)", f"DELETE FROM {name}.t WHERE id = 1")
    doc = _doc(tls_mysql, tmp_path, name, name, **tls)
    doc["spec"]["start"] = {"from": "position", "binlogFile": status.file, "binlogPosition": status.pos}
    tls_mysql.execute("FLUSH PRIVILEGES")
    ran = run_cli("run", str(write_manifest(path, doc)), "--exit-at-end", "--plain-logs", password="s3cret")
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = read_changelog(str(tmp_path / name))
    assert [(r["type"], r["data"]) for r in rows if r["table"] == "t"] == [
        ("insert", '{"id":1}'),
        ("insert", '{"id":2}'),
        ("delete", '{"id":1}'),
    ]


@pytest.mark.mysql
def test_verify_ca_with_another_ca_is_refused(tls_mysql: PrivateServer, pki: dict[str, Path], tmp_path: Path) -> None:
    _user(tls_mysql, "acc_wrong_ca")
    doc = _doc(tls_mysql, tmp_path, "acc_wrong_ca", "acc_wrong_ca", mode="verify-ca", caFile=str(pki["other_ca"]))
    path = str(write_manifest(tmp_path / "wrong_ca.yaml", doc))
    for result in (run_cli("check", path, password="s3cret"), run_cli("run", path, password="s3cret")):
        assert result.returncode == 3, result.stderr
        line = _one_line(result)
        assert "spec.source.tls" in line and "caFile" in line, line
        assert "certificate verify failed" in line, line


@pytest.mark.parametrize("command", ["check", "run"])
def test_wrong_password_is_one_line(source: PrivateServer, tmp_path: Path, command: str) -> None:
    _user(source, "acc_pw")
    path = str(write_manifest(tmp_path / "pw.yaml", _doc(source, tmp_path, "acc_pw", "acc_pw")))
    result = run_cli(command, path, password="wrong")
    assert result.returncode == 3, result.stderr
    line = _one_line(result)
    assert "Access denied for user 'acc_pw'" in line, line
    assert "spec.source.user" in line and "passwordFrom" in line, line
    assert not (tmp_path / "acc_pw").exists(), "a refused capture must not create its change log"


@pytest.mark.parametrize("missing", ["REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT"])
def test_each_missing_grant_is_named(source: PrivateServer, tmp_path: Path, missing: str) -> None:
    name = "acc_" + missing.split()[-1].lower()
    _user(source, name, ", ".join(g for g in GRANTS.split(", ") if g != missing))
    path = str(write_manifest(tmp_path / f"{name}.yaml", _doc(source, tmp_path, name, name)))
    for command in ("check", "run"):
        result = run_cli(command, path, password="s3cret")
        assert result.returncode == 3, result.stderr
        line = _one_line(result)
        assert f"user '{name}' lacks {missing}: run GRANT {missing} ON *.* TO '{name}'" in line, line


def test_resnapshot_of_a_table_the_capture_does_not_hold_is_refused(source: PrivateServer, tmp_path: Path) -> None:
    """`mysqlcapture resnapshot --table` names a table the capture includes and the server has, or asks nothing."""
    _user(source, "acc_rs")
    source.execute("CREATE DATABASE IF NOT EXISTS acc_rs", "CREATE TABLE IF NOT EXISTS acc_rs.t (id INT PRIMARY KEY)")
    path = str(write_manifest(tmp_path / "rs.yaml", _doc(source, tmp_path, "acc_rs", "acc_rs")))
    outside = run_cli("resnapshot", path, "--table", "shop.orders", password="s3cret")
    assert outside.returncode == 2, outside.stderr
    assert outside.stderr.strip() == (
        "mysqlcapture: --table shop.orders: not a table this capture includes (spec.tables.include ['acc_rs.*'], "
        "exclude []); name one it captures"
    )
    missing = run_cli("resnapshot", path, "--table", "acc_rs.nosuch", password="s3cret")
    assert missing.returncode == 2, missing.stderr
    assert missing.stderr.strip() == "mysqlcapture: --table acc_rs.nosuch: the source has no such table; nothing asked"
    asked = run_cli("resnapshot", path, "--table", "acc_rs.t", password="s3cret")
    assert asked.returncode == 0, asked.stderr
    assert re.fullmatch(
        r"resnapshot request \d+ for acc_rs\.t written to mysqlcapture; the running worker takes it\n", asked.stdout
    )
    requests = source.query("SELECT table_name FROM mysqlcapture.snapshot_requests WHERE table_name LIKE 'acc_rs.%'")
    assert [r[0] for r in requests] == ["acc_rs.t"], requests


def test_a_sink_path_the_worker_cannot_write_is_one_line(source: PrivateServer, tmp_path: Path) -> None:
    """A Delta change log under a file (a path no directory can be made at): `check` says so before anything runs
    (exit 2), `run` in one line naming the setting (exit 1); and tables that match nothing are a warning."""
    _user(source, "acc_path")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    doc = _doc(source, tmp_path, "acc_path", "acc_path")
    doc["spec"]["sink"]["delta"]["uri"] = str(blocker / "changelog")
    path = str(write_manifest(tmp_path / "path.yaml", doc))
    check = run_cli("check", path, password="s3cret")
    assert check.returncode == 2, check.stderr
    assert _error_line(check) == (
        f"mysqlcapture: spec.sink.delta.uri {blocker / 'changelog'}: the worker could not write there (Not a "
        "directory): set it to a directory the worker can create and write"
    )
    run = run_cli("run", path, password="s3cret")
    assert run.returncode == 1, run.stderr
    line = _one_line(run)
    assert line.startswith("mysqlcapture: cannot open the capture's storage named by spec.sink.delta.uri ("), line
    assert line.endswith(
        "set it to a directory the worker can create and write, or an object-store URI its credentials reach; "
        "nothing was written"
    ), line
    # No table of acc_path exists: check says so, and succeeds (a matching table created later is captured).
    doc["spec"]["sink"]["delta"]["uri"] = str(tmp_path / "changelog")
    nothing = run_cli("check", str(write_manifest(tmp_path / "nothing.yaml", doc)), password="s3cret")
    assert nothing.returncode == 0, nothing.stderr
    assert (
        "warning: spec.tables (include ['acc_path.*'], exclude []) matches no table on the server now: nothing is "
        "captured until a matching table is created; check the globs" in nothing.stdout.splitlines()
    ), nothing.stdout
    assert not (tmp_path / "changelog").exists(), "check must leave no directory behind"


@pytest.mark.mysql
def test_gtid_mode_off(tmp_path: Path) -> None:
    """gtid_mode OFF: refused for spec.failover.mode gtid, named with the fix; captured by file:pos otherwise."""
    with servers.running("mysql", 93, gtid_mode="OFF", enforce_gtid_consistency="OFF") as srv:
        doc = manifest("nogtid", port=srv.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "nogtid")}})
        doc["spec"]["failover"] = {"mode": "gtid"}
        result = run_cli("check", str(write_manifest(tmp_path / "gtid.yaml", doc)))
        assert result.returncode == 3
        line = _one_line(result)
        assert "gtid_mode is OFF on the source and spec.failover.mode is gtid: set gtid_mode=ON" in line, line
        assert "spec.failover.mode: heartbeat" in line
        doc["spec"]["failover"] = {"mode": "heartbeat"}
        srv.execute("CREATE DATABASE nogtid", "CREATE TABLE nogtid.t (id INT PRIMARY KEY)")
        srv.execute("INSERT INTO nogtid.t VALUES (7)")
        ran = run_cli("run", str(write_manifest(tmp_path / "hb.yaml", doc)), "--exit-at-end", "--plain-logs")
        assert ran.returncode == 0, ran.stderr[-3000:]
    rows = read_changelog(str(tmp_path / "nogtid"))
    assert [(r["type"], r["data"], r["gtid"]) for r in rows if r["table"] == "t" and r["sql"] is None] == [
        ("insert", '{"id":7}', None)
    ]


@pytest.mark.parametrize(
    "flavor", [pytest.param("mariadb", marks=pytest.mark.mariadb), pytest.param("mysql", marks=pytest.mark.mysql)]
)
def test_a_snapshot_takes_no_lock_and_needs_no_reload(tmp_path: Path, flavor: str) -> None:
    """With a managed server's grants (no RELOAD, no LOCK TABLES) a new capture snapshots a table with a key and
    one without, exactly, and the server's general log shows no FLUSH TABLES, LOCK TABLES or LOCK INSTANCE."""
    with servers.running(flavor, 94 if flavor == "mysql" else 95) as srv:  # type: ignore[arg-type]
        srv.execute(
            "CREATE DATABASE nolock",
            "CREATE TABLE nolock.keyed (id INT PRIMARY KEY, v VARCHAR(20))",
            "CREATE TABLE nolock.keyless (n INT, v VARCHAR(20))",
            "INSERT INTO nolock.keyed VALUES " + ", ".join(f"({i}, 'k{i}')" for i in range(500)),
            "INSERT INTO nolock.keyless VALUES " + ", ".join(f"({i % 7}, 'n{i}')" for i in range(300)),
        )
        srv.flush_and_purge()  # a capture from earliest must now snapshot
        _user(srv, "acc_nolock", "REPLICATION SLAVE, REPLICATION CLIENT, SELECT")
        srv.execute(
            "SET GLOBAL log_output = 'TABLE'", "TRUNCATE TABLE mysql.general_log", "SET GLOBAL general_log = ON"
        )
        doc = _doc(srv, tmp_path, "nolock", "acc_nolock")
        doc["spec"]["start"] = {"from": "earliest"}
        doc["spec"]["snapshot"] = {"chunkRows": 50}
        path = write_manifest(tmp_path / "nolock.yaml", doc)
        result = run_cli("run", str(path), "--exit-at-end", password="s3cret")
        srv.execute("SET GLOBAL general_log = OFF")
        logged = srv.query("SELECT argument FROM mysql.general_log WHERE user_host LIKE 'acc_nolock%'")
        statements = [str(row[0]) for row in logged]
        conn = srv.connect()
        source = source_tables(conn, ["nolock"])
        conn.close()
    assert result.returncode == 0, result.stderr[-3000:]
    assert any("START TRANSACTION WITH CONSISTENT SNAPSHOT" in s for s in statements), statements[:20]
    locks = [s for s in statements if re.search(r"\b(FLUSH\s+TABLES|LOCK\s+TABLES?|LOCK\s+INSTANCE)\b", s, re.I)]
    assert locks == [], locks
    rows = read_changelog(str(tmp_path / "nolock"))
    kinds = Counter((r["table"], r["type"]) for r in rows)
    assert kinds[("keyed", "bootstrap-insert")] == 500 and kinds[("keyless", "bootstrap-insert")] == 300, kinds
    assert_replay_equals_source(replay(rows), source)


@pytest.mark.parametrize(
    "flavor", [pytest.param("mariadb", marks=pytest.mark.mariadb), pytest.param("mysql", marks=pytest.mark.mysql)]
)
def test_check_lists_what_the_snapshot_needs_and_names_what_is_missing(tmp_path: Path, flavor: str) -> None:
    """`check` lists each need of a lock-free snapshot on this server; one missing is one line with its fix."""
    with servers.running(flavor, 96 if flavor == "mysql" else 97) as srv:  # type: ignore[arg-type]
        _user(srv, "acc_needs", "REPLICATION SLAVE, REPLICATION CLIENT, SELECT")
        path = write_manifest(tmp_path / "needs.yaml", _doc(srv, tmp_path, "acc_needs", "acc_needs"))
        beating = _doc(srv, tmp_path, "acc_needs", "acc_needs")
        beating["spec"]["heartbeat"] = {"intervalSeconds": 10}
        beating_path = str(write_manifest(tmp_path / "beating.yaml", beating))
        ok = run_cli("check", str(path), password="s3cret")
        heartbeats_ok = run_cli("check", beating_path, password="s3cret")
        srv.execute("REVOKE INSERT ON mysqlcapture.* FROM 'acc_needs'@'%'")
        no_grant = run_cli("check", str(path), password="s3cret")
        no_grant_heartbeats = run_cli("check", beating_path, password="s3cret")
        if flavor == "mysql":
            srv.execute("GRANT INSERT ON mysqlcapture.* TO 'acc_needs'@'%'", "SET GLOBAL binlog_order_commits = OFF")
            unordered = run_cli("check", str(path), password="s3cret")
            srv.execute("SET GLOBAL binlog_order_commits = ON")
    assert ok.returncode == 0, ok.stderr
    assert heartbeats_ok.returncode == 0, heartbeats_ok.stderr
    assert (
        "heartbeat needs CREATE, INSERT, UPDATE on mysqlcapture.* (lag when idle, failover by heartbeat, resnapshot "
        "requests): ok" in heartbeats_ok.stdout.splitlines()
    ), heartbeats_ok.stdout
    # With heartbeats on (the default; these tests' manifests turn them off), both flavors need the grant.
    assert no_grant_heartbeats.returncode == 3, no_grant_heartbeats.stderr
    assert _error_line(no_grant_heartbeats) == (
        "mysqlcapture: heartbeat needs CREATE, INSERT, UPDATE on mysqlcapture.* (lag when idle, failover by heartbeat, "
        "resnapshot requests): MISSING: GRANT CREATE, INSERT, UPDATE ON mysqlcapture.* TO 'acc_needs'@'%', or "
        "spec.heartbeat.intervalSeconds: 0 to write none"
    )
    needs = [line for line in ok.stdout.splitlines() if line.startswith("snapshot needs ")]
    assert needs and all(line.endswith(": ok") for line in needs), ok.stdout
    assert any("no RELOAD grant" in line for line in needs), needs
    if flavor == "mariadb":
        assert any("binlog_snapshot_position" in line for line in needs), needs
        assert no_grant.returncode == 0, no_grant.stderr  # MariaDB's snapshot writes nothing
        return
    assert any("binlog_order_commits=ON" in line for line in needs), needs
    assert no_grant.returncode == 3, no_grant.stderr
    assert "GRANT CREATE, INSERT, UPDATE ON mysqlcapture.* TO 'acc_needs'@'%'" in _one_line(no_grant)
    assert unordered.returncode == 3, unordered.stderr
    assert "binlog_order_commits=ON" in _one_line(unordered) and "MISSING" in _one_line(unordered)


def _worker_status(worker: WorkerProcess) -> dict[str, Any]:
    worker.running()
    try:
        port = worker.metrics_port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as answer:
            return dict(json.loads(answer.read()))
    except (AssertionError, OSError, ValueError):
        return {}


# cause -> (how to cause it, the status reason, words its message must hold)
CAUSES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "wrong-password": ("password", "AccessDenied", ("Access denied for user 'acc_why'", "passwordFrom")),
    "no-server": ("port", "SourceUnreachable", ("spec.source.host and spec.source.port",)),
    "statement-binlog": ("binlog_format", "BinlogFormatNotRow", ("binlog_format is STATEMENT", "binlog_format=ROW")),
    "missing-grant": ("grant", "MissingGrant", ("lacks REPLICATION SLAVE", "GRANT REPLICATION SLAVE ON *.*")),
}


@pytest.mark.parametrize("cause", list(CAUSES))
def test_what_stops_the_worker_is_on_its_status_until_fixed(source: PrivateServer, tmp_path: Path, cause: str) -> None:
    """`run --retry-errors` (the worker pod's mode): the worker stays up, /status says phase Error with a reason
    word and the one-line message naming the setting or grant (the operator copies both into the capture's Ready
    condition), and once the cause is fixed the next attempt streams, without a restart."""
    how, reason, words = CAUSES[cause]
    _user(source, "acc_why", GRANTS if how != "grant" else "REPLICATION CLIENT, SELECT")
    doc = _doc(source, tmp_path, "acc_why", "acc_why")
    if how == "port":
        doc["spec"]["source"]["port"] = free_port()
    doc["spec"]["metrics"] = {"port": 0}
    if how == "binlog_format":
        source.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    path = write_manifest(tmp_path / "why.yaml", doc)
    worker = WorkerProcess(path, password="wrong" if how == "password" else "s3cret", args=("--retry-errors",))
    try:
        status = wait_until(
            lambda: (s := _worker_status(worker)).get("phase") == "Error" and s,
            timeout=60,
            what="phase Error on /status",
        )
        assert status["error_reason"] == reason, status
        assert all(w in status["error"] for w in words), status
        assert status["retry_seconds"] == 10.0, status
        assert "Traceback" not in worker.log_text()
        if how == "grant":
            source.execute("GRANT REPLICATION SLAVE ON *.* TO 'acc_why'@'%'")
            wait_until(
                lambda: _worker_status(worker).get("phase") == "Streaming",
                timeout=60,
                what="Streaming once the grant is given",
            )
            if source.flavor == "mariadb":  # SHOW SLAVE HOSTS needs REPLICATION MASTER ADMIN there: check skipped
                assert "not checking that server_id" in worker.log_text(), worker.log_text()[-3000:]
    finally:
        if how == "binlog_format":
            source.execute("SET GLOBAL binlog_format = 'ROW'")
        code = worker.stop()
    assert code == 0, worker.log_text()[-3000:]
    print(f"{source.version}: {cause} -> {reason}: {status['error']}")


def test_a_source_without_binary_logging_is_named_on_the_status(flavor: str, tmp_path: Path) -> None:
    """log_bin=OFF, the one cause the shared server cannot show (it needs a restart): BinlogDisabled, with the fix."""
    with servers.running(flavor, 95, log_bin="OFF") as srv:  # type: ignore[arg-type]
        doc = manifest("nobinlog", port=srv.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "nb")}})
        doc["spec"]["metrics"] = {"port": 0}
        worker = WorkerProcess(write_manifest(tmp_path / "nb.yaml", doc), args=("--retry-errors",))
        try:
            status = wait_until(
                lambda: (s := _worker_status(worker)).get("phase") == "Error" and s,
                timeout=60,
                what="phase Error on /status",
            )
        finally:
            code = worker.stop()
    assert code == 0, worker.log_text()[-3000:]
    assert status["error_reason"] == "BinlogDisabled", status
    assert "log_bin is OFF on the source: enable binary logging" in status["error"], status
    print(f"{srv.version}: log_bin=OFF -> BinlogDisabled: {status['error']}")
