"""The schema history (seed 000): versioned schemas keyed by binlog position, kept in a small Delta table."""

from __future__ import annotations

import json

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from mysqlcapture_worker.schema.schema import Schema

_SCHEMA = pa.schema(
    [
        pa.field("version", pa.int64(), nullable=False),
        pa.field("base_version", pa.int64()),
        pa.field("server_id", pa.int64()),
        pa.field("binlog_file", pa.string()),
        pa.field("binlog_pos", pa.int64()),
        pa.field("gtid", pa.string()),
        pa.field("last_heartbeat", pa.int64()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("payload", pa.string(), nullable=False),
        pa.field("sql", pa.string()),
    ]
)


class SchemaHistory:
    """Entries are written ahead of the change-log commit that references their version.

    Each entry stores the whole resulting schema (simple and self-contained; a schema is small
    next to the change log). Versions past a checkpoint are dropped with `truncate_after`.
    """

    def __init__(self, uri: str, storage_options: dict[str, str] | None) -> None:
        self.uri = uri
        self.storage_options = storage_options

    @classmethod
    def open(cls, uri: str, storage_options: dict[str, str] | None = None) -> SchemaHistory:
        return cls(uri, storage_options)

    def _table(self) -> DeltaTable | None:
        try:
            return DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None

    def _write(self, version: int, base: int | None, kind: str, schema: Schema, *, server_id: int,
               binlog_file: str, binlog_pos: int, gtid: str | None, last_heartbeat: int | None,
               sql: str | None) -> int:
        self.truncate_after(version - 1)
        row = {
            "version": [version], "base_version": [base], "server_id": [server_id], "binlog_file": [binlog_file],
            "binlog_pos": [binlog_pos], "gtid": [gtid], "last_heartbeat": [last_heartbeat], "kind": [kind],
            "payload": [json.dumps(schema.to_json())], "sql": [sql],
        }
        write_deltalake(self.uri, pa.Table.from_pydict(row, schema=_SCHEMA), mode="append",
                        storage_options=self.storage_options)
        return version

    def initial(self, schema: Schema, *, server_id: int, binlog_file: str, binlog_pos: int,
                gtid: str | None) -> int:
        return self._write(0, None, "capture", schema, server_id=server_id, binlog_file=binlog_file,
                           binlog_pos=binlog_pos, gtid=gtid, last_heartbeat=None, sql=None)

    def record(self, *, base_version: int, before: Schema, after: Schema, server_id: int, binlog_file: str,
               binlog_pos: int, gtid: str | None, last_heartbeat: int | None, sql: str) -> int:
        del before
        return self._write(base_version + 1, base_version, "delta", after, server_id=server_id,
                           binlog_file=binlog_file, binlog_pos=binlog_pos, gtid=gtid,
                           last_heartbeat=last_heartbeat, sql=sql)

    def truncate_after(self, version: int) -> None:
        table = self._table()
        if table is not None:
            table.delete(f"version > {int(version)}")

    def schema_at(self, version: int) -> Schema:
        table = self._table()
        if table is None:
            raise RuntimeError(f"schema history {self.uri} is missing; the change log cannot be resumed safely")
        rows = table.to_pyarrow_table(filters=[("version", "=", version)]).to_pylist()
        if not rows:
            raise RuntimeError(f"schema history {self.uri} has no version {version}")
        return Schema.from_json(json.loads(rows[0]["payload"]))
