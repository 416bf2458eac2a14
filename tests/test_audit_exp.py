"""stats/audit_exp.py and its oracles: the boundary distance is exact, the audit passes the reference and reports
a planted bug, and the device audit compares the kernels' bits with the reference's."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest

from pp3.audit import fast_accept
from pp3.testing.golden import load_expf_wc
from pp3.testing.mutants import expf_final_rounding_in_fp32
from stats import audit_exp
from tests.oracles.expf import boundary_distance, cr_expf, round_mpf


def _distance_by_fractions(y: float) -> tuple[Fraction, Fraction]:
    """Distance of y to the nearest binary32 midpoint, in binary32 and fp64 ulps, with exact rationals."""
    _, e = math.frexp(y)  # y in [2^(e-1), 2^e)
    q = max(e - 1, -126) - 23
    s = Fraction(y) / Fraction(2) ** q
    d32 = abs(s - math.floor(s) - Fraction(1, 2))
    return d32, d32 * Fraction(2) ** q / Fraction(2) ** (e - 53)


def test_boundary_distance_is_exact() -> None:
    rng = np.random.default_rng(0)
    y = np.concatenate([
        np.exp(-rng.uniform(0, 104, 3000)),  # the range of e^z
        np.ldexp(rng.uniform(0.5, 1.0, 500), rng.integers(-160, 1, 500)),  # every binade, subnormal binary32 included
        [1.0, 2.0**-150, 2.0**-149, 2.0**-126, 2.0**-126 - 2.0**-150, 1 - 2.0**-25, 0.75 + 2.0**-26],
    ])
    d32, d64 = boundary_distance(y)
    bad = []
    for v, a, b in zip(y.tolist(), d32.tolist(), d64.tolist(), strict=True):
        want32, want64 = _distance_by_fractions(v)
        exact_required = want32 < Fraction(1, 4)  # the documented exactness range
        if (exact_required and (Fraction(a), Fraction(b)) != (want32, want64)) or (not exact_required and a < 0.25):
            bad.append((v, a, b))
    assert not bad, f"{len(bad)} of {y.size} distances differ, first {[(v.hex(), a, b) for v, a, b in bad[:3]]}"


def test_round_mpf_rounds_to_nearest_even_with_subnormals() -> None:
    import mpmath

    def r32(v: mpmath.mpf) -> float:
        n, q = round_mpf(v, 24, -126)
        return math.ldexp(n, q)

    with mpmath.workprec(300):
        tiny = mpmath.mpf(2) ** -190
        sub = mpmath.mpf(2) ** -149  # the smallest binary32 subnormal
        assert r32(sub * 1.5 + tiny) == 2.0**-148
        assert r32(sub * 1.5 - tiny) == 2.0**-149
        assert r32(sub / 2 + tiny) == 2.0**-149  # just above 2^-150 rounds up to 2^-149
        assert r32(sub / 2 - tiny) == 0.0
        assert r32(sub / 4) == 0.0
        assert r32(1 - mpmath.mpf(2) ** -25 - 2 ** mpmath.mpf(-100)) == 1 - 2.0**-24
        assert r32(1 - mpmath.mpf(2) ** -25 + 2 ** mpmath.mpf(-100)) == 1.0
        assert r32(mpmath.mpf(2) ** -126 * (1 - mpmath.mpf(2) ** -25)) == 2.0**-126  # subnormal/normal edge
    assert cr_expf(-103.97) == 2.0**-149 and cr_expf(-103.98) == 0.0 and cr_expf(-0.0) == 1.0
    with pytest.raises(ArithmeticError):
        round_mpf(1 + mpmath.mpf(2) ** -24, 24, -126)  # an exact midpoint is undecidable (never e^z)


def test_audit_passes_the_reference_on_a_slice() -> None:
    hard = [int(b) for b in load_expf_wc()[0].view(np.uint32)]  # pp3/conformance/expf.wc
    sub = np.arange(0xC2C80000, 0xC2C80000 + 65536, dtype=np.uint64)  # z ~ -100: subnormal results
    bits = np.concatenate([sub, np.array(hard, dtype=np.uint64)]).astype(np.uint32)
    t = audit_exp.audit_bits(bits, "numpy")
    assert t.inputs == bits.size
    assert {r.zbits for r in t.referred} >= set(hard), "hard cases not referred"
    assert [r for r in t.referred if r.ref_bits != r.cr_bits] == []
    assert t.fast_differs == []  # pp3.audit.fast_accept.expf, on the subnormal results and the hardest inputs
    hardest = min(t.referred, key=lambda r: r.exact_ulps)
    assert hardest.zbits == 0xC16912CD and 1.26 < hardest.exact_ulps < 1.27  # SPEC.md §6.1's ~1.265 ulp


def test_audit_reports_a_planted_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_exp, "expf", expf_final_rounding_in_fp32)
    bits = np.arange(0xC2CF0000, 0xC2CF0000 + 65536, dtype=np.uint64).astype(np.uint32)  # z in (-104, -103.5]
    t = audit_exp.audit_bits(bits, "numpy")
    mis = [r for r in t.referred if r.ref_bits != r.cr_bits]
    print(f"fp32-final-rounding mutant: {len(mis)} misrounded of {t.inputs}")
    assert mis and t.disagreements == len(mis)


def test_audit_reports_a_fast_expf_that_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted same-bits exponential that is not: an fp64 exp 2^-30 off, rounded to fp32 with no rounding test."""

    def off(z: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return (np.exp(z.astype(np.float64)) * (1.0 + 2.0**-30)).astype(np.float32)

    monkeypatch.setattr(fast_accept, "expf", off)
    bits = np.arange(0xBF800000, 0xBF800000 + 65536, dtype=np.uint64).astype(np.uint32)  # z ~ -1: normal results
    t = audit_exp.audit_bits(bits, "numpy")
    print(f"an fp64 exp 2^-30 off as the fast expf: {len(t.fast_differs)} of {t.inputs} differ")
    assert t.fast_differs


def test_limit_mode_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert audit_exp.main(["--limit", "200000", "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "reference misrounded: 0" in text and "runtime:" in text
    assert "pp3.audit.fast_accept.expf differs from the reference: 0" in text



def _kernel_device() -> object:
    """Where the kernels run here: the CUDA GPU, else the CPU under TRITON_INTERPRET=1 (else the test skips)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    import os

    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    from pp3.testing.call import default_device

    return default_device()


@pytest.mark.interpreter
def test_device_audit_compares_the_kernel_with_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """--device cuda's comparison, here on the interpreter where there is no GPU: the kernels' expf gives the
    reference's bits on a slice, and a planted bug in the reference shows up as differences."""
    bits = np.concatenate([audit_exp.task_bits((0xC2CF0000, 0xC2CF0000 + 8192, 1)),
                           np.array(audit_exp.SPECIALS, dtype=np.uint32)])
    got = audit_exp.device_bits(bits, _kernel_device())
    assert audit_exp.differences(bits, got, audit_exp.reference_bits(bits)) == (0, [])
    monkeypatch.setattr(audit_exp, "expf", expf_final_rounding_in_fp32)
    count, first = audit_exp.differences(bits, got, audit_exp.reference_bits(bits))
    assert count > 0 and first and all(g != w for _, g, w in first)


@pytest.mark.interpreter
def test_device_audit_sample_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert audit_exp.device_audit(3000, 1, _kernel_device()) == 0
    assert "device expf differs from the reference: 0" in capsys.readouterr().out
