"""A second, deliberately naive reading of SPEC.md §11 for one row, in plain Python.

It shares no code with pp3: Philox is numpy.random.Philox, expf is mpmath's correctly rounded value
(tests.oracles.expf), the order is Python's sort on (-value, id), sums are Python floats and ints, and the 128-bit
products of Lemire's method are Python integers. Slow (mpmath per logit): tests use it on a few dozen small rows.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from tests.oracles.expf import cr_expf

K = 32
Q_TOTAL = 1 << 24
P_TOTAL = 1 << 40
DOMAIN_ACCEPT = int.from_bytes(b"pp3_acpt", "big")
DOMAIN_RESIDUAL = int.from_bytes(b"pp3_resd", "big")
M64 = (1 << 64) - 1


def words(seed: int, domain: int, rnd: int, pos: int, block: int) -> list[int]:
    """The 4 words of Philox4x64-10(counter=(rnd, pos, block, 0), key=(seed, domain)); numpy pre-increments."""
    c = (rnd + (pos << 64) + (block << 128) - 1) % (1 << 256)
    bg = np.random.Philox(
        counter=np.array([(c >> (64 * i)) & M64 for i in range(4)], dtype=np.uint64),
        key=np.array([seed, domain], dtype=np.uint64),
    )
    return [int(w) for w in bg.random_raw(4)]


def uniform_below(seed: int, domain: int, rnd: int, pos: int, s: int) -> int:
    t = (1 << 64) % s
    block = 0
    while True:
        for w in words(seed, domain, rnd, pos, block):
            if (w * s) & M64 >= t:
                return (w * s) >> 64
        block += 1


def row_class(x: list[float]) -> int:
    if any(math.isnan(v) for v in x):
        return 1
    if any(v == math.inf for v in x):
        return 2
    if not any(math.isfinite(v) for v in x):
        return 3
    return 0


def argmax(x: list[float]) -> int:
    return sorted(range(len(x)), key=lambda i: (-x[i], i))[0]


def tickets(x: list[float], temp: float) -> list[int]:
    g = argmax(x)
    m = np.float32(x[g])
    t32 = np.float32(temp)
    e = []
    with np.errstate(all="ignore"):
        for v in x:
            d = np.float32(np.float32(v) - m)
            e.append(0.0 if d == -np.inf else cr_expf(float(np.float32(d / t32))))
    n = 1
    while n < len(e):
        n *= 2
    s = e + [0.0] * (n - len(e))
    while len(s) > 1:
        s = [s[i] + s[i + 1] for i in range(0, len(s), 2)]
    c = [math.floor((w * P_TOTAL) / s[0]) for w in e]
    c[g] += P_TOTAL - sum(c)
    return c


def valid(tok: int, ids: list[int], tix: list[int], v: int) -> bool:
    full = [0 <= i < v and t >= 0 for i, t in zip(ids, tix, strict=True)]
    empty = [i == -1 and t == 0 for i, t in zip(ids, tix, strict=True)]
    if not all(f or e for f, e in zip(full, empty, strict=True)):
        return False
    nfull = sum(full)
    if not all(full[:nfull]):
        return False
    if any(ids[k] >= ids[k + 1] for k in range(nfull - 1)):
        return False
    if sum(tix) != Q_TOTAL:
        return False
    return any(full[k] and ids[k] == tok and tix[k] >= 1 for k in range(K))


def verify_row(
    logits: npt.NDArray[np.float32],
    temp: float,
    toks: list[int],
    stats: list[int],
    ids: list[list[int]],
    tix: list[list[int]],
    seed: int,
    rnd: int,
    pos: int,
) -> tuple[int, int, list[int]]:
    """(status, accepted, tokens) of one row, by §11.3-§11.8."""
    d = len(toks)
    v = logits.shape[1]
    x = [[float(a) for a in np.asarray(row, dtype=np.float32)] for row in logits]
    n = next((j for j in range(d) if stats[j] != 0), d)
    failed = (-1, [-1] * (d + 1))
    for j in range(n + 1):
        cls = row_class(x[j])
        if cls:
            return (cls, *failed)
    t32 = float(np.float32(temp))
    if math.isnan(t32) or t32 < 0:
        return (4, *failed)
    if not all(valid(toks[j], ids[j], tix[j], v) for j in range(n)):
        return (5, *failed)

    def q_of(j: int, y: int) -> int:
        return sum(t for i, t in zip(ids[j], tix[j], strict=True) if i == y)

    out = [-1] * (d + 1)
    if t32 == 0.0:
        a = 0
        while a < n and toks[a] == argmax(x[a]):
            out[a] = toks[a]
            a += 1
        out[a] = argmax(x[a])
        return 0, a, out
    big_p = {}
    a = 0
    while a < n:
        big_p[a] = tickets(x[a], t32)
        u = uniform_below(seed, DOMAIN_ACCEPT, rnd, (pos + a) & M64, q_of(a, toks[a]) << 16)
        if not u < big_p[a][toks[a]]:
            break
        out[a] = toks[a]
        a += 1
    pa = big_p[a] if a in big_p else tickets(x[a], t32)
    r = [max(0, pa[y] - ((q_of(a, y) << 16) if a < n else 0)) for y in range(v)]
    u = uniform_below(seed, DOMAIN_RESIDUAL, rnd, (pos + a) & M64, sum(r))
    cum = 0
    for y in range(v):
        cum += r[y]
        if u < cum:
            out[a] = y
            break
    return 0, a, out
