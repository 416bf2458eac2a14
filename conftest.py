"""The one pytest setup of every tier (tests/, proptests/, stats/): the Triton interpreter where there is no GPU, the
Hypothesis profiles (registered once), the ``slow`` opt-in and the ``stats`` marker. torch is optional: the
reference-only runs (Python 3.12, 3.13) have none.

Hypothesis profiles, chosen by HYPOTHESIS_PROFILE: ``ci`` (``make test``: derandomized, the same examples every
run), ``dev`` (the default: local exploration), ``gpu`` (compiled kernels on a CUDA GPU). The property tier sizes
its tests from the profile's name (``proptests/strategies.prop_settings``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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


# The folders that pp3's programs write to by default (relative paths, so in the checkout when run from it):
# pp3 verify's and accept_bulk's --out, the benchmarks' and the statistical audits' results.
_DEFAULT_OUTPUTS = ("verify-failures", "results")
_CHECKOUT = Path(__file__).resolve().parent


def _default_outputs() -> dict[str, list[tuple[str, int, int]] | None]:
    """Each default output folder of the checkout: its files (path, size, mtime), or None if it does not exist."""
    found: dict[str, list[tuple[str, int, int]] | None] = {}
    for name in _DEFAULT_OUTPUTS:
        root = _CHECKOUT / name
        found[name] = None if not root.exists() else sorted(
            (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))
    return found


@pytest.fixture(autouse=True)
def _writes_only_under_its_own_folders() -> Iterator[None]:
    """Every test writes only under its own temporary folders (``tmp_path``): a test that left anything in the
    checkout's default output folders (a program run without ``--out``) fails."""
    before = _default_outputs()
    yield
    changed = [name for name, files in _default_outputs().items() if files != before[name]]
    if changed:
        pytest.fail(f"the test wrote into the checkout's {', '.join(f'{n}/' for n in changed)}: give the program "
                    "an output folder under tmp_path", pytrace=False)
