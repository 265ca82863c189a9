"""The worker's foreign-key actions, as pure functions: which rows events get them, and the keys they carry."""

from __future__ import annotations

import pytest
from mysqlcapture_api.schema.model import ForeignKeyDef
from mysqlcapture_worker.decode import ABSENT
from mysqlcapture_worker.engine.referential import PartialImage, action_of, keys_of, logged_or_none
from mysqlcapture_worker.replication.events import RowsKind

pytestmark = pytest.mark.unit

FK = ForeignKeyDef("fk", ("pid",), "d", "p", ("id",), on_delete="CASCADE", on_update="SET NULL")
NAMES = ("id", "name")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (0x01, False),  # MariaDB, MySQL with InnoDB's own foreign keys: the actions are not in the binlog
        (0x11, True),  # MySQL 9.6+: USE_SQL_FOREIGN_KEY_F, the child rows are logged before the parent's
        (0x03, True),  # foreign_key_checks=0: NO_FOREIGN_KEY_CHECKS_F, no action ran
    ],
)
def test_the_rows_events_flags_say_whether_anything_is_left_to_write(flags: int, expected: bool) -> None:
    assert logged_or_none(flags) is expected


def test_an_action_only_where_it_changes_rows() -> None:
    assert action_of(FK, RowsKind.DELETE) == "CASCADE"
    assert action_of(FK, RowsKind.UPDATE) == "SET NULL"
    assert action_of(FK, RowsKind.INSERT) is None
    restrict = ForeignKeyDef("r", ("pid",), "d", "p", ("id",), on_delete="RESTRICT", on_update="SET DEFAULT")
    assert (action_of(restrict, RowsKind.DELETE), action_of(restrict, RowsKind.UPDATE)) == (None, None)


def test_keys_name_each_parent_row_the_action_reaches() -> None:
    deleted = [([1, "a"], None), ([None, "b"], None), ([2, "c"], None)]  # a NULL key is referenced by no row
    assert keys_of(FK, NAMES, deleted, RowsKind.DELETE) == [{"old": [1]}, {"old": [2]}]
    updated = [([1, "a"], [1, "A"]), ([2, "b"], [5, "b"]), ([3, "c"], [ABSENT, "C"])]  # absent: kept its value
    assert keys_of(FK, NAMES, updated, RowsKind.UPDATE) == [{"old": [2], "new": [5]}]


def test_a_parent_image_without_the_referenced_columns_is_said() -> None:
    with pytest.raises(PartialImage):
        keys_of(FK, NAMES, [([ABSENT, "a"], None)], RowsKind.DELETE)
    with pytest.raises(PartialImage):
        keys_of(FK, ("name",), [(["a"], None)], RowsKind.DELETE)
