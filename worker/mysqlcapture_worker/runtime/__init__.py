"""The worker process's parts: start-up, the reader thread, the commit loop, metric updates, the shared state."""
