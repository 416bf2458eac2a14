"""Planted bugs: wrong variants of reference steps, shared by tests/test_mutations.py, proptests/ and stats/.

Each mirrors the signature of the reference function it replaces (named in its docstring), so a test can swap it
in with monkeypatch and show that its comparison notices. None of this is ever used to compute a result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import tickets
from pp3.reference._constants import DOMAIN_PROPOSAL, TICKETS

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def largest_remainder(w: F64, rank0_slot: I64) -> I64:
    """For ``tickets.allocate``: Hamilton's method, which SPEC.md §5.2 rejects — floor counts, then one ticket
    each to the R slots with the largest fractional parts of w·2^24/S (ties to the lower slot). Empty and
    zero-weight slots never get a ticket; what they cannot take goes to the rank-0 slot."""
    q = (w * np.float64(TICKETS)) / tickets.pairwise_sum(w)[:, None]
    c = np.floor(q).astype(np.int64)
    frac = np.where(w > 0, q - c, -1.0)
    remainder = TICKETS - c.sum(axis=-1)
    for r in range(c.shape[0]):
        order = np.argsort(-frac[r], kind="stable")
        eligible = order[frac[r][order] >= 0][: remainder[r]]
        c[r, eligible] += 1
        c[r, rank0_slot[r]] += remainder[r] - eligible.size
    return c


def remainder_to_lowest_id(w: F64, rank0_slot: I64) -> I64:
    """For ``tickets.allocate``: floor-first, but the remainder goes to slot 0 (the lowest ID), not rank 0."""
    c = tickets.floor_counts(w)
    c[:, 0] += TICKETS - c.sum(axis=-1)
    return c


def uniform_low_bits(seed: Any, round_: Any, position: Any) -> npt.NDArray[np.uint64]:
    """For ``philox.proposal_uniform``: the low 24 bits of w0 instead of the top 24 (§8)."""
    from pp3.reference import philox

    return philox.block(seed, round_, position, DOMAIN_PROPOSAL)[:, 0] & np.uint64(0xFFFFFF)


def draw_off_by_one(tix: I64, u: npt.NDArray[np.uint64]) -> I64:
    """For ``tickets.draw_slot``: the first slot with u <= C_j instead of u < C_j."""
    cum = np.cumsum(tix, axis=-1)
    return np.asarray((cum < u.astype(np.int64)[:, None]).sum(axis=-1), dtype=np.int64)


def left_fold_sum(w: F64) -> F64:
    """For ``tickets.pairwise_sum``: S as a left-to-right sum over the slots instead of the pairwise tree."""
    s = np.zeros(w.shape[:-1], dtype=np.float64)
    for j in range(w.shape[-1]):
        s = s + w[..., j]
    return s
