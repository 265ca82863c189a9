"""The worker's position: an immutable checkpoint value stored with every sink commit."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson
from mysqlcapture_api.coordinates import NOWHERE, Coordinate


@dataclass(frozen=True)
class Position:
    """Where the capture stands, as Maxwell's Position: a binlog coordinate plus everything needed to resume.

    `coordinate` is always a transaction boundary (where the next transaction starts), never a point
    inside one; it is `NOWHERE` (an empty file) when the capture starts or continues on a server by
    GTID set, until the first boundary there. `txn_index` counts the rows of the transaction starting
    there that are already committed to the sink: a transaction too large for one sink commit is
    written in several, and a restart re-reads it from its start and skips those rows.

    Serialised by `to_json` only, with the coordinate as the two keys `binlog_file` and `binlog_pos`
    that checkpoints have always held, so every checkpoint written before still loads.
    """

    server_id: int
    coordinate: Coordinate
    gtid_set: str = ""
    server_identity: str = ""  # MySQL server_uuid or MariaDB "domain:server_id"
    txn_index: int = 0
    order_key: int = 0  # last ordering key handed out; strictly increasing over the whole capture
    last_heartbeat: int | None = None  # last heartbeat value seen in the stream (ms since epoch)
    schema_version: int = 0
    # A snapshot in progress at this boundary (snapshot.progress.SnapshotJob as JSON), None when streaming.
    snapshot: str | None = None

    def at_boundary(self, coordinate: Coordinate, *, gtid_set: str) -> Position:
        """The position after a complete transaction, which ends where the next one starts: `coordinate`."""
        return replace(self, coordinate=coordinate, gtid_set=gtid_set, txn_index=0)

    def continued_by_gtid(self, *, server_id: int, identity: str) -> Position:
        """The same point of the capture on another server, reached by GTID set: no boundary is known there
        until the stream passes one (`NOWHERE`); the GTID set and the rows of the next transaction already
        committed (`txn_index`) stay."""
        return replace(self, server_id=server_id, server_identity=identity, coordinate=NOWHERE)

    def inside(self, txn_index: int, order_key: int) -> Position:
        """The same boundary with `txn_index` rows of the next transaction committed."""
        return replace(self, txn_index=txn_index, order_key=order_key)

    def with_order_key(self, order_key: int) -> Position:
        return replace(self, order_key=order_key)

    def with_heartbeat(self, heartbeat: int) -> Position:
        return replace(self, last_heartbeat=heartbeat)

    def with_schema_version(self, version: int) -> Position:
        return replace(self, schema_version=version)

    def with_snapshot(self, snapshot: str | None) -> Position:
        return replace(self, snapshot=snapshot)

    def with_server(self, server_id: int, identity: str) -> Position:
        return replace(self, server_id=server_id, server_identity=identity)

    def to_json(self) -> str:
        raw = asdict(self)
        coordinate = raw.pop("coordinate")
        # The keys and their order as checkpoints have always had them.
        ordered = {"server_id": raw.pop("server_id"), "binlog_file": coordinate["file"]}
        ordered["binlog_pos"] = coordinate["pos"]
        return orjson.dumps({**ordered, **raw}).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> Position:
        raw: dict[str, Any] = orjson.loads(text)
        coordinate = Coordinate(raw.pop("binlog_file"), raw.pop("binlog_pos"))
        return cls(coordinate=coordinate, **raw)

    def __str__(self) -> str:
        extra = f"+{self.txn_index}" if self.txn_index else ""
        gtid = f" gtid={self.gtid_set}" if self.gtid_set else ""
        return f"{self.coordinate}{extra}{gtid} server_id={self.server_id}"
