"""Registers the ``stats`` marker (pyproject.toml declares it too) so ``pytest stats -m stats`` works anywhere."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stats: statistical audit (CI-sized)")
