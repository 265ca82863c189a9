"""Surviving the source: heartbeats, server identity and failover, binlog purge headroom."""
