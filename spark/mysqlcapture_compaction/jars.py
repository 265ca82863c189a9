"""Which Delta Lake jars compaction runs with: no Spark import, so the operator can build manifests from it."""

from __future__ import annotations

DELTA_VERSION = "4.4.0"
SCALA_BINARY = "2.13"
SPARK_LINE = "4.2"
DELTA_PACKAGE = f"io.delta:delta-spark_{SPARK_LINE}_{SCALA_BINARY}:{DELTA_VERSION}"
# The jars a session needs: Delta's Spark module and its storage layer (Spark itself ships with pyspark).
DELTA_JARS = (
    f"io.delta_delta-spark_{SPARK_LINE}_{SCALA_BINARY}-{DELTA_VERSION}.jar",
    f"io.delta_delta-storage-{DELTA_VERSION}.jar",
)
