"""Binlog purge headroom arithmetic and the growth rate it is measured against."""

from __future__ import annotations

import math

import pytest
from mysqlcapture_api.coordinates import Coordinate
from mysqlcapture_worker.failover.purge import GrowthRate, Headroom, headroom
from mysqlcapture_worker.failover.resume import is_failover
from mysqlcapture_worker.positions import Position
from mysqlcapture_worker.source.checks import ServerInfo

pytestmark = pytest.mark.unit

LOGS = [("bin.000003", 1000), ("bin.000004", 2000), ("bin.000005", 500)]


@pytest.mark.parametrize(
    ("file", "pos", "rate", "expected"),
    [
        # checkpoint in the newest file (the one being written): two whole files before it, plus its offset
        ("bin.000005", 120, 10.0, Headroom(bytes=3120, files=2, seconds=312.0, purged=False, active=True)),
        # checkpoint in the oldest file: the next purge removes it
        ("bin.000003", 400, 100.0, Headroom(bytes=400, files=0, seconds=4.0, purged=False)),
        # no growth measured yet
        ("bin.000004", 4, None, Headroom(bytes=1004, files=1, seconds=None, purged=False)),
        # a source that writes nothing never purges closer
        ("bin.000004", 4, 0.0, Headroom(bytes=1004, files=1, seconds=math.inf, purged=False)),
        # the checkpoint's file is gone
        ("bin.000002", 4, 10.0, Headroom(bytes=0, files=0, seconds=0.0, purged=True)),
    ],
    ids=["newest-file", "oldest-file", "rate-unknown", "no-growth", "purged"],
)
def test_headroom(file: str, pos: int, rate: float | None, expected: Headroom) -> None:
    assert headroom(LOGS, Coordinate(file, pos), rate) == expected


def test_growth_rate_counts_bytes_written_not_bytes_kept() -> None:
    rate = GrowthRate(window=300)
    assert rate.observe([("b.1", 1000)], now=0.0) is None
    assert rate.observe([("b.1", 1600)], now=10.0) == pytest.approx(60.0)
    # b.1 purged and b.2 written: 400 new bytes over 10 s more, the purge does not count as negative growth
    assert rate.observe([("b.2", 400)], now=20.0) == pytest.approx(50.0)


def _server(server_id: int, flavor: str = "mariadb") -> ServerInfo:
    return ServerInfo(
        version="10.11", flavor=flavor, server_id=server_id, server_uuid="", gtid_domain_id=0, row_metadata="FULL"
    )


@pytest.mark.parametrize(
    ("identity", "server_id", "server", "failover"),
    [
        ("mariadb:0:1", 1, _server(1), False),
        ("mariadb:0:1", 1, _server(2), True),
        ("", 1, _server(1), False),  # an old checkpoint without identity: server_id decides
        ("", 1, _server(3), True),
    ],
    ids=["same", "other-server", "no-identity-same-id", "no-identity-other-id"],
)
def test_is_failover(identity: str, server_id: int, server: ServerInfo, failover: bool) -> None:
    pos = Position(server_id=server_id, coordinate=Coordinate("b.1", 4), server_identity=identity)
    assert is_failover(pos, server) is failover
