"""Triton bodies of the verifier (SPEC.md §11). The launcher and argument checks live in ``accept.py``; the helpers
both operations use (widening, the §4.1 key, the §3 flags, ``_expf``, the pairwise tree) in ``_common.py``, with the
arithmetic model every exact-path kernel follows. A verification is six launches over the target rows and their
tiles (below). Every sum but the §11.4 P4 tree is over integers (exact).
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
def _floor_count(w: tl.tensor, s: tl.tensor) -> tl.tensor:
    """§11.4 P5: floor(fl64(fl64(w * 2^40) / S)) as int64 (the quotient is >= 0, so truncation is the floor)."""
    c: tl.tensor = ((w * P_TICKETS_F) / s).to(tl.int64)
    return c


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


# ------------------------------------------------------------------------------------------ the six launches
#
# A verification runs as six launches over the target rows r = (b, j) (row b of the batch, target position j) and
# their tiles t: 1. per tile, the §3 flags and the largest §4.1 key; 2. per tile, the §11.4 P4 subtree sum of the
# weights; 3. per tile, the sum of the P5 floor counts; 4. per request row, the status, the acceptance chain (§11.6)
# and the outputs but a sampled row's last token; 5. per tile of row (b, a), the sum of the residual (§11.7);
# 6. per tile of row (b, a), the number of entries whose cumulative residual is <= U, added to the token with an
# integer atomic (order-free, so exact). Partial results go to [R, n_tiles] buffers; every reduction of them is in a
# fixed order (the P4 tree over the tile sums) or over integers. Every program of launches 2, 3, 5 and 6 reduces its
# row's partials itself (a few hundred values), so no launch waits for a row-wide reduction of another.


@triton.jit
def _row_argmax(flags_ptr: tl.tensor, keys_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor,
                NTP: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    """Target row r's class (§3: 1 NaN, 2 +inf, 3 zero mass, 0 OK) and argmax g (the largest §4.1 key), from the
    partials of launch 1."""
    ti = tl.arange(0, NTP)
    live = ti < n_tiles
    fl = tl.reduce(tl.load(flags_ptr + r * n_tiles + ti, mask=live, other=0), 0, _bit_or)
    best = tl.max(tl.load(keys_ptr + r * n_tiles + ti, mask=live, other=0).to(tl.uint64, bitcast=True))
    cls = tl.where((fl & 1) != 0, 1, tl.where((fl & 2) != 0, 2, tl.where((fl & 4) == 0, 3, 0)))
    return cls, _key_id(best)


@triton.jit
def _row_total(sums_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor, NTP: tl.constexpr,
               NTP_LOG: tl.constexpr) -> tl.tensor:
    """§11.4 P4: S of target row r, the tree over its tile subtree sums padded with zeros to NTP (the tree over any
    larger power of two gives the same S)."""
    ti = tl.arange(0, NTP)
    return _tree(tl.load(sums_ptr + r * n_tiles + ti, mask=ti < n_tiles, other=0.0), NTP, NTP_LOG)


@triton.jit
def _row_remainder(counts_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor, NTP: tl.constexpr) -> tl.tensor:
    """§11.4 P6: R = 2^40 - the sum of target row r's floor counts (int64, exact)."""
    ti = tl.arange(0, NTP)
    rem: tl.tensor = P_TICKETS_I - tl.sum(tl.load(counts_ptr + r * n_tiles + ti, mask=ti < n_tiles, other=0))
    return rem


@triton.jit
def _verify_tiles_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits: int32 (fp32) or int16 (fp16 / bf16)
    stride_b: tl.tensor,  # elements between request rows of x
    stride_j: tl.tensor,  # elements between positions of x
    v: tl.tensor,  # vocabulary size V
    n_tiles: tl.tensor,  # tiles per target row
    flags_ptr: tl.tensor,  # [R, n_tiles] int32 out: each tile's §3 flags
    keys_ptr: tl.tensor,  # [R, n_tiles] int64 out: each tile's largest §4.1 key (uint64 bits)
    D: tl.constexpr,  # proposal depth
    KIND: tl.constexpr,  # logits dtype (_common.KIND_*)
    TILE: tl.constexpr,  # vocabulary entries per tile, a power of two
) -> None:
    # Launch 1: §11.3 step 2's row classes and §11.4 P1's argmax, per tile.
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = pid % n_tiles
    offs = t * TILE + tl.arange(0, TILE)
    in_row = offs < v
    raw = tl.load(x_ptr + (r // (D + 1)) * stride_b + (r % (D + 1)) * stride_j + offs, mask=in_row, other=0)
    bits = _widen_bits(raw, KIND)
    tl.store(flags_ptr + pid, tl.reduce(tl.where(in_row, _flag_bits(bits), 0), 0, _bit_or))
    tl.store(keys_ptr + pid, tl.max(tl.where(in_row, _order_key(bits, offs), 0)).to(tl.int64, bitcast=True))


@triton.jit
def _verify_sums_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    flags_ptr: tl.tensor,  # [R, n_tiles] int32: launch 1's flags
    keys_ptr: tl.tensor,  # [R, n_tiles] int64: launch 1's keys
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    c_ptr: tl.tensor,  # fp64 constants of SPEC.md §6 (layout: _common.C_*)
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64 out: each tile's P4 subtree sum (0 for rows that are not sampled)
    D: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    TILE_LOG: tl.constexpr,  # log2(TILE)
    NTP: tl.constexpr,  # power of two >= n_tiles (>= 2)
) -> None:
    # Launch 2: §11.4 P2-P4 per tile, for OK rows of sampled requests (the others never use S).
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = pid % n_tiles
    b = r // (D + 1)
    cls, g = _row_argmax(flags_ptr, keys_ptr, r, n_tiles, NTP)
    temp = tl.load(temp_ptr + b)
    s = tl.zeros((), tl.float64)
    if (cls == 0) & (temp > 0.0):
        row = x_ptr + b * stride_b + (r % (D + 1)) * stride_j
        m = _load_one(row, g, KIND)  # the row maximum, read back at the argmax (keeps -0.0 as is)
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        w = tl.where(in_row, _weights(_load_fp32(row, offs, in_row, KIND), m, temp, c_ptr), 0.0)
        s = _tree(w, TILE, TILE_LOG)
    tl.store(sums_ptr + pid, s)


@triton.jit
def _verify_counts_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    flags_ptr: tl.tensor,  # [R, n_tiles] int32: launch 1's flags
    keys_ptr: tl.tensor,  # [R, n_tiles] int64: launch 1's keys
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    c_ptr: tl.tensor,  # fp64 constants of §6
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64: launch 2's subtree sums
    counts_ptr: tl.tensor,  # [R, n_tiles] int64 out: each tile's sum of P5 floor counts
    D: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,  # log2(NTP)
) -> None:
    # Launch 3: §11.4 P5 per tile, for the rows launch 2 summed.
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = pid % n_tiles
    b = r // (D + 1)
    cls, g = _row_argmax(flags_ptr, keys_ptr, r, n_tiles, NTP)
    temp = tl.load(temp_ptr + b)
    total = tl.zeros((), tl.int64)
    if (cls == 0) & (temp > 0.0):
        row = x_ptr + b * stride_b + (r % (D + 1)) * stride_j
        m = _load_one(row, g, KIND)
        s = _row_total(sums_ptr, r, n_tiles, NTP, NTP_LOG)
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        c = _floor_count(_weights(_load_fp32(row, offs, in_row, KIND), m, temp, c_ptr), s)
        total = tl.sum(tl.where(in_row, c, 0))
    tl.store(counts_ptr + pid, total)


@triton.jit
def _verify_rows_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    flags_ptr: tl.tensor,  # [R, n_tiles] int32: launch 1's flags
    keys_ptr: tl.tensor,  # [R, n_tiles] int64: launch 1's keys
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64: launch 2's subtree sums
    counts_ptr: tl.tensor,  # [R, n_tiles] int64: launch 3's floor-count sums
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    tok_ptr: tl.tensor,  # [B, D] int32 draft tokens
    dst_ptr: tl.tensor,  # [B, D] int8 draft statuses
    ids_ptr: tl.tensor,  # [B, D, K] int32 draft slot IDs
    tix_ptr: tl.tensor,  # [B, D, K] int32 draft slot tickets
    seed_ptr: tl.tensor,  # [B] uint64 seed (int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position of draft 0 (int64 bits)
    c_ptr: tl.tensor,  # fp64 constants of §6
    dom_acc: tl.tensor,  # DOMAIN_ACCEPT (< 2^63, passed as int64)
    status_ptr: tl.tensor,  # [B] int8 out
    acc_ptr: tl.tensor,  # [B] int32 out: accepted drafts, -1 for failed rows
    out_ptr: tl.tensor,  # [B, D+1] int32 out: tokens (a sampled row's token at index a: 0, launch 6 adds it)
    state_ptr: tl.tensor,  # [B, 2] int32 out: (sampled and OK, a) for launches 5 and 6
    D: tl.constexpr,  # proposal depth
    DP: tl.constexpr,  # power of two >= D + 1
    K: tl.constexpr,  # 32
    KIND: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,
) -> None:
    # Launch 4: one program per request row.
    b = tl.program_id(0).to(tl.int64)
    jd = tl.arange(0, DP)
    slot = tl.arange(0, K)
    x_row = x_ptr + b * stride_b

    # 1. §11.3 step 1: n = leading OK drafts.
    dst = tl.load(dst_ptr + b * D + jd, mask=jd < D, other=0).to(tl.int32)
    n = tl.min(tl.where((dst != 0) & (jd < D), jd, D))

    # 2. §11.3 step 2 and §11.4 P1: per target row, its class and its argmax g (launch 1's partials).
    target_status = tl.zeros((), tl.int32)
    gvec = tl.zeros([DP], tl.int32)
    for j in range(0, D + 1):  # a runtime loop: one copy of the body in the binary
        cls, gj = _row_argmax(flags_ptr, keys_ptr, b * (D + 1) + j, n_tiles, NTP)
        target_status = tl.where((target_status == 0) & (j <= n), cls, target_status)  # the lowest bad j <= n
        gvec = tl.where(jd == j, gj, gvec)

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
            r = b * (D + 1) + j
            row = x_row + j * stride_j
            m = _load_one(row, g, KIND)  # the row maximum, read back at the argmax (keeps -0.0 as is)
            s_tot = _row_total(sums_ptr, r, n_tiles, NTP, NTP_LOG)
            rem = _row_remainder(counts_ptr, r, n_tiles, NTP)
            wx = _weights(_load_one(row, tok, KIND), m, temp, c_ptr)
            px = _floor_count(wx, s_tot) + tl.where(tok == g, rem, 0)
            qx = tl.sum(tl.where(jd == j, qvec, 0))
            u = _uniform_below(seed, rnd, pos + j, dom_acc.to(tl.uint64, bitcast=True), (qx << 16).to(tl.uint64))
            acc = u < px.to(tl.uint64)
        a += acc.to(tl.int32)
        alive = alive & acc

    # 6. §11.7 and §11.8: T0 rows emit the argmax at index a; a sampled row's draw is launches 5 and 6 (0 here).
    token = tl.where(sampled, 0, tl.sum(tl.where(jd == a, gvec, 0)))
    kk = tl.arange(0, DP)
    drafts = tl.load(tok_ptr + b * D + kk, mask=kk < D, other=-1)
    out = tl.where(kk < a, drafts, tl.where(kk == a, token, -1))
    out = tl.where(ok, out, -1)
    tl.store(status_ptr + b, status.to(tl.int8))
    tl.store(acc_ptr + b, tl.where(ok, a, -1))
    tl.store(out_ptr + b * (D + 1) + kk, out, mask=kk < D + 1)
    tl.store(state_ptr + 2 * b, sampled.to(tl.int32))
    tl.store(state_ptr + 2 * b + 1, a)


@triton.jit
def _residual_tile(
    x_ptr: tl.tensor, stride_b: tl.tensor, stride_j: tl.tensor, v: tl.tensor, n_tiles: tl.tensor,
    flags_ptr: tl.tensor, keys_ptr: tl.tensor, sums_ptr: tl.tensor, counts_ptr: tl.tensor, temp_ptr: tl.tensor,
    dst_ptr: tl.tensor, ids_ptr: tl.tensor, tix_ptr: tl.tensor, c_ptr: tl.tensor, b: tl.tensor, a: tl.tensor,
    t: tl.tensor, D: tl.constexpr, DP: tl.constexpr, K: tl.constexpr, KIND: tl.constexpr, TILE: tl.constexpr,
    NTP: tl.constexpr, NTP_LOG: tl.constexpr,
) -> tuple[tl.tensor, tl.tensor]:
    """§11.7 on tile t of target row (b, a): the residual r(y) [TILE] (int64, 0 outside the row) and the in-row
    mask. Q* is draft a's q when draft a was rejected (a < n), else 0 (the bonus)."""
    jd = tl.arange(0, DP)
    dst = tl.load(dst_ptr + b * D + jd, mask=jd < D, other=0).to(tl.int32)
    n = tl.min(tl.where((dst != 0) & (jd < D), jd, D))
    r = b * (D + 1) + a
    _, g = _row_argmax(flags_ptr, keys_ptr, r, n_tiles, NTP)
    row = x_ptr + b * stride_b + a.to(tl.int64) * stride_j
    m = _load_one(row, g, KIND)
    s_tot = _row_total(sums_ptr, r, n_tiles, NTP, NTP_LOG)
    rem = _row_remainder(counts_ptr, r, n_tiles, NTP)
    temp = tl.load(temp_ptr + b)
    offs = t * TILE + tl.arange(0, TILE)
    in_row = offs < v
    sbase = (b * D + tl.minimum(a, D - 1)) * K
    res = _residual(row, offs, in_row, v, m, temp, s_tot, g, rem, c_ptr, ids_ptr, tix_ptr, sbase, a < n, KIND, K)
    return res, in_row


@triton.jit
def _verify_residual_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    flags_ptr: tl.tensor,  # [R, n_tiles] int32: launch 1's flags
    keys_ptr: tl.tensor,  # [R, n_tiles] int64: launch 1's keys
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64: launch 2's subtree sums
    counts_ptr: tl.tensor,  # [R, n_tiles] int64: launch 3's floor-count sums
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    dst_ptr: tl.tensor,  # [B, D] int8 draft statuses
    ids_ptr: tl.tensor,  # [B, D, K] int32 draft slot IDs
    tix_ptr: tl.tensor,  # [B, D, K] int32 draft slot tickets
    c_ptr: tl.tensor,  # fp64 constants of §6
    state_ptr: tl.tensor,  # [B, 2] int32: launch 4's (sampled and OK, a)
    res_ptr: tl.tensor,  # [B, n_tiles] int64 out: each tile's residual sum (0 for rows that draw nothing)
    D: tl.constexpr,
    DP: tl.constexpr,
    K: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,
) -> None:
    # Launch 5: §11.7's residual, summed per tile of row (b, a).
    pid = tl.program_id(0).to(tl.int64)
    b = pid // n_tiles
    t = pid % n_tiles
    total = tl.zeros((), tl.int64)
    if tl.load(state_ptr + 2 * b) != 0:
        res, _ = _residual_tile(x_ptr, stride_b, stride_j, v, n_tiles, flags_ptr, keys_ptr, sums_ptr, counts_ptr,
                                temp_ptr, dst_ptr, ids_ptr, tix_ptr, c_ptr, b, tl.load(state_ptr + 2 * b + 1), t,
                                D, DP, K, KIND, TILE, NTP, NTP_LOG)
        total = tl.sum(res)
    tl.store(res_ptr + pid, total)


@triton.jit
def _verify_draw_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    flags_ptr: tl.tensor,  # [R, n_tiles] int32: launch 1's flags
    keys_ptr: tl.tensor,  # [R, n_tiles] int64: launch 1's keys
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64: launch 2's subtree sums
    counts_ptr: tl.tensor,  # [R, n_tiles] int64: launch 3's floor-count sums
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    dst_ptr: tl.tensor,  # [B, D] int8 draft statuses
    ids_ptr: tl.tensor,  # [B, D, K] int32 draft slot IDs
    tix_ptr: tl.tensor,  # [B, D, K] int32 draft slot tickets
    seed_ptr: tl.tensor,  # [B] uint64 seed (int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position of draft 0 (int64 bits)
    c_ptr: tl.tensor,  # fp64 constants of §6
    dom_res: tl.tensor,  # DOMAIN_RESIDUAL (< 2^63, passed as int64)
    state_ptr: tl.tensor,  # [B, 2] int32: launch 4's (sampled and OK, a)
    res_ptr: tl.tensor,  # [B, n_tiles] int64: launch 5's residual sums
    out_ptr: tl.tensor,  # [B, D+1] int32 in/out: the token at index a, counted here
    D: tl.constexpr,
    DP: tl.constexpr,
    K: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,
) -> None:
    # Launch 6: U uniform below the residual's sum (§11.5, DOMAIN_RESIDUAL, position + a); the token is the number
    # of y with C(y) <= U (C is nondecreasing): each tile counts its own y and adds the count to the token.
    pid = tl.program_id(0).to(tl.int64)
    b = pid // n_tiles
    t = pid % n_tiles
    if tl.load(state_ptr + 2 * b) != 0:
        a = tl.load(state_ptr + 2 * b + 1)
        ti = tl.arange(0, NTP)
        sums = tl.load(res_ptr + b * n_tiles + ti, mask=ti < n_tiles, other=0)
        r_sum = tl.sum(sums)
        prefix = tl.sum(tl.where(ti < t, sums, 0))
        seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
        rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
        pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True)
        u = _uniform_below(seed, rnd, pos + a.to(tl.uint64), dom_res.to(tl.uint64, bitcast=True),
                           r_sum.to(tl.uint64)).to(tl.int64)
        res, in_row = _residual_tile(x_ptr, stride_b, stride_j, v, n_tiles, flags_ptr, keys_ptr, sums_ptr,
                                     counts_ptr, temp_ptr, dst_ptr, ids_ptr, tix_ptr, c_ptr, b, a, t, D, DP, K,
                                     KIND, TILE, NTP, NTP_LOG)
        cum = prefix + tl.cumsum(res, axis=0)  # int64: exact
        below = tl.sum((in_row & (cum <= u)).to(tl.int32))
        tl.atomic_add(out_ptr + b * (D + 1) + a, below)  # integer addition: the same sum in any order


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
