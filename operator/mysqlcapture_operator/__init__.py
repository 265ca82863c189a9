"""The Kubernetes operator (kopf): MySQLCapture resources in, a worker, its monitoring and compaction out."""
