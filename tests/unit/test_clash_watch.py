"""Two replicas with one server_id: a single loss is a takeover the stream outlives, repeated losses stop it."""

from __future__ import annotations

import pymysql
from mysqlcapture_worker.replication.stream import StreamDisconnected, is_server_id_clash
from mysqlcapture_worker.runtime.binlog_reader import ClashWatch


def _lost(code: int, message: str) -> StreamDisconnected:
    try:
        raise StreamDisconnected(message) from pymysql.err.OperationalError(code, message)
    except StreamDisconnected as exc:
        return exc


def test_the_servers_clash_errors_are_recognised_through_the_streams_wrapper() -> None:
    assert is_server_id_clash(_lost(4052, "A slave with the same server_uuid/server_id is already connected"))
    mysql = "A slave with the same server_uuid/server_id as this slave has connected to the master; the first event"
    assert is_server_id_clash(_lost(1236, mysql))
    assert is_server_id_clash(pymysql.err.OperationalError(4052, "same id"))
    assert not is_server_id_clash(_lost(1236, "Could not find first log file name in binary log index file"))
    assert not is_server_id_clash(_lost(2013, "Lost connection to MySQL server during query"))
    assert not is_server_id_clash(StreamDisconnected("the server ended the binlog dump (EOF)"))


def test_a_fight_is_four_clashes_within_two_minutes() -> None:
    watch = ClashWatch(9011)
    assert [watch.fighting(t) for t in (0.0, 50.0, 100.0)] == [False, False, False]
    assert watch.fighting(110.0)  # the fourth within 120 s
    slow = ClashWatch(9011)
    assert not any(slow.fighting(t) for t in (0.0, 100.0, 200.0, 300.0, 400.0))  # one takeover now and then
    assert "spec.source.serverId" in str(watch.error) and "9011" in str(watch.error)
    assert watch.error.reason == "ServerIdClash"
