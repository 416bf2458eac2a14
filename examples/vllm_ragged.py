"""vLLM V1's ragged layout: keys gathered from per-request state tables, drafts cut to num_draft_tokens and
flattened (cu_num_draft_tokens, draft_probs [num_tokens, V]), the target's flattened logits [num_tokens + B, V],
both back in pp3's padded layout for pp3's verifier kernel, the emitted tokens packed, the tables advanced on the
device. The drafts (the selector kernel) and the verdicts (the verifier kernel) are checked bit for bit against the
NumPy reference, and every round trip through the ragged layout exactly.

    python examples/vllm_ragged.py                      (a CUDA GPU: V = 1000)
    TRITON_INTERPRET=1 python examples/vllm_ragged.py   (the CPU, Triton's interpreter: V = 200, slow)
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

import pp3
from pp3 import adapters
from pp3.drafter import Draft, TPDrafter
from pp3.testing.markov import MarkovDrafter

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    print("examples/vllm_ragged.py runs the Triton kernels: on a CUDA GPU, or on the CPU with TRITON_INTERPRET=1 "
          "(Triton's interpreter)", file=sys.stderr)
    sys.exit(2)
# Sampled top-32 drafting is opt-in (pp3.drafter): it is not yet qualified for serving, so the default path stays
# greedy and draft_sampled raises unless DSPARK_SAMPLED_TOP32=1 (read at each call). This example admits it.
os.environ["DSPARK_SAMPLED_TOP32"] = "1"

V = 1000 if dev.type == "cuda" else 200  # vocabulary (the interpreter runs every kernel program in NumPy)
D, R = 3, 8  # draft depth, request-state slots
small = MarkovDrafter.random(V, 16, seed=1, gain=2, device=dev)  # the drafter
delta = (torch.randint(-1, 2, tuple(small.embedding.shape), generator=torch.Generator().manual_seed(0)) / 32).to(dev)
target = MarkovDrafter(small.embedding + delta, torch.cat(small.shards, 1))  # the target: a perturbed copy
drafter = TPDrafter(small, depth=D, backend="triton")  # the selector kernel at every depth
# Per-request state, one entry per slot, on the device (vLLM MRV2 keeps such tables): int64 holding uint64 bits.
seed_table = torch.arange(100, 100 + R, dtype=torch.int64, device=dev)
round_table = torch.zeros(R, dtype=torch.int64, device=dev)
position_table = torch.tensor([7, 3, 9, 1, 4, 12, 2, 5], dtype=torch.int64, device=dev)  # of the next draft 0
temperature_table = torch.tensor([1.0, 0.0, 0.7, 1.0, 0.0, 1.0, 1.0, 0.9], device=dev)
last_table = torch.randint(0, V, (R,), generator=torch.Generator().manual_seed(1)).to(dev)  # each one's last token
idx_mapping = torch.tensor([5, 2, 7, 0, 3], dtype=torch.int32, device=dev)  # the slot of each batch row
num_draft_tokens = [3, 0, 2, 0, 1]  # host-side, as vLLM's scheduler keeps it (its documented example)
B, N = len(num_draft_tokens), sum(num_draft_tokens)

seed, rnd, pos = adapters.row_keys_from_table(seed_table, round_table, position_table, idx_mapping)
slots = idx_mapping.long()
temperature, last = temperature_table[slots], last_table[slots]
draft = drafter.draft_sampled(last[:, None], temperature, seed, rnd, pos)  # [B, D]; draft d at position pos + d
twin = TPDrafter(small, depth=D, backend="reference").draft_sampled(last[:, None], temperature, seed, rnd, pos)
assert all(torch.equal(x, y) for x, y in zip((draft.tokens, draft.status, draft.ids, draft.tickets),
                                              (twin.tokens, twin.status, twin.ids, twin.tickets), strict=True)), \
    "the selector kernel's drafts differ from the reference's"
lengths = torch.tensor(num_draft_tokens, dtype=torch.int32, device=dev)
ragged = adapters.draft_to_ragged(draft, N, lengths)
draft_token_ids, cu_num_draft_tokens = ragged.tokens, ragged.cu[1:]  # vLLM V1's SpecDecodeMetadata fields
draft_probs = adapters.dense_probs(ragged.ids, ragged.tickets, V)  # vLLM V1's draft_probs [num_tokens, V], exact
before = torch.cat([last[:, None], draft.tokens.long()], 1)  # per request: its last token, then its drafts
flat_in, cu_logits = adapters.to_ragged(before, lengths + 1, N + B)  # each request's n_b + 1 scored positions
flat_logits = torch.cat(target(flat_in[:, None]), 1)  # the target's forward in vLLM's layout: [num_tokens + B, V]
assert torch.equal(cu_logits, adapters.cu_with_bonus(ragged.cu))
print(f"draft_token_ids {draft_token_ids.tolist()}, cu_num_draft_tokens {cu_num_draft_tokens.tolist()}, "
      f"draft_probs {tuple(draft_probs.shape)}, target logits {tuple(flat_logits.shape)}")


def verify(logits: torch.Tensor, d: Draft) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(status, accepted, tokens) of pp3's verifier kernel on padded target logits [B, D+1, V] and drafts [B, D],
    checked bit for bit against the NumPy reference."""
    from pp3.kernels import verify as verify_kernel

    v = verify_kernel(logits, temperature, d.tokens, d.status, d.ids, d.tickets, seed, rnd, pos)
    u64 = {k: t.cpu().numpy().view(np.uint64) for k, t in (("seed", seed), ("round", rnd), ("position", pos))}
    r = pp3.verify(logits.cpu().numpy(), temperature.cpu().numpy(), **d.numpy(), **u64)
    assert all(np.array_equal(getattr(v, f).cpu().numpy(), getattr(r, f)) for f in ("status", "accepted", "tokens")), \
        "the verifier kernel's verdict differs from the reference's"
    return v.status, v.accepted, v.tokens


def same(xs: tuple[torch.Tensor, ...], ys: tuple[torch.Tensor, ...]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(xs, ys, strict=True))


back = adapters.draft_from_ragged(ragged, D)  # pp3's padded layout: PAD_STATUS past each request's drafts
status, accepted, tokens = verify(adapters.target_logits_from_ragged(flat_logits, ragged.cu, D), back)
keep = torch.arange(D, device=dev)[None, :] < lengths[:, None]
cut = Draft(*(torch.where(keep if t.dim() == 2 else keep[..., None], t, pad) for t, pad in
              ((draft.tokens, -1), (draft.status, adapters.PAD_STATUS), (draft.ids, -1), (draft.tickets, 0))))
assert same((back.tokens, back.status, back.ids, back.tickets), (cut.tokens, cut.status, cut.ids, cut.tickets))
padded = torch.stack([torch.cat(target(before[:, j : j + 1]), 1) for j in range(D + 1)], 1)  # a padded forward
assert same(verify(padded, cut), (status, accepted, tokens)) and bool((status == 0).all())
emitted, cu_emitted = adapters.verdict_to_ragged(tokens, accepted)  # packed per request, -1 after the last
assert same(adapters.verdict_from_ragged(emitted, cu_emitted, D), (tokens, accepted))
print("round trip exact: drafts, target logits and verdicts through vLLM's ragged layout verify as the padded ones")
print(f"kernels on {dev.type} (V = {V}): drafts and verdicts equal the reference's, bit for bit")
print(f"accepted {accepted.tolist()}, output_token_ids {tokens.tolist()}, cu {cu_emitted.tolist()}")
# The next round's keys, written back into the tables on the device (no host read): a new round, draft 0 after the
# emitted tokens, the last emitted token as the context.
round_table.index_add_(0, slots, torch.ones_like(slots))
position_table.index_add_(0, slots, accepted.long() + 1)
last_table.index_copy_(0, slots, tokens.gather(1, accepted.long()[:, None])[:, 0].long())
print(f"next keys of slots {idx_mapping.tolist()}: round {round_table[slots].tolist()}, "
      f"position {position_table[slots].tolist()}")
