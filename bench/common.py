"""What the benchmarks share: the mixed-type table, its fill, the bench capture manifest, child-process runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent

# The bench tables: (column definitions, the SELECT list that fills them from `seq`), each also measured without
# its JSON, spatial and non-UTF-8 columns (the "plain" twin), to show what those columns cost.
_EVENTS_PLAIN = (
    """id BIGINT UNSIGNED NOT NULL PRIMARY KEY, account INT NOT NULL, amount DECIMAL(12,2) NOT NULL, ratio DOUBLE,
  status ENUM('new','paid','shipped','cancelled') NOT NULL, name VARCHAR(64) CHARACTER SET utf8mb4,
  note VARCHAR(32) CHARACTER SET latin1, created DATETIME(6) NOT NULL, day DATE, flags TINYINT UNSIGNED,
  payload BLOB""",
    # SHA2, not MD5: Debian's MySQL 9.7 build has no MD5().
    """seq, seq % 100000, (seq % 100000) / 100, seq / 7, ELT(1 + seq % 4, 'new','paid','shipped','cancelled'),
  CONCAT('customer-', seq), CONCAT('note ', seq % 1000),
  TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq % 1000000) MICROSECOND,
  DATE('2024-01-01') + INTERVAL (seq % 3650) DAY, seq % 256, UNHEX(LEFT(SHA2(seq, 256), 32))""",
)
# A document as an application writes it: JSON text (numbers parse as doubles and integers).
_ATTRS = """CONCAT('{"sku": "sku-', seq % 1000, '", "qty": ', seq % 7, ', "price": ', (seq % 1000) / 10,
  ', "gift": ', IF(seq % 3 = 0, 'true', 'false'), ', "tags": ["t', seq % 10, '", "zone-', seq % 4, '"]}')"""
_PLACES_PLAIN = (
    "id BIGINT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(64) CHARACTER SET utf8mb4, visits INT, seen DATETIME",
    "seq, CONCAT('place-', seq), seq % 5000, TIMESTAMP('2024-01-01') + INTERVAL seq SECOND",
)
TABLES: dict[str, tuple[str, str]] = {
    "events": (_EVENTS_PLAIN[0] + ", attrs JSON", _EVENTS_PLAIN[1] + ", " + _ATTRS),
    "events_plain": _EVENTS_PLAIN,
    "places": (
        _PLACES_PLAIN[0] + ", city VARCHAR(32) CHARACTER SET gbk, loc POINT",
        _PLACES_PLAIN[1] + ", CONCAT('北京市朝阳区', seq % 100), "
        "POINT(CAST(seq % 360 AS SIGNED) - 179.5, CAST(seq % 180 AS SIGNED) - 89.75)",
    ),
    "places_plain": _PLACES_PLAIN,
    # The same bytes as plain text: the JSON document in a TEXT column, the gbk text in utf8mb4, the point as WKT.
    "events_text": (_EVENTS_PLAIN[0] + ", attrs TEXT", _EVENTS_PLAIN[1] + ", " + _ATTRS),
    "places_text": (
        _PLACES_PLAIN[0] + ", city VARCHAR(32) CHARACTER SET utf8mb4, loc VARCHAR(64)",
        _PLACES_PLAIN[1] + ", CONCAT('北京市朝阳区', seq % 100), "
        "ST_AsText(POINT(CAST(seq % 360 AS SIGNED) - 179.5, CAST(seq % 180 AS SIGNED) - 89.75))",
    ),
}


def create_table(table: str, like: str | None = None) -> str:
    """CREATE TABLE bench.`table` with the columns of TABLES[`like` or `table`]."""
    return f"CREATE TABLE bench.{table} ({TABLES[like or table][0]})"


FILL = "INSERT INTO bench.{table} {rows} SELECT {select} FROM {source}"
FILL_STEP = 20000  # rows per INSERT ... SELECT: one transaction each


def fill_statements(flavor: str, table: str, lo: int, hi: int, *, like: str | None = None) -> list[str]:
    """One INSERT ... SELECT of rows lo..hi (one transaction): MariaDB's sequence engine, MySQL's recursive CTE."""
    select = TABLES[like or table][1]
    if flavor == "mariadb":
        return [FILL.format(table=table, rows="", select=select, source=f"bench.seq_{lo}_to_{hi}")]
    cte = f"WITH RECURSIVE seqs(seq) AS (SELECT {lo} UNION ALL SELECT seq + 1 FROM seqs WHERE seq < {hi})"
    return [
        f"SET SESSION cte_max_recursion_depth = {hi - lo + 2}",
        FILL.format(table=table, rows=cte, select=select, source="seqs"),
    ]


def fill(server: Any, table: str, rows: int) -> int:
    """Insert `rows` rows into bench.`table` in transactions of FILL_STEP rows; returns the transactions."""
    server.execute(create_table(table))
    for lo in range(1, rows + 1, FILL_STEP):
        server.execute(*fill_statements(server.flavor, table, lo, min(lo + FILL_STEP - 1, rows)))
    return -(-rows // FILL_STEP)


def fill_one_row_transactions(server: Any, table: str, rows: int, *, like: str) -> None:
    """Create bench.`table` like TABLES[`like`] and insert `rows` rows of it, each in a transaction of its own (an
    OLTP source: one INSERT per commit), from a server-side loop."""
    select = TABLES[like][1]
    server.execute(
        create_table(table, like=like),
        f"CREATE PROCEDURE bench.fill_{table}(n INT) BEGIN DECLARE seq INT DEFAULT 1; WHILE seq <= n DO "
        f"INSERT INTO bench.{table} SELECT {select}; SET seq = seq + 1; END WHILE; END",
        "SET SESSION autocommit = 1",
        f"CALL bench.fill_{table}({rows})",
    )


def bench_manifest(port: int, name: str, uri: str, *, server_id: int, **spec: Any) -> dict[str, Any]:
    """A MySQLCapture for the private bench server (root, no TLS, no heartbeats), with `spec` added."""
    return {
        "apiVersion": "cdc.mysqlcapture.io/v1alpha1",
        "kind": "MySQLCapture",
        "metadata": {"name": name},
        "spec": {
            "source": {
                "host": "127.0.0.1",
                "port": port,
                "user": "root",
                "passwordFrom": {"env": "MYSQL_PASSWORD"},
                "serverId": server_id,
                "tls": {"mode": "disabled"},
            },
            "sink": {"type": "delta", "delta": {"uri": uri}},
            "metrics": {"port": 0},
            "heartbeat": {"intervalSeconds": 0},
            **spec,
        },
    }


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child: bytecode cached (outside the repository) as an installed image has it.

    Without it a child compiles the worker's sources at every start (PYTHONDONTWRITEBYTECODE is set on
    these machines), a cost no deployment pays.
    """
    env = dict(os.environ, **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path.home() / ".cache" / "mysqlcapture" / "pycache")
    return env


# Imported once before anything is measured, so that every measured child starts from cached bytecode.
_WARM = "import deltalake, pyarrow.compute, pymysqlreplication, mysqlcapture_worker.app, mysqlcapture_worker.commands"


def warm_bytecode() -> None:
    """Compile what the measured children import into the bytecode cache of `child_env`."""
    subprocess.run([sys.executable, "-c", _WARM], env=child_env(), check=True)


@dataclass(frozen=True)
class Run:
    """One measured child process."""

    rows: int
    seconds: float
    cpu_seconds: float  # user + system: less sensitive than wall time to other load on the machine
    peak_rss_kib: int

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    @property
    def peak_rss_mib(self) -> float:
        return self.peak_rss_kib / 1024

    def describe(self) -> str:
        return (
            f"{self.rows:,} rows in {self.seconds:.1f}s = {self.rate:,.0f} rows/s "
            f"({self.cpu_seconds:.1f} CPU s), peak RSS {self.peak_rss_mib:,.0f} MiB"
        )


def run_child(
    args: list[str], rows: int, *, env: dict[str, str] | None = None, what: str, log: Path | None = None
) -> Run:
    """Run `args` to its end as a child process and measure it; SystemExit when it fails."""
    started = time.perf_counter()
    stderr = open(log, "wb") if log is not None else None  # noqa: SIM115
    try:
        proc = subprocess.Popen(args, env=env or child_env(), stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        if stderr is not None:
            stderr.close()
    seconds = time.perf_counter() - started
    if status != 0:
        tail = log.read_text()[-3000:] if log is not None else ""
        raise SystemExit(f"{what} failed with status {status}\n{tail}")
    return Run(rows, seconds, usage.ru_utime + usage.ru_stime, int(usage.ru_maxrss))


def worker_args(manifest: Path) -> list[str]:
    return [sys.executable, "-m", "mysqlcapture_worker.cli", "run", str(manifest), "--exit-at-end", "--plain-logs"]


def run_worker(
    port: int,
    workdir: Path,
    name: str,
    log_file: str,
    pos: int = 4,
    *,
    rows: int,
    decoder: str = "fast",
    jsonl: bool = False,
    spec: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> Run:
    """The worker end to end (read, decode, render, commit to Delta, or with `jsonl` write Maxwell's JSON lines to
    a file) as a child process."""
    manifest = bench_manifest(
        port,
        name,
        str(workdir / name),
        server_id=4343,
        start={"from": "position", "binlogFile": log_file, "binlogPosition": pos},
    )
    if jsonl:
        manifest["spec"]["sink"] = {"type": "jsonl", "jsonl": {"path": str(workdir / f"{name}.jsonl")}}
    manifest["spec"].update(spec or {})
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest))
    child = child_env(MYSQL_PASSWORD="root", MYSQLCAPTURE_DECODER=decoder, **(env or {}))
    run = run_child([*worker_args(path), "--log-level", "warning"], rows, env=child, what=f"worker ({name})")
    committed = _jsonl_rows(workdir / f"{name}.jsonl") if jsonl else _changelog_rows(workdir / name)
    if committed != rows:
        raise SystemExit(f"the worker committed {committed} row events, the binlog holds {rows}")
    return run


def _changelog_rows(uri: Path) -> int:
    from mysqlcapture_api.changelog import read_delta

    table = read_delta(str(uri), ["sql"])
    return table.num_rows - table.column("sql").drop_null().length()  # DDL events carry `sql`


def _jsonl_rows(path: Path) -> int:
    with open(path, "rb") as lines:
        return sum(1 for _ in lines)
