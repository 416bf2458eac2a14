"""The one pytest setup of every tier (tests/, proptests/, stats/): the Triton interpreter where there is no GPU, the
Hypothesis profiles (registered once), the ``slow`` opt-in and the ``stats`` marker. torch is optional: the
reference-only runs (Python 3.12, 3.13) have none.

Hypothesis profiles, chosen by HYPOTHESIS_PROFILE: ``ci`` (``make test``: derandomized, the same examples every
run), ``dev`` (the default: local exploration), ``gpu`` (compiled kernels on a CUDA GPU). The property tier sizes
its tests from the profile's name (``proptests/strategies.prop_settings``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings


def _nvidia_gpu_listed() -> bool:
    """An NVIDIA driver that lists a GPU (checked without importing anything)."""
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus")) or os.path.exists("/dev/nvidia0")
    except OSError:
        return os.path.exists("/dev/nvidia0")


# Triton reads TRITON_INTERPRET when a kernel module is imported (at @triton.jit time): set it before anything
# imports triton. setdefault: an explicit TRITON_INTERPRET=0/1 from the caller wins.
if not _nvidia_gpu_listed():
    os.environ.setdefault("TRITON_INTERPRET", "1")

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True, database=None,
                          suppress_health_check=_SLOW_OK)
settings.register_profile("dev", deadline=None, print_blob=True, suppress_health_check=_SLOW_OK)
settings.register_profile("gpu", deadline=None, print_blob=True, max_examples=2000, suppress_health_check=_SLOW_OK)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
if PROFILE not in ("ci", "dev", "gpu"):
    raise ValueError(f"HYPOTHESIS_PROFILE: expected ci, dev or gpu, got {PROFILE!r}")
settings.load_profile(PROFILE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stats: statistical audit (CI-sized)")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or os.environ.get("PP3_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or PP3_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
