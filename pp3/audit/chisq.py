"""Pearson's chi-square goodness of fit and Holm's correction, in NumPy and the standard library only.

Used by the end-to-end audit (``pp3.audit.e2e``), which must run where scipy is absent. The bin-merge rule is the one of
``stats/chisq.py``: bins of expected probability 0 are not chi-square bins (a draw there is a *support violation*
and rejects outright, p = 0); the other bins are sorted by expected count, ascending (ties: lower index first),
and grouped in that order until each group expects >= 5; a short last group joins the one before it. The
statistic has ``groups - 1`` degrees of freedom (every probability is exact, none is fitted). ``chi2_sf`` is the
regularized upper incomplete gamma function Q(df/2, x/2) (series below a+1, Lentz's continued fraction above),
checked against scipy by ``tests/test_e2e_audit.py``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

MIN_EXPECTED = 5.0
_EPS = 1e-16
_TINY = 1e-300


@dataclasses.dataclass(frozen=True)
class ChiSquare:
    """One Pearson test: statistic, degrees of freedom, p-value, groups used, impossible draws seen."""

    statistic: float
    df: int
    p: float
    groups: int
    support_violations: int


def _gamma_q(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) for a > 0, x >= 0."""
    if x <= 0.0:
        return 1.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:  # series for P(a, x), then Q = 1 - P
        ap, term = a, 1.0 / a
        total = term
        for _ in range(100_000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * _EPS:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    b = x + 1.0 - a  # continued fraction for Q (modified Lentz)
    c = 1.0 / _TINY
    d = 1.0 / b
    h = d
    for i in range(1, 100_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return min(1.0, math.exp(log_front) * h)


def chi2_sf(x: float, df: int) -> float:
    """Survival function of the chi-square distribution with ``df`` >= 1 degrees of freedom."""
    if df < 1:
        raise ValueError(f"df: expected >= 1, got {df}")
    return _gamma_q(0.5 * df, 0.5 * x)


def merge_groups(expected: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Group label per bin (every bin expected > 0), by the merge rule of the module docstring."""
    order = np.argsort(expected, kind="stable")
    labels = np.empty(expected.size, dtype=np.int64)
    group, acc, closed = 0, 0.0, -1
    for i in order:
        labels[i] = group
        acc += float(expected[i])
        if acc >= MIN_EXPECTED:
            closed, group, acc = group, group + 1, 0.0
    if acc > 0.0 and closed >= 0:  # a short last group joins the one before it
        labels[labels == group] = closed
    return labels


def pearson(
    observed: npt.ArrayLike, probs: npt.ArrayLike, sf: Callable[[float, int], float] | None = None
) -> ChiSquare:
    """Goodness of fit of bin counts to exact bin probabilities (summing to 1), with the support check.

    ``sf`` is the chi-square survival function (default: this module's ``chi2_sf``; stats/ passes SciPy's)."""
    obs = np.asarray(observed, dtype=np.int64).ravel()
    p = np.asarray(probs, dtype=np.float64).ravel()
    n = int(obs.sum())
    zero = p == 0.0
    violations = int(obs[zero].sum())
    expected = n * p[~zero] / p[~zero].sum()
    labels = merge_groups(expected)
    groups = int(labels.max()) + 1 if labels.size else 0
    if violations:
        return ChiSquare(math.inf, max(groups - 1, 0), 0.0, groups, violations)
    if groups < 2:
        return ChiSquare(0.0, 0, 1.0, groups, 0)
    o = np.bincount(labels, weights=obs[~zero], minlength=groups)
    e = np.bincount(labels, weights=expected, minlength=groups)
    stat = float(((o - e) ** 2 / e).sum())
    return ChiSquare(stat, groups - 1, (sf or chi2_sf)(stat, groups - 1), groups, 0)


def holm(pvalues: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Holm-adjusted p-values: reject the hypotheses whose adjusted p is <= the family-wise alpha."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m, dtype=np.float64)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(p[i])))
        adjusted[i] = running
    return adjusted
