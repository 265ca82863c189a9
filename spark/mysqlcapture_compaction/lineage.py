"""Which column of an older definition a column of a newer one was, across ALTERs (renames, drops, adds)."""

from __future__ import annotations

import itertools

from mysqlcapture_compaction.definitions import column_renames


def step(old_cols: list[str], new_cols: list[str], sql: str | None) -> dict[str, str | None]:
    """new name -> old name (None: added) across one ALTER: the renames its statement names, else (no statement:
    a change log written without one) `renames`' guess from the names alone."""
    renamed = column_renames(sql) if sql else renames(old_cols, new_cols)
    renamed = {new: old for new, old in renamed.items() if old in old_cols}
    return {c: renamed.get(c, c if c in old_cols and c not in renamed.values() else None) for c in new_cols}


def lineage(cols: list[list[str]], sqls: list[str | None]) -> dict[str, str | None]:
    """For each column of the last list, its name in the first (None: added since); one list per definition, and
    the statement that led from each to the next."""
    mapping: dict[str, str | None] = {c: c for c in cols[0]}
    for (older, newer), sql in zip(itertools.pairwise(cols), sqls, strict=False):
        across = step(older, newer, sql)
        mapping = {c: (mapping.get(old) if old is not None else None) for c, old in across.items()}
    return mapping


def renames(old_cols: list[str], new_cols: list[str]) -> dict[str, str]:
    """new name -> old name for columns an ALTER renamed (RENAME/CHANGE COLUMN).

    Names on both sides are the same columns (MODIFY ... AFTER only moves them). The names that appear only on
    one side pair up in order when there are as many of each (a rename); otherwise they were dropped and added.
    """
    gone = [c for c in old_cols if c not in new_cols]
    came = [c for c in new_cols if c not in old_cols]
    return dict(zip(came, gone, strict=True)) if len(gone) == len(came) else {}
