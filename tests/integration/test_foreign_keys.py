"""Foreign-key actions on every server kind: the change log holds what they did to the child rows.

MariaDB, and MySQL with innodb_native_foreign_keys=ON, run ON DELETE / ON UPDATE actions inside InnoDB and log
only the parent's rows; the worker then writes a `referential-action` event after them. MySQL 9.6+ by default
logs the child rows itself (flagged USE_SQL_FOREIGN_KEY_F): no event is added there, nothing is applied twice.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from mysqlcapture_dev.embedded.server import PrivateServer

from tests import servers
from tests.support import WorkerProcess, manifest, read_changelog, run_cli, wait_until, write_manifest

SCHEMA = [
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE, name VARCHAR(40))",
    "CREATE TABLE shop.orders (id INT PRIMARY KEY, customer INT, note VARCHAR(20), "
    "CONSTRAINT orders_customer FOREIGN KEY (customer) REFERENCES shop.customers (id) "
    "ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE shop.items (order_id INT NOT NULL, line INT NOT NULL, qty INT, PRIMARY KEY (order_id, line), "
    "FOREIGN KEY (order_id) REFERENCES shop.orders (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE shop.notes (id INT PRIMARY KEY, customer_code VARCHAR(10), "
    "FOREIGN KEY (customer_code) REFERENCES shop.customers (code) ON DELETE SET NULL ON UPDATE SET NULL)",
]


@pytest.fixture(params=servers.FOREIGN_KEY_KINDS, scope="module")
def kind(request: pytest.FixtureRequest) -> Iterator[tuple[PrivateServer, bool]]:
    flavor, settings, logs_children = request.param
    with servers.running(flavor, 261, **settings) as srv:
        yield srv, logs_children


def _events(uri: str) -> list[dict[str, Any]]:
    return [e for e in read_changelog(uri) if e["database"] == "shop"]


def test_the_change_log_holds_every_action_once(kind: tuple[PrivateServer, bool], tmp_path: Path) -> None:
    srv, logs_children = kind
    srv.execute("DROP DATABASE IF EXISTS shop", *SCHEMA)
    srv.execute(
        "INSERT INTO shop.customers VALUES (1, 'A', 'ann'), (2, 'B', 'bob'), (3, 'C', 'cy')",
        "INSERT INTO shop.orders VALUES (10, 1, 'x'), (11, 1, 'y'), (12, 2, 'z')",
        "INSERT INTO shop.items VALUES (10, 1, 5), (10, 2, 6), (11, 1, 7), (12, 1, 8)",
        "INSERT INTO shop.notes VALUES (100, 'A'), (101, 'B'), (102, 'C')",
    )
    uri = str(tmp_path / "changelog")
    path = write_manifest(
        tmp_path / "capture.yaml",
        manifest("fk", port=srv.port, server_id=9261, sink={"type": "delta", "delta": {"uri": uri}},
                 start={"from": "latest"}),
    )  # fmt: skip
    worker = WorkerProcess(path)
    try:
        wait_until(lambda: worker.running() and "capture starting at" in worker.log_text(), timeout=120, what="start")
        srv.execute(
            "DELETE FROM shop.customers WHERE id = 1",  # orders 10, 11 and their items go; note 100 loses its code
            "UPDATE shop.customers SET id = 20, code = 'BB' WHERE id = 2",  # order 12 moves; note 101's code: NULL
            "UPDATE shop.customers SET name = 'cyd' WHERE id = 3",  # no referenced column changes: no action
            "SET foreign_key_checks = 0",
            "DELETE FROM shop.customers WHERE id = 3",  # no action runs: order-less, note 102 keeps 'C'
            "SET foreign_key_checks = 1",
            "INSERT INTO shop.customers VALUES (9, 'Z', 'end')",
        )
        wait_until(
            lambda: worker.running() and any(e["data"] and '"Z"' in e["data"] for e in _events(uri)),
            timeout=120,
            what="the last insert in the change log",
        )
    finally:
        worker.stop()
    events = _events(uri)
    actions = [e for e in events if e["type"] == "referential-action"]
    children = [e for e in events if e["table"] != "customers" and e["type"] in ("update", "delete")]
    if logs_children:
        assert actions == []
        assert sorted((e["table"], e["type"]) for e in children) == sorted(
            [("orders", "delete")] * 2 + [("items", "delete")] * 3 + [("notes", "update")] * 2
            + [("orders", "update")]
        )  # fmt: skip
        return
    assert children == []
    got = [(e["table"], json.loads(e["data"])) for e in actions]
    assert got == [
        ("notes", {"constraint": "notes_ibfk_1", "on": "delete", "action": "SET NULL",
                   "parent": {"database": "shop", "table": "customers", "columns": ["code"]},
                   "columns": ["customer_code"], "keys": [{"old": ["A"]}]}),
        ("orders", {"constraint": "orders_customer", "on": "delete", "action": "CASCADE",
                    "parent": {"database": "shop", "table": "customers", "columns": ["id"]},
                    "columns": ["customer"], "keys": [{"old": [1]}]}),
        ("notes", {"constraint": "notes_ibfk_1", "on": "update", "action": "SET NULL",
                   "parent": {"database": "shop", "table": "customers", "columns": ["code"]},
                   "columns": ["customer_code"], "keys": [{"old": ["B"], "new": ["BB"]}]}),
        ("orders", {"constraint": "orders_customer", "on": "update", "action": "CASCADE",
                    "parent": {"database": "shop", "table": "customers", "columns": ["id"]},
                    "columns": ["customer"], "keys": [{"old": [2], "new": [20]}]}),
    ]  # fmt: skip
    parents = [e for e in events if e["table"] == "customers" and e["type"] in ("update", "delete")]
    # Each action right after its parent's row event, in the same transaction.
    for action in actions:
        parent = max((p for p in parents if p["order_key"] < action["order_key"]), key=lambda p: p["order_key"])
        assert (action["binlog_file"], action["binlog_pos"]) == (parent["binlog_file"], parent["binlog_pos"])


def _status(worker: WorkerProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port()}/status", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def test_check_and_status_name_the_actions_the_server_does_not_log(
    kind: tuple[PrivateServer, bool], tmp_path: Path
) -> None:
    srv, logs_children = kind
    srv.execute("DROP DATABASE IF EXISTS shop", *SCHEMA)
    uri = str(tmp_path / "changelog")
    # shop.customers left out: the actions it runs on shop.orders and shop.notes reach no captured parent event.
    tables = {"include": ["shop.orders", "shop.items", "shop.notes"]}
    partial = manifest("fkc", port=srv.port, server_id=9263, sink={"type": "delta", "delta": {"uri": uri}},
                       start={"from": "latest"}, tables=tables)  # fmt: skip
    checked = run_cli("check", str(write_manifest(tmp_path / "partial.yaml", partial)))
    assert checked.returncode == 0, checked.stderr
    lines = [line for line in checked.stdout.splitlines() if line.startswith("foreign key")]
    server = srv.version
    how = "logs the rows" if logs_children else "does not log the rows"
    assert lines == [
        f"foreign key shop.items.items_ibfk_1 (ON DELETE CASCADE, ON UPDATE CASCADE) from shop.orders: {server} {how} "
        + ("these actions change" if logs_children else "these actions change; the worker writes a referential-action "
           "event after each change of shop.orders, and compaction applies it"),
        "foreign key shop.notes.notes_ibfk_1 (ON DELETE SET NULL, ON UPDATE SET NULL) references shop.customers, which "
        "the capture does not include: the rows these actions change in shop.notes are not in the change log. Fix: "
        "add shop.customers to spec.tables",
        "foreign key shop.orders.orders_customer (ON DELETE CASCADE, ON UPDATE CASCADE) references shop.customers, "
        "which the capture does not include: the rows these actions change in shop.orders are not in the change "
        "log. Fix: add shop.customers to spec.tables",
    ]  # fmt: skip
    whole = manifest("fks", port=srv.port, server_id=9264, sink={"type": "delta", "delta": {"uri": uri + "-all"}},
                     start={"from": "latest"})  # fmt: skip
    worker = WorkerProcess(write_manifest(tmp_path / "whole.yaml", whole))
    try:
        status = wait_until(
            lambda: (
                worker.running()
                and "capture starting at" in worker.log_text()
                and (s := _status(worker))["unlogged_foreign_keys"] is not None
                and s
            ),
            timeout=120,
            what="/status with the schema",
        )
        srv.execute("ALTER TABLE shop.items ADD COLUMN extra INT")  # the list follows the schema (any DDL)
    finally:
        worker.stop()
    expected = (
        [] if logs_children else ["shop.items.items_ibfk_1", "shop.notes.notes_ibfk_1", "shop.orders.orders_customer"]
    )
    assert status["unlogged_foreign_keys"] == expected
    if not logs_children:
        assert "does not log the rows these actions change" in worker.log_text()


def test_set_default_refuses_the_parents_change_as_restrict_does(kind: tuple[PrivateServer, bool]) -> None:
    """InnoDB takes ON DELETE / ON UPDATE SET DEFAULT in a definition and then refuses the change (no action, so
    nothing for the capture to write: model.CHANGING_ACTIONS leaves it out)."""
    srv, _ = kind
    srv.execute(
        "DROP DATABASE IF EXISTS sd",
        "CREATE DATABASE sd",
        "CREATE TABLE sd.p (id INT PRIMARY KEY)",
        "CREATE TABLE sd.c (id INT PRIMARY KEY, pid INT DEFAULT 0, FOREIGN KEY (pid) REFERENCES sd.p (id) "
        "ON DELETE SET DEFAULT ON UPDATE SET DEFAULT)",
        "INSERT INTO sd.p VALUES (0), (1)",
        "INSERT INTO sd.c VALUES (1, 1)",
    )
    for change in ("DELETE FROM sd.p WHERE id = 1", "UPDATE sd.p SET id = 2 WHERE id = 1"):
        with pytest.raises(pymysql.err.IntegrityError, match="1451"):
            srv.execute(change)
    assert srv.query("SELECT id, pid FROM sd.c") == [(1, 1)]
