"""Compile a TABLE_MAP (+ the table's definition) into a decoder of its rows events' images."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from mysqlcapture_api.schema.model import INTEGER_TYPES, ColumnDef, TableDef

from mysqlcapture_worker.charsets import charset_of_collation
from mysqlcapture_worker.decode.columns import (
    Cache,
    ColumnPlan,
    ColumnSpec,
    Op,
    UnsupportedTypeError,
    compile_column,
)
from mysqlcapture_worker.replication.events import RowsEvent, RowsKind, TableMap

RowImage = tuple[list[Any] | None, list[Any] | None]


class _Absent:
    """The value of a column missing from a row image (binlog_row_image=MINIMAL or NOBLOB)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

_MAX_NULL_PATTERNS = 256  # compiled null-bitmap patterns kept per columns-present bitmap
_MAX_PRESENT_PATTERNS = 64  # columns-present bitmaps kept (one with binlog_row_image=FULL)
_MAX_CACHE = 4096  # memoized DECIMAL/FLOAT values kept per column between events


class DecodeError(ValueError):
    """A rows event whose bytes do not match its table map."""


class _ImagePlan:
    """How to read row images for one columns-present bitmap; ops compiled per null bitmap."""

    __slots__ = ("null_len", "ops", "plans", "present", "template")

    def __init__(self, plans: Sequence[ColumnPlan], present_bitmap: bytes) -> None:
        count = len(plans)
        self.plans = plans
        self.present = [i for i in range(count) if present_bitmap[i >> 3] & (1 << (i & 7))]
        self.null_len = (len(self.present) + 7) // 8
        self.template: list[Any] = [ABSENT] * count
        for i in self.present:
            self.template[i] = None
        self.ops: dict[bytes, tuple[Op, ...]] = {}

    def ops_for(self, nulls: bytes) -> tuple[Op, ...]:
        columns = [i for bit, i in enumerate(self.present) if not nulls[bit >> 3] & (1 << (bit & 7))]
        ops = _build_ops(self.plans, columns)
        if len(self.ops) < _MAX_NULL_PATTERNS:
            self.ops[nulls] = ops
        return ops


def _build_ops(plans: Sequence[ColumnPlan], columns: list[int]) -> tuple[Op, ...]:
    """Ops reading the non-null present `columns` in order; runs of fixed-width ones share one Struct."""
    ops: list[Op] = []
    run: list[int] = []
    for i in columns:
        plan = plans[i]
        if plan.fixed is not None:
            run.append(i)
            continue
        if run:
            ops.append(_run_op(plans, run))
            run = []
        assert plan.make_op is not None
        ops.append(plan.make_op(i))
    if run:
        ops.append(_run_op(plans, run))
    return tuple(ops)


def _run_op(plans: Sequence[ColumnPlan], run: list[int]) -> Op:
    st = struct.Struct("<" + "".join(plans[i].fixed or "" for i in run))
    unpack, size = st.unpack_from, st.size
    converts = tuple((i, c) for i in run if (c := plans[i].convert) is not None)
    first, last = run[0], run[-1] + 1
    if run == list(range(first, last)):
        if not converts:

            def plain(b: bytes, o: int, row: list[Any]) -> int:
                row[first:last] = unpack(b, o)
                return o + size

            return plain
        if len(run) == 1:
            convert = converts[0][1]

            def single(b: bytes, o: int, row: list[Any]) -> int:
                row[first] = convert(unpack(b, o)[0])
                return o + size

            return single

        def converted(b: bytes, o: int, row: list[Any]) -> int:
            row[first:last] = unpack(b, o)
            for i, c in converts:
                row[i] = c(row[i])
            return o + size

        return converted
    dests = tuple(run)

    def scattered(b: bytes, o: int, row: list[Any]) -> int:
        for i, v in zip(dests, unpack(b, o), strict=True):
            row[i] = v
        for i, c in converts:
            row[i] = c(row[i])
        return o + size

    return scattered


class TableDecoder:
    """Decodes the row images of one table's rows events with plans compiled once per TABLE_MAP."""

    def __init__(self, table_map: TableMap, plans: Sequence[ColumnPlan], caches: list[Cache]) -> None:
        self.table_map = table_map
        self._plans = tuple(plans)
        self._caches = caches
        self._images: dict[bytes, _ImagePlan] = {}

    def _image_plan(self, present: bytes) -> _ImagePlan:
        plan = self._images.get(present)
        if plan is None:
            plan = _ImagePlan(self._plans, present)
            if len(self._images) < _MAX_PRESENT_PATTERNS:
                self._images[present] = plan
        return plan

    def decode(self, event: RowsEvent) -> list[RowImage]:
        """(before, after) per row, values in column order; `ABSENT` for columns not in the image."""
        if event.column_count != len(self._plans):
            raise DecodeError(
                f"{self.table_map.database}.{self.table_map.table}: rows event has {event.column_count} "
                f"columns, its table map {len(self._plans)}"
            )
        for cache in self._caches:
            if len(cache) > _MAX_CACHE:
                cache.clear()
        body = event.body
        end = len(body)
        first = self._image_plan(event.columns_present)
        off = 0
        out: list[RowImage] = []
        try:
            if event.kind is RowsKind.UPDATE:
                second = self._image_plan(event.columns_present_after or event.columns_present)
                read = _read_image
                while off < end:
                    before, off = read(first, body, off)
                    after, off = read(second, body, off)
                    out.append((before, after))
            else:
                images, off = _read_images(first, body, end)
                if event.kind is RowsKind.INSERT:
                    out = [(None, row) for row in images]
                else:
                    out = [(row, None) for row in images]
        except (struct.error, IndexError) as exc:
            raise self._corrupt(event, f"truncated row image ({exc})") from exc
        except ValueError as exc:  # a value its type cannot hold: bad JSON/WKB, ENUM index out of range
            raise self._corrupt(event, str(exc)) from exc
        if off != end:
            raise self._corrupt(event, f"row images end at byte {off}, the event body at {end}")
        return out

    def _corrupt(self, event: RowsEvent, what: str) -> DecodeError:
        tm = self.table_map
        return DecodeError(
            f"{tm.database}.{tm.table}: {what} in the rows event ending at {event.where}"
            "; the table definition does not match the binlog's rows"
        )


def _read_images(plan: _ImagePlan, body: bytes, end: int) -> tuple[list[list[Any]], int]:
    """All the single-image rows (WRITE/DELETE) of a body: `_read_image` inlined in a loop."""
    null_len, known, compile_ops, template = plan.null_len, plan.ops, plan.ops_for, plan.template
    rows: list[list[Any]] = []
    off = 0
    while off < end:
        start = off + null_len
        nulls = body[off:start]
        ops = known.get(nulls)
        if ops is None:
            ops = compile_ops(nulls)
        row = template.copy()
        for op in ops:
            start = op(body, start, row)
        rows.append(row)
        off = start
    return rows, off


def _read_image(plan: _ImagePlan, body: bytes, off: int) -> tuple[list[Any], int]:
    start = off + plan.null_len
    nulls = body[off:start]
    ops = plan.ops.get(nulls)
    if ops is None:
        ops = plan.ops_for(nulls)
    row = plan.template.copy()
    for op in ops:
        start = op(body, start, row)
    return row, start


def compile_decoder(table_map: TableMap, table: TableDef) -> TableDecoder:
    """Build the per-column plans for `table_map`, typed and named by `table`."""
    where_table = f"{table_map.database}.{table_map.table}"
    if len(table.columns) != len(table_map.columns):
        raise UnsupportedTypeError(
            f"{where_table}: the binlog row has {len(table_map.columns)} columns, the table definition "
            f"{len(table.columns)}; the schema is out of step with the binlog"
        )
    caches: list[Cache] = []
    plans = [compile_column(spec, caches) for spec in column_specs(table_map, table)]
    return TableDecoder(table_map, plans, caches)


def column_specs(table_map: TableMap, table: TableDef) -> list[ColumnSpec]:
    """Each column's spec, resolved from the definition and the TABLE_MAP (shared by both paths)."""
    where_table = f"{table_map.database}.{table_map.table}"
    return [
        _spec(table_map, table, i, col, f"{where_table} column {col.name!r}") for i, col in enumerate(table.columns)
    ]


def _spec(tm: TableMap, table: TableDef, i: int, col: ColumnDef, where: str) -> ColumnSpec:
    """Resolve what the definition says, falling back to the TABLE_MAP's own metadata."""
    unsigned = (col.type in INTEGER_TYPES and not col.signed) or bool(tm.unsigned and tm.unsigned[i])
    charset = col.charset
    if charset is None and tm.charsets is not None:
        charset = charset_of_collation(tm.charsets[i])
        if charset is None and tm.charsets[i] is not None:
            raise UnsupportedTypeError(
                f"{where} has collation id {tm.charsets[i]}, whose charset is unknown; convert the column "
                "to utf8mb4 or exclude the table from the capture (spec.tables.exclude)"
            )
    enum_values = col.enum_values
    if enum_values is None and tm.enum_values is not None:
        enum_values = tm.enum_values[i]
    return ColumnSpec(
        where=where,
        meta=tm.columns[i],
        type_name=col.type,
        unsigned=unsigned,
        charset=charset,
        table_charset=table.charset,
        enum_values=enum_values,
        length=col.length,
        fsp=col.column_length,
        precision=col.precision,
        scale=col.scale,
    )


__all__ = ["ABSENT", "DecodeError", "RowImage", "TableDecoder", "UnsupportedTypeError", "compile_decoder"]
