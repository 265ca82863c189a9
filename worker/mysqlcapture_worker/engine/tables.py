"""Table ids to table maps, and each table's compiled decoders at the current schema version."""

from __future__ import annotations

from mysqlcapture_api.schema.model import TableDef

from mysqlcapture_worker.column_rules import ColumnRules, TableRules
from mysqlcapture_worker.decode import compile_decoder
from mysqlcapture_worker.decode.native import native_renderer
from mysqlcapture_worker.replication.events import TableMap
from mysqlcapture_worker.schema.state import SchemaState
from mysqlcapture_worker.schema.tables import resolve_table_def


class DecodedTable:
    """One table's decoders: the reference decoder, and the compiled renderer where it covers the table."""

    __slots__ = ("decoder", "names", "pk_idx", "pk_names", "renderer", "rules", "table_def", "table_map")

    def __init__(
        self,
        table_map: TableMap,
        table_def: TableDef,
        *,
        fast: bool,
        columns: ColumnRules | None = None,
        key_hashes: bool = True,
    ) -> None:
        self.table_map = table_map
        self.table_def = table_def
        self.decoder = compile_decoder(table_map, table_def)
        self.names = tuple(table_def.column_names())
        lowered = [n.lower() for n in self.names]
        self.pk_names = tuple(table_def.primary_key)
        self.pk_idx = tuple(lowered.index(n.lower()) for n in table_def.primary_key)
        # spec.columns for this table (ColumnRuleError when a rule cannot apply): None when no column is ruled. The
        # compiled renderer applies them as it writes each row; the reference path after rendering a row.
        self.rules: TableRules | None = columns.for_table(table_def) if columns is not None else None
        redactor = self.rules.native if self.rules is not None else None
        # The compiled renderer of full row images, when every column has a native plan.
        self.renderer = (
            native_renderer(table_map, table_def, self.pk_idx, redactor, key_hashes=key_hashes) if fast else None
        )


class Tables:
    """The table maps of the current connection, and decoders cached by (table map, schema version)."""

    def __init__(
        self, schema: SchemaState, *, fast: bool, columns: ColumnRules | None = None, key_hashes: bool = True
    ) -> None:
        self._schema = schema
        self._fast = fast
        self._columns = columns
        self._key_hashes = key_hashes
        self._maps: dict[int, TableMap] = {}
        self._decoders: dict[tuple[TableMap, int], DecodedTable] = {}
        # The last one handed out, by identity: a stream hands the same TableMap object for a table's repeated map,
        # and hashing a map (every column's metadata) cost a one-row transaction more than its decoding.
        self._last: tuple[TableMap, int, DecodedTable] | None = None

    def mapped(self, table_map: TableMap) -> None:
        # The server reassigns table ids (after a FLUSH TABLES, or when a table leaves the table cache and
        # is opened again): an id may name another table later in the stream, so the latest mapping wins.
        self._maps[table_map.table_id] = table_map

    def get(self, table_id: int) -> TableMap | None:
        """The latest table map of `table_id` on this connection."""
        return self._maps.get(table_id)

    def decoded(self, table_map: TableMap) -> DecodedTable:
        """The table's decoders under the current schema."""
        last = self._last
        if last is not None and last[0] is table_map and last[1] == self._schema.version:
            return last[2]
        key = (table_map, self._schema.version)
        found = self._decoders.get(key)
        if found is None:
            table_def = resolve_table_def(table_map, self._schema.current)
            found = DecodedTable(
                table_map, table_def, fast=self._fast, columns=self._columns, key_hashes=self._key_hashes
            )
            self._decoders[key] = found
        self._last = (table_map, key[1], found)
        return found

    def forget_maps(self) -> None:
        """A new connection: table ids start afresh."""
        self._maps.clear()

    def forget_decoders(self) -> None:
        """The schema changed (or the server did): no decoder is reused."""
        self._decoders.clear()
        self._last = None
