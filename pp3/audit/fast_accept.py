"""The bulk audit's verifier: ``pp3.reference.verify``'s bits (SPEC.md §11, ``accept-dyadic24-v1``), computed faster.
NumPy only.

``verify`` has the reference's signature (and ``bf16_bits``, for bf16 rows as bit patterns) and returns its outputs
bit for bit; ``tests/test_fast_accept.py`` checks that by equality against ``pp3.reference.accept`` (the definition),
path by path. The shortcuts, each of which leaves every output bit as it is:

- §11.4 is evaluated only for the target rows whose values reach an output: g_j of a T0 row and P_j of a sampled row
  for the rows j whose §11.6 test runs (j < n, every earlier draft accepted), and for the row a of §11.7. Every other
  row j <= n of an OK row has no bit in the verdict.
- §11.3 step 2's classes from one NaN-propagating maximum per fp32 row, or from the bits of an fp16 or bf16 row
  (``target_class``); fp16 and bf16 rows (bf16 given as its bit patterns, ``verify(..., bf16_bits=True)``) are
  widened (exactly, §2.1) only where §11.4 reads them.
- P1 is the lowest ID among the entries equal (``==``, so -0.0 = +0.0) to the row's largest value, which is the
  first entry in the §4.1 order of a NaN-free row.
- P3's exponential (§6) is NumPy's fp64 exp where a rounding test shows that its fl32 is §6's value, and §6's own
  steps elsewhere (``expf``: about 2^-16 of the inputs; ``make audit-exp`` checks it on every input).
- Rows go through P1-P6 in blocks (rows of at most 2^15 entries many at a time, larger rows alone in aligned blocks of
  2^15 entries, whose trees are P4's lower levels); every step is elementwise or a reduction over one row, so no bit
  depends on the blocks.
- The residual of a rejected draft a (§11.7) is P_a with Q_a 2^16 subtracted at the draft's own slots (a valid draft's
  IDs are distinct), instead of a dense Q* over the vocabulary; P_a is the one its acceptance test computed; its
  token is found by bisection of the cumulative sums.

Time per request of ``pp3.audit.accept_bulk``'s rows at V = 163840 (``python -m bench.fast_accept``: its first
twelve batch layouts, 16 rows each, depths 1-8, fp32 / fp16 / bf16, every plan; 2-core x86-64 CPU, 2026-12-07,
process CPU time): 8.5-9.4 ms before the exponential's rounding test, the classes by the maximum, the blocks of
2^15 and the lazy fp16 rows, 4.2-4.6 ms after; the lazy bf16 rows then took another machine's 3.15 ms to 2.45.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import _args, bf16_bits_to_float32, exponential, philox, tickets
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

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

_P_SCALE = np.float64(P_TICKETS)  # 2^40: w * 2^40 is exact for every fp64 w that came from an fp32 value


# ----------------------------------------------------------------------------------------------------------- §11.4


# +inf's bits in the 16-bit formats (-inf: the sign bit too); NaNs are the magnitudes above it
_INF16 = {np.dtype(np.float16): np.uint16(0x7C00), np.dtype(np.uint16): np.uint16(0x7F80)}  # fp16, bf16 bits
_SIGN16 = np.uint16(0x8000)


def widen(x: npt.NDArray[Any]) -> F32:
    """Rows of this module's target (fp32; fp16; uint16: bf16 bit patterns) as fp32, exactly (§2.1)."""
    if x.dtype == np.uint16:
        return bf16_bits_to_float32(x)
    return np.asarray(x, dtype=np.float32)


def target_class(x: npt.NDArray[Any]) -> npt.NDArray[np.int8]:
    """``pp3.reference.accept.target_class`` (§11.3 step 2, §3's precedence) of fp32 rows, fp16 rows or bf16 rows
    given as uint16 bit patterns. fp32: from one NaN-propagating maximum per row (NaN is the maximum iff the row
    holds a NaN; else +inf iff it holds +inf; else every entry is -inf or finite, and none is finite iff the maximum
    is -inf). fp16 and bf16 (NumPy's fp16 maximum is slow), from the bits, which widening keeps in class: NaN iff a
    magnitude exceeds +inf's, +inf, every entry -inf."""
    if x.dtype in _INF16:
        bits, inf = x.view(np.uint16), _INF16[x.dtype]
        nan = ((bits & np.uint16(0x7FFF)) > inf).any(axis=-1)
        pos_inf, no_finite = (bits == inf).any(axis=-1), (bits == (inf | _SIGN16)).all(axis=-1)
    else:
        top = x.max(axis=-1)  # np.maximum propagates NaN
        nan, pos_inf, no_finite = np.isnan(top), top == np.inf, top == -np.inf
    cls = np.select([nan, pos_inf, no_finite],
                    [AcceptStatus.NAN_LOGIT, AcceptStatus.POS_INF_LOGIT, AcceptStatus.ZERO_MASS], AcceptStatus.OK)
    return np.asarray(cls, dtype=np.int8)


def _argmax(x: F32) -> I64:
    """§11.4 P1 on NaN-free rows [..., V] with a finite entry: g, the first entry in the §4.1 order, i.e. the lowest
    ID among the entries equal (``==``, so -0.0 = +0.0) to the row's largest value (``order.first_k(x, 1)``)."""
    return np.asarray(np.argmax(x == x.max(axis=-1, keepdims=True), axis=-1), dtype=np.int64)


# An fp64 exp within this relative distance of e^z (NumPy's errs by a few fp64 ulps, ~2^-51) cannot move a value
# that ``expf`` decides; about 2^-16 of the inputs are left undecided and take §6's own steps.
EXP_MARGIN = np.float64(2.0**-40)
_EXP_BLOCK = 1 << 14  # entries per pass of expf (its fp64 temporaries stay in the CPU's caches)


def expf(z: F32, margin: np.float64 = EXP_MARGIN) -> F32:
    """§6's expf (``pp3.reference.exponential.expf``), bit for bit, for fp32 z <= 0 (-inf and -0.0 included): y =
    NumPy's fp64 exp of z, decided where fl32(fl64(y (1 - margin))) = fl32(fl64(y (1 + margin))); the rest by §6's
    steps. Why that is §6's value: §6 returns the correctly rounded fl32(e^z) on every such z (``make audit-exp``),
    fl32 is monotone, and if |y - e^z| <= (margin - 2^-51) e^z both products bracket e^z, so fl32(e^z) equals
    their common value, which fl32(y) equals too. ``stats/audit_exp.py`` checks this function against §6's on every
    input; ``tests/test_fast_accept.py`` on a sample, and that an exp erring by more than the margin is caught."""
    z32 = np.asarray(z, dtype=np.float32)
    flat = z32.reshape(-1)
    out = np.empty(flat.shape, dtype=np.float32)
    undecided = np.zeros(flat.shape, dtype=np.bool_)
    below, above = np.float64(1.0) - margin, np.float64(1.0) + margin
    for lo in range(0, flat.size, _EXP_BLOCK):
        y = np.exp(flat[lo : lo + _EXP_BLOCK].astype(np.float64))
        out[lo : lo + _EXP_BLOCK] = y  # fl32(y), round to nearest even
        np.not_equal((y * below).astype(np.float32), (y * above).astype(np.float32),
                     out=undecided[lo : lo + _EXP_BLOCK])
    if undecided.any():
        out[undecided] = exponential.expf(flat[undecided])
    return out.reshape(z32.shape)


def _weights(x: F32, m: F32 | np.float32, temperature: F32 | np.float32) -> F32:
    """§11.4 P2-P3, entry by entry: the fp32 weights e of fp32 logits ``x``, m = x[g] and T > 0 broadcast to x."""
    with np.errstate(all="ignore"):
        d = x - m  # P2: fp32
        z = d / temperature  # P3: fp32 IEEE division (NaN only where d = -inf, T = +inf)
    z[d == -np.inf] = -np.inf  # P3: d = -inf gives e = expf(-inf) = +0.0
    return expf(z)  # P3


_BLOCK = 1 << 15  # entries per step of _tickets: small rows (V <= 2^15) go many at a time, each larger row alone, in
# aligned blocks of 2^15 entries (no fp64 array of a whole row, let alone of 2^ceil(log2 V) entries per row)


def _tickets(x: npt.NDArray[Any], temp: F32) -> tuple[I64, I64]:
    """§11.4 P1-P6 on OK rows ``x`` [N, V] (fp32, or fp16 or bf16 bits widened here) with temperatures ``temp`` [N] > 0:
    (g [N], P [N, V]), ``target_tickets`` without its checks. Every step is elementwise or a reduction over one row,
    so no bit depends on how rows are grouped."""
    n, v = x.shape
    width = 1 << max(v - 1, 0).bit_length()  # P4: N = 2^ceil(log2 V)
    g = np.empty(n, dtype=np.int64)
    c = np.empty((n, v), dtype=np.int64)
    if width > _BLOCK:
        for i in range(n):
            g[i] = _row_tickets(widen(x[i]), temp[i], width, c[i])
        return g, c
    step = _BLOCK // width
    for lo in range(0, n, step):
        xb = widen(x[lo : lo + step])
        tb, gb, cb = temp[lo : lo + step], g[lo : lo + step], c[lo : lo + step]
        rows = np.arange(xb.shape[0])
        gb[:] = _argmax(xb)  # P1: §4.1 order, lowest ID among equal maxima
        w = np.zeros((rows.size, width), dtype=np.float64)  # P4: padded with +0.0
        w[:, :v] = _weights(xb, xb[rows, gb][:, None], tb[:, None])  # P2-P3; P4: exact
        s = tickets.pairwise_sum(w)  # P4: fp64 tree, adjacent pairs first
        q = np.multiply(w[:, :v], _P_SCALE, out=w[:, :v])  # P5: fl64(w_y 2^40), exact (in place: w is not read again)
        cb[:] = np.floor(np.divide(q, s[:, None], out=q), out=q).astype(np.int64)  # P5: c_y = floor(fl64(. / S))
        cb[rows, gb] += P_TICKETS - cb.sum(axis=1)  # P6: the remainder R to the argmax
    return g, c


def _row_tickets(x: F32, t: np.float32, width: int, c: I64) -> int:
    """§11.4 P1-P6 of one OK row ``x`` [V] with ``width`` = 2^ceil(log2 V) > ``_BLOCK``: writes P into ``c`` [V],
    returns g. P4's tree over the row padded to ``width`` is, level by level, the trees of its aligned blocks of
    ``_BLOCK`` entries (each padded with +0.0), then the tree of their sums (padded with +0.0: a block past V sums to
    +0.0)."""
    v = x.size
    g = int(_argmax(x))  # P1
    m = x[g]
    e = np.empty(v, dtype=np.float32)
    sums = np.zeros(width // _BLOCK, dtype=np.float64)
    pad = np.zeros(_BLOCK, dtype=np.float64)
    for k, lo in enumerate(range(0, v, _BLOCK)):
        eb = e[lo : lo + _BLOCK]
        eb[:] = _weights(x[lo : lo + _BLOCK], m, t)  # P2-P3
        pad[: eb.size] = eb  # P4: exact; a last, partial block is padded with +0.0
        pad[eb.size :] = 0.0
        sums[k] = tickets.pairwise_sum(pad)  # P4: the block's tree
    s = tickets.pairwise_sum(sums)  # P4: the tree above the blocks
    for lo in range(0, v, _BLOCK):  # P5: c_y = floor(fl64(fl64(w_y 2^40) / S)), w_y 2^40 exact
        q = e[lo : lo + _BLOCK].astype(np.float64)
        np.multiply(q, _P_SCALE, out=q)
        np.divide(q, s, out=q)
        c[lo : lo + _BLOCK] = np.floor(q, out=q)
    c[g] += P_TICKETS - int(c.sum())  # P6: the remainder R to the argmax
    return g


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
    *,
    bf16_bits: bool = False,
) -> Verdict:
    """``pp3.reference.verify``, bit for bit (same arguments, checks and outputs), by the shortcuts of this module.
    With ``bf16_bits``, ``target_logits`` are the uint16 bit patterns of bf16 logits (the reference's verdict on
    ``bf16_bits_to_float32(target_logits)``)."""
    # §11.2; fp16 and bf16 stay 16-bit here (each row this module reads is widened when it is read, exactly: §2.1)
    x = _args.check_logits("target_logits", target_logits, min_shape=(1, 2, 1), dims="[B, D+1, V]",
                           bf16_bits=bf16_bits)
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
    status = row_status(x, temp, tok, ids, tix, n, classes=target_class(x))  # §11.3 steps 2-4: the reference's own
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
        acc[rg] = tok[rg, j] == _argmax(widen(x[rg, j]))  # T0: accept iff x_j = g_j
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
    token_a[rg] = _argmax(widen(x[rg, accepted[rg]]))
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
        # smallest y with U < C(y): the number of y with C(y) <= U, C non-decreasing
        token_a[rs] = [np.searchsorted(cum[i], u[i], side="right") for i in range(rs.size)]

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
