"""The reference verifier: SPEC.md §11 (semantic ID ``accept-dyadic24-v1``) in NumPy. Imports neither torch
nor triton.

Sections: ``target_tickets`` (§11.4), ``verify`` (§11.2-§11.8); the §11.5 streams and uniforms are in ``philox``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import _args, order, philox, tickets
from pp3.reference._constants import (
    DOMAIN_ACCEPT,
    DOMAIN_RESIDUAL,
    EMPTY_ID,
    P_TICKETS,
    Q_SHIFT,
    TICKETS,
    AcceptStatus,
    K,
)
from pp3.reference.exponential import expf

I64 = npt.NDArray[np.int64]

_P_SCALE = np.float64(P_TICKETS)  # 2^40: w * 2^40 is exact for every fp64 w that came from an fp32 value


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Per-row outputs (§11.8). An OK row emits ``accepted + 1`` tokens; a failed row has ``accepted = -1``."""

    status: npt.NDArray[np.int8]  # [B] AcceptStatus values
    accepted: npt.NDArray[np.int32]  # [B] accepted drafts a (0 .. D), -1 for failed rows
    tokens: npt.NDArray[np.int32]  # [B, D+1] drafts 0 .. a-1, then the correction or bonus, then -1


# ----------------------------------------------------------------------------------------------------------- §11.4


def target_tickets(logits: npt.NDArray[np.float32], temperature: npt.NDArray[np.float32]) -> tuple[I64, I64]:
    """§11.4 P1-P6 for rows that are OK and sampled: (g [N], P [N, V] int64 tickets of 2^40, each row summing to 2^40).

    ``logits`` is [N, V] fp32 without NaN or +inf and with a finite entry per row; ``temperature`` [N] fp32 > 0.
    """
    x = np.asarray(logits, dtype=np.float32)
    temp = np.asarray(temperature, dtype=np.float32)
    if x.ndim != 2 or temp.shape != (x.shape[0],):
        raise ValueError(f"target_tickets: expected logits [N, V] and temperature [N], got {x.shape}, {temp.shape}")
    if np.isnan(x).any() or (x == np.inf).any() or not np.isfinite(x).any(axis=1).all():
        raise ValueError("target_tickets: rows must have no NaN, no +inf and a finite entry (SPEC.md §3 OK rows)")
    if not (temp > 0).all():
        raise ValueError("target_tickets: temperatures must be > 0 (sampled rows)")
    n, v = x.shape
    rows = np.arange(n)
    g = order.first_k(x, 1)[:, 0]  # P1: §4.1 order, lowest ID among equal maxima
    m = x[rows, g]
    with np.errstate(all="ignore"):
        d = (x - m[:, None]).astype(np.float32)  # P2: fp32
        z = (d / temp[:, None]).astype(np.float32)  # P3: fp32 IEEE division (NaN only where d = -inf, T = +inf)
    z = np.where(d == -np.inf, np.float32(-np.inf), z)  # P3: d = -inf gives e = expf(-inf) = +0.0
    e = expf(z)  # P3
    width = 1 << max(v - 1, 0).bit_length()  # P4: N = 2^ceil(log2 V)
    w = np.zeros((n, width), dtype=np.float64)
    w[:, :v] = e.astype(np.float64)  # P4: exact
    s = tickets.pairwise_sum(w)  # P4: fp64 tree, adjacent pairs first
    c = np.floor((w[:, :v] * _P_SCALE) / s[:, None]).astype(np.int64)  # P5
    c[rows, g] += P_TICKETS - c.sum(axis=1)  # P6: the remainder R to the argmax
    return np.asarray(g, dtype=np.int64), c


# ----------------------------------------------------------------------------------------------------------- §11.2


def _row_class(x: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
    """§11.3 step 2: SPEC.md §3 restricted to the logits of each row of the last axis (0 = OK)."""
    cls = np.zeros(x.shape[:-1], dtype=np.int8)
    for cond, st in (
        (~np.isfinite(x).any(axis=-1), AcceptStatus.ZERO_MASS),
        ((x == np.inf).any(axis=-1), AcceptStatus.POS_INF_LOGIT),
        (np.isnan(x).any(axis=-1), AcceptStatus.NAN_LOGIT),
    ):  # lowest precedence first, so the highest wins
        cls[cond] = st
    return cls


def _draft_valid(tok: I64, ids: I64, tix: I64, v: int) -> npt.NDArray[np.bool_]:
    """§11.3 step 3: [B, D] validity of each draft's slots and token."""
    empty = (ids == EMPTY_ID) & (tix == 0)
    full = (ids >= 0) & (ids < v) & (tix >= 0)
    slots_ok = (empty | full).all(axis=-1)
    full_first = (full[..., :-1] | ~full[..., 1:]).all(axis=-1)  # no non-empty slot after an empty one
    ascending = (~(full[..., :-1] & full[..., 1:]) | (ids[..., :-1] < ids[..., 1:])).all(axis=-1)
    total = tix.sum(axis=-1) == TICKETS
    drawable = (full & (ids == tok[..., None]) & (tix >= 1)).any(axis=-1)
    return np.asarray(slots_ok & full_first & ascending & total & drawable, dtype=np.bool_)


# ----------------------------------------------------------------------------------------------------------- §11.3-8


def verify(
    target_logits: Any,
    target_temperature: Any,
    draft_tokens: Any,
    draft_status: Any,
    draft_ids: Any,
    draft_tickets: Any,
    seed: Any,
    round: Any,
    position: Any,
) -> Verdict:
    """Verify one speculation round per row, exactly as SPEC.md §11 defines (``accept-dyadic24-v1``).

    ``target_logits`` [B, D+1, V] fp32/fp16: row j scores position ``position + j``; ``target_temperature`` fp32
    [B] (or a scalar); the draft as the selector returned it per depth: ``draft_tokens`` [B, D], ``draft_status``
    [B, D], ``draft_ids`` / ``draft_tickets`` [B, D, K]; ``seed``, ``round``, ``position`` uint64 [B] (or scalars),
    ``position`` being that of draft 0. Caller errors raise TypeError / ValueError; bad row data fails its row.
    """
    x = _args.as_logits("target_logits", target_logits, min_shape=(1, 2, 1), dims="[B, D+1, V]")  # §11.2
    b, d1, v = x.shape
    d = d1 - 1
    temp = _args.as_temperature_rows("target_temperature", target_temperature, b)
    tok = _args.as_int_array("draft_tokens", draft_tokens, (b, d), -(1 << 31), (1 << 31) - 1)
    dst = _args.as_int_array("draft_status", draft_status, (b, d), -128, 127)
    ids = _args.as_int_array("draft_ids", draft_ids, (b, d, K), -(1 << 31), (1 << 31) - 1)
    tix = _args.as_int_array("draft_tickets", draft_tickets, (b, d, K), -(1 << 31), (1 << 31) - 1)
    seed64 = _args.as_uint64_rows("seed", seed, b)
    round64 = _args.as_uint64_rows("round", round, b)
    pos64 = _args.as_uint64_rows("position", position, b)

    # §11.3 step 1: n = leading OK drafts.
    failed_draft = dst != 0
    n = np.where(failed_draft.any(axis=1), failed_draft.argmax(axis=1), d)
    jj = np.arange(d1)[None, :]
    # §11.3 step 2: the class of the lowest target row j <= n that is not OK.
    cls = np.where(jj <= n[:, None], _row_class(x), 0)
    first_bad = (cls != 0).argmax(axis=1)
    target_status = cls[np.arange(b), first_bad]
    # §11.3 step 3: drafts j < n must be valid.
    invalid = ~_draft_valid(tok, ids, tix, v) & (jj[:, :d] < n[:, None])
    # §11.3 step 4: status by precedence.
    status = np.where(
        target_status != 0,
        target_status,
        np.where(
            np.isnan(temp) | (temp < 0),
            AcceptStatus.BAD_TEMPERATURE,
            np.where(invalid.any(axis=1), AcceptStatus.BAD_DRAFT, AcceptStatus.OK),
        ),
    ).astype(np.int8)
    ok = status == AcceptStatus.OK
    greedy = ok & (temp == 0)  # ±0.0
    sampled = ok & ~greedy

    # Target rows that are used: j <= n of OK rows. P1 for all of them, P2-P6 for sampled rows.
    used = ok[:, None] & (jj <= n[:, None])
    g = np.zeros((b, d1), dtype=np.int64)
    big_p = np.zeros((b, d1, v), dtype=np.int64)
    if used.any():
        g[used] = order.first_k(x[used], 1)[:, 0]
    use_p = used & sampled[:, None]
    if use_p.any():
        _, big_p[use_p] = target_tickets(x[use_p], np.broadcast_to(temp[:, None], (b, d1))[use_p])

    # §11.6: acceptance, depth by depth, while every earlier draft was accepted.
    accepted = np.zeros(b, dtype=np.int64)
    alive = ok.copy()
    for j in range(d):
        test = alive & (j < n)
        acc = np.zeros(b, dtype=bool)
        rg = np.flatnonzero(test & greedy)
        acc[rg] = tok[rg, j] == g[rg, j]  # T0: accept iff x_j = g_j
        rs = np.flatnonzero(test & sampled)
        if rs.size:
            xj = tok[rs, j]
            q_x = (tix[rs, j] * (ids[rs, j] == xj[:, None])).sum(axis=1)  # Q_j(x_j) >= 1 (valid draft)
            s = q_x.astype(np.uint64) << np.uint64(Q_SHIFT)
            u = philox.uniform_below(seed64[rs], round64[rs], (pos64[rs] + np.uint64(j)), DOMAIN_ACCEPT, s)
            acc[rs] = u < big_p[rs, j, xj].astype(np.uint64)  # exact integer comparison
        accepted += acc
        alive &= acc

    # §11.7: the token at index a: correction (a < n) or bonus (a = n).
    token_a = np.full(b, EMPTY_ID, dtype=np.int64)
    rg = np.flatnonzero(greedy)
    token_a[rg] = g[rg, accepted[rg]]
    rs = np.flatnonzero(sampled)
    if rs.size:
        a = accepted[rs]
        pa = big_p[rs, a]  # [n, V]
        qa = np.zeros_like(pa)
        rej = np.flatnonzero(a < n[rs])  # draft a was rejected: subtract its q
        if rej.size:
            slot_ids = ids[rs[rej], a[rej]]
            slot_tix = tix[rs[rej], a[rej]]
            rr, kk = np.nonzero(slot_ids >= 0)
            qa[rej[rr], slot_ids[rr, kk]] = slot_tix[rr, kk]
        r = np.maximum(pa - (qa << Q_SHIFT), 0)
        cum = np.cumsum(r, axis=1)  # exact, <= 2^40
        u = philox.uniform_below(
            seed64[rs], round64[rs], pos64[rs] + a.astype(np.uint64), DOMAIN_RESIDUAL, cum[:, -1].astype(np.uint64)
        )
        token_a[rs] = (cum <= u.astype(np.int64)[:, None]).sum(axis=1)  # smallest y with U < C(y)

    tokens = np.full((b, d1), EMPTY_ID, dtype=np.int32)
    tokens[:, :d] = np.where((jj[:, :d] < accepted[:, None]) & ok[:, None], tok, EMPTY_ID)
    rows = np.flatnonzero(ok)
    tokens[rows, accepted[rows]] = token_a[rows]
    return Verdict(
        status=status,
        accepted=np.where(ok, accepted, -1).astype(np.int32),
        tokens=tokens,
    )
