"""MariaDB's compressed binlog events (replication/mariadb_wire.py), on bytes a MariaDB 10.11 server wrote with
log_bin_compress=ON."""

from __future__ import annotations

import struct
import zlib

import pytest
from mysqlcapture_worker.replication import mariadb_wire as M
from mysqlcapture_worker.replication.mysql_wire import HEADER, WireFormatError

pytestmark = pytest.mark.unit

# Query_compressed (165) of `CREATE TABLE cz.t (id INT PRIMARY KEY, v VARCHAR(200), j JSON)`, checksum removed.
QUERY = bytes.fromhex(
    "7dab0b6ba55b00000093000000cc02000000005e00000000000000000000260000000000010100002054000000000603737464042d00"
    "2d002d00082d0081cb0100000000000000813e789c730e72750c7155087174f2715548aed22b51d0c84c51f0f40b510808f2f4750c8a54"
    "f0768dd451285308730c72f6700cd2303230d0d451c852f00af6f7d3040011e7104e"
)
# Delete_rows_compressed_v1 (168) of ten rows of cz.t (id INT, v VARCHAR(200), j JSON), checksum removed.
DELETE = bytes.fromhex(
    "7dab0b6ba85b000000a80000005742000000001f020000000001000307820294789c8dcc2b1283401444d1d1ac2285a70a86efb01b04"
    "2e3631a95e1bf9274b6ac938de73ed6e8b3edc420855b82ee7cb5a35a951a2c8975bb994f3290ff0ee84a8841522f87042ab84155af0"
    "e9844e092b74e0cb09bd1256e8c1b7130625ac30801f278c4a586104bf4e9894b0c204fe9c9094b04202ff468875adc421e4811de425"
    "be8a"
)


def test_a_compressed_statement_becomes_a_query_event() -> None:
    event = M.uncompressed_event(QUERY)
    assert event[4] == M.QUERY_EVENT and struct.unpack_from("<I", event, 9)[0] == len(event)
    assert event[:4] + event[5:9] + event[13:HEADER] == QUERY[:4] + QUERY[5:9] + QUERY[13:HEADER]  # time, server, pos
    assert event.endswith(b"\0CREATE TABLE cz.t (id INT PRIMARY KEY, v VARCHAR(200), j JSON)")


def test_compressed_row_images_become_a_rows_event() -> None:
    event = M.uncompressed_event(DELETE)
    assert event[4] == 25 and struct.unpack_from("<I", event, 9)[0] == len(event)
    # The post-header (table id, flags), the column count (3) and the bitmap are kept; ten rows follow, each a
    # null bitmap, an INT and a VARCHAR(200) of `value-19N` five times, a JSON document.
    assert event[HEADER : HEADER + 10] == DELETE[HEADER : HEADER + 10] and event[HEADER + 8] == 3
    images = event[HEADER + 10 :]
    assert images.count(b"value-191" * 5) == 1 and images.count(b"value-200" * 5) == 1 and len(images) > 400


def test_bad_compressed_data_is_refused_by_name() -> None:
    assert M.uncompress(bytes([0x81, 5]) + zlib.compress(b"hello")) == b"hello"
    with pytest.raises(WireFormatError, match="algorithm 1"):
        M.uncompress(bytes([0x91, 5]) + zlib.compress(b"hello"))
    with pytest.raises(WireFormatError, match="uncompressed to 5 bytes, not 6"):
        M.uncompress(bytes([0x81, 6]) + zlib.compress(b"hello"))
    with pytest.raises(WireFormatError, match="does not uncompress"):
        M.uncompress(bytes([0x81, 5]) + b"not zlib")
    with pytest.raises(WireFormatError, match="compression header"):
        M.uncompress(b"hello")
    with pytest.raises(WireFormatError, match="cut short"):
        M.uncompressed_event(DELETE[: HEADER + 9])


@pytest.mark.parametrize(
    "body,extra",
    [
        ("01000000000000000000000029000000000000", 0),  # CREATE DATABASE: standalone DDL
        ("0300000000000000000000000c000000000000", 0),  # BEGIN GTID
        ("04000000000000000000000029020000000000", M.START_ALTER),
        ("05000000000000000000000029040400000000000000", M.COMMIT_ALTER),  # then the START ALTER's sequence number
        ("07000000000000000000000029080600000000000000", M.ROLLBACK_ALTER),
        ("0800000000000000000000002b2a0000000000000004", 4),  # a commit id (flag 0x02) before the extra flags
    ],
    ids=["ddl", "begin", "start-alter", "commit-alter", "rollback-alter", "commit-id"],
)
def test_gtid_extra_flags(body: str, extra: int) -> None:
    """GTID event bodies a MariaDB 10.11 server wrote with binlog_alter_two_phase=ON (the last one made up)."""
    assert M.gtid_flags_extra(bytes.fromhex(body)) == extra
