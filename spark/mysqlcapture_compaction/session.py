"""The SparkSession with Delta Lake, on jars pre-resolved from Maven Central into a cache outside the repository.

`make spark-jars` (part of `make setup`) runs `python -m mysqlcapture_compaction.session --resolve`, which lets
Spark's own package resolution (Ivy) fetch the pinned Delta coordinates once into `jar_cache()`. Sessions then
load those exact jar files with `spark.jars`: nothing is resolved or downloaded when a job or a test runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mysqlcapture_api.compaction_image import DELTA_JARS, DELTA_PACKAGE
from pyspark.sql import SparkSession

# Small, quiet sessions: the defaults (200 shuffle partitions, 50 log-replay partitions, 10,000 partitions for
# VACUUM's file listing) cost far more than the work on small tables and two cores.
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    # A deep stack: a table with many ALTERs in one run plans a union of many schema segments, and a task's
    # deserialisation recurses once per plan node.
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=warn -Xss16m",
}
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # VACUUM's retention floor is enforced by the job itself (never below what is not yet compacted).
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    # Compiled code kept for reuse: a run plans many small Delta operations per table (log replay, statistics,
    # deletion vectors) whose generated classes repeat; with the default 100 entries they were evicted and
    # compiled again. An incremental run of 8 tables took 15% less CPU with 1,000 entries (2,000 gained nothing
    # more). Each entry keeps its source text on the driver's heap: about 80 KB, so 1,000 hold ~80 MB of it.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # Keep one JSON parse per row image. With this optimization on, Spark rewrites each `from_json(image).column`
    # into its own from_json of a one-field schema: a 12-column image was parsed 12 times, and parsing was 45% of
    # a full run's CPU.
    "spark.sql.optimizer.enableJsonExpressionOptimization": "false",
    # PySpark 4 records the Python call site of every Column and DataFrame call for error messages: two JVM calls
    # and a walk of the Python stack each. Compaction builds its plans from thousands of such calls per table (a
    # foreign-key expansion of 887 events spent 22 s building plans with it, 9 s without).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def jar_cache() -> Path:
    """Where `make spark-jars` keeps the Ivy cache: $MYSQLCAPTURE_SPARK_JARS, else ~/.cache/mysqlcapture/ivy."""
    env = os.environ.get("MYSQLCAPTURE_SPARK_JARS")
    return Path(env) if env else Path.home() / ".cache" / "mysqlcapture" / "ivy"


def delta_jars(cache: Path | None = None) -> list[Path]:
    """The pinned Delta jar files, or an error telling how to fetch them."""
    folder = (cache or jar_cache()) / "jars"
    jars = [folder / name for name in DELTA_JARS]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise FileNotFoundError(
            f"Delta jars missing: {', '.join(missing)}; run `make spark-jars` (or set MYSQLCAPTURE_SPARK_JARS to a "
            f"folder whose jars/ holds {DELTA_PACKAGE} and its delta-storage)"
        )
    return jars


def build_session(
    *, master: str | None = "local[2]", app_name: str = "mysqlcapture-compaction", conf: dict[str, str] | None = None
) -> SparkSession:
    """A Delta-enabled SparkSession.

    `master=None` means spark-submit (Kubernetes) already set the master and the image's jars (spark.jars).
    """
    builder = SparkSession.builder.appName(app_name)
    settings = {**DELTA_CONF}
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):
        settings.update(LOCAL_CONF)
        # Python workers run this interpreter (its venv has this package), not whatever python3 is on PATH.
        settings["spark.pyspark.python"] = sys.executable
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    if master is not None and "spark.jars" not in settings and "spark.jars.packages" not in settings:
        settings["spark.jars"] = ",".join(str(j) for j in delta_jars())
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# Maven Central only: Spark's default Ivy chain also asks repos.spark-packages.org, which is unreachable from
# many build hosts (one "Host ... not found" line per artifact) and holds nothing Delta needs.
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <resolvers>
    <ibiblio name="central" m2compatible="true" root="https://repo1.maven.org/maven2/"/>
  </resolvers>
</ivysettings>
"""


def resolve(cache: Path) -> list[Path]:
    """Fetch DELTA_PACKAGE (and its dependencies) from Maven Central into `cache` with Spark's Ivy resolution."""
    cache.mkdir(parents=True, exist_ok=True)
    settings = cache / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS)
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("mysqlcapture-resolve-jars")
        .config("spark.jars.packages", DELTA_PACKAGE)
        .config("spark.jars.ivy", str(cache))
        .config("spark.jars.ivySettings", str(settings))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.stop()
    return delta_jars(cache)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Pre-resolve the pinned Delta Lake jars for Spark sessions.")
    parser.add_argument("--resolve", action="store_true", help="fetch the jars unless already cached")
    parser.add_argument("--cache", type=Path, default=None, help="Ivy cache folder (default: jar_cache())")
    args = parser.parse_args(argv)
    cache = args.cache or jar_cache()
    try:
        jars = delta_jars(cache)
    except FileNotFoundError:
        if not args.resolve:
            raise
        jars = resolve(cache)
    for jar in jars:
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
