"""``make bench-drafter``: the depth-5 draft loop captured in one CUDA graph at V = 163840 (greedy and sampled, 1 and 2
vocabulary shards, B = 1, 8, 32), and the Triton verifier's bit parity with the reference and its latency (one CUDA
graph) at V = 163840. Writes DIR/bench_drafter.json (default $OUT, else results/), stamped.

    python -m bench.drafter [--out DIR]     (GPU only; admits sampled drafting itself, DSPARK_SAMPLED_TOP32=1)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pp3.drafter import SAMPLED_ENV, TPDrafter
from pp3.kernels import verify as verify_dev
from pp3.reference import verify as verify_ref
from pp3.testing.call import to_numpy
from pp3.testing.compare import row_mismatch
from pp3.testing.markov import MarkovDrafter
from pp3.testing.stamp import environment
from pp3.testing.timing import cuda_graph, time_calls

V, RANK, DEPTH = 163840, 64, 5
FIELDS = ("tokens", "status", "ids", "tickets")


def draft_latency() -> list[dict[str, Any]]:
    rows = []
    for shards in (1, 2):
        drafter = TPDrafter(MarkovDrafter.random(V, RANK, seed=1, shards=shards, gain=2, device="cuda"), DEPTH)
        for b in (1, 8, 32):
            ctx = torch.randint(0, V, (b, 1), device="cuda")
            seed = torch.arange(b, dtype=torch.int64, device="cuda")
            rnd = torch.zeros(b, dtype=torch.int64, device="cuda")
            pos = torch.ones(b, dtype=torch.int64, device="cuda")
            temp = torch.ones(b, dtype=torch.float32, device="cuda")

            def greedy(d: TPDrafter = drafter, c: torch.Tensor = ctx) -> Any:
                return d.draft(c)

            def sampled(
                d: TPDrafter = drafter,
                c: torch.Tensor = ctx,
                t: torch.Tensor = temp,
                s: torch.Tensor = seed,
                r: torch.Tensor = rnd,
                p: torch.Tensor = pos,
            ) -> Any:
                return d.draft_sampled(c, t, s, r, p)

            modes: dict[str, Callable[[], Any]] = {"greedy": greedy, "sampled": sampled}
            for mode, fn in modes.items():
                stats = time_calls(fn, 200)
                _, graphed = cuda_graph(fn)
                eager = fn()
                same = all(torch.equal(getattr(graphed, f), getattr(eager, f)) for f in FIELDS)
                rows.append({"draft": mode, "V": V, "depth": DEPTH, "shards": shards, "B": b, **stats,
                             "how": "one CUDA graph replay, CUDA events", "graph_equals_eager": same})
                print(rows[-1], flush=True)
    return rows


def verifier() -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    model = MarkovDrafter.random(V, RANK, seed=1, shards=2, gain=2, device="cuda")
    drafter = TPDrafter(model, DEPTH, tau=1.0)
    delta = torch.from_numpy(rng.integers(-1, 2, size=tuple(model.embedding.shape)) / 32).to(model.embedding)
    target = MarkovDrafter(model.embedding + delta, torch.cat(model.shards, 1))
    rows = []
    for b, temp in ((4, 1.0), (4, 0.0), (4, 2.0), (32, 1.0), (1, 1.0), (64, 1.0)):
        ctx = torch.randint(0, V, (b, 1), device="cuda")
        seed = torch.arange(b, dtype=torch.int64, device="cuda") + 7
        draft = drafter.draft_sampled(ctx, temp, seed, 0, 1)
        before = torch.cat([ctx, draft.tokens.clamp_min(0).long()], 1)
        logits = torch.stack([torch.cat(target(before[:, j : j + 1]), 1) for j in range(DEPTH + 1)], 1).contiguous()
        # Device-tensor keys: a call with Python scalars copies them host-to-device, which a CUDA graph cannot hold.
        temps = torch.full((b,), temp, dtype=torch.float32, device="cuda")
        zeros, ones = torch.zeros_like(seed), torch.ones_like(seed)
        args = (logits, temps, draft.tokens, draft.status, draft.ids, draft.tickets, seed, zeros, ones)
        t0 = time.perf_counter()
        got = verify_dev(*args)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        want = verify_ref(logits.cpu().numpy(), np.float32(temp), **draft.numpy(),
                          seed=seed.cpu().numpy().view(np.uint64), round=0, position=1)
        parity = not row_mismatch(to_numpy(got), want).any()

        def run(a: tuple[Any, ...] = args) -> Any:
            return verify_dev(*a)

        def read(x: torch.Tensor = logits) -> Any:  # the floor: one read-only pass over the same target logits
            return x.amax(dim=-1)

        timing = time_calls(run, 50)
        rows.append({"verify": "Triton, six launches, one CUDA graph", "V": V, "depth": DEPTH, "B": b, "T": temp,
                     "parity": parity, "accepted": want.accepted.tolist()[:8], **timing,
                     "read_only_pass": time_calls(read, 50), "first_call_s": round(first, 1)})
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.drafter")
    ap.add_argument("--out", default=os.environ.get("OUT") or "results")
    ap.add_argument("--verify-only", action="store_true", help="skip the draft-loop latency")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.drafter: needs a CUDA GPU")
        return 0
    os.environ[SAMPLED_ENV] = "1"
    doc = {"environment": environment(), "draft": [] if args.verify_only else draft_latency(), "verify": verifier()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_drafter.json").write_text(json.dumps(doc, indent=1))
    print(f"wrote {out / 'bench_drafter.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
