"""Every test under tests/k8s/ not marked `unit` is marked `k8s` (the fixtures are in fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and item.get_closest_marker("unit") is None:
            item.add_marker(pytest.mark.k8s)
