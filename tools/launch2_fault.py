"""Bisect the illegal memory access of ``bench`` "pp3 launch 2 only" at V=163840, fp32, B=64, depth 10.

Seen on the H200 on 2026-11-30 with PDL on (second session) and, in the third session, with PDL off, under
CUDA_LAUNCH_BLOCKING=1 too; compute-sanitizer memcheck reported 0 errors on the same run (it only sees the caching
allocator's segments, not single tensors). Each mode runs in its own process (a fault poisons the context):

    python tools/launch2_fault.py MODE [--b 64] [--depth 10] [--baseline DIR]

MODE: ``eager`` (launch 1 then launch 2 per input, synchronised after each; run it under compute-sanitizer with
PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that every tensor is its own allocation), ``graph`` (bench's own time_graph
on the "launch 2 only" factory), ``graph-seq`` (the bench's sequence: "launch 1 only" then "launch 2 only"),
``uaf-old`` (the harness before the fix: each set's step, which owns the candidates its graph reads, is dropped
after capture; then the allocator's free blocks go back to the driver and the graphs replay: expected to fault).
Prints one line per step; the last line names the step that faulted.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch

import bench.__main__ as bench_main
from pp3.kernels import finalize, propose, tile_candidates


def step(name: str) -> None:
    torch.cuda.synchronize()
    print(f"ok: {name}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("eager", "graph", "graph-seq", "uaf-old"))
    ap.add_argument("--b", type=int, default=64)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--v", type=int, default=163840)
    args = ap.parse_args()
    b, depth, v = args.b, args.depth, args.v
    n_sets = max(2, min(16, (64 << 20) // (b * v * 4 * depth) + 1))
    xs_sets = bench_main.make_inputs(n_sets, depth, b, v, torch.float32, seed=1000 * b + depth)
    keys: dict[str, Any] = {
        "temp": torch.ones(b, device="cuda"),
        "seed": torch.arange(b, device="cuda", dtype=torch.int64) * 7919 + 1,
        "round": torch.full((b,), 3, device="cuda", dtype=torch.int64),
        "pos": [torch.full((b,), 100 + d, device="cuda", dtype=torch.int64) for d in range(depth)],
    }
    step(f"inputs: {n_sets} sets of {depth} x [{b}, {v}]")
    if args.mode == "eager":
        for s, xs in enumerate(xs_sets):
            for d, x in enumerate(xs):
                c = tile_candidates(x)
                step(f"set {s} depth {d}: launch 1")
                finalize(c, keys["temp"], keys["seed"], keys["round"], keys["pos"][d])
                step(f"set {s} depth {d}: launch 2")
                propose(x, keys["temp"], keys["seed"], keys["round"], keys["pos"][d])
                step(f"set {s} depth {d}: propose")
        return 0
    impls = bench_main.implementations([None])
    if args.mode == "uaf-old":
        graphs = []
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        for s in range(n_sets):
            run = impls["pp3 launch 2 only"](xs_sets[s], keys)  # owns the candidates; dropped below, as before
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    run()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                run()
            graphs.append(g)
        del run
        step("captured; steps dropped")
        torch.cuda.empty_cache()
        for i in range(20):
            graphs[i % n_sets].replay()
        step("replayed 20 times")
        return 0
    names = ["pp3 launch 1 only", "pp3 launch 2 only"] if args.mode == "graph-seq" else ["pp3 launch 2 only"]
    for name in names:
        factory = impls[name]

        def build(s: int, f: Any = factory) -> Any:
            return f(xs_sets[s], keys)

        t = bench_main.time_graph(build, n_sets, 50)
        step(f"{name}: median {t['median_us']:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
