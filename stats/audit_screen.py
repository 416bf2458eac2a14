"""Exhaustive audit of the verifier's screening exponentials (``pp3.kernels.screen``, both of ``SCREENS``): for every
fp32 z in [-86, -0.0] |e~ - expf(z)| <= SCREEN_REL expf(z), and for every z below, e~ and expf(z) are in
[0, SCREEN_ABS).

Run: python stats/audit_screen.py               (make audit-screen; the NumPy twins against the reference, every input)
     python stats/audit_screen.py --limit N     (~N evenly spaced inputs plus the specials, seconds)
     python stats/audit_screen.py --device cuda (make screen-gpu; the kernels' code on the card against their expf,
                                                 which stats/audit_exp.py --device cuda proves equal to the reference)
     python stats/audit_screen.py --device interpreter
                                                (the kernels' code under TRITON_INTERPRET=1 against the reference:
                                                 there the hardware screen is NumPy's fp32 exp2, as in its twin)
     --screen pinned|ex2                        (one of them; both by default, in one sweep)

Inputs: every negative fp32 bit pattern from 0x80000000 (-0.0) to 0xC2D00000 (-104.0), plus +0.0, -inf and a few
z < -104 (the reference is +0.0 there). Prints, per screen, the largest relative difference over [-86, -0.0] and
where, and what it ran on (the card's name on a GPU); exit status 1 if a bound fails anywhere, 0 otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: make pp3 and tools importable

from pp3.kernels.screen import SCREEN_ABS, SCREEN_FLOOR, SCREEN_REL, SCREENS, expf_screen, expf_screen_ex2
from pp3.reference.exponential import expf
from stats.audit_exp import CHUNK, FIRST, LAST, SPECIALS, Task, task_bits

TASK = 1 << 24
INTERPRETER_BLOCK = 1 << 20  # inputs per program of the interpreted kernel (its per-program cost is Python's)
INTERPRETER_TASK = 1 << 21  # inputs per step under the interpreter (the reference's fp64 temporaries stay small)
Worst = tuple[float, float, int]  # (largest relative difference, its z, inputs below the floor that break their rule)
F32 = npt.NDArray[np.float32]


def twin(screen: str) -> Callable[[F32], F32]:
    """The NumPy twin of a screen (looked up at each call, so that a planted one is seen)."""
    return expf_screen_ex2 if screen == "ex2" else expf_screen


def worst(z: F32, screened: F32, exact: F32) -> Worst:
    """(largest relative difference over z >= SCREEN_FLOOR, its z, inputs below the floor that break their rule:
    e~ and expf(z) in [0, SCREEN_ABS), which a NaN breaks)."""
    e = exact.astype(np.float64)
    s = screened.astype(np.float64)
    inside = z >= np.float32(SCREEN_FLOOR)
    rel = np.abs(s[inside] - e[inside]) / e[inside]
    broken = int((~((s[~inside] >= 0) & (s[~inside] < SCREEN_ABS)) | (e[~inside] >= SCREEN_ABS)).sum())
    if rel.size == 0:
        return 0.0, 0.0, broken
    i = int(np.argmax(rel))
    return float(rel[i]), float(z[inside][i]), broken


def merge(a: Worst, b: Worst) -> Worst:
    """The worse of two partial results, their broken inputs added."""
    rel, at = (b[0], b[1]) if b[0] > a[0] else (a[0], a[1])
    return rel, at, a[2] + b[2]


def audit_bits(bits: npt.NDArray[np.uint32], screens: Sequence[str] = SCREENS) -> dict[str, Worst]:
    """``worst`` of each screen's NumPy twin against the reference on these fp32 bit patterns, CHUNK at a time."""
    best = {s: (0.0, 0.0, 0) for s in screens}
    for lo in range(0, bits.size, CHUNK):
        z = bits[lo : lo + CHUNK].view(np.float32)
        exact = expf(z)
        for s in screens:
            best[s] = merge(best[s], worst(z, twin(s)(z), exact))
    return best


def _task(job: tuple[Task, tuple[str, ...]]) -> dict[str, Worst]:
    return audit_bits(task_bits(job[0]), job[1])


def _tasks(limit: int | None, size: int = TASK) -> list[Task]:
    step = 1 if limit is None else max(1, (LAST - FIRST + 1) // max(1, limit))
    return [(s, min(s + size * step, LAST + 1), step) for s in range(FIRST, LAST + 1, size * step)]


def device_worst(bits: npt.NDArray[np.uint32] | None, task: Task | None, dev: Any,
                 screens: Sequence[str] = SCREENS) -> dict[str, Worst]:
    """``worst`` of the kernels' screening exponentials on ``dev`` (of ``bits``, or of the patterns of ``task``
    generated on the device) against their expf there; under the interpreter (a CPU ``dev``) against the reference,
    with large programs."""
    import torch

    from pp3.kernels import accept, select

    if bits is not None:
        zb = torch.from_numpy(bits.view(np.int32).copy()).to(dev)
    else:
        assert task is not None
        zb = (torch.arange(task[0], task[1], task[2], dtype=torch.int64, device=dev) - (1 << 32) * (task[0] >= 1 << 31))
        zb = zb.to(torch.int32)
    z = zb.view(torch.float32)
    if dev.type == "cuda":
        exact = select.expf(z).double()
        block = 1024
    else:
        exact = torch.from_numpy(expf(z.numpy())).double()
        block = INTERPRETER_BLOCK
    inside = z >= SCREEN_FLOOR
    out = {}
    for s in screens:
        screened = accept.expf_screen(z, s, block=block).double()
        rel = ((screened - exact).abs() / exact)[inside]
        below = screened[~inside]
        broken = int((~((below >= 0) & (below < SCREEN_ABS)) | (exact[~inside] >= SCREEN_ABS)).sum())
        if rel.numel() == 0:
            out[s] = (0.0, 0.0, broken)
        else:
            i = int(rel.argmax())
            out[s] = (float(rel[i]), float(z[inside][i]), broken)
    return out


def report(results: dict[str, Worst], inputs: int, where: str, t0: float) -> int:
    print(f"inputs: {inputs:,} on {where}")
    ok = True
    for s, (rel, at, broken) in results.items():
        log = np.log2(rel) if rel else -np.inf
        print(f"screen {s}: largest relative difference over [{SCREEN_FLOOR}, -0.0]: {rel:.4g} = 2^{log:.2f} at "
              f"z = {at!r} (bound SCREEN_REL = 2^{np.log2(SCREEN_REL):.0f}); inputs below the floor that break "
              f"0 <= e~, expf < SCREEN_ABS: {broken}")
        passed = rel <= SCREEN_REL and broken == 0
        print(f"audit-screen {s}: " + ("PASS" if passed else "FAIL"))
        ok = ok and passed
    print(f"runtime: {time.perf_counter() - t0:.1f} s")
    print("audit-screen: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda", "interpreter"), default="cpu",
                    help="cpu: the NumPy twins against the reference; cuda: the kernels' code against their expf; "
                         "interpreter: the kernels' code under TRITON_INTERPRET=1 against the reference")
    ap.add_argument("--screen", choices=SCREENS, nargs="+", default=list(SCREENS), help="which screens (default both)")
    ap.add_argument("--limit", type=int, default=None, help="audit only ~N evenly spaced inputs (quick sample)")
    ap.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 2) - 2), help="processes (cpu)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    tasks = _tasks(args.limit, INTERPRETER_TASK if args.device == "interpreter" else TASK)
    screens = tuple(args.screen)
    specials = np.array(SPECIALS, dtype=np.uint32)
    inputs = specials.size + sum(len(range(*t)) for t in tasks)
    print(f"audit-screen: device {args.device}, screens {' '.join(screens)}, "
          f"{'full sweep' if args.limit is None else f'sample of ~{args.limit}'}, {len(tasks)} tasks", flush=True)
    if args.device == "cpu":
        where = f"the NumPy twins (NumPy {np.__version__}, {platform.machine()})"
        parts = [audit_bits(specials, screens)]
        with mp.Pool(args.workers) as pool:
            parts += pool.map(_task, [(t, screens) for t in tasks])
    else:
        if args.device == "interpreter":
            os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are defined (pp3.kernels imports them lazily)
        import torch

        if args.device == "cuda" and not torch.cuda.is_available():
            print("audit-screen --device cuda: no CUDA GPU here")
            return 2
        dev = torch.device("cuda" if args.device == "cuda" else "cpu")
        where = (torch.cuda.get_device_name(dev) if args.device == "cuda"
                 else f"the Triton interpreter (NumPy {np.__version__}, {platform.machine()})")
        parts = [device_worst(specials, None, dev, screens)] + [device_worst(None, t, dev, screens) for t in tasks]
    results: dict[str, Worst] = {}
    for part in parts:
        for s, w in part.items():
            results[s] = merge(results.get(s, (0.0, 0.0, 0)), w)
    return report(results, inputs, where, t0)


if __name__ == "__main__":
    sys.exit(main())
