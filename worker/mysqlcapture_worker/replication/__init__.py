"""The one narrow interface to `mysql-replication`.

Normalized binlog events and a stream that never reconnects behind our back.
"""
