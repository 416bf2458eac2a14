"""Exhaustive audit of the verifier's screening exponential (``pp3.kernels.screen``): for every fp32 z in [-86, -0.0]
|e~ - expf(z)| <= SCREEN_REL expf(z), and for every z below, e~ and expf(z) are in [0, SCREEN_ABS).

Run: python stats/audit_screen.py               (make audit-screen; the NumPy twin against the reference, every input)
     python stats/audit_screen.py --limit N     (~N evenly spaced inputs plus the specials, seconds)
     python stats/audit_screen.py --device cuda (make screen-gpu; the kernels' _expf_screen against their _expf, which
                                                 stats/audit_exp.py --device cuda proves equal to the reference)

Inputs: every negative fp32 bit pattern from 0x80000000 (-0.0) to 0xC2D00000 (-104.0), plus +0.0, -inf and a few
z < -104 (the reference is +0.0 there). Prints the largest relative difference over [-86, -0.0] and where; exit
status 1 if the bound fails anywhere, 0 otherwise.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: make pp3 and tools importable

from pp3.kernels.screen import SCREEN_ABS, SCREEN_FLOOR, SCREEN_REL, expf_screen
from pp3.reference.exponential import expf
from stats.audit_exp import CHUNK, FIRST, LAST, SPECIALS, Task, task_bits

TASK = 1 << 24


def worst(z: npt.NDArray[np.float32], screened: npt.NDArray[np.float32],
          exact: npt.NDArray[np.float32]) -> tuple[float, float, int]:
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


def audit_bits(bits: npt.NDArray[np.uint32]) -> tuple[float, float, int]:
    """``worst`` of the NumPy twin against the reference on these fp32 bit patterns, CHUNK at a time."""
    best = (0.0, 0.0, 0)
    for lo in range(0, bits.size, CHUNK):
        z = bits[lo : lo + CHUNK].view(np.float32)
        rel, at, broken = worst(z, expf_screen(z), expf(z))
        best = (max(best[0], rel), at if rel > best[0] else best[1], best[2] + broken)
    return best


def _task(task: Task) -> tuple[float, float, int]:
    return audit_bits(task_bits(task))


def _tasks(limit: int | None) -> list[Task]:
    step = 1 if limit is None else max(1, (LAST - FIRST + 1) // max(1, limit))
    return [(s, min(s + TASK * step, LAST + 1), step) for s in range(FIRST, LAST + 1, TASK * step)]


def device_worst(bits: npt.NDArray[np.uint32] | None, task: Task | None, dev: Any) -> tuple[float, float, int]:
    """``worst`` of the kernels' screening exponential against their expf on ``dev``: of ``bits``, or of the
    patterns of ``task`` generated on the device."""
    import torch

    from pp3.kernels import accept, select

    if bits is not None:
        zb = torch.from_numpy(bits.view(np.int32).copy()).to(dev)
    else:
        assert task is not None
        zb = (torch.arange(task[0], task[1], task[2], dtype=torch.int64, device=dev) - (1 << 32) * (task[0] >= 1 << 31))
        zb = zb.to(torch.int32)
    z = zb.view(torch.float32)
    exact = select.expf(z).double()
    screened = accept.expf_screen(z).double()
    inside = z >= SCREEN_FLOOR
    rel = ((screened - exact).abs() / exact)[inside]
    below = screened[~inside]
    broken = int((~((below >= 0) & (below < SCREEN_ABS)) | (exact[~inside] >= SCREEN_ABS)).sum())
    if rel.numel() == 0:
        return 0.0, 0.0, broken
    i = int(rel.argmax())
    return float(rel[i]), float(z[inside][i]), broken


def report(rel: float, at: float, broken: int, inputs: int, t0: float) -> int:
    print(f"inputs: {inputs:,}")
    log = np.log2(rel) if rel else -np.inf
    print(f"largest relative difference over [{SCREEN_FLOOR}, -0.0]: {rel:.4g} = 2^{log:.2f} at z = {at!r} "
          f"(bound SCREEN_REL = 2^{np.log2(SCREEN_REL):.0f})")
    print(f"inputs below the floor that break 0 <= e~, expf < SCREEN_ABS: {broken}")
    print(f"runtime: {time.perf_counter() - t0:.1f} s")
    ok = rel <= SCREEN_REL and broken == 0
    print("audit-screen: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu: the NumPy twin against the reference; cuda: the kernels' code against their expf")
    ap.add_argument("--limit", type=int, default=None, help="audit only ~N evenly spaced inputs (quick sample)")
    ap.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 2) - 2), help="processes (cpu)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    tasks = _tasks(args.limit)
    specials = np.array(SPECIALS, dtype=np.uint32)
    inputs = specials.size + sum(len(range(*t)) for t in tasks)
    print(f"audit-screen: device {args.device}, {'full sweep' if args.limit is None else f'sample of ~{args.limit}'}, "
          f"{len(tasks)} tasks", flush=True)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("audit-screen --device cuda: no CUDA GPU here")
            return 2
        dev = torch.device("cuda")
        parts = [device_worst(specials, None, dev)] + [device_worst(None, t, dev) for t in tasks]
    else:
        parts = [audit_bits(specials)]
        with mp.Pool(args.workers) as pool:
            parts += pool.map(_task, tasks)
    rel, at, _ = max(parts)
    return report(rel, at, sum(p[2] for p in parts), inputs, t0)


if __name__ == "__main__":
    sys.exit(main())
