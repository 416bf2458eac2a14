"""SPEC.md §6: the correctly rounded fp32 exponential, evaluated with fp64 operations only (E1-E9).

Each line is one IEEE operation in the order SPEC.md gives; NumPy's float64 arithmetic is IEEE RNE with no
contraction, so this module *is* the definition executed on the CPU.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pp3.reference._exp_table import TH_BITS, TL_BITS


def _f64(bits: int) -> np.float64:
    return np.float64(np.array([bits], dtype=np.uint64).view(np.float64)[0])


ZMIN = np.float32(-104.0)  # E1: e^-104 < 2^-150, so every z <= -104 rounds to +0.0
INV = _f64(0x40571547652B82FE)  # E2: fl64(64 / ln 2)
SHIFT = _f64(0x4338000000000000)  # E3: 1.5 * 2^52
L1 = _f64(0x3F862E42FEFA0000)  # E4: ln2/64 with the low 16 mantissa bits cleared
L2 = _f64(0x3D1CF79ABC9E3B3A)  # E4: fl64(ln2/64 - L1)
C2 = _f64(0x3FE0000000000000)  # E5: 1/2
C3 = _f64(0x3FC5555555555555)  # E5: fl64(1/6)
C4 = _f64(0x3FA5555555555555)  # E5: fl64(1/24)
C5 = _f64(0x3F81111111111111)  # E5: fl64(1/120)
ONE = np.float64(1.0)
TH = np.array(TH_BITS, dtype=np.uint64).view(np.float64)  # E7
TL = np.array(TL_BITS, dtype=np.uint64).view(np.float64)  # E7


BLOCK = 1 << 15  # entries per pass of expf: its fp64 temporaries stay in the CPU's caches (4-5x faster on rows of
# 163840 entries than one pass over a whole batch); each entry is computed alone, so no bit depends on it


def expf(z: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Correctly rounded fp32 e^z for fp32 ``z <= 0`` (-inf and -0.0 included), SPEC.md §6, entry by entry."""
    z32 = np.asarray(z, dtype=np.float32)
    flat = z32.reshape(-1)
    out = np.empty(flat.shape, dtype=np.float32)
    for lo in range(0, flat.size, BLOCK):
        out[lo : lo + BLOCK] = _expf_block(flat[lo : lo + BLOCK])
    return out.reshape(z32.shape)


def _expf_block(z32: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """§6 E1-E9 on a 1-D block of fp32 inputs, one IEEE fp64 operation per step."""
    with np.errstate(all="ignore"):
        zc = np.maximum(z32, ZMIN)  # E1
        x = zc.astype(np.float64)  # E1: exact
        t = x * INV  # E2
        kd = (t + SHIFT) - SHIFT  # E3: round to nearest integer, ties to even
        k = kd.astype(np.int32)  # E3: exact
        r = (x - kd * L1) - kd * L2  # E4
        p = r * (ONE + r * (C2 + r * (C3 + r * (C4 + r * C5))))  # E5
        j = k & np.int32(63)  # E6
        m = k >> np.int32(6)  # E6: arithmetic shift
        y = TH[j] + (TL[j] + TH[j] * p)  # E7
        scale = ((m.astype(np.int64) + np.int64(1023)) << np.int64(52)).view(np.float64)  # E8
        return np.asarray((y * scale).astype(np.float32), dtype=np.float32)  # E8, E9
