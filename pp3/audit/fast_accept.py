"""The bulk audit's verifier: ``pp3.reference.verify``'s bits (SPEC.md §11, ``accept-dyadic24-v1``), computed faster.
NumPy only.

``verify`` has the reference's signature and returns its outputs bit for bit; ``tests/test_fast_accept.py`` checks
that by equality against ``pp3.reference.accept`` (the definition), path by path. The shortcuts, each of which leaves
every output bit as it is:

- §11.4 is evaluated only for the target rows whose values reach an output: g_j of a T0 row and P_j of a sampled row
  for the rows j whose §11.6 test runs (j < n, every earlier draft accepted), and for the row a of §11.7. Every other
  row j <= n of an OK row has no bit in the verdict.
- P1 is the lowest ID among the entries equal (``==``, so -0.0 = +0.0) to the row's largest value, which is the
  first entry in the §4.1 order of a NaN-free row.
- P2-P3 of fp16 and bf16 rows (every widened value has its low 13 mantissa bits zero: at most 2^19 distinct values, a
  few thousand in practice) are evaluated once per distinct value and gathered: e_y depends on the bits of x_y alone.
- Rows go through P1-P6 in blocks of at most max(1, 2^18 / 2^ceil(log2 V)) rows (no [rows, 2^ceil(log2 V)] fp64 array
  for every row at once); every step is elementwise or a reduction over one row, so no bit depends on the blocks.
- The residual of a rejected draft a (§11.7) is P_a with Q_a 2^16 subtracted at the draft's own slots (a valid draft's
  IDs are distinct), instead of a dense Q* over the vocabulary; P_a is the one its acceptance test computed.

Time per depth-5 request at V = 163840 (2-core x86-64 CPU, 2026-12-01; sampled rows, T = 1, one spiked target row
per position and drafts from ``pp3.reference.propose`` on the target plus noise, about 3 accepted drafts per request;
a batch of 8 requests per call, median of 5 calls, process CPU time): the plain reference 46 ms (fp32 logits) and
49 ms (bf16), this module 21 ms (fp32) and 12 ms (bf16).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import _args, philox, tickets
from pp3.reference._constants import (
    DOMAIN_ACCEPT,
    DOMAIN_RESIDUAL,
    EMPTY_ID,
    P_TICKETS,
    Q_SHIFT,
    AcceptStatus,
    K,
)
from pp3.reference.accept import Verdict, draft_length, row_status
from pp3.reference.exponential import expf

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

_P_SCALE = np.float64(P_TICKETS)  # 2^40: w * 2^40 is exact for every fp64 w that came from an fp32 value


# ----------------------------------------------------------------------------------------------------------- §11.4


def _argmax(x: F32) -> I64:
    """§11.4 P1 on NaN-free rows [..., V] with a finite entry: g, the first entry in the §4.1 order, i.e. the lowest
    ID among the entries equal (``==``, so -0.0 = +0.0) to the row's largest value (``order.first_k(x, 1)``)."""
    return np.asarray(np.argmax(x == x.max(axis=-1, keepdims=True), axis=-1), dtype=np.int64)


def _weights(x: F32, m: F32 | np.float32, temperature: F32 | np.float32) -> F32:
    """§11.4 P2-P3, entry by entry: the fp32 weights e of fp32 logits ``x``, m = x[g] and T > 0 broadcast to x."""
    with np.errstate(all="ignore"):
        d = x - m  # P2: fp32
        z = d / temperature  # P3: fp32 IEEE division (NaN only where d = -inf, T = +inf)
    z[d == -np.inf] = -np.inf  # P3: d = -inf gives e = expf(-inf) = +0.0
    return expf(z)  # P3


_NARROW_BITS = 13  # the low fp32 mantissa bits that are zero in every widened fp16 or bf16 value (10 and 7 kept)
_NARROW_MASK = np.uint32((1 << _NARROW_BITS) - 1)
_TABLE_MIN_V = 1 << 15  # the rows for which a table of distinct values is cheaper than expf of every entry


def _row_weights(x: F32, m: np.float32, temperature: np.float32) -> F32:
    """``_weights`` of one row [V], bit for bit. e_y depends on the bits of x_y alone, so where every entry has its
    low 13 mantissa bits zero (fp16 and bf16 logits, widened: at most 2^19 distinct values, a few thousand in
    practice) each distinct value is evaluated once by ``_weights`` and its weight gathered."""
    bits = x.view(np.uint32)
    if (bits & _NARROW_MASK).any():
        return _weights(x, m, temperature)
    code = np.right_shift(bits, _NARROW_BITS, dtype=np.intp)  # x_y is the fp32 value with bits code_y << 13
    seen = np.zeros(1 << (32 - _NARROW_BITS), dtype=bool)
    seen[code] = True
    present = np.flatnonzero(seen)
    table = np.empty(seen.shape, dtype=np.float32)
    table[present] = _weights((present.astype(np.uint32) << np.uint32(_NARROW_BITS)).view(np.float32), m, temperature)
    return np.take(table, code)


_BLOCK = 1 << 18  # padded entries per pass of _tickets: small rows go many at a time, large rows one at a time
# (no [N, 2^ceil(log2 V)] fp64 array for all rows at once)


def _tickets(x: F32, temp: F32) -> tuple[I64, I64]:
    """§11.4 P1-P6 on OK rows ``x`` [N, V] with temperatures ``temp`` [N] > 0: (g [N], P [N, V]), ``target_tickets``
    without its checks. Rows go in blocks of at most max(1, 2^18 / 2^ceil(log2 V)); every step is elementwise or a
    reduction over one row, so no bit depends on the blocks."""
    n, v = x.shape
    width = 1 << max(v - 1, 0).bit_length()  # P4: N = 2^ceil(log2 V)
    g = np.empty(n, dtype=np.int64)
    c = np.empty((n, v), dtype=np.int64)
    step = max(1, _BLOCK // width)
    for lo in range(0, n, step):
        xb, tb, gb, cb = x[lo : lo + step], temp[lo : lo + step], g[lo : lo + step], c[lo : lo + step]
        rows = np.arange(xb.shape[0])
        gb[:] = _argmax(xb)  # P1: §4.1 order, lowest ID among equal maxima
        m = xb[rows, gb]
        w = np.zeros((rows.size, width), dtype=np.float64)  # P4: padded with +0.0
        if v >= _TABLE_MIN_V:
            for i in rows.tolist():
                w[i, :v] = _row_weights(xb[i], m[i], tb[i])  # P2-P3; P4: exact
        else:
            w[:, :v] = _weights(xb, m[:, None], tb[:, None])  # P2-P3; P4: exact
        s = tickets.pairwise_sum(w)  # P4: fp64 tree, adjacent pairs first
        q = np.multiply(w[:, :v], _P_SCALE, out=w[:, :v])  # P5: fl64(w_y 2^40), exact (in place: w is not read again)
        cb[:] = np.floor(np.divide(q, s[:, None], out=q), out=q).astype(np.int64)  # P5: c_y = floor(fl64(. / S))
        cb[rows, gb] += P_TICKETS - cb.sum(axis=1)  # P6: the remainder R to the argmax
    return g, c


def target_tickets(logits: npt.NDArray[np.float32], temperature: npt.NDArray[np.float32]) -> tuple[I64, I64]:
    """``pp3.reference.target_tickets`` (§11.4 P1-P6 for OK sampled rows), bit for bit, by ``_tickets``."""
    x = np.asarray(logits, dtype=np.float32)
    temp = np.asarray(temperature, dtype=np.float32)
    if x.ndim != 2 or temp.shape != (x.shape[0],):
        raise ValueError(f"target_tickets: expected logits [N, V] and temperature [N], got {x.shape}, {temp.shape}")
    if np.isnan(x).any() or (x == np.inf).any() or not np.isfinite(x).any(axis=1).all():
        raise ValueError("target_tickets: rows must have no NaN, no +inf and a finite entry (SPEC.md §3 OK rows)")
    if not (temp > 0).all():
        raise ValueError("target_tickets: temperatures must be > 0 (sampled rows)")
    return _tickets(x, temp)


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
    """``pp3.reference.verify``, bit for bit (same arguments, checks and outputs), by the shortcuts of this module."""
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

    n = draft_length(dst)  # §11.3 step 1
    status = row_status(x, temp, tok, ids, tix, n)  # §11.3 steps 2-4: the reference's own
    ok = status == AcceptStatus.OK
    greedy = ok & (temp == 0)  # ±0.0
    sampled = ok & ~greedy

    # §11.4 only for the target rows whose values reach an output (the module docstring says why no bit changes).
    rejected_p: dict[int, I64] = {}  # row -> P_a of its rejected draft a: what §11.7 reads
    # §11.6: acceptance, depth by depth, while every earlier draft was accepted.
    accepted = np.zeros(b, dtype=np.int64)
    alive = ok.copy()
    for j in range(d):
        test = alive & (j < n)
        acc = np.zeros(b, dtype=bool)
        rg = np.flatnonzero(test & greedy)
        acc[rg] = tok[rg, j] == _argmax(x[rg, j])  # T0: accept iff x_j = g_j
        rs = np.flatnonzero(test & sampled)
        if rs.size:
            xj = tok[rs, j]
            q_x = (tix[rs, j] * (ids[rs, j] == xj[:, None])).sum(axis=1)  # Q_j(x_j) >= 1 (valid draft)
            s = q_x.astype(np.uint64) << np.uint64(Q_SHIFT)
            u = philox.uniform_below(seed64[rs], round64[rs], (pos64[rs] + np.uint64(j)), DOMAIN_ACCEPT, s)
            _, p_j = _tickets(x[rs, j], temp[rs])  # §11.4 of the tested rows
            acc[rs] = u < p_j[np.arange(rs.size), xj].astype(np.uint64)  # exact integer comparison
            rej = np.flatnonzero(~acc[rs])
            rejected_p.update(zip(rs[rej].tolist(), p_j[rej], strict=True))
        accepted += acc
        alive &= acc

    # §11.7: the token at index a: correction (a < n) or bonus (a = n).
    token_a = np.full(b, EMPTY_ID, dtype=np.int64)
    rg = np.flatnonzero(greedy)
    token_a[rg] = _argmax(x[rg, accepted[rg]])
    rs = np.flatnonzero(sampled)
    if rs.size:
        a = accepted[rs]
        rej = np.flatnonzero(a < n[rs])  # draft a was rejected: P_a is its test's; subtract its q
        bonus = np.flatnonzero(a == n[rs])  # every draft accepted: P_n is new
        r = np.empty((rs.size, v), dtype=np.int64)
        r[bonus] = _tickets(x[rs[bonus], a[bonus]], temp[rs[bonus]])[1]
        if rej.size:
            r[rej] = np.stack([rejected_p[i] for i in rs[rej].tolist()])
            slot_ids = ids[rs[rej], a[rej]]
            slot_tix = tix[rs[rej], a[rej]]
            rr, kk = np.nonzero(slot_ids >= 0)
            r[rej[rr], slot_ids[rr, kk]] -= slot_tix[rr, kk] << Q_SHIFT  # a valid draft's IDs are distinct
        np.maximum(r, 0, out=r)  # r = max(0, P_a - Q_a 2^16)
        cum = np.cumsum(r, axis=1, out=r)  # exact, <= 2^40
        u = philox.uniform_below(
            seed64[rs], round64[rs], pos64[rs] + a.astype(np.uint64), DOMAIN_RESIDUAL, cum[:, -1].astype(np.uint64)
        )
        token_a[rs] = (cum <= u.astype(np.int64)[:, None]).sum(axis=1)  # smallest y with U < C(y)

    jj = np.arange(d1)[None, :]
    tokens = np.full((b, d1), EMPTY_ID, dtype=np.int32)
    tokens[:, :d] = np.where((jj[:, :d] < accepted[:, None]) & ok[:, None], tok, EMPTY_ID)
    rows = np.flatnonzero(ok)
    tokens[rows, accepted[rows]] = token_a[rows]
    return Verdict(
        status=status,
        accepted=np.where(ok, accepted, -1).astype(np.int32),
        tokens=tokens,
    )
