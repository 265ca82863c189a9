"""One small Delta-enabled SparkSession (local[2]) shared by every Spark test of the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from mysqlcapture_compaction.session import build_session

    session = build_session(master="local[2]", app_name="mysqlcapture-tests")
    yield session
    session.stop()
