"""Maxwell's lines against ours, field by field: the same fields in the same order, every value byte for byte but
for the differences differences.py lists; values that depend on when and where the workload ran compared by type."""

from __future__ import annotations

import json

from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.sinks.maxwell import raw_members

from tests.maxwell import differences

# Values that depend on when and where the workload ran (Maxwell's own writes shift binlog offsets and GTIDs; the
# connection id): compared by type.
VOLATILE = {"ts", "xid", "position", "gtid", "thread_id"}
ROWS_EVENTS = {"Write_rows", "Update_rows", "Delete_rows", "Write_rows_v1", "Update_rows_v1", "Delete_rows_v1"}


def _compare_cells(where: str, table: str, field: str, theirs: str, ours: str, problems: list[str]) -> None:
    t, o = dict(raw_members(theirs)), dict(raw_members(ours))
    for column in [*t, *(c for c in o if c not in t)]:
        if t.get(column) != o.get(column) and (table, column) not in differences.VALUES:
            problems.append(f"{where} {field}.{column}: Maxwell {t.get(column)} | ours {o.get(column)}")


def _documented_old(table: str, theirs: dict[str, str], ours: dict[str, str]) -> bool:
    """Only `old` differs, and only in documented cells (Maxwell renders both values alike, so prints no old)."""
    if [k for k in theirs if k != "old"] != [k for k in ours if k != "old"]:
        return False
    cells = {c for field in (theirs, ours) if "old" in field for c, _ in raw_members(field["old"])}
    return all((table, c) in differences.VALUES for c in cells)


def compare(theirs: list[str], ours: list[str], positions: dict[str, str], label: str = "line") -> list[str]:
    """What differs between Maxwell's lines and ours, line by line (`label` names where a line is)."""
    problems: list[str] = []
    assert len(ours) == len(theirs), f"{label}: {len(ours)} lines, Maxwell printed {len(theirs)}"
    for n, (their_line, our_line) in enumerate(zip(theirs, ours, strict=True)):
        t, o = dict(raw_members(their_line)), dict(raw_members(our_line))
        table = json.loads(t.get("table", "null"))
        kind = json.loads(t["type"])
        where = f"{label} {n + 1} ({kind} {table})"
        assert (t["type"], t["database"], t.get("table")) == (o["type"], o["database"], o.get("table")), where
        if list(t) != list(o) and not _documented_old(table, t, o):
            problems.append(f"{where}: fields {list(t)} | ours {list(o)}")
        for key, value in t.items():
            mine = o.get(key)
            if mine is None:
                continue
            if key in VOLATILE:
                if type(json.loads(value)) is not type(json.loads(mine)):
                    problems.append(f"{where} {key}: Maxwell {value} | ours {mine}")
            elif key in ("data", "old") and "sql" not in t:
                _compare_cells(where, table, key, value, mine, problems)
            elif key in ("def", "old") and (table in differences.DEFS or json.loads(value) == json.loads(mine)):
                continue  # a documented DDL difference, or Maxwell's own order of def's members (DEF_ORDER)
            elif value != mine:
                problems.append(f"{where} {key}: Maxwell {value[:300]} | ours {mine[:300]}")
        # Maxwell's position: where the event that carried the row (or the DDL) starts.
        position = json.loads(o["position"])
        expected = {"Query"} if "sql" in o else ROWS_EVENTS
        if positions.get(position) not in expected:
            problems.append(f"{where}: position {position} starts a {positions.get(position)} event")
    return problems


def event_starts(srv: PrivateServer) -> dict[str, str]:
    """ "file:offset" -> event type, for every event in the server's binlog files."""
    out: dict[str, str] = {}
    for row in srv.query("SHOW BINARY LOGS"):
        for event in srv.query(f"SHOW BINLOG EVENTS IN '{row[0]}'"):
            out[f"{row[0]}:{event[1]}"] = str(event[2])
    return out
