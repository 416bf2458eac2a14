"""The reference verifier: SPEC.md §11 (semantic ID ``accept-dyadic24-v1``) in NumPy, clause by clause. Imports
neither torch nor triton.

This module is the definition executed on the CPU. Each function is one clause, with SPEC's names (n, g_j, m, d, e,
w, S, c, R, P_j, Q_j, s_j, U_j, a, Q*, r, Σr, C), and each step cites its clause; nothing is skipped, tabled or
reordered for speed: §11.4 is evaluated for every target row j <= n of every sampled OK row, over the whole row, and
the residual of §11.7 over the whole vocabulary. The rows of a batch are independent (§11.11), so every step works
on all of them at once. It holds the target tickets of a call, 8 bytes per target entry; ``pp3.audit.fast_accept``
computes the same bits faster (tested equal to this module by ``tests/test_fast_accept.py``).

Sections: §11.3 ``draft_length``, ``target_class``, ``draft_valid``, ``row_status``; §11.4 ``argmax``, ``weights``,
``target_tickets``; §11.5 ``philox.uniform_below``; §11.6 ``acceptance``; §11.7 ``correction_or_bonus``; §11.8
``outputs``; §11.2-§11.8 ``verify``.
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

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Bool = npt.NDArray[np.bool_]

_TWO_40 = np.float64(P_TICKETS)  # P5: w_y * 2^40 is exact for every w_y that came from an fp32 value


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Per-row outputs (§11.8). An OK row emits ``accepted + 1`` tokens; a failed row has ``accepted = -1``."""

    status: npt.NDArray[np.int8]  # [B] AcceptStatus values
    accepted: npt.NDArray[np.int32]  # [B] accepted drafts a (0 .. D), -1 for failed rows
    tokens: npt.NDArray[np.int32]  # [B, D+1] drafts 0 .. a-1, then the correction or bonus, then -1


def q_of(ids: I64, tix: I64, y: I64) -> I64:
    """§11.2: Q_j(y), the tickets of the slot of draft j whose ID is y, and 0 if no slot has ID y (``ids``, ``tix``
    [..., K], ``y`` [...])."""
    return np.asarray(np.where(ids == y[..., None], tix, 0).sum(axis=-1), dtype=np.int64)


# ----------------------------------------------------------------------------------------------------------- §11.3


def draft_length(draft_status: I64) -> I64:
    """§11.3 step 1: n [B], the number of leading drafts with draft_status = OK (0): the smallest j with
    draft_status[j] != 0, or D if there is none."""
    failed = draft_status != AcceptStatus.OK
    d = draft_status.shape[1]
    return np.asarray(np.where(failed.any(axis=1), failed.argmax(axis=1), d), dtype=np.int64)


def target_class(x: F32) -> npt.NDArray[np.int8]:
    """§11.3 step 2: the class of each target row (last axis: its V logits), SPEC.md §3 restricted to the logits,
    with §3's precedence: NAN_LOGIT, then POS_INF_LOGIT, then ZERO_MASS, else OK (0)."""
    cls = np.select(
        [np.isnan(x).any(axis=-1), (x == np.inf).any(axis=-1), ~np.isfinite(x).any(axis=-1)],
        [AcceptStatus.NAN_LOGIT, AcceptStatus.POS_INF_LOGIT, AcceptStatus.ZERO_MASS],
        AcceptStatus.OK,
    )
    return np.asarray(cls, dtype=np.int8)


def draft_valid(x: I64, ids: I64, tix: I64, v: int) -> Bool:
    """§11.3 step 3: whether each draft (``x`` [B, D] tokens, ``ids``/``tix`` [B, D, K] slots) is valid over a
    vocabulary of V IDs."""
    empty = (ids == EMPTY_ID) & (tix == 0)
    non_empty = (ids >= 0) & (ids < v) & (tix >= 0)
    every_slot = (empty | non_empty).all(axis=-1)  # each slot is empty or non-empty
    non_empty_first = (non_empty[..., :-1] | ~non_empty[..., 1:]).all(axis=-1)  # no non-empty slot after another one
    ascending = (~(non_empty[..., :-1] & non_empty[..., 1:]) | (ids[..., :-1] < ids[..., 1:])).all(axis=-1)
    sum_is_2_24 = tix.sum(axis=-1) == TICKETS  # in 64-bit integers
    drawable = (non_empty & (ids == x[..., None]) & (tix >= 1)).any(axis=-1)  # Q_j(x_j) >= 1
    return np.asarray(every_slot & non_empty_first & ascending & sum_is_2_24 & drawable, dtype=np.bool_)


def row_status(
    target: F32, temperature: F32, x: I64, ids: I64, tix: I64, n: I64, classes: npt.NDArray[np.int8] | None = None
) -> npt.NDArray[np.int8]:
    """§11.3 step 4: the status of each row [B], the first that applies: the class of its lowest target row
    j <= n whose class is not OK (whatever the drafts below it), BAD_TEMPERATURE, BAD_DRAFT (some draft j < n is
    not valid, greedy and sampled rows alike), else OK. ``classes`` [B, D+1]: ``target_class(target)``, where the
    caller has computed it by other means (``pp3.audit.fast_accept``)."""
    b, d1, v = target.shape
    j = np.arange(d1)[None, :]
    cls = np.where(j <= n[:, None], target_class(target) if classes is None else classes, AcceptStatus.OK)  # step 2
    lowest_bad = np.argmax(cls != AcceptStatus.OK, axis=1)
    target_status = cls[np.arange(b), lowest_bad]
    bad_temperature = np.isnan(temperature) | (temperature < 0)
    bad_draft = (~draft_valid(x, ids, tix, v) & (j[:, :-1] < n[:, None])).any(axis=1)  # step 3: drafts 0 .. n-1
    status = np.select(
        [target_status != AcceptStatus.OK, bad_temperature, bad_draft],
        [target_status, AcceptStatus.BAD_TEMPERATURE, AcceptStatus.BAD_DRAFT],
        AcceptStatus.OK,
    )
    return np.asarray(status, dtype=np.int8)


# ----------------------------------------------------------------------------------------------------------- §11.4


def argmax(x: F32) -> I64:
    """§11.4 P1: g [N] of rows [N, V] without NaN and with a finite entry: the first entry in the §4.1 order (largest
    value, lowest ID among equal values, -0.0 = +0.0)."""
    return order.first_k(x, 1)[:, 0]


def weights(x: F32, m: F32, temperature: F32) -> F32:
    """§11.4 P2-P3: the fp32 weights e [N, V] of rows ``x`` [N, V], with m [N] = x[g] and T [N] > 0."""
    with np.errstate(all="ignore"):
        d = x - m[:, None]  # P2: d_y = fl32(x_y - m), -inf for a masked logit or an overflowing difference
        z = d / temperature[:, None]  # P3: fl32(d_y / T), fp32 IEEE division (NaN where d = -inf, T = +inf: unused)
    masked = d == -np.inf
    e = np.zeros(x.shape, dtype=np.float32)  # P3: e_y = +0.0 where d_y = -inf
    e[~masked] = expf(z[~masked])  # P3: otherwise e_y = expf(z), §6
    return e


def target_tickets(logits: npt.NDArray[np.float32], temperature: npt.NDArray[np.float32]) -> tuple[I64, I64]:
    """§11.4 P1-P6 for target rows that are OK and sampled: (g [N], P [N, V] int64 tickets of 2^40, each row summing
    to 2^40).

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
    rows, v = x.shape
    if rows == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, v), dtype=np.int64)
    g = argmax(x)  # P1
    m = x[np.arange(rows), g]  # P1: finite
    e = weights(x, m, temp)  # P2-P3
    n_pad = 1 << (v - 1).bit_length()  # P4: N = 2^ceil(log2 V)
    w = np.zeros((rows, n_pad), dtype=np.float64)  # P4: padded with w = +0.0
    w[:, :v] = e  # P4: w_y = fl64(e_y), exact
    s = tickets.pairwise_sum(w)  # P4: S, the fp64 pairwise tree of §5 step 4, adjacent pairs first
    c = np.floor((w[:, :v] * _TWO_40) / s[:, None]).astype(np.int64)  # P5: c_y = floor(fl64(fl64(w_y 2^40) / S))
    r = P_TICKETS - c.sum(axis=1)  # P6: R = 2^40 - Σ c_y, exact
    p = c  # P6: P(y) = c_y ...
    p[np.arange(rows), g] += r  # P6: ... and P(g) = c_g + R
    return g, p


def target_distributions(
    target: F32, temperature: F32, n: I64, ok: Bool, sampled: Bool
) -> tuple[I64, I64]:
    """§11.4 for every target row j <= n: g [B, D+1] (P1) of every OK row, and P [B, D+1, V] (P1-P6) of every
    sampled row; -1 and 0 elsewhere (rows j > n, failed rows, P of T0 rows: never read)."""
    b, d1, v = target.shape
    g = np.full((b, d1), EMPTY_ID, dtype=np.int64)
    p = np.zeros((b, d1, v), dtype=np.int64)
    for j in range(d1):
        rg = np.flatnonzero(ok & ~sampled & (j <= n))
        if rg.size:
            g[rg, j] = argmax(target[rg, j])  # T0 rows: P1 only
        rs = np.flatnonzero(sampled & (j <= n))
        if rs.size:
            g[rs, j], p[rs, j] = target_tickets(target[rs, j], temperature[rs])  # P1-P6
    return g, p


# ----------------------------------------------------------------------------------------------------------- §11.6


def acceptance(
    x: I64, ids: I64, tix: I64, n: I64, g: I64, p: I64, greedy: Bool, sampled: Bool, seed: U64, rnd: U64, pos: U64
) -> I64:
    """§11.6: a [B], the number of accepted drafts of each OK row (0 for failed rows). For j = 0 .. n-1, while
    every earlier draft was accepted: a T0 row accepts iff x_j = g_j; a sampled row draws
    U_j = uniform_below(acceptance stream of position + j, s_j), s_j = Q_j(x_j) 2^16, and accepts iff U_j < P_j(x_j)."""
    b, d = x.shape
    a = np.zeros(b, dtype=np.int64)
    testing = greedy | sampled  # the OK rows whose drafts 0 .. j-1 were all accepted
    for j in range(d):
        test = testing & (j < n)
        accepted = np.zeros(b, dtype=bool)
        rg = np.flatnonzero(test & greedy)
        accepted[rg] = x[rg, j] == g[rg, j]  # T0: x_j = g_j; no random numbers
        rs = np.flatnonzero(test & sampled)
        if rs.size:
            x_j = x[rs, j]
            s_j = q_of(ids[rs, j], tix[rs, j], x_j).astype(np.uint64) << np.uint64(Q_SHIFT)  # 2^16 <= s_j <= 2^40
            u_j = philox.uniform_below(seed[rs], rnd[rs], pos[rs] + np.uint64(j), DOMAIN_ACCEPT, s_j)  # §11.5
            accepted[rs] = u_j < p[rs, j, x_j].astype(np.uint64)  # exact integer comparison
        a += accepted
        testing &= accepted  # the first rejection ends the round
    return a


# ----------------------------------------------------------------------------------------------------------- §11.7


def correction_or_bonus(
    a: I64, ids: I64, tix: I64, n: I64, g: I64, p: I64, greedy: Bool, sampled: Bool, seed: U64, rnd: U64, pos: U64
) -> I64:
    """§11.7: the token at index a of each OK row [B] (-1 for failed rows): g_a for a T0 row; for a sampled row the
    smallest y with U < C(y), C the cumulative residual r = max(0, P_a - Q* 2^16) over the whole vocabulary,
    Q* = Q_a if draft a was rejected (a < n) and 0 if a = n, U = uniform_below(residual stream of position + a, Σr)."""
    b, _, v = p.shape
    token = np.full(b, EMPTY_ID, dtype=np.int64)
    rg = np.flatnonzero(greedy)
    token[rg] = g[rg, a[rg]]  # T0: the target's argmax at row a
    rs = np.flatnonzero(sampled)
    if rs.size == 0:
        return token
    a_s = a[rs]
    q_star = np.zeros((rs.size, v), dtype=np.int64)  # Q*(y) = 0 if a = n
    rejected = np.flatnonzero(a_s < n[rs])  # Q*(y) = Q_a(y) if a < n: each non-empty slot's tickets at its ID
    slot_ids, slot_tix = ids[rs[rejected], a_s[rejected]], tix[rs[rejected], a_s[rejected]]
    i, k = np.nonzero(slot_ids != EMPTY_ID)
    q_star[rejected[i], slot_ids[i, k]] = slot_tix[i, k]
    r = np.maximum(0, p[rs, a_s] - (q_star << Q_SHIFT))  # r(y) = max(0, P_a(y) - Q*(y) 2^16), exact
    sigma_r = r.sum(axis=1)  # Σr, 1 <= Σr <= 2^40
    u = philox.uniform_below(seed[rs], rnd[rs], pos[rs] + a_s.astype(np.uint64), DOMAIN_RESIDUAL,
                             sigma_r.astype(np.uint64))  # §11.5
    c = np.cumsum(r, axis=1)  # C(y) = r(0) + ... + r(y), exact; C(V-1) = Σr > U
    token[rs] = np.argmax(u.astype(np.int64)[:, None] < c, axis=1)  # the smallest y with U < C(y)
    return token


# ----------------------------------------------------------------------------------------------------------- §11.8


def outputs(status: npt.NDArray[np.int8], a: I64, x: I64, token_a: I64) -> Verdict:
    """§11.8: a failed row has accepted = -1 and every token -1; an OK row has accepted = a and tokens
    x_0 .. x_{a-1}, then the token at index a (§11.7), then -1."""
    b, d = x.shape
    ok = status == AcceptStatus.OK
    j = np.arange(d + 1)[None, :]
    tokens = np.full((b, d + 1), EMPTY_ID, dtype=np.int32)
    tokens[:, :d] = np.where(ok[:, None] & (j[:, :d] < a[:, None]), x, EMPTY_ID)
    rows = np.flatnonzero(ok)
    tokens[rows, a[rows]] = token_a[rows]
    return Verdict(status=status, accepted=np.where(ok, a, -1).astype(np.int32), tokens=tokens)


# ----------------------------------------------------------------------------------------------------------- §11.2


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
    # §11.2: caller errors raise before any work; other floating types are rounded to fp32, fp16 widened exactly.
    target = _args.as_logits("target_logits", target_logits, min_shape=(1, 2, 1), dims="[B, D+1, V]")
    b, d1, _ = target.shape
    d = d1 - 1
    temperature = _args.as_temperature_rows("target_temperature", target_temperature, b)
    x = _args.as_int_array("draft_tokens", draft_tokens, (b, d), -(1 << 31), (1 << 31) - 1)
    status_in = _args.as_int_array("draft_status", draft_status, (b, d), -(1 << 7), (1 << 7) - 1)
    ids = _args.as_int_array("draft_ids", draft_ids, (b, d, K), -(1 << 31), (1 << 31) - 1)
    tix = _args.as_int_array("draft_tickets", draft_tickets, (b, d, K), -(1 << 31), (1 << 31) - 1)
    seed64 = _args.as_uint64_rows("seed", seed, b)
    round64 = _args.as_uint64_rows("round", round, b)
    pos64 = _args.as_uint64_rows("position", position, b)

    n = draft_length(status_in)  # §11.3 step 1
    status = row_status(target, temperature, x, ids, tix, n)  # §11.3 steps 2-4
    ok = status == AcceptStatus.OK
    greedy = ok & (temperature == 0)  # §11.3: T0 iff the temperature is +0.0 or -0.0
    sampled = ok & ~greedy  # any value > 0, +inf included

    g, p = target_distributions(target, temperature, n, ok, sampled)  # §11.4
    a = acceptance(x, ids, tix, n, g, p, greedy, sampled, seed64, round64, pos64)  # §11.6
    token_a = correction_or_bonus(a, ids, tix, n, g, p, greedy, sampled, seed64, round64, pos64)  # §11.7
    return outputs(status, a, x, token_a)  # §11.8
