"""SPEC.md §8 and §11.5: Philox4x64-10 (Random123), the keyed streams, the proposal's 24-bit uniform, and the exact
uniform integers of the acceptance step (Lemire's method)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pp3.reference._constants import DOMAIN_PROPOSAL, P_TICKETS, TICKET_BITS

U64 = npt.NDArray[np.uint64]

PHILOX_M0 = np.uint64(0xD2E7470EE14C6C93)
PHILOX_M1 = np.uint64(0xCA5A826395121157)
PHILOX_W0 = np.uint64(0x9E3779B97F4A7C15)
PHILOX_W1 = np.uint64(0xBB67AE8584CAA73B)
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def mulhilo64(a: U64 | np.uint64, b: U64) -> tuple[U64, U64]:
    """(high, low) 64-bit words of the 128-bit products a*b, elementwise, from 32-bit halves (no overflow anywhere)."""
    a_lo, a_hi = a & _M32, a >> _S32
    b_lo, b_hi = b & _M32, b >> _S32
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    t = hi_lo + (lo_lo >> _S32)  # < 2^64
    w = (t & _M32) + lo_hi  # < 2^64
    hi = hi_hi + (t >> _S32) + (w >> _S32)
    lo = (w << _S32) | (lo_lo & _M32)
    return hi, lo


def philox4x64_10(ctr: npt.ArrayLike, key: npt.ArrayLike) -> U64:
    """Random123 philox4x64_R with R = 10: ``ctr`` [..., 4] and ``key`` [..., 2] uint64 -> [..., 4] uint64."""
    c = np.asarray(ctr, dtype=np.uint64)
    kk = np.asarray(key, dtype=np.uint64)
    if c.shape[-1:] != (4,) or kk.shape[-1:] != (2,):
        raise ValueError(f"ctr must end in 4 words and key in 2, got {c.shape} and {kk.shape}")
    x0, x1, x2, x3 = (c[..., i].copy() for i in range(4))
    k0, k1 = kk[..., 0].copy(), kk[..., 1].copy()
    with np.errstate(over="ignore"):
        for rnd in range(10):
            if rnd > 0:  # the key is bumped between rounds, not before the first
                k0 = k0 + PHILOX_W0
                k1 = k1 + PHILOX_W1
            hi0, lo0 = mulhilo64(PHILOX_M0, x0)
            hi1, lo1 = mulhilo64(PHILOX_M1, x2)
            x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
    return np.stack([x0, x1, x2, x3], axis=-1)


def block(seed: U64, round_: U64, position: U64, domain: int, index: int = 0) -> U64:
    """§8 / §11.5 keying: block ``index`` of a row's stream, Philox4x64-10(counter = (round, position, index, 0),
    key = (seed, domain)) -> [N, 4]: words W_{4i} .. W_{4i+3} (§8 uses block 0 only)."""
    n = seed.shape[0]
    zero = np.zeros(n, dtype=np.uint64)
    ctr = np.stack([round_, position, np.full(n, index, dtype=np.uint64), zero], axis=-1)
    key = np.stack([seed, np.full(n, domain, dtype=np.uint64)], axis=-1)
    return philox4x64_10(ctr, key)


def proposal_uniform(seed: U64, round_: U64, position: U64) -> U64:
    """§8: u = the top 24 bits of word 0 of the proposal-domain block; an integer in 0 .. 2^24 - 1."""
    return block(seed, round_, position, DOMAIN_PROPOSAL)[:, 0] >> np.uint64(64 - TICKET_BITS)


def lemire_threshold(s: U64) -> U64:
    """§11.5: t = 2^64 mod s (= (2^64 - s) mod s, computed in uint64 without a 65-bit value)."""
    with np.errstate(over="ignore"):
        return np.asarray((np.uint64(0) - s) % s, dtype=np.uint64)


def uniform_below(seed: U64, round_: U64, position: U64, domain: int, s: U64) -> U64:
    """§11.5: per row, an integer exactly uniform on 0 .. s-1 (1 <= s <= 2^40) from the row's stream, by Lemire's
    exact method: the first word W_k with (W_k * s mod 2^64) >= 2^64 mod s gives floor(W_k * s / 2^64)."""
    s = np.asarray(s, dtype=np.uint64)
    if s.size and (int(s.min()) < 1 or int(s.max()) > P_TICKETS):
        raise ValueError(f"uniform_below: s must lie in 1 .. 2^40, got {int(s.min())} .. {int(s.max())}")
    t = lemire_threshold(s)
    out = np.zeros(s.shape, dtype=np.uint64)
    pending = np.arange(s.size)
    index = 0
    while pending.size:  # a word is rejected with probability < 2^-24: almost always one pass
        words = block(seed[pending], round_[pending], position[pending], domain, index)
        done = np.zeros(pending.size, dtype=bool)
        for k in range(4):
            hi, lo = mulhilo64(words[:, k], s[pending])
            take = ~done & (lo >= t[pending])
            out[pending[take]] = hi[take]
            done |= take
        pending = pending[~done]
        index += 1
    return out
