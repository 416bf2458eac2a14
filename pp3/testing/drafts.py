"""Drafts and verifier cases for tests, golden vectors and audits (SPEC.md §11.2): real proposals, point masses,
two-slot drafts, invalid drafts, and the seeds whose first Lemire word is rejected. NumPy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import TICKETS, K, propose

F32 = npt.NDArray[np.float32]

# A proposal ticket count whose acceptance bound s = Q * 2^16 rejects a word with probability ~4.5e-8, and a seed
# whose acceptance word W_0 at (round 0, position 0) is rejected: found by search (see test_rejection_seed_*).
REJECT_Q = 12648641
REJECT_SEED_ACCEPT = 10864490
REJECT_SEED_RESIDUAL = 7174082


def u64(*v: int) -> npt.NDArray[np.uint64]:
    """uint64 values as an array."""
    return np.array(v, dtype=np.uint64)


def drafts(
    draft_logits: F32, temperature: Any, seed: Any, rnd: Any, position: Any, tau: float = 1.0
) -> dict[str, npt.NDArray[Any]]:
    """Real proposals (SPEC.md §8) for draft logits [B, D, V]: draft d at position + d."""
    b, d, _ = draft_logits.shape
    pos = np.broadcast_to(np.asarray(position, dtype=np.uint64), (b,))
    props = [propose(draft_logits[:, j], temperature, seed, rnd, pos + np.uint64(j), tau) for j in range(d)]
    return {
        "draft_tokens": np.stack([p.token for p in props], 1),
        "draft_status": np.stack([p.status for p in props], 1),
        "draft_ids": np.stack([p.ids for p in props], 1),
        "draft_tickets": np.stack([p.tickets for p in props], 1),
    }


def point_drafts(tokens: npt.NDArray[np.integer]) -> dict[str, npt.NDArray[Any]]:
    """Greedy-path drafts: q is the point mass on each token (SPEC.md §7, T0)."""
    tok = np.asarray(tokens, dtype=np.int32)
    ids = np.full((*tok.shape, K), -1, dtype=np.int32)
    tix = np.zeros((*tok.shape, K), dtype=np.int32)
    ids[..., 0] = tok
    tix[..., 0] = TICKETS
    return {"draft_tokens": tok, "draft_status": np.zeros(tok.shape, np.int8), "draft_ids": ids, "draft_tickets": tix}


def two_slot_draft(b: int, d: int, x: int, qx: int, other: int) -> dict[str, npt.NDArray[Any]]:
    """Every draft is token x with Q(x) = qx; the remaining 2^24 - qx tickets sit on token ``other``."""
    ids = np.full((b, d, K), -1, dtype=np.int32)
    tix = np.zeros((b, d, K), dtype=np.int32)
    lo, hi = sorted((x, other))
    ids[..., 0], ids[..., 1] = lo, hi
    tix[..., 0] = qx if lo == x else TICKETS - qx
    tix[..., 1] = TICKETS - qx if lo == x else qx
    return {
        "draft_tokens": np.full((b, d), x, dtype=np.int32),
        "draft_status": np.zeros((b, d), np.int8),
        "draft_ids": ids,
        "draft_tickets": tix,
    }


def random_case(rng: np.random.Generator, b: int, d: int, v: int, temperature: float) -> dict[str, Any]:
    target = rng.normal(scale=2.0, size=(b, d + 1, v)).astype(np.float32)
    draft_logits = (target[:, :d] + rng.normal(scale=1.0, size=(b, d, v))).astype(np.float32)
    seed = rng.integers(0, 2**63, size=b, dtype=np.uint64)
    pos = rng.integers(0, 2**40, size=b, dtype=np.uint64)
    return {
        "target_logits": target,
        "target_temperature": np.float32(temperature),
        **drafts(draft_logits, temperature, seed, 3, pos),
        "seed": seed,
        "round": 3,
        "position": pos,
    }


# The ways break_draft makes a draft invalid.
BROKEN_DRAFTS = (
    "sum", "negative", "token_absent", "token_zero_tickets", "descending", "id_out_of_range", "empty_with_tickets",
    "full_after_empty",
)


def break_draft(kind: str, ids: npt.NDArray[np.int32], tix: npt.NDArray[np.int32], tok: npt.NDArray[np.int32]) -> None:
    """Make draft 0 of row 0 of a valid sampled draft (V = 40, so every draft fills 32 slots) invalid in one way
    (§11.3 step 3): ``kind`` is one of BROKEN_DRAFTS."""
    if kind == "sum":
        tix[0, 0, 0] += 1
    elif kind == "negative":
        tix[0, 0, 0] -= 1 << 24
        tix[0, 0, 1] += 1 << 24
    elif kind == "token_absent":
        absent = sorted(set(range(40)) - set(ids[0, 0].tolist()))[0]
        tok[0, 0] = absent
    elif kind == "token_zero_tickets":
        k = int(np.flatnonzero(ids[0, 0] == tok[0, 0])[0])
        other = (k + 1) % K
        tix[0, 0, other] += tix[0, 0, k]
        tix[0, 0, k] = 0
    elif kind == "descending":
        ids[0, 0, [0, 1]] = ids[0, 0, [1, 0]]
        tix[0, 0, [0, 1]] = tix[0, 0, [1, 0]]
    elif kind == "id_out_of_range":
        ids[0, 0, K - 1] = 40
    elif kind == "empty_with_tickets":
        ids[0, 0, K - 1] = -1
    elif kind == "full_after_empty":
        ids[0, 0, 0] = -1
        tix[0, 0, 1] += tix[0, 0, 0]
        tix[0, 0, 0] = 0
        if tok[0, 0] == ids[0, 0, 1] or tok[0, 0] < 0:
            tok[0, 0] = ids[0, 0, 2]
