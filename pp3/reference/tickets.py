"""SPEC.md §5 steps 4-6 (slot placement, normalisation, floor counts, remainder) and §8 (the draw from tickets)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pp3.reference._constants import EMPTY_ID, TICKETS, K

_SCALE = np.float64(TICKETS)  # 2^24: the product w * 2^24 is exact


def place_slots(
    ranked: npt.NDArray[np.int64], member: npt.NDArray[np.bool_], e: npt.NDArray[np.float32]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """§5 step 4: the K slots in ascending ID order — members first (ID, exact fp64 weight), then empty slots (-1, 0) —
    from the entries in rank order (``ranked`` [N, n] IDs, ``member`` [N, n], ``e`` [N, n] fp32 weights); and the
    slot of rank 0."""
    rows, n = ranked.shape
    slot_ids = np.full((rows, K), EMPTY_ID, dtype=np.int64)
    slot_w = np.zeros((rows, K), dtype=np.float64)
    perm = np.argsort(np.where(member, ranked, np.iinfo(np.int64).max), axis=1, kind="stable")
    sorted_member = np.take_along_axis(member, perm, axis=1)
    slot_ids[:, :n] = np.where(sorted_member, np.take_along_axis(ranked, perm, axis=1), EMPTY_ID)
    slot_w[:, :n] = np.where(sorted_member, np.take_along_axis(e, perm, axis=1).astype(np.float64), 0.0)
    return slot_ids, slot_w, np.argmax(slot_ids == ranked[:, :1], axis=1)


def pairwise_sum(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """§5 step 4 (and §11.4 P4): the fp64 pairwise tree over the last axis (length a power of two), adjacent pairs
    first."""
    s = w
    while s.shape[-1] > 1:
        s = s[..., 0::2] + s[..., 1::2]
    return s[..., 0]


def floor_counts(w: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """§5 steps 4-5: c_j = floor(fl64(fl64(w_j * 2^24) / S)) per slot, S the pairwise sum of the row's slots."""
    s = pairwise_sum(w)
    return np.floor((w * _SCALE) / s[..., None]).astype(np.int64)


def allocate(w: npt.NDArray[np.float64], rank0_slot: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """§5 steps 4-6, floor-first: floor counts, then the remaining 2^24 - sum(c) tickets to the rank-0 slot."""
    c = floor_counts(w)
    remainder = TICKETS - c.sum(axis=-1)
    rows = np.arange(c.shape[0])
    c[rows, rank0_slot] += remainder
    return c


def draw_slot(tickets: npt.NDArray[np.int64], u: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """§8 draw: the first slot j whose cumulative count C_j exceeds u (= the number of slots with C_j <= u)."""
    cum = np.cumsum(tickets, axis=-1)
    return np.asarray((cum <= u.astype(np.int64)[:, None]).sum(axis=-1), dtype=np.int64)
