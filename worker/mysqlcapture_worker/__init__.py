"""The CDC worker: streams a MySQL/MariaDB binlog into an exactly-once change log."""
