"""The one narrow interface to `mysql-replication`: normalized binlog events and a stream that never reconnects behind our back."""
