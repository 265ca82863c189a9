"""The Delta sink's own Parquet files: what they hold, their statistics, and when delta-rs's writer is used instead."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from mysqlcapture_api.changelog import CHANGELOG_SCHEMA, Col, read_delta
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.changes import EventFactory
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.sinks.delta import DeltaSink
from mysqlcapture_worker.sinks.delta_files import local_root, partitions


def _rows(tables: list[tuple[str, str]], first: int) -> list:
    make = EventFactory(server_id=7, ts=1_700_000_000, binlog_file="mysql-bin.000003", binlog_pos=4, event_pos=4)
    out = []
    for n, (db, t) in enumerate(tables):
        key = first + n
        event = make.row(
            database=db, table=t, type="insert", pk_json=f"[{key}]", pk_columns=("id",),
            data_json=f'{{"id":{key},"v":"{"x" * (n % 50)}"}}', old_json=None,
        )  # fmt: skip
        out.append(replace(event, order_key=key, row_index=0, commit=True))
    return out


def _position(order_key: int) -> Position:
    return Position(server_id=7, coordinate=Coordinate("mysql-bin.000003", 100 + order_key), order_key=order_key)


def _adds(uri: str, version: int) -> list[dict]:
    log = Path(uri) / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line)["add"] for line in log.read_text().splitlines() if '"add"' in line]


def test_local_root_is_a_plain_path_or_file_uri_and_nothing_remote() -> None:
    assert local_root("/data/changelog", None) == Path("/data/changelog")
    assert local_root("file:///data/changelog", None) == Path("/data/changelog")
    assert local_root("s3://bucket/changelog", None) is None
    assert local_root("/data/changelog", {"AWS_REGION": "x"}) is None


def test_partitions_keep_row_order_and_refuse_names_a_path_would_escape() -> None:
    table = pa.table({"database": ["a", "b", "a", "a"], "table": ["t", "t", "t", "u"], "v": [1, 2, 3, 4]})
    parts = partitions(table, ("database", "table"))
    assert parts is not None
    got = {(p["database"], p["table"]): body.column("v").to_pylist() for p, body in parts}
    assert got == {("a", "t"): [1, 3], ("b", "t"): [2], ("a", "u"): [4]}
    assert all(body.column_names == ["v"] for _, body in parts)
    for bad in ("my-table", "café", "a b", "x/y"):
        assert partitions(pa.table({"database": ["a"], "table": [bad], "v": [1]}), ("database", "table")) is None
    assert partitions(pa.table({"database": [None], "table": ["t"], "v": [1]}), ("database", "table")) is None


def test_commits_write_their_own_files_with_delta_statistics_and_read_back_whole(tmp_path: Path) -> None:
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-files")
    sink.commit(_rows([("shop", "orders")] * 3, 1), _position(3))  # the first commit creates the table (delta-rs)
    mixed = [("shop", "orders"), ("shop", "items"), ("shop", "orders"), ("crm", "people")] * 30
    sink.commit(_rows(mixed, 4), _position(123))
    adds = _adds(uri, 1)
    assert sorted((a["partitionValues"]["database"], a["partitionValues"]["table"]) for a in adds) == [
        ("crm", "people"),
        ("shop", "items"),
        ("shop", "orders"),
    ]
    for add in adds:
        path = Path(uri) / add["path"]
        assert path.name.endswith(".snappy.parquet")
        assert add["path"].startswith(f"database={add['partitionValues']['database']}/")
        stats = json.loads(add["stats"])
        body = pq.read_table(path)
        assert stats["numRecords"] == body.num_rows == (60 if add["partitionValues"]["table"] == "orders" else 30)
        keys = body.column(Col.ORDER_KEY).to_pylist()
        assert (stats["minValues"][Col.ORDER_KEY], stats["maxValues"][Col.ORDER_KEY]) == (min(keys), max(keys))
        assert stats["nullCount"][Col.GTID] == body.num_rows
        assert Col.DATA not in stats["minValues"] and Col.DATA not in stats["nullCount"]  # no statistics on texts
        meta = pq.ParquetFile(path).metadata.row_group(0)
        assert meta.column(0).compression == "SNAPPY"
        # The columns unique per row and the JSON/SQL texts skip the dictionary, as delta-rs's writer is told.
        chunks = {meta.column(c).path_in_schema: meta.column(c) for c in range(meta.num_columns)}
        plain = {Col.ORDER_KEY, Col.ROW_INDEX, Col.PRIMARY_KEY, Col.PK_HASH, Col.DATA, Col.OLD, Col.SQL}
        assert [n for n in sorted(plain) if chunks[n].has_dictionary_page] == []
        assert chunks[Col.TYPE].has_dictionary_page and chunks[Col.BINLOG_FILE].has_dictionary_page
    rows = read_delta(uri).to_pylist()
    assert sorted(r[Col.ORDER_KEY] for r in rows) == list(range(1, 124))
    by_key = {r[Col.ORDER_KEY]: r for r in rows}
    assert (by_key[5][Col.DATABASE], by_key[5][Col.TABLE], by_key[5][Col.DATA]) == ("shop", "items", '{"id":5,"v":"x"}')
    assert [f.name for f in DeltaTable(uri).schema().fields] == CHANGELOG_SCHEMA.names
    # The checkpoint and the application transaction are in the same commit, as with delta-rs's writer.
    assert DeltaSink(uri, app_id="mysqlcapture-files").load_checkpoint() == _position(123)
    assert DeltaTable(uri).transaction_version("mysqlcapture-files") == 2


def test_a_capture_that_hashes_columns_writes_its_json_texts_with_zstd(tmp_path: Path) -> None:
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-hashed", hashed=True)
    sink.commit(_rows([("shop", "orders")] * 3, 1), _position(3))
    sink.commit(_rows([("shop", "orders")] * 40, 4), _position(43))
    (add,) = _adds(uri, 1)
    meta = pq.ParquetFile(Path(uri) / add["path"]).metadata.row_group(0)
    codecs = {meta.column(c).path_in_schema: meta.column(c).compression for c in range(meta.num_columns)}
    assert (codecs[Col.DATA], codecs[Col.OLD], codecs[Col.SQL], codecs[Col.ORDER_KEY]) == (
        "ZSTD",
        "ZSTD",
        "SNAPPY",
        "SNAPPY",
    )
    rows = sorted(read_delta(uri).to_pylist(), key=lambda r: r[Col.ORDER_KEY])
    assert [r[Col.DATA] for r in rows[3:5]] == ['{"id":4,"v":""}', '{"id":5,"v":"x"}']
    assert DeltaSink(uri, app_id="mysqlcapture-hashed").load_checkpoint() == _position(43)


def test_a_name_a_path_would_escape_goes_through_delta_rs_and_later_commits_go_on(tmp_path: Path) -> None:
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-escape")
    sink.commit(_rows([("shop", "orders")], 1), _position(1))
    sink.commit(_rows([("shop", "order-lines"), ("shop", "orders")], 2), _position(3))
    assert sorted(a["partitionValues"]["table"] for a in _adds(uri, 1)) == ["order-lines", "orders"]
    sink.commit(_rows([("shop", "orders")], 4), _position(4))
    assert _adds(uri, 2)[0]["path"].startswith("database=shop/table=orders/part-00000-")
    rows = read_delta(uri).to_pylist()
    assert sorted((r[Col.ORDER_KEY], r[Col.TABLE]) for r in rows) == [
        (1, "orders"),
        (2, "order-lines"),
        (3, "orders"),
        (4, "orders"),
    ]
    assert DeltaSink(uri, app_id="mysqlcapture-escape").load_checkpoint() == _position(4)


def test_a_commit_of_no_rows_still_records_the_checkpoint(tmp_path: Path) -> None:
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-empty")
    sink.commit(_rows([("shop", "orders")], 1), _position(1))
    sink.commit([], _position(9))
    assert _adds(uri, 1) == []
    assert DeltaSink(uri, app_id="mysqlcapture-empty").load_checkpoint() == _position(9)
    assert len(read_delta(uri).to_pylist()) == 1


def test_a_commit_after_another_writer_committed_to_the_change_log_goes_on_top_of_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "changelog")
    sink = DeltaSink(uri, app_id="mysqlcapture-other")
    sink.commit(_rows([("shop", "orders")], 1), _position(1))
    sink.commit(_rows([("shop", "orders")], 2), _position(2))  # the sink now holds the table open
    DeltaTable(uri).optimize.compact()  # e.g. a maintenance job, between two of the worker's commits
    sink.commit(_rows([("shop", "orders")], 3), _position(3))
    assert sorted(r[Col.ORDER_KEY] for r in read_delta(uri).to_pylist()) == [1, 2, 3]
    assert DeltaSink(uri, app_id="mysqlcapture-other").load_checkpoint() == _position(3)
