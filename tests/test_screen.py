"""The verifier's screen (pp3.kernels.screen): the screening exponential's bound as stats/audit_screen.py checks it,
the kernels' code equal to its NumPy twin bit for bit, and a planted error in it caught by the audit."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from pp3.kernels import screen
from stats import audit_exp, audit_screen

F32 = npt.NDArray[np.float32]


def test_the_constants_are_what_the_derivation_says() -> None:
    f = np.float32
    assert np.float32(screen.MAGIC).view(np.uint32) == 0x4B400000  # _common.SCREEN_MAGIC_BITS
    assert f(screen.LOG2E).view(np.uint32) == 0x3FB8AA3B
    bits = [int(f(c).view(np.uint32)) for c in screen.POLY]
    assert bits == [0x3F317096, 0x3E7601BC, 0x3D64FE23, 0x3C1D0166] and all(float(f(c)) == c for c in screen.POLY)
    assert screen.fit_poly().astype(np.float32).view(np.uint32).tolist() == bits  # the recipe reproduces them
    floor = screen.expf_screen(np.array([screen.SCREEN_FLOOR, -np.inf], dtype=np.float32))
    assert floor[0] == floor[1] and 0 < floor[0] < screen.SCREEN_ABS  # the floor's value, taken below it
    assert 1.0 + screen.SCREEN_MARGIN == float(f(1.0 + screen.SCREEN_MARGIN))  # the kernel takes 1 +- margin as fp32
    assert 1.0 - screen.SCREEN_MARGIN == float(f(1.0 - screen.SCREEN_MARGIN))


def test_the_audit_passes_on_every_input(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole sweep (1.12e9 inputs, ~18 s on one core): the bound holds for the twin everywhere; the kernels'
    code is the twin's (below) and ``make screen-gpu`` checks the device's own binary."""
    assert audit_screen.main(["--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "audit-screen: PASS" in out and "= 2^-17.20 at" in out  # the measured bound, 2^0.8 under SCREEN_REL


def _coarse(z: F32) -> F32:
    """Planted: the screen scaled by 1 + 2 SCREEN_REL (a constant of the polynomial off by that much): outside
    SCREEN_REL wherever it is not far inside."""
    return (screen.expf_screen(z) * np.float32(1.0 + 2.0 * screen.SCREEN_REL)).astype(np.float32)


def test_a_screen_outside_its_bound_fails_the_audit(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(audit_screen, "expf_screen", _coarse)
    assert audit_screen.main(["--limit", "100000", "--workers", "1"]) == 1
    assert "audit-screen: FAIL" in capsys.readouterr().out


@pytest.mark.interpreter
def test_the_kernel_is_the_numpy_twin() -> None:
    """``_common._expf_screen`` (interpreter or GPU) gives the twin's bits: on the floor's neighbourhood, near 0,
    where k first rounds to -1, the specials and an even sample of the range."""
    import os

    torch = pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    from pp3.kernels import accept
    from pp3.testing.call import default_device

    dev = default_device()
    bits = np.concatenate([
        audit_exp.task_bits((0xC2ABF000, 0xC2AC1000, 1)),  # around -86
        audit_exp.task_bits((0x80000000, 0x80001000, 1)),  # -0.0 and the subnormals next to it
        audit_exp.task_bits((0xBEB17000, 0xBEB17400, 1)),  # y = z LOG2E around -1/2: k from 0 to -1
        audit_exp.task_bits((0xBF000000, 0xC2D00000, 9973)),  # -0.5 .. -104
        np.array(audit_exp.SPECIALS, dtype=np.uint32),
    ])
    z = bits.view(np.float32)
    got = accept.expf_screen(torch.from_numpy(z.copy()).to(dev)).cpu().numpy()
    np.testing.assert_array_equal(got.view(np.uint32), screen.expf_screen(z).view(np.uint32))
