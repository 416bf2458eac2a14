"""Exhaustive audits of SPEC.md §6's exponential: the reference against the correctly rounded binary32 e^z
(``--device cpu``, the default), or the kernels' device exponential against the reference's bits (``--device cuda``).

Run: python stats/audit_exp.py               (make audit-exp; every fp32 z in [-104, -0.0] plus specials, minutes)
     python stats/audit_exp.py --limit N     (N evenly spaced inputs of that range plus the specials, seconds)
     python stats/audit_exp.py --device cuda (make expf-gpu; pp3.kernels.expf on the same inputs, ~20 s on an H200)

Inputs: every negative fp32 bit pattern from 0x80000000 (-0.0) to 0xC2D00000 (-104.0) inclusive, plus +0.0, -inf and
a few z < -104.

``--device cpu`` evaluates each with the reference (E1-E9) and with an oracle, fl32(exp(fl64(z))) with NumPy's fp64
exp (--oracle libm uses Python's math.exp, i.e. the C library's, ~8x slower). An input is referred to mpmath (200
bits) when the oracle's fp64 value lies within 8 fp64 ulps of a binary32 rounding boundary or when the oracle and the
reference disagree; mpmath then decides. An fp64 exp that errs by less than ~7 ulps cannot hide a misrounded input:
if the reference's y2 lies on the wrong side of a boundary, e^z lies within ~1 fp64 ulp of it.

It also checks that ``pp3.audit.fast_accept.expf`` (the bulk audit's same-bits exponential: NumPy's fp64 exp with a
rounding test) returns the reference's bits on every input.

``--device cuda`` runs ``pp3.kernels.expf`` on the GPU while a process pool computes the reference's bits of the next
inputs, and compares bit for bit.

Exit status 1 if any input is misrounded or fast_accept's expf differs (cpu), or the device's differs from the
reference (cuda), the first few printed in hex; 0 otherwise.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: make pp3 and tools importable

from pp3.audit import fast_accept
from pp3.reference.exponential import expf
from tests.oracles.expf import boundary_distance, cr_expf, exp_mp

FIRST = 0x80000000  # -0.0
LAST = 0xC2D00000  # -104.0
REFER_ULPS = 8.0  # fp64 ulps from a binary32 rounding boundary that send an input to mpmath
TASK = 1 << 24  # bit patterns per task handed to a worker
CHUNK = 1 << 16  # patterns per vectorised step (keeps the temporaries in cache)
SPECIALS = (  # fp32 bit patterns outside the contiguous sweep
    0x00000000,  # +0.0
    0xFF800000,  # -inf
    0xC2D00001,  # the fp32 just below -104
    0xC2D10000,  # -104.5
    0xC2DC0000,  # -110
    0xC3480000,  # -200
    0xCF000000,  # -2^31
    0xFF7FFFFF,  # -FLT_MAX
)


@dataclass
class Referred:
    """One input decided by mpmath."""

    zbits: int
    ref_bits: int
    oracle_bits: int
    cr_bits: int
    exact_ulps: float  # distance of the exact e^z to the nearest binary32 rounding boundary, in fp64 ulps


@dataclass
class Tally:
    inputs: int = 0
    disagreements: int = 0  # reference != oracle before mpmath
    fast_differs: list[int] = field(default_factory=list)  # inputs where pp3.audit.fast_accept.expf != the reference
    referred: list[Referred] = field(default_factory=list)


def _bits32(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def _exact_boundary_ulps(z: float) -> float:
    """Distance of the exact e^z to the nearest binary32 rounding boundary, in fp64 ulps of e^z (mpmath)."""
    import mpmath

    v = exp_mp(z)
    if v == 0:
        return math.inf
    with mpmath.workprec(200):
        top = int(v.exp) + int(v.man).bit_length() - 1
        q = max(top, -126) - 23
        s = mpmath.ldexp(v, -q)
        d32 = abs(s - mpmath.floor(s) - mpmath.mpf(0.5))
        return float(mpmath.ldexp(d32, q - (top + 1 - 53)))


def _oracle(x: npt.NDArray[np.float64], kind: str) -> npt.NDArray[np.float64]:
    if kind == "libm":
        return np.asarray(np.frompyfunc(math.exp, 1, 1)(x), dtype=np.float64)
    return np.exp(x)


def audit_bits(bits: npt.NDArray[np.uint32], oracle: str) -> Tally:
    """Audit the fp32 inputs with these bit patterns, CHUNK at a time."""
    tally = Tally()
    for lo in range(0, bits.size, CHUNK):
        b = bits[lo : lo + CHUNK]
        z = b.view(np.float32)
        ref = expf(z)
        x = z.astype(np.float64)
        with np.errstate(all="ignore"):
            y = _oracle(x, oracle)
            orc = y.astype(np.float32)
            _, d64 = boundary_distance(y)
        disagree = ref.view(np.uint32) != orc.view(np.uint32)
        tally.fast_differs += b[fast_accept.expf(z).view(np.uint32) != ref.view(np.uint32)].tolist()
        refer = np.flatnonzero(disagree | (d64 <= REFER_ULPS))
        tally.inputs += b.size
        tally.disagreements += int(disagree.sum())
        for i in refer.tolist():
            zf = float(x[i])
            tally.referred.append(
                Referred(
                    zbits=int(b[i]),
                    ref_bits=int(ref.view(np.uint32)[i]),
                    oracle_bits=int(orc.view(np.uint32)[i]),
                    cr_bits=_bits32(cr_expf(zf)),
                    exact_ulps=_exact_boundary_ulps(zf),
                )
            )
    return tally


Task = tuple[int, int, int]  # start, stop, step of a range of fp32 bit patterns


def task_bits(task: Task) -> npt.NDArray[np.uint32]:
    return np.arange(*task, dtype=np.uint64).astype(np.uint32)


def _task(args: tuple[Task, str]) -> Tally:
    task, oracle = args
    return audit_bits(task_bits(task), oracle)


def _tasks(limit: int | None) -> list[Task]:
    """The sweep in tasks of at most TASK patterns; with ``limit``, ~limit evenly spaced patterns."""
    step = 1 if limit is None else max(1, (LAST - FIRST + 1) // max(1, limit))
    return [(s, min(s + TASK * step, LAST + 1), step) for s in range(FIRST, LAST + 1, TASK * step)]


# ------------------------------------------------------------------------------------------------ device audit


def reference_bits(bits: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """The reference's expf of the fp32 inputs with these bit patterns, as bits."""
    parts = [expf(bits[lo : lo + CHUNK].view(np.float32)).view(np.uint32) for lo in range(0, bits.size, CHUNK)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


def _reference_task(task: Task) -> npt.NDArray[np.uint32]:
    return reference_bits(task_bits(task))


def device_bits(bits: npt.NDArray[np.uint32], device: Any) -> npt.NDArray[np.uint32]:
    """``pp3.kernels.expf`` on ``device`` of the fp32 inputs with these bit patterns, as bits."""
    import torch

    from pp3.kernels import expf as kernel_expf

    z = torch.from_numpy(bits.view(np.int32).copy()).to(device).view(torch.float32)
    return np.asarray(kernel_expf(z).view(torch.int32).cpu().numpy().view(np.uint32))


def differences(
    bits: npt.NDArray[np.uint32], got: npt.NDArray[np.uint32], want: npt.NDArray[np.uint32], first: int = 10
) -> tuple[int, list[tuple[int, int, int]]]:
    """How many inputs differ, and (z, got, want) bits of the first ``first`` of them."""
    bad = np.flatnonzero(got != want)
    return int(bad.size), [(int(bits[i]), int(got[i]), int(want[i])) for i in bad[:first]]


def device_audit(limit: int | None, workers: int, dev: Any) -> int:
    """``--device cuda``: pp3.kernels.expf on ``dev`` against the reference's bits, every input of the sweep."""
    t0 = time.perf_counter()
    tasks = _tasks(limit)
    print(f"audit-exp: device {dev}, {'full sweep' if limit is None else f'sample of ~{limit}'}, {len(tasks)} tasks, "
          f"{workers} reference workers", flush=True)
    specials = np.array(SPECIALS, dtype=np.uint32)
    count, first = differences(specials, device_bits(specials, dev), reference_bits(specials))
    inputs = specials.size
    # spawn, not fork: this process may hold a CUDA context.
    with mp.get_context("spawn").Pool(workers) as pool:
        for done, (task, want) in enumerate(zip(tasks, pool.imap(_reference_task, tasks), strict=True), start=1):
            bits = task_bits(task)
            n, some = differences(bits, device_bits(bits, dev), want)
            count, inputs = count + n, inputs + bits.size
            first += some[: max(0, 10 - len(first))]
            print(f"  [{done:3d}/{len(tasks)}] inputs {inputs:>13,}  differ {count}  {time.perf_counter() - t0:7.1f} s",
                  flush=True)
    print(f"inputs: {inputs:,}")
    print(f"device expf differs from the reference: {count:,}")
    print(f"runtime: {time.perf_counter() - t0:.1f} s")
    for z, g, w in first:
        print(f"DIFFERS z = {_fmt(z)}: device 0x{g:08X}, reference 0x{w:08X}")
    return 1 if count else 0


def _fmt(bits: int) -> str:
    v = float(np.array([bits], dtype=np.uint32).view(np.float32)[0])
    return f"0x{bits:08X} ({v!r})"


def write_worst(path: Path, referred: list[Referred]) -> None:
    """The referred inputs, closest to a boundary first: one curated hard case per line (read by test_expf)."""
    lines = [
        "# Hardest fp32 inputs of expf (SPEC.md §6): every z in [-104, -0.0] whose fp64 e^z (NumPy) lies within",
        f"# {REFER_ULPS:g} fp64 ulps of a binary32 rounding boundary.",
        "# Written by stats/audit_exp.py --worst-out; do not edit.",
        "# z_bits  correctly_rounded_bits  exact distance of e^z to the boundary (fp64 ulps)  # z",
    ]
    for r in sorted(referred, key=lambda r: (r.exact_ulps, r.zbits)):
        if r.exact_ulps > REFER_ULPS:
            continue  # referred only because the oracle disagreed; not a hard case
        z = float(np.array([r.zbits], dtype=np.uint32).view(np.float32)[0])
        lines.append(f"{r.zbits:08x} {r.cr_bits:08x} {r.exact_ulps:.4f}  # z = {z!r}")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu: the reference against correct rounding; cuda: pp3.kernels.expf against the reference")
    ap.add_argument("--limit", type=int, default=None, help="audit only ~N evenly spaced inputs (quick sample)")
    ap.add_argument("--workers", type=int, default=max(2, (os.cpu_count() or 2) - 2),
                    help="processes (default: the CPU count less 2, at least 2)")
    ap.add_argument("--oracle", choices=("numpy", "libm"), default="numpy", help="fp64 exp used as the first oracle")
    ap.add_argument("--worst-out", type=Path, default=None, help="write the hard cases (referred inputs) here")
    args = ap.parse_args(argv)
    if args.device == "cuda":
        if args.worst_out is not None or args.oracle != "numpy":
            ap.error("--worst-out and --oracle belong to --device cpu")
        import torch

        if not torch.cuda.is_available():
            print("audit-exp --device cuda: no CUDA GPU here")
            return 2
        return device_audit(args.limit, args.workers, torch.device("cuda"))

    t0 = time.perf_counter()
    tasks = _tasks(args.limit)
    total = Tally()
    mode = "full sweep" if args.limit is None else f"sample of ~{args.limit}"
    print(f"audit-exp: {mode}, fp32 z in [-104, -0.0] (0x{FIRST:08X}..0x{LAST:08X}) + {len(SPECIALS)} specials, "
          f"{len(tasks)} tasks, {args.workers} workers, oracle {args.oracle}", flush=True)

    def absorb(t: Tally) -> None:
        total.inputs += t.inputs
        total.disagreements += t.disagreements
        total.referred.extend(t.referred)
        total.fast_differs.extend(t.fast_differs)

    absorb(audit_bits(np.array(SPECIALS, dtype=np.uint32), args.oracle))
    with mp.Pool(args.workers) as pool:
        for done, t in enumerate(pool.imap_unordered(_task, [(t, args.oracle) for t in tasks]), start=1):
            absorb(t)
            mis = sum(r.ref_bits != r.cr_bits for r in total.referred)
            print(f"  [{done:3d}/{len(tasks)}] inputs {total.inputs:>13,}  referred {len(total.referred):>6,}  "
                  f"misrounded {mis}  {time.perf_counter() - t0:7.1f} s", flush=True)

    mis_list = sorted((r for r in total.referred if r.ref_bits != r.cr_bits), key=lambda r: r.zbits)
    oracle_wrong = sum(r.oracle_bits != r.cr_bits for r in total.referred)
    elapsed = time.perf_counter() - t0
    print(f"inputs: {total.inputs:,}")
    print(f"referred to mpmath: {len(total.referred):,} ({total.disagreements:,} because reference != oracle)")
    print(f"oracle (fl32 of fp64 exp) misrounded: {oracle_wrong:,}")
    print(f"reference misrounded: {len(mis_list):,}")
    print(f"pp3.audit.fast_accept.expf differs from the reference: {len(total.fast_differs):,}")
    if total.referred:
        h = min(total.referred, key=lambda r: r.exact_ulps)
        print(f"hardest input: z = {_fmt(h.zbits)}, e^z lies {h.exact_ulps:.4f} fp64 ulps from a binary32 boundary, "
              f"expf = 0x{h.cr_bits:08X}")
    print(f"runtime: {elapsed:.1f} s")
    if args.worst_out is not None:
        write_worst(args.worst_out, total.referred)
        print(f"wrote {args.worst_out}")
    for r in mis_list[:10]:
        print(f"MISROUNDED z = {_fmt(r.zbits)}: expf = 0x{r.ref_bits:08X}, correctly rounded = 0x{r.cr_bits:08X}")
    for zb in sorted(total.fast_differs)[:10]:
        print(f"FAST EXPF DIFFERS z = {_fmt(zb)}")
    return 1 if mis_list or total.fast_differs else 0


if __name__ == "__main__":
    sys.exit(main())
