"""Foreign-key actions end to end: a randomized workload over cascading, SET NULL, self-referencing and composite
foreign keys (some sessions at foreign_key_checks=0), captured and compacted in two runs, on MariaDB, on MySQL 9.7
(which logs the child rows) and on MySQL with innodb_native_foreign_keys=ON (which does not): every compacted table
equals the source's `SELECT *` (the second run killed once first), and a cascaded child row's history ends at its
parent's change."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mysqlcapture_api.changelog import read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_compaction import job, targets
from mysqlcapture_dev.embedded.server import PrivateServer
from pyspark.sql import SparkSession

from tests import servers
from tests.spark.compare import assert_state_equals_source, current_tables, source_tables
from tests.support import WorkerProcess, manifest, wait_until, write_manifest

pytestmark = [pytest.mark.spark]


SCHEMA = [
    "CREATE DATABASE fk",
    "CREATE TABLE fk.customers (id INT PRIMARY KEY, code VARCHAR(10) NOT NULL UNIQUE, name VARCHAR(40))",
    "CREATE TABLE fk.orders (id INT PRIMARY KEY, customer INT, total DECIMAL(10,2), "
    "CONSTRAINT orders_customer FOREIGN KEY (customer) REFERENCES fk.customers (id) "
    "ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE fk.items (id INT PRIMARY KEY, order_id INT NOT NULL, line INT NOT NULL, qty INT, "
    "UNIQUE KEY (order_id, line), FOREIGN KEY (order_id) REFERENCES fk.orders (id) ON DELETE CASCADE)",
    "CREATE TABLE fk.shipments (id INT PRIMARY KEY, order_id INT, line INT, note VARCHAR(20), "
    "FOREIGN KEY (order_id, line) REFERENCES fk.items (order_id, line) ON DELETE CASCADE)",
    "CREATE TABLE fk.notes (id INT PRIMARY KEY, customer_code VARCHAR(10), body VARCHAR(40), "
    "FOREIGN KEY (customer_code) REFERENCES fk.customers (code) ON DELETE SET NULL ON UPDATE SET NULL)",
    "CREATE TABLE fk.categories (id INT PRIMARY KEY, parent INT, name VARCHAR(20), "
    "FOREIGN KEY (parent) REFERENCES fk.categories (id) ON DELETE CASCADE)",
    # Two tables whose rows reference each other in a ring, under a customer: a cascade comes back round.
    "CREATE TABLE fk.left_side (id INT PRIMARY KEY, customer INT, partner INT, "
    "FOREIGN KEY (customer) REFERENCES fk.customers (id) ON DELETE CASCADE ON UPDATE CASCADE)",
    "CREATE TABLE fk.right_side (id INT PRIMARY KEY, partner INT, "
    "FOREIGN KEY (partner) REFERENCES fk.left_side (id) ON DELETE CASCADE)",
    "ALTER TABLE fk.left_side ADD FOREIGN KEY (partner) REFERENCES fk.right_side (id) ON DELETE CASCADE",
]
TABLES = ("customers", "orders", "items", "shipments", "notes", "categories", "left_side", "right_side")
PKS = {("fk", t): ["id"] for t in TABLES}


@pytest.fixture(params=servers.FOREIGN_KEY_KINDS, scope="module")
def kind(request: pytest.FixtureRequest) -> Iterator[tuple[PrivateServer, bool]]:
    flavor, settings, logs_children = request.param
    with servers.running(flavor, 262, **settings) as srv:
        yield srv, logs_children


class Workload:
    """Random parents and children, and random deletes and key changes of parents (the actions' work)."""

    def __init__(self, srv: PrivateServer, seed: int) -> None:
        self.conn = srv.connect(autocommit=True)
        self.rng = random.Random(seed)
        self.next_id = 1
        self.depth: dict[int, int] = {}
        self.below: dict[int, int] = {}  # each category's children

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _ids(self, table: str) -> list[Any]:
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM fk.{table} ORDER BY id")
            return [r[0] for r in cur.fetchall()]

    def run(self, sql: str, *args: Any, checks: bool = True) -> None:
        with self.conn.cursor() as cur:
            if not checks:
                cur.execute("SET foreign_key_checks = 0")
            try:
                cur.execute(sql, args)
            finally:
                if not checks:
                    cur.execute("SET foreign_key_checks = 1")

    def grow(self) -> None:
        rng = self.rng
        customer = self._id()
        self.run("INSERT INTO fk.customers VALUES (%s, %s, %s)", customer, f"C{customer}", f"n{customer}")
        for _ in range(rng.randint(0, 3)):
            order = self._id()
            self.run("INSERT INTO fk.orders VALUES (%s, %s, %s)", order, customer, rng.randint(1, 9999) / 100)
            for line in range(rng.randint(0, 3)):
                self.run("INSERT INTO fk.items VALUES (%s, %s, %s, %s)", self._id(), order, line, rng.randint(1, 5))
                if rng.random() < 0.5:
                    self.run("INSERT INTO fk.shipments VALUES (%s, %s, %s, 's')", self._id(), order, line)
        for _ in range(rng.randint(0, 2)):
            self.run("INSERT INTO fk.notes VALUES (%s, %s, 'b')", self._id(), f"C{customer}")
        if rng.random() < 0.3:
            left, right = self._id(), self._id()
            self.run("INSERT INTO fk.left_side VALUES (%s, %s, NULL)", left, customer)
            self.run("INSERT INTO fk.right_side VALUES (%s, %s)", right, left)
            self.run("UPDATE fk.left_side SET partner = %s WHERE id = %s", right, left)
        # A category under another, in chains at most 6 deep: MySQL 9.7's SQL-layer cascade refuses a branching
        # tree's delete (error 6575 for a 7-row binary tree; a chain of 15 gets error 3008).
        alive = set(self._ids("categories"))
        shallow = [c for c, d in self.depth.items() if d < 6 and self.below.get(c, 0) < 1 and c in alive]
        parent = rng.choice(shallow) if shallow and rng.random() < 0.8 else None
        category = self._id()
        self.depth[category] = 0 if parent is None else self.depth[parent] + 1
        if parent is not None:
            self.below[parent] = self.below.get(parent, 0) + 1
        self.run("INSERT INTO fk.categories VALUES (%s, %s, 'c')", category, parent)

    def change(self) -> None:
        rng = self.rng
        kind = rng.choice(["delete-customer", "delete-customers", "move-customer", "recode", "delete-order",
                           "delete-category", "unchecked-delete", "update-name"])  # fmt: skip
        customers = self._ids("customers")
        if not customers:
            return
        if kind == "delete-customer":
            self.run("DELETE FROM fk.customers WHERE id = %s", rng.choice(customers))
        elif kind == "delete-customers":  # one statement, several parents
            gone = rng.sample(customers, min(3, len(customers)))
            self.run(f"DELETE FROM fk.customers WHERE id IN ({', '.join(['%s'] * len(gone))})", *gone)
        elif kind == "move-customer":  # ON UPDATE CASCADE of orders.customer
            self.run("UPDATE fk.customers SET id = %s WHERE id = %s", self._id(), rng.choice(customers))
        elif kind == "recode":  # ON UPDATE SET NULL of notes.customer_code
            self.run("UPDATE fk.customers SET code = CONCAT('R', id) WHERE id = %s", rng.choice(customers))
        elif kind == "delete-order" and self._ids("orders"):
            self.run("DELETE FROM fk.orders WHERE id = %s", rng.choice(self._ids("orders")))
        elif kind == "delete-category" and self._ids("categories"):  # the subtree goes (self-reference)
            self.run("DELETE FROM fk.categories WHERE id = %s", rng.choice(self._ids("categories")))
        elif kind == "unchecked-delete":  # foreign_key_checks=0: no action runs, the children stay
            self.run("DELETE FROM fk.customers WHERE id = %s", rng.choice(customers), checks=False)
        elif kind == "update-name":  # no referenced column changes: no action
            self.run("UPDATE fk.customers SET name = 'x' WHERE id = %s", rng.choice(customers))

    def transaction(self) -> None:
        """Several changes in one transaction: an action's rows are those its place in it sees."""
        with self.conn.cursor() as cur:
            cur.execute("BEGIN")
        self.grow()
        self.change()
        self.change()
        with self.conn.cursor() as cur:
            cur.execute("COMMIT")


def _caught_up(srv: PrivateServer, uri: str) -> bool:
    from mysqlcapture_worker.sinks.delta import DeltaSink

    end = srv.binlog_status().coordinate
    ckpt = DeltaSink(uri, app_id="mysqlcapture-fk").load_checkpoint()
    return ckpt is not None and ckpt.coordinate >= Coordinate(end.file, end.pos)


def _killed_after_two_merges(spark: SparkSession, uri: str, output: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that dies once two tables took its MERGE: the rerun finds the others' rows as they were at its
    start (the expansion reads a table a killed run wrote past by time travel), and applies each action once."""
    merge, done = targets.merge, []

    def dying(*args: Any, **kwargs: Any) -> None:
        done.append(1)
        if len(done) > 2:
            raise RuntimeError("killed")
        merge(*args, **kwargs)

    monkeypatch.setattr(targets, "merge", dying)
    with pytest.raises(RuntimeError, match="killed"):
        job.run(spark, changelog=uri, output=output)
    monkeypatch.setattr(targets, "merge", merge)


def test_compacted_tables_equal_the_source_after_every_action(
    spark: SparkSession, kind: tuple[PrivateServer, bool], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    srv, logs_children = kind
    uri, output = str(tmp_path / "changelog"), str(tmp_path / "compacted")
    doc = manifest("fk", port=srv.port, server_id=9262, sink={"type": "delta", "delta": {"uri": uri}},
                   start={"from": "latest"}, flush={"maxIntervalMs": 200})  # fmt: skip
    worker = WorkerProcess(write_manifest(tmp_path / "fk.yaml", doc))
    try:
        wait_until(lambda: worker.running() and "capture starting at" in worker.log_text(), timeout=120, what="start")
        srv.execute(*SCHEMA)
        workload = Workload(srv, seed=31)
        for _ in range(25):
            workload.grow()
        for run in range(2):  # two compaction runs, the second incremental, killed once first
            for step in range(40):
                workload.transaction() if step % 4 == 0 else (workload.change() if step % 2 else workload.grow())
            wait_until(lambda: worker.running() and _caught_up(srv, uri), timeout=180, what="the change log")
            if run == 1:
                _killed_after_two_merges(spark, uri, output, monkeypatch)
            job.run(spark, changelog=uri, output=output)
    finally:
        assert worker.stop() == 0, worker.log_text()[-3000:]
    conn = srv.connect()
    compared = assert_state_equals_source(current_tables(output), source_tables(conn, ["fk"]), PKS)
    assert compared > 100
    log = read_delta(uri).to_pylist()
    actions = [r for r in log if r["type"] == "referential-action"]
    if logs_children:
        assert actions == [], "MySQL 9.7 logs the child rows: nothing to add"
    else:
        assert {r["table"] for r in actions} >= {"orders", "notes", "categories"}
        assert "Fix: add" not in worker.log_text()  # every parent is captured
    # A cascaded child row's history ends in its deletion at its parent's change (the action's ordering key).
    history = read_delta(targets.Target(output, "fk", "orders").history).to_pylist()
    keys = {r["order_key"] for r in actions if r["table"] == "orders"} if actions else set()
    listed = [(v["order_key"], v["pk"]) for v in history]
    assert len(listed) == len(set(listed)), "a version written twice (the killed run's rerun applies each once)"
    deletes = [v for v in history if v["type"] == "delete"]
    assert deletes, "the workload deleted orders"
    # Each order's last version is its deletion exactly when the source no longer has it.
    last: dict[str, dict[str, Any]] = {}
    for v in sorted(history, key=lambda v: v["order_key"]):
        last[v["pk"]] = v
    there = {f"[{r[0]}]" for r in srv.query("SELECT id FROM fk.orders")}
    assert {pk for pk, v in last.items() if v["type"] != "delete" and not v["moved_away"]} == there
    if actions:
        cascaded = [v for v in deletes if v["order_key"] in keys]
        assert cascaded and all(v["before"] is not None and v["before"]["id"] is not None for v in cascaded)
