"""Exhaustive device audit of SPEC.md §6: every fp32 z in [-104, -0.0] (plus +0.0, -inf and z < -104 samples)
through the selector's own device exponential (``pp3.kernels.expf``) against the NumPy reference ``expf``.

Needs a CUDA GPU. The reference runs in a process pool, chunk by chunk, while the GPU computes the next chunk.
Prints counts and exits 1 on any difference (with the first few inputs in hex).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import sys
import time

import numpy as np

LO = 0x80000000  # -0.0
HI = 0xC2D00000  # -104.0
CHUNK = 1 << 25


def _reference_chunk(start: int) -> tuple[int, np.ndarray]:
    from pp3.reference import expf

    n = min(CHUNK, HI + 1 - start)
    z = (np.arange(n, dtype=np.uint64) + np.uint64(start)).astype(np.uint32).view(np.float32)
    return start, expf(z).view(np.uint32)


def main() -> int:
    import torch

    from pp3.kernels import expf as dev_expf

    starts = list(range(LO, HI + 1, CHUNK))
    total = HI + 1 - LO
    diffs = 0
    first: list[str] = []
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max(1, (os.cpu_count() or 2) - 2), mp_context=ctx) as pool:
        for i, (start, want) in enumerate(pool.map(_reference_chunk, starts)):
            n = want.shape[0]
            zb = torch.arange(start, start + n, dtype=torch.int64, device="cuda").to(torch.int32)
            got = dev_expf(zb.view(torch.float32)).view(torch.int32).cpu().numpy().view(np.uint32)
            bad = np.flatnonzero(got != want)
            diffs += bad.size
            for j in bad[: max(0, 5 - len(first))]:
                first.append(f"z=0x{start + int(j):08x} device=0x{int(got[j]):08x} reference=0x{int(want[j]):08x}")
            if i % 8 == 0:
                print(
                    f"  {min(total, (i + 1) * CHUNK)}/{total} inputs, {diffs} differ, {time.perf_counter() - t0:.0f} s",
                    flush=True,
                )
    # Boundaries outside the sweep: +0.0, -inf, a sample below -104 (all must give the reference's bits).
    from pp3.reference import expf

    extra = np.array([0.0, -np.inf, -104.00001, -150.0, -3.0e38, -1.0e10], dtype=np.float32)
    got = dev_expf(torch.from_numpy(extra).cuda()).cpu().numpy().view(np.uint32)
    want = expf(extra).view(np.uint32)
    diffs += int((got != want).sum())
    print(f"expf device audit: {total + extra.size} inputs, {diffs} differ, {time.perf_counter() - t0:.0f} s")
    for line in first:
        print("  " + line)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
