"""SPEC.md §4: the order on a row's entries and the selection of the first K."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_SIGN = np.uint32(0x80000000)
_ALL = np.uint32(0xFFFFFFFF)


def order_value_key(x: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """§4.1 ``okey``: an order-preserving uint32 image of fp32 values in which -0.0 and +0.0 are equal."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    bits = np.where(bits == _SIGN, np.uint32(0), bits)  # -0.0 -> +0.0
    return np.where(bits & _SIGN, bits ^ _ALL, bits | _SIGN).astype(np.uint32)


def order_key(x: npt.NDArray[np.float32], ids: npt.NDArray[np.integer]) -> npt.NDArray[np.uint64]:
    """§4.1 ``key(x, i)``: unique per entry; a larger key ranks first (larger value, then lower ID)."""
    hi = order_value_key(x).astype(np.uint64) << np.uint64(32)
    lo = np.uint64(0xFFFFFFFF) - np.asarray(ids).astype(np.uint64)
    return hi | lo


def first_k(logits: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
    """IDs of the first ``min(k, V)`` entries of each NaN-free row in the §4.1 order, rank 0 first. [B, min(k, V)].

    Equivalent to sorting every entry by ``order_key`` and keeping the first k; for speed, keys are built only
    for entries whose value is >= the row's k-th largest value (every one of the first k entries is, ties
    included, because -0.0 == +0.0 and the row has no NaN).
    """
    b, v = logits.shape
    n = min(k, v)
    if n < v:
        kth = np.partition(logits, v - n, axis=1)[:, v - n]  # the n-th largest value of each row
        rows, ids = np.nonzero(logits >= kth[:, None])
    else:
        rows, ids = np.divmod(np.arange(b * v, dtype=np.int64), v)
    keys = order_key(logits[rows, ids], ids)
    order = np.lexsort((np.invert(keys), rows))  # by row, then by key descending
    rows, ids = rows[order], ids[order]
    starts = np.searchsorted(rows, np.arange(b))
    pick = starts[:, None] + np.arange(n)[None, :]  # every row has >= n candidates
    return np.asarray(ids[pick], dtype=np.int64)
