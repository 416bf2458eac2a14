"""The verifier's launch-3 exponential (pp3.kernels.quick_exp): its NumPy twin decides §6's bits on every input
(the audit's whole sweep), the inputs it must leave undecided are left so, and planted errors in its test or its
polynomial are caught by the audit. The kernels' code against the twin and the reference: tests/test_kernels_accept.py
(``test_launch_3_weighs_the_hardest_inputs_exactly``) and ``make expf-gpu``."""

from __future__ import annotations

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from pp3.kernels import quick_exp
from pp3.reference.exponential import expf
from tools import audit_exp

# Every fp32 z in [-104, -0.0] whose quick value fl32(y2) is not §6's (the full sweep of 2026-12-06 found these ten,
# all inside the undecided band: the fallback is what makes them right).
DIFFERENT = np.array([0xBBB69F49, 0xBBB70EE8, 0xBBF0EDF1, 0xBC7B48ED, 0xBCE017BB, 0xBD4D3A02, 0xBDA7375D, 0xBEE0E6CD,
                      0xC0A63302, 0xC16912CD], dtype=np.uint32)


def _z(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.float32]:
    return bits.view(np.float32)


def test_the_constants_are_what_the_derivation_says() -> None:
    mpmath.mp.prec = 200
    assert float(quick_exp.LN) == float(mpmath.log(2) / 64)  # fl64(ln2 / 64): mpmath rounds to nearest too
    assert np.array([quick_exp.LN]).view(np.uint64)[0] == 0x3F862E42FEFA39EF
    for c in (quick_exp.MIN_NORMAL, quick_exp.SUB_SHIFT, quick_exp.HALF_SUB, quick_exp.SUB_REL):
        assert np.frexp(c)[0] == 0.5  # powers of two: their products are exact
    assert quick_exp.MIN_NORMAL == float(np.finfo(np.float32).tiny)


def test_the_audit_passes_on_every_input(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole sweep (1.12e9 inputs, ~50 s on one core): wherever the twin decides, its value is the reference's;
    ``make expf-gpu`` checks the device's own binary (quick, then §6 where undecided) on the same inputs."""
    assert audit_exp.main(["--quick", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "decided but not the reference's bits: 0" in out
    assert "undecided (left to §6's own steps): 2,101" in out  # 1.9e-6 of the inputs, as the derivation predicts


def test_the_inputs_it_gets_wrong_are_undecided() -> None:
    e, decided = quick_exp.expf_quick(_z(DIFFERENT))
    assert (e.view(np.uint32) != expf(_z(DIFFERENT)).view(np.uint32)).all()
    assert not decided.any()


def test_a_looser_test_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: a normal result decided within 2 fp64 ulps of a boundary (the error is up to ~900): the audit sees
    wrong bits decided."""
    monkeypatch.setattr(quick_exp, "NORMAL_ULPS", 2)
    wrong, _ = audit_exp.quick_bits(DIFFERENT)
    assert wrong > 0


def test_a_shorter_polynomial_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: the polynomial's last term dropped (an error of ~2^-34.7, beyond EPS): the audit's sample catches it."""
    monkeypatch.setattr(quick_exp, "C4", np.float64(0.0))
    wrong, _ = audit_exp.quick_bits(audit_exp.task_bits((0xBC000000, 0xC2D00000, 4099)))
    assert wrong > 0


def test_subnormal_and_zero_results_are_decided_by_their_own_test() -> None:
    """Results below 2^-126 take the test on multiples of 2^-149: every z of [-104, -87.3] (a sample) is decided or
    correct, and z <= -104 gives +0.0 decided."""
    bits = audit_exp.task_bits((0xC2AE0000, 0xC2D00001, 7))
    e, decided = quick_exp.expf_quick(_z(bits))
    want = expf(_z(bits)).view(np.uint32)
    assert not (decided & (e.view(np.uint32) != want)).any()
    assert decided.mean() > 0.999
    e, decided = quick_exp.expf_quick(np.array([-104.0, -np.inf, -1e30], dtype=np.float32))
    assert (e == 0).all() and decided.all()
