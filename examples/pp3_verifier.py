"""Speculative rounds with pp3's own exact verifier (SPEC.md §11), on the Triton kernels: draft
(``TPDrafter.draft_sampled``, the selector kernel) -> the target's logits at every drafted position, a top-k mask
applied as -inf -> ``pp3.kernels.verify`` -> emit accepted + 1 tokens -> the next round's keys. Every round's drafts
and verdict are checked bit for bit against the NumPy reference (``pp3.propose`` through a reference drafter,
``pp3.verify``); round 0 is then replayed from its keys alone and gives the same tokens.

    python examples/pp3_verifier.py                      (a CUDA GPU: V = 1000)
    TRITON_INTERPRET=1 python examples/pp3_verifier.py   (the CPU, Triton's interpreter: V = 200, slow)
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import torch

import pp3
from pp3.drafter import Draft, TPDrafter
from pp3.testing.markov import MarkovDrafter

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    print("examples/pp3_verifier.py runs the Triton kernels: on a CUDA GPU, or on the CPU with TRITON_INTERPRET=1 "
          "(Triton's interpreter)", file=sys.stderr)
    sys.exit(2)
# Sampled top-32 drafting is opt-in (pp3.drafter): it is not yet qualified for serving, so the default path stays
# greedy and draft_sampled raises unless DSPARK_SAMPLED_TOP32=1 (read at each call). This example admits it.
os.environ["DSPARK_SAMPLED_TOP32"] = "1"

V = 1000 if dev.type == "cuda" else 200  # the interpreter runs every program of the kernels in NumPy
D, B, TOP_K = 5, 4, 50
gen = torch.Generator().manual_seed(0)
small = MarkovDrafter.random(V, 16, seed=1, gain=2, device=dev)  # the drafter: logits from the previous token
delta = (torch.randint(-1, 2, tuple(small.embedding.shape), generator=gen) / 32).to(dev)
target = MarkovDrafter(small.embedding + delta, torch.cat(small.shards, 1))  # the target: a perturbed copy
drafter = TPDrafter(small, depth=D, backend="triton")  # the selector kernel at every depth
reference_drafter = TPDrafter(small, depth=D, backend="reference")  # the same drafts by the NumPy reference
temperature = torch.tensor([1.0, 0.7, 0.0, 1.0], device=dev)  # per request; 0.0 is a greedy (T0) request
seed = torch.tensor([11, 12, 13, 14], dtype=torch.int64, device=dev)  # per request, fixed for its life
rnd = torch.zeros(B, dtype=torch.int64, device=dev)  # the speculation round of each request
pos = torch.ones(B, dtype=torch.int64, device=dev)  # absolute position of draft 0 (the prompt is position 0)
last = torch.randint(0, V, (B,), generator=gen).to(dev)  # each request's last token (the prompt)


def masked_target_logits(before: torch.Tensor) -> torch.Tensor:
    """[B, D+1, V]: row j scores position pos + j after before[:, j]; outside each row's top-k, -inf."""
    x = torch.stack([torch.cat(target(before[:, j : j + 1]), 1) for j in range(before.shape[1])], 1)
    top = x.topk(TOP_K, dim=-1).indices
    return torch.full_like(x, float("-inf")).scatter(-1, top, x.gather(-1, top))


def same_draft(a: Draft, b: Draft) -> bool:
    return all(torch.equal(x, y) for x, y in zip((a.tokens, a.status, a.ids, a.tickets),
                                                  (b.tokens, b.status, b.ids, b.tickets), strict=True))


def one_round(last: torch.Tensor, rnd: torch.Tensor, pos: torch.Tensor) -> tuple[Any, torch.Tensor]:
    from pp3.kernels import verify

    draft = drafter.draft_sampled(last[:, None], temperature, seed, rnd, pos)  # draft d keyed (seed, rnd, pos + d)
    assert same_draft(draft, reference_drafter.draft_sampled(last[:, None], temperature, seed, rnd, pos)), \
        "the selector kernel's drafts differ from the reference's"
    logits = masked_target_logits(torch.cat([last[:, None], draft.tokens.clamp_min(0).long()], 1))
    v = verify(logits, temperature, draft.tokens, draft.status, draft.ids, draft.tickets, seed, rnd, pos)
    got = (v.status.cpu().numpy(), v.accepted.cpu().numpy(), v.tokens.cpu().numpy())
    u64 = {k: t.cpu().numpy().view(np.uint64) for k, t in (("seed", seed), ("round", rnd), ("position", pos))}
    ref = pp3.verify(logits.cpu().numpy(), temperature.cpu().numpy(), **draft.numpy(), **u64)
    fields = ("status", "accepted", "tokens")
    assert all(np.array_equal(g, getattr(ref, f)) for g, f in zip(got, fields, strict=True)), \
        "the verifier kernel's verdict differs from the reference's"
    return got, logits


first = None
for r in range(3):
    (status, accepted, tokens), logits = one_round(last, rnd, pos)
    assert (status == 0).all(), status
    if first is None:
        first = (last.clone(), rnd.clone(), pos.clone(), tokens)
    rows = np.arange(B)
    allowed = logits.cpu().numpy()[rows[:, None], np.arange(D + 1)[None, :], np.maximum(tokens, 0)] > -np.inf
    assert (allowed | (tokens < 0)).all(), "an emitted token outside the target's top-k"
    print(f"round {r}: accepted {accepted.tolist()}, emitted {[tokens[b, : accepted[b] + 1].tolist() for b in rows]}")
    step = torch.from_numpy(accepted.astype(np.int64) + 1).to(dev)
    last = torch.from_numpy(tokens[rows, accepted].astype(np.int64)).to(dev)
    rnd, pos = rnd + 1, pos + step  # the next round's keys: a new round, draft 0 after the emitted tokens
    print(f"  next keys: round {rnd.tolist()}, position {pos.tolist()}")
assert first is not None
(_, _, again), _ = one_round(*first[:3])
assert np.array_equal(again, first[3]), "a replay of round 0 from its keys differs"
print(f"kernels on {dev.type} (V = {V}): every draft and verdict equal the reference's, bit for bit")
print("replay of round 0 from its keys: identical tokens")
print(f"every emitted token inside the target's top-{TOP_K} (masked as -inf before the verifier)")
