"""Speed of the draft trees' kernels (issue #55, goal 3): one process, one CUDA graph per call, median µs of
replays timed by CUDA events, every ratio within this process.

    python -m bench.trees [--vocab 163840] [--batches 1 4 16 64] [--reps 50] [--json]

Rows, per logit format (fp32, bf16), batch B and tree (8, 16, 32 and 64 nodes, ``TREES``):
- ``verify_tree`` and ``verify_walk`` against pp3's chain verifier on the same number of target rows (a chain of
  depth N: N + 1 rows per request) and against a read-only pass over the target rows (``amax`` over V);
- ``propose_tree`` over every inner node of the tree in one call against the selector (``pp3.kernels.propose``) over
  as many rows.
Needs a CUDA GPU. Prints one JSON object per row (``--json``) or a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

TREES = {
    8: [-1, 0, 0, 0, 1, 1, 2, 2],  # 3 then 4
    16: [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 7],  # 4-2 then 3
    32: [-1, *[0] * 4, *[i for i in range(1, 5) for _ in range(2)], *range(5, 13), *range(13, 24)],
    64: [-1, *[0] * 8, *[i for i in range(1, 9) for _ in range(2)], *[i for i in range(9, 25) for _ in range(2)],
         *range(25, 32)],  # 8-2-2 then 7
}


def _graph_us(fn: Callable[[], Any], reps: int) -> float:
    """Median µs of a replay of ``fn`` captured in one CUDA graph (after an eager warm-up)."""
    import torch

    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) * 1000.0)
    return float(statistics.median(times))


def _shape_row(vocab: int, b: int, dtype: Any, parents: list[int], reps: int) -> dict[str, Any]:
    """One row: the tree ``parents`` at batch ``b`` in ``dtype`` (the calls bind this function's locals)."""
    import torch

    from pp3.kernels import propose, verify
    from pp3.kernels import tree as dev
    from pp3.reference import tree as ref

    cuda = torch.device("cuda")
    seed, rnd, pos = (torch.arange(b, dtype=torch.int64, device=cuda) + i for i in range(3))
    keys = (seed, rnd, pos)
    temp = torch.ones(b, device=cuda)
    tree = ref.as_tree("parents", parents)
    n1 = tree.size
    inner = [int(u) for u in range(n1) if tree.branching[u] > 0]
    target = torch.randn(b, n1, vocab, device=cuda).to(dtype)
    drafter = torch.randn(b, len(inner), vocab, device=cuda).to(dtype)
    p = dev.propose_tree(drafter, temp, seed, rnd, pos, parents, inner)
    tok = p.tokens.clone()
    st = torch.zeros(b, n1, dtype=torch.int8, device=cuda)
    ids = torch.zeros(b, n1, 32, dtype=torch.int32, device=cuda)
    tix = torch.zeros(b, n1, 32, dtype=torch.int32, device=cuda)
    for m, u in enumerate(inner):
        st[:, u], ids[:, u], tix[:, u] = p.status[:, m], p.ids[:, m], p.tickets[:, m]
    chain = propose(target[:, 0].contiguous(), temp, *keys)
    c_tok, c_st, c_ids, c_tix = (t[:, None].expand(-1, n1 - 1, *t.shape[1:]).contiguous()
                                 for t in (chain.token, chain.status, chain.ids, chain.tickets))
    flat = drafter.reshape(b * len(inner), vocab)
    r_temp, r_seed, r_rnd, r_pos = (t.repeat_interleave(len(inner)) for t in (temp, seed, rnd, pos))
    us = {
        "verify_tree": _graph_us(lambda: dev.verify_tree(target, temp, parents, tok, st, ids, tix, *keys), reps),
        "verify_walk": _graph_us(lambda: dev.verify_walk(target, temp, parents, tok, st, *keys), reps),
        "chain_verify": _graph_us(lambda: verify(target, temp, c_tok, c_st, c_ids, c_tix, *keys), reps),
        "read_only": _graph_us(lambda: target.amax(dim=-1), reps),
        "propose_tree": _graph_us(lambda: dev.propose_tree(drafter, temp, seed, rnd, pos, parents, inner), reps),
        "chain_propose": _graph_us(lambda: propose(flat, r_temp, r_seed, r_rnd, r_pos), reps),
    }
    return {"dtype": str(dtype).split(".")[-1], "B": b, "nodes": n1, "V": vocab,
            **{k: round(v, 1) for k, v in us.items()},
            "tree/chain": round(us["verify_tree"] / us["chain_verify"], 3),
            "tree/read": round(us["verify_tree"] / us["read_only"], 3),
            "draw/propose": round(us["propose_tree"] / us["chain_propose"], 3), "device": torch.cuda.get_device_name()}


def rows(vocab: int, batches: list[int], reps: int) -> list[dict[str, Any]]:
    import torch

    return [_shape_row(vocab, b, dtype, parents, reps) for dtype in (torch.float32, torch.bfloat16) for b in batches
            for parents in TREES.values()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trees", description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=163840)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    for row in rows(args.vocab, args.batches, args.reps):
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
