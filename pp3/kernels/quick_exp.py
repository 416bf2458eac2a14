"""SPEC.md §6's ``expf`` by fewer operations: a shorter fp64 evaluation that returns §6's bits wherever a rounding
test decides them, and says where it does not (there the kernels evaluate E1-E9 themselves). NumPy only (no torch, no
triton): ``expf_quick`` is the NumPy twin of ``_common._expf_quick``, operation for operation.

§6's result is the correctly rounded binary32 e^z for every fp32 z <= 0 (§6.1, audited exhaustively), so any
evaluation that returns the correctly rounded value returns §6's bits: no new semantic ID, no new golden vector.

**The evaluation** (every step one IEEE fp64 operation, RNE, no FMA, or an exact integer one, as the kernels compile
it under ``config.EXACT``): E1-E3 as §6 (x = fl64(max(z, -104)), t = x INV, kd = (t + SHIFT) - SHIFT), with k
read from the low word of t + SHIFT's bits (that word is k mod 2^32, as SHIFT = 1.5 2^52: no fp64 -> int32
conversion); r = x - kd LN with one constant LN = fl64(ln2 / 64); p = r (1 + r (C2 + r (C3 + r C4))), §6's
polynomial one degree lower; y = TH[j] + TH[j] p (the table's high part alone); y2 = y 2^m (exact); the value
fl32(y2). Fifteen fp64 operations, two conversions and one table entry per input against §6's twenty, three and two.

**Its error.** |r| <= ln2 / 128 (1 + 2^-40) < 0.0054153 (§6.1). r's own error: x - fl64(kd LN) is exact (kd = 0
gives x; else x and kd LN lie within a factor 2, Sterbenz), fl64(kd LN) errs by at most 2^-47 (|kd LN| < 128) and
kd (LN - ln2 / 64) by at most 9604 2^-60: |r - (x - kd ln2 / 64)| < 1.55e-14. The polynomial's truncation, the sum
over n >= 5 of |r|^n / n!, is below 3.89e-14; TH[j]'s own rounding 2^-53 relative (TL[j] dropped); the roundings of
p and y below 2^-52 together: |y2 - e^z| < 5.5e-14 e^z < 2^-43.9 e^z. The test below takes EPS = 2^-43 (2x room).

**The rounding test** (``decided``): fl32(y2) is the correctly rounded e^z if no binary32 rounding boundary (a
midpoint between neighbouring binary32 values) lies between y2 and e^z.
- y2 >= 2^-126 (a normal binary32 result): in y2's binade the boundaries are the fp64 values whose low 29 mantissa
  bits are 2^28 (fl32 keeps 23 of the 52), one every 2^29 fp64 ulps; the ulp of y2 exceeds y2 2^-53, so
  |y2 - e^z| < EPS e^z < 2^-43 (1 + 2^-42) 2^53 ulps < 1025 ulps. Decided if the low 29 bits L of y2 satisfy
  |L - 2^28| > NORMAL_ULPS = 2048. Across a binade's edge the nearest boundaries lie 2^28 ulps away or more.
- y2 < 2^-126: the binary32 values are the multiples of 2^-149 (subnormal, or zero, or 2^-126), the boundaries the
  odd multiples of 2^-150. s = fl64(y2 + 2^-97) rounds y2 to a multiple of 2^-149 (the ulp of fp64 in
  [2^-97, 2^-96)), q = s - 2^-97 (exact: Sterbenz) is that multiple, rho = y2 - q is exact (|rho| <= 2^-150, a
  multiple of y2's own ulp) and the nearest boundary lies 2^-150 - |rho| from y2 (exact too). Decided if
  2^-150 - |rho| > y2 2^-42 > EPS e^z. A y2 below 2^-150 is decided there too (q = 0): its value is +0.0.
An input is left undecided with probability about 2 NORMAL_ULPS / 2^29 = 2^-17 (one tile of 2,048 entries in ~64).
``tools/audit_exp.py --quick`` checks the claim on every fp32 z in [-104, -0.0]: wherever ``decided``, the value is
the reference's bits (the NumPy twin on the CPU, the kernels' own code with ``--device cuda``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pp3.reference.exponential import C2, C3, C4, INV, ONE, SHIFT, TH, ZMIN

LN = np.array([0x3F862E42FEFA39EF], dtype=np.uint64).view(np.float64)[0]  # fl64(ln2 / 64)
NORMAL_ULPS = 2048  # |L - 2^28| above it decides a normal result (the error is below 1025 fp64 ulps)
MIN_NORMAL = 2.0**-126  # the least normal binary32 value
SUB_SHIFT = 2.0**-97  # fp64's ulp is 2^-149 in [2^-97, 2^-96)
HALF_SUB = 2.0**-150  # half the spacing of binary32 values below 2^-126
SUB_REL = 2.0**-42  # a subnormal result is decided if its nearest boundary lies more than y2 SUB_REL away

F32 = npt.NDArray[np.float32]
Flags = npt.NDArray[np.bool_]


def expf_quick(z: F32) -> tuple[F32, Flags]:
    """fl32(y2) of fp32 ``z <= 0`` (-inf allowed) and where it is decided (then it is §6's expf(z)), step for step as
    ``_common._expf_quick``."""
    z32 = np.asarray(z, dtype=np.float32)
    with np.errstate(all="ignore"):
        zc = np.maximum(z32, ZMIN)
        x = zc.astype(np.float64)
        t = x * INV
        big = t + SHIFT
        kd = big - SHIFT
        k = big.view(np.int64).astype(np.int32)  # the low word: k mod 2^32
        r = x - kd * LN
        p = r * (ONE + r * (C2 + r * (C3 + r * C4)))
        th = TH[k & np.int32(63)]
        y = th + th * p
        scale = (((k >> np.int32(6)).astype(np.int64) + np.int64(1023)) << np.int64(52)).view(np.float64)
        y2 = y * scale
        low = y2.view(np.int64).astype(np.int32) & np.int32(0x1FFFFFFF)
        normal = np.abs(low - np.int32(1 << 28)) > np.int32(NORMAL_ULPS)
        q = (y2 + SUB_SHIFT) - SUB_SHIFT
        sub = (HALF_SUB - np.abs(y2 - q)) > y2 * SUB_REL
        decided = np.where(y2 >= MIN_NORMAL, normal, sub)
        return np.asarray(y2.astype(np.float32), dtype=np.float32), np.asarray(decided, dtype=np.bool_)
