"""One small Delta-enabled SparkSession (local[2]) shared by every Spark test of the run."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from mysqlcapture_compaction.session import build_session

    session = build_session(master="local[2]", app_name="mysqlcapture-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _forget_tables(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that used the session: drop what the driver keeps of the tables it wrote.

    Delta caches a DeltaLog (and its snapshot's plans) per table path for the JVM's life, and py4j keeps each
    Java object a Python DataFrame names until Python collects it. One job run starts one JVM and ends; the
    shared session of a whole tier would otherwise hold every test's tables (hundreds) until its heap ran out.
    """
    yield
    # The session, if the test used it (directly or through a fixture); a test may name a parameter `spark` too.
    session = (getattr(request.node, "funcargs", None) or {}).get("spark")
    if isinstance(session, SparkSession):
        gc.collect()
        session.catalog.clearCache()
        jvm = session.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()
