"""A seeded random workload: mixed-type tables, multi-statement transactions, PK-changing updates, deletes, DDL."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field
from typing import Any

COLUMN_TYPES: list[str] = [
    "TINYINT",
    "BIGINT UNSIGNED",
    "DECIMAL(20,6)",
    "DOUBLE",
    "VARCHAR(64) CHARACTER SET utf8mb4",
    "VARCHAR(32) CHARACTER SET latin1",
    "DATETIME(6)",
    "DATE",
    "TIME(3)",
    "ENUM('a','b','c')",
    "SET('x','y','z')",
    "BLOB",
    "JSON",
    "BIT(8)",
    "TIMESTAMP(3) NULL",
]
WIDER = {
    "TINYINT": "SMALLINT",
    "VARCHAR(64) CHARACTER SET utf8mb4": "VARCHAR(128) CHARACTER SET utf8mb4",
    "DECIMAL(20,6)": "DECIMAL(30,10)",
    "DATE": "DATETIME(3)",
}


def _text(rng: random.Random, n: int, alphabet: str) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, n)))


def random_value(rng: random.Random, col_type: str) -> Any:
    """A Python value PyMySQL escapes into a literal of `col_type` (None for NULL sometimes)."""
    if rng.random() < 0.08 and "NOT NULL" not in col_type:
        return None
    t = col_type.split("(")[0].split(" ")[0].upper()
    if t == "TINYINT":
        return rng.choice([-128, 127, 0, rng.randint(-128, 127)])
    if t == "SMALLINT":
        return rng.randint(-32768, 32767)
    if t == "BIGINT":
        return rng.choice([0, 2**64 - 1, 2**63, rng.randint(0, 2**64 - 1)])
    if t == "DECIMAL":
        return f"{rng.choice(['-', ''])}{rng.randint(0, 10**12)}.{rng.randint(0, 999999):06d}"
    if t == "DOUBLE":
        return rng.choice([0.0, -1.5, 1e300, rng.uniform(-1e6, 1e6)])
    if t == "VARCHAR" and "latin1" in col_type:
        return _text(rng, 30, string.ascii_letters + "éàüñ ")
    if t == "VARCHAR":
        return _text(rng, 60, string.ascii_letters + "é日本😀 '\"\\")
    if t == "DATETIME":
        return (
            f"{rng.randint(1000, 9999)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            f".{rng.randint(0, 999999):06d}"
        )
    if t == "DATE":
        return f"{rng.randint(1000, 9999)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if t == "TIME":
        sign, hours = rng.choice(["-", ""]), rng.randint(0, 838)
        return f"{sign}{hours}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}"
    if t == "ENUM":
        return rng.choice(["a", "b", "c"])
    if t == "SET":
        return ",".join(sorted(rng.sample(["x", "y", "z"], rng.randint(0, 3))))
    if t == "BLOB":
        return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 40)))
    if t == "JSON":
        return rng.choice(['{"a": 1, "b": [true, null, "x"]}', '[1, 2.5, "é"]', '{"n": {"m": -7}}', '"s"'])
    if t == "BIT":
        return rng.randint(0, 255)
    if t == "TIMESTAMP":
        return (
            f"{rng.randint(1971, 2037)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}"
        )
    if t == "INT":
        return rng.randint(-(2**31), 2**31 - 1)
    raise ValueError(col_type)


@dataclass
class Table:
    name: str
    columns: dict[str, str]  # name -> SQL type, excluding id and rev
    ids: set[int] = field(default_factory=set)


@dataclass
class Workload:
    """Drives one database on a server through random operations; `step()` runs one operation."""

    conn: Any
    database: str
    seed: int
    ddl: bool = True
    truncate: bool = False  # TRUNCATE TABLE among the DDL (left out by default: it keeps older seeds' sequences)
    rng: random.Random = field(init=False)
    tables: dict[str, Table] = field(default_factory=dict)
    counter: int = 0
    next_id: int = 1

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def sql(self, statement: str, args: Any = None) -> None:
        with self.conn.cursor() as cur:
            cur.execute(statement, args)

    def setup(self, n_tables: int = 3) -> None:
        self.sql(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
        for _ in range(n_tables):
            self.create_table()

    def create_table(self) -> None:
        self.counter += 1
        name = f"t{self.counter}"
        cols = {f"c{i}": t for i, t in enumerate(self.rng.sample(COLUMN_TYPES, 8))}
        body = ", ".join(f"`{c}` {t}" for c, t in cols.items())
        self.sql(
            f"CREATE TABLE `{self.database}`.`{name}` (id INT NOT NULL PRIMARY KEY, rev INT NOT NULL DEFAULT 0, {body})"
        )
        self.tables[name] = Table(name, cols)

    def _row(self, table: Table) -> tuple[list[str], list[Any]]:
        names = list(table.columns)
        return names, [random_value(self.rng, table.columns[c]) for c in names]

    def insert(self, table: Table, n: int) -> None:
        for _ in range(n):
            rid = self.next_id
            self.next_id += 1
            names, values = self._row(table)
            cols = ", ".join(["id", *[f"`{c}`" for c in names]])
            marks = ", ".join(["%s"] * (len(values) + 1))
            self.sql(f"INSERT INTO `{self.database}`.`{table.name}` ({cols}) VALUES ({marks})", [rid, *values])
            table.ids.add(rid)

    def update(self, table: Table) -> None:
        if not table.ids:
            return
        rid = self.rng.choice(sorted(table.ids))
        names, values = self._row(table)
        pick = self.rng.sample(range(len(names)), self.rng.randint(1, len(names)))
        sets = ", ".join(f"`{names[i]}` = %s" for i in pick)
        self.sql(
            f"UPDATE `{self.database}`.`{table.name}` SET {sets}, rev = rev + 1 WHERE id = %s",
            [*(values[i] for i in pick), rid],
        )

    def update_pk(self, table: Table) -> None:
        if not table.ids:
            return
        rid = self.rng.choice(sorted(table.ids))
        new = self.next_id
        self.next_id += 1
        self.sql(f"UPDATE `{self.database}`.`{table.name}` SET id = %s WHERE id = %s", [new, rid])
        table.ids.discard(rid)
        table.ids.add(new)

    def delete(self, table: Table) -> None:
        if not table.ids:
            return
        rid = self.rng.choice(sorted(table.ids))
        self.sql(f"DELETE FROM `{self.database}`.`{table.name}` WHERE id = %s", [rid])
        table.ids.discard(rid)

    def touch_all(self, table: Table) -> None:
        """Re-emit every row with the current schema (DDL itself writes no row events)."""
        self.sql(f"UPDATE `{self.database}`.`{table.name}` SET rev = rev + 1")

    def do_ddl(self) -> None:
        table = self.tables[self.rng.choice(sorted(self.tables))]
        qualified = f"`{self.database}`.`{table.name}`"
        ops = ["add", "drop", "modify", "rename_col", "rename_table", "recreate"]
        op = self.rng.choice([*ops, "truncate"] if self.truncate else ops)
        if op == "truncate":
            self.sql(f"TRUNCATE TABLE {qualified}")
            table.ids.clear()
            self.insert(table, self.rng.randint(0, 3))
            return
        if op == "add" or len(table.columns) < 3:
            self.counter += 1
            col, typ = f"n{self.counter}", self.rng.choice(COLUMN_TYPES)
            after = self.rng.choice(["", " FIRST", f" AFTER `{self.rng.choice(list(table.columns))}`"])
            self.sql(f"ALTER TABLE {qualified} ADD COLUMN `{col}` {typ}{after}")
            table.columns[col] = typ
        elif op == "drop":
            col = self.rng.choice(list(table.columns))
            self.sql(f"ALTER TABLE {qualified} DROP COLUMN `{col}`")
            del table.columns[col]
        elif op == "modify":
            candidates = [c for c, t in table.columns.items() if t in WIDER]
            if not candidates:
                return self.do_ddl()
            col = self.rng.choice(candidates)
            self.sql(f"ALTER TABLE {qualified} MODIFY COLUMN `{col}` {WIDER[table.columns[col]]}")
            table.columns[col] = WIDER[table.columns[col]]
        elif op == "rename_col":
            col = self.rng.choice(list(table.columns))
            self.counter += 1
            new = f"r{self.counter}"
            self.sql(f"ALTER TABLE {qualified} RENAME COLUMN `{col}` TO `{new}`")
            table.columns = {(new if c == col else c): t for c, t in table.columns.items()}
        elif op == "rename_table":
            self.counter += 1
            new = f"t{self.counter}"
            self.sql(f"RENAME TABLE {qualified} TO `{self.database}`.`{new}`")
            del self.tables[table.name]
            table.name = new
            self.tables[new] = table
        else:
            self.sql(f"DROP TABLE {qualified}")
            del self.tables[table.name]
            self.create_table()
            return
        self.touch_all(table)

    def step(self) -> None:
        r = self.rng.random()
        table = self.tables[self.rng.choice(sorted(self.tables))]
        if r < 0.30:
            self.insert(table, self.rng.randint(1, 5))
        elif r < 0.45:
            self.sql("BEGIN")
            for _ in range(self.rng.randint(2, 6)):
                t = self.tables[self.rng.choice(sorted(self.tables))]
                kind = self.rng.choice(("insert", "update", "delete"))
                if kind == "insert":
                    self.insert(t, 2)
                elif kind == "update":
                    self.update(t)
                else:
                    self.delete(t)
            self.sql("COMMIT")
        elif r < 0.70:
            self.update(table)
        elif r < 0.78:
            self.update_pk(table)
        elif r < 0.92:
            self.delete(table)
        elif self.ddl:
            self.do_ddl()
        else:
            self.insert(table, 1)
