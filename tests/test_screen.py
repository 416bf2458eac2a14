"""The verifier's screen (pp3.kernels.screen): both screening exponentials' bound as stats/audit_screen.py checks it
(every input), the margin derived from the hardware exponential's documented error, the kernels' code equal to its
NumPy twin bit for bit (in the interpreter; on a card the hardware screen is not the twin, and ``make screen-gpu``
checks its bound there), and a planted error in either caught by the audit."""

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
    ex2 = screen.expf_screen_ex2(np.array([-0.0, 0.0, -np.inf, -86.0, -200.0], dtype=np.float32))
    assert ex2[0] == ex2[1] == 1.0 and ex2[2] == 0.0 and 0 < ex2[3] < screen.SCREEN_ABS and ex2[4] == 0.0


def test_the_margin_holds_with_room_from_the_documented_error() -> None:
    """The hardware screen's derivation (``screen.ex2_room``): the PTX ISA's 2 ulp from the correctly rounded result
    leave 8.6x room between the derived bound on |S~ - S| / S and the margin; 4x remains up to 139 ulps and is gone
    by 145 (so the function can tell a bound that does not hold)."""
    assert np.isclose(screen.EX2_REL, 2.0**-21.678, rtol=1e-4)
    assert 8.5 < screen.ex2_room() < 8.7
    assert screen.ex2_room(139 * 2.0**-23) > 4 > screen.ex2_room(145 * 2.0**-23)


def test_the_audit_passes_on_every_input(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole sweep (1.12e9 inputs, both screens, ~25 s on one core): the bound holds for both twins everywhere;
    the kernels' code is the twins' in the interpreter (below) and ``make screen-gpu`` checks the card's binaries."""
    assert audit_screen.main(["--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "audit-screen pinned: PASS" in out and "audit-screen ex2: PASS" in out and "audit-screen: PASS" in out
    pinned = next(ln for ln in out.splitlines() if ln.startswith("screen pinned:"))
    assert "= 2^-17.20 at" in pinned  # the measured bound, 2^0.8 under SCREEN_REL


def _coarse(z: F32) -> F32:
    """Planted: the screen scaled by 1 + 2 SCREEN_REL (a constant of the polynomial off by that much): outside
    SCREEN_REL wherever it is not far inside."""
    return (screen.expf_screen(z) * np.float32(1.0 + 2.0 * screen.SCREEN_REL)).astype(np.float32)


def _coarse_ex2(z: F32) -> F32:
    """Planted: the hardware screen with its base-2 argument 2^-15 too large in magnitude: outside SCREEN_REL
    wherever |z| > 0.7."""
    with np.errstate(under="ignore"):
        y = z.astype(np.float32) * np.float32(screen.LOG2E)
        out: F32 = np.exp2(y * np.float32(1.0 + 2.0**-15)).astype(np.float32)
    return out


@pytest.mark.parametrize(("name", "planted"), [("expf_screen", _coarse), ("expf_screen_ex2", _coarse_ex2)])
def test_a_screen_outside_its_bound_fails_the_audit(name: str, planted: object, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(audit_screen, name, planted)
    assert audit_screen.main(["--limit", "100000", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    which, other = ("pinned", "ex2") if name == "expf_screen" else ("ex2", "pinned")
    assert f"audit-screen {which}: FAIL" in out and f"audit-screen {other}: PASS" in out
    assert "audit-screen: FAIL" in out


@pytest.mark.interpreter
@pytest.mark.parametrize("which", screen.SCREENS)
def test_the_kernel_is_the_numpy_twin(which: str) -> None:
    """``_common._expf_screen`` (interpreter or GPU) and ``_expf_screen_ex2`` (interpreter: NumPy's fp32 exp2, no
    inline PTX runs there) give their twins' bits: on the floor's neighbourhood, near 0, where k first rounds to -1,
    the specials and an even sample of the range."""
    import os

    torch = pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    if which == "ex2" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("on a card the hardware screen is ex2.approx.f32, not the twin (make screen-gpu: its bound)")
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
    got = accept.expf_screen(torch.from_numpy(z.copy()).to(dev), which).cpu().numpy()
    twin = screen.expf_screen if which == "pinned" else screen.expf_screen_ex2
    np.testing.assert_array_equal(got.view(np.uint32), twin(z).view(np.uint32))


@pytest.mark.interpreter
def test_the_interpreters_audit_runs_the_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """``--device interpreter`` (every input: ``python stats/audit_screen.py --device interpreter``, minutes)
    on a sample: the kernels' own code, interpreted, within the bound."""
    import os

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1")
    assert audit_screen.main(["--device", "interpreter", "--limit", "300000"]) == 0
    assert "on the Triton interpreter" in capsys.readouterr().out
