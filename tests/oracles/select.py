"""A second, deliberately naive reading of SPEC.md §3-§8 for one row, in plain Python.

It shares no code with pp3.reference: the order is Python's sort on (-value, id), expf is mpmath's correctly rounded
value (tests.oracles.expf), the sums are Python floats, Philox is numpy.random.Philox. Slow (mpmath per member), so
tests use it on a few hundred rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tests.oracles.expf import cr_expf

K = 32
TICKETS = 1 << 24
DOMAIN_PROPOSAL = 0x7070335F70726F70  # "pp3_prop"
U64 = (1 << 64) - 1


@dataclass(frozen=True)
class Row:
    status: int
    token: int
    ids: list[int]
    tickets: list[int]


def philox_word0(seed: int, rnd: int, pos: int, domain: int = DOMAIN_PROPOSAL) -> int:
    """Word 0 of Philox4x64-10(counter=(rnd, pos, 0, 0), key=(seed, domain)) via numpy's Philox (pre-increments)."""
    c = (rnd + (pos << 64) - 1) % (1 << 256)
    bg = np.random.Philox(counter=np.array([(c >> (64 * i)) & U64 for i in range(4)], dtype=np.uint64),
                          key=np.array([seed, domain], dtype=np.uint64))
    return int(bg.random_raw(1)[0])


def pairwise(ws: list[float]) -> float:
    while len(ws) > 1:
        ws = [ws[i] + ws[i + 1] for i in range(0, len(ws), 2)]
    return ws[0]


def propose_row(x: npt.NDArray[np.float32], temp: float, seed: int, rnd: int, pos: int, tau: float) -> Row:
    vals = [float(v) for v in np.asarray(x, dtype=np.float32)]
    t32 = float(np.float32(temp))
    for status, failed in (
        (1, any(math.isnan(v) for v in vals)),
        (2, any(v == math.inf for v in vals)),
        (3, not any(math.isfinite(v) for v in vals)),
        (4, math.isnan(t32) or t32 < 0),
    ):
        if failed:
            return Row(status, -1, [-1] * K, [0] * K)
    order = sorted(range(len(vals)), key=lambda i: (-vals[i], i))  # -0.0 == 0.0 in Python: ties go by ID
    g = order[0]
    if t32 == 0.0:
        return Row(0, g, [g] + [-1] * (K - 1), [TICKETS] + [0] * (K - 1))
    n = min(K, sum(math.isfinite(v) for v in vals))
    support = order[:n]
    m = np.float32(vals[g])
    tau32 = np.float32(tau)
    with np.errstate(all="ignore"):
        e = {i: cr_expf(float(np.float32(np.float32(vals[i]) - m) / tau32)) for i in support}
    ids = sorted(support)
    w = [e[i] for i in ids] + [0.0] * (K - n)
    s = pairwise(w)
    c = [math.floor((wj * TICKETS) / s) for wj in w]
    c[ids.index(g)] += TICKETS - sum(c)
    u = philox_word0(seed, rnd, pos) >> 40
    cum, token = 0, -1
    for j in range(n):
        cum += c[j]
        if u < cum:
            token = ids[j]
            break
    assert token >= 0, "no slot owns u: tickets do not sum to 2^24"
    return Row(0, token, ids + [-1] * (K - n), c)
