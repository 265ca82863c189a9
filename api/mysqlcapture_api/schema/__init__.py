"""What worker and compaction agree a schema is: table definitions, the DDL parser, the schema history."""
