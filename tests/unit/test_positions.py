"""The binlog coordinate and the checkpoint position built on it: ordering, text form, JSON compatibility."""

from __future__ import annotations

import pytest
from mysqlcapture_api.coordinates import NOWHERE, Coordinate
from mysqlcapture_api.schema.history import HistoryEntry
from mysqlcapture_worker.positions import Position

pytestmark = pytest.mark.unit

# Checkpoints as the worker wrote them before the coordinate type existed (Position.to_json of that version).
OLD_CHECKPOINT = (
    '{"server_id":3,"binlog_file":"mysql-bin.000002","binlog_pos":1234,"gtid_set":"0-3-9",'
    '"server_identity":"mariadb:0:3","txn_index":5,"order_key":99,"last_heartbeat":1700000000000,'
    '"schema_version":4,"snapshot":"{\\"tables\\":[]}"}'
)
# Written right after a failover by GTID set: no boundary on the new server yet.
OLD_GTID_FAILOVER_CHECKPOINT = (
    '{"server_id":52,"binlog_file":"","binlog_pos":4,"gtid_set":"0-51-7","server_identity":"mariadb:0:52",'
    '"txn_index":2,"order_key":0,"last_heartbeat":null,"schema_version":0,"snapshot":null}'
)


@pytest.mark.parametrize(
    "earlier,later",
    [
        (Coordinate("mysql-bin.000001", 4), Coordinate("mysql-bin.000001", 5)),
        (Coordinate("mysql-bin.000001", 99999), Coordinate("mysql-bin.000002", 4)),
        # The padding is outgrown: by name ".1000000" < ".999999", by number it comes after.
        (Coordinate("mysql-bin.999999", 120), Coordinate("mysql-bin.1000000", 4)),
        (Coordinate("b.9", 4), Coordinate("b.10", 4)),
        (Coordinate("b.000009", 4), Coordinate("b.000010", 4)),
        # A file without a number (NOWHERE's empty name) sorts before every numbered file.
        (NOWHERE, Coordinate("mysql-bin.000001", 4)),
        (Coordinate("relay", 900), Coordinate("relay.000001", 4)),
    ],
    ids=["same-file", "next-file", "wider-number", "unpadded", "padded", "nowhere", "unnumbered"],
)
def test_coordinates_order_by_file_number_then_position(earlier: Coordinate, later: Coordinate) -> None:
    assert (earlier < later, earlier <= later, earlier > later, earlier >= later) == (True, True, False, False)
    assert (later > earlier, later >= earlier, later == earlier, later != earlier) == (True, True, False, True)
    assert sorted([later, earlier]) == [earlier, later]
    assert max(earlier, later) == later


def test_equal_coordinates_are_equal_in_every_comparison() -> None:
    a, b = Coordinate("mysql-bin.1000000", 4), Coordinate("mysql-bin.1000000", 4)
    assert (a == b, a <= b, a >= b, a < b, a > b, hash(a) == hash(b)) == (True, True, True, False, False, True)


def test_same_number_differently_padded_is_a_different_coordinate_with_a_stable_order() -> None:
    short, padded = Coordinate("b.1", 4), Coordinate("b.000001", 4)
    assert short != padded
    assert sorted([short, padded]) == sorted([padded, short]) == [padded, short]


@pytest.mark.parametrize(
    "coordinate,text",
    [
        (Coordinate("mysql-bin.000042", 1234), "mysql-bin.000042:1234"),
        (Coordinate("mysql-bin.1000000", 4), "mysql-bin.1000000:4"),
        (Coordinate("c:/logs/bin.000001", 4), "c:/logs/bin.000001:4"),  # a colon in the name: the last one splits
        (NOWHERE, ":4"),
    ],
    ids=["plain", "wide", "colon-in-file", "nowhere"],
)
def test_text_form_round_trips(coordinate: Coordinate, text: str) -> None:
    assert str(coordinate) == text
    assert Coordinate.parse(text) == coordinate


@pytest.mark.parametrize("text", ["mysql-bin.000001", "mysql-bin.000001:", "mysql-bin.000001:x4", "b.1:-4"])
def test_parse_refuses_what_is_not_file_colon_position(text: str) -> None:
    with pytest.raises(ValueError, match="not a binlog coordinate"):
        Coordinate.parse(text)


def test_negative_position_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        Coordinate("b.000001", -1)


def test_coordinate_helpers() -> None:
    assert Coordinate.start_of("b.000007") == Coordinate("b.000007", 4)
    assert Coordinate("b.000007", 4).at(900) == Coordinate("b.000007", 900)
    assert Coordinate("", 4) == NOWHERE
    read = Coordinate.read("b.000007", 900)  # the stream's, made without the check
    assert (read == Coordinate("b.000007", 900), hash(read) == hash(Coordinate("b.000007", 900))) == (True, True)
    assert (read < Coordinate("b.000007", 901), read > Coordinate("b.000006", 901), str(read)) == (
        True,
        True,
        "b.000007:900",
    )


def test_old_checkpoint_loads_and_is_written_back_unchanged() -> None:
    pos = Position.from_json(OLD_CHECKPOINT)
    assert pos == Position(
        server_id=3,
        coordinate=Coordinate("mysql-bin.000002", 1234),
        gtid_set="0-3-9",
        server_identity="mariadb:0:3",
        txn_index=5,
        order_key=99,
        last_heartbeat=1700000000000,
        schema_version=4,
        snapshot='{"tables":[]}',
    )
    assert pos.to_json() == OLD_CHECKPOINT
    assert Position.from_json(OLD_CHECKPOINT.encode()) == pos


def test_old_gtid_failover_checkpoint_loads_as_nowhere() -> None:
    pos = Position.from_json(OLD_GTID_FAILOVER_CHECKPOINT)
    assert (pos.server_id, pos.coordinate, pos.gtid_set, pos.txn_index) == (52, NOWHERE, "0-51-7", 2)
    assert pos.to_json() == OLD_GTID_FAILOVER_CHECKPOINT


def test_continued_by_gtid_keeps_the_set_and_the_rows_already_committed() -> None:
    old = Position(
        server_id=51,
        coordinate=Coordinate("b.000003", 700),
        gtid_set="0-51-7",
        server_identity="mariadb:0:51",
        txn_index=3,
        order_key=40,
        last_heartbeat=1000,
    )
    new = old.continued_by_gtid(server_id=52, identity="mariadb:0:52")
    assert (new.server_id, new.server_identity, new.coordinate) == (52, "mariadb:0:52", NOWHERE)
    assert (new.gtid_set, new.txn_index, new.order_key, new.last_heartbeat) == ("0-51-7", 3, 40, 1000)
    assert old.coordinate == Coordinate("b.000003", 700)  # the old value is untouched


def test_position_text_names_its_coordinate() -> None:
    pos = Position(server_id=9, coordinate=Coordinate("b.1000000", 4), gtid_set="0-9-1").inside(2, 5)
    assert str(pos) == "b.1000000:4+2 gtid=0-9-1 server_id=9"


@pytest.mark.parametrize(
    "row_file,row_pos,coordinate",
    [("mysql-bin.000003", 120, Coordinate("mysql-bin.000003", 120)), (None, None, None), ("b.1", None, None)],
    ids=["both-columns", "null-columns", "null-position"],
)
def test_history_entry_maps_the_coordinate_to_its_two_columns(
    row_file: str | None, row_pos: int | None, coordinate: Coordinate | None
) -> None:
    row = {
        "version": 1,
        "base_version": 0,
        "server_id": 7,
        "binlog_file": row_file,
        "binlog_pos": row_pos,
        "gtid": None,
        "last_heartbeat": None,
        "kind": "delta",
        "payload": "{}",
        "sql": "DROP TABLE t",
    }
    entry = HistoryEntry.from_row(row)
    assert entry.coordinate == coordinate
    if coordinate is not None:
        assert entry.row() == row


def test_snapshot_keys_are_sealed_in_checkpoints_with_the_column_hash_key() -> None:
    from mysqlcapture_worker.positions import Ahead, CheckpointKeyError, SnapshotJob, seal_snapshot_keys

    job = SnapshotJob(
        (("shop", "users"), ("shop", "tokens")),
        reason="initial",
        started=True,
        last=("secret@example.com", 7),
        ranges=((None, ("alpha-secret",)), (("beta-secret",), ("gamma-secret",))),
        ahead=(Ahead(1, 5, ((("delta-secret",), None),)),),
    )
    try:
        seal_snapshot_keys(b"k1")
        text = job.to_json()
        assert "secret" not in text and '"sealed"' in text
        assert SnapshotJob.from_json(text) == job
        assert job.to_json() != text  # a fresh nonce each time
        seal_snapshot_keys(b"k2")  # a rotation in this process: what the old key sealed still opens
        assert SnapshotJob.from_json(text) == job
        seal_snapshot_keys(None)
        seal_snapshot_keys(b"k3")  # a new process with another key: it does not
        with pytest.raises(CheckpointKeyError, match=r"sealed with another spec\.columns\.hash key"):
            SnapshotJob.from_json(text)
        seal_snapshot_keys(None)
        with pytest.raises(CheckpointKeyError, match="no key is set"):
            SnapshotJob.from_json(text)
        assert "secret@example.com" in job.to_json()  # without rules, keys are written as they are
        assert SnapshotJob.from_json(job.to_json()) == job
    finally:
        seal_snapshot_keys(None)
