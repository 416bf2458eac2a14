"""Hypothesis profiles of the property suite, chosen by the environment variable HYPOTHESIS_PROFILE.

- ``ci`` (``make test``): derandomized (the same examples every run), ``CI_EXAMPLES`` examples per test times a
  per-test factor; ``pytest -n 2 proptests`` took 80 s on 2 busy CPU cores under the Triton interpreter (budget:
  6 min; the interpreter's cost follows the kernels' algorithm, so re-time after changing them).
- ``gpu``: compiled kernels on a CUDA GPU, 2000 examples per test (times the factor).
- ``dev`` (the default): local exploration, Hypothesis's default of 100 examples per test (times the factor).

The suite applies the selected profile to each of its tests explicitly (``prop_settings``), so its sizing does not
depend on which conftest loaded a global profile last when ``tests/`` and ``proptests/`` run in one session.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CI_EXAMPLES = 40
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

PROFILES: dict[str, settings] = {
    "ci": settings(
        derandomize=True,
        deadline=None,
        max_examples=CI_EXAMPLES,
        print_blob=True,
        database=None,
        suppress_health_check=_SLOW_OK,
    ),
    "gpu": settings(max_examples=2000, deadline=None, print_blob=True, suppress_health_check=_SLOW_OK),
    "dev": settings(deadline=None, print_blob=True, suppress_health_check=_SLOW_OK),
}

PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE", "dev")
if PROFILE_NAME not in PROFILES:
    raise ValueError(f"HYPOTHESIS_PROFILE: expected one of {sorted(PROFILES)}, got {PROFILE_NAME!r}")
PROFILE = PROFILES[PROFILE_NAME]


def prop_settings(factor: float = 1.0) -> settings:
    """The selected profile with ``max_examples`` scaled by ``factor`` (expensive tests take fewer examples)."""
    return settings(PROFILE, max_examples=max(2, round(PROFILE.max_examples * factor)))
