"""spec.rows applied: the row events of filtered tables that are not written, dropped before the sink's commit.

Rows are dropped where every sink's events pass (`Committer.commit`), after ordering keys and checkpoints are
given out: the positions stay the source's, so a restart resumes exactly where it would have without filters, and
a kept row keeps its identity. A filter reads a row's `data` as it is written (an update's new values, a delete's
old ones), so its columns must not be ruled by spec.columns. When a transaction's last row is dropped, the last
row kept before it in the same commit carries `commit: true` (Maxwell marks the last row it writes).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache

import orjson
from mysqlcapture_api.row_predicate import Condition
from mysqlcapture_api.row_predicate import parse as parse_predicate
from mysqlcapture_api.schema.model import TableDef
from mysqlcapture_api.spec import RowRule

from mysqlcapture_worker.changes import Event, RowBatch
from mysqlcapture_worker.column_rules import ColumnRuleError, ColumnRules

ROW_TYPES = frozenset({"insert", "update", "delete", "bootstrap-insert"})


class TableRows:
    """One table's filters: a row is kept when no exclude holds and every include does."""

    def __init__(self, excludes: list[tuple[Condition, ...]], includes: list[tuple[Condition, ...]]) -> None:
        self.excludes = excludes
        self.includes = includes
        self.columns = {c.column.lower() for cs in (*excludes, *includes) for c in cs}

    def keeps(self, data_json: str | None, json_null: str | None = None) -> bool:
        """Whether the row `data_json` passes; `json_null` (the event's) names the JSON columns whose `null` is the
        JSON document null: not NULL (IS NULL is false), its text `null`, as a document is its text."""
        if data_json is None:
            return True
        raw = orjson.loads(data_json)
        row = {k.lower(): v for k, v in raw.items() if k.lower() in self.columns}
        if json_null is not None:
            row |= {k.lower(): "null" for k in orjson.loads(json_null) if k.lower() in self.columns}

        def holds(conditions: tuple[Condition, ...]) -> bool:
            return all(c.holds(row.get(c.column.lower())) for c in conditions)

        return not any(holds(cs) for cs in self.excludes) and all(holds(cs) for cs in self.includes)


class RowFilters:
    """spec.rows, compiled; `apply` drops the filtered rows of a commit's events."""

    def __init__(self, rules: Sequence[RowRule], columns: ColumnRules | None = None) -> None:
        self._rules = [
            (
                re.compile(fnmatch.translate(r.table)),
                r.exclude is not None,
                parse_predicate(r.exclude or r.include or ""),
            )
            for r in rules
        ]
        self._columns = columns
        self.for_table = lru_cache(maxsize=4096)(self._for_table)

    def _for_table(self, database: str, table: str) -> TableRows | None:
        name = f"{database}.{table}"
        excludes = [c for pattern, exclude, c in self._rules if exclude and pattern.match(name)]
        includes = [c for pattern, exclude, c in self._rules if not exclude and pattern.match(name)]
        if not excludes and not includes:
            return None
        found = TableRows(excludes, includes)
        if self._columns is not None:
            for column in sorted(found.columns):
                if self._columns.action(database, table, column) is not None:
                    raise ColumnRuleError(
                        f"spec.rows: the filter of {name} reads {column}, which spec.columns rules: a filter reads "
                        "values as they are written, so filter on a column left as it is"
                    )
        return found

    def check(self, tables: Iterable[TableDef]) -> list[str]:
        """Each filtered table's line for `mysqlcapture check`; ColumnRuleError for a filter naming a column its
        table does not have, or one spec.columns rules."""
        out = []
        for t in sorted(tables, key=lambda t: (t.database, t.name)):
            rows = self.for_table(t.database, t.name)
            if rows is None:
                continue
            have = {c.name.lower() for c in t.columns}
            missing = sorted(rows.columns - have)
            if missing:
                raise ColumnRuleError(
                    f"spec.rows: {t.database}.{t.name} has no column {', '.join(missing)}: fix the filter's column name"
                )
            out.append(
                f"rows {t.database}.{t.name}: {len(rows.excludes)} exclude and {len(rows.includes)} include filters"
            )
        return out

    def apply(self, events: Sequence[Event]) -> list[Event]:
        """`events` without the rows the filters leave out (a batch is cut into runs of kept rows)."""
        out: list[Event] = []
        for e in events:
            rows = self.for_table(e.database, e.table) if e.table is not None and e.type in ROW_TYPES else None
            if rows is None:
                out.append(e)
            elif type(e) is RowBatch:
                self._batch(e, rows, out)
            elif rows.keeps(e.data_json, e.json_null):
                out.append(e)
            elif e.commit:
                _pass_commit(e, out)
        return out

    def _batch(self, batch: RowBatch, rows: TableRows, out: list[Event]) -> None:
        marks = batch.json_null.to_pylist() if batch.json_null is not None else [None] * len(batch)
        kept = [rows.keeps(text, marked) for text, marked in zip(batch.data_json.to_pylist(), marks, strict=True)]
        n = len(kept)
        start = None
        for i in range(n + 1):
            if i < n and kept[i]:
                if start is None:
                    start = i
                continue
            if start is not None:
                out.append(_run(batch, start, i))
                start = None
        if batch.commit and kept and not kept[-1]:
            _pass_commit(batch, out)


def _run(batch: RowBatch, start: int, stop: int) -> RowBatch:
    """Rows start..stop-1 of `batch`, with their own ordering keys and row indexes."""

    return replace(
        batch,
        order_key=batch.order_key + start if batch.order_key else 0,
        row_index=batch.row_index + start * batch.row_step,
        commit=batch.commit and stop == len(batch),
        texts=batch.texts.slice(start, stop - start),
    )


def _pass_commit(dropped: Event, out: list[Event]) -> None:
    """The dropped last row of a transaction: its `commit` goes to the last row kept before it in this commit."""
    for e in reversed(out):
        if (e.binlog_file, e.binlog_pos, e.xid) != (dropped.binlog_file, dropped.binlog_pos, dropped.xid):
            return
        if e.type in ROW_TYPES:
            e.commit = True
            return
