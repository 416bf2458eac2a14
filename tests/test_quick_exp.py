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
    assert quick_exp.MIN_NORMAL == float(np.finfo(np.float32).tiny)
    assert quick_exp.ZERO_BELOW < 2.0**-150 and np.float32(quick_exp.ZERO_BELOW) == 0.0


def test_the_audit_passes_on_every_input(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole sweep (1.12e9 inputs, ~50 s on one core): wherever the twin decides, its value is the reference's;
    ``make expf-gpu`` checks the device's own binary (quick, then §6 where undecided) on the same inputs."""
    assert audit_exp.main(["--quick", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "decided but not the reference's bits: 0" in out
    assert "undecided (left to §6's own steps): 2,182,551" in out  # 2,101 normal ones, the rest below 2^-126


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


def test_results_below_2_126_are_undecided_unless_zero() -> None:
    """Every z of [-104, -87] (a sample): a result that rounds to a subnormal binary32 value is left undecided, one
    that rounds to +0.0 (z <= -103.97, and -inf) is decided, and every decided value is the reference's."""
    bits = audit_exp.task_bits((0xC2AE0000, 0xC2D00001, 7))
    e, decided = quick_exp.expf_quick(_z(bits))
    want = expf(_z(bits))
    assert not (decided & (e.view(np.uint32) != want.view(np.uint32))).any()
    sub = (want > 0) & (want < quick_exp.MIN_NORMAL)
    assert not decided[sub].any() and decided[want == 0].all() and (want == 0).any() and sub.any()
    e, decided = quick_exp.expf_quick(np.array([-104.0, -np.inf, -1e30], dtype=np.float32))
    assert (e == 0).all() and decided.all()
