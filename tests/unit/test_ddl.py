"""The DDL parser: statements from binlog Query events applied to a Schema, with Maxwell's DDL events."""

from __future__ import annotations

from typing import Any

import pytest
from mysqlcapture_api.schema.ddl import DdlParseError, UnsupportedColumnTypeError, apply_ddl
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_api.schema.schema import Schema

pytestmark = pytest.mark.unit

UTF8 = "utf8mb4"


def col(name: str, type_: str, **kw: Any) -> ColumnDef:
    """A ColumnDef with the charset character types get in a utf8mb4 table unless said otherwise."""
    if type_ in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"):
        kw.setdefault("charset", UTF8)
    if type_ in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        kw.setdefault("charset", "binary")
    if type_ in ("time", "datetime", "timestamp"):
        kw.setdefault("column_length", 0)
    if type_ in ("char", "binary", "bit"):
        kw.setdefault("length", 1)
    return ColumnDef(name, type_, **kw)


def base_schema() -> Schema:
    return Schema.empty(UTF8).with_database("test").with_database("shop", "latin1")


def run(*statements: str, schema: Schema | None = None, default_db: str = "test") -> tuple[Schema, list[Any]]:
    schema = schema or base_schema()
    events: list[Any] = []
    for sql in statements:
        result = apply_ddl(schema, sql, default_db)
        schema, events = result.schema, events + result.events
    return schema, events


def table_after(*statements: str, db: str = "test", name: str = "t") -> TableDef:
    schema, _ = run(*statements)
    table = schema.table(db, name)
    assert table is not None, f"{db}.{name} missing after {statements}"
    return table


# -- CREATE TABLE: one column definition at a time ------------------------------------------------
COLUMN_CASES = [
    ("int", "c int", col("c", "int")),
    ("integer-alias", "c integer(11)", col("c", "int")),
    ("int-unsigned", "c int(10) unsigned", col("c", "int", signed=False)),
    ("zerofill-is-unsigned", "c smallint zerofill", col("c", "smallint", signed=False)),
    ("tinyint-bool", "c bool", col("c", "tinyint")),
    ("int1", "c int1", col("c", "tinyint")),
    ("int2", "c int2", col("c", "smallint")),
    ("int3", "c int3", col("c", "mediumint")),
    ("middleint", "c middleint", col("c", "mediumint")),
    ("int8", "c int8", col("c", "bigint")),
    ("bigint-not-null", "c bigint not null", col("c", "bigint", nullable=False)),
    ("serial", "c serial", col("c", "bigint", signed=False, nullable=False)),
    ("decimal", "c decimal(12,4)", col("c", "decimal", precision=12, scale=4)),
    ("decimal-default", "c decimal", col("c", "decimal", precision=10, scale=0)),
    ("numeric", "c numeric(5)", col("c", "decimal", precision=5, scale=0)),
    ("dec-fixed", "c fixed(7,2) unsigned", col("c", "decimal", precision=7, scale=2, signed=False)),
    ("float", "c float", col("c", "float")),
    ("float-p-small", "c float(20)", col("c", "float")),
    ("float-p-large", "c float(30)", col("c", "double")),
    ("float-m-d", "c float(10,2)", col("c", "float")),
    ("double-precision", "c double precision", col("c", "double")),
    ("real", "c real", col("c", "double")),
    ("bit", "c bit", col("c", "bit")),
    ("bit-n", "c bit(12)", col("c", "bit", length=12)),
    ("date", "c date", col("c", "date")),
    ("time-fsp", "c time(3)", col("c", "time", column_length=3)),
    ("datetime", "c datetime", col("c", "datetime")),
    (
        "timestamp-6",
        "c timestamp(6) not null default current_timestamp(6) on update current_timestamp(6)",
        col("c", "timestamp", column_length=6, nullable=False),
    ),
    ("year", "c year(4)", col("c", "year")),
    ("char-default-length", "c char", col("c", "char")),
    ("char-n", "c char(10)", col("c", "char", length=10)),
    ("character-varying", "c character varying(10)", col("c", "varchar")),
    ("varchar-charset-string", "c varchar(255) charset 'latin1'", col("c", "varchar", charset="latin1")),
    ("varchar-character-set", "c varchar(5) character set utf8", col("c", "varchar", charset="utf8mb3")),
    ("collate-implies-charset", "c varchar(5) collate latin1_bin", col("c", "varchar", charset="latin1")),
    ("binary-attribute-keeps-charset", "c char(5) binary", col("c", "char", length=5)),
    ("national-varchar", "c national varchar(4)", col("c", "varchar", charset="utf8mb3")),
    ("nchar", "c nchar(3)", col("c", "char", length=3, charset="utf8mb3")),
    ("ascii-attribute", "c varchar(3) ascii", col("c", "varchar", charset="latin1")),
    ("unicode-attribute", "c varchar(3) unicode", col("c", "varchar", charset="ucs2")),
    ("varchar-charset-binary", "c varchar(10) character set binary", col("c", "varbinary")),
    ("char-charset-binary", "c char(4) charset binary", col("c", "binary", length=4)),
    ("text-charset-binary", "c text charset binary", col("c", "blob")),
    ("tinytext", "c tinytext", col("c", "tinytext")),
    ("text", "c text", col("c", "text")),
    ("text-m-utf8mb4", "c text(63)", col("c", "tinytext")),
    ("text-m-utf8mb4-grows", "c text(64)", col("c", "text")),
    ("text-m-latin1", "c text(255) charset latin1", col("c", "tinytext", charset="latin1")),
    ("text-m-large", "c text(70000) charset latin1", col("c", "mediumtext", charset="latin1")),
    ("mediumtext", "c mediumtext", col("c", "mediumtext")),
    ("long-varchar", "c long varchar", col("c", "mediumtext")),
    ("long", "c long", col("c", "mediumtext")),
    ("longtext", "c longtext", col("c", "longtext")),
    ("binary", "c binary(16)", col("c", "binary", length=16)),
    ("varbinary", "c varbinary(200)", col("c", "varbinary")),
    ("blob-m", "c blob(300)", col("c", "blob")),
    ("blob-m-tiny", "c blob(255)", col("c", "tinyblob")),
    ("long-varbinary", "c long varbinary", col("c", "mediumblob")),
    ("longblob", "c longblob not null", col("c", "longblob", nullable=False)),
    ("enum", "c enum('a','b')", col("c", "enum", enum_values=("a", "b"))),
    (
        "enum-quotes-commas",
        r"c enum('it''s','a,b','back\\slash', 'x\'y')",
        col("c", "enum", enum_values=("it's", "a,b", "back\\slash", "x'y")),
    ),
    ("enum-trailing-space", "c enum('a  ', 'b')", col("c", "enum", enum_values=("a", "b"))),
    (
        "set-charset",
        "c set('x','y') character set latin1 not null default 'x'",
        col("c", "set", enum_values=("x", "y"), charset="latin1", nullable=False),
    ),
    ("json", "c json", col("c", "json")),
    ("longtext-json-check", "c longtext check (json_valid(c))", col("c", "json")),
    ("longtext-other-check", "c longtext check (c <> '')", col("c", "longtext")),
    ("geometry", "c geometry not null", col("c", "geometry", nullable=False)),
    ("point-srid", "c point srid 4326", col("c", "point")),
    ("geometrycollection", "c geometrycollection", col("c", "geometrycollection")),
    ("multipolygon", "c multipolygon", col("c", "multipolygon")),
    ("generated-virtual", "c int generated always as (a + 1) virtual", col("c", "int", generated=True)),
    ("generated-stored", "c varchar(10) as (concat(a, 'x')) stored", col("c", "varchar", generated=True)),
    ("generated-persistent", "c int as (a*2) persistent", col("c", "int", generated=True)),
    ("auto-increment-not-null", "c int auto_increment unique", col("c", "int", nullable=False)),
    (
        "everything",
        "c varchar(20) character set latin1 collate latin1_general_ci not null default 'x' comment 'hi' invisible",
        col("c", "varchar", charset="latin1", nullable=False),
    ),
    ("default-expression", "c int default (1 + 2) comment 'x'", col("c", "int")),
    ("default-negative", "c int default -1 not null", col("c", "int", nullable=False)),
    ("default-bit", "c bit(2) default b'01'", col("c", "bit", length=2)),
    ("default-introducer", "c varchar(3) default _utf8mb4'abc' collate utf8mb4_bin", col("c", "varchar")),
    ("references", "c int references other (id) on delete set null on update cascade", col("c", "int")),
    ("column-format", "c int column_format fixed storage disk", col("c", "int")),
    ("compressed", "c blob compressed", col("c", "blob")),
    ("backquoted", "`select` int", col("select", "int")),
    ("backquoted-with-backquote", "`we``ird` int", col("we`ird", "int")),
]


@pytest.mark.parametrize(
    "definition,expected", [(d, e) for _, d, e in COLUMN_CASES], ids=[i for i, _, _ in COLUMN_CASES]
)
def test_column_definition(definition: str, expected: ColumnDef) -> None:
    table = table_after(f"CREATE TABLE t (a int, {definition})")
    assert table.columns[1] == expected


# -- CREATE TABLE: keys, options, charsets -------------------------------------------------------
CREATE_CASES = [
    (
        "inline-pk",
        "CREATE TABLE t (id int primary key, v int)",
        TableDef("test", "t", (col("id", "int", nullable=False), col("v", "int")), ("id",)),
    ),
    (
        "table-pk-composite-lengths",
        "CREATE TABLE t (a varchar(10), b int, PRIMARY KEY (a(5), B DESC))",
        TableDef("test", "t", (col("a", "varchar", nullable=False), col("b", "int", nullable=False)), ("a", "b")),
    ),
    (
        "constraint-pk-using",
        "CREATE TABLE t (a int, CONSTRAINT pk PRIMARY KEY USING BTREE (a) COMMENT 'x')",
        TableDef("test", "t", (col("a", "int", nullable=False),), ("a",)),
    ),
    (
        "indexes-skipped",
        "CREATE TABLE t (a int, b text, g point not null, KEY k (a), INDEX (a, b(10)), UNIQUE KEY u (a), "
        "FULLTEXT KEY f (b), SPATIAL INDEX s (g), "
        "CONSTRAINT fk FOREIGN KEY (a) REFERENCES o (id) ON DELETE CASCADE, "
        "CONSTRAINT ck CHECK (a > 0), CHECK (a < 10))",
        TableDef("test", "t", (col("a", "int"), col("b", "text"), col("g", "point", nullable=False))),
    ),
    (
        "table-charset",
        "CREATE TABLE t (a varchar(1), b varchar(1) charset utf8mb4) DEFAULT CHARSET=latin1",
        TableDef("test", "t", (col("a", "varchar", charset="latin1"), col("b", "varchar")), (), "latin1"),
    ),
    (
        "table-collate-only",
        "CREATE TABLE t (a text) ENGINE=InnoDB COLLATE=latin2_bin ROW_FORMAT=DYNAMIC",
        TableDef("test", "t", (col("a", "text", charset="latin2"),), (), "latin2"),
    ),
    (
        "database-charset-inherited",
        "CREATE TABLE shop.t (a varchar(1))",
        TableDef("shop", "t", (col("a", "varchar", charset="latin1"),), (), "latin1"),
    ),
    (
        "json-keeps-utf8mb4",
        "CREATE TABLE shop.t (j json)",
        TableDef("shop", "t", (col("j", "json"),), (), "latin1"),
    ),
    (
        "options-and-partitions",
        "CREATE TABLE t (a int) ENGINE = InnoDB AUTO_INCREMENT=5 COMMENT 'x' /*!50100 PARTITION BY HASH (a) "
        "PARTITIONS 4 */",
        TableDef("test", "t", (col("a", "int"),)),
    ),
    (
        "mysqldump-style",
        "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n"
        "  `name` varchar(64) COLLATE utf8mb4_bin "
        "DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `name` (`name`)\n) ENGINE=InnoDB AUTO_INCREMENT=3 "
        "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin /* comment */",
        TableDef("test", "t", (col("id", "int", nullable=False), col("name", "varchar")), ("id",)),
    ),
    (
        "qualified-backquoted",
        "CREATE TABLE `shop` . `t` (a int) -- trailing comment",
        TableDef("shop", "t", (col("a", "int"),), (), "latin1"),
    ),
    (
        "mariadb-executable-comment",
        "CREATE TABLE t (a int /*M!100301 INVISIBLE */) /*!40101 CHARSET=latin1 */",
        TableDef("test", "t", (col("a", "int"),), (), "latin1"),
    ),
    (
        "period-and-hash-comment",
        "CREATE TABLE t (a date, b date, PERIOD FOR p (a, b)) # done",
        TableDef("test", "t", (col("a", "date"), col("b", "date"))),
    ),
]


@pytest.mark.parametrize("sql,expected", [(s, e) for _, s, e in CREATE_CASES], ids=[i for i, _, _ in CREATE_CASES])
def test_create_table(sql: str, expected: TableDef) -> None:
    assert table_after(sql, db=expected.database) == expected


# -- ALTER TABLE -----------------------------------------------------------------------------------
START = "CREATE TABLE t (id int not null, a varchar(10), b int, c text, PRIMARY KEY (id))"
ID, A, B, C = col("id", "int", nullable=False), col("a", "varchar"), col("b", "int"), col("c", "text")

ALTER_CASES = [
    ("add-column-end", "ALTER TABLE t ADD COLUMN d date", (ID, A, B, C, col("d", "date")), ("id",)),
    ("add-first", "ALTER TABLE t ADD d date FIRST", (col("d", "date"), ID, A, B, C), ("id",)),
    ("add-after", "ALTER TABLE t ADD d date AFTER a", (ID, A, col("d", "date"), B, C), ("id",)),
    (
        "add-several",
        "ALTER TABLE t ADD (d int, e int unsigned)",
        (ID, A, B, C, col("d", "int"), col("e", "int", signed=False)),
        ("id",),
    ),
    ("add-if-not-exists-present", "ALTER TABLE t ADD COLUMN IF NOT EXISTS a int", (ID, A, B, C), ("id",)),
    ("drop-column", "ALTER TABLE t DROP COLUMN b", (ID, A, C), ("id",)),
    ("drop-without-column-word", "ALTER TABLE t DROP b, DROP c", (ID, A), ("id",)),
    ("drop-if-exists-missing", "ALTER TABLE t DROP COLUMN IF EXISTS zz", (ID, A, B, C), ("id",)),
    ("drop-pk-column", "ALTER TABLE t DROP id", (A, B, C), ()),
    (
        "modify",
        "ALTER TABLE t MODIFY a varchar(20) charset latin1 not null",
        (ID, col("a", "varchar", charset="latin1", nullable=False), B, C),
        ("id",),
    ),
    ("modify-move-first", "ALTER TABLE t MODIFY COLUMN c text FIRST", (C, ID, A, B), ("id",)),
    (
        "change-rename",
        "ALTER TABLE t CHANGE b bb bigint unsigned AFTER id",
        (ID, col("bb", "bigint", signed=False), A, C),
        ("id",),
    ),
    (
        "change-pk-column",
        "ALTER TABLE t CHANGE COLUMN id ident bigint not null",
        (col("ident", "bigint", nullable=False), A, B, C),
        ("ident",),
    ),
    (
        "rename-column",
        "ALTER TABLE t RENAME COLUMN id TO pk",
        (col("pk", "int", nullable=False), A, B, C),
        ("pk",),
    ),
    (
        "alter-column-default",
        "ALTER TABLE t ALTER COLUMN b SET DEFAULT 5, ALTER a DROP DEFAULT",
        (ID, A, B, C),
        ("id",),
    ),
    ("drop-primary-key", "ALTER TABLE t DROP PRIMARY KEY", (ID, A, B, C), ()),
    (
        "replace-primary-key",
        "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (b, id)",
        (ID, A, col("b", "int", nullable=False), C),
        ("b", "id"),
    ),
    (
        "add-constraint-pk",
        "ALTER TABLE t DROP PRIMARY KEY, ADD CONSTRAINT pk PRIMARY KEY (a)",
        (ID, col("a", "varchar", nullable=False), B, C),
        ("a",),
    ),
    (
        "indexes-only",
        "ALTER TABLE t ADD INDEX i (a), ADD UNIQUE KEY u (b), DROP INDEX i, DROP KEY IF EXISTS x, "
        "ADD CONSTRAINT fk FOREIGN KEY (b) REFERENCES o (id), DROP FOREIGN KEY fk, ADD FULLTEXT (c), "
        "RENAME INDEX u TO v, ALTER INDEX v IGNORED, DROP CONSTRAINT ck, ADD CHECK (b > 0)",
        (ID, A, B, C),
        ("id",),
    ),
    (
        "options-only",
        "ALTER TABLE t ENGINE=InnoDB, ROW_FORMAT=COMPRESSED, ALGORITHM=INPLACE, LOCK=NONE, FORCE",
        (ID, A, B, C),
        ("id",),
    ),
    (
        "default-charset-changes-new-columns-only",
        "ALTER TABLE t DEFAULT CHARACTER SET latin1, ADD d char(2)",
        (ID, A, B, C, col("d", "char", length=2, charset="latin1")),
        ("id",),
    ),
    (
        "convert-to-charset",
        "ALTER TABLE t CONVERT TO CHARACTER SET latin1 COLLATE latin1_bin",
        (ID, col("a", "varchar", charset="latin1"), B, col("c", "text", charset="latin1")),
        ("id",),
    ),
    (
        "several-specs",
        "ALTER TABLE t ADD d int AFTER id, DROP a, MODIFY c mediumtext, CHANGE b b2 int first",
        (col("b2", "int"), ID, col("d", "int"), col("c", "mediumtext")),
        ("id",),
    ),
    (
        "mariadb-if-exists",
        "ALTER TABLE IF EXISTS t MODIFY COLUMN IF EXISTS b bigint, CHANGE IF EXISTS zz y int",
        (ID, A, col("b", "bigint"), C),
        ("id",),
    ),
    (
        "online-ignore-wait",
        "ALTER ONLINE IGNORE TABLE t WAIT 5 ADD d int",
        (ID, A, B, C, col("d", "int")),
        ("id",),
    ),
    (
        "partition-ops",
        "ALTER TABLE t ADD e int, PARTITION BY KEY (id) PARTITIONS 2",
        (ID, A, B, C, col("e", "int")),
        ("id",),
    ),
]


@pytest.mark.parametrize("sql,columns,pk", [c[1:] for c in ALTER_CASES], ids=[c[0] for c in ALTER_CASES])
def test_alter_table(sql: str, columns: tuple[ColumnDef, ...], pk: tuple[str, ...]) -> None:
    table = table_after(START, sql)
    assert (table.columns, table.primary_key) == (columns, pk)


def test_convert_grows_text_to_keep_its_length() -> None:
    table = table_after(
        "CREATE TABLE t (a tinytext, b text, c mediumtext, d longtext, e enum('x'), f blob, g json) CHARSET latin1",
        "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4",
    )
    assert [(c.type, c.charset) for c in table.columns] == [
        ("text", UTF8),
        ("mediumtext", UTF8),
        ("longtext", UTF8),
        ("longtext", UTF8),
        ("enum", UTF8),
        ("blob", "binary"),
        ("json", UTF8),
    ]
    assert table.charset == UTF8


def test_json_check_belongs_to_the_column_definition() -> None:
    # MariaDB drops a column's json_valid() check with its old definition, and renames it with the column.
    table = table_after("CREATE TABLE t (j json, k json)", "ALTER TABLE t MODIFY j longtext, RENAME COLUMN k TO k2")
    assert table.columns == (col("j", "longtext"), col("k2", "json"))


# -- events ------------------------------------------------------------------------------------------
SEED_CREATE = (
    "create table test.e ( id int(10) not null primary key auto_increment, m double, c timestamp(6), "
    "comment varchar(255) charset 'latin1' )"
)
SEED_OLD = {
    "database": "test",
    "charset": "utf8mb4",
    "table": "e",
    "columns": [
        {"type": "int", "name": "id", "signed": True},
        {"type": "double", "name": "m"},
        {"type": "timestamp", "name": "c", "column-length": 6},
        {"type": "varchar", "name": "comment", "charset": "latin1"},
    ],
    "primary-key": ["id"],
}
SEED_DEF = {
    **SEED_OLD,
    "columns": [
        SEED_OLD["columns"][0],
        SEED_OLD["columns"][1],
        {"type": "bigint", "name": "torvalds", "signed": False},
        SEED_OLD["columns"][2],
        SEED_OLD["columns"][3],
    ],
}


def test_seed_create_table_event() -> None:
    _, events = run(SEED_CREATE)
    assert events == [{"type": "table-create", "database": "test", "table": "e", "def": SEED_OLD, "sql": SEED_CREATE}]


def test_seed_alter_table_event() -> None:
    sql = "alter table test.e add column torvalds bigint unsigned after m"
    _, events = run(SEED_CREATE, sql)
    assert events[1] == {
        "type": "table-alter",
        "database": "test",
        "table": "e",
        "old": SEED_OLD,
        "def": SEED_DEF,
        "sql": sql,
    }


def _summary(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for e in events:
        out.append((e["type"], e["database"], e.get("table"), e.get("def", {}).get("table"), e.get("charset")))
    return out


EVENT_CASES = [
    (
        "create-database",
        ["CREATE DATABASE d CHARACTER SET latin1"],
        [("database-create", "d", None, None, "latin1")],
    ),
    (
        "create-schema-default-charset",
        ["CREATE SCHEMA IF NOT EXISTS `d`"],
        [("database-create", "d", None, None, UTF8)],
    ),
    ("create-database-if-not-exists-present", ["CREATE DATABASE IF NOT EXISTS test"], []),
    (
        "create-database-collate",
        ["CREATE DATABASE d DEFAULT COLLATE = utf8_unicode_ci"],
        [("database-create", "d", None, None, "utf8mb3")],
    ),
    (
        "alter-database",
        ["ALTER DATABASE shop CHARACTER SET = utf8mb4"],
        [("database-alter", "shop", None, None, UTF8)],
    ),
    (
        "alter-default-database",
        ["ALTER DATABASE DEFAULT CHARSET latin2"],
        [("database-alter", "test", None, None, "latin2")],
    ),
    (
        "drop-database",
        ["CREATE TABLE shop.x (a int)", "DROP DATABASE shop"],
        [("table-create", "shop", "x", "x", None), ("database-drop", "shop", None, None, None)],
    ),
    ("drop-database-missing", ["DROP DATABASE IF EXISTS nope"], []),
    (
        "create-table-if-not-exists-present",
        ["CREATE TABLE t (a int)", "CREATE TABLE IF NOT EXISTS t (b int)"],
        [("table-create", "test", "t", "t", None)],
    ),
    (
        "create-or-replace",
        ["CREATE TABLE t (a int)", "CREATE OR REPLACE TABLE t (b int)"],
        [("table-create", "test", "t", "t", None), ("table-create", "test", "t", "t", None)],
    ),
    (
        "create-like",
        ["CREATE TABLE t (a int)", "CREATE TABLE shop.u LIKE test.t"],
        [("table-create", "test", "t", "t", None), ("table-create", "shop", "u", "u", None)],
    ),
    (
        "create-like-parens",
        ["CREATE TABLE t (a int)", "CREATE TABLE u (LIKE t)"],
        [("table-create", "test", "t", "t", None), ("table-create", "test", "u", "u", None)],
    ),
    ("create-temporary-ignored", ["CREATE TEMPORARY TABLE t (a int)"], []),
    (
        "drop-tables",
        ["CREATE TABLE t (a int)", "CREATE TABLE u (a int)", "DROP TABLE IF EXISTS t, nope, test.u"],
        [
            ("table-create", "test", "t", "t", None),
            ("table-create", "test", "u", "u", None),
            ("table-drop", "test", "t", None, None),
            ("table-drop", "test", "u", None, None),
        ],
    ),
    (
        "drop-generated-by-server",
        ["CREATE TABLE t (a int)", "DROP TABLE `t` /* generated by server */"],
        [("table-create", "test", "t", "t", None), ("table-drop", "test", "t", None, None)],
    ),
    (
        "drop-temporary-ignored",
        ["CREATE TABLE t (a int)", "DROP /*!40005 TEMPORARY */ TABLE IF EXISTS t"],
        [("table-create", "test", "t", "t", None)],
    ),
    (
        "rename-table",
        ["CREATE TABLE t (a int)", "RENAME TABLE t TO shop.t2"],
        [("table-create", "test", "t", "t", None), ("table-alter", "test", "t", "t2", None)],
    ),
    (
        "rename-swap",
        ["CREATE TABLE a (x int)", "CREATE TABLE b (y int)", "RENAME TABLE a TO tmp, b TO a, tmp TO b"],
        [
            ("table-create", "test", "a", "a", None),
            ("table-create", "test", "b", "b", None),
            ("table-alter", "test", "a", "tmp", None),
            ("table-alter", "test", "b", "a", None),
            ("table-alter", "test", "tmp", "b", None),
        ],
    ),
    (
        "alter-rename-to",
        ["CREATE TABLE t (a int)", "ALTER TABLE t ADD b int, RENAME TO u"],
        [("table-create", "test", "t", "t", None), ("table-alter", "test", "t", "u", None)],
    ),
    (
        "alter-rename-as",
        ["CREATE TABLE t (a int)", "ALTER TABLE t RENAME AS shop.u"],
        [("table-create", "test", "t", "t", None), ("table-alter", "test", "t", "u", None)],
    ),
    (
        "leading-comments",
        ["/* My note */ -- x\n#y\n--\n  /*!40101 CREATE TABLE t (a int) */"],
        [("table-create", "test", "t", "t", None)],
    ),
    ("create-like-unknown-source", ["CREATE TABLE u LIKE nope"], []),
    (
        "convert-partition-to-table",
        [
            "CREATE TABLE t (a int) PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10))",
            "ALTER TABLE t CONVERT PARTITION p0 TO TABLE t_old",
            "ALTER TABLE t CONVERT TABLE t_old TO PARTITION p0 VALUES LESS THAN (10)",
        ],
        [
            ("table-create", "test", "t", "t", None),
            ("table-alter", "test", "t", "t", None),
            ("table-create", "test", "t_old", "t_old", None),
            ("table-alter", "test", "t", "t", None),
            ("table-drop", "test", "t_old", None, None),
        ],
    ),
    (
        "set-statement-for",
        ["SET STATEMENT max_statement_time=10, sql_mode='' FOR CREATE TABLE t (a int)"],
        [("table-create", "test", "t", "t", None)],
    ),
    ("system-database-ignored", ["CREATE TABLE mysql.x (a int)", "ALTER TABLE mysql.user ADD x int"], []),
    (
        "renamed-into-system-database",
        ["CREATE TABLE t (a int)", "RENAME TABLE t TO mysql.t"],
        [("table-create", "test", "t", "t", None), ("table-alter", "test", "t", "t", None)],
    ),
    ("alter-unknown-table-ignored", ["ALTER TABLE nope ADD x int"], []),
    (
        "create-index-ignored",
        ["CREATE TABLE t (a int)", "CREATE UNIQUE INDEX i ON t (a)", "DROP INDEX i ON t"],
        [("table-create", "test", "t", "t", None)],
    ),
    (
        "truncate",
        [
            "CREATE TABLE t (a int)",
            "TRUNCATE TABLE t",
            "/* c */ truncate `T`",  # the table's own spelling in the event
            "TRUNCATE shop.nope",  # a table the schema does not track: nothing
            "TRUNCATE TABLE t WAIT 5",  # MariaDB
            "SET STATEMENT lock_wait_timeout=2 FOR TRUNCATE t NOWAIT",
        ],
        [("table-create", "test", "t", "t", None)] + [("table-truncate", "test", "t", None, None)] * 4,
    ),
    (
        "system-versioned-not-tracked",
        ["CREATE TABLE t (a int) WITH SYSTEM VERSIONING", "ALTER TABLE t ADD b int"],
        [],
    ),
]


@pytest.mark.parametrize("statements,expected", [c[1:] for c in EVENT_CASES], ids=[c[0] for c in EVENT_CASES])
def test_events(statements: list[str], expected: list[tuple[Any, ...]]) -> None:
    _, events = run(*statements)
    assert _summary(events) == expected
    assert all(e["sql"] in statements for e in events)


def test_truncate_leaves_the_schema_as_it_was() -> None:
    schema, _ = run("CREATE TABLE t (a int primary key)")
    result = apply_ddl(schema, "TRUNCATE TABLE t", "test")
    assert result.schema == schema
    assert result.events == [{"type": "table-truncate", "database": "test", "table": "t", "sql": "TRUNCATE TABLE t"}]


UNLOGGED = [
    ("ALTER TABLE t TRUNCATE PARTITION p0, p1", [("test", "t")]),
    ("ALTER TABLE t TRUNCATE PARTITION ALL", [("test", "t")]),
    ("ALTER TABLE t DROP PARTITION IF EXISTS p0", [("test", "t")]),
    ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE shop.x WITHOUT VALIDATION", [("test", "t"), ("shop", "x")]),
    ("ALTER TABLE t EXCHANGE PARTITION p0 WITH TABLE untracked", [("test", "t")]),
    ("ALTER TABLE t IMPORT PARTITION p0 TABLESPACE", [("test", "t")]),
    ("ALTER TABLE t IMPORT TABLESPACE", [("test", "t")]),
    ("ALTER TABLE t CONVERT PARTITION p0 TO TABLE t_old", [("test", "t"), ("test", "t_old")]),
    ("ALTER TABLE t CONVERT TABLE shop.x TO PARTITION p9 VALUES LESS THAN (90)", [("test", "t")]),
    # Rows kept: nothing to read again.
    ("ALTER TABLE t REORGANIZE PARTITION p0 INTO (PARTITION p0a VALUES LESS THAN (5))", []),
    ("ALTER TABLE t COALESCE PARTITION 2", []),
    ("ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES LESS THAN (90))", []),
    ("ALTER TABLE t REBUILD PARTITION p0", []),
    ("ALTER TABLE t DISCARD TABLESPACE", []),
    ("ALTER TABLE t REMOVE PARTITIONING", []),
    ("ALTER TABLE t PARTITION BY HASH (a) PARTITIONS 3", []),
    ("ALTER TABLE t ADD b int", []),
]


@pytest.mark.parametrize("sql,tables", UNLOGGED, ids=[s.removeprefix("ALTER TABLE t ")[:40] for s, _ in UNLOGGED])
def test_statements_that_change_rows_without_row_events_name_their_tables(
    sql: str, tables: list[tuple[str, str]]
) -> None:
    schema, _ = run("CREATE TABLE t (a int) PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10))")
    schema, _ = run("CREATE TABLE x (a int)", schema=schema, default_db="shop")
    result = apply_ddl(schema, sql, "test")
    assert list(result.unlogged) == tables
    assert apply_ddl(schema, "TRUNCATE TABLE t", "test").unlogged == ()  # its own event says what happened


def test_rename_is_a_table_alter_whose_defs_differ_by_name() -> None:
    schema, events = run("CREATE TABLE t (a int primary key)", "RENAME TABLE t TO u")
    alter = events[1]
    assert alter["old"] == {**alter["def"], "table": "t"}
    assert schema.table("test", "t") is None and schema.table("test", "u") is not None


def test_drop_database_drops_its_tables_and_unqualified_names_use_default_db() -> None:
    schema, _ = run("CREATE TABLE x (a int)", "CREATE TABLE y (a int)", default_db="shop")
    assert {t.name for t in schema.all_tables()} == {"x", "y"}
    schema, _ = run("DROP DATABASE shop", schema=schema)
    assert schema.database("shop") is None and list(schema.all_tables()) == []


def test_lookups_prefer_exact_case_then_ignore_case() -> None:
    schema, _ = run("CREATE TABLE T (a int)", "CREATE TABLE t (b int)")  # lower_case_table_names=0: two tables
    upper, lower = schema.table("test", "T"), schema.table("test", "t")
    assert upper is not None and lower is not None
    assert (upper.column_names(), lower.column_names()) == (["a"], ["b"])
    schema, _ = run("CREATE TABLE Mixed (a int)", "ALTER TABLE TEST.MIXED ADD b int", schema=schema)
    mixed = schema.table("test", "mixed")
    assert mixed is not None and (mixed.database, mixed.name, mixed.column_names()) == (
        "test",
        "Mixed",
        ["a", "b"],
    )


IGNORED = [
    "BEGIN",
    "COMMIT",
    "INSERT INTO t VALUES (1)",
    "GRANT ALL ON *.* TO 'x'@'%'",
    "CREATE USER 'u'@'%'",
    "CREATE VIEW v AS SELECT 1",
    "CREATE OR REPLACE ALGORITHM=MERGE VIEW v AS SELECT 1",
    "ALTER VIEW v AS SELECT 2",
    "DROP VIEW IF EXISTS v",
    "CREATE DEFINER=`root`@`localhost` TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET @x=1",
    "DROP TRIGGER tr",
    "CREATE PROCEDURE p() BEGIN SELECT 1; END",
    "DROP FUNCTION IF EXISTS f",
    "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO DELETE FROM t",
    "ALTER EVENT e DISABLE",
    "SET NAMES utf8mb4",
    "FLUSH TABLES",
    "ANALYZE TABLE t",
    "OPTIMIZE TABLE t",
    "RENAME USER a TO b",
    "CREATE SEQUENCE s",
    "DROP USER u",
    "/* comment */ SAVEPOINT x",
    "XA START 'x'",
    "CREATE INDEX i ON t (a)",
]


@pytest.mark.parametrize("sql", IGNORED, ids=[s.split("(")[0][:40] for s in IGNORED])
def test_statements_that_are_not_table_ddl_change_nothing(sql: str) -> None:
    schema = table_schema = run(START)[0]
    result = apply_ddl(schema, sql, "test")
    assert result.events == [] and result.schema == table_schema


# -- errors ------------------------------------------------------------------------------------------
def test_unparseable_ddl_names_statement_position_and_what_to_do() -> None:
    sql = "ALTER TABLE t ADD COLUMN x int, FROBNICATE the table"
    with pytest.raises(DdlParseError) as info:
        run(START, sql)
    message = str(info.value)
    assert "ALTER TABLE t ADD COLUMN x int, FROBNICATE the table" in message
    assert "position 32" in message and "'FROBNICATE'" in message
    assert "restart the capture from a binlog position after it" in message


def test_long_statement_is_truncated_in_the_error() -> None:
    sql = "CREATE TABLE t (a int " + "x " * 500 + ")"
    with pytest.raises(DdlParseError, match=r"\.\.\.'") as info:
        run(sql)
    assert len(str(info.value)) < 700


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (a int, b inet6)",
        "ALTER TABLE t ADD b uuid",
    ],
    ids=["create-inet6", "alter-uuid"],
)
def test_unknown_column_type_names_table_column_and_type(sql: str) -> None:
    with pytest.raises(UnsupportedColumnTypeError, match=r"test\.t\.b has type '(inet6|uuid)'"):
        run("CREATE TABLE t (a int)" if sql.startswith("ALTER") else "BEGIN", sql)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t SELECT 1 AS a",
        "CREATE TABLE t (a int",
        "ALTER TABLE t ADD COLUMN",
        "RENAME TABLE t",
        "CREATE TABLE t (a int) 'stray'",
        "ALTER TABLE t ADD x int, ADD y int 'unterminated",
    ],
    ids=["ctas", "unclosed", "add-nothing", "rename-no-target", "stray-token", "unterminated-string"],
)
def test_malformed_ddl_raises(sql: str) -> None:
    with pytest.raises(DdlParseError, match="cannot parse DDL statement"):
        run(START, sql)


@pytest.mark.parametrize(
    "sql,problem",
    [
        (
            "ALTER TABLE t MODIFY nope int",
            "test.t has no column 'nope' to change at position 14 (near 'MODIFY')",
        ),
        ("ALTER TABLE t DROP a, DROP a", "test.t has no column 'a' to drop at position 22 (near 'DROP')"),
        ("ALTER TABLE t ADD x int AFTER nope", "test.t has no column 'nope' to put a column AFTER"),
        ("ALTER TABLE t RENAME COLUMN nope TO x", "test.t has no column 'nope' to rename"),
        ("ALTER TABLE t ADD A bigint", "test.t has a column 'A' already"),
    ],
    ids=["modify", "drop-twice", "after", "rename", "add-twice"],
)
def test_ddl_that_does_not_fit_the_schema_says_so(sql: str, problem: str) -> None:
    with pytest.raises(DdlParseError) as info:
        run(START, sql)
    assert str(info.value).startswith(f"cannot apply DDL statement {sql!r}: {problem}")
    assert "restart the capture from a binlog position after this statement" in str(info.value)


@pytest.mark.parametrize("sql", ["CREATE TABLE t SELECT 1 AS a", "CREATE TABLE t (a int) AS SELECT 1 AS a"])
def test_create_table_select_is_refused_with_the_reason(sql: str) -> None:
    with pytest.raises(DdlParseError, match=r"CREATE TABLE \.\.\. SELECT is not supported"):
        run(sql)


def test_create_table_of_an_atomic_create_table_select_is_its_table() -> None:
    """MySQL 8.0.21+ logs CREATE TABLE ... SELECT as the table's definition with `START TRANSACTION`, its rows and
    its commit following (the rows are row events)."""
    sql = "CREATE TABLE `t` (\n  `a` int NOT NULL,\n  PRIMARY KEY (`a`)\n) START TRANSACTION"
    assert table_after(sql) == table_after("CREATE TABLE `t` (`a` int NOT NULL, PRIMARY KEY (`a`))")
    with pytest.raises(DdlParseError, match="unexpected text after the statement"):
        run("CREATE TABLE t (a int) START TRANSACTION ISOLATION")


def test_unqualified_name_without_default_database_raises() -> None:
    with pytest.raises(DdlParseError, match="no default database"):
        run("CREATE TABLE t (a int)", default_db="")


def test_errors_leave_the_schema_unchanged() -> None:
    schema = run(START)[0]
    with pytest.raises(DdlParseError):
        apply_ddl(schema, "ALTER TABLE t ADD x int, DROP nope", "test")
    assert schema.table("test", "t") == table_after(START)


def _keys(statements: list[str]) -> dict[str, tuple[tuple[str, tuple[str, ...], str, tuple[str, ...], str, str], ...]]:
    schema = Schema.empty()
    for sql in ["CREATE DATABASE f", *statements]:
        schema = apply_ddl(schema, sql, "f").schema
    return {
        t.name: tuple(
            (k.name, k.columns, f"{k.parent_database}.{k.parent_table}", k.parent_columns, k.on_delete, k.on_update)
            for k in t.foreign_keys
        )
        for t in schema.all_tables()
    }


def test_foreign_keys_follow_create_alter_and_renames_as_the_server_names_them() -> None:
    """Names and actions as information_schema lists them on both servers (checked against MariaDB 10.11 and
    MySQL 9.7 by tests/integration/test_foreign_keys.py's servers): an unnamed key is `<table>_ibfk_<n>` and follows
    a RENAME TABLE; NO ACTION is RESTRICT; inline REFERENCES make a key too."""
    got = _keys(
        [
            "CREATE TABLE p (id INT PRIMARY KEY, k INT UNIQUE)",
            "CREATE TABLE c (id INT PRIMARY KEY, pid INT, a INT, b INT, "
            "CONSTRAINT fk1 FOREIGN KEY (pid) REFERENCES p(id) ON DELETE CASCADE ON UPDATE CASCADE, "
            "FOREIGN KEY (a, b) REFERENCES f.p (id, k) ON DELETE SET NULL ON UPDATE NO ACTION, KEY (a))",
            "ALTER TABLE c ADD FOREIGN KEY (b) REFERENCES p (k) ON UPDATE SET NULL",
            "ALTER TABLE c DROP FOREIGN KEY c_ibfk_1",
            "CREATE TABLE inl (id INT PRIMARY KEY, pid INT REFERENCES p(id) ON DELETE CASCADE)",
            "ALTER TABLE p RENAME COLUMN k TO kk",
            "RENAME TABLE p TO pp",
            "ALTER TABLE c CHANGE pid parent INT",
            "CREATE TABLE s (id INT PRIMARY KEY, up INT, FOREIGN KEY (up) REFERENCES s(id) ON DELETE CASCADE)",
            "ALTER TABLE s RENAME TO s2",
            "CREATE TABLE copy LIKE c",
        ]
    )
    assert got == {
        "pp": (),
        "c": (
            ("c_ibfk_2", ("b",), "f.pp", ("kk",), "RESTRICT", "SET NULL"),
            ("fk1", ("parent",), "f.pp", ("id",), "CASCADE", "CASCADE"),
        ),
        "inl": (("inl_ibfk_1", ("pid",), "f.pp", ("id",), "CASCADE", "RESTRICT"),),
        "s2": (("s2_ibfk_1", ("up",), "f.s2", ("id",), "CASCADE", "RESTRICT"),),
        "copy": (),  # CREATE TABLE ... LIKE copies no foreign key
    }


def test_a_foreign_key_named_by_its_index_is_dropped_by_that_name() -> None:
    """MariaDB names `FOREIGN KEY idx (a) REFERENCES ...` after the index; MySQL `<table>_ibfk_<n>`."""
    got = _keys(
        [
            "CREATE TABLE p (id INT PRIMARY KEY)",
            "CREATE TABLE c (id INT PRIMARY KEY, a INT, CONSTRAINT FOREIGN KEY idx_a (a) REFERENCES p (id))",
            "ALTER TABLE c DROP FOREIGN KEY idx_a",
        ]
    )
    assert got["c"] == ()


def test_char_set_is_charset_everywhere_mysql_accepts_it() -> None:
    """MySQL's grammar takes CHAR SET wherever it takes CHARACTER SET and CHARSET (column, table, database, CONVERT
    TO): the capture stopped at a column declared `CHAR SET cp1251`."""
    schema, events = run(
        "CREATE DATABASE d CHAR SET latin1",
        "CREATE TABLE d.t (id int PRIMARY KEY, v varchar(10) CHAR SET cp1251) DEFAULT CHAR SET = latin2",
        "ALTER TABLE d.t ADD w text CHAR SET utf8mb4",
        "ALTER DATABASE d CHAR SET cp1250",
    )
    table = schema.table("d", "t")
    assert table is not None
    assert [(c.name, c.charset) for c in table.columns] == [("id", None), ("v", "cp1251"), ("w", UTF8)]
    assert table.charset == "latin2"
    assert [e.get("charset") for e in events if e["type"].startswith("database-")] == ["latin1", "cp1250"]
    converted = table_after("CREATE TABLE t (a tinytext) CHARSET latin1", "ALTER TABLE t CONVERT TO CHAR SET utf8mb4")
    assert [(c.type, c.charset) for c in converted.columns] == [("text", UTF8)]
