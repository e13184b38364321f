"""Suite-wide settings: slow tests get a longer per-test timeout than the default of ``pyproject.toml``."""

from __future__ import annotations

import pytest

SLOW_TIMEOUT = 3600
"""Seconds a test marked ``slow`` may take before pytest-timeout fails it with every thread's stack."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
