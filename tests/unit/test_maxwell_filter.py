"""Maxwell's filter and exclude_columns settings carried over into spec.tables, spec.columns and spec.rows."""

from __future__ import annotations

import pytest
from mysqlcapture_api.maxwell_filter import MaxwellFilterError, convert
from mysqlcapture_api.spec import MySQLCaptureSpec
from pydantic import ValidationError


@pytest.mark.parametrize(
    ("text", "include", "exclude", "rows"),
    [
        ("exclude: *.*, include: foodb.tbl", ["foodb.tbl"], [], []),
        ("exclude: *.*, include: foodb.*, include: bar.t", ["foodb.*", "bar.t"], [], []),
        ("blacklist: bad_db.*", ["*.*"], ["bad_db.*"], []),
        ("exclude: bad_db.*, exclude: shop.tmp_x", ["*.*"], ["bad_db.*", "shop.tmp_x"], []),
        ("exclude: db.tbl.col = val", ["*.*"], [], [{"table": "db.tbl", "exclude": "`col` = 'val'"}]),
        ("exclude: db.tbl.col = /^debug/", ["*.*"], [], [{"table": "db.tbl", "exclude": "`col` = /^debug/"}]),
        ("exclude: db.tbl.col = null", ["*.*"], [], [{"table": "db.tbl", "exclude": "`col` IS NULL"}]),
        (
            "exclude: *.*, include: db.tbl.tenant = 42",
            ["db.tbl"],
            [],
            [{"table": "db.tbl", "include": "`tenant` = '42'"}],
        ),
        ("include: db.tbl", ["*.*"], [], []),  # every table is included already
        ("", ["*.*"], [], []),
    ],
)
def test_filters_that_say_the_same_here_convert(
    text: str, include: list[str], exclude: list[str], rows: list[dict[str, str]]
) -> None:
    got = convert(text, None)
    assert (got.include, got.exclude, got.rows) == (include, exclude, rows)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("exclude: foodb.*, include: foodb.tbl", "re-admits tables an earlier exclude removed"),
        ("include: foodb./tbl_[0-9]+/", "a /regex/ name has no glob here"),
        ("foodb.tbl", "expected include:, exclude: or blacklist:"),
        ("exclude: foodb", "expected db.table or db.table.column = value"),
        ("blacklist: db.tbl.col = 1", "blacklist takes databases and tables"),
        ("exclude: *.*", "excludes every table"),
        ("include: db.tbl.col = 1", "an include of values re-admits rows"),
    ],
)
def test_what_cannot_be_said_here_is_refused_with_the_rule(text: str, message: str) -> None:
    with pytest.raises(MaxwellFilterError, match=message.replace(".", r"\.").replace("(", r"\(")):
        convert(text, None)


def _spec(**extra: object) -> dict[str, object]:
    return {
        "source": {"host": "h", "user": "u", "passwordFrom": {"env": "P"}, "serverId": 9},
        "sink": {"type": "delta", "delta": {"uri": "/d"}},
        **extra,
    }


def test_the_spec_takes_maxwells_settings_and_refuses_two_table_filters() -> None:
    spec = MySQLCaptureSpec.model_validate(
        _spec(
            maxwell={"filter": "exclude: *.*, include: shop.orders, exclude: shop.orders.kind = debug",
                     "excludeColumns": "password_hash, ssn"},
            columns={"exclude": ["*.*.token"]},
            rows=[{"table": "shop.orders", "include": "tenant = 4"}],
        )
    )  # fmt: skip
    tables, columns, rows = spec.effective()
    assert (tables.include, tables.exclude) == (("shop.orders",), ())
    assert columns.exclude == ("*.*.token", "*.*.password_hash", "*.*.ssn")
    assert [(r.table, r.include, r.exclude) for r in rows] == [
        ("shop.orders", "tenant = 4", None),
        ("shop.orders", None, "`kind` = 'debug'"),
    ]
    with pytest.raises(ValidationError, match="re-admits tables"):
        MySQLCaptureSpec.model_validate(_spec(maxwell={"filter": "exclude: a.*, include: a.b"}))
    with pytest.raises(ValidationError, match=r"spec\.maxwell\.filter names the tables already"):
        MySQLCaptureSpec.model_validate(_spec(maxwell={"filter": "exclude: a.b"}, tables={"include": ["x.*"]}))
