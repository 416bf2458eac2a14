"""SPEC.md §6: the table and constants of expf, correct rounding against mpmath, and that the check catches bugs."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from pp3.reference import expf
from pp3.reference import exponential as expf_mod
from pp3.reference._exp_table import TH_BITS, TL_BITS
from pp3.testing.compare import mismatch_report
from pp3.testing.golden import load_expf_wc
from pp3.testing.mutants import expf_final_rounding_in_fp32
from tests.oracles.expf import boundary_distance, cr_expf_array, cr_float64

ExpImpl = Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]


def _f64_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float64).view(np.uint64)[0])


def _f32(bits: npt.ArrayLike) -> npt.NDArray[np.float32]:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


# --- (a) the table and constants -----------------------------------------------------------------------------------

def test_table_matches_mpmath_400_bits() -> None:
    bad = []
    with mpmath.workprec(400):
        for j in range(64):
            exact = mpmath.mpf(2) ** (mpmath.mpf(j) / 64)
            th = cr_float64(exact)
            tl = cr_float64(exact - mpmath.mpf(th))
            if (_f64_bits(th), _f64_bits(tl)) != (TH_BITS[j], TL_BITS[j]):
                bad.append(f"j={j}: TH {TH_BITS[j]:#018x} want {_f64_bits(th):#018x}, "
                           f"TL {TL_BITS[j]:#018x} want {_f64_bits(tl):#018x}")
    assert not bad, f"{len(bad)} of 64 table entries differ:\n" + "\n".join(bad[:8])


def test_constants_match_spec_and_their_definitions() -> None:
    with mpmath.workprec(400):
        ln2_64 = mpmath.log(2) / 64
        want = {
            "INV": (0x40571547652B82FE, cr_float64(1 / ln2_64)),
            "L2": (0x3D1CF79ABC9E3B3A, cr_float64(ln2_64 - mpmath.mpf(float(expf_mod.L1)))),
            "C3": (0x3FC5555555555555, cr_float64(mpmath.mpf(1) / 6)),
            "C4": (0x3FA5555555555555, cr_float64(mpmath.mpf(1) / 24)),
            "C5": (0x3F81111111111111, cr_float64(mpmath.mpf(1) / 120)),
        }
        l1_def = _f64_bits(cr_float64(ln2_64)) & ~0xFFFF  # fl64(ln2/64) with the low 16 mantissa bits cleared
    for name, (spec_bits, exact) in want.items():
        got = _f64_bits(float(getattr(expf_mod, name)))
        assert got == spec_bits == _f64_bits(exact), f"{name}: {got:#018x}, SPEC {spec_bits:#018x}, " \
                                                     f"definition {_f64_bits(exact):#018x}"
    assert _f64_bits(float(expf_mod.L1)) == 0x3F862E42FEFA0000 == l1_def
    assert float(expf_mod.SHIFT) == 1.5 * 2.0**52 and float(expf_mod.C2) == 0.5
    assert float(expf_mod.ZMIN) == -104.0 and math.exp(-104.0) < 2.0**-150
    # kd * L1 is exact for |kd| <= 9604: L1's significand has at most 53 - 14 bits.
    l1_man = _f64_bits(float(expf_mod.L1)) & ((1 << 52) - 1) | (1 << 52)
    assert (l1_man >> ((l1_man & -l1_man).bit_length() - 1)).bit_length() + 14 <= 53


# --- (b) correct rounding ------------------------------------------------------------------------------------------

def expf_mismatches(impl: ExpImpl, z: npt.NDArray[np.float32]) -> str | None:
    """None if impl(z) equals the mpmath-correctly-rounded e^z bit for bit on every input, else a report."""
    return mismatch_report(impl(z), _cr_cached(z), f"{getattr(impl, '__name__', impl)} vs mpmath", inputs=z)


_CR_CACHE: dict[bytes, npt.NDArray[np.float32]] = {}


def _cr_cached(z: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    key = z.tobytes()
    if key not in _CR_CACHE:
        _CR_CACHE[key] = cr_expf_array(z)
    return _CR_CACHE[key]


def _uniform_bits(rng: np.random.Generator, lo: int, hi: int, n: int) -> npt.NDArray[np.float32]:
    return _f32(rng.integers(lo, hi, n, dtype=np.uint64, endpoint=True))


def near_midpoint_inputs(n_min: int, seed: int, max_ulp32: float = 2.0**-20) -> npt.NDArray[np.float32]:
    """Search random z for which the fp64 e^z lies within max_ulp32 binary32 ulps of a rounding midpoint.

    Samples z with |z| >= 2^-12 (below, e^z ~ 1 + z and the near-midpoint cases cluster), vectorised, until n_min
    distinct ones are found.
    """
    rng = np.random.default_rng(seed)
    out = np.zeros(0, dtype=np.float32)
    for _ in range(128):
        z = _uniform_bits(rng, 0xB9800000, 0xC2D00000, 1 << 20)
        d32, _ = boundary_distance(np.exp(z.astype(np.float64)))
        out = np.union1d(out.view(np.uint32), z[d32 <= max_ulp32].view(np.uint32)).view(np.float32)
        if out.size >= n_min:
            break
    assert out.size >= n_min, f"only {out.size} near-midpoint inputs found"
    return out


def hard_case_file() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """pp3/conformance/expf.wc (written by stats/audit_exp.py): z and its correctly rounded e^z."""
    return load_expf_wc()


def _consecutive(center: float, n: int) -> npt.NDArray[np.float32]:
    c = int(np.array([center], dtype=np.float32).view(np.uint32)[0])
    return _f32(np.arange(c - n // 2, c + n // 2, dtype=np.uint64))


@cache
def expf_inputs(n_random: int, seed: int) -> npt.NDArray[np.float32]:
    """The input set of the correct-rounding check (see the test's docstring); ~n_random * 1.5 values."""
    rng = np.random.default_rng(seed)
    special = np.array(
        [-0.0, 0.0, -np.inf, -104.0, -103.97, -103.98, -87.33, -87.34, -1e-7, -1e-45, -1e-38, -2.0**-126, -2.0**-25,
         -2.0**-24, -math.log(2), -1.0, -0.5, -np.finfo(np.float32).max, -150.0],
        dtype=np.float32,
    )
    parts = [
        special,
        _uniform_bits(rng, 0x80000000, 0xC2D00000, n_random),  # every fp32 in [-104, -0.0], bit-uniform
        rng.uniform(-103.98, -87.33, n_random // 4).astype(np.float32),  # results in the subnormal range
        rng.uniform(-1e-7, 0.0, n_random // 20).astype(np.float32),  # near 0: results 1 and 1 - 2^-24
        _uniform_bits(rng, 0x80000001, 0x80000000 + 4096, 1000),  # tiny negatives (subnormal z)
        _consecutive(-104.0, 512),  # E1 clamp: z < -104 and just above
        _consecutive(-103.972077, 2048),  # ln(2^-150): where the result steps from 0 to 2^-149
        _consecutive(-87.336545, 1024),  # ln(2^-126): subnormal / normal results
        _consecutive(-2.0**-25, 512),  # where e^z crosses 1 - 2^-25, the midpoint below 1
        near_midpoint_inputs(100, seed),  # fp64 e^z within 2^-20 binary32 ulp of a midpoint
        hard_case_file()[0],  # the audit's hardest inputs
    ]
    inputs: npt.NDArray[np.float32] = np.concatenate(parts).astype(np.float32)
    return inputs


def test_input_set_is_large_and_covers_the_hard_cases() -> None:
    z = expf_inputs(75_000, 1)
    assert z.size >= 100_000, z.size
    assert near_midpoint_inputs(100, 1).size >= 50
    assert hard_case_file()[0].size >= 1


def test_expf_correctly_rounded_against_mpmath() -> None:
    """~10^5 inputs: bit-uniform z in [-104, -0], subnormal results, near 0, specials, the -104 clamp, the 0/2^-149
    and subnormal/normal steps, and near-midpoint hard cases; every result compared with mpmath at 200 bits."""
    z = expf_inputs(75_000, 1)
    report = expf_mismatches(expf, z)
    assert report is None, report


@pytest.mark.slow
def test_expf_correctly_rounded_against_mpmath_large() -> None:
    z = expf_inputs(1_500_000, 2)
    report = expf_mismatches(expf, z)
    assert report is None, report


def test_hard_case_file_matches_mpmath_and_expf() -> None:
    z, want = hard_case_file()
    assert (rep := mismatch_report(cr_expf_array(z), want, "hard-case file vs mpmath", inputs=z)) is None, rep
    assert (rep := mismatch_report(expf(z), want, "expf on the hard-case file", inputs=z)) is None, rep


def test_specials_exactly() -> None:
    z = np.array([-0.0, 0.0, -np.inf, -104.0, -200.0, -np.finfo(np.float32).max], dtype=np.float32)
    want = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)
    assert (rep := mismatch_report(expf(z), want, "expf specials", inputs=z)) is None, rep


def test_subnormal_results_are_kept() -> None:
    """No flush to zero: e^z for z in (-103.97, -87.34) is a binary32 subnormal, and E9 must keep it."""
    z = np.array([-103.97, -100.0, -90.0, -87.34], dtype=np.float32)
    e = expf(z)
    assert np.all((e > 0) & (e < np.float32(2.0**-126))), e.view(np.uint32)
    assert (rep := mismatch_report(e, cr_expf_array(z), "subnormal results", inputs=z)) is None, rep


# --- (c) the check catches planted bugs ----------------------------------------------------------------------------

def _mismatch_count(report: str | None) -> int:
    return 0 if report is None else int(report.split(": ")[1].split(" of ")[0])


def test_check_detects_mutant_without_c5(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping the degree-5 term (error ~2^-20 binary32 ulp) is only visible on near-midpoint inputs."""
    monkeypatch.setattr(expf_mod, "C5", np.float64(0.0))
    z = expf_inputs(75_000, 1)
    n = _mismatch_count(expf_mismatches(expf_mod.expf, z))
    print(f"C5 = 0 mutant: {n} mismatches of {z.size}")
    assert n > 0, "the correct-rounding check did not notice C5 = 0"


def test_check_detects_mutant_with_fp32_final_rounding() -> None:
    z = expf_inputs(75_000, 1)
    n = _mismatch_count(expf_mismatches(expf_final_rounding_in_fp32, z))
    print(f"fp32 final rounding mutant: {n} mismatches of {z.size}")
    assert n > 0, "the correct-rounding check did not notice double rounding in fp32"


def test_mutant_copy_is_faithful_apart_from_the_bug() -> None:
    """The fp32-rounding mutant agrees with expf wherever the result is normal: the detection above is the bug."""
    z = expf_inputs(75_000, 1)
    normal = z[(z > -87.0)]
    assert (rep := mismatch_report(expf_final_rounding_in_fp32(normal), expf(normal), "mutant vs expf")) is None, rep


@pytest.mark.interpreter
def test_device_exponential_on_the_worst_case_file() -> None:
    """The kernels' expf (the device code every exact-path kernel calls) on pp3/conformance/expf.wc."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    import os

    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    from pp3.kernels import expf as device_expf
    from pp3.testing.call import default_device

    z, want = hard_case_file()
    got = device_expf(torch.from_numpy(z.copy()).to(default_device())).cpu().numpy()
    assert (rep := mismatch_report(got, want, "device expf on the worst-case file", inputs=z)) is None, rep
