"""The statistics: Pearson's chi-square with the stated bin-merge rule, the pair (contingency) test, Holm.

Merge rule (STATS.md "Method"): bins whose expected probability is exactly 0 are not chi-square bins (see
``support violations`` below). The remaining bins are sorted by expected count, ascending (ties: lower bin
index first); walking that order, bins are added to the current group until its expected count is >= 5, then a
new group starts; a last group still short of 5 joins the group before it. Pearson's statistic is computed on
the groups, with ``groups - 1`` degrees of freedom (every expected probability is known exactly, none is fitted).

Support violations: a draw in a bin of expected probability 0 (a zero-ticket or empty slot) is impossible under
the null hypothesis, so it rejects outright (p = 0). This is exact, and it is the only way a frequency test can
see a bug that gives a handful of tickets to a slot that must have none.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats as sps

from pp3.audit.chisq import MIN_EXPECTED, ChiSquare, holm, merge_groups
from pp3.audit.chisq import pearson as _pearson

# The Pearson machinery is the library's (pp3/audit/chisq.py, scipy-free); here only the p-value comes from SciPy.
__all__ = ["MIN_EXPECTED", "ChiSquare", "holm", "independence", "merge_groups", "pearson", "power_at", "power_n50"]


def pearson(observed: npt.ArrayLike, probs: npt.ArrayLike) -> ChiSquare:
    """Goodness of fit of bin counts to exact bin probabilities (which sum to 1), with the support check."""
    return _pearson(observed, probs, sf=lambda x, df: float(sps.chi2.sf(x, df)))


def independence(table: npt.NDArray[np.int64]) -> ChiSquare:
    """Pearson's test of independence on an r x c contingency table (marginals estimated, (r-1)(c-1) df).

    Rows or columns with no count carry no information about dependence and are dropped (a sampler whose low
    bit is stuck leaves half the rows empty; the uniformity audits, not this one, are the place to catch that).
    """
    t = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    if min(t.shape) < 2:
        return ChiSquare(0.0, 0, 1.0, t.size, 0)
    res = sps.chi2_contingency(t, correction=False)
    return ChiSquare(float(res.statistic), int(res.dof), float(res.pvalue), t.size, 0)


def power_at(q: npt.ArrayLike, p: npt.ArrayLike, n: int, alpha: float) -> float:
    """Probability that ``pearson`` (merged bins, level ``alpha``) rejects p at N = n draws when the truth is q."""
    qq = np.asarray(q, dtype=np.float64)
    pp = np.asarray(p, dtype=np.float64)
    keep = pp > 0
    labels = merge_groups(n * pp[keep])
    groups = int(labels.max()) + 1 if labels.size else 0
    if groups < 2:
        return 0.0
    qg = np.bincount(labels, weights=qq[keep], minlength=groups)
    pg = np.bincount(labels, weights=pp[keep], minlength=groups)
    lam = n * float(((qg - pg) ** 2 / pg).sum())
    df = groups - 1
    return float(sps.ncx2.sf(sps.chi2.isf(alpha, df), df, lam))


def power_n50(q: npt.ArrayLike, p: npt.ArrayLike, alpha: float) -> float:
    """The number of draws at which ``power_at`` reaches 0.5 (bisection on log N; inf beyond 10^20)."""
    lo, hi = 0.0, 20.0
    if power_at(q, p, int(10**hi), alpha) < 0.5:
        return float("inf")
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if power_at(q, p, int(10**mid), alpha) < 0.5 else (lo, mid)
    return float(10**hi)
