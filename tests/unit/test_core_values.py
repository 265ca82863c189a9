"""Positions, the transaction buffer and table filters: the worker's small immutable pieces."""

from __future__ import annotations

import pytest
from mysqlcapture_api.changelog import pk_hash
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.changes import ChangeEvent
from mysqlcapture_worker.engine.txnbuffer import TxnBuffer
from mysqlcapture_worker.filters import TableFilter
from mysqlcapture_worker.positions import Position

pytestmark = pytest.mark.unit


def _event(i: int) -> ChangeEvent:
    return ChangeEvent(
        order_key=0,
        database="shop",
        table="orders",
        type="insert",
        ts=1,
        server_id=1,
        thread_id=7,
        xid=None,
        commit=False,
        gtid="0-1-5",
        binlog_file="mysql-bin.000001",
        binlog_pos=100,
        event_pos=200,
        row_index=i,
        pk_json=f"[{i}]",
        pk_columns=("id",),
        data_json=f'{{"id":{i}}}',
        old_json=None,
    )


def test_position_round_trips_through_json() -> None:
    pos = Position(
        server_id=3,
        coordinate=Coordinate("mysql-bin.000002", 1234),
        gtid_set="0-3-9",
        txn_index=5,
        order_key=99,
        last_heartbeat=1700000000000,
        schema_version=4,
        server_identity="mariadb:0:3",
    )
    assert Position.from_json(pos.to_json()) == pos


def test_position_methods_return_new_values() -> None:
    pos = Position(server_id=1, coordinate=Coordinate("f.000001", 4))
    inside = pos.inside(10, 42)
    assert (pos.txn_index, pos.order_key) == (0, 0)
    assert (inside.txn_index, inside.order_key, inside.coordinate) == (10, 42, Coordinate("f.000001", 4))
    after = inside.at_boundary(Coordinate("f.000002", 330), gtid_set="0-1-3")
    assert (after.coordinate, after.txn_index, after.gtid_set, after.order_key) == (
        Coordinate("f.000002", 330),
        0,
        "0-1-3",
        42,
    )
    assert str(inside) == "f.000001:4+10 server_id=1"


@pytest.mark.parametrize(
    "memory_rows,total", [(3, 10), (100, 10), (1, 1), (4, 0)], ids=["spills", "in-memory", "single", "empty"]
)
def test_txn_buffer_returns_every_event_in_order(memory_rows: int, total: int) -> None:
    buf = TxnBuffer(memory_rows)
    for i in range(total):
        buf.append(_event(i))
    assert len(buf) == total
    assert buf.spilled == (total // memory_rows) * memory_rows
    drained = list(buf.drain())
    assert [e.row_index for e in drained] == list(range(total))
    assert [e.data_json for e in drained] == [f'{{"id":{i}}}' for i in range(total)]
    assert len(buf) == 0


@pytest.mark.parametrize(
    "include,exclude,database,table,expected",
    [
        (["*.*"], [], "shop", "orders", True),
        (["shop.*"], [], "crm", "users", False),
        (["shop.*"], ["shop.tmp_*"], "shop", "tmp_1", False),
        (["shop.ord?rs"], [], "shop", "orders", True),
        (["*.*"], [], "mysqlcapture", "heartbeats", False),  # the worker's own metadata database
        (["*.*"], [], "mysql", "user", False),
    ],
    ids=["all", "other-db", "excluded", "glob-char", "internal-db", "system-db"],
)
def test_table_filter(include: list[str], exclude: list[str], database: str, table: str, expected: bool) -> None:
    assert TableFilter(include, exclude, "mysqlcapture").includes(database, table) is expected


def test_pk_hash_of_a_row_event() -> None:
    ev = _event(0)
    assert ev.pk_hash == pk_hash("shop", "orders", "[0]")
    assert len(ev.pk_hash or "") == 16
