"""SPEC.md §5 steps 4-6 (normalisation, floor counts, remainder) and §8 (the draw from tickets)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pp3.reference._constants import TICKETS

_SCALE = np.float64(TICKETS)  # 2^24: the product w * 2^24 is exact


def pairwise_sum(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """§5.4: the fp64 pairwise tree over the last axis (length a power of two), adjacent pairs first."""
    s = w
    while s.shape[-1] > 1:
        s = s[..., 0::2] + s[..., 1::2]
    return s[..., 0]


def floor_counts(w: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """§5.4-5.5: c_j = floor(fl64(fl64(w_j * 2^24) / S)) per slot, S the pairwise sum of the row's slots."""
    s = pairwise_sum(w)
    return np.floor((w * _SCALE) / s[..., None]).astype(np.int64)


def allocate(w: npt.NDArray[np.float64], rank0_slot: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """§5.4-5.6, floor-first: floor counts, then the remaining 2^24 - sum(c) tickets to the rank-0 slot."""
    c = floor_counts(w)
    remainder = TICKETS - c.sum(axis=-1)
    rows = np.arange(c.shape[0])
    c[rows, rank0_slot] += remainder
    return c


def draw_slot(tickets: npt.NDArray[np.int64], u: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """§8 draw: the first slot j whose cumulative count C_j exceeds u (= the number of slots with C_j <= u)."""
    cum = np.cumsum(tickets, axis=-1)
    return np.asarray((cum <= u.astype(np.int64)[:, None]).sum(axis=-1), dtype=np.int64)
