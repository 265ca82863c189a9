"""The schema at the stream's position: read from the server, kept in step with the history, matched to TABLE_MAPs."""
