"""FlashInfer's dense chain layout: pp3's sampled drafts with q exported exactly (``pp3.adapters.dense_probs``) into
one [B, D, V] buffer reset only at the previous round's IDs, the target's probabilities p [B, D+1, V], then
``chain_speculative_sampling(q, draft_token_ids, p)``: FlashInfer's where it imports on a CUDA GPU, else a
plain-torch stand-in (``pp3.testing.peers.torch_chain``). Either verifies in floating point with its own random
numbers: its tokens are not pp3's bits. pp3's part is exact: the drafts (the Triton selector) are checked bit for
bit against the NumPy reference's, and the exported q against the tickets.

    python examples/flashinfer_dense.py                      (a CUDA GPU: V = 1000)
    TRITON_INTERPRET=1 python examples/flashinfer_dense.py   (the CPU, Triton's interpreter: V = 200, slow)
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from pp3 import adapters
from pp3.drafter import TPDrafter
from pp3.reference import TICKETS, K
from pp3.testing.markov import MarkovDrafter
from pp3.testing.peers import torch_chain

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    print("examples/flashinfer_dense.py runs the Triton kernels: on a CUDA GPU, or on the CPU with TRITON_INTERPRET=1 "
          "(Triton's interpreter)", file=sys.stderr)
    sys.exit(2)
# Sampled top-32 drafting is opt-in (pp3.drafter): it is not yet qualified for serving, so the default path stays
# greedy and draft_sampled raises unless DSPARK_SAMPLED_TOP32=1 (read at each call). This example admits it.
os.environ["DSPARK_SAMPLED_TOP32"] = "1"

V = 1000 if dev.type == "cuda" else 200  # the interpreter runs every program of the kernels in NumPy
D, B = 5, 4
gen = torch.Generator(device=dev).manual_seed(0)
chain: Callable[..., Any] = functools.partial(torch_chain, generator=gen)  # a stand-in for FlashInfer's
name = "plain-torch stand-in"
try:  # FlashInfer's own chain, where it imports and there is a CUDA GPU
    from flashinfer.sampling import chain_speculative_sampling  # type: ignore[import-not-found]

    if dev.type == "cuda":
        chain, name = chain_speculative_sampling, "flashinfer.sampling.chain_speculative_sampling"
except ImportError:
    pass
small = MarkovDrafter.random(V, 16, seed=1, gain=2, device=dev)  # the drafter
delta = (torch.randint(-1, 2, tuple(small.embedding.shape), generator=torch.Generator().manual_seed(0)) / 32).to(dev)
target = MarkovDrafter(small.embedding + delta, torch.cat(small.shards, 1))  # the target: a perturbed copy
drafter = TPDrafter(small, depth=D, backend="triton")  # the selector kernel at every depth
reference_drafter = TPDrafter(small, depth=D, backend="reference")  # the same drafts by the NumPy reference
temperature = torch.tensor([1.0, 0.7, 1.0, 1.3], device=dev)  # sampled requests only (T > 0)
seed = torch.arange(11, 11 + B, device=dev)  # keys as int64 device tensors: seed, round, position of draft 0
rnd, pos = torch.zeros(B, dtype=torch.int64, device=dev), torch.ones(B, dtype=torch.int64, device=dev)
last = torch.tensor([3, 1, 4, 1], device=dev)
q_buf = torch.zeros((B, D, V), dtype=torch.float32, device=dev)  # once: zero everywhere
prev_ids = torch.full((B, D, K), -1, dtype=torch.int32, device=dev)  # once: nothing written yet
for r in range(3):
    draft = drafter.draft_sampled(last[:, None], temperature, seed, rnd, pos)
    twin = reference_drafter.draft_sampled(last[:, None], temperature, seed, rnd, pos)
    assert all(torch.equal(x, y) for x, y in zip((draft.tokens, draft.status, draft.ids, draft.tickets),
                                                  (twin.tokens, twin.status, twin.ids, twin.tickets), strict=True)), \
        "the selector kernel's drafts differ from the reference's"
    assert (adapters.draft_lengths(draft.status) == D).all()  # one depth per chain; a failed draft -> pp3's verifier
    q = adapters.dense_probs(draft.ids, draft.tickets, V, out=q_buf, previous_ids=prev_ids)  # 2 * K columns per row
    prev_ids.copy_(draft.ids)
    col, full = draft.ids.clamp_min(0).long(), draft.ids >= 0
    assert torch.equal(torch.where(full, (q.gather(-1, col) * TICKETS).to(torch.int32), 0), draft.tickets)
    assert torch.equal(q, adapters.dense_probs(draft.ids, draft.tickets, V))  # the reused buffer: a fresh export
    before = torch.cat([last[:, None], draft.tokens.long()], 1)
    logits = torch.stack([torch.cat(target(before[:, j : j + 1]), 1) for j in range(D + 1)], 1)  # [B, D+1, V]
    p = torch.softmax(logits / temperature[:, None, None], dim=-1)
    out = chain(q, draft.tokens, p)
    tokens = out[0] if isinstance(out, tuple) else out  # FlashInfer versions differ: a tensor or a tuple
    accepted = (tokens != -1).sum(1) - 1
    print(f"round {r} ({name}): accepted {accepted.tolist()}, emitted {tokens.tolist()}")
    last = tokens.gather(1, accepted[:, None])[:, 0].long()
    rnd, pos = rnd + 1, pos + accepted + 1
print(f"kernels on {dev.type} (V = {V}): every draft equals the reference's, bit for bit")
print("dense q exact: tickets * 2^-24 at the slot IDs, 0 elsewhere; the reused buffer equals a fresh export")
