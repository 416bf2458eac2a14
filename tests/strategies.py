"""Shared Hypothesis strategies for the reference tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

FMAX = float(np.finfo(np.float32).max)
INF, NAN = float("inf"), float("nan")
U64 = (1 << 64) - 1

# fp32 logits: any fp32 (NaN, infinities, subnormals), biased towards ties, signed zeros, -inf masks and extremes.
special_logits = st.sampled_from([0.0, -0.0, -INF, 1.0, -1.0, FMAX, -FMAX, 1e-45, -1e-45, 2.0, -38.0, -104.0])
logit = st.one_of(
    st.floats(width=32),
    st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-30.0, max_value=30.0),
    st.integers(-3, 3).map(float),
    special_logits,
)
finite_logit = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-50.0, max_value=50.0),
    st.integers(-3, 3).map(float),
    st.sampled_from([0.0, -0.0, -INF]),
)
temperature = st.one_of(st.sampled_from([1.0, 0.0, -0.0, 0.5, INF, NAN, -1.0, -INF, 1e-45]), st.floats(width=32))
uint64 = st.one_of(st.sampled_from([0, 1, 1 << 63, U64 - 1, U64]), st.integers(0, U64))
tau = st.one_of(
    st.sampled_from([float(np.float32(0.7)), 1.0, 1e-45, FMAX, 1e-3, 1e6]),
    st.floats(width=32, min_value=2.0**-149, max_value=FMAX, allow_nan=False, allow_infinity=False),
)


@st.composite
def rows(draw: st.DrawFn, max_v: int = 80) -> list[float]:
    """A row of logits: mostly finite (so that most rows are OK), sometimes any fp32 at all."""
    element = draw(st.sampled_from([finite_logit, finite_logit, finite_logit, logit]))
    return draw(st.lists(element, min_size=1, max_size=max_v))
