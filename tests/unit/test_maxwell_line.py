"""Maxwell's JSON lines: fields by Maxwell's output options, in Maxwell's order; numbers and strings in Java's text.

Expected texts are Maxwell 1.44.1's own output (tests/maxwell/recorded-*.jsonl) or Java's documented
`Double.toString`/`Float.toString`/`BigDecimal.toString`.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

import pytest
from mysqlcapture_api.javatext import jackson_string, java_decimal, java_double, java_float, upper_escapes
from mysqlcapture_api.sinks import JsonlSink
from mysqlcapture_worker.changes import ChangeEvent
from mysqlcapture_worker.decode.values import float32_text
from mysqlcapture_worker.sinks.maxwell import maxwell_line, raw_members, row_line

pytestmark = pytest.mark.unit

ALL = JsonlSink(
    output_binlog_position=True,
    output_gtid_position=True,
    output_server_id=True,
    output_thread_id=True,
    output_primary_keys=True,
    output_primary_key_columns=True,
    output_ddl=True,
    output_order_key=True,
)


def _row(**changes: object) -> ChangeEvent:
    ev = ChangeEvent(
        order_key=5,
        database="shop",
        table="orders",
        type="update",
        ts=1,
        server_id=9,
        thread_id=7,
        xid=77,
        commit=False,
        gtid="0-1-5",
        binlog_file="mysql-bin.000001",
        binlog_pos=100,
        event_pos=200,
        row_index=3,
        pk_json="[1]",
        pk_columns=("id",),
        data_json='{"id":1,"note":null,"v":2.5}',
        old_json='{"v":1.0E20}',
    )
    return replace(ev, **changes)  # type: ignore[arg-type]


def test_maxwell_default_options_print_maxwell_default_fields() -> None:
    assert maxwell_line(_row(), JsonlSink()) == (
        b'{"database":"shop","table":"orders","type":"update","ts":1,"xid":77,"xoffset":3,'
        b'"data":{"id":1,"note":null,"v":2.5},"old":{"v":1.0E20}}'
    )


def test_every_option_in_maxwells_order() -> None:
    assert maxwell_line(_row(commit=True), ALL) == (
        b'{"database":"shop","table":"orders","type":"update","ts":1,"xid":77,"commit":true,'
        b'"position":"mysql-bin.000001:200","gtid":"0-1-5","server_id":9,"thread_id":7,"primary_key":[1],'
        b'"primary_key_columns":["id"],"data":{"id":1,"note":null,"v":2.5},"old":{"v":1.0E20},"_order_key":5}'
    )


def test_xoffset_only_before_the_commit_row_and_commit_info_can_be_left_out() -> None:
    assert b'"xoffset"' not in (maxwell_line(_row(commit=True), JsonlSink()) or b"")
    line = maxwell_line(_row(), JsonlSink(output_commit_info=False)) or b""
    assert b'"xid"' not in line and b'"xoffset"' not in line and b'"commit"' not in line
    assert b'"xoffset"' not in (maxwell_line(_row(), JsonlSink(output_xoffset=False)) or b"")


def test_output_nulls_false_drops_null_members_and_keeps_values_as_written() -> None:
    line = maxwell_line(_row(), JsonlSink(output_nulls=False)) or b""
    assert line.endswith(b'"data":{"id":1,"v":2.5},"old":{"v":1.0E20}}')


def test_output_nulls_false_keeps_a_json_null_document() -> None:
    """A JSON column's document `null` is a value (Maxwell's RawJSONString "null"), not SQL NULL: kept."""
    row = _row(
        data_json='{"id":1,"note":null,"j":null,"k":null}',
        old_json='{"j":null,"k":{}}',
        json_null='["j"]',
        old_json_null='["j"]',
    )
    line = maxwell_line(row, JsonlSink(output_nulls=False)) or b""
    assert line.endswith(b'"data":{"id":1,"j":null},"old":{"j":null,"k":{}}}')
    assert (maxwell_line(row, JsonlSink()) or b"").endswith(b'"data":{"id":1,"note":null,"j":null,"k":null},'
                                                          b'"old":{"j":null,"k":{}}}')  # fmt: skip


def test_ddl_lines_only_with_output_ddl_and_in_ddlmaps_shape() -> None:
    create = _row(
        type="table-create",
        sql="CREATE TABLE t (id int)",
        data_json='{"database":"shop","charset":"utf8mb4","table":"t","primary-key":[],"columns":[]}',
        old_json=None,
        xid=None,
    )
    assert maxwell_line(create, JsonlSink()) is None
    assert maxwell_line(create, JsonlSink(output_ddl=True, output_binlog_position=True)) == (
        b'{"type":"table-create","database":"shop","table":"orders","def":{"database":"shop","charset":"utf8mb4",'
        b'"table":"t","primary-key":[],"columns":[]},"ts":1000,"sql":"CREATE TABLE t (id int)",'
        b'"position":"mysql-bin.000001:200"}'
    )
    database = replace(create, type="database-create", table=None, data_json='{"database":"x","charset":"latin1"}')
    assert maxwell_line(database, JsonlSink(output_ddl=True)) == (
        b'{"type":"database-create","database":"shop","charset":"latin1","ts":1000,"sql":"CREATE TABLE t (id int)"}'
    )
    # Not Maxwell's (it writes nothing for a TRUNCATE): only when asked for, a DDL line with no definition.
    truncate = replace(create, type="table-truncate", data_json=None, sql="TRUNCATE TABLE orders")
    assert maxwell_line(truncate, JsonlSink(output_ddl=True)) is None
    assert maxwell_line(truncate, JsonlSink(output_truncate=True)) == (
        b'{"type":"table-truncate","database":"shop","table":"orders","ts":1000,"sql":"TRUNCATE TABLE orders"}'
    )


def test_envelope_strings_are_escaped_as_jackson_escapes_them() -> None:
    line = maxwell_line(_row(table="t\U0001f600\x01"), JsonlSink()) or b""
    assert b'"table":"t\\uD83D\\uDE00\\u0001"' in line


@pytest.mark.parametrize(
    "value,text",
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (4.2341, "4.2341"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"),
        (5e-324, "4.9E-324"),
        (0.30000000000000004, "0.30000000000000004"),
        (1e20, "1.0E20"),
        (1e15, "1.0E15"),
        (123456789012345678.0, "1.2345678901234568E17"),
        (-100.0, "-100.0"),
        (0.001, "0.001"),
        (0.0009999, "9.999E-4"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


@pytest.mark.parametrize(
    "value,text",
    [
        (1.1, "1.1"),
        (3.4028234e38, "3.4028235E38"),
        (1.4e-45, "1.4E-45"),
        (16777216.0, "1.6777216E7"),
        (1e10, "1.0E10"),
        (3.14159265358979, "3.1415927"),
        (123456.7, "123456.7"),
        (-0.0, "-0.0"),
    ],
)
def test_java_float(value: float, text: str) -> None:
    raw = struct.pack("<f", value)
    assert java_float(raw, float32_text(raw) or "") == text


@pytest.mark.parametrize(
    "mysql,java",
    [
        ("0.0000000000", "0E-10"),
        ("-0.000000000000000000000000000001", "-1E-30"),
        ("0.000000123", "1.23E-7"),
        ("0.000001", "0.000001"),
        ("12.50", "12.50"),
        ("-7.00", "-7.00"),
        ("12345678901234567890", "12345678901234567890"),
    ],
)
def test_java_decimal(mysql: str, java: str) -> None:
    assert java_decimal(mysql) == java


def test_jackson_escapes_and_orjson_escapes_kept_apart() -> None:
    assert jackson_string("emoji \U0001f600 ok") == b'"emoji \\uD83D\\uDE00 ok"'
    assert jackson_string("\x1f\x7f\u00e9") == b'"\\u001F\x7f\xc3\xa9"'
    # a literal backslash before "u001f" is text, not an escape
    assert upper_escapes(b'"\\\\u001f \\u001f"') == b'"\\\\u001f \\u001F"'


def test_raw_members_keep_each_value_as_written() -> None:
    assert raw_members('{"a": 1e3, "b" : [1, 2], "c":"x"}') == [("a", "1e3"), ("b", "[1, 2]"), ("c", '"x"')]


def test_a_referential_action_is_a_line_of_its_own_type_with_the_action_as_data() -> None:
    """A foreign key's action the server did not log (engine/referential.py): one line after the parent's, its
    `data` the action, read like a row event's (no primary key: it names rows by their foreign-key values)."""
    data = (
        '{"constraint":"orders_customer","on":"delete","action":"CASCADE","parent":{"database":"shop",'
        '"table":"customers","columns":["id"]},"columns":["customer"],"keys":[{"old":[1]}]}'
    )
    event = _row(type="referential-action", pk_json=None, pk_columns=(), data_json=data, old_json=None)
    assert maxwell_line(event, JsonlSink()) == (
        b'{"database":"shop","table":"orders","type":"referential-action","ts":1,"xid":77,"xoffset":3,"data":'
        + data.encode()
        + b"}"
    )


def _random_batch(rnd: Any) -> Any:
    import pyarrow as pa
    from mysqlcapture_worker.changes import RowBatch, RowTexts

    n = rnd.choice([1, 2, 3, 17, 200])
    kind = rnd.choice(["insert", "update", "delete", "bootstrap-insert"])
    keyed = rnd.random() < 0.8
    notes = ["null", '"a\\\\\\"b"', '"é"']
    data = ["{" + f'"id":{i},"note":{rnd.choice(notes)},"v":{rnd.random()!r}' + "}" for i in range(n)]
    old = [rnd.choice(["{}", '{"v":1.0E20}', '{"note":null}', None]) for _ in range(n)] if kind == "update" else None
    if rnd.random() < 0.2:  # a validity bitmap: Arrow columns with nulls (rendered as `row_line` renders None)
        data[rnd.randrange(n)] = None  # type: ignore[call-overload]
    batch = RowBatch(
        order_key=rnd.choice([0, 1, 10**12]),
        database=rnd.choice(["shop", 'we"ird\\db', "δb"]),
        table=rnd.choice(["orders", "t\u0001"]),
        type=kind,
        ts=rnd.randint(0, 2**31),
        server_id=rnd.randint(1, 2**32 - 1),
        thread_id=rnd.choice([None, 42]),
        xid=rnd.choice([None, 0, 77]),
        commit=rnd.random() < 0.5,
        gtid=rnd.choice([None, "0-1-5", "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"]),
        binlog_file="mysql-bin.000001",
        binlog_pos=100,
        event_pos=rnd.randint(4, 2**32),
        row_index=rnd.randint(0, 1000),
        pk_columns=("id", "k") if keyed else (),
        texts=RowTexts.of(
            pa.array(data, pa.string()),
            pa.array(old, pa.string()) if old is not None else None,
            pa.array([f'[{i},"k"]' for i in range(n)], pa.string()) if keyed else None,
            pa.array(["h"] * n, pa.string()) if keyed else None,
        ),
        row_step=rnd.choice([1, -1]),
    )
    if rnd.random() < 0.3 and n > 1:
        batch = batch.split(n // 2)[rnd.choice([0, 1])]
    return batch


def test_batch_lines_are_the_lines_of_its_events_under_every_option() -> None:
    """Runs of RowBatches rendered by the compiled renderer (the JSON-lines sink's path) are byte for byte what
    `row_line` writes for each of their events, on randomized batches, mixed with single events, under randomized
    output options."""
    import random

    from mysqlcapture_worker.sinks.maxwell import lines

    rnd = random.Random(35)
    flags = [name for name, field in JsonlSink.model_fields.items() if field.annotation is bool]
    for trial in range(300):
        events: list[Any] = [
            _row(order_key=rnd.choice([0, 9]), commit=rnd.random() < 0.5) if rnd.random() < 0.2 else _random_batch(rnd)
            for _ in range(rnd.randint(1, 5))
        ]
        out = JsonlSink(**{name: rnd.random() < 0.5 for name in flags})
        singles = [one for e in events for one in (e.events() if not isinstance(e, ChangeEvent) else [e])]
        want = b"".join(row_line(e, out) + b"\n" for e in singles)
        assert lines(events, out) == want, (trial, out)


def test_a_row_of_a_table_without_a_primary_key_has_empty_key_arrays_as_maxwells() -> None:
    """Maxwell writes `"primary_key":[]` and `"primary_key_columns":[]` for such a row; they were left out."""
    line = maxwell_line(_row(pk_json=None, pk_columns=(), commit=True), ALL) or b""
    assert b'"thread_id":7,"primary_key":[],"primary_key_columns":[],"data":' in line, line
    assert b'"primary_key"' not in (maxwell_line(_row(pk_json=None, pk_columns=()), JsonlSink()) or b"")
