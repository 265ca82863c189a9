"""An immutable schema value: databases and their tables, stored as JSON in the schema history."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mysqlcapture_worker.schema.model import ColumnDef, TableDef


@dataclass(frozen=True)
class Schema:
    """Tables keyed by (database, table); operations return new Schemas."""

    tables: dict[tuple[str, str], TableDef] = field(default_factory=dict)
    databases: frozenset[str] = frozenset()

    @classmethod
    def empty(cls) -> Schema:
        return cls()

    def table(self, database: str, name: str) -> TableDef | None:
        found = self.tables.get((database, name))
        if found is not None:
            return found
        for (db, tbl), definition in self.tables.items():
            if db.lower() == database.lower() and tbl.lower() == name.lower():
                return definition
        return None

    def with_table(self, table: TableDef) -> Schema:
        tables = dict(self.tables)
        tables[(table.database, table.name)] = table
        return Schema(tables, self.databases | {table.database})

    def without_table(self, database: str, name: str) -> Schema:
        tables = {k: v for k, v in self.tables.items() if (k[0].lower(), k[1].lower()) != (database.lower(), name.lower())}
        return Schema(tables, self.databases)

    def with_database(self, database: str) -> Schema:
        return Schema(dict(self.tables), self.databases | {database})

    def without_database(self, database: str) -> Schema:
        tables = {k: v for k, v in self.tables.items() if k[0].lower() != database.lower()}
        return Schema(tables, frozenset(d for d in self.databases if d.lower() != database.lower()))

    def to_json(self) -> dict[str, Any]:
        return {"databases": sorted(self.databases), "tables": [asdict(t) for t in self.tables.values()]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Schema:
        tables = {}
        for raw in doc.get("tables", []):
            cols = []
            for c in raw["columns"]:
                if c.get("enum_values") is not None:
                    c = {**c, "enum_values": tuple(c["enum_values"])}
                cols.append(ColumnDef(**c))
            t = TableDef(database=raw["database"], name=raw["name"], columns=tuple(cols),
                         primary_key=tuple(raw["primary_key"]), charset=raw.get("charset", "utf8mb4"))
            tables[(t.database, t.name)] = t
        return cls(tables, frozenset(doc.get("databases", [])))
