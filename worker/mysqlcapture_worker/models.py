"""The change event: one model for every sink, Maxwell's JSON plus the capture's total ordering key."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class ChangeEvent:
    """A row change or a DDL event. `data_json`/`old_json`/`pk_json` are rendered once, at decode time.

    Identity (what makes an event unique across restarts and failovers):
    (server_id, binlog_file, binlog_pos, row_index), where `binlog_pos` is the position at which the
    event's transaction starts and `row_index` counts the transaction's events from 0.
    """

    order_key: int
    database: str
    table: str | None
    type: str
    ts: int
    server_id: int
    thread_id: int | None
    xid: int | None
    commit: bool
    gtid: str | None
    binlog_file: str
    binlog_pos: int  # position of the event's transaction start (a boundary)
    event_pos: int  # position right after the binlog event that carried the row (Maxwell's "position")
    row_index: int
    pk_json: str | None
    pk_columns: tuple[str, ...]
    data_json: str | None
    old_json: str | None
    sql: str | None = None

    @property
    def pk_hash(self) -> str | None:
        if self.pk_json is None:
            return None
        return pk_hash(self.database, self.table or "", self.pk_json)

    def to_maxwell(self) -> dict[str, Any]:
        """Maxwell's JSON object for this event (data/old embedded as parsed JSON fragments)."""
        out: dict[str, Any] = {"database": self.database}
        if self.sql is not None:  # DDL: Maxwell's shape for table-*/database-* events
            out["type"] = self.type
            if self.table is not None:
                out["table"] = self.table
            if self.data_json is not None:
                out["def"] = orjson.Fragment(self.data_json)
            if self.old_json is not None:
                out["old"] = orjson.Fragment(self.old_json)
            out["ts"] = self.ts * 1000
            out["sql"] = self.sql
            out["position"] = f"{self.binlog_file}:{self.event_pos}"
            if self.gtid:
                out["gtid"] = self.gtid
            out["server_id"] = self.server_id
            out["_order_key"] = self.order_key
            return out
        out["table"] = self.table
        out["type"] = self.type
        out["ts"] = self.ts
        if self.xid is not None:
            out["xid"] = self.xid
        if self.commit:
            out["commit"] = True
        out["position"] = f"{self.binlog_file}:{self.event_pos}"
        if self.gtid:
            out["gtid"] = self.gtid
        out["server_id"] = self.server_id
        if self.thread_id is not None:
            out["thread_id"] = self.thread_id
        if self.pk_json is not None:
            out["primary_key"] = orjson.Fragment(self.pk_json)
            out["primary_key_columns"] = list(self.pk_columns)
        out["data"] = orjson.Fragment(self.data_json or "{}")
        if self.old_json is not None:
            out["old"] = orjson.Fragment(self.old_json)
        out["_order_key"] = self.order_key
        return out

    def to_json_line(self) -> bytes:
        return orjson.dumps(self.to_maxwell())


def pk_hash(database: str, table: str, pk_json: str) -> str:
    """A stable 16-hex-digit hash of a row's identity: table and primary-key values."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{database}\x00{table}\x00{pk_json}".encode())
    return digest.hexdigest()
