"""Which tables a capture includes: `db.table` glob patterns, exclusions winning over inclusions."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mysqlcapture_worker.column_rules import ColumnRules


class TableFilter:
    """Include/exclude globs over "database.table"; the worker's own metadata database is never captured."""

    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str] = (),
        internal_db: str | None = None,
        columns: ColumnRules | None = None,
    ):
        self.columns = columns  # spec.columns: what leaves the database of each included table's columns
        self._include = [re.compile(fnmatch.translate(p)) for p in include]
        self._exclude = [re.compile(fnmatch.translate(p)) for p in exclude]
        self._include_dbs = [re.compile(fnmatch.translate(p.split(".", 1)[0])) for p in include]
        self._internal_db = internal_db
        self.includes = lru_cache(maxsize=65536)(self._includes)

    def _includes(self, database: str, table: str) -> bool:
        if database == self._internal_db or database in ("mysql", "sys", "performance_schema"):
            return False
        name = f"{database}.{table}"
        if any(p.match(name) for p in self._exclude):
            return False
        return any(p.match(name) for p in self._include)

    def includes_database(self, database: str) -> bool:
        """Whether any table of `database` could be included (for database-level DDL events)."""
        if database == self._internal_db or database in ("mysql", "sys", "performance_schema"):
            return False
        return any(p.match(database) for p in self._include_dbs)
