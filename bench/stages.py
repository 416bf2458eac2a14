"""Where does a launch spend its time? Micro-kernels built from the selector's own jit helpers, one stage each.

Each stage runs in one program (as launch 2 does for a row at B = 1), 10 launches per CUDA graph, event-timed;
the empty kernel gives the node floor. Stage time ≈ (graph time - empty graph time) / 10.

    python -m bench.stages [--replays 200] [--out DIR]     (GPU only; make bench-stages)

Writes DIR/stages.json (default $OUT, else results/): the environment stamp and every stage's times.

Stages: ``load`` (the candidate load alone), ``top_k`` (load + the sort-free top-32 of NC candidates),
``top_k_rounds`` (load + the 32-round fallback), ``expf`` (32 exponentials), ``tickets`` (slot ranking by ID,
pairwise sum, floor counts, remainder), ``philox`` (one Philox4x64-10 block), ``finalize`` (the whole launch 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import triton
import triton.language as tl
from triton.language.random import philox_impl

from pp3.kernels import _select
from pp3.kernels._common import _expf, _tree
from pp3.kernels.config import EXACT
from pp3.reference import DOMAIN_PROPOSAL


@triton.jit
def _stage_load(keys_ptr: tl.tensor, out_ptr: tl.tensor, n: tl.tensor, NC: tl.constexpr) -> None:
    ci = tl.arange(0, NC)
    cand = tl.load(keys_ptr + ci, mask=ci < n, other=0)
    tl.store(out_ptr, tl.max(cand))


@triton.jit
def _stage_top_k(
    keys_ptr: tl.tensor,
    out_ptr: tl.tensor,
    n: tl.tensor,
    scratch_ptr: tl.tensor,
    NC: tl.constexpr,
    CAP: tl.constexpr,
    ROUNDS: tl.constexpr,
) -> None:
    ci = tl.arange(0, NC)
    cand = tl.load(keys_ptr + ci, mask=ci < n, other=0).to(tl.uint64, bitcast=True)
    if ROUNDS:
        top = _select._top_k_rounds(cand, out_ptr, 32, False)
    else:
        top = _select._top_k(cand, scratch_ptr, scratch_ptr, NC, 32, CAP, False)
    tl.store(out_ptr + tl.arange(0, 32), top.to(tl.int64, bitcast=True))


@triton.jit
def _stage_expf(z_ptr: tl.tensor, out_ptr: tl.tensor, c_ptr: tl.tensor) -> None:
    r = tl.arange(0, 32)
    tl.store(out_ptr + r, _expf(tl.load(z_ptr + r), c_ptr))


@triton.jit
def _stage_tickets(e_ptr: tl.tensor, ids_ptr: tl.tensor, out_ptr: tl.tensor) -> None:
    slot = tl.arange(0, 32)
    e = tl.load(e_ptr + slot)
    ids = tl.load(ids_ptr + slot)
    member = e > 0.0
    lower = (ids[None, :] < ids[:, None]) & member[None, :]
    slot_of = tl.where(member, tl.sum(lower.to(tl.int32), axis=1), slot)
    s_ids = _select._place(ids, slot_of, 32)
    s_e = _select._place(e.to(tl.int32, bitcast=True), slot_of, 32).to(tl.float32, bitcast=True)
    w = s_e.to(tl.float64)
    total = _tree(w, 32, 5)
    c = ((w * 16777216.0) / total).to(tl.int32)
    rem = 16777216 - tl.sum(c)
    tl.store(out_ptr + slot, c + tl.where(s_ids == tl.max(ids), rem, 0))


@triton.jit
def _stage_philox(seed_ptr: tl.tensor, out_ptr: tl.tensor, domain: tl.tensor) -> None:
    seed = tl.load(seed_ptr).to(tl.uint64, bitcast=True)
    rnd = tl.load(seed_ptr + 1).to(tl.uint64, bitcast=True)
    pos = tl.load(seed_ptr + 2).to(tl.uint64, bitcast=True)
    zero = tl.zeros((), tl.uint64)
    w0, _w1, _w2, _w3 = philox_impl(rnd, pos, zero, zero, seed, domain.to(tl.uint64, bitcast=True))
    tl.store(out_ptr, w0.to(tl.int64, bitcast=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.stages")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--nc", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--out", default=os.environ.get("OUT") or "results")
    args = ap.parse_args(argv)

    import torch

    from bench._floor import empty_kernel
    from pp3.kernels import _args, propose, select, tile_candidates
    from pp3.kernels.config import DEFAULT_LAUNCH
    from pp3.reference._constants import DEFAULT_TAU
    from pp3.testing.stamp import environment
    from pp3.testing.timing import time_graph

    if not torch.cuda.is_available():
        print("bench.stages: needs a CUDA GPU")
        return 0
    exact = EXACT
    dev = torch.device("cuda")
    consts = select.exp_constants(dev)
    out = torch.empty(64, dtype=torch.int64, device=dev)
    scratch = torch.empty(256, dtype=torch.int64, device=dev)
    z = -torch.rand(32, device=dev) * 20
    e = torch.rand(32, device=dev)
    ids = torch.randperm(1000, device=dev)[:32].to(torch.int32)
    keys3 = torch.tensor([123, 456, 789], dtype=torch.int64, device=dev)
    results: dict[str, Any] = {}

    def timed(name: str, launch: Any) -> None:
        def build(_s: int) -> Any:
            def step() -> None:
                for _ in range(10):
                    launch()

            return step

        t = time_graph(build, 1, args.replays)["median_us"]
        results[name] = {"graph_us": t, "per_launch_us": (t - results["empty"]["graph_us"]) / 10}
        print(f"{name:<40} {t:8.2f} µs per 10 launches, {results[name]['per_launch_us']:6.2f} µs each", flush=True)

    results["empty"] = {
        "graph_us": time_graph(lambda _s: lambda: [empty_kernel[(1,)](out) for _ in range(10)], 1, args.replays)[
            "median_us"
        ]
    }
    print(f"{'empty':<40} {results['empty']['graph_us']:8.2f} µs per 10 launches", flush=True)
    for w in args.warps:
        for nc in args.nc:
            x = torch.randn(1, nc * 128, device=dev)
            cand = tile_candidates(x, tile=4096).keys.reshape(-1)[:nc].contiguous()
            timed(
                f"load NC={nc} w={w}",
                lambda c=cand, n=nc, ww=w: _stage_load[(1,)](c, out, n, NC=n, num_warps=ww, **exact),
            )
            timed(
                f"top_k NC={nc} w={w}",
                lambda c=cand, n=nc, ww=w: _stage_top_k[(1,)](
                    c, out, n, scratch, NC=n, CAP=128, ROUNDS=False, num_warps=ww, **exact
                ),
            )
            timed(
                f"top_k_rounds NC={nc} w={w}",
                lambda c=cand, n=nc, ww=w: _stage_top_k[(1,)](
                    c, out, n, scratch, NC=n, CAP=128, ROUNDS=True, num_warps=ww, **exact
                ),
            )
        timed(f"expf x32 w={w}", lambda ww=w: _stage_expf[(1,)](z, out, consts, num_warps=ww, **exact))
        timed(f"tickets w={w}", lambda ww=w: _stage_tickets[(1,)](e, ids, out, num_warps=ww, **exact))
        timed(f"philox w={w}", lambda ww=w: _stage_philox[(1,)](keys3, out, DOMAIN_PROPOSAL, num_warps=ww, **exact))
    x = torch.randn(1, 163840, device=dev)
    cands = tile_candidates(x)
    temp = torch.ones(1, device=dev)
    timed("launch 1 (V=163840, auto tile)", lambda: tile_candidates(x))
    row_keys = _args.row_keys(temp, keys3[:1], keys3[1:2], keys3[2:3], 1, dev)
    fin_out = select._proposal_out(None, 1, dev)
    # Launch 2 as propose runs it, on launch 1's candidates (the public finalize adds its candidates check).
    timed("launch 2 (V=163840)", lambda: select._launch_finalize(cands, row_keys, DEFAULT_TAU, DEFAULT_LAUNCH, fin_out))
    timed("propose (V=163840)", lambda: propose(x, temp, keys3[:1], keys3[1:2], keys3[2:3]))
    path = Path(args.out) / "stages.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"environment": environment(), "replays": args.replays, "stages": results}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
