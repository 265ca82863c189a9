"""Table definitions, the schema history (initial capture plus DDL deltas) and the DDL parser."""
