"""Bulk parity of the draft trees' Triton kernels with the NumPy reference (SPEC.md §12): random requests over
several tree shapes at V = 163840, every status, T0 and sampled rows, sampled and top-k children, failed draws and
target rows, invalid drafts, fp32/fp16/bf16; the draws and both verifiers checked by equality of every output.

    python -m pp3.audit.tree_bulk --rows N [--seed S] [--vocab 163840] [--batch 8] [--workers W] [--max-seconds T]
                                  [--json]

``--rows`` counts target rows (B (N+1) per batch). Batch k has one shape (``SHAPES[k mod 4]``), one logit format
(k mod 3) and one kind of children (sampled, verified by both verifiers; or top-k, by the walk); its inputs come from
NumPy's generator seeded with (S, k), so a run is reproducible on any device. Per batch: drafter logits at every
node, drafts by ``pp3.kernels.tree.propose_tree`` (every node in one call) compared with
``pp3.reference.propose_tree``; target logits near the drafter's (so children are accepted and rejected), with per
request one plan (plain, a NaN or all -inf target row, a failed draw, a bad slot, a NaN temperature); then
``verify_tree`` and ``verify_walk`` against the reference. The reference runs in a process pool, one request per
task (§12.12: rows are independent). The first mismatching batch is written to ``tree_bulk_mismatch.npz`` and the
run exits with status 1. Prints a JSON summary with ``--json``.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.audit._parser import Parser
from pp3.reference import tree as ref

SHAPES = {
    "2x2": [-1, 0, 0, 1, 1, 2, 2],
    "4-2-1": [-1, *[0] * 4, *[i for i in range(1, 5) for _ in range(2)], *range(5, 13)],
    "chain4": [-1, 0, 1, 2, 3],
    "wide8": [-1, *[0] * 8, *range(1, 9)],
}
FORMATS = ("float32", "float16", "bfloat16")
PLANS = ("plain", "plain", "plain", "nan-row", "masked-row", "failed-draw", "bad-slot", "nan-temperature")


def batch_inputs(seed: int, k: int, b: int, v: int) -> dict[str, Any]:
    """Batch k of seed ``seed``: its shape, format, children, drafter and target logits (fp32 values of the format),
    temperatures, keys and per-request plans (NumPy only: the same on every device)."""
    rng = np.random.default_rng([seed, k])
    name = list(SHAPES)[k % len(SHAPES)]
    parents = SHAPES[name]
    n1 = len(parents)
    x = (rng.standard_normal((b, n1, v), dtype=np.float32) * rng.uniform(1.0, 4.0)).astype(np.float32)
    target = (x + rng.standard_normal((b, n1, v), dtype=np.float32) * np.float32(rng.uniform(0.1, 1.5)))
    temp = rng.choice(np.array([0.0, 0.7, 1.0, 1.0, 1.3], np.float32), size=b)
    plans = rng.choice(PLANS, size=b)
    temp[plans == "nan-temperature"] = np.nan
    return {"shape": name, "parents": parents, "format": FORMATS[k % 3],
            "children": "top-k" if k % 5 == 4 else "sampled", "drafter": x, "target": target.astype(np.float32),
            "temperature": temp, "plans": plans, "keys": rng.integers(0, 2**64, size=(3, b), dtype=np.uint64),
            "rng": rng}


def _as_format(x: npt.NDArray[np.float32], fmt: str) -> Any:
    """The logits in ``fmt``, as torch tensors take them and the reference widens them (bf16 by its bits)."""
    import torch

    t = torch.from_numpy(x)
    return t.to(getattr(torch, fmt))


def _reference_request(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The reference's draw of every node and both verifications of one request (a process-pool task)."""
    drafter, target, temp, keys, parents, children, status_patch, slot_patch = args
    n1 = len(parents)
    seed, rnd, pos = keys
    p = ref.propose_tree(drafter, temp, seed, rnd, pos, parents, list(range(n1)), 1.0, children)
    st = p.status.astype(np.int8).copy()
    tix = p.tickets.copy()
    for i, s in status_patch:
        st[0, i] = s
    for i in slot_patch:
        tix[0, i, 0] += 1
    walk = ref.verify_walk(target, temp, parents, p.tokens, st, *keys)
    tree = ref.verify_tree(target, temp, parents, p.tokens, st, p.ids, tix, *keys) if children == "sampled" else None
    return p, walk, tree


def run(rows: int, seed: int, v: int, b: int, workers: int, max_seconds: float) -> dict[str, Any]:
    import torch

    from pp3.kernels import tree as dev

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    counts: dict[str, int] = {"target_rows": 0, "requests": 0, "batches": 0, "mismatches": 0}
    statuses: dict[str, int] = {}
    start = time.monotonic()
    k = 0
    with concurrent.futures.ProcessPoolExecutor(workers) as pool:
        while counts["target_rows"] < rows and time.monotonic() - start < max_seconds:
            bi = batch_inputs(seed, k, b, v)
            parents, n1, fmt = bi["parents"], len(bi["parents"]), bi["format"]
            drafter_t = _as_format(bi["drafter"], fmt)
            target_t = _as_format(bi["target"], fmt)
            drafter_np = drafter_t.float().numpy() if fmt != "float32" else bi["drafter"]  # the values the format holds
            target_np = target_t.float().numpy() if fmt != "float32" else bi["target"]
            rng = bi["rng"]
            tasks, patches = [], []
            for r in range(b):
                plan = bi["plans"][r]
                node = int(rng.integers(0, n1))
                if plan == "nan-row":
                    target_np[r, node, int(rng.integers(0, v))] = np.nan
                elif plan == "masked-row":
                    target_np[r, node, :] = -np.inf
                status_patch = [(int(rng.integers(0, n1)), 1)] if plan == "failed-draw" else []
                slot_patch = [int(rng.integers(0, n1))] if plan == "bad-slot" else []
                patches.append((status_patch, slot_patch))
                keys = tuple(int(bi["keys"][j, r]) for j in range(3))
                tasks.append((drafter_np[r:r + 1], target_np[r:r + 1], bi["temperature"][r:r + 1], keys, parents,
                              bi["children"], status_patch, slot_patch))
            want = list(pool.map(_reference_request, tasks))
            target_dev = torch.from_numpy(target_np).to(target_t.dtype).to(device)
            seed_d, round_d, pos_d = (torch.from_numpy(bi["keys"][j].view(np.int64).copy()).to(device)
                                      for j in range(3))
            keys_dev = (seed_d, round_d, pos_d)
            temp_dev = torch.from_numpy(bi["temperature"]).to(device)
            got_p = dev.propose_tree(drafter_t.to(device), temp_dev, seed_d, round_d, pos_d, parents, list(range(n1)),
                                     1.0, bi["children"])
            st = got_p.status.clone()
            tix = got_p.tickets.clone()
            for r, (status_patch, slot_patch) in enumerate(patches):
                for i, s in status_patch:
                    st[r, i] = s
                for i in slot_patch:
                    tix[r, i, 0] += 1
            got_w = dev.verify_walk(target_dev, temp_dev, parents, got_p.tokens, st, *keys_dev)
            got_t = (dev.verify_tree(target_dev, temp_dev, parents, got_p.tokens, st, got_p.ids, tix, *keys_dev)
                     if bi["children"] == "sampled" else None)
            bad = 0
            for r, (wp, ww, wt) in enumerate(want):
                for f in ("status", "ids", "tickets", "tokens"):
                    bad += int(not np.array_equal(getattr(got_p, f)[r].cpu().numpy(), getattr(wp, f)[0]))
                for got, w in ((got_w, ww), (got_t, wt)):
                    if got is None or w is None:
                        continue
                    for f in ("status", "accepted", "path", "tokens"):
                        bad += int(not np.array_equal(getattr(got, f)[r].cpu().numpy(), getattr(w, f)[0]))
                    key = f"{bi['shape']}:{'walk' if w is ww else 'tree'}:status{int(w.status[0])}"
                    statuses[key] = statuses.get(key, 0) + 1
            counts["batches"] += 1
            counts["requests"] += b
            counts["target_rows"] += b * n1
            if bad:
                counts["mismatches"] += bad
                np.savez("tree_bulk_mismatch.npz", seed=seed, batch=k, vocab=v, size=b)
                break
            k += 1
    return {"seed": seed, "vocab": v, "batch": b, **counts, "statuses": dict(sorted(statuses.items())),
            "seconds": round(time.monotonic() - start, 1), "device": str(device)}


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m pp3.audit.tree_bulk", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, required=True, help="target rows to check (B (N+1) per batch)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=163840)
    ap.add_argument("--batch", type=int, default=8, help="requests per batch")
    ap.add_argument("--workers", type=int, default=8, help="reference processes")
    ap.add_argument("--max-seconds", type=float, default=float("inf"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    out = run(args.rows, args.seed, args.vocab, args.batch, args.workers, args.max_seconds)
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 1 if out["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
