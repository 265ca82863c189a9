"""A batch's texts as the renderer hands them over (buffers) and as Arrow arrays, and the Delta sink's joining of
many batches' texts into one column: the same change-log rows whichever way they are held and written."""

from __future__ import annotations

import pickle
import random
import struct

import pyarrow as pa
import pytest
from mysqlcapture_native import join_texts
from mysqlcapture_worker.changes import (
    DATA,
    JSON_NULL,
    OLD,
    OLD_JSON_NULL,
    PK_HASH,
    PRIMARY_KEY,
    EventFactory,
    RowBatch,
    RowTexts,
    each_event,
)
from mysqlcapture_worker.sinks.delta import SMALL_BATCH_ROWS, events_to_arrow

pytestmark = pytest.mark.unit

_WORDS = ["a", "", "ü", "日本語", '{"k":"v\\"q"}', "x" * 300, "\u0000", "😀"]


def _rendered(values: list[str]) -> tuple[memoryview, memoryview]:
    """A column as the renderer hands it over: (values, int32 little-endian offsets), buffers of signed bytes (as
    PyArrow's are, so that the compiled joiner takes either)."""
    data = [v.encode() for v in values]
    ends = [0]
    for d in data:
        ends.append(ends[-1] + len(d))
    return memoryview(b"".join(data)).cast("b"), memoryview(struct.pack(f"<{len(ends)}i", *ends)).cast("b")


def _marked(values: list[str | None]) -> tuple[memoryview, memoryview, memoryview]:
    """A column with nulls as the renderer hands the JSON null marks over: (values, offsets, validity bitmap)."""
    data, offsets = _rendered([v or "" for v in values])
    bits = bytearray((len(values) + 7) // 8)
    for i, v in enumerate(values):
        if v is not None:
            bits[i >> 3] |= 1 << (i & 7)
    return data, offsets, memoryview(bytes(bits)).cast("b")


def _marks(rng: random.Random, rows: int) -> list[str | None] | None:
    """A batch's JSON null marks: none (the usual case), or some rows' columns."""
    if rng.random() < 0.6:
        return None
    return [rng.choice([None, None, '["w"]', '["w","n"]']) for _ in range(rows)]


def _texts(rng: random.Random, rows: int, *, update: bool, keyed: bool, raw: bool, skip: int = 0) -> RowTexts:
    columns: list[list[str] | None] = [
        [f'{{"n":{rng.randrange(10**6)},"w":"{rng.choice(_WORDS)}"}}' for _ in range(rows)],
        [f'{{"w":"{rng.choice(_WORDS)}"}}' for _ in range(rows)] if update else None,
        [f"[{rng.randrange(10**6)}]" for _ in range(rows)] if keyed else None,
        [f"{rng.getrandbits(64):016x}" for _ in range(rows)] if keyed else None,
    ]
    marks = [_marks(rng, rows), _marks(rng, rows) if update else None]
    if raw:
        given = [None if c is None else _rendered(c) for c in columns]
        return RowTexts.rendered(rows, [*given, *(None if m is None else _marked(m) for m in marks)], skip)
    data, old, pk, hashes = (None if c is None else pa.array(c[skip:], pa.string()) for c in columns)
    nulls, old_nulls = (None if m is None else pa.array(m[skip:], pa.string()) for m in marks)
    assert data is not None
    return RowTexts.of(data, old, pk, hashes, nulls, old_nulls)


def _batches(seed: int, count: int, most_rows: int, *, raw: bool) -> list[RowBatch]:
    """`count` batches as a stream of transactions gives them: inserts, updates, deletes, keyed or not."""
    rng = random.Random(seed)
    out = []
    key = 1
    for i in range(count):
        kind = rng.choice(["insert", "update", "delete"])
        rows = rng.randint(1, most_rows)
        keyed = rng.random() < 0.8
        make = EventFactory(server_id=7, ts=1700000000 + i, binlog_file="b.000001", binlog_pos=4 + i, event_pos=9 + i)
        texts = _texts(rng, rows, update=kind == "update", keyed=keyed, raw=raw)
        batch = make.rows(
            database="d", table=f"t{i % 3}", type=kind, row_index=0, pk_columns=("id",) if keyed else (), texts=texts
        )
        batch.order_key, batch.xid, batch.commit = key, i, True
        key += len(batch)
        out.append(batch)
    return out


@pytest.mark.parametrize("most_rows", [1, 30, 4 * SMALL_BATCH_ROWS])  # joined into one column; and batch by batch
@pytest.mark.parametrize("seed", [1, 2])
def test_batches_write_the_rows_their_events_do(seed: int, most_rows: int) -> None:
    raw = _batches(seed, 300 if most_rows < SMALL_BATCH_ROWS else 12, most_rows, raw=True)
    arrays = _batches(seed, len(raw), most_rows, raw=False)
    table = events_to_arrow(raw)
    assert table.equals(events_to_arrow(arrays))
    # One event per row, converted row by row: the reference the batch conversion matches.
    assert table.equals(events_to_arrow(list(each_event(arrays))))
    assert table.num_rows == sum(len(b) for b in raw)
    assert table.column("old").null_count == sum(len(b) for b in raw if b.type != "update")
    marked = [m for b in arrays for m in (b.json_null.to_pylist() if b.json_null is not None else [None] * len(b))]
    assert table.column("json_null").to_pylist() == marked and any(marked)


def test_rendered_texts_are_the_arrays_they_stand_for() -> None:
    rng = random.Random(5)
    raw = _texts(random.Random(5), 9, update=True, keyed=True, raw=True, skip=2)
    arrays = _texts(rng, 9, update=True, keyed=True, raw=False, skip=2)
    assert raw.rows == arrays.rows == 7
    assert raw.column(JSON_NULL) is not None and raw.column(JSON_NULL).null_count > 0  # type: ignore[union-attr]
    for i in (DATA, OLD, PRIMARY_KEY, PK_HASH, JSON_NULL, OLD_JSON_NULL):
        assert raw.column(i) is not None
        assert raw.column(i).equals(arrays.column(i))  # type: ignore[union-attr]
        assert raw.slice(3, 2).column(i).to_pylist() == arrays.column(i).to_pylist()[3:5]  # type: ignore[union-attr]
        assert raw.nbytes(i) > 0
    again = pickle.loads(pickle.dumps(raw))  # a transaction spilled to disk
    assert [again.column(i).to_pylist() for i in range(6)] == [raw.column(i).to_pylist() for i in range(6)]  # type: ignore[union-attr]
    inserts = _texts(rng, 3, update=False, keyed=False, raw=True)
    assert inserts.column(OLD) is None and inserts.buffers(PRIMARY_KEY) is None and inserts.nbytes(OLD) == 0


def test_join_takes_offsets_validity_and_nulls_of_each_part() -> None:
    def parts(*arrays: pa.StringArray | None, rows: int = 2) -> list[tuple[object, int]]:
        out: list[tuple[object, int]] = []
        for a in arrays:
            if a is None:
                out.append((None, rows))
                continue
            validity, offsets, values = a.buffers()
            out.append(((a.offset, len(a), validity, offsets, values), len(a)))
        return out

    first = pa.array(["a", None, "ccc"], pa.string())
    second = pa.array(["x", "yy", "zzz"], pa.string()).slice(1)
    values, offsets, validity, nulls = join_texts(parts(first, None, second))  # type: ignore[arg-type]
    joined = pa.StringArray.from_buffers(
        7, pa.py_buffer(offsets), pa.py_buffer(values), pa.py_buffer(validity) if validity else None, nulls
    )
    assert joined.to_pylist() == ["a", None, "ccc", None, None, "yy", "zzz"]
    assert nulls == 3
    _, _, validity, nulls = join_texts(parts(second))  # type: ignore[arg-type]
    assert validity is None and nulls == 0
    short = pa.array(["a", "b"], pa.string())
    _, offsets_buffer, values_buffer = short.buffers()
    with pytest.raises(ValueError, match="shorter than its length"):
        join_texts([((0, 5, None, offsets_buffer, values_buffer), 5)])


def test_the_compiled_buffers_go_back_into_the_joiner_as_they_are() -> None:
    """The renderer's own buffers (here the joiner's, the same type) are signed bytes like PyArrow's: a commit hands
    them to `join_texts` unwrapped, and they read back as the texts they hold."""
    data, offsets = _rendered(["a", "ü", "", "😀"])
    values, ends, validity, nulls = join_texts([((0, 4, None, offsets, data), 4), (None, 2)])
    assert memoryview(values).format == memoryview(ends).format == "b" and nulls == 2 and validity is not None
    again = join_texts([((1, 3, None, ends, values), 3)])
    array = pa.StringArray.from_buffers(3, pa.py_buffer(again[1]), pa.py_buffer(again[0]))
    assert array.to_pylist() == ["ü", "", "😀"]
