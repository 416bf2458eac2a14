"""Static size of the selector's kernels for sm_90, built on this (CPU) machine: SASS instructions and barriers.

On the H200 the selector is latency-bound (bench/NOTES.md): a launch costs about 2 ns per SASS instruction on its
straight-line fast path, so this count is the cheapest proxy for speed, with no device time spent.

    python tools/sass_count.py [--warps 8 8] [--tile 4096] [--nc 2048]     (defaults: pp3.kernels.config)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from pp3.kernels import _common, _select
from pp3.kernels.config import DEFAULT_LAUNCH, EXACT, FINALIZE_CAP, MAX_TILE, tile_cap
from pp3.kernels.ptx_audit import FINALIZE_SIG, TILE_SIG

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


def sass_stats(fn: object, sig: dict[str, str], consts: dict[str, object], warps: int) -> dict[str, int]:
    src = ASTSource(fn, sig | dict.fromkeys(consts, "constexpr"), constexprs=consts)
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={**EXACT, "num_warps": warps})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        sass = subprocess.run([str(CUOBJDUMP), "--dump-sass", f.name], capture_output=True, text=True).stdout
    ins = [ln for ln in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,6}\*/", ln)]
    return {
        "instructions": len(ins),
        "barriers": sum(" BAR" in ln for ln in ins),
        "shared_bytes": int(k.metadata.shared),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warps", type=int, nargs=2, default=list(DEFAULT_LAUNCH.warps))
    ap.add_argument("--tile", type=int, default=MAX_TILE)
    ap.add_argument("--nc", type=int, default=2048)
    a = ap.parse_args()
    t = sass_stats(
        _select._tile_candidates_kernel,
        TILE_SIG,
        {"KIND": _common.KIND_F32.value, "TILE": a.tile, "K": 32, "CAP": tile_cap(a.tile), "PDL": True},
        a.warps[0],
    )
    f = sass_stats(
        _select._finalize_kernel,
        FINALIZE_SIG,
        {"NC": a.nc, "NT": a.nc // 32, "K": 32, "CAP": FINALIZE_CAP, "PDL": True},
        a.warps[1],
    )
    print(f"launch 1 (TILE {a.tile}, {a.warps[0]} warps): {t}")
    print(f"launch 2 (NC {a.nc}, {a.warps[1]} warps): {f}")


if __name__ == "__main__":
    main()
