"""Suite-wide fixtures: the Kubernetes tier's control plane is defined once and shared by every tier; every
server-facing test runs once per source flavor (MariaDB, MySQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from mysqlcapture_dev.embedded.server import PrivateServer
from mysqlcapture_worker.source.dialect import Flavor

from tests import servers

pytest_plugins = ["tests.k8s.fixtures"]


@pytest.fixture(scope="session", params=servers.FLAVORS)
def flavor(request: pytest.FixtureRequest) -> Flavor:
    """The source flavor of the test: each test that uses it runs on MariaDB and on MySQL."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def start_source(flavor: Flavor, request: pytest.FixtureRequest) -> Iterator[Callable[..., PrivateServer]]:
    """Starts servers of the test's flavor for one test and stops every one of them, whatever the outcome."""
    started: list[PrivateServer] = []

    def start(server_id: int, **settings: str) -> PrivateServer:
        started.append(servers.start(flavor, server_id, **settings))
        request.node.user_properties.append(("server", started[-1].version))
        return started[-1]

    yield start
    for srv in started:
        srv.stop()
