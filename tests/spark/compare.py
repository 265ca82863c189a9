"""Current-state tables read back and compared, value by value, with `SELECT *` rendered by tests.replay."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

Key = tuple[str, str]
META_PREFIX = "_cdc_"


def current_tables(output: str) -> dict[Key, dict[str, dict[str, Any]]]:
    """Every live (not dropped) current-state table: rows keyed as tests.replay keys them, metadata left out."""
    from mysqlcapture_compaction import targets

    out: dict[Key, dict[str, dict[str, Any]]] = {}
    root = Path(output) / "tables"
    for db_dir in sorted(root.iterdir()) if root.is_dir() else []:
        for table_dir in sorted(db_dir.iterdir()):
            if targets.is_dropped(str(table_dir)):
                continue
            rows = DeltaTable(str(table_dir)).to_pyarrow_table().to_pylist()
            keyed = {}
            for row in rows:
                key = json.dumps(json.loads(row["_cdc_pk"], parse_float=Decimal), default=str)
                keyed[key] = {k: v for k, v in row.items() if not k.startswith(META_PREFIX)}
            out[(db_dir.name, table_dir.name)] = keyed
    return out


def same_value(text: str | None, want: Any) -> bool:
    """A current-state column's text against a value as tests.replay.maxwell_value renders the source's."""
    if want is None or text is None:
        return want is None and text is None
    if isinstance(want, bool):
        return text == ("true" if want else "false")
    if isinstance(want, int | float | Decimal):
        return Decimal(text) == Decimal(str(want))
    if isinstance(want, list | dict):
        return json.loads(text, parse_float=Decimal) == want
    return text == want


def assert_state_equals_source(
    state: dict[Key, dict[str, dict[str, Any]]], source: dict[Key, dict[str, dict[str, Any]]]
) -> None:
    assert sorted(state) == sorted(source), f"tables differ: compacted {sorted(state)} source {sorted(source)}"
    for key, rows in source.items():
        got = state[key]
        assert sorted(got) == sorted(rows), (
            f"{key}: keys differ: missing {set(rows) - set(got)}, extra {set(got) - set(rows)}"
        )
        for pk, expected in rows.items():
            actual = got[pk]
            assert set(actual) == set(expected), f"{key} {pk}: columns {sorted(actual)} vs source {sorted(expected)}"
            for col, want in expected.items():
                assert same_value(actual[col], want), f"{key} {pk} {col}: compacted {actual[col]!r}, source {want!r}"
