"""Independent oracles for SPEC.md §6: the correctly rounded binary32 e^z (mpmath) and the distance of an fp64
value to the nearest binary32 rounding boundary (NumPy, exact).

Shared by tests/test_expf.py and stats/audit_exp.py. Nothing here imports pp3: it must stay independent of the
reference it judges.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import numpy.typing as npt

MP_PREC = 200  # bits; the hardest fp32 input lies ~2^-29 (relative) from a boundary, far above 2^-190
F32_EMIN = -126  # exponent of the smallest normal binary32
F32_P = 24  # binary32 precision (bits)
F64_EMIN = -1022
F64_P = 53


def round_mpf(v: mpmath.mpf, p: int, emin: int) -> tuple[int, int]:
    """Round a real v >= 0 to the binary format (precision p, minimum normal exponent emin), RNE, subnormals kept.

    Returns (n, q) with result = n * 2^q exactly. Works on mpmath's exact (man, exp) pair with Python integers, so
    the only inexactness is mpmath's own working precision; raises if v is too close to a midpoint to decide.
    """
    if v < 0:
        raise ValueError("round_mpf: v must be >= 0")
    if v == 0:
        return 0, 0
    man, exp = int(v.man), int(v.exp)  # v = man * 2^exp exactly, man odd
    top = exp + man.bit_length() - 1  # v in [2^top, 2^(top+1))
    if top < emin - p:
        return 0, 0  # v < 2^(emin - p) = half the smallest subnormal
    q = max(top, emin) - (p - 1)  # exponent of one unit in the last place at v's binade (subnormal: fixed)
    shift = q - exp
    if shift <= 0:
        return man << -shift, q  # v is a multiple of the ulp: exact
    n, rem = man >> shift, man & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    # A value this close to a midpoint (relative 2^-(MP_PREC - 16)) cannot be decided at this precision.
    if abs(rem - half) * (1 << (MP_PREC - 16)) < man:
        raise ArithmeticError(f"round_mpf: {v} is within 2^-{MP_PREC - 16} of a rounding midpoint")
    if rem > half or (rem == half and n & 1):
        n += 1
    return n, q


def exp_mp(z: float) -> mpmath.mpf:
    """e^z at MP_PREC bits (z a Python float, converted exactly)."""
    with mpmath.workprec(MP_PREC):
        return mpmath.exp(mpmath.mpf(z))


def cr_expf(z: float) -> float:
    """The correctly rounded (RNE) binary32 value of e^z, subnormals kept, as an (exact) Python float."""
    if math.isinf(z):
        return 0.0 if z < 0 else math.inf
    n, q = round_mpf(exp_mp(z), F32_P, F32_EMIN)
    return math.ldexp(n, q)


def cr_expf_array(z: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """cr_expf element by element (mpmath: ~5-10 µs per element)."""
    z32 = np.asarray(z, dtype=np.float32).ravel()
    out = np.array([cr_expf(v) for v in z32.astype(np.float64).tolist()], dtype=np.float64)
    return out.astype(np.float32).reshape(np.shape(z))  # exact: every value is a binary32 value


def cr_float64(v: mpmath.mpf) -> float:
    """Nearest fp64 (RNE) of a real v, by integer rounding (independent of mpmath's own float conversion)."""
    if v < 0:
        return -cr_float64(-v)
    n, q = round_mpf(v, F64_P, F64_EMIN)
    return math.ldexp(n, q)


def boundary_distance(y: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Distance of fp64 values y > 0 to the nearest binary32 rounding boundary (a midpoint between adjacent binary32
    values, subnormal range and the 0 / 2^-149 midpoint included), exactly.

    Returns (in units of the binary32 ulp at y, in units of the fp64 ulp of y). Exact whenever the distance is below
    1/4 binary32 ulp (the only distances the audit acts on): the scalings are by powers of two, s - floor(s) is
    exact, and (s - floor(s)) - 0.5 is exact by Sterbenz's lemma for s - floor(s) in [1/4, 1]. Larger distances
    (only for y < 2^-151) may be rounded, but stay >= 1/4.
    """
    y = np.asarray(y, dtype=np.float64)
    _, e = np.frexp(y)  # y = f * 2^e, f in [0.5, 1): y's binade is [2^(e-1), 2^e)
    q = np.maximum(e - 1, F32_EMIN) - (F32_P - 1)  # binary32 ulp exponent at y
    s = np.ldexp(y, -q)  # y in binary32 ulps: < 2^24, exact
    d32 = np.abs((s - np.floor(s)) - 0.5)
    d64 = np.ldexp(d32, q - (e - F64_P))  # fp64 ulp of y is 2^(e - 53)
    return d32, d64
