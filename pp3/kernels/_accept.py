"""Triton bodies of the verifier (SPEC.md §11). The launcher and argument checks live in ``accept.py``; the helpers
both operations use (widening, the §4.1 key, the §3 flags, ``_expf``, the pairwise tree) in ``_common.py``, with the
arithmetic model every exact-path kernel follows. One program verifies one request row; it walks the vocabulary in
tiles of TILE entries. Every sum but the §11.4 P4 tree is over integers (exact).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.random import philox_impl

from pp3.kernels._common import _bit_or, _expf, _flag_bits, _key_id, _order_key, _tree, _widen_bits

P_TICKETS_F = tl.constexpr(1099511627776.0)  # 2^40 as fp64: w * 2^40 is exact
P_TICKETS_I = tl.constexpr(1099511627776)  # 2^40
Q_TICKETS_I = tl.constexpr(16777216)  # 2^24


@triton.jit
def _weights(x: tl.tensor, m: tl.tensor, temp: tl.tensor, c_ptr: tl.tensor) -> tl.tensor:
    """§11.4 P2-P3 and the exact widening of P4: fp32 logits -> fp64 weights (0 where d = -inf)."""
    d = x - m  # P2: fp32
    z = tl.math.div_rn(d, temp)  # P3: IEEE fp32 division (NaN only where d = -inf and T = +inf)
    z = tl.where(d == float("-inf"), float("-inf"), z)  # P3: d = -inf -> expf(-inf) = +0.0
    return _expf(z, c_ptr).to(tl.float64)


@triton.jit
def _load_fp32(row_ptr: tl.tensor, offs: tl.tensor, mask: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    raw = tl.load(row_ptr + offs, mask=mask, other=0)
    return _widen_bits(raw, KIND).to(tl.float32, bitcast=True)


@triton.jit
def _load_one(row_ptr: tl.tensor, idx: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """One logit of a row, widened to fp32 (SPEC.md §2.1)."""
    return _widen_bits(tl.load(row_ptr + idx), KIND).to(tl.float32, bitcast=True)


@triton.jit
def _row_sum(
    row_ptr: tl.tensor,
    v: tl.tensor,
    m: tl.tensor,
    temp: tl.tensor,
    c_ptr: tl.tensor,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    TILE_LOG: tl.constexpr,
    NT: tl.constexpr,
    NT_LOG: tl.constexpr,
) -> tl.tensor:
    """§11.4 P4: S over the padded row, as aligned TILE subtrees combined by the same tree over NT tile sums
    (padding with zero sums: the tree over any larger power of two gives the same S)."""
    ti = tl.arange(0, NT)
    sums = tl.zeros([NT], tl.float64)
    for t in range(0, tl.cdiv(v, TILE)):
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        w = tl.where(in_row, _weights(_load_fp32(row_ptr, offs, in_row, KIND), m, temp, c_ptr), 0.0)
        sums = tl.where(ti == t, _tree(w, TILE, TILE_LOG), sums)
    return _tree(sums, NT, NT_LOG)


@triton.jit
def _floor_count(w: tl.tensor, s: tl.tensor) -> tl.tensor:
    """§11.4 P5: floor(fl64(fl64(w * 2^40) / S)) as int64 (the quotient is >= 0, so truncation is the floor)."""
    c: tl.tensor = ((w * P_TICKETS_F) / s).to(tl.int64)
    return c


@triton.jit
def _count_sum(
    row_ptr: tl.tensor,
    v: tl.tensor,
    m: tl.tensor,
    temp: tl.tensor,
    s: tl.tensor,
    c_ptr: tl.tensor,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
) -> tl.tensor:
    """§11.4 P6: the sum of the floor counts over the row (int64, exact)."""
    total = tl.zeros((), tl.int64)
    for t in range(0, tl.cdiv(v, TILE)):
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        c = _floor_count(_weights(_load_fp32(row_ptr, offs, in_row, KIND), m, temp, c_ptr), s)
        total += tl.sum(tl.where(in_row, c, 0))
    return total


@triton.jit
def _lemire_step(
    w: tl.tensor, s: tl.tensor, t: tl.tensor, out: tl.tensor, done: tl.tensor
) -> tuple[tl.tensor, tl.tensor]:
    """One word of §11.5: take floor(w * s / 2^64) if nothing was taken yet and (w * s mod 2^64) >= t."""
    lo = w * s  # the low word of the 128-bit product (uint64 multiplication wraps)
    take = (done == 0) & (lo >= t)
    return tl.where(take, tl.math.umulhi(w, s), out), tl.where(take, 1, done)


@triton.jit
def _residual(
    row_ptr: tl.tensor,
    offs: tl.tensor,
    in_row: tl.tensor,
    v: tl.tensor,
    m: tl.tensor,
    temp: tl.tensor,
    s: tl.tensor,
    g: tl.tensor,
    rem: tl.tensor,
    c_ptr: tl.tensor,
    ids_ptr: tl.tensor,
    tix_ptr: tl.tensor,
    sbase: tl.tensor,
    rejected: tl.tensor,
    KIND: tl.constexpr,
    K: tl.constexpr,
) -> tl.tensor:
    """§11.7 on one tile: r(y) = max(0, P(y) - Q*(y) * 2^16) (int64; 0 outside the row), Q* = the K slots at
    ``sbase`` if ``rejected``, else 0. The slots are read one by one (a [TILE, K] comparison would be 32x larger)."""
    c = _floor_count(_weights(_load_fp32(row_ptr, offs, in_row, KIND), m, temp, c_ptr), s)
    c += tl.where(offs == g, rem, 0)
    if rejected:
        for k in tl.static_range(K):
            sid = tl.load(ids_ptr + sbase + k)
            stq = tl.load(tix_ptr + sbase + k).to(tl.int64) << 16
            c = tl.where(offs == sid, tl.maximum(c - stq, 0), c)  # empty slots (id -1) match no entry
    return tl.where(in_row, c, 0)


@triton.jit
def _uniform_below(seed: tl.tensor, rnd: tl.tensor, pos: tl.tensor, domain: tl.tensor, s: tl.tensor) -> tl.tensor:
    """§11.5: an integer exactly uniform on 0 .. s-1 (1 <= s <= 2^40), Lemire's method on the stream's words.

    Words W_{4i+k} are word k of Philox4x64-10(counter = (rnd, pos, i, 0), key = (seed, domain)). The threshold
    t = 2^64 mod s is computed as ((2^64 - 1) mod s + 1) mod s, with no 65-bit value.
    """
    # s >= 1 already (§11.5). The max is for the compiler: Triton 3.6's axis analysis takes a scalar summed in a
    # loop from zero to be the constant 0 and crashes on the remainder by it (TritonGPUCoalesce fails).
    s = tl.maximum(s, 1)
    t = ((0xFFFFFFFFFFFFFFFF % s) + 1) % s
    out = tl.zeros((), tl.uint64)
    done = tl.zeros((), tl.int32)
    blk = tl.zeros((), tl.uint64)
    zero = tl.zeros((), tl.uint64)
    while done == 0:  # a word is rejected with probability < 2^-24
        w0, w1, w2, w3 = philox_impl(rnd, pos, blk, zero, seed, domain)
        out, done = _lemire_step(w0, s, t, out, done)
        out, done = _lemire_step(w1, s, t, out, done)
        out, done = _lemire_step(w2, s, t, out, done)
        out, done = _lemire_step(w3, s, t, out, done)
        blk += 1
    return out


@triton.jit
def _verify_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits: int32 (fp32) or int16 (fp16 / bf16)
    stride_b: tl.tensor,  # elements between request rows of x
    stride_j: tl.tensor,  # elements between positions of x
    v: tl.tensor,  # vocabulary size V
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    tok_ptr: tl.tensor,  # [B, D] int32 draft tokens
    dst_ptr: tl.tensor,  # [B, D] int8 draft statuses
    ids_ptr: tl.tensor,  # [B, D, K] int32 draft slot IDs
    tix_ptr: tl.tensor,  # [B, D, K] int32 draft slot tickets
    seed_ptr: tl.tensor,  # [B] uint64 seed (int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position of draft 0 (int64 bits)
    c_ptr: tl.tensor,  # fp64 constants of SPEC.md §6 (layout: _common.C_*)
    dom_acc: tl.tensor,  # DOMAIN_ACCEPT (< 2^63, passed as int64)
    dom_res: tl.tensor,  # DOMAIN_RESIDUAL
    status_ptr: tl.tensor,  # [B] int8 out
    acc_ptr: tl.tensor,  # [B] int32 out: accepted drafts, -1 for failed rows
    out_ptr: tl.tensor,  # [B, D+1] int32 out: tokens
    D: tl.constexpr,  # proposal depth
    DP: tl.constexpr,  # power of two >= D + 1
    K: tl.constexpr,  # 32
    KIND: tl.constexpr,  # logits dtype (_common.KIND_*)
    TILE: tl.constexpr,  # vocabulary entries per tile, a power of two
    TILE_LOG: tl.constexpr,  # log2(TILE)
    NT: tl.constexpr,  # power of two >= the number of tiles (>= 2)
    NT_LOG: tl.constexpr,  # log2(NT)
) -> None:
    b = tl.program_id(0).to(tl.int64)
    jd = tl.arange(0, DP)
    slot = tl.arange(0, K)
    x_row = x_ptr + b * stride_b

    # 1. §11.3 step 1: n = leading OK drafts.
    dst = tl.load(dst_ptr + b * D + jd, mask=jd < D, other=0).to(tl.int32)
    n = tl.min(tl.where((dst != 0) & (jd < D), jd, D))

    # 2. §11.3 step 2 and §11.4 P1: per target row, its class and its argmax g (the largest §4.1 key).
    target_status = tl.zeros((), tl.int32)
    gvec = tl.zeros([DP], tl.int32)
    for j in range(0, D + 1):  # a runtime loop: one copy of the body in the binary
        flags = tl.zeros((), tl.int32)
        best = tl.zeros((), tl.uint64)
        for t in range(0, tl.cdiv(v, TILE)):
            offs = t * TILE + tl.arange(0, TILE)
            in_row = offs < v
            raw = tl.load(x_row + j * stride_j + offs, mask=in_row, other=0)
            bits = _widen_bits(raw, KIND)
            flags = flags | tl.reduce(tl.where(in_row, _flag_bits(bits), 0), 0, _bit_or)
            best = tl.maximum(best, tl.max(tl.where(in_row, _order_key(bits, offs), 0)))
        cls = tl.where((flags & 1) != 0, 1, tl.where((flags & 2) != 0, 2, tl.where((flags & 4) == 0, 3, 0)))
        target_status = tl.where((target_status == 0) & (j <= n), cls, target_status)  # the lowest bad j <= n
        gvec = tl.where(jd == j, _key_id(best), gvec)

    # 3. §11.3 step 3: validity of drafts j < n, and Q_j(x_j) for the acceptance test.
    temp = tl.load(temp_ptr + b)
    invalid = tl.zeros((), tl.int32)
    qvec = tl.zeros([DP], tl.int64)
    for j in range(0, D):
        base = (b * D + j) * K
        ids = tl.load(ids_ptr + base + slot)
        tix = tl.load(tix_ptr + base + slot)
        nxt = tl.load(ids_ptr + base + slot + 1, mask=slot + 1 < K, other=0)
        tok = tl.load(tok_ptr + b * D + j)
        empty = (ids == -1) & (tix == 0)
        full = (ids >= 0) & (ids < v) & (tix >= 0)
        nfull = tl.sum(full.to(tl.int32))
        ok_slots = tl.min((empty | full).to(tl.int32)) != 0
        full_first = tl.min((full == (slot < nfull)).to(tl.int32)) != 0
        ascending = tl.min(((slot + 1 >= nfull) | (ids < nxt)).to(tl.int32)) != 0
        total = tl.sum(tix.to(tl.int64)) == Q_TICKETS_I
        own = full & (ids == tok)
        qx = tl.sum(tl.where(own, tix, 0).to(tl.int64))
        drawable = tl.max((own & (tix >= 1)).to(tl.int32)) != 0
        valid = ok_slots & full_first & ascending & total & drawable
        invalid = tl.where((j < n) & (valid == 0), 1, invalid)
        qvec = tl.where(jd == j, qx, qvec)

    # 4. §11.3 step 4: the row status, by precedence; then the row class (§3).
    bad_temp = (temp != temp) | (temp < 0.0)
    status = tl.where(target_status != 0, target_status, tl.where(bad_temp, 4, tl.where(invalid != 0, 5, 0)))
    ok = status == 0
    greedy = ok & (temp == 0.0)
    sampled = ok & (temp != 0.0)
    seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
    rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
    pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True)

    # 5. §11.6: acceptance, draft by draft, while every earlier draft was accepted.
    alive = ok
    a = tl.zeros((), tl.int32)
    for j in range(0, D):
        test = alive & (j < n)
        tok = tl.load(tok_ptr + b * D + j)
        g = tl.sum(tl.where(jd == j, gvec, 0))
        acc = test & greedy & (tok == g)  # T0: accept iff x_j = g_j
        if test & sampled:
            row = x_row + j * stride_j
            m = _load_one(row, g, KIND)  # the row maximum, read back at the argmax (keeps -0.0 as is)
            s_tot = _row_sum(row, v, m, temp, c_ptr, KIND, TILE, TILE_LOG, NT, NT_LOG)
            rem = P_TICKETS_I - _count_sum(row, v, m, temp, s_tot, c_ptr, KIND, TILE)
            wx = _weights(_load_one(row, tok, KIND), m, temp, c_ptr)
            px = _floor_count(wx, s_tot) + tl.where(tok == g, rem, 0)
            qx = tl.sum(tl.where(jd == j, qvec, 0))
            u = _uniform_below(seed, rnd, pos + j, dom_acc.to(tl.uint64, bitcast=True), (qx << 16).to(tl.uint64))
            acc = u < px.to(tl.uint64)
        a += acc.to(tl.int32)
        alive = alive & acc

    # 6. §11.7: the token at index a; T0: the argmax; sampled: a draw from the residual over the whole row.
    token = tl.sum(tl.where(jd == a, gvec, 0))
    if sampled:
        row = x_row + a.to(tl.int64) * stride_j
        g = token
        m = _load_one(row, g, KIND)
        s_tot = _row_sum(row, v, m, temp, c_ptr, KIND, TILE, TILE_LOG, NT, NT_LOG)
        rem = P_TICKETS_I - _count_sum(row, v, m, temp, s_tot, c_ptr, KIND, TILE)
        rejected = a < n  # Q* is draft a's q after a rejection, 0 for the bonus
        sbase = (b * D + tl.minimum(a, D - 1)) * K
        r_sum = tl.zeros((), tl.int64)
        for t in range(0, tl.cdiv(v, TILE)):
            offs = t * TILE + tl.arange(0, TILE)
            in_row = offs < v
            r = _residual(row, offs, in_row, v, m, temp, s_tot, g, rem, c_ptr, ids_ptr, tix_ptr, sbase, rejected,
                          KIND, K)
            r_sum += tl.sum(r)
        u = _uniform_below(seed, rnd, pos + a.to(tl.uint64), dom_res.to(tl.uint64, bitcast=True),
                           r_sum.to(tl.uint64)).to(tl.int64)
        # The token is the number of y with C(y) <= U (C is nondecreasing): a count over every tile, no search.
        below = tl.zeros((), tl.int64)
        prefix = tl.zeros((), tl.int64)
        for t in range(0, tl.cdiv(v, TILE)):
            offs = t * TILE + tl.arange(0, TILE)
            in_row = offs < v
            r = _residual(row, offs, in_row, v, m, temp, s_tot, g, rem, c_ptr, ids_ptr, tix_ptr, sbase, rejected,
                          KIND, K)
            cum = prefix + tl.cumsum(r, axis=0)  # int64: exact
            below += tl.sum((in_row & (cum <= u)).to(tl.int64))
            prefix += tl.sum(r)
        token = below.to(tl.int32)

    # 7. §11.8 outputs.
    kk = tl.arange(0, DP)
    drafts = tl.load(tok_ptr + b * D + kk, mask=kk < D, other=-1)
    out = tl.where(kk < a, drafts, tl.where(kk == a, token, -1))
    out = tl.where(ok, out, -1)
    tl.store(status_ptr + b, status.to(tl.int8))
    tl.store(acc_ptr + b, tl.where(ok, a, -1))
    tl.store(out_ptr + b * (D + 1) + kk, out, mask=kk < D + 1)


@triton.jit
def _uniform_below_kernel(
    seed_ptr: tl.tensor,  # [n] uint64 seeds (int64 bits)
    round_ptr: tl.tensor,  # [n] uint64 rounds
    pos_ptr: tl.tensor,  # [n] uint64 positions
    s_ptr: tl.tensor,  # [n] uint64 bounds, 1 .. 2^40
    out_ptr: tl.tensor,  # [n] int64 out: uniform_below
    domain: tl.tensor,  # uint64 domain (int64 bits)
) -> None:
    # §11.5 alone, one value per program: for the parity of the rejection path.
    i = tl.program_id(0)
    seed = tl.load(seed_ptr + i).to(tl.uint64, bitcast=True)
    rnd = tl.load(round_ptr + i).to(tl.uint64, bitcast=True)
    pos = tl.load(pos_ptr + i).to(tl.uint64, bitcast=True)
    s = tl.load(s_ptr + i).to(tl.uint64, bitcast=True)
    u = _uniform_below(seed, rnd, pos, domain.to(tl.uint64, bitcast=True), s)
    tl.store(out_ptr + i, u.to(tl.int64, bitcast=True))
