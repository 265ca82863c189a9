"""The tables a data-changing statement logged as text writes to (mysqlcapture_api.schema.dml)."""

from __future__ import annotations

import pytest
from mysqlcapture_api.schema.ddl import apply_ddl
from mysqlcapture_api.schema.dml import written_tables
from mysqlcapture_api.schema.schema import Schema

pytestmark = pytest.mark.unit


def _schema() -> Schema:
    schema = Schema.empty()
    for sql, db in (
        ("CREATE DATABASE shop", ""),
        ("CREATE DATABASE percona", ""),
        ("CREATE TABLE shop.orders (id INT PRIMARY KEY, v INT)", "shop"),
        ("CREATE TABLE shop.items (id INT PRIMARY KEY, order_id INT)", "shop"),
        ("CREATE TABLE percona.checksums (db CHAR(64), tbl CHAR(64), crc CHAR(40))", "percona"),
    ):
        schema = apply_ddl(schema, sql, db).schema
    return schema


ORDERS, ITEMS, CHECKSUMS = ("shop", "orders"), ("shop", "items"), ("percona", "checksums")
CASES = [
    ("INSERT INTO orders VALUES (1, 1)", "shop", (ORDERS,)),
    ("insert low_priority ignore into `shop`.`orders` (id) values (2)", "", (ORDERS,)),
    ("INSERT orders SET id = 3", "shop", (ORDERS,)),
    ("/* app */ INSERT INTO shop.items SELECT id, id FROM shop.orders", "", (ITEMS,)),  # read, not written
    ("REPLACE DELAYED INTO Orders VALUES (1, 2)", "shop", (ORDERS,)),
    (
        "REPLACE INTO `percona`.`checksums` (db, tbl, crc) SELECT 'shop', 'orders', COUNT(*) FROM `shop`.`orders`",
        "shop",
        (CHECKSUMS,),
    ),
    ("UPDATE orders SET v = 2 WHERE id = 1", "shop", (ORDERS,)),
    ("UPDATE shop.orders o JOIN shop.items i ON i.order_id = o.id SET o.v = 0", "", (ORDERS, ITEMS)),
    ("DELETE FROM shop.items WHERE order_id IN (SELECT id FROM orders)", "shop", (ITEMS, ORDERS)),
    ("DELETE i FROM items i JOIN orders o ON o.id = i.order_id", "shop", (ITEMS, ORDERS)),
    ("WITH x AS (SELECT 1) UPDATE shop.orders SET v = 1", "", (ORDERS,)),
    ("SET STATEMENT max_statement_time=60 FOR DELETE FROM orders", "shop", (ORDERS,)),
    (
        "LOAD DATA LOCAL INFILE '/tmp/SQL_LOAD-1-2-3.data' REPLACE INTO TABLE `orders` FIELDS TERMINATED BY ','",
        "shop",
        (ORDERS,),
    ),
    ("LOAD DATA CONCURRENT INFILE 'x' IGNORE INTO TABLE shop.items (id, order_id)", "", (ITEMS,)),
    ("LOAD XML INFILE 'x' INTO TABLE shop.items", "", (ITEMS,)),
    ("LOAD INDEX INTO CACHE shop.items", "", ()),
    ("INSERT INTO shop.unknown VALUES (1)", "", ()),  # a table the schema does not hold
    ("SELECT * FROM orders", "shop", ()),
    ("SET @a = 1", "shop", ()),
    ("BEGIN", "shop", ()),
    ("ALTER TABLE orders ADD w INT", "shop", ()),
]


@pytest.mark.parametrize("sql,db,expected", CASES, ids=[c[0][:40] for c in CASES])
def test_written_tables(sql: str, db: str, expected: tuple[tuple[str, str], ...]) -> None:
    assert written_tables(sql, db or None, _schema()) == expected
