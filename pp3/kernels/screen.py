"""The verifier's screen: an interval that holds every target row's S (SPEC.md §11.4 P4) from a cheap fp32 exponential,
so that §11.6's tests need the exact S only where the interval leaves them open. NumPy only (no torch, no triton):
the kernels take their constants from here; ``expf_screen`` is the NumPy twin of ``_common._expf_screen`` and
``expf_screen_ex2`` of ``_common._expf_screen_ex2`` in the interpreter (``SCREENS``; SPEC.md §11.12).

Nothing here defines a result. §11.6 accepts draft j iff U_j < P_j(x_j), and P_j(x_j) = c + [x_j = g_j] R with the
floor count c = floor(fl64(w 2^40) / S) nonincreasing in S (an IEEE division is monotone in its divisor, the floor is
monotone), so S_lo <= S <= S_hi gives c(S_hi) <= c <= c(S_lo): U_j < c(S_hi) accepts, U_j >= c(S_lo) + [x_j = g_j] V
rejects (R <= V, "Range"), whatever S and R are; only a U_j in between needs them, and the verifier then computes S
exactly (launch 3). Every output bit is the reference's; the screen only decides which tests need the exact S.

**The screening exponential** (``expf_screen``, fp32, no FMA, every step one IEEE binary32 operation or an exact
integer one, as the kernels compile it under ``config.EXACT``): e^z = 2^y, y = fl32(zc LOG2E) with
zc = max(z, SCREEN_FLOOR); k = rint(y) (the magic constant 1.5 2^23, ties to even); f = y - k, exact with
|f| <= 1/2 (k = 0 gives f = y; else |k| >= 1 lies within 1/2 of y, so k / y is in [1/2, 2] and Sterbenz's lemma
applies); 2^f by p(f) = 1 + f (C1 + f (C2 + f (C3 + f C4))) in that order (``POLY``: ``fit_poly``, the minimax
relative error on [-1/2, 1/2], 2^-18.44, rounded to fp32); 2^k from its bits (k in [-124, 0], a normal number);
e~ = p 2^k. Fourteen fp32 operations and one integer one (2^k's three fold into a shift-and-add, LEA). Rounding y
costs up to ln 2 (ulp(y) / 2 + |y| 2^-26.2) relative (the second term is LOG2E's own error), 2^-18.0 at z = -86: the
error grows with |z|. Below the floor e~(z) = e~(-86), about 2^-124.07, a normal number: no select. It is not the
exponential of §6 and never reaches an output.

**The bound.** For every fp32 z in [-86, -0.0] the screen's value e~ and §6's expf(z) = w satisfy
|e~ - w| <= SCREEN_REL w, and for z < -86 both lie in [0, SCREEN_ABS) = [0, 2^-124). ``stats/audit_screen.py`` checks
both over every such z (NumPy twin on the CPU, the kernels' own code with ``--device cuda``); the measured largest
relative difference (2^-17.20: the polynomial's 2^-18.44, y's rounding and p's own) is recorded there and in VERIFY.md,
under SCREEN_REL = 2^-16.

**The hardware screening exponential** (``expf_screen_ex2``, ``config.LaunchConfig(screen="ex2")``): e~ = EX2(y),
y = fl32(z LOG2E), EX2 the hardware's base-2 exponential ``ex2.approx.f32`` (MUFU.EX2: one multiplication and one
special-function instruction per entry instead of fourteen operations; no clamp: ex2 of -inf is +0, and its
subnormal results, below the floor, are kept). Its error, from the instruction's documented worst case: the PTX ISA
(section 9.7.3.21, "Floating Point Instructions: ex2", of the current manual) says "The maximum ulp error is 2
ulp from correctly rounded result across the full range of inputs" (``EX2_ULPS``), subnormals supported without
``.ftz``. For y >= -126 (a normal 2^y; every z >= -86 gives y >= fl32(-86 LOG2E) = -124.07) the correctly rounded
c is within u 2^y of 2^y and ulp(c) <= 2^-23 c, so |EX2(y) - 2^y| <= (2^-24 + 2 2^-23 (1 + 2^-24)) 2^y = eta 2^y,
eta = 2^-21.678 (``EX2_REL``). With LOG2E = (1 / ln 2)(1 + lam), |lam| = 2^-26.16, and |y - z LOG2E| <= u |z LOG2E|
(u = 2^-24): ln(e~ / e^z) = z lam + ln 2 (y - z LOG2E) + ln(1 + eta'), |eta'| <= eta, so
|ln(e~(z) / e^z)| <= alpha |z| + beta with alpha = |lam| + u (1 + 2^-20) = 2^-23.71 and beta = eta / (1 - eta):
2^-17.2 at z = -86 (2^-17.9 with |y - z LOG2E| <= ulp(y) / 2 = 2^-18 there), under SCREEN_REL = 2^-16 against
§6's expf. Below the floor EX2(y) <= 2^-124.07 (1 + eta) + 2^-147 < SCREEN_ABS, and >= 0 (+0 for -inf). On a card
``stats/audit_screen.py --device cuda`` checks SCREEN_REL and SCREEN_ABS over every input; in the interpreter
(``TRITON_INTERPRET=1``, where EX2 is NumPy's fp32 exp2, which the interpreter calls: no inline PTX runs there, and
the twin ``expf_screen_ex2`` is the same call) the sweep of the twin and ``--device interpreter`` (the kernel's own
code, interpreted) check them; NumPy documents no bound, so there the audited SCREEN_REL is the bound the margin
rests on (the derivation below, 4.6x room).

**The interval.** Launch 1 reads each tile once: with m_t the tile's maximum it sums e~(z'_y), z'_y =
fl32(fl32(x_y - m_t) / T), by the fp32 pairwise tree of depth TILE_LOG <= 12, and the row's last program forms
S~ = sum_t fl64(tile sum_t) * fl64(e~(z''_t)), z''_t = fl32(fl32(m_t - m) / T), by the fp64 tree of depth <= 10.
Bound, with u = 2^-24 and zeta_y = (x_y - m) / T (real; zeta'_y = (x_y - m_t) / T and zeta''_t = (m_t - m) / T are
both in [zeta_y, 0] and add up to it):
- An entry with zeta_y >= -87 and z'_y, z''_t >= -86: §11.4's e_y = expf(z_y) with z_y = fl32(fl32(x_y - m) / T) =
  zeta_y (1 + eps1)(1 + eps2) (each |eps| <= u; a subnormal difference is exact), so e_y = e^zeta_y (1 + a_y),
  |a_y| <= u + 2.0001 u |zeta_y| (expf is correctly rounded). Likewise e~(z'_y) e~(z''_t) = e^zeta_y (1 + b_y),
  |b_y| <= 2 SCREEN_REL + 2u + 2.0001 u (|zeta'| + |zeta''|) + (products), with |zeta'| + |zeta''| = |zeta_y| <= 87.
  So the two differ by less than (2^-15 + 4.0002 u 87 + 4u) e^zeta_y < 2^-14.24 e_y.
- Every other entry (zeta_y < -87, or z'_y or z''_t below the floor, which takes in the -inf logits and the entries
  past the row's end, read as -inf): e_y < 2^-124 (z_y <= -85.99, or e_y = 0), and e~(z'_y) e~(z''_t) < 2^-124 (a
  factor below the floor is e~(-86) < 2^-124.07 (1 + SCREEN_REL), the other at most 1 + SCREEN_REL; with both above
  it, z'_y + z''_t < -86.99 and the product is below 2^-125). Each differs by less than 2^-124, and a row reads
  n_tiles TILE < V + TILE < 2^31 + 2^12 entries: less than 2^-92.9 in all, against S >= 1.
- The trees: every e~ is a normal number (none underflows: e~ > 2^-125), so the fp32 tile sums are within
  gamma_12 = 12u / (1 - 12u) < 2^-20.4, the fp64 products and tree (gamma_11, u = 2^-53) within 2^-48, and
  |S - T| <= gamma_31 T (fp64) for §11.4's own tree over the real sum T.
To first order |S~ - S| <= (2^-14.24 + 2^-20.4 + 2^-47) S + 2^-92.9 < 2^-14.2 S, second-order terms below 2^-28, so
S_lo = S~ (1 - SCREEN_MARGIN) and S_hi = S~ (1 + SCREEN_MARGIN) with SCREEN_MARGIN = 2^-12 hold S with 4.6x room
(at least 4x kept; their own fp64 roundings, 2^-53 relative, included). This needs of a screening exponential only
the audited SCREEN_REL and SCREEN_ABS, so it holds for either of ``SCREENS`` wherever its audit passed.
With EX2, from its documented error alone (no audit figure in it): for an entry of the first kind,
z'_y = zeta'_y (1 + e)(1 + e') and |ln(e~(z') / e^z')| <= alpha |z'| + beta, likewise for z''_t, and
|zeta'| + |zeta''| = |zeta_y| <= 87, so ln(e~(z'_y) e~(z''_t)) = zeta_y + d with |d| <= (2u + u^2 + alpha (1 + 3u))
|zeta_y| + 2 beta; against ln e_y = zeta_y + d', |d'| <= (2u + u^2) |zeta_y| + u (1 + u), the two differ by less
than (4u + 2u^2 + alpha (1 + 3u)) 87 + 2 beta + u (1 + u) = 2^-15.14 relative (every factor of every operation
counted). With the trees as above (a subnormal EX2 adds exactly: an IEEE addition errs by at most u |a + b| with or
without gradual underflow, so no floor is needed), |S~ - S| < 2^-15.10 S: the margin 2^-12 holds S with 8.6x room;
4x would remain with EX2 up to 139 ulps off (``ex2_room``). A test is left open with probability about
2 SCREEN_MARGIN p_j(x_j) / q_j(x_j) + [x_j = g_j] V / 2^40 (<= 4.9e-4 + 1.5e-7 where p <= q); its request then costs
the exact sums of its rows (launches 3 to 5), not a different result.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

SCREEN_REL = 2.0**-16  # |e~ - expf(z)| <= SCREEN_REL expf(z) for every fp32 z in [-86, -0.0] (audited exhaustively)
SCREEN_ABS = 2.0**-124  # for z < -86, expf(z) and e~ = e~(-86) are in [0, SCREEN_ABS)
SCREEN_MARGIN = 2.0**-12  # S_lo = S~ (1 - margin), S_hi = S~ (1 + margin) hold S (the derivation above)
SCREEN_FLOOR = -86.0  # z below it is taken as the floor (the pinned screen clamps there; SCREEN_REL holds above it)
SCREENS = ("pinned", "ex2")  # as config.SCREENS: the pinned fp32 polynomial, the hardware's ex2.approx.f32
# PTX ISA, "Floating Point Instructions: ex2": "The maximum ulp error is 2 ulp from correctly rounded result across
# the full range of inputs." EX2_REL: the relative error that allows for a normal result (the docstring above).
EX2_ULPS = 2
EX2_REL = 2.0**-24 + EX2_ULPS * 2.0**-23 * (1.0 + 2.0**-24)

# Constants, as fp32 values (each printed with its bits).
LOG2E = float(np.float32(1.4426950408889634))  # 0x3FB8AA3B, fl32(1 / ln 2)
MAGIC = 12582912.0  # 1.5 2^23: (t + MAGIC) - MAGIC rounds t to the nearest integer, ties to even, for |t| < 2^22
# 2^f = 1 + f (C1 + f (C2 + f (C3 + f C4))): fit_poly() rounded to fp32
POLY = tuple(float(np.float32(c)) for c in (0.6931242, 0.24024099, 0.055906426, 0.009582853))
# 0x3F317096, 0x3E7601BC, 0x3D64FE23, 0x3C1D0166


def fit_poly(deg: int = 4, n: int = 1 << 16, rounds: int = 8) -> npt.NDArray[np.float64]:
    """The coefficients c_1 .. c_deg (fp64) of the minimax relative error of 1 + f (c_1 + ... + c_deg f^(deg-1))
    against 2^f on [-0.5, 0.5], by Remez's exchange on n + 1 even points (``POLY`` is them rounded to fp32; the
    grids of 2^12 to 2^18 points round alike; the error is 2^-18.44 before the rounding). The error is 0 at f = 0
    (the form fixes p(0) = 1), so it alternates as err * sign(f): one extremum per run of constant sign."""
    f = np.linspace(-0.5, 0.5, n + 1)
    f = f[f != 0]
    s = np.sign(f)
    a = np.stack([f**j for j in range(1, deg + 1)], axis=1) * (2.0**-f * s)[:, None]
    b = (1.0 - 2.0**-f) * s  # (p(f) 2^-f - 1) sign(f) = a c - b
    nodes = np.linspace(0, f.size - 1, deg + 1).astype(np.int64)
    for _ in range(rounds):
        sol = np.linalg.solve(np.column_stack([a[nodes], (-1.0) ** np.arange(deg + 1)]), b[nodes])
        err = a @ sol[:-1] - b
        runs = np.split(np.arange(err.size), np.flatnonzero(np.diff(np.sign(err)) != 0) + 1)
        nodes = np.array([r[np.argmax(np.abs(err[r]))] for r in runs])
    return np.asarray(sol[:-1], dtype=np.float64)


def ex2_room(ex2_rel: float = EX2_REL) -> float:
    """How many times the margin exceeds the ex2 screen's derived bound on |S~ - S| / S (the docstring's
    derivation, every term), for an EX2 within ``ex2_rel`` of 2^y on normal results: 8.6 at the documented error."""
    u, u64 = 2.0**-24, 2.0**-53
    lam = abs(float(np.float64(np.float32(LOG2E))) * np.log(2.0) - 1.0)
    alpha, beta = lam + u * (1.0 + 2.0**-20), ex2_rel / (1.0 - ex2_rel)
    entry = float(np.expm1((4 * u + 2 * u * u + alpha * (1 + 3 * u)) * 87 + 2 * beta + u * (1 + u)))
    trees = (1 + 12 * u / (1 - 12 * u)) * (1 + 11 * u64 / (1 - 11 * u64))
    g31 = 31 * u64 / (1 - 31 * u64)  # S against the real sum T of the e_y (§11.4 "Range")
    total = ((1 + entry) * trees - 1 + 2.0**-92.9 + g31) / (1 - g31)  # |S~ - T| + |T - S|, over S >= T (1 - g31)
    return float(SCREEN_MARGIN / total)


def expf_screen_ex2(z: F32) -> F32:
    """The hardware screening exponential of fp32 ``z`` (z <= 0, -inf allowed) as the interpreter evaluates
    ``_common._expf_screen_ex2``: fl32(z LOG2E), then NumPy's fp32 exp2 (on a card, ``ex2.approx.f32`` instead)."""
    z = np.asarray(z, dtype=np.float32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return np.asarray(np.exp2(z * np.float32(LOG2E)), dtype=np.float32)


def expf_screen(z: F32) -> F32:
    """The screening exponential of fp32 ``z`` (z <= 0, -inf allowed), step for step as ``_common._expf_screen``."""
    f32 = np.float32
    z = np.asarray(z, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        zc = np.maximum(z, f32(SCREEN_FLOOR))
        y = zc * f32(LOG2E)
        big = y + f32(MAGIC)
        kf = big - f32(MAGIC)
        f = y - kf
        p = f32(POLY[2]) + f * f32(POLY[3])
        p = f32(POLY[1]) + f * p
        p = f32(POLY[0]) + f * p
        p = f32(1.0) + f * p
        k = big.view(np.int32) - np.float32(MAGIC).view(np.int32)
        scale = ((k + 127) << 23).astype(np.int32).view(np.float32)
        e = p * scale
    return np.asarray(e, dtype=np.float32)
