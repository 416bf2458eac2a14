"""``python -m bench.adapters``: the time and memory of each ``pp3.adapters`` function at V = 163840, D = 5,
B = 1, 4, 64, each call captured in one CUDA graph (``pp3.testing.timing.time_calls``: median / p10 / p90 µs of
event-timed replays), beside a read-only pass over the [B, D, V] fp32 dense buffer and pp3's own verifier
(``pp3.kernels.verify``) at the same B and D, all in this process. Writes DIR/bench_adapters.json (default $OUT,
else results/), stamped, and prints one JSON line per row.

    python -m bench.adapters [--out DIR] [--batch 1 4 64] [--replays 200]    (GPU only)

Inputs: per depth d, ``pp3.kernels.propose`` on random fp32 logits [B, V] (standard normal times 4, T = 1, device
keys, position 1 + d), so each draft has up to 32 non-empty slots, as a sampled drafter gives; the target's logits
[B, D+1, V] are random too. The ragged rows use a mix of draft lengths, the first B of 5, 3, 5, 0, 2, 5, 4, 1
repeated (N = their sum; B = 1 has the one length 5). Every output is checked exactly before it is timed (the
row's ``exact``: dense q against the tickets, a reused buffer against a fresh export, round trips against the
originals, keys against the tables, the verifier against ``pp3.reference.verify``).

Memory per row, in bytes, from the shapes of the tensors named (the adapters' code, pp3/adapters.py):
``new_bytes`` the tensors the call allocates and returns; ``write_bytes`` what it writes into its outputs;
``read_bytes`` what it reads of its inputs; ``buffer_bytes`` the caller-owned buffers it writes in place (kept
across steps). ``peak_bytes`` is measured: the allocator's peak growth during one eager call, temporaries
included. One input set per row, so at B = 1 and 4 the inputs stay in L2 between replays.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pp3 import adapters
from pp3.drafter import Draft
from pp3.reference import verify as verify_ref
from pp3.reference._constants import TICKETS, K
from pp3.testing.call import host_logits, to_numpy
from pp3.testing.compare import row_mismatch
from pp3.testing.stamp import environment
from pp3.testing.timing import time_calls

V, DEPTH = 163840, 5
LENGTH_MIX = (5, 3, 5, 0, 2, 5, 4, 1)  # the ragged rows' draft lengths, repeated to B
DRAFT_ROW_BYTES = 4 + 1 + 4 * K + 4 * K  # one draft: token int32, status int8, K ids and K tickets int32


def make_draft(b: int, gen: torch.Generator) -> Draft:
    """D sampled drafts per row from the Triton selector on random logits (keys as device tensors)."""
    from pp3.kernels import propose

    dev = torch.device("cuda")
    temp = torch.ones(b, dtype=torch.float32, device=dev)
    seed = torch.arange(b, dtype=torch.int64, device=dev) + 11
    rnd = torch.zeros(b, dtype=torch.int64, device=dev)
    steps = []
    for d in range(DEPTH):
        x = torch.randn((b, V), generator=gen, device=dev) * 4
        steps.append(propose(x, temp, seed, rnd, rnd + 1 + d))
    return Draft(tokens=torch.stack([p.token for p in steps], 1), status=torch.stack([p.status for p in steps], 1),
                 ids=torch.stack([p.ids for p in steps], 1), tickets=torch.stack([p.tickets for p in steps], 1))


def peak_bytes(fn: Callable[[], Any]) -> int:
    """The allocator's peak growth over one eager call of ``fn`` (its outputs and temporaries)."""
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return int(peak)


def dense_exact(q: torch.Tensor, draft: Draft) -> bool:
    """q holds tickets * 2^-24 at each slot's ID and 0 elsewhere (SPEC.md §7 slots)."""
    col = draft.ids.clamp_min(0).long()
    at_ids = torch.where(draft.ids >= 0, (q.gather(-1, col) * TICKETS).to(torch.int32), 0)
    nonzero = int(torch.count_nonzero(q)) == int((draft.tickets > 0).sum())
    return bool(torch.equal(at_ids, draft.tickets)) and nonzero


def truncated(draft: Draft, lengths: torch.Tensor) -> Draft:
    """The draft with positions past each row's length padded as ``draft_from_ragged`` pads them."""
    keep = torch.arange(DEPTH, device=lengths.device)[None, :] < lengths[:, None]
    pads = (-1, adapters.PAD_STATUS, -1, 0)
    fields = [torch.where(keep if t.dim() == 2 else keep[..., None], t, pad)
              for t, pad in zip((draft.tokens, draft.status, draft.ids, draft.tickets), pads, strict=True)]
    return Draft(*fields)


def drafts_equal(a: Draft, b: Draft) -> bool:
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("tokens", "status", "ids", "tickets"))


def rows_for(b: int, replays: int) -> list[dict[str, Any]]:
    gen = torch.Generator(device="cuda").manual_seed(b)
    dev = torch.device("cuda")
    draft, other = make_draft(b, gen), make_draft(b, gen)
    ids, tickets = draft.ids, draft.tickets
    bdk, bdv = b * DEPTH * K, b * DEPTH * V
    slots = 8 * bdk  # ids and tickets read
    lengths = torch.tensor([LENGTH_MIX[i % len(LENGTH_MIX)] for i in range(b)], dtype=torch.int32, device=dev)
    n = int(sum(LENGTH_MIX[i % len(LENGTH_MIX)] for i in range(b)))  # host-side, as vLLM's scheduler knows it
    target = torch.randn((b, DEPTH + 1, V), generator=gen, device=dev) * 4
    fresh = adapters.dense_probs(ids, tickets, V)
    rows: list[dict[str, Any]] = []

    def row(name: str, fn: Callable[[], Any], exact: bool, *, new: int, write: int, read: int, buffer: int = 0,
            **extra: Any) -> None:
        r: dict[str, Any] = {"adapter": name, "V": V, "D": DEPTH, "B": b, **extra, "exact": exact,
                             "new_bytes": new, "write_bytes": write, "read_bytes": read, "buffer_bytes": buffer,
                             "peak_bytes": peak_bytes(fn), **time_calls(fn, replays)}
        r["GB_per_s"] = round((read + write) / (r["median_us"] * 1e3), 1)
        rows.append(r)
        print(json.dumps(r), flush=True)

    # Dense q (FlashInfer's draft_probs): fresh, into a buffer zeroed whole, into a buffer reset at previous_ids.
    row("dense_probs(ids, tickets, V)", lambda: adapters.dense_probs(ids, tickets, V), dense_exact(fresh, draft),
        new=4 * bdv, write=4 * bdv + 4 * bdk, read=slots)
    buf = torch.zeros((b, DEPTH, V), dtype=torch.float32, device=dev)
    adapters.dense_probs(other.ids, other.tickets, V, out=buf)
    same = torch.equal(adapters.dense_probs(ids, tickets, V, out=buf), fresh)
    row("dense_probs(..., out=buf)", lambda: adapters.dense_probs(ids, tickets, V, out=buf), same,
        new=0, write=4 * bdv + 4 * bdk, read=slots, buffer=4 * bdv)
    prev = other.ids.clone()
    adapters.dense_probs(other.ids, other.tickets, V, out=buf)

    def reuse() -> torch.Tensor:  # an engine's step: reset the previous step's columns, write, remember the IDs
        q = adapters.dense_probs(ids, tickets, V, out=buf, previous_ids=prev)
        prev.copy_(ids)
        return q

    same = torch.equal(reuse(), fresh)
    row("dense_probs(..., out=buf, previous_ids=prev); prev.copy_(ids)", reuse, same,
        new=0, write=3 * 4 * bdk, read=slots + 2 * 4 * bdk, buffer=4 * bdv + 4 * bdk)
    # log q (vLLM MRV2's draft-logits rows): fresh and with previous_ids.
    logq = adapters.log_probs(ids, tickets, V)
    row("log_probs(ids, tickets, V)", lambda: adapters.log_probs(ids, tickets, V),
        torch.equal(logq, torch.log(fresh)), new=4 * bdv, write=4 * bdv + 4 * bdk, read=slots)
    lbuf = adapters.log_probs(other.ids, other.tickets, V)
    lprev = other.ids.clone()

    def log_reuse() -> torch.Tensor:
        q = adapters.log_probs(ids, tickets, V, out=lbuf, previous_ids=lprev)
        lprev.copy_(ids)
        return q

    row("log_probs(..., out=buf, previous_ids=prev); prev.copy_(ids)", log_reuse, torch.equal(log_reuse(), logq),
        new=0, write=3 * 4 * bdk, read=slots + 2 * 4 * bdk, buffer=4 * bdv + 4 * bdk)
    # q and log q of the drafted tokens (exact q; log q as torch.log of it).
    tok = draft.tokens
    want_q = fresh.gather(-1, tok.clamp_min(0).long()[..., None])[..., 0]
    row("token_q(ids, tickets, tokens)", lambda: adapters.token_q(ids, tickets, tok),
        torch.equal(adapters.token_q(ids, tickets, tok), want_q), new=4 * b * DEPTH, write=4 * b * DEPTH,
        read=slots + 4 * b * DEPTH)
    row("token_log_q(ids, tickets, tokens)", lambda: adapters.token_log_q(ids, tickets, tok),
        torch.equal(adapters.token_log_q(ids, tickets, tok), torch.log(want_q)), new=4 * b * DEPTH,
        write=4 * b * DEPTH, read=slots + 4 * b * DEPTH)
    # Ragged <-> padded (vLLM V1's flattened layout), drafts, target logits and verdicts.
    ragged = adapters.draft_to_ragged(draft, n, lengths)
    mix: dict[str, Any] = {"lengths": f"the first B of {LENGTH_MIX} repeated", "N": n}
    row("draft_to_ragged(draft, N, lengths)", lambda: adapters.draft_to_ragged(draft, n, lengths),
        drafts_equal(adapters.draft_from_ragged(ragged, DEPTH), truncated(draft, lengths)),
        new=DRAFT_ROW_BYTES * n + 4 * (b + 1), write=DRAFT_ROW_BYTES * n + 4 * (b + 1),
        read=DRAFT_ROW_BYTES * n + 4 * b, **mix)
    row("draft_from_ragged(ragged, D)", lambda: adapters.draft_from_ragged(ragged, DEPTH),
        drafts_equal(adapters.draft_from_ragged(ragged, DEPTH), truncated(draft, lengths)),
        new=DRAFT_ROW_BYTES * b * DEPTH, write=DRAFT_ROW_BYTES * b * DEPTH,
        read=DRAFT_ROW_BYTES * n + 4 * (b + 1), **mix)  # on CUDA only the valid rows are read (pp3.kernels.rows)
    flat, _ = adapters.target_logits_to_ragged(target, lengths, n)
    keep = torch.arange(DEPTH + 1, device=dev)[None, :] <= lengths[:, None]
    back_ok = torch.equal(adapters.target_logits_from_ragged(flat, ragged.cu, DEPTH),
                          torch.where(keep[..., None], target, 0.0))
    row("target_logits_to_ragged(target, lengths, N)", lambda: adapters.target_logits_to_ragged(target, lengths, n),
        back_ok, new=4 * (n + b) * V + 4 * (b + 1), write=4 * (n + b) * V + 4 * (b + 1),
        read=4 * (n + b) * V + 4 * b, **mix)
    row("target_logits_from_ragged(flat, cu, D)", lambda: adapters.target_logits_from_ragged(flat, ragged.cu, DEPTH),
        back_ok, new=4 * b * (DEPTH + 1) * V, write=4 * b * (DEPTH + 1) * V,
        read=4 * (n + b) * V + 4 * (b + 1), **mix)
    # pp3's verifier on the padded target logits and drafts, checked against the reference, then its verdict packed.
    from pp3.kernels import verify

    temp = torch.ones(b, dtype=torch.float32, device=dev)
    seed = torch.arange(b, dtype=torch.int64, device=dev) + 11
    zeros, ones = torch.zeros_like(seed), torch.ones_like(seed)
    got = verify(target, temp, tok, draft.status, ids, tickets, seed, zeros, ones)
    want = verify_ref(host_logits(target), np.float32(1.0), **draft.numpy(), seed=seed.cpu().numpy().view(np.uint64),
                      round=0, position=1)
    flat_v, cu_v = adapters.verdict_to_ragged(got.tokens, got.accepted)
    back_t, back_a = adapters.verdict_from_ragged(flat_v, cu_v, DEPTH)
    v_ok = torch.equal(back_t, got.tokens) and torch.equal(back_a, got.accepted)
    d1 = b * (DEPTH + 1)
    row("verdict_to_ragged(tokens, accepted)", lambda: adapters.verdict_to_ragged(got.tokens, got.accepted), v_ok,
        new=4 * d1 + 4 * (b + 1), write=4 * d1 + 4 * (b + 1), read=4 * d1 + 4 * b)
    row("verdict_from_ragged(flat, cu, D)", lambda: adapters.verdict_from_ragged(flat_v, cu_v, DEPTH), v_ok,
        new=4 * d1 + 4 * b, write=4 * d1 + 4 * b, read=4 * d1 + 4 * (b + 1))
    # Keys gathered from per-request state tables (1024 request slots) through an index mapping.
    r_slots = 1024
    tables = [torch.randint(-(1 << 62), 1 << 62, (r_slots,), generator=gen, device=dev) for _ in range(3)]
    idx = torch.randperm(r_slots, generator=gen, device=dev)[:b].to(torch.int32)
    seed_t, round_t, position_t = tables
    keys = adapters.row_keys_from_table(seed_t, round_t, position_t, idx)
    keys_ok = all(torch.equal(k, t[idx.long()]) for k, t in zip(keys, tables, strict=True))
    row("row_keys_from_table(seed_t, round_t, position_t, idx_mapping)",
        lambda: adapters.row_keys_from_table(seed_t, round_t, position_t, idx), keys_ok, new=3 * 8 * b, write=3 * 8 * b,
        read=3 * 8 * b + 4 * b, request_slots=r_slots)
    row("draft_lengths(status)", lambda: adapters.draft_lengths(draft.status),
        bool((adapters.draft_lengths(draft.status) == DEPTH).all()), new=4 * b, write=4 * b, read=b * DEPTH)
    # For scale: one read-only pass over the dense buffer, and pp3's own verifier (no adapter but the keys).
    row("read-only pass: q.amax(-1) over [B, D, V] fp32", lambda: fresh.amax(dim=-1), True,
        new=4 * b * DEPTH, write=4 * b * DEPTH, read=4 * bdv)
    parity = not bool(row_mismatch(to_numpy(got), want).any())
    row("pp3.kernels.verify (target [B, D+1, V] fp32, T = 1)",
        lambda: verify(target, temp, tok, draft.status, ids, tickets, seed, zeros, ones), parity,
        new=b + 4 * b + 4 * d1, write=b + 4 * b + 4 * d1, read=4 * d1 * V + DRAFT_ROW_BYTES * b * DEPTH,
        accepted=want.accepted.tolist()[:8])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.adapters")
    ap.add_argument("--out", default=os.environ.get("OUT") or "results")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 64], help="batch sizes B")
    ap.add_argument("--replays", type=int, default=200, help="CUDA-graph replays per timing")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.adapters: needs a CUDA GPU")
        return 0
    rows = [r for b in args.batch for r in rows_for(b, args.replays)]
    doc = {"environment": environment(), "V": V, "D": DEPTH, "length_mix": list(LENGTH_MIX),
           "how": "each call in one CUDA graph, CUDA events, median/p10/p90 of replays (pp3.testing.timing)",
           "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_adapters.json").write_text(json.dumps(doc, indent=1))
    print(f"wrote {out / 'bench_adapters.json'}")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
