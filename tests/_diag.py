"""Self-diagnosing exact comparisons: mismatch count, first coordinates, both values in hex."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """Floats as their raw unsigned bits; every other dtype unchanged."""
    if a.dtype.kind == "f":
        return a.view(_UINT[a.dtype.itemsize])
    return a


def _hex(v: object, width: int) -> str:
    """Fixed-width hex of an integer or of raw bits (negative integers as two's complement)."""
    return f"0x{int(v) & ((1 << (8 * width)) - 1):0{2 * width}x}"  # type: ignore[call-overload]


def mismatch_report(
    got: npt.ArrayLike,
    want: npt.ArrayLike,
    what: str,
    inputs: npt.ArrayLike | None = None,
    first: int = 8,
) -> str | None:
    """None if got and want are identical bit for bit (floats compared through their bits), else a report."""
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"{what}: shape {g.shape} != expected {w.shape}"
    if g.dtype != w.dtype:
        return f"{what}: dtype {g.dtype} != expected {w.dtype}"
    gb, wb = _bits(g), _bits(w)
    bad = np.argwhere(gb != wb)
    if bad.size == 0:
        return None
    width = g.dtype.itemsize
    lines = [f"{what}: {len(bad)} of {g.size} differ; first {min(first, len(bad))}:"]
    inp = None if inputs is None else np.asarray(inputs)
    for idx in bad[:first]:
        t = tuple(int(i) for i in idx)
        src = ""
        if inp is not None:
            iv = inp[t]
            src = f" input {_hex(_bits(np.asarray(iv))[()], inp.dtype.itemsize)} ({iv!r})"
        lines.append(
            f"  at {t}:{src} got {_hex(gb[t], width)} ({g[t]!r}) want {_hex(wb[t], width)} ({w[t]!r})"
        )
    return "\n".join(lines)


def assert_same(got: npt.ArrayLike, want: npt.ArrayLike, what: str, inputs: npt.ArrayLike | None = None) -> None:
    """Assert bitwise equality with a diagnostic that names the first differing coordinates in hex."""
    report = mismatch_report(got, want, what, inputs)
    assert report is None, report


def first_lines(lines: Sequence[str], n: int = 12) -> str:
    shown = "\n".join(lines[:n])
    return shown + (f"\n  ... and {len(lines) - n} more" if len(lines) > n else "")
