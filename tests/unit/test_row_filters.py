"""spec.rows: predicates read as written, rows dropped at the commit with their identities and checkpoints kept."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from mysqlcapture_api.columns import Columns
from mysqlcapture_api.row_predicate import PredicateError, parse
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_api.spec import RowRule
from mysqlcapture_worker.changes import ChangeEvent, RowBatch, RowTexts
from mysqlcapture_worker.column_rules import ColumnRuleError, ColumnRules
from mysqlcapture_worker.row_filters import RowFilters
from pydantic import ValidationError


def row(**data: object) -> dict[str, object]:
    return data


@pytest.mark.parametrize(
    ("predicate", "values", "holds"),
    [
        ("kind = 'debug'", {"kind": "debug"}, True),
        ("kind = 'debug'", {"kind": "info"}, False),
        ("kind != 'debug'", {"kind": None}, False),  # a NULL compares to nothing
        ("kind IS NULL", {"kind": None}, True),
        ("kind is not null", {"kind": "x"}, True),
        ("n > 3 AND n <= 5", {"n": 5}, True),
        ("n > 3 and n <= 5", {"n": 6}, False),
        ("amount >= 10.5", {"amount": 10.5}, True),
        ("name = /^cust-[0-9]+$/", {"name": "cust-42"}, True),
        ("name != /^cust/", {"name": "cust-42"}, False),
        ("note = 'it''s'", {"note": "it's"}, True),
        ("`we``ird` <> 'a'", {"we`ird": "b"}, True),
        ("n = 3", {"n": "3"}, True),  # a number compares with a number held as text
        ("flag = 'true'", {"flag": True}, True),
    ],
)
def test_conditions_hold_as_sql_would_say(predicate: str, values: dict[str, object], holds: bool) -> None:
    conditions = parse(predicate)
    assert all(c.holds(values.get(c.column)) for c in conditions) is holds


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("kind", "expected an operator"),
        ("kind ==", "expected a 'string' or a number at character 7"),
        ("a = 1 OR b = 2", "expected AND at character 7"),
        ("a < /x/", "a /regex/ only after = or !="),
        ("a = /(/", "does not compile"),
        ("a IS 3", "expected NULL"),
    ],
)
def test_a_predicate_that_does_not_parse_says_where(predicate: str, message: str) -> None:
    with pytest.raises(PredicateError, match=re.escape(message)):
        parse(predicate)
    with pytest.raises(ValidationError, match=re.escape(f"exclude\n  '{predicate}': ") + ".*" + re.escape(message)):
        RowRule.model_validate({"table": "a.b", "exclude": predicate})


def _batch(values: list[str], *, order_key: int = 100, commit: bool = True) -> RowBatch:
    data = pa.array([f'{{"id":{i},"kind":"{v}"}}' for i, v in enumerate(values)], pa.string())
    return RowBatch(
        order_key=order_key,
        database="shop",
        table="events",
        type="insert",
        ts=1,
        server_id=1,
        thread_id=None,
        xid=7,
        commit=commit,
        gtid=None,
        binlog_file="b.000001",
        binlog_pos=400,
        event_pos=500,
        row_index=10,
        pk_columns=("id",),
        texts=RowTexts.of(
            data,
            None,
            pa.array([f"[{i}]" for i in range(len(values))], pa.string()),
            pa.array([f"{i:016x}" for i in range(len(values))], pa.string()),
        ),
    )


def test_a_batch_is_cut_into_runs_of_kept_rows_with_their_own_identities() -> None:
    filters = RowFilters([RowRule.model_validate({"table": "shop.*", "exclude": "kind = 'debug'"})])
    out = filters.apply([_batch(["a", "debug", "debug", "b", "c", "debug"])])
    assert [len(b) for b in out] == [1, 2]
    first, second = out
    assert isinstance(first, RowBatch) and isinstance(second, RowBatch)
    assert (first.order_key, first.row_index, first.commit) == (100, 10, False)
    # The transaction's last row is dropped: the last row kept carries its commit.
    assert (second.order_key, second.row_index, second.commit) == (103, 13, True)
    assert second.data_json.to_pylist() == ['{"id":3,"kind":"b"}', '{"id":4,"kind":"c"}']
    assert second.pk_json is not None and second.pk_json.to_pylist() == ["[3]", "[4]"]
    assert [e.data_json for e in out[1].events()] == ['{"id":3,"kind":"b"}', '{"id":4,"kind":"c"}']


def test_a_json_null_document_is_not_null_to_a_filter() -> None:
    """`j IS NULL` holds for SQL NULL only: the JSON document null (marked json_null) is a value, its text `null`."""
    filters = RowFilters([RowRule.model_validate({"table": "shop.*", "exclude": "j IS NULL"})])
    batch = _batch(["a", "b", "c"])
    batch.texts = RowTexts.of(
        pa.array(['{"id":0,"j":null}', '{"id":1,"j":null}', '{"id":2,"j":{}}'], pa.string()),
        json_null=pa.array(['["j"]', None, None], pa.string()),
    )
    out = filters.apply([batch])
    assert [e.data_json for b in out for e in b.events()] == ['{"id":0,"j":null}', '{"id":2,"j":{}}']  # type: ignore[union-attr]
    assert [e.json_null for b in out for e in b.events()] == ['["j"]', None]  # type: ignore[union-attr]
    assert (
        RowFilters([RowRule.model_validate({"table": "shop.*", "include": "j = 'null'"})])
        .for_table("shop", "t")
        .keeps('{"j":null}', '["j"]')
    )  # type: ignore[union-attr]


def test_single_events_other_tables_and_ddl_pass_as_they_are() -> None:
    filters = RowFilters([RowRule.model_validate({"table": "shop.events", "include": "kind = 'keep'"})])
    event = _batch(["keep", "drop"]).events()
    other = _batch(["drop"])
    other.table = "orders"
    ddl = ChangeEvent(**_ddl())  # type: ignore[arg-type]
    out = filters.apply([*event, other, ddl])
    assert [(e.table, e.data_json) for e in out] == [
        ("events", '{"id":0,"kind":"keep"}'),
        ("orders", other.data_json),
        ("events", None),
    ]
    assert out[0].commit is True  # the transaction's last row (dropped) passed its commit on


def _ddl() -> dict[str, object]:
    return {
        "order_key": 300,
        "database": "shop",
        "table": "events",
        "type": "table-alter",
        "ts": 1,
        "server_id": 1,
        "thread_id": None,
        "xid": None,
        "commit": True,
        "gtid": None,
        "binlog_file": "b.000001",
        "binlog_pos": 900,
        "event_pos": 900,
        "row_index": 0,
        "pk_json": None,
        "pk_columns": (),
        "data_json": None,
        "old_json": None,
    }


def test_a_filter_on_a_ruled_or_missing_column_is_one_line() -> None:
    rules = ColumnRules(Columns.model_validate({"exclude": ["shop.events.kind"]}))
    filters = RowFilters([RowRule.model_validate({"table": "shop.events", "exclude": "kind = 'x'"})], rules)
    with pytest.raises(
        ColumnRuleError, match=r"spec\.rows: the filter of shop\.events reads kind, which spec\.columns"
    ):
        filters.apply([_batch(["x"])])
    table = TableDef("shop", "events", (ColumnDef("id", "int"), ColumnDef("sort", "varchar")), ("id",))
    with pytest.raises(ColumnRuleError, match=r"spec\.rows: shop\.events has no column kind"):
        RowFilters([RowRule.model_validate({"table": "shop.events", "exclude": "kind = 'x'"})]).check([table])
