"""Spark compaction: folds the worker's Delta change log into typed current-state tables and row histories."""
