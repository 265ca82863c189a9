"""Rows events into row change events: the compiled renderer's batches, or the Python reference path's events.

Both paths give the same change log byte for byte; the compiled one takes full row images of tables whose
every column it can render, the reference path everything else (partial images, `MYSQLCAPTURE_DECODER=reference`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from mysqlcapture_worker.changes import EventFactory, RowTexts
from mysqlcapture_worker.column_rules import EXCLUDE, Action
from mysqlcapture_worker.decode import ABSENT
from mysqlcapture_worker.engine.rendering import changed, json_nulls, render
from mysqlcapture_worker.engine.tables import DecodedTable
from mysqlcapture_worker.engine.transaction import Transaction
from mysqlcapture_worker.replication.events import RowsEvent, RowsKind

if TYPE_CHECKING:
    import mysqlcapture_native

    # The compiled renderer's answer for one rows event: data, old (UPDATE), primary key and its hash, the JSON null
    # documents of data and of old, per row. Each an Arrow string column (values, int32 offsets[, validity]:
    # buffers), or None; the first item counts the rows.
    _Column = mysqlcapture_native.ArrowStrings | None
    _Marks = mysqlcapture_native.NullableStrings | None
    _Rendered = tuple[int, _Column, _Column, _Column, _Column, _Marks, _Marks]

log = logging.getLogger(__name__)
_KEPT = Action(-1)
_PARTIAL_SEEN: set[tuple[str, str]] = set()  # tables whose partial images were warned about (once per process)

_NATIVE_KINDS = {RowsKind.INSERT: 0, RowsKind.UPDATE: 1, RowsKind.DELETE: 2}


def all_present(bitmap: bytes, count: int) -> bool:
    """Whether the image bitmap marks each of the `count` columns present."""
    # Only the first `count` bits: MySQL sets the unused bits of the last byte, MariaDB clears them.
    every = (1 << count) - 1
    return int.from_bytes(bitmap, "little") & every == every


def add_rows(txn: Transaction, dec: DecodedTable, ev: RowsEvent) -> None:
    """The rows of `ev` as change events of `txn`, on the compiled path when it covers them."""
    make = txn.factory(ts=ev.timestamp, server_id=ev.server_id, event_pos=ev.start_pos)
    # A session may still log partial images (SET SESSION binlog_row_image=MINIMAL): Maxwell then
    # renders only the columns the image holds, and `old` only what both images hold.
    partial = not (
        all_present(ev.columns_present, ev.column_count)
        and all_present(ev.columns_present_after or ev.columns_present, ev.column_count)
    )
    if partial:
        _warn_partial(dec.table_map.database, dec.table_map.table)
    if dec.renderer is not None and not partial and ev.column_count == len(dec.names):
        try:
            rendered = dec.renderer.render(_NATIVE_KINDS[ev.kind], ev.body)
        except ValueError:
            pass  # the reference path decodes it again and says what is wrong
        else:
            _add_rendered(txn, make, dec, ev.kind, rendered)
            return
    _add_reference(txn, make, dec, ev, partial=partial)


def _warn_partial(database: str, table: str) -> None:
    """Say, once per table, that partial images arrive, what compaction makes of them, and the setting to fix."""
    if (database, table) in _PARTIAL_SEEN:
        return
    _PARTIAL_SEEN.add((database, table))
    name = f"{database}.{table}"
    log.warning(
        "%s: a row image without every column (a session set binlog_row_image to MINIMAL or NOBLOB); the change "
        "log carries it as Maxwell does and lists the columns it left out (`absent`), which compaction takes from "
        "the row's previous version, so a row the capture never saw whole (captured without a snapshot) keeps them "
        "null: set binlog_row_image=FULL for every session, or run `mysqlcapture resnapshot <manifest> --table %s`",
        name,
        name,
    )


def _add_reference(txn: Transaction, make: EventFactory, dec: DecodedTable, ev: RowsEvent, *, partial: bool) -> None:
    """One `ChangeEvent` per row, decoded and rendered in Python: the reference the compiled path matches."""
    names = dec.names
    pk_idx = dec.pk_idx
    kind = ev.kind
    tm = dec.table_map
    rules = dec.rules
    for before, after in dec.decoder.decode(ev):
        image = after if after is not None else before
        assert image is not None
        absent = None
        if partial:
            if before is not None and after is not None:
                # A column an update's after image leaves out kept its value, which the before image may hold (a
                # MINIMAL image's key; every column of a table without one; NOBLOB's other columns).
                image = [before[i] if v is ABSENT else v for i, v in enumerate(image)]
            data = {n: v for n, v in zip(names, image, strict=False) if v is not ABSENT}
            # Empty when only the before image left columns out (compaction then takes it whole from the row's
            # previous version, as any partial event's).
            absent = tuple(n for n, v in zip(names, image, strict=False) if v is ABSENT)
        else:
            data = dict(zip(names, image, strict=False))
        old_json = old_nulls = None
        if kind is RowsKind.UPDATE and before is not None:
            old = {
                n: b
                for n, b, a in zip(names, before, image, strict=False)
                if b is not ABSENT and a is not ABSENT and changed(b, a)
            }
            old_json = render(old)
            old_nulls = json_nulls(old, rules)
        data_json = render(data)
        pk_json = render([image[i] for i in pk_idx]) if pk_idx else None
        if rules is not None:
            data_json, old_json = rules.object(data_json), rules.object(old_json)
            pk_json = rules.key(pk_json) if pk_json is not None else None
            if absent:
                absent = tuple(n for n in absent if rules.actions.get(n, _KEPT).kind != EXCLUDE)
        txn.add(
            make.row(
                database=tm.database,
                table=tm.table,
                type=kind.value,
                pk_json=pk_json,
                pk_columns=dec.pk_names,
                data_json=data_json,
                old_json=old_json,
                absent=absent,
                json_null=json_nulls(data, rules),
                old_json_null=old_nulls,
            )
        )


def _add_rendered(txn: Transaction, make: EventFactory, dec: DecodedTable, kind: RowsKind, rendered: _Rendered) -> None:
    """The compiled renderer's rows as one batch: the events the reference path would build."""
    n = rendered[0]
    first, skip = txn.reserve(n)  # `skip`: rows committed by the previous run (resume inside a transaction)
    if skip >= n:
        return
    tm = dec.table_map
    txn.events.extend(
        make.rows(
            database=tm.database,
            table=tm.table,
            type=kind.value,
            row_index=first + skip,
            pk_columns=dec.pk_names,
            texts=RowTexts.rendered(n, rendered[1:], skip),
        )
    )
