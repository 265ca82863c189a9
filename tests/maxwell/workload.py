"""The Maxwell compatibility workload: every fidelity-corpus value through INSERT, UPDATE and DELETE, then
multi-row transactions, a rollback, a primary-key change and DDL. Deterministic, so that the lines Maxwell
printed for it (recorded once, checked in next to this file) can be compared with the worker's lines for it.
"""

from __future__ import annotations

from mysqlcapture_dev.embedded.server import PrivateServer

from tests.fidelity_corpus import Case, cases_for

DB = "maxwell_compat"
# The output options the recording turned on in Maxwell (record.py) and the compatibility test in the worker,
# by their manifest names (Maxwell's flag, camelCase).
OUTPUT_OPTIONS = {
    "outputBinlogPosition": True,
    "outputGtidPosition": True,
    "outputCommitInfo": True,
    "outputXoffset": True,
    "outputNulls": True,
    "outputServerId": True,
    "outputThreadId": True,
    "outputPrimaryKeys": True,
    "outputPrimaryKeyColumns": True,
    "outputDdl": True,
}
END_TABLE = "zz_end"  # its single insert is the workload's last event: a reader waits for it


def _columns(c: Case) -> str:
    if c.base is not None:
        return f"id int PRIMARY KEY, b {c.base}, v {c.ddl}"
    return f"id int PRIMARY KEY, v {c.ddl}"


def case_statements(c: Case) -> list[str]:
    """Create the case's table, insert every value, rotate them with UPDATEs, delete every row."""
    target = "b" if c.base is not None else "v"
    n = len(c.values)
    out = [
        "SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'",
        f"CREATE TABLE {DB}.`{c.name}` ({_columns(c)}) DEFAULT CHARSET=utf8mb4",
        *c.setup,
        f"INSERT INTO {DB}.`{c.name}` (id, {target}) VALUES "
        + ", ".join(f"({i}, {v})" for i, v in enumerate(c.values)),
    ]
    out += [f"UPDATE {DB}.`{c.name}` SET {target} = {c.values[(i + 1) % n]} WHERE id = {i}" for i in range(n)]
    out.append(f"DELETE FROM {DB}.`{c.name}`")
    return out


# Transactions, keys and DDL: what the per-type cases above do not exercise.
SHAPES = [
    "SET SESSION sql_mode = DEFAULT, time_zone = '+00:00'",
    f"CREATE TABLE {DB}.orders (id int PRIMARY KEY, customer varchar(40) CHARACTER SET latin1, "
    "total decimal(10,2), placed datetime(3), flag bit(1), note text) DEFAULT CHARSET=utf8mb4",
    f"CREATE TABLE {DB}.lines (order_id int, line int, sku varbinary(8), qty smallint unsigned, "
    "PRIMARY KEY (order_id, line))",
    "BEGIN",
    f"INSERT INTO {DB}.orders VALUES (1, 'Zoë', 12.50, '2024-02-29 23:59:59.125', b'1', 'first'), "
    "(2, 'Ann', 0.00, '1999-12-31 00:00:00', b'0', NULL)",
    f"INSERT INTO {DB}.lines VALUES (1, 1, x'00ff00', 3), (1, 2, 'SKU-2', 65535), (2, 1, '', 0)",
    f"UPDATE {DB}.orders SET total = total + 1, note = CONCAT('😀 ', IFNULL(note, '')) WHERE id IN (1, 2)",
    "COMMIT",
    "BEGIN",
    f"INSERT INTO {DB}.orders VALUES (3, 'rolled back', 1, NULL, NULL, NULL)",
    "ROLLBACK",
    f"UPDATE {DB}.orders SET id = 10 WHERE id = 2",
    f"UPDATE {DB}.lines SET line = line + 10 WHERE order_id = 1",
    f"UPDATE {DB}.orders SET note = 'tab\there \"quoted\" back\\\\slash\\nnewline \\0nul \x01ctl' WHERE id = 1",
    f"ALTER TABLE {DB}.orders ADD COLUMN shipped date AFTER placed, ADD COLUMN weight double",
    f"INSERT INTO {DB}.orders (id, customer, shipped, weight) VALUES (4, 'Bo', '2025-01-02', 1e300)",
    f"ALTER TABLE {DB}.orders DROP COLUMN note, MODIFY total decimal(12,4)",
    f"UPDATE {DB}.orders SET total = 0.0001 WHERE id = 4",
    f"RENAME TABLE {DB}.lines TO {DB}.order_lines",
    f"DELETE FROM {DB}.order_lines WHERE qty = 0",
    f"TRUNCATE TABLE {DB}.order_lines",
    f"DROP TABLE {DB}.order_lines",
    "CREATE DATABASE maxwell_compat_other CHARACTER SET latin1",
    "ALTER DATABASE maxwell_compat_other CHARACTER SET utf8mb4",
    "DROP DATABASE maxwell_compat_other",
]


# Corpus cases Maxwell 1.44 cannot print: it exits on the first such row (the reason is each value).
MAXWELL_EXITS = {
    "utf16le": "error: unhandled character set 'utf16le' (Java's name is UTF-16LE)",
    "vector": "NullPointerException: ColumnType.byCode(242) is null (no VECTOR in mysql-binlog-connector-java 0.30)",
}


# Corpus cases added after the recording (tests/maxwell/*.jsonl): compared with real Maxwell by the randomized
# comparison of 2026-11-30 instead (ujis and gb18030 equal; cp932, which Java reads as IBM-942C, as README says).
AFTER_RECORDING = frozenset({"ujis", "cp932", "gb18030", "json_null", "decimal_65_30_small"})


def compat_cases(flavor: str) -> list[Case]:
    """The corpus cases of the workload: every case of the flavor that Maxwell can print, and was recorded."""
    return [c for c in cases_for(flavor) if c.name not in MAXWELL_EXITS and c.name not in AFTER_RECORDING]


def statements(flavor: str) -> list[str]:
    """The whole workload for a server of `flavor`, in order, each statement autocommitted unless in BEGIN."""
    out = [f"CREATE DATABASE {DB} CHARACTER SET utf8mb4"]
    for c in compat_cases(flavor):
        out += case_statements(c)
    out += SHAPES
    out += [f"CREATE TABLE {DB}.{END_TABLE} (id int PRIMARY KEY)", f"INSERT INTO {DB}.{END_TABLE} VALUES (1)"]
    return out


def run(srv: PrivateServer) -> None:
    """The workload on `srv`, statement by statement on one connection."""
    conn = srv.connect()
    try:
        with conn.cursor() as cur:
            for stmt in statements(srv.flavor):
                cur.execute(stmt)
    finally:
        conn.close()
