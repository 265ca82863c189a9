"""The handoff between the reader and the commit loop: bounded by rows, held stream chunks handed over in order."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.engine import Chunk
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.runtime.binlog_reader import CaughtUp, End, Handoff


def _chunk(n: int, rows: int = 1) -> Chunk:
    events: Any = [f"row {n}.{i}" for i in range(rows)]  # count_rows counts each single event as one row
    return Chunk(events, Position(server_id=1, coordinate=Coordinate("b.000001", 100 + n)), boundary=True)


def _rows(item: Any) -> list[str]:
    assert isinstance(item, Chunk)
    return list(item.events)


def test_held_chunks_go_as_one_before_the_next_item_put() -> None:
    handoff = Handoff(1000, hold_rows=100, hold_seconds=60)
    for n in range(3):
        assert handoff.hold(_chunk(n)) is False
    handoff.put(CaughtUp())
    merged = handoff.get(timeout=1)
    assert _rows(merged) == ["row 0.0", "row 1.0", "row 2.0"]
    assert isinstance(merged, Chunk) and merged.position.coordinate.pos == 102 and merged.transactions == 3
    assert isinstance(handoff.get(timeout=1), CaughtUp)
    assert handoff.empty()


def test_holding_says_when_the_held_rows_are_due() -> None:
    handoff = Handoff(1000, hold_rows=5, hold_seconds=60)
    assert handoff.hold(_chunk(0, rows=3)) is False
    assert handoff.hold(_chunk(1, rows=2)) is True
    handoff.put(None)
    assert len(_rows(handoff.get(timeout=1))) == 5
    with pytest.raises(queue.Empty):
        handoff.get(timeout=0.05)


def test_the_commit_loop_takes_held_chunks_when_nothing_else_comes() -> None:
    handoff = Handoff(1000, hold_rows=100, hold_seconds=0.05)
    with pytest.raises(queue.Empty):
        handoff.get(timeout=0.01)  # nothing held, nothing queued
    handoff.hold(_chunk(7))
    assert not handoff.empty() and handoff.chunks() == 1
    started = time.monotonic()
    assert _rows(handoff.get(timeout=5)) == ["row 7.0"]
    assert time.monotonic() - started >= 0.04
    assert handoff.empty() and handoff.chunks() == 0
    handoff.hold(_chunk(8))
    with pytest.raises(queue.Empty):
        handoff.get(timeout=0.01)  # sooner than hold_seconds: still held
    assert _rows(handoff.get(timeout=5)) == ["row 8.0"]


def test_a_full_handoff_makes_the_reader_wait_until_rows_are_taken() -> None:
    handoff = Handoff(10, hold_rows=1, hold_seconds=60)
    handoff.put(_chunk(0, rows=12))  # one chunk may take it past its bound
    with pytest.raises(queue.Full):
        handoff.put(_chunk(1), timeout=0.05)
    handoff.hold(_chunk(2))
    put_done = threading.Event()

    def reader() -> None:
        handoff.put(End())
        put_done.set()

    thread = threading.Thread(target=reader)
    thread.start()
    assert not put_done.wait(0.1)
    assert len(_rows(handoff.get(timeout=1))) == 12
    assert put_done.wait(5)
    thread.join()
    assert _rows(handoff.get(timeout=1)) == ["row 2.0"]  # held before End was put: it comes first
    assert isinstance(handoff.get(timeout=1), End)


def test_order_is_kept_between_a_reader_and_a_commit_loop_racing() -> None:
    handoff = Handoff(50, hold_rows=7, hold_seconds=0.001)
    total = 5000
    taken: list[str] = []

    def reader() -> None:
        for n in range(total):
            if n % 97 == 0:
                handoff.put(_chunk(n))
            elif handoff.hold(_chunk(n)):
                handoff.put(None)
        handoff.put(End())

    thread = threading.Thread(target=reader)
    thread.start()
    while True:
        item = handoff.get(timeout=10)
        if isinstance(item, End):
            break
        taken.extend(_rows(item))
    thread.join()
    assert taken == [f"row {n}.0" for n in range(total)]
