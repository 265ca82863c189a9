"""Snapshot pieces without a server: chunk SQL, packed rows, the job checkpointed, progress figures."""

from __future__ import annotations

import io
import random
import struct

import pyarrow as pa
import pytest
from mysqlcapture_api.changelog import pk_hash
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_worker.changes import ChangeEvent, RowBatch, RowTexts
from mysqlcapture_worker.engine import render
from mysqlcapture_worker.metrics import WorkerMetrics
from mysqlcapture_worker.positions import Ahead, Position, SnapshotJob
from mysqlcapture_worker.replication.events import BinlogEvent, HeartbeatEvent, RotateEvent, XidEvent
from mysqlcapture_worker.sinks.delta import events_to_arrow
from mysqlcapture_worker.snapshot.control import at_frontier
from mysqlcapture_worker.snapshot.fast import ResultReader, rendered_columns, text_renderer
from mysqlcapture_worker.snapshot.parallel import Fences
from mysqlcapture_worker.snapshot.progress import Progress
from mysqlcapture_worker.snapshot.reader import key_plan
from mysqlcapture_worker.snapshot.text_values import compile_row_converter
from prometheus_client import CollectorRegistry

pytestmark = pytest.mark.unit

TABLE = TableDef(
    database="d",
    name="t",
    columns=(
        ColumnDef("a", "int", nullable=False),
        ColumnDef("b", "varchar", charset="utf8mb4", nullable=False),
        ColumnDef("c", "decimal", precision=10, scale=2),
        ColumnDef("f", "bit", length=1),
        ColumnDef("z", "blob"),
    ),
    primary_key=("a", "b"),
)


def test_keyset_select_spells_out_the_row_comparison() -> None:
    plan = key_plan(TABLE, compile_row_converter(TABLE, pack=False), [])
    assert (plan.kind, plan.key) == ("primary", ("a", "b"))
    sql, args = plan.select((7, "x"), 100)
    assert sql == (
        "SELECT `a`, `b`, `c`, `f`, `z` FROM `d`.`t` WHERE ((`a` > %s) OR (`a` = %s AND `b` > %s)) "
        "ORDER BY `a`, `b` LIMIT 100"
    )
    assert args == [7, 7, "x"]
    first, _ = plan.select(None, 5)
    assert first.endswith("FROM `d`.`t` ORDER BY `a`, `b` LIMIT 5")
    # A range (after, upto]: the upper end is the negation of the same comparison.
    ranged, args = plan.select((7, "x"), 10, upto=(9, "y"))
    assert ranged.endswith(
        "WHERE ((`a` > %s) OR (`a` = %s AND `b` > %s)) AND NOT ((`a` > %s) OR (`a` = %s AND `b` > %s)) "
        "ORDER BY `a`, `b` LIMIT 10"
    )
    assert args == [7, 7, "x", 9, 9, "y"]
    upto_only, args = plan.select(None, 10, upto=(9, "y"))
    assert "WHERE NOT ((`a` > %s) OR (`a` = %s AND `b` > %s))" in upto_only and args == [9, 9, "y"]


def test_range_boundaries_are_found_on_the_index_by_the_server() -> None:
    plan = key_plan(TABLE, compile_row_converter(TABLE, pack=False), [])
    sql, args = plan.boundary((7, "x"), (9, "y"), 1000)
    assert sql == (
        "SELECT `a`, `b` FROM `d`.`t` WHERE ((`a` > %s) OR (`a` = %s AND `b` > %s)) AND NOT ((`a` > %s) OR "
        "(`a` = %s AND `b` > %s)) ORDER BY `a`, `b` LIMIT 1 OFFSET 999"
    )
    assert args == [7, 7, "x", 9, 9, "y"]
    assert plan.last() == ("SELECT `a`, `b` FROM `d`.`t` ORDER BY `a` DESC, `b` DESC LIMIT 1", [])
    sql, args = plan.last((1, "x"))
    assert sql == (
        "SELECT `a`, `b` FROM `d`.`t` WHERE ((`a` > %s) OR (`a` = %s AND `b` > %s)) ORDER BY `a` DESC, `b` DESC LIMIT 1"
    )
    assert args == [1, 1, "x"]


@pytest.mark.parametrize(
    ("unique_keys", "kind", "key"),
    [
        ([("c",)], "none", ()),  # c is nullable: not a key that orders every row
        ([("b",), ("a", "b")], "unique", ("b",)),  # the shortest NOT NULL unique key
        ([], "none", ()),
    ],
    ids=["nullable-unique", "unique", "none"],
)
def test_tables_without_primary_key_pick_a_unique_key_or_scan(
    unique_keys: list[tuple[str, ...]], kind: str, key: tuple[str, ...]
) -> None:
    table = TableDef(database="d", name="t", columns=TABLE.columns, primary_key=())
    plan = key_plan(table, compile_row_converter(table), unique_keys)
    assert (plan.kind, plan.key) == (kind, key)


def test_packed_rows_convert_like_separate_values() -> None:
    packed = compile_row_converter(TABLE)
    plain = compile_row_converter(TABLE, pack=False)
    assert packed.select_list == (
        "CONCAT_WS(',', IFNULL(`a`, 'N'), IFNULL(HEX(`b`), 'N'), IFNULL(`c`, 'N'), IFNULL(`f` + 0, 'N'), "
        "IFNULL(HEX(`z`), 'N'))"
    )
    # b'x,y' in the VARCHAR travels as HEX, so its comma cannot split the row.
    row = packed.row((b"1,782C79,12.50,1,N",))
    assert render(row) == render(plain.row((b"1", b"x,y", b"12.50", b"\x01", None)))
    assert render(row) == '{"a":1,"b":"x,y","c":12.50,"f":1,"z":null}'
    assert packed.unpack([(b"1,782C79,12.50,1,N",)]) == [(b"1", b"x,y", b"12.50", b"1", None)]


def _packets(payload: bytes) -> list[bytes]:
    """One payload as packets: 16 MiB - 1 at most each, a full one always followed by another."""
    parts = [payload[i : i + 0xFFFFFF] for i in range(0, len(payload), 0xFFFFFF)] or [b""]
    if len(parts[-1]) == 0xFFFFFF:
        parts.append(b"")
    return [len(part).to_bytes(3, "little") + b"\x00" + part for part in parts]


def _lenenc(value: bytes | None) -> bytes:
    if value is None:
        return b"\xfb"
    n = len(value)
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


EOF_PACKET = b"\xfe\x00\x00\x02\x00"


def _result_set(rows: list[tuple[bytes | None, ...]], columns: int = 5, *, error: bytes | None = None) -> bytes:
    """A text-protocol result set as the server sends it (no CLIENT_DEPRECATE_EOF)."""
    payloads = [bytes([columns])] + [_column_definition(0xFD)] * columns + [EOF_PACKET]
    payloads += [b"".join(_lenenc(v) for v in row) for row in rows]
    payloads.append(error if error is not None else EOF_PACKET)
    return b"".join(packet for p in payloads for packet in _packets(p))


def _read(renderer: object, wire: bytes, step: int) -> ResultReader:
    reader = ResultReader(renderer)
    ended = False
    for i in range(0, len(wire), step):
        assert not ended, "the reader ended before the last byte"
        ended = reader.feed(wire[i : i + step])
    assert ended
    return reader


@pytest.mark.parametrize("step", [1, 3, 4, 7, 1 << 20], ids=["byte-by-byte", "3", "4", "small-reads", "one-read"])
def test_compiled_path_renders_a_result_set_as_the_reference_converters(step: int) -> None:
    plain = compile_row_converter(TABLE, pack=False)
    renderer = text_renderer(plain, ("a", "b"))
    assert renderer is not None
    rows: list[tuple[bytes | None, ...]] = [
        (b"1", b"x,y", b"12.50", b"\x01", None),
        (b"-0002", b'"\xc3\xa9\\\n', None, b"\x00", b"\x00\xff"),
        (b"3", b"", b"-1.00", None, b""),
    ]
    reader = _read(renderer, _result_set(rows), step)
    assert reader.server_error() is None
    assert reader.last_row() == list(rows[-1])
    n, (data, pks, hashes, _) = rendered_columns(reader.take())
    assert n == 3
    assert data.to_pylist() == [render(plain.row(r)) for r in rows]
    assert data.to_pylist()[1] == '{"a":-2,"b":"\\"\xe9\\\\\\n","c":null,"f":0,"z":"AP8="}'
    assert pks is not None and pks.to_pylist() == ['[1,"x,y"]', '[-2,"\\"\xe9\\\\\\n"]', '[3,""]']
    assert hashes is not None and hashes.to_pylist() == [pk_hash("d", "t", p) for p in pks.to_pylist()]
    assert rendered_columns(reader.take())[0] == 0  # taken: the next batch starts empty


def test_reads_cut_anywhere_render_what_one_read_renders_in_buffers_sized_or_not() -> None:
    plain = compile_row_converter(TABLE, pack=False)
    renderer = text_renderer(plain, ("a", "b"))
    assert renderer is not None
    rng = random.Random(5)
    rows = [
        (
            str(i).encode(),
            bytes(rng.choice(b'ab,\\"\n') for _ in range(rng.randint(0, 300))),
            None,
            b"\x01",
            b"\x00" * i,
        )
        for i in range(400)
    ]
    wire = _result_set(rows)
    whole = ResultReader(renderer)
    assert whole.feed(wire)
    expected = rendered_columns(whole.take())[1][0].to_pylist()
    for trial in range(20):
        reader = ResultReader(renderer, False, [0, 10, 400, 5000][trial % 4])
        cuts = sorted(rng.sample(range(1, len(wire)), rng.randint(1, 300)))
        ended = False
        for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            assert not ended
            ended = reader.feed(wire[a:b])
        assert ended and reader.last_row() == list(rows[-1])
        n, (data, _, _, _) = rendered_columns(reader.take())
        assert n == 400 and data.to_pylist() == expected


def test_compiled_path_joins_values_past_16_mib_and_reports_what_it_cannot_render() -> None:
    plain = compile_row_converter(TABLE, pack=False)
    renderer = text_renderer(plain, ("a", "b"))
    big = b"z" * (1 << 24)  # the row packet is longer than one packet's 16 MiB - 1: it continues
    wire = _result_set([(b"7", b"k", None, None, big)])
    reader = _read(renderer, wire, 1 << 20)
    _, (data, _, _, _) = rendered_columns(reader.take())
    assert data.to_pylist() == [render(plain.row((b"7", b"k", None, None, big)))]
    # A value the renderer cannot read: the rest is still consumed (the connection stays in step), then it raises.
    reader = _read(renderer, _result_set([(b"1x", b"k", None, None, None), (b"2", b"k", None, None, None)]), 5)
    with pytest.raises(ValueError, match="bad integer"):
        reader.take()
    # A server error ends the result set; its packet is handed back for PyMySQL to raise.
    error = b"\xff\x25\x05#70100Query execution was interrupted"
    reader = _read(renderer, _result_set([(b"1", b"k", None, None, None)], error=error), 3)
    assert reader.server_error() == error
    # Not a result set of the table's columns: the connection is out of step, nothing to fall back to.
    with pytest.raises(ValueError, match="columns differ"):
        ResultReader(renderer).feed(_result_set([], columns=4))
    with pytest.raises(ValueError, match="after the end"):
        ResultReader(renderer).feed(_result_set([]) + b"\x01\x00\x00\x09\x00")
    assert text_renderer(compile_row_converter(TABLE), ("a", "b")) is None  # packed rows: the reference path


def _column_definition(wire_type: int, *, unsigned: bool = False, decimals: int = 0) -> bytes:
    names = b"".join(_lenenc(n) for n in (b"def", b"d", b"t", b"t", b"c", b"c"))
    fixed = struct.pack("<HIBHBxx", 63, 255, wire_type, 32 if unsigned else 0, decimals)
    return names + b"\x0c" + fixed


def _binary_result_set(definitions: list[bytes], rows: list[list[bytes | None]]) -> bytes:
    """A prepared statement's result set: binary rows (0x00, NULL bitmap from bit 2, the values not NULL)."""
    payloads = [bytes([len(definitions)]), *definitions, EOF_PACKET]
    for row in rows:
        bitmap = bytearray((len(row) + 9) // 8)
        for i, value in enumerate(row):
            if value is None:
                bitmap[(i + 2) >> 3] |= 1 << ((i + 2) & 7)
        payloads.append(b"\x00" + bytes(bitmap) + b"".join(v for v in row if v is not None))
    payloads.append(EOF_PACKET)
    return b"".join(packet for p in payloads for packet in _packets(p))


TEMPORAL = TableDef(
    database="d",
    name="k",
    columns=(
        ColumnDef("id", "bigint", signed=False, nullable=False),
        ColumnDef("i", "tinyint"),
        ColumnDef("r", "double"),
        ColumnDef("dt", "datetime", column_length=6),
        ColumnDef("ts", "timestamp", column_length=3),
        ColumnDef("d", "date"),
        ColumnDef("tm", "time", column_length=2),
        ColumnDef("y", "year"),
        ColumnDef("s", "varchar", charset="utf8mb4"),
    ),
    primary_key=("id",),
)


def test_binary_rows_render_as_the_text_protocol_renders_the_same_values() -> None:
    renderer = text_renderer(compile_row_converter(TEMPORAL, pack=False), ("id",))
    assert renderer is not None
    definitions = [
        _column_definition(0x08, unsigned=True),  # BIGINT UNSIGNED
        _column_definition(0x01),  # TINYINT
        _column_definition(0x05, decimals=31),  # DOUBLE
        _column_definition(0x0C, decimals=6),  # DATETIME(6)
        _column_definition(0x07, decimals=3),  # TIMESTAMP(3)
        _column_definition(0x0A),  # DATE
        _column_definition(0x0B, decimals=2),  # TIME(2)
        _column_definition(0x0D, unsigned=True),  # YEAR
        _column_definition(0xFD),  # VARCHAR
    ]
    stamp = "<HBBBBBI"  # year, month, day, hour, minute, second, microsecond
    binary = [
        [struct.pack("<Q", 2**64 - 1), struct.pack("<b", -128), struct.pack("<d", 1 / 7),
         bytes([11]) + struct.pack(stamp, 2024, 2, 29, 23, 59, 58, 120),
         bytes([11]) + struct.pack(stamp, 1999, 12, 31, 0, 0, 1, 5000), bytes([4]) + struct.pack("<HBB", 2024, 1, 2),
         bytes([12]) + struct.pack("<BIBBBI", 1, 34, 22, 0, 7, 990000), struct.pack("<H", 2155), _lenenc("é".encode())],
        [struct.pack("<Q", 7), None, struct.pack("<d", -0.0), b"\x00",
         bytes([7]) + struct.pack("<HBBBBB", 2038, 1, 19, 3, 14, 7), b"\x00", b"\x00", struct.pack("<H", 0),
         _lenenc(b"")],
    ]  # fmt: skip
    text = [
        [b"18446744073709551615", b"-128", repr(1 / 7).encode(), b"2024-02-29 23:59:58.000120",
         b"1999-12-31 00:00:01.005", b"2024-01-02", b"-838:00:07.99", b"2155", "é".encode()],
        [b"7", None, b"-0", b"0000-00-00 00:00:00.000000", b"2038-01-19 03:14:07.000", b"0000-00-00", b"00:00:00.00",
         b"0000", b""],
    ]  # fmt: skip
    from_binary = _read_binary(renderer, _binary_result_set(definitions, binary))
    from_text = _read(renderer, _result_set([tuple(r) for r in text], columns=len(TEMPORAL.columns)), 1 << 20)
    assert from_binary.last_row() == [b"7", None, b"-0.0", b"0000-00-00 00:00:00.000000", b"2038-01-19 03:14:07.000",
                                      b"0000-00-00", b"00:00:00.00", b"0", b""]  # fmt: skip
    _, (data, pks, _, _) = rendered_columns(from_binary.take())
    _, (expected, _, _, _) = rendered_columns(from_text.take())
    assert data.to_pylist() == expected.to_pylist()
    assert data.to_pylist()[0] == (
        '{"id":18446744073709551615,"i":-128,"r":0.14285714285714285,"dt":"2024-02-29 23:59:58.000120",'
        '"ts":"1999-12-31 00:00:01.005","d":"2024-01-02","tm":"-838:00:07.99","y":2155,"s":"\xe9"}'
    )
    assert pks is not None and pks.to_pylist() == ["[18446744073709551615]", "[7]"]


def _read_binary(renderer: object, wire: bytes) -> ResultReader:
    reader = ResultReader(renderer, True)
    assert reader.feed(wire)
    return reader


def test_snapshot_batch_counts_row_indexes_down_in_events_and_arrow() -> None:
    values = pa.array(['{"a":1}', '{"a":2}', '{"a":3}'], pa.string())
    batch = RowBatch(
        7, "d", "t", "bootstrap-insert", 0, 1, None, None, False, None, "f", 4, 4, -7, (), RowTexts.of(values)
    )  # fmt: skip
    batch.row_step = -1
    events = batch.events()
    assert [(e.order_key, e.row_index) for e in events] == [(7, -7), (8, -8), (9, -9)]
    table = events_to_arrow([batch])
    assert table.column("row_index").to_pylist() == [-7, -8, -9]
    assert table.column("order_key").to_pylist() == [7, 8, 9]
    head, rest = batch.split(1)  # a split keeps counting down
    assert events_to_arrow([head, rest]).column("row_index").to_pylist() == [-7, -8, -9]
    # Markers around the batch: concatenated run by run in key order, as the general path sorts them.
    start, end = (
        ChangeEvent(k, "d", "t", kind, 0, 1, None, None, False, None, "f", 4, 4, -k, None, (), None, None)
        for k, kind in ((6, "bootstrap-start"), (10, "bootstrap-complete"))
    )
    table = events_to_arrow([start, batch, end])
    assert table.column("order_key").to_pylist() == [6, 7, 8, 9, 10]
    assert table.column("row_index").to_pylist() == [-6, -7, -8, -9, -10]
    assert table.equals(events_to_arrow([end, batch, start]))  # out of order: sorted


def test_job_round_trips_through_the_checkpoint() -> None:
    job = SnapshotJob(tables=(("d", "t"), ("d", "u")), reason="request", request_id=4).start_table()
    job = job.advance(("k", 3), 100).advance(("k", 9), 50)
    position = Position(server_id=1, coordinate=Coordinate("b.000002", 385)).with_snapshot(job.to_json())
    back = SnapshotJob.from_json(Position.from_json(position.to_json()).snapshot or "")
    assert back == job
    assert (back.rows, back.last, back.table) == (150, ("k", 9), ("d", "t"))
    done = back.next_table().next_table()
    assert done.done and not back.restart_table().started
    # Ranges read in parallel: committed out of order, kept in key order, the gaps still to read.
    ranged = job.with_ranges(((None, ("k", 3)), (("k", 7), ("k", 9))), 20)
    back = SnapshotJob.from_json(ranged.to_json())
    assert back == ranged and back.ranges == ((None, ("k", 3)), (("k", 7), ("k", 9))) and back.rows == 170
    assert back.restart_table().ranges == () and back.next_table().ranges == ()


def test_a_job_follows_renames_and_reads_tables_again() -> None:
    job = SnapshotJob(tables=(("d", "a"), ("d", "b"), ("d", "c")), reason="request").next_table().start_table()
    job = job.advance(("k", 3), 10)  # a is done, b half read
    # The unfinished tables take their new names; b, half read under its old name, starts again.
    moved = job.renamed({("d", "a"): ("d", "a2"), ("d", "b"): ("d", "b2"), ("d", "c"): ("e", "c")})
    assert moved.tables == (("d", "a"), ("d", "b2"), ("e", "c"))
    assert (moved.index, moved.started, moved.last, moved.rows) == (1, False, None, 0)
    assert job.renamed({("d", "c"): ("d", "c2")}) == SnapshotJob(
        tables=(("d", "a"), ("d", "b"), ("d", "c2")), reason="request", index=1, started=True, last=("k", 3), rows=10
    )
    assert job.renamed({}) is job
    # Read again: after the rest; a table still waiting is not added twice, the one half read or done is.
    again = job.reading_again((("d", "c"), ("d", "b"), ("d", "a")))
    assert again.tables == (("d", "a"), ("d", "b"), ("d", "c"), ("d", "b"), ("d", "a"))
    assert (again.index, again.started, again.last) == (1, True, ("k", 3))
    fresh = SnapshotJob(tables=(("d", "a"),), reason="unlogged")
    assert fresh.reading_again((("d", "a"), ("d", "z"))).tables == (("d", "a"), ("d", "z"))


def test_progress_figures_per_table_as_metrics_status_and_a_terminal_bar() -> None:
    registry = CollectorRegistry()
    now = [100.0]
    out = io.StringIO()
    out.isatty = lambda: True  # type: ignore[method-assign]
    progress = Progress(WorkerMetrics(registry, "cap"), out=out, clock=lambda: now[0])
    progress.begin("d.t", estimated=1000, done=0, chunk_rows=100)
    progress.begin("d.u", estimated=50, done=20, chunk_rows=100, chunks_done=1)  # resumed, read beside d.t
    now[0] = 102.0
    progress.add("d.t", 250, chunks=3)
    progress.add("d.u", 10)
    labels = {"capture": "cap", "table": "d.t"}
    assert registry.get_sample_value("mysqlcapture_snapshot_rows_total", labels) == 250
    assert registry.get_sample_value("mysqlcapture_snapshot_rows_estimated", labels) == 1000
    assert registry.get_sample_value("mysqlcapture_snapshot_chunks_total", labels) == 3
    assert registry.get_sample_value("mysqlcapture_snapshot_chunks_estimated", labels) == 10
    assert registry.get_sample_value("mysqlcapture_snapshot_percent", labels) == 25.0
    assert progress.line("d.t") == "d.t: 3/10 chunks, 250/1000 rows, 125 rows/s, ETA 00:06"
    assert progress.line("d.u") == "d.u: 2/2 chunks, 30/50 rows, 5 rows/s, ETA 00:04"
    assert "[#######-----------------------]  25.0% d.t: 3/10 chunks, 250/1000 rows" in out.getvalue()
    assert [t.model_dump() for t in progress.status()] == [
        {"table": "d.t", "rows": 250, "rows_estimated": 1000, "chunks": 3, "chunks_estimated": 10,
         "rows_per_second": 125.0, "eta_seconds": 6.0},
        {"table": "d.u", "rows": 30, "rows_estimated": 50, "chunks": 2, "chunks_estimated": 2,
         "rows_per_second": 5.0, "eta_seconds": 4.0},
    ]  # fmt: skip
    assert progress.active == ("d.t", "d.u") and progress.share("d.t") == 0.25
    progress.finish("d.t")
    assert registry.get_sample_value("mysqlcapture_snapshot_percent", labels) == 100.0
    assert registry.get_sample_value("mysqlcapture_snapshot_chunks_estimated", labels) == 3
    progress.drop("d.u")
    assert progress.active == () and progress.status() == []


F = Coordinate("b.999999", 500)  # the frontier: numbered past the zero padding's width in the cases below


def _xid(where: Coordinate) -> XidEvent:
    return XidEvent(xid=1, where=where, timestamp=0, server_id=1)


@pytest.mark.parametrize(
    "boundary,ev,expected",
    [
        (Coordinate("b.999999", 500), None, True),  # standing exactly at F
        (Coordinate("b.1000000", 4), None, True),  # past F in a later, wider-numbered file
        (Coordinate("b.999999", 120), None, False),  # before F, nothing to feed
        # An event ending at F is the last one before it: still to be fed.
        (Coordinate("b.999999", 120), _xid(Coordinate("b.999999", 500)), False),
        # An event ending after F starts at F or later: everything before F was fed.
        (Coordinate("b.999999", 499), _xid(Coordinate("b.999999", 700)), True),
        (Coordinate("b.999999", 120), _xid(Coordinate("b.1000000", 300)), True),
        # A heartbeat names a place it was sent after: at F is enough.
        (Coordinate("b.999999", 120), HeartbeatEvent(Coordinate("b.999999", 500)), True),
        (Coordinate("b.999999", 120), HeartbeatEvent(Coordinate("b.999999", 499)), False),
        (Coordinate("b.999999", 120), HeartbeatEvent(Coordinate("b.1000000", 0)), False),  # position unknown
        (Coordinate("b.999999", 120), RotateEvent(Coordinate("b.1000000", 4), timestamp=0), False),  # no `where`
    ],
    ids=[
        "at-frontier",
        "later-file",
        "before",
        "event-ends-at-frontier",
        "event-ends-after",
        "event-ends-in-later-file",
        "heartbeat-at",
        "heartbeat-before",
        "heartbeat-unknown",
        "rotate",
    ],
)
def test_stream_at_frontier(boundary: Coordinate, ev: BinlogEvent | None, expected: bool) -> None:
    assert at_frontier(F, boundary, ev) is expected


def test_tables_started_ahead_of_the_current_one_carry_their_progress_until_it_is_theirs() -> None:
    job = SnapshotJob(tables=(("d", "a"), ("d", "b"), ("d", "c"), ("d", "e")), reason="initial").start_table()
    job = job.start_ahead(2).start_ahead(1)
    assert [a.i for a in job.ahead] == [1, 2]
    job = job.with_ahead_ranges(1, ((None, (10,)),), 10).with_ahead_ranges(1, ((None, (20,)),), 10)
    job = job.with_ahead_ranges(2, ((None, (5,)),), 5).complete_ahead(2)
    assert job.ahead_of(1) == Ahead(1, 20, ((None, (20,)),), False)
    assert job.ahead_of(2) == Ahead(2, 5, (), True)
    assert SnapshotJob.from_json(job.to_json()) == job  # the checkpoint keeps it
    # The current table completes: b becomes current with what it committed ahead.
    nxt = job.next_table()
    assert (nxt.index, nxt.started, nxt.rows, nxt.ranges) == (1, True, 20, ((None, (20,)),))
    assert [a.i for a in nxt.ahead] == [2]
    # b completes: c was complete already, so e is next, not started.
    last = nxt.next_table()
    assert (last.index, last.started, last.rows, last.ranges, last.ahead) == (3, False, 0, (), ())
    assert last.next_table().done
    # A table ahead that changed (DDL) or was renamed while read starts again; a complete one stays complete.
    assert job.restart_ahead(1).ahead_of(1) is None
    moved = job.renamed({("d", "b"): ("d", "b2"), ("d", "c"): ("d", "c2")})
    assert moved.tables[1:3] == (("d", "b2"), ("d", "c2"))
    assert moved.ahead_of(1) is None and moved.ahead_of(2) == Ahead(2, 5, (), True)
    # Read again: a table started ahead is not waiting (it is read once more), one not started is.
    assert job.reading_again((("d", "b"), ("d", "e"))).tables[4:] == (("d", "b"),)
    # A checkpoint written before tables were read side by side has no `ahead`.
    old = (
        '{"tables":[["d","a"]],"reason":"initial","request_id":0,"index":0,"started":true,"last":null,"rows":3,'
        '"ranges":[]}'
    )
    assert SnapshotJob.from_json(old).ahead == ()


def test_a_fence_is_written_after_the_time_a_read_needs_it_from_even_when_a_write_failed() -> None:
    """A fence serves reads for FENCE_AGE seconds, but only reads that need one written after a time (their table's
    watch start) it was written after; a write that failed leaves the older fence as old as it is."""
    now = [100.0]
    written: list[int] = []
    failing = [False]

    def write() -> int:
        if failing[0]:
            raise OSError("the fence's connection is gone")
        written.append(len(written) + 1)
        return written[-1]

    fences = Fences(write, clock=lambda: now[0])
    assert fences.current(not_before=99.0) == 1
    now[0] = 100.5
    assert fences.current(not_before=99.0) == 1  # young enough, and written after 99
    assert fences.current(not_before=100.2) == 2  # written before 100.2: a new one
    now[0] = 101.0
    failing[0] = True
    with pytest.raises(OSError):
        fences.write_now()
    failing[0] = False
    assert fences.current(not_before=100.8) == 3  # fence 2 (at 100.5) is older than 100.8, failed write or not
    now[0] = 102.0
    assert fences.current(not_before=100.8) == 3 and written == [1, 2, 3]
    now[0] = 103.1
    assert fences.current(not_before=100.8) == 4  # older than FENCE_AGE
