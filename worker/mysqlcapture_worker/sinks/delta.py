"""The default sink: a Delta Lake change log, each commit carrying the checkpoint and an application transaction."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError

from mysqlcapture_worker.models import ChangeEvent, pk_hash
from mysqlcapture_worker.positions import Position

log = logging.getLogger(__name__)

CHECKPOINT_KEY = "mysqlcapture.checkpoint"
VERSION_KEY = "mysqlcapture.commit"

CHANGELOG_SCHEMA = pa.schema(
    [
        pa.field("order_key", pa.int64(), nullable=False),
        pa.field("server_id", pa.int64(), nullable=False),
        pa.field("gtid", pa.string()),
        pa.field("binlog_file", pa.string(), nullable=False),
        pa.field("binlog_pos", pa.int64(), nullable=False),
        pa.field("row_index", pa.int64(), nullable=False),
        pa.field("event_pos", pa.int64(), nullable=False),
        pa.field("xid", pa.int64()),
        pa.field("commit", pa.bool_(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("thread_id", pa.int64()),
        pa.field("type", pa.string(), nullable=False),
        pa.field("primary_key", pa.string()),
        pa.field("primary_key_columns", pa.string()),
        pa.field("pk_hash", pa.string()),
        pa.field("data", pa.string()),
        pa.field("old", pa.string()),
        pa.field("sql", pa.string()),
        pa.field("database", pa.string(), nullable=False),
        pa.field("table", pa.string()),
    ]
)
PARTITION_BY = ["database", "table"]


def events_to_arrow(events: list[ChangeEvent]) -> pa.Table:
    """Column-wise conversion; one pass per column keeps it cheap for large batches."""
    cols: dict[str, list[Any]] = {
        "order_key": [e.order_key for e in events],
        "server_id": [e.server_id for e in events],
        "gtid": [e.gtid for e in events],
        "binlog_file": [e.binlog_file for e in events],
        "binlog_pos": [e.binlog_pos for e in events],
        "row_index": [e.row_index for e in events],
        "event_pos": [e.event_pos for e in events],
        "xid": [e.xid for e in events],
        "commit": [e.commit for e in events],
        "ts": [e.ts for e in events],
        "thread_id": [e.thread_id for e in events],
        "type": [e.type for e in events],
        "primary_key": [e.pk_json for e in events],
        "primary_key_columns": [
            orjson.dumps(list(e.pk_columns)).decode() if e.pk_json is not None else None for e in events
        ],
        "pk_hash": [pk_hash(e.database, e.table or "", e.pk_json) if e.pk_json is not None else None for e in events],
        "data": [e.data_json for e in events],
        "old": [e.old_json for e in events],
        "sql": [e.sql for e in events],
        "database": [e.database for e in events],
        "table": [e.table for e in events],
    }
    return pa.Table.from_pydict(cols, schema=CHANGELOG_SCHEMA)


class DeltaSink:
    """Appends to one Delta table partitioned by database and table.

    Exactly-once: every commit holds the events, the checkpoint (commit metadata) and a Delta
    application transaction `(app_id, n)`. A crash before the commit loses the batch, which the
    worker re-reads from the previous checkpoint; a crash after it leaves a checkpoint that already
    covers the batch. Either way nothing is written twice.
    """

    def __init__(self, uri: str, *, app_id: str, storage_options: dict[str, str] | None = None) -> None:
        self.uri = uri
        self.app_id = app_id
        self.storage_options = storage_options or None
        self._commit_no: int | None = None

    def _table(self) -> DeltaTable | None:
        try:
            return DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None

    def load_checkpoint(self) -> Position | None:
        table = self._table()
        if table is None:
            self._commit_no = 0
            return None
        version = table.transaction_version(self.app_id)
        if version is None:
            self._commit_no = 0
            return None
        self._commit_no = int(version)
        wanted = str(version)
        # Our commit is normally the newest; compaction commits (OPTIMIZE, VACUUM) may sit above it.
        limit = 16
        while True:
            history = table.history(limit)
            for entry in history:
                if entry.get(VERSION_KEY) == wanted and CHECKPOINT_KEY in entry:
                    return Position.from_json(entry[CHECKPOINT_KEY])
            if len(history) < limit:
                break
            limit *= 4
        raise RuntimeError(
            f"change log {self.uri} records application transaction {self.app_id}={version} but no commit "
            "carries its checkpoint; the Delta log was edited or truncated"
        )

    def commit(self, events: list[ChangeEvent], position: Position) -> None:
        if self._commit_no is None:
            self.load_checkpoint()
        assert self._commit_no is not None
        number = self._commit_no + 1
        props = CommitProperties(
            custom_metadata={CHECKPOINT_KEY: position.to_json(), VERSION_KEY: str(number)},
            app_transactions=[Transaction(self.app_id, number)],
        )
        write_deltalake(
            self.uri,
            events_to_arrow(events),
            mode="append",
            partition_by=PARTITION_BY,
            storage_options=self.storage_options,
            commit_properties=props,
        )
        self._commit_no = number

    def close(self) -> None:
        return None
