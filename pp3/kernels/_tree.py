"""Triton bodies of the draft trees (SPEC.md §12): a node's children (``_tree_draw_kernel``, §12.4) and both tree
verifiers (§12.5-§12.9: ``_tree_peaks_kernel`` .. ``_tree_walk_kernel``). docs/TREE_KERNELS.md is the design: the
grid of each launch, what each program computes and where each bit comes from in ``pp3/reference/tree.py``.

They build on the verifier's pieces (``_accept``: a row's class, argmax and maximum, its §11.4 weights, P4 tree and P5
floor counts, computed exactly as the chain verifier computes them) and follow ``_common``'s arithmetic model; every
integer of §12.6 is uint64 or int64 within §12.7's ranges.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.random import philox_impl

from pp3.kernels._accept import _floor_count, _load_fp32, _row_argmax, _row_total, _weights
from pp3.kernels._common import (
    EMPTY_ID,
    OKEY_NEG_INF,
    OKEY_POS_INF,
    TICKETS,
    _key_id,
    _load_padded,
    _max_nan,
    _tree,
)

P_TICKETS = tl.constexpr(1099511627776)  # 2^40
SMALL_SUPPORT = tl.constexpr(6)  # §12.1
# Rows of the tree table (``tree.tree_table``): [5, N+1] int32, one row per field of ``pp3.reference.tree.Tree``.
T_PARENT = tl.constexpr(0)
T_DEPTH = tl.constexpr(1)
T_COLUMN = tl.constexpr(2)
T_FIRST = tl.constexpr(3)
T_BRANCHING = tl.constexpr(4)


@triton.jit
def _tree_uniform(seed: tl.tensor, rnd: tl.tensor, pos: tl.tensor, col: tl.tensor, domain: tl.tensor, s: tl.tensor,
                  offset: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    """§12.3 ``uniform_below_at`` for one stream (uint64 scalars; 1 <= s <= 2^64 - 1): words W_offset, W_offset+1, ...
    of Philox4x64-10(counter = (rnd, pos, i, col), key = (seed, domain)), W_{4i+k} = word k of block i; the first
    word W with (W s mod 2^64) >= t = 2^64 mod s gives floor(W s / 2^64). Returns it and the offset after the last
    word taken. ``_accept._uniform_below`` is the case col = 0, offset = 0 (one block of four words per step); here
    one word per step, so a use may start anywhere in a block."""
    s = tl.maximum(s, 1)  # s >= 1 already; for the compiler, as in _accept._uniform_below
    t = ((0xFFFFFFFFFFFFFFFF % s) + 1) % s
    out = tl.zeros_like(s)
    done = tl.zeros((), tl.int32)
    off = offset
    while done == 0:  # a word is rejected with probability t / 2^64 < 1/2
        w0, w1, w2, w3 = philox_impl(rnd, pos, (off // 4).to(tl.uint64), col, seed, domain)
        i = off % 4
        w = tl.where(i == 0, w0, tl.where(i == 1, w1, tl.where(i == 2, w2, w3)))
        take = w * s >= t  # the low word of the 128-bit product (uint64 multiplication wraps)
        out = tl.where(take, tl.math.umulhi(w, s), out)
        done = take.to(tl.int32)
        off += 1
    return out, off


@triton.jit
def _lane(values: tl.tensor, lanes: tl.tensor, i: tl.tensor) -> tl.tensor:
    """values[i] of a vector (0 if no lane is i)."""
    return tl.sum(tl.where(lanes == i, values, 0))


# ------------------------------------------------------------------------------------------------------ §12.4


@triton.jit
def _tree_draw_kernel(
    keys_ptr: tl.tensor,  # [R, n_tiles, K] int64: the tile selector's candidates (§4.1 keys, uint64 bits)
    n_tiles: tl.tensor,
    sel_status_ptr: tl.tensor,  # [R] int8: the selector's §3 status of each node row
    sel_ids_ptr: tl.tensor,  # [R, K] int32: its slots
    sel_tix_ptr: tl.tensor,  # [R, K] int32
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    seed_ptr: tl.tensor,  # [B] uint64 (int64 bits)
    round_ptr: tl.tensor,  # [B]
    pos_ptr: tl.tensor,  # [B]: the position of the depth-1 nodes
    tree_ptr: tl.tensor,  # [5, N+1] int32 tree table (T_*)
    nodes_ptr: tl.tensor,  # [M] int32: the node of each logits row
    n1: tl.tensor,  # N + 1
    m: tl.tensor,  # M
    dom_tree: tl.tensor,  # DOMAIN_TREE (< 2^63, passed as int64)
    status_ptr: tl.tensor,  # [R] int8 out
    ids_ptr: tl.tensor,  # [R, K] int32 out
    tix_ptr: tl.tensor,  # [R, K] int32 out
    tokens_ptr: tl.tensor,  # [B, N+1] int32 out (-1 already): the children at their node indices
    K: tl.constexpr,
    NC: tl.constexpr,  # power of two >= n_tiles * K
    SAMPLED: tl.constexpr,  # children = "sampled" (1) or "top-k" (0)
) -> None:
    # One program per node row r = (b, m) at node u = nodes[m]: §12.4 D1-D5.
    r = tl.program_id(0).to(tl.int64)
    b = r // m
    u = tl.load(nodes_ptr + r % m)
    k = tl.load(tree_ptr + T_BRANCHING * n1 + u)
    first = tl.load(tree_ptr + T_FIRST * n1 + u)
    lanes = tl.arange(0, K)
    st = tl.load(sel_status_ptr + r).to(tl.int32)
    temp = tl.load(temp_ptr + b)
    ids = tl.load(sel_ids_ptr + r * K + lanes)
    tix = tl.load(sel_tix_ptr + r * K + lanes)
    ok = st == 0
    greedy = ok & (temp == 0.0)
    drawn = ok & (temp != 0.0) & (SAMPLED != 0)
    # D2: the support. F' = min(K, F) from the candidates: each tile holds its first K keys, finite ones first.
    ci = tl.arange(0, NC)
    cand = tl.load(keys_ptr + r * n_tiles * K + ci, mask=ci < n_tiles * K, other=0).to(tl.uint64, bitcast=True)
    okey = cand >> 32
    finite = tl.minimum(tl.sum(((okey > OKEY_NEG_INF) & (okey < OKEY_POS_INF)).to(tl.int32)), K)
    drawable = tl.sum(((ids >= 0) & (tix >= 1)).to(tl.int32))
    small = ok & (k > tl.where(drawn, drawable, finite))
    ok = ok & (small == 0)
    status = tl.where(small, SMALL_SUPPORT, st)
    out_ids = tl.where(ok & (temp != 0.0), ids, EMPTY_ID)
    out_tix = tl.where(ok & (temp != 0.0), tix, 0)
    if ok & (drawn == 0):
        # D4 ranked: the first max(k, 1) entries of the §4.1 order, the largest keys of all tiles' candidates (unique:
        # the ID is in the key), one round of max each.
        kk = tl.maximum(k, 1)
        ranked = tl.full([K], EMPTY_ID, tl.int32)
        for j in range(kk):
            best = tl.max(cand)
            ranked = tl.where(lanes == j, _key_id(best), ranked)
            cand = tl.where(cand == best, 0, cand)
        tl.store(tokens_ptr + b * n1 + first + lanes, ranked, mask=lanes < k)
        if greedy:
            # D3: those entries in ascending ID order, 2^24 tickets on g (rank 0), 0 on the others, then empty slots.
            member = lanes < kk
            key = tl.where(member, ranked, 0x7FFFFFFF)
            rank = tl.sum((key[None, :] < key[:, None]).to(tl.int32), axis=1)  # distinct IDs: a permutation
            at = (rank[None, :] == lanes[:, None]) & member[None, :]
            sorted_ids = tl.sum(tl.where(at, ranked[None, :], 0), axis=1)
            g = tl.sum(tl.where(lanes == 0, ranked, 0))  # rank 0
            out_ids = tl.where(lanes < kk, sorted_ids, EMPTY_ID)
            out_tix = tl.where((lanes < kk) & (sorted_ids == g), TICKETS, 0)
    if drawn & ok:
        # D4 drawn: without replacement, U_j below S_j on the node's tree stream (§12.3), words in order.
        seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
        rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
        pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True) + tl.load(tree_ptr + T_DEPTH * n1 + u).to(tl.uint64)
        col = tl.load(tree_ptr + T_COLUMN * n1 + u).to(tl.uint64)
        qp = tix.to(tl.int64)  # Q': the tickets not drawn yet
        s = tl.full((), TICKETS, tl.int64)
        off = tl.zeros((), tl.int64)
        for j in range(k):
            uj, off = _tree_uniform(seed, rnd, pos, col, dom_tree.to(tl.uint64, bitcast=True), s.to(tl.uint64), off)
            slot = tl.sum((tl.cumsum(qp, axis=0) <= uj.to(tl.int64)).to(tl.int32))  # drawn slots own no ticket
            tl.store(tokens_ptr + b * n1 + first + j, _lane(ids, lanes, slot))
            s -= _lane(qp, lanes, slot)
            qp = tl.where(lanes == slot, 0, qp)
    tl.store(status_ptr + r, status.to(tl.int8))
    tl.store(ids_ptr + r * K + lanes, out_ids)
    tl.store(tix_ptr + r * K + lanes, out_tix)


# ------------------------------------------------------------------------------------------------------ §12.5


@triton.jit
def _tree_peaks_kernel(
    x_ptr: tl.tensor,  # [B, N+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    n1: tl.tensor,  # N + 1
    peak_ptr: tl.tensor,  # [R, n_tiles] fp32 out: each tile's NaN-propagating maximum
    KIND: tl.constexpr,
    TILE: tl.constexpr,
) -> None:
    # Launch 1: per tile (r, t) its peak (entries past the row's end read as -inf).
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = pid % n_tiles
    row = x_ptr + (r // n1) * stride_b + (r % n1) * stride_j
    offs = t * TILE + tl.arange(0, TILE)
    x = _load_padded(row + offs, offs < v, KIND).to(tl.float32, bitcast=True)
    tl.store(peak_ptr + pid, tl.reduce(x, 0, _max_nan))


@triton.jit
def _tree_rows_kernel(
    x_ptr: tl.tensor,
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    n1: tl.tensor,
    peak_ptr: tl.tensor,  # [R, n_tiles] fp32: launch 1's peaks
    cls_ptr: tl.tensor,  # [R] int32 out: §3 class (1 NaN, 2 +inf, 3 zero mass, 0 OK)
    g_ptr: tl.tensor,  # [R] int32 out: §11.4 P1 argmax
    m_ptr: tl.tensor,  # [R] fp32 out: the logit at g
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,  # power of two >= n_tiles (>= 2)
) -> None:
    # Launch 2: per target row, its class, g and m (the chain verifier's ``_row_argmax``).
    r = tl.program_id(0).to(tl.int64)
    row = x_ptr + (r // n1) * stride_b + (r % n1) * stride_j
    cls, g, mx = _row_argmax(peak_ptr, row, v, r, n_tiles, KIND, TILE, NTP)
    tl.store(cls_ptr + r, cls)
    tl.store(g_ptr + r, g)
    tl.store(m_ptr + r, mx)


@triton.jit
def _tree_sums_kernel(
    x_ptr: tl.tensor,
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    n1: tl.tensor,
    cls_ptr: tl.tensor,  # [R] int32
    m_ptr: tl.tensor,  # [R] fp32
    temp_ptr: tl.tensor,  # [B] fp32
    c_ptr: tl.tensor,  # fp64 constants of §6
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64 out: each tile's §11.4 P4 subtree sum (OK rows of sampled requests)
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    TILE_LOG: tl.constexpr,
) -> None:
    # Launch 3: §11.4 P2-P4 per tile of the rows whose tickets a later launch reads.
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = pid % n_tiles
    temp = tl.load(temp_ptr + r // n1)
    if (tl.load(cls_ptr + r) == 0) & (temp > 0.0):
        row = x_ptr + (r // n1) * stride_b + (r % n1) * stride_j
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        w = _weights(_load_fp32(row, offs, in_row, KIND), tl.load(m_ptr + r), temp, c_ptr)
        tl.store(sums_ptr + pid, _tree(tl.where(in_row, w, 0.0), TILE, TILE_LOG))


@triton.jit
def _tree_counts_kernel(
    x_ptr: tl.tensor,
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    n1: tl.tensor,
    cls_ptr: tl.tensor,
    m_ptr: tl.tensor,
    temp_ptr: tl.tensor,
    c_ptr: tl.tensor,
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64: launch 3's tile sums
    counts_ptr: tl.tensor,  # [R, n_tiles] int64 out: each tile's sum of §11.4 P5 floor counts
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,
) -> None:
    # Launch 4: S (the P4 tree over the tile sums, formed by every program: the same bits) and the tile's counts.
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = pid % n_tiles
    temp = tl.load(temp_ptr + r // n1)
    if (tl.load(cls_ptr + r) == 0) & (temp > 0.0):
        row = x_ptr + (r // n1) * stride_b + (r % n1) * stride_j
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        s = _row_total(sums_ptr, r, n_tiles, NTP, NTP_LOG)
        c = _floor_count(_weights(_load_fp32(row, offs, in_row, KIND), tl.load(m_ptr + r), temp, c_ptr), s)
        tl.store(counts_ptr + pid, tl.sum(tl.where(in_row, c, 0)))


@triton.jit
def _counts_of(row: tl.tensor, offs: tl.tensor, live: tl.tensor, m: tl.tensor, temp: tl.tensor, s: tl.tensor,
               g: tl.tensor, rem: tl.tensor, c_ptr: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """§11.4 P5-P6: the target tickets P(y) = c(y) + [y = g] R at the IDs ``offs`` where ``live`` (int64, 0 elsewhere;
    nothing is read there)."""
    c = tl.where(live, _floor_count(_weights(_load_fp32(row, offs, live, KIND), m, temp, c_ptr), s), 0)
    return c + tl.where(live & (offs == g), rem, 0)


@triton.jit
def _bit_length(x: tl.tensor) -> tl.tensor:
    """bitlength(x) of a uint64 0 <= x < 2^53 as int64 (exact through fp64: its biased exponent less 1022; 0 for 0)."""
    e = (x.to(tl.int64).to(tl.float64).to(tl.int64, bitcast=True) >> 52) - 1022
    return tl.where(x == 0, 0, e)


@triton.jit
def _final_draw(row: tl.tensor, v: tl.tensor, m: tl.tensor, temp: tl.tensor, s: tl.tensor, g: tl.tensor,
                rem: tl.tensor, c_ptr: tl.tensor, counts_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor,
                ids: tl.tensor, held: tl.tensor, a: tl.tensor, p: tl.tensor, shift: tl.tensor, sigma: tl.tensor,
                seed: tl.tensor, rnd: tl.tensor, pos: tl.tensor, col: tl.tensor, dom_res: tl.tensor,
                KIND: tl.constexpr, TILE: tl.constexpr, NTP: tl.constexpr, K: tl.constexpr) -> tl.tensor:
    """§12.6 N5 (and §12.9 W1): U = uniform_below(Σ) on the node's residual stream from W_0, and the smallest y with
    U < A(0) + ... + A(y), where A(y) = P(y) 2^shift off the slots and A = ``a`` at the slots ``held`` (IDs ``ids``;
    ``p`` their P; the held slots are the first lanes: valid slots are non-empty first). The tile of that y from the
    tile sums of the counts (launch 4) with the slots' own A put in, one slot at a time (none at a final node and in
    the walk), then that tile alone."""
    u = _tree_uniform(seed, rnd, pos, col, dom_res, sigma, tl.zeros((), tl.int64))[0].to(tl.int64)
    lanes = tl.arange(0, K)
    n_held = tl.sum(held.to(tl.int32))
    a64 = a.to(tl.int64)
    delta = tl.where(held, a64 - (p.to(tl.int64) << shift.to(tl.int64)), 0)  # each slot's A less P 2^shift
    ti = tl.arange(0, NTP)
    live = ti < n_tiles
    sums = tl.load(counts_ptr + r * n_tiles + ti, mask=live, other=0) + tl.where(ti == g // TILE, rem, 0)
    sums = sums << shift.to(tl.int64)
    for i in range(n_held):
        sid = tl.sum(tl.where(lanes == i, ids, 0))
        sums = tl.where(ti == sid // TILE, sums + tl.sum(tl.where(lanes == i, delta, 0)), sums)
    incl = tl.cumsum(sums, axis=0)  # int64, <= 2^40: exact
    tstar = tl.sum((live & (incl <= u)).to(tl.int32))  # C is nondecreasing: the tile of the first C(y) > U
    left = u - tl.sum(tl.where(ti == tstar, incl - sums, 0))
    offs = tstar * TILE + tl.arange(0, TILE)
    av = _counts_of(row, offs, offs < v, m, temp, s, g, rem, c_ptr, KIND) << shift.to(tl.int64)
    for i in range(n_held):
        av = tl.where(offs == tl.sum(tl.where(lanes == i, ids, 0)), tl.sum(tl.where(lanes == i, a64, 0)), av)
    below = tl.sum(((offs < v) & (tl.cumsum(av, axis=0) <= left)).to(tl.int32))
    return tstar * TILE + below  # type: ignore[no-any-return]  # the constexpr factor makes it Any


@triton.jit
def _tree_node_kernel(
    x_ptr: tl.tensor,  # [B, N+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    n1: tl.tensor,
    cls_ptr: tl.tensor,  # [R] int32: launch 2's classes
    g_ptr: tl.tensor,  # [R] int32
    m_ptr: tl.tensor,  # [R] fp32
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64: launch 3's tile sums
    counts_ptr: tl.tensor,  # [R, n_tiles] int64: launch 4's tile counts
    temp_ptr: tl.tensor,  # [B] fp32
    tree_ptr: tl.tensor,  # [5, N+1] int32 tree table
    tok_ptr: tl.tensor,  # [B, N+1] int32 draft tokens
    dst_ptr: tl.tensor,  # [B, N+1] int8 draft statuses
    ids_ptr: tl.tensor,  # [B, N+1, K] int32 draft slot IDs (not read by the walk)
    tix_ptr: tl.tensor,  # [B, N+1, K] int32 draft slot tickets (not read by the walk)
    seed_ptr: tl.tensor,
    round_ptr: tl.tensor,
    pos_ptr: tl.tensor,
    c_ptr: tl.tensor,
    dom_acc: tl.tensor,  # DOMAIN_ACCEPT (int64 bits)
    dom_res: tl.tensor,  # DOMAIN_RESIDUAL (int64 bits)
    valid_ptr: tl.tensor,  # [R] int32 out: §12.5 V3 (1 valid) of the node's children and slots
    child_ptr: tl.tensor,  # [R] int32 out: the accepted child node, -1 if none
    final_ptr: tl.tensor,  # [R] int32 out: the token emitted at the node if no child is accepted
    K: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,
    WALK: tl.constexpr,  # §12.9 (1) or §12.6 (0)
) -> None:
    # Launch 5: one program per node r = (b, u), whatever the path: V3, and the node's outcome if a row reaches it
    # (§12.6 T0 rule, N1-N5; §12.9 W1-W2). An outcome is computed only where it can be read: the node's class OK, the
    # temperature valid, and the node valid if it expands (then §12.7's ranges hold).
    r = tl.program_id(0).to(tl.int64)
    b = r // n1
    u = r % n1
    lanes = tl.arange(0, K)
    k = tl.load(tree_ptr + T_BRANCHING * n1 + u)
    first = tl.load(tree_ptr + T_FIRST * n1 + u)
    kmask = lanes < k
    kids = tl.load(tok_ptr + b * n1 + first + lanes, mask=kmask, other=EMPTY_ID)
    expands = (k > 0) & (tl.load(dst_ptr + r) == 0)
    temp = tl.load(temp_ptr + b)
    pair = (lanes[:, None] < lanes[None, :]) & kmask[:, None] & kmask[None, :]
    distinct = tl.sum((pair & (kids[:, None] == kids[None, :])).to(tl.int32)) == 0
    if WALK:
        valid = distinct & (tl.sum((kmask & ((kids < 0) | (kids >= v))).to(tl.int32)) == 0)
        ids = tl.full([K], EMPTY_ID, tl.int32)
        tix = tl.zeros([K], tl.int32)
    else:
        ids = tl.load(ids_ptr + r * K + lanes)
        tix = tl.load(tix_ptr + r * K + lanes)
        # V3 (i): every slot empty or non-empty, the non-empty first in strictly ascending ID order, 2^24 tickets.
        full = (ids >= 0) & (ids < v) & (tix >= 0)
        every = tl.sum(((full == 0) & ((ids != EMPTY_ID) | (tix != 0))).to(tl.int32)) == 0
        n_full = tl.sum(full.to(tl.int32))
        first_ok = tl.sum((full != (lanes < n_full)).to(tl.int32)) == 0
        order = (lanes[:, None] < lanes[None, :]) & full[:, None] & full[None, :] & (ids[:, None] >= ids[None, :])
        total = tl.sum(tix.to(tl.int64)) == TICKETS
        # V3 (ii)-(iii): distinct children, each a non-empty slot; Q(c_1) >= 1, and every Q(c_j) >= 1 if sampled.
        hit = kmask[:, None] & full[None, :] & (kids[:, None] == ids[None, :])  # [child, slot]
        found = tl.sum(hit.to(tl.int32), axis=1) > 0
        q = tl.sum(tl.where(hit, tix[None, :], 0), axis=1)
        drawable = (q >= 1) | ((lanes > 0).to(tl.int32) * (temp == 0.0).to(tl.int32) != 0)  # no vector & scalar mask
        children = tl.sum((kmask & ((found == 0) | (drawable == 0))).to(tl.int32)) == 0
        valid = every & first_ok & (tl.sum(order.to(tl.int32)) == 0) & total & distinct & children
    tl.store(valid_ptr + r, valid.to(tl.int32))

    cls = tl.load(cls_ptr + r)
    g = tl.load(g_ptr + r)
    child = tl.full((), -1, tl.int32)
    final = tl.full((), EMPTY_ID, tl.int32)
    if (cls == 0) & (temp >= 0.0) & (valid | (expands == 0)):
        if temp == 0.0:  # T0: the child whose token is g, else g
            final = g
            hit_g = tl.min(tl.where(kmask & (kids == g), lanes, K))
            if expands & (hit_g < K):
                child = first + hit_g
        else:
            seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
            rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
            depth = tl.load(tree_ptr + T_DEPTH * n1 + u).to(tl.uint64)
            pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True) + depth
            col = tl.load(tree_ptr + T_COLUMN * n1 + u).to(tl.uint64)
            row = x_ptr + b * stride_b + u * stride_j
            m = tl.load(m_ptr + r)
            s_row = _row_total(sums_ptr, r, n_tiles, NTP, NTP_LOG)
            ti = tl.arange(0, NTP)
            rem = -tl.sum(tl.load(counts_ptr + r * n_tiles + ti, mask=ti < n_tiles, other=0)) + P_TICKETS  # P6
            held = (ids >= 0) & expands  # the slots whose A the node keeps (none at a final node, none in the walk)
            p = _counts_of(row, ids, held, m, temp, s_row, g, rem, c_ptr, KIND).to(tl.uint64)  # P at the slots
            a = p  # A_1 = P
            sigma = tl.full((), P_TICKETS, tl.uint64)  # Σ_1 = 2^40
            shift = tl.zeros((), tl.uint64)  # B: off the slots A = P 2^B
            testing = expands.to(tl.int32) * (1 - WALK)
            if testing:
                qp = tix.to(tl.uint64)  # Q'_1 = Q
                s = tl.full((), TICKETS, tl.uint64)  # S_1 = 2^24
                off = tl.zeros((), tl.int64)
                for j in range(k):
                    if testing:
                        b_j = (-_bit_length(sigma - 1) + 40).to(tl.uint64)  # N1: -x + C (_common.TICKETS)
                        a = a << b_j
                        sigma = sigma << b_j
                        shift += b_j
                        if sigma % s == 0:  # N2
                            e = qp * (sigma // s)
                        else:
                            e = (qp * sigma) // s  # < 2^64: S < 2^24 here (§12.7)
                        c = tl.sum(tl.where(lanes == j, kids, 0))
                        at = held & (ids == c)  # c's slot (V3: exactly one)
                        ac = tl.sum(tl.where(at, a, 0))
                        ec = tl.sum(tl.where(at, e, 0))
                        qc = tl.sum(tl.where(at, qp, 0))
                        if sigma % s == 0:  # N3
                            bound = ec
                            threshold = ac
                        else:
                            bound = qc * sigma
                            threshold = tl.minimum(ac, ec) * s
                        uj, off = _tree_uniform(seed, rnd, pos, col, dom_acc.to(tl.uint64, bitcast=True), bound, off)
                        if uj < threshold:
                            child = first + j
                            testing = tl.zeros((), tl.int32)
                        else:  # N4
                            sigma -= tl.sum(tl.minimum(a, e))
                            a = tl.where(a > e, a - e, 0)
                            s -= qc
                            qp = tl.where(at, 0, qp)
            if child < 0:  # N5: the correction, or the bonus at a final node; W1: the walk's draw
                final = _final_draw(row, v, m, temp, s_row, g, rem, c_ptr, counts_ptr, r, n_tiles, ids, held, a, p,
                                    shift, sigma, seed, rnd, pos, col, dom_res.to(tl.uint64, bitcast=True), KIND,
                                    TILE, NTP, K).to(tl.int32)
                if WALK:  # W2: descend if the draw is a child
                    hit_y = tl.min(tl.where(kmask & (kids == final), lanes, K))
                    if expands & (hit_y < K):
                        child = first + hit_y
    tl.store(child_ptr + r, child)
    tl.store(final_ptr + r, final)


@triton.jit
def _tree_walk_kernel(
    tree_ptr: tl.tensor,  # [5, N+1] int32 tree table
    n1: tl.tensor,
    height: tl.tensor,  # H
    tok_ptr: tl.tensor,  # [B, N+1] int32 draft tokens
    dst_ptr: tl.tensor,  # [B, N+1] int8 draft statuses
    temp_ptr: tl.tensor,  # [B] fp32
    cls_ptr: tl.tensor,  # [R] int32: launch 2's classes
    valid_ptr: tl.tensor,  # [R] int32: launch 5's V3
    child_ptr: tl.tensor,  # [R] int32: launch 5's outcomes
    final_ptr: tl.tensor,
    status_ptr: tl.tensor,  # [B] int8 out
    acc_ptr: tl.tensor,  # [B] int32 out
    path_ptr: tl.tensor,  # [B, H] int32 out
    out_ptr: tl.tensor,  # [B, H+1] int32 out
    NP: tl.constexpr,  # power of two >= N + 1
    HP: tl.constexpr,  # power of two >= H + 1
) -> None:
    # Launch 6: one program per request. V1 (live: no proper ancestor has a nonzero draft_status), V4 (the status by
    # precedence), then V5: the descent from the root over launch 5's outcomes.
    b = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, NP)
    nodes = lanes < n1
    anc = tl.load(tree_ptr + T_PARENT * n1 + lanes, mask=nodes, other=-1)
    dead = tl.zeros([NP], tl.int32)
    for _ in range(height):
        up = anc >= 0
        dead = dead | (up & (tl.load(dst_ptr + b * n1 + anc, mask=up, other=0) != 0)).to(tl.int32)
        anc = tl.load(tree_ptr + T_PARENT * n1 + anc, mask=up, other=-1)
    live = nodes & (dead == 0)
    k = tl.load(tree_ptr + T_BRANCHING * n1 + lanes, mask=nodes, other=0)
    ds = tl.load(dst_ptr + b * n1 + lanes, mask=nodes, other=1)
    expands = live & (k > 0) & (ds == 0)
    cls = tl.load(cls_ptr + b * n1 + lanes, mask=nodes, other=0)
    lowest = tl.min(tl.where(live & (cls != 0), lanes, NP))
    target_status = tl.sum(tl.where(lanes == lowest, cls, 0))
    temp = tl.load(temp_ptr + b)
    bad_temp = (temp != temp) | (temp < 0.0)
    bad_draft = tl.sum((expands & (tl.load(valid_ptr + b * n1 + lanes, mask=nodes, other=1) == 0)).to(tl.int32)) > 0
    status = tl.where(target_status != 0, target_status, tl.where(bad_temp, 4, tl.where(bad_draft, 5, 0)))
    hl = tl.arange(0, HP)
    path = tl.full([HP], EMPTY_ID, tl.int32)
    out = tl.full([HP], EMPTY_ID, tl.int32)
    accepted = tl.full((), EMPTY_ID, tl.int32)
    cur = tl.zeros((), tl.int64)
    going = (status == 0).to(tl.int32)
    for d in range(height + 1):
        if going:
            ch = tl.load(child_ptr + b * n1 + cur)
            if ch >= 0:
                path = tl.where(hl == d, ch, path)
                out = tl.where(hl == d, tl.load(tok_ptr + b * n1 + ch), out)
                cur = ch.to(tl.int64)
            else:
                out = tl.where(hl == d, tl.load(final_ptr + b * n1 + cur), out)
                accepted = tl.zeros((), tl.int32) + d
                going = tl.zeros((), tl.int32)
    tl.store(status_ptr + b, status.to(tl.int8))
    tl.store(acc_ptr + b, accepted)
    tl.store(path_ptr + b * height + hl, path, mask=hl < height)
    tl.store(out_ptr + b * (height + 1) + hl, out, mask=hl < height + 1)
