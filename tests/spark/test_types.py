"""The type table (README "Compaction"), ALTER renames, added columns' defaults and the duplicate check: no server."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from mysqlcapture_api.changelog import CHANGELOG_SCHEMA, PARTITION_BY
from mysqlcapture_api.schema.ddl import apply_ddl
from mysqlcapture_api.schema.schema import Schema
from mysqlcapture_compaction import images, lineage, repeats, types
from mysqlcapture_compaction.definitions import column_renames

pytestmark = pytest.mark.unit

# (column definition, Spark type, table values that need `_cdc_raw`)
TYPE_TABLE = [
    ("tinyint", "tinyint", False),
    ("tinyint unsigned", "smallint", False),
    ("smallint", "smallint", False),
    ("smallint unsigned", "int", False),
    ("mediumint", "int", False),
    ("mediumint unsigned", "int", False),
    ("int", "int", False),
    ("int unsigned", "bigint", False),
    ("bigint", "bigint", False),
    ("bigint unsigned", "decimal(20,0)", False),
    ("decimal(10,2)", "decimal(10,2)", False),
    ("decimal(38,38)", "decimal(38,38)", False),
    ("decimal(65,30)", "string", False),
    ("float", "float", False),
    ("double", "double", False),
    ("bit(1)", "bigint", False),
    ("bit(63)", "bigint", False),
    ("bit(64)", "decimal(20,0)", False),
    ("year", "smallint", False),
    ("date", "date", True),
    ("datetime(6)", "timestamp_ntz", True),
    ("timestamp(3) NULL", "timestamp", True),
    ("time(6)", "bigint", False),
    ("varchar(10) CHARACTER SET latin1", "string", False),
    ("text", "string", False),
    ("enum('a','b')", "string", False),
    ("set('a','b')", "array<string>", False),
    ("binary(4)", "binary", False),
    ("varbinary(4)", "binary", False),
    ("blob", "binary", False),
    ("json", "string", False),
    ("geometry", "string", False),
    ("point", "string", False),
    ("vector(3)", "array<float>", False),
]


@pytest.mark.parametrize(("ddl", "spark", "lossy"), TYPE_TABLE, ids=[t[0] for t in TYPE_TABLE])
def test_each_source_type_has_its_spark_type(ddl: str, spark: str, lossy: bool) -> None:
    schema = apply_ddl(Schema.empty(), f"CREATE TABLE d.t (id int PRIMARY KEY, v {ddl})", "d").schema
    column = schema.table("d", "t").column("v")  # type: ignore[union-attr]
    found = types.spark_column(column)
    assert (found.table.simpleString(), found.lossy) == (spark, lossy)


def test_alter_statements_name_their_renames() -> None:
    assert column_renames("ALTER TABLE t CHANGE COLUMN label title VARCHAR(200), DROP COLUMN gone") == {
        "title": "label"
    }
    assert column_renames("alter table t rename column `a b` to c, change x y int, change p p int") == {
        "c": "a b",
        "y": "x",
    }
    assert column_renames("ALTER TABLE t ADD COLUMN `change` int") == {}


def test_lineage_follows_renames_through_alters() -> None:
    cols = [["id", "a", "b"], ["id", "x", "b"], ["id", "x", "b", "c"], ["id", "b", "c"]]
    sqls = ["ALTER TABLE t RENAME COLUMN a TO x", "ALTER TABLE t ADD c INT", "ALTER TABLE t DROP x"]
    assert lineage.lineage(cols, sqls) == {"id": "id", "b": "b", "c": None}
    assert lineage.lineage(cols[:2], sqls[:1]) == {"id": "id", "x": "a", "b": "b"}
    # A DROP and an ADD in one statement are not a rename, whatever the names.
    assert lineage.lineage([["id", "a"], ["id", "z"]], ["ALTER TABLE t DROP a, ADD z INT"]) == {"id": "id", "z": None}


def test_constant_defaults_are_parsed_and_implicit_ones_derived() -> None:
    sql = (
        "CREATE TABLE d.t (id int PRIMARY KEY, a int NOT NULL DEFAULT -7, b varchar(5) DEFAULT 'it''s', "
        "c datetime DEFAULT CURRENT_TIMESTAMP, d int DEFAULT (1 + 2), e enum('x','y') NOT NULL, f date NOT NULL, "
        "g decimal(5,2) DEFAULT 1.50, h int DEFAULT NULL)"
    )
    table = apply_ddl(Schema.empty(), sql, "d").schema.table("d", "t")
    assert table is not None
    defaults = {c.name: c.default for c in table.columns}
    assert defaults == {"id": None, "a": "-7", "b": "it's", "c": None, "d": None, "e": None, "f": None,
                        "g": "1.50", "h": None}  # fmt: skip
    assert images.implicit_default(table.column("e")) == "x"
    assert images.implicit_default(table.column("f")) == "0000-00-00"
    assert images.implicit_default(table.column("a")) == "0"


def _file(uri: str, table: str, keys: range, positions: range) -> None:
    rows = [
        {"order_key": k, "server_id": 1, "binlog_file": "b.000001", "binlog_pos": p, "row_index": 0, "event_pos": p,
         "commit": True, "ts": 0, "type": "insert", "database": "d", "table": table}
        for k, p in zip(keys, positions, strict=True)
    ]  # fmt: skip
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=CHANGELOG_SCHEMA), mode="append", partition_by=PARTITION_BY)


def test_duplicates_are_suspected_only_where_a_table_goes_back_in_the_binlog(tmp_path: Path) -> None:
    uri = str(tmp_path / "log")
    _file(uri, "a", range(1, 10, 2), range(100, 200, 20))
    _file(uri, "b", range(2, 11, 2), range(110, 210, 20))  # interleaved with a's keys: another table, fine
    _file(uri, "a", range(11, 15), range(300, 304))
    assert not repeats.duplicates_possible(uri, 2, -1)
    _file(uri, "a", range(15, 18), range(180, 183))  # a re-emission: back to positions a already had
    assert repeats.duplicates_possible(uri, 3, 14)
    assert not repeats.duplicates_possible(uri, 2, 14)
