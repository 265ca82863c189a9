"""Spark compaction: folds the worker's Delta change log into current-state tables and a history index."""
