"""``make bench-drafter``: the depth-5 draft loop captured in one CUDA graph at V = 163840 (greedy and sampled, 1 and 2
vocabulary shards, B = 1, 8, 32); the Triton verifier's bit parity with the reference and its latency (one CUDA
graph) at V = 163840, fp32 and bf16, depths 5 and 1, beside a read-only pass and FlashInfer's softmax +
chain_speculative_sampling in the same process; and one speculative step (draft + verify) in one CUDA graph.
Writes DIR/bench_drafter.json (default $OUT, else results/), stamped.

    python -m bench.drafter [--out DIR] [--verify-only] [--batch 1 4 ...] [--dtype float32 ...] [--depth 5 1]
    (GPU only; admits sampled drafting itself, DSPARK_SAMPLED_TOP32=1)
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

from pp3.drafter import SAMPLED_ENV, Draft, TPDrafter
from pp3.kernels import verify as verify_dev
from pp3.reference import verify as verify_ref
from pp3.testing.call import host_logits, to_numpy
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
                replay, graphed = cuda_graph(fn)
                replay()  # capture runs nothing: the graph's outputs hold its results only after a replay
                eager = fn()
                same = all(torch.equal(getattr(graphed, f), getattr(eager, f)) for f in FIELDS)
                rows.append({"draft": mode, "V": V, "depth": DEPTH, "shards": shards, "B": b, **stats,
                             "how": "one CUDA graph replay, CUDA events", "graph_equals_eager": same})
                print(rows[-1], flush=True)
    return rows


def _flashinfer() -> tuple[Callable[..., Any] | None, str]:
    """FlashInfer's chain_speculative_sampling (the dense peer), or None and why not."""
    try:
        from flashinfer.sampling import chain_speculative_sampling  # type: ignore[import-not-found]
    except Exception as e:
        return None, f"flashinfer not importable: {e.__class__.__name__}: {e}"
    return chain_speculative_sampling, "ok"


def _baseline() -> tuple[Callable[..., Any] | None, str]:
    """The verifier of an older copy of pp3 (package ``pp3_baseline`` in the folder PP3_BENCH_BASELINE, named by
    PP3_BENCH_BASELINE_NAME), timed beside this one: or None."""
    folder = os.environ.get("PP3_BENCH_BASELINE")
    if not folder:
        return None, ""
    sys.path.insert(0, folder)
    from pp3_baseline.kernels import accept as base  # type: ignore[import-not-found]

    return base.verify, f"pp3_baseline {os.environ.get('PP3_BENCH_BASELINE_NAME', '')}".strip()


def verifier(batches: list[int], dtypes: list[str], depths: list[int]) -> list[dict[str, Any]]:
    """Per (dtype, depth, B): pp3's verifier (parity with the reference, then one CUDA graph), a read-only pass over
    the same target logits, and FlashInfer's softmax + chain_speculative_sampling on dense fp32 q and p (q exported
    exactly by pp3.adapters.dense_probs, outside the graph), all in this process. Plus parity-only rows for T0 and
    T = 2."""
    from pp3.adapters import dense_probs

    rng = np.random.default_rng(0)
    model = MarkovDrafter.random(V, RANK, seed=1, shards=2, gain=2, device="cuda")
    drafter = TPDrafter(model, DEPTH, tau=1.0)
    delta = torch.from_numpy(rng.integers(-1, 2, size=tuple(model.embedding.shape)) / 32).to(model.embedding)
    target = MarkovDrafter(model.embedding + delta, torch.cat(model.shards, 1))
    chain, fi_note = _flashinfer()
    base, base_name = _baseline()
    rows = []
    cases = [(dt, d, b, 1.0) for dt in dtypes for d in depths for b in batches]
    cases += [("float32", DEPTH, 4, 0.0), ("float32", DEPTH, 4, 2.0)]
    for dtype_name, depth, b, temp in cases:
        ctx = torch.randint(0, V, (b, 1), device="cuda")
        seed = torch.arange(b, dtype=torch.int64, device="cuda") + 7
        full = drafter.draft_sampled(ctx, 1.0, seed, 0, 1)
        draft = Draft(*(getattr(full, f)[:, :depth].contiguous() for f in FIELDS))
        before = torch.cat([ctx, draft.tokens.clamp_min(0).long()], 1)
        logits = torch.stack([torch.cat(target(before[:, j : j + 1]), 1) for j in range(depth + 1)], 1)
        logits = logits.to(getattr(torch, dtype_name)).contiguous()
        # Device-tensor keys: a call with Python scalars copies them host-to-device, which a CUDA graph cannot hold.
        temps = torch.full((b,), temp, dtype=torch.float32, device="cuda")
        zeros, ones = torch.zeros_like(seed), torch.ones_like(seed)
        args = (logits, temps, draft.tokens, draft.status, draft.ids, draft.tickets, seed, zeros, ones)
        t0 = time.perf_counter()
        got = verify_dev(*args)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        want = verify_ref(host_logits(logits), np.float32(temp), **draft.numpy(),
                          seed=seed.cpu().numpy().view(np.uint64), round=0, position=1)
        row: dict[str, Any] = {"verify": "pp3 Triton verifier, one CUDA graph", "V": V, "dtype": dtype_name,
                               "depth": depth, "B": b, "T": temp, "parity": not row_mismatch(to_numpy(got), want).any(),
                               "accepted": want.accepted.tolist()[:8], "first_call_s": round(first, 1)}
        if temp == 1.0:

            def run(a: tuple[Any, ...] = args) -> Any:
                return verify_dev(*a)

            def read(x: torch.Tensor = logits) -> Any:  # the floor: one read-only pass over the same target logits
                return x.amax(dim=-1)

            row["pp3"] = time_calls(run, 100)
            row["read_only_pass"] = time_calls(read, 100)
            if base is not None:

                def run_base(a: tuple[Any, ...] = args) -> Any:
                    return base(*a)

                row["baseline"] = base_name
                row["baseline_parity"] = not row_mismatch(to_numpy(run_base()), want).any()
                row["pp3_baseline"] = time_calls(run_base, 100)
            if chain is not None:
                q = dense_probs(draft.ids, draft.tickets, V)  # [B, depth, V] fp32, exact
                tok = draft.tokens.clamp_min(0)

                def peer(x: torch.Tensor = logits, q: torch.Tensor = q, tok: torch.Tensor = tok) -> Any:
                    return chain(q, tok, torch.softmax(x.float(), dim=-1), deterministic=True)

                try:
                    row["flashinfer_softmax_chain"] = time_calls(peer, 100)
                    p = torch.softmax(logits.float(), dim=-1)

                    def chain_only(q: torch.Tensor = q, tok: torch.Tensor = tok, p: torch.Tensor = p) -> Any:
                        return chain(q, tok, p, deterministic=True)

                    row["flashinfer_chain_only"] = time_calls(chain_only, 100)
                except Exception as e:  # the row says why
                    row["flashinfer"] = f"{e.__class__.__name__}: {e}"[:300]
            else:
                row["flashinfer"] = fi_note
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def speculative_step(batches: list[int]) -> list[dict[str, Any]]:
    """One speculative step in one CUDA graph: the depth-5 draft (sampled, or greedy) of the
    Markov drafter at V = 163840 plus pp3's verifier on fixed target logits, captured together with device-tensor
    keys; beside the draft alone."""
    model = MarkovDrafter.random(V, RANK, seed=1, shards=1, gain=2, device="cuda")
    drafter = TPDrafter(model, DEPTH)
    rows = [_step_row(drafter, b) for b in batches]
    return rows


def _step_row(drafter: TPDrafter, b: int) -> dict[str, Any]:
    ctx = torch.randint(0, V, (b, 1), device="cuda")
    seed = torch.arange(b, dtype=torch.int64, device="cuda") + 3
    zeros, ones = torch.zeros_like(seed), torch.ones_like(seed)
    temps = torch.ones(b, dtype=torch.float32, device="cuda")
    logits = torch.randn((b, DEPTH + 1, V), device="cuda") * 4

    def sampled() -> Any:
        return drafter.draft_sampled(ctx, temps, seed, zeros, ones)

    def greedy() -> Any:
        return drafter.draft(ctx)

    def step(draft: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            d = draft()
            return verify_dev(logits, temps, d.tokens, d.status, d.ids, d.tickets, seed, zeros, ones)

        return run

    timed = {"draft_sampled": sampled, "draft_greedy": greedy, "draft_sampled+verify": step(sampled),
             "draft_greedy+verify": step(greedy)}
    row: dict[str, Any] = {"step": "one CUDA graph", "V": V, "depth": DEPTH, "B": b}
    for name, fn in timed.items():
        row[name] = time_calls(fn, 100)
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.drafter")
    ap.add_argument("--out", default=os.environ.get("OUT") or "results")
    ap.add_argument("--verify-only", action="store_true", help="skip the draft-loop latency")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64], help="verifier batch sizes")
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], help="target logit formats")
    ap.add_argument("--depth", type=int, nargs="+", default=[DEPTH, 1], help="verifier depths (1 .. 5)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.drafter: needs a CUDA GPU")
        return 0
    os.environ[SAMPLED_ENV] = "1"
    doc = {"environment": environment(), "draft": [] if args.verify_only else draft_latency(),
           "verify": verifier(args.batch, args.dtype, args.depth),
           "step": speculative_step([1, 4, 64])}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_drafter.json").write_text(json.dumps(doc, indent=1))
    print(f"wrote {out / 'bench_drafter.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
