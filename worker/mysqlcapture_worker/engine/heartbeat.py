"""The heartbeat table's rows: markers of the stream's progress, never change events."""

from __future__ import annotations

from collections.abc import Iterator

from mysqlcapture_worker.engine.tables import DecodedTable
from mysqlcapture_worker.replication.events import RowsEvent, TableMap


class HeartbeatDetector:
    """Recognises the heartbeat table and reads the heartbeat values (ms since epoch) its rows carry."""

    def __init__(self, table: tuple[str, str] | None, client: str | None) -> None:
        """`table`: (database, table), None for no heartbeat table; `client`: this capture's `client_id`."""
        self.table = table
        self.client = client

    def matches(self, table_map: TableMap) -> bool:
        return self.table is not None and (table_map.database, table_map.table) == self.table

    def values(self, dec: DecodedTable, ev: RowsEvent) -> Iterator[int]:
        """This capture's heartbeat values in the rows of `ev`, in order."""
        names = [n.lower() for n in dec.names]
        if "heartbeat" not in names:
            return
        idx = names.index("heartbeat")
        # Several captures may share one heartbeat table: only this capture's rows are its markers.
        client = names.index("client_id") if "client_id" in names and self.client else None
        for before, after in dec.decoder.decode(ev):
            image = after if after is not None else before
            if image is None or (client is not None and image[client] != self.client):
                continue
            if isinstance(image[idx], int):
                yield image[idx]
