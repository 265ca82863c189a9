"""The compaction image as the operator launches it: the Delta Lake jars it holds, where, and its entrypoint.

The image (spark/Dockerfile) puts them there; the operator's job manifests name them; Spark sessions load the same
jars from the local cache. No Spark import: the operator's image has none."""

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
SPARK_VERSION = "4.2.0"
"""The Apache Spark release the image is built on (pyspark's version)."""
ENTRYPOINT = "local:///opt/mysqlcapture/entrypoint.py"
"""The job's main file inside the image (spark-submit's application)."""
JARS_DIR = "/opt/mysqlcapture/jars"
"""Where the image keeps DELTA_JARS."""
IMAGE_JARS = ",".join(f"{JARS_DIR}/{j}" for j in DELTA_JARS)
"""spark.jars for a driver or executor running the image."""
