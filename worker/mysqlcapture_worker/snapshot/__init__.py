"""Consistent snapshots of existing rows (Maxwell's bootstrap events), resumable and re-runnable on demand."""
