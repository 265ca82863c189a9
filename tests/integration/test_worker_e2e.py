"""The worker as a process against real MariaDB and MySQL servers: a random workload replays to exactly the source."""

from __future__ import annotations

import json
import os
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.worker_status import WorkerStatus, parse_worker_status
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.runtime.binlog_reader import ClashWatch
from mysqlcapture_worker.source.dialect import Flavor
from pymysqlreplication import BinLogStreamReader

from tests import servers
from tests.replay import assert_replay_equals_source, replay, source_tables
from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest
from tests.workload import Workload


@pytest.fixture(scope="module")
def server(flavor: Flavor) -> Iterator[PrivateServer]:
    """One server per flavor for the tests of this module, each in databases of its own."""
    with servers.running(flavor, 21) as srv:
        yield srv


def _caught_up(server: PrivateServer, uri: str, app_id: str = "mysqlcapture-e2e") -> bool:
    from mysqlcapture_worker.sinks.delta import DeltaSink

    status = server.binlog_status()
    ckpt = DeltaSink(uri, app_id=app_id).load_checkpoint()
    return ckpt is not None and ckpt.coordinate >= Coordinate(status.file, status.pos)


SEEDS = [int(s) for s in os.environ.get("MYSQLCAPTURE_E2E_SEEDS", "7,11").split(",")]


@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_random_workload_with_ddl_replays_to_source(server: PrivateServer, tmp_path: Path, seed: int) -> None:
    conn = server.connect()
    database = f"e2e{seed}"
    workload = Workload(conn, database, seed=seed, ddl=True, truncate=True)
    workload.setup(n_tables=3)
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "e2e",
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        flush={"maxIntervalMs": 200},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "e2e.yaml", doc))
    try:
        wait_until(
            lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        for _ in range(400):
            workload.step()
        wait_until(lambda: _caught_up(server, uri), timeout=120, what="the change log to reach the binlog's end")
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text()
    rows = read_changelog(uri)
    assert len(rows) > 400
    identities = [(r["server_id"], r["binlog_file"], r["binlog_pos"], r["row_index"]) for r in rows]
    assert len(identities) == len(set(identities)), "an event was written twice"
    assert [r["order_key"] for r in rows] == sorted({r["order_key"] for r in rows})
    kinds = {r["type"] for r in rows}
    assert {"insert", "update", "delete", "table-create", "table-alter", "table-truncate"} <= kinds, kinds
    assert_replay_equals_source(replay(rows), source_tables(conn, [database]))
    conn.close()


def test_status_is_the_worker_status_document(server: PrivateServer, tmp_path: Path) -> None:
    """The real worker's GET /status holds exactly the fields of WorkerStatus, each of its type.

    Every key present and none outside the model: a key renamed in the worker, or in the model the operator
    parses with, fails here rather than reading as "not known" in the operator.
    """
    from mysqlcapture_worker.sinks.delta import DeltaSink

    server.execute("CREATE DATABASE IF NOT EXISTS st", "CREATE TABLE IF NOT EXISTS st.t (id INT PRIMARY KEY, v INT)")
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "status",
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        tables={"include": ["st.*"]},
        flush={"maxIntervalMs": 200},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "status.yaml", doc))

    def answer(since: Coordinate) -> bytes | None:
        if not worker.alive() or "metrics on :" not in worker.log_text():
            return None
        with urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/status", timeout=5) as resp:
            body: bytes = resp.read()
        found = json.loads(body)
        # Streaming, past the insert's commit (the document is refreshed apart from the commits), with the purge
        # headroom measured: every field has its running value.
        ready = found.get("phase") == "Streaming" and found.get("binlog_file")
        ready = ready and Coordinate(found["binlog_file"], found["binlog_pos"]) >= since
        return body if ready and found.get("purge_headroom_files") is not None else None

    try:
        wait_until(
            lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        server.execute("INSERT INTO st.t VALUES (1, 1)")
        inserted = server.binlog_status()
        wait_until(lambda: _caught_up(server, uri, "mysqlcapture-status"), timeout=60, what="the insert's commit")
        since = Coordinate(inserted.file, inserted.pos)
        body = wait_until(lambda: answer(since), timeout=60, what="/status of a streaming worker past the insert")
    finally:
        assert worker.stop() == 0, worker.log_text()
    keys = list(json.loads(body))
    assert sorted(set(keys) - set(WorkerStatus.model_fields)) == [], "keys the model does not define"
    assert sorted(set(WorkerStatus.model_fields) - set(keys)) == [], "fields of the model the worker left out"
    status = parse_worker_status(body)
    final = DeltaSink(uri, app_id="mysqlcapture-status").load_checkpoint()
    assert status.phase == "Streaming" and status.binlog_file and status.binlog_pos is not None
    assert final is not None
    # Read after the insert's commit and before the last commit at the stop.
    assert Coordinate(inserted.file, inserted.pos) <= Coordinate(status.binlog_file, status.binlog_pos)
    assert Coordinate(status.binlog_file, status.binlog_pos) <= final.coordinate
    assert status.server_id is not None and status.server_identity
    assert (status.failovers, status.binlog_purged, status.error, status.error_reason) == (0, False, None, None)
    assert status.purge_headroom_bytes is not None and status.reading_active_file is not None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"binlog_format": "STATEMENT"}, "binlog_format is STATEMENT on the source: set binlog_format=ROW"),
        ({"binlog_format": "MIXED"}, "binlog_format is MIXED on the source: set binlog_format=ROW"),
        ({"binlog_row_image": "MINIMAL"}, "binlog_row_image is MINIMAL on the source: set binlog_row_image=FULL"),
        ({"binlog_row_image": "NOBLOB"}, "binlog_row_image is NOBLOB on the source: set binlog_row_image=FULL"),
        # log_bin off also hides log_slave_updates; the message must name log_bin and how to enable it.
        ({"log_bin": "OFF", "log_slave_updates": "OFF"}, "log_bin is OFF on the source: enable binary logging"),
    ],
    ids=["statement", "mixed", "minimal-image", "noblob-image", "log-bin-off"],
)
def test_uncapturable_server_settings_are_refused_with_the_fix(
    tmp_path: Path, settings: dict[str, str], message: str, start_source: Callable[..., PrivateServer]
) -> None:
    srv = start_source(22, **settings)
    try:
        doc = manifest("neg", port=srv.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "x")}})
        path = str(write_manifest(tmp_path / "neg.yaml", doc))
        checked = run_cli("check", path)
        ran = run_cli("run", path)
    finally:
        srv.stop()
    for result in (checked, ran):
        assert result.returncode == 3, result.stderr
        assert message in result.stderr
    assert not (tmp_path / "x").exists(), "a refused capture must not create its change log"


def test_replica_server_id_in_use_is_refused(server: PrivateServer, tmp_path: Path) -> None:
    sink = {"type": "delta", "delta": {"uri": str(tmp_path / "first")}}
    first = WorkerProcess(write_manifest(tmp_path / "first.yaml", manifest("first", port=server.port, sink=sink)))
    try:
        wait_until(
            lambda: 9001 in servers.replica_ids(server) or not first.alive(),
            timeout=60,
            what="the first worker to register as replica 9001",
        )
        assert first.alive(), first.log_text()
        doc = manifest("second", port=server.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "second")}})
        result = run_cli("check", str(write_manifest(tmp_path / "second.yaml", doc)))
    finally:
        assert first.stop() == 0, first.log_text()
    assert result.returncode == 3
    assert "replica server_id 9001 is already in use by another replica of this server" in result.stderr
    assert "give this capture a unique spec.source.serverId" in result.stderr


def _kick(server: PrivateServer, server_id: int) -> None:
    """A binlog dump under `server_id`: the server drops the other replica connected with that id."""
    settings = {"host": "127.0.0.1", "port": server.port, "user": "root", "password": server.root_password}
    stream = BinLogStreamReader(connection_settings=settings, server_id=server_id, blocking=False)
    try:
        with warnings.catch_warnings():  # the library's own use of PyMySQL's deprecated db=
            warnings.simplefilter("ignore", DeprecationWarning)
            stream.fetchone()
    finally:
        stream.close()


def test_a_replica_that_keeps_taking_the_server_id_stops_the_worker_with_one_line(
    server: PrivateServer, tmp_path: Path
) -> None:
    """Two live replicas with one server_id (both started before either registered, so the start-up check passed)
    disconnect each other for ever: after a few such losses the worker stops with the setting to change."""
    sink = {"type": "delta", "delta": {"uri": str(tmp_path / "kicked")}}
    doc = manifest("kicked", port=server.port, sink=sink, start={"from": "latest"})
    worker = WorkerProcess(write_manifest(tmp_path / "kicked.yaml", {**doc, "spec": {**doc["spec"], "source": {
        **doc["spec"]["source"], "serverId": 9011}}}))  # fmt: skip
    kicks = 0
    try:
        while worker.alive():
            wait_until(
                lambda: 9011 in servers.replica_ids(server) or not worker.alive(),
                timeout=120,
                what="the worker to register (again) as replica 9011",
            )
            if worker.alive():
                _kick(server, 9011)
                kicks += 1
                assert kicks <= 10, worker.log_text()[-3000:]
        code = worker.proc.wait(timeout=60)
    finally:
        worker.stop()
    log = worker.log_text()
    assert code == 3, log[-3000:]
    assert "another replica keeps connecting to the source with this capture's server_id 9011" in log
    assert "give this capture a unique spec.source.serverId" in log
    assert "Traceback" not in log
    assert kicks >= ClashWatch.CLASHES - 1, kicks


def test_minimal_row_metadata_decodes_through_the_schema_history(
    tmp_path: Path, start_source: Callable[..., PrivateServer]
) -> None:
    """Without FULL metadata the TABLE_MAP has no names: DDL parsed from the stream must carry the schema."""
    srv = start_source(23, binlog_row_metadata="MINIMAL")
    conn = srv.connect()
    uri = str(tmp_path / "changelog")
    doc = manifest("minimal", port=srv.port, sink={"type": "delta", "delta": {"uri": uri}}, start={"from": "latest"})
    worker = WorkerProcess(write_manifest(tmp_path / "minimal.yaml", doc))
    try:
        wait_until(
            lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        workload = Workload(conn, "mini", seed=5, ddl=True)
        workload.setup(n_tables=3)  # created after the start: the schema comes from the stream's DDL
        for _ in range(250):
            workload.step()
        wait_until(
            lambda: _caught_up(srv, uri, "mysqlcapture-minimal"),
            timeout=120,
            what="the change log to reach the binlog's end",
        )
    finally:
        code = worker.stop()
        rows = read_changelog(uri)
        tables = source_tables(conn, ["mini"])
        conn.close()
    assert code == 0, worker.log_text()
    assert "binlog_row_metadata is MINIMAL: decoding relies on the schema history alone" in worker.log_text()
    assert sum(1 for r in rows if r["type"] == "table-create") == 3 + sum(1 for r in rows if r["type"] == "table-drop")
    assert_replay_equals_source(replay(rows), tables)


def test_missing_grants_are_named(server: PrivateServer, tmp_path: Path) -> None:
    server.execute(
        "DROP USER IF EXISTS 'weak'@'127.0.0.1'",
        "CREATE USER 'weak'@'127.0.0.1' IDENTIFIED BY 'pw'",
        "GRANT SELECT ON *.* TO 'weak'@'127.0.0.1'",
    )
    doc = manifest("weak", port=server.port, sink={"type": "delta", "delta": {"uri": str(tmp_path / "x")}})
    doc["spec"]["source"]["user"] = "weak"
    result = run_cli("check", str(write_manifest(tmp_path / "weak.yaml", doc)), password="pw")
    assert result.returncode == 3
    assert "user 'weak' lacks REPLICATION SLAVE, REPLICATION CLIENT" in result.stderr


@pytest.mark.unit
def test_invalid_manifest_names_the_field(tmp_path: Path) -> None:
    doc = manifest("bad", port=70000, sink={"type": "delta", "delta": {"uri": str(tmp_path / "x")}})
    result = run_cli("run", str(write_manifest(tmp_path / "bad.yaml", doc)))
    assert result.returncode == 2
    assert "spec.source.port: Input should be less than or equal to 65535" in result.stderr


def test_old_and_partial_images_render_as_maxwell_does(server: PrivateServer, tmp_path: Path) -> None:
    """`old` compares rendered JSON (1 is not true), and a session's MINIMAL image renders only what it holds."""
    server.execute(
        "CREATE DATABASE IF NOT EXISTS img",
        "CREATE TABLE img.t (id INT PRIMARY KEY, j JSON, d DECIMAL(10,2), s VARCHAR(10))",
    )
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "img",
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        tables={"include": ["img.*"]},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "img.yaml", doc))
    try:
        wait_until(
            lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        server.execute(
            """INSERT INTO img.t VALUES (1, '{"a": 1}', 1.50, 'x')""",
            """UPDATE img.t SET j = '{"a": true}', s = 'y' WHERE id = 1""",
            "SET SESSION binlog_row_image = MINIMAL",
            "UPDATE img.t SET d = 2.75 WHERE id = 1",
            "UPDATE img.t SET s = 'z' WHERE id = 1",
        )
        wait_until(
            lambda: len([r for r in read_changelog(uri) if r["table"] == "t"]) >= 4, timeout=60, what="four row events"
        )
    finally:
        assert worker.stop() == 0, worker.log_text()
    rows = [r for r in read_changelog(uri) if r["table"] == "t"]
    assert [r["type"] for r in rows] == ["insert", "update", "update", "update"]
    assert json.loads(rows[1]["old"]) == {"j": {"a": 1}, "s": "x"}
    assert '"j":{"a":1}' in rows[1]["old"].replace(" ", "")
    assert json.loads(rows[2]["data"], parse_float=Decimal) == {"id": 1, "d": Decimal("2.75")}
    assert rows[2]["primary_key"] == "[1]"
    # Said once per table (two partial updates here), naming the setting and the mend.
    warned = [line for line in worker.log_text().splitlines() if "a row image without every column" in line]
    assert len(warned) == 1 and "--table img.t`" in warned[0], worker.log_text()


@pytest.fixture(scope="module")
def mariadb() -> Iterator[PrivateServer]:
    with servers.running("mariadb", 24) as srv:
        yield srv


# MariaDB only: every column type of MySQL 9.7 decodes, so MySQL has no type to refuse (its types are tested in
# test_type_fidelity.py).
@pytest.mark.mariadb
def test_unsupported_column_types_stop_only_for_included_tables(mariadb: PrivateServer, tmp_path: Path) -> None:
    server = mariadb
    """INET6 in an excluded table is ignored; in an included one the worker stops naming column and fix."""
    server.execute(
        "CREATE DATABASE IF NOT EXISTS uns",
        "CREATE TABLE uns.skipped_before (id INT PRIMARY KEY, addr INET6)",
        "CREATE TABLE uns.kept (id INT PRIMARY KEY, v INT)",
    )
    uri = str(tmp_path / "changelog")
    doc = manifest(
        "uns",
        port=server.port,
        sink={"type": "delta", "delta": {"uri": uri}},
        start={"from": "latest"},
        tables={"include": ["uns.*"], "exclude": ["uns.skipped*"]},
    )
    worker = WorkerProcess(write_manifest(tmp_path / "uns.yaml", doc))
    try:
        wait_until(
            lambda: (tmp_path / "changelog" / "_delta_log").exists() or not worker.alive(),
            timeout=60,
            what="the worker's first commit",
        )
        assert worker.alive(), worker.log_text()
        server.execute(
            "CREATE TABLE uns.skipped_after (id INT PRIMARY KEY, addr INET6)",
            "INSERT INTO uns.skipped_after VALUES (1, '::1')",
            "INSERT INTO uns.kept VALUES (1, 10)",
        )
        wait_until(
            lambda: any(r["table"] == "kept" for r in read_changelog(uri)), timeout=60, what="the row of uns.kept"
        )
        server.execute("CREATE TABLE uns.bad (id INT PRIMARY KEY, addr INET6)")
        wait_until(lambda: not worker.alive(), timeout=60, what="the worker to stop on an unsupported type")
    finally:
        code = worker.stop()
    assert code == 1
    assert "column uns.bad.addr has type 'inet6', which the capture cannot decode" in worker.log_text()
    assert {r["table"] for r in read_changelog(uri)} == {"kept"}
