"""The verifier's screen: an interval that holds every target row's S (SPEC.md §11.4 P4) from a cheap fp32 exponential,
so that §11.6's tests need the exact S only where the interval leaves them open. NumPy only (no torch, no triton):
the kernels take their constants from here and ``expf_screen`` is the NumPy twin of ``_common._expf_screen``.

Nothing here defines a result. §11.6 accepts draft j iff U_j < P_j(x_j), and P_j(x_j) = c + [x_j = g_j] R with the
floor count c = floor(fl64(w 2^40) / S) nonincreasing in S (an IEEE division is monotone in its divisor, the floor is
monotone), so S_lo <= S <= S_hi gives c(S_hi) <= c <= c(S_lo): U_j < c(S_hi) accepts, U_j >= c(S_lo) + [x_j = g_j] V
rejects (R <= V, "Range"), whatever S and R are; only a U_j in between needs them, and the verifier then computes S
exactly (launch 3). Every output bit is the reference's; the screen only decides which tests need the exact S.

**The screening exponential** (``expf_screen``, fp32, no FMA, every step one IEEE binary32 operation or an exact
integer one, as the kernels compile it under ``config.EXACT``): e^z = 2^k e^r with k = rint(z / ln 2) (the magic
constant 1.5 2^23), r = (z - k LN2_HI) - k LN2_LO (LN2_HI has 16 significant bits, so k LN2_HI is exact for |k| <= 128,
and the first subtraction is exact by Sterbenz's lemma), e^r by its degree-7 Taylor polynomial (|r| <= ln 2 / 2 + 2^-20,
truncation < 2^-26 relative), 2^k from its bits; z < -86 gives +0.0. It is not the exponential of §6 and never reaches
an output.

**The bound.** For every fp32 z in [-86, -0.0] the screen's value e~ and §6's expf(z) = w satisfy
|e~ - w| <= SCREEN_REL w, and for z < -86, e~ = +0.0 and w < 2^-124 = SCREEN_ABS. ``tools/audit_screen.py``
checks both over every such z (NumPy twin on the CPU, the kernels' own code with ``--device cuda``); the measured
largest relative difference is recorded there and in VERIFY.md, well under SCREEN_REL.

**The interval.** Launch 1 reads each tile once: with m_t the tile's maximum it sums e~(z'_y), z'_y =
fl32(fl32(x_y - m_t) / T), by the fp32 pairwise tree of depth TILE_LOG <= 12, and the row's last program forms
S~ = sum_t fl64(tile sum_t) * fl64(e~(z''_t)), z''_t = fl32(fl32(m_t - m) / T), by the fp64 tree of depth <= 10.
Bound, with u = 2^-24 and zeta_y = (x_y - m) / T (real; zeta'_y = (x_y - m_t) / T and zeta''_t = (m_t - m) / T are
both in [zeta_y, 0] and add up to it):
- An entry with zeta_y >= -87 (then every z is >= -87.01 and every e is a normal fp32 number or +0.0): §11.4's
  e_y = expf(z_y) with z_y = fl32(fl32(x_y - m) / T) = zeta_y (1 + eps1)(1 + eps2) (each |eps| <= u; a subnormal
  difference is exact), so e_y = e^zeta_y (1 + a_y), |a_y| <= u + 2.0001 u |zeta_y| (expf is correctly rounded).
  Likewise e~(z'_y) e~(z''_t) = e^zeta_y (1 + b_y), |b_y| <= 2 SCREEN_REL + 2u + 2.0001 u (|zeta'| + |zeta''|)
  + (products), with |zeta'| + |zeta''| = |zeta_y| <= 87; where z' or z'' is below -86 the screen gives 0 and
  e^zeta_y < e^-86. So the two differ by less than (2^-17 + 4.0002 u 87 + 4u) e^zeta_y < 2^-15.0 e_y, or by less
  than 2^-123 where a factor is 0.
- An entry with zeta_y < -87: both e_y and e~ e~ are below 2^-125 (a screen value is at most e^z (1 + 2^-18)).
  With the 2^-123 above, at most V 2^-123 < 2^-92 in all, against S >= 1.
- The trees: fp32 gamma_12 = 12u / (1 - 12u) < 2^-20.4 on the tile sums, the fp64 products and tree
  (gamma_11, u = 2^-53) < 2^-48, and |S - T| <= gamma_31 T (fp64) for §11.4's own tree over the real sum T.
To first order |S~ - S| <= (2^-15.0 + 2^-20.4 + 2^-47) S < 2^-14.9 S, second-order terms below 2^-29, so
S_lo = S~ (1 - SCREEN_MARGIN) and S_hi = S~ (1 + SCREEN_MARGIN) with SCREEN_MARGIN = 2^-12 hold S with room to spare
(7x; their own fp64 roundings, 2^-53 relative, included). A test is left open with probability about
2 SCREEN_MARGIN p_j(x_j) / q_j(x_j) + [x_j = g_j] V / 2^40 (<= 4.9e-4 + 1.5e-7 where p <= q); its request then costs
the exact sums of its rows (launches 3 to 5), not a different result.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

SCREEN_REL = 2.0**-18  # |e~ - expf(z)| <= SCREEN_REL expf(z) for every fp32 z in [-86, -0.0] (audited exhaustively)
SCREEN_ABS = 2.0**-124  # expf(z) < SCREEN_ABS for z < -86, where e~ = +0.0
SCREEN_MARGIN = 2.0**-12  # S_lo = S~ (1 - margin), S_hi = S~ (1 + margin) hold S (the derivation above)
SCREEN_FLOOR = -86.0  # z below it: e~ = +0.0

# Constants, as fp32 values (each printed with its bits).
LOG2E = float(np.float32(1.4426950408889634))  # 0x3FB8AA3B, fl32(1 / ln 2)
MAGIC = 12582912.0  # 1.5 2^23: (t + MAGIC) - MAGIC rounds t to the nearest integer, ties to even, for |t| < 2^22
LN2_HI = 0.693145751953125  # 0x3F317200: ln 2 to 16 significant bits
LN2_LO = float(np.float32(0.6931471805599453 - 0.693145751953125))  # 0x35BFBE8E
# e^r = 1 + r (1 + r (P2 + r (P3 + r (P4 + r (P5 + r (P6 + r P7)))))), P_i = fl32(1 / i!)
POLY = tuple(float(np.float32(1.0 / f)) for f in (2.0, 6.0, 24.0, 120.0, 720.0, 5040.0))


def expf_screen(z: F32) -> F32:
    """The screening exponential of fp32 ``z`` (z <= 0, -inf allowed), step for step as ``_common._expf_screen``."""
    f = np.float32
    z = np.asarray(z, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        zc = np.maximum(z, f(SCREEN_FLOOR))
        t = zc * f(LOG2E)
        big = t + f(MAGIC)
        kf = big - f(MAGIC)
        r = (zc - kf * f(LN2_HI)) - kf * f(LN2_LO)
        p = f(POLY[5])
        for c in (POLY[4], POLY[3], POLY[2], POLY[1], POLY[0], 1.0):
            p = f(c) + r * p
        p = f(1.0) + r * p
        k = big.view(np.int32) - np.float32(MAGIC).view(np.int32)
        scale = ((k + 127) << 23).astype(np.int32).view(np.float32)
        e = p * scale
    return np.where(z < f(SCREEN_FLOOR), f(0.0), e).astype(np.float32)
