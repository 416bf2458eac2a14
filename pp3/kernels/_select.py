"""Triton bodies of the selector (SPEC.md §2-§8). The launchers and argument checks live in ``select.py``; the
helpers both operations use (widening, the §4.1 key, the §3 flags, ``_expf``, the pairwise tree) in ``_common.py``,
with the arithmetic model every exact-path kernel follows.

The tile selector selects by a threshold, a compaction and an all-pairs rank (``_top_k``): its programs are 8 warps,
and a sorting network across warps measured slower there (bench/NOTES.md, "Selector: bitonic networks in the segment
selector"). The segment selector's small selections are bitonic networks (``_bitonic``) instead, on at most 128
keys: the K-th largest of the row's buckets, the first K of its survivors, the slots of its tail.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.random import philox_impl

from pp3.kernels import config
from pp3.kernels._common import (
    EMPTY_ID,
    OKEY_NEG_INF,
    OKEY_POS_INF,
    TICKETS,
    TICKETS_F,
    _best_key,
    _bit_or,
    _exp_scalars,
    _exp_tables,
    _expf_regs,
    _expf_with,
    _flag_bits,
    _key_id,
    _key_index,
    _last_of_row,
    _load_padded,
    _max_nan,
    _order_key,
    _pdl_prologue,
    _tree,
    _value_bits,
    _value_key,
    _widen_bits,
)

# Launch 2 thresholds by the tiles' second candidates up to this many tiles, by their maxima above (_finalize_kernel).
SECOND_CANDIDATE_TILES = tl.constexpr(config.SECOND_CANDIDATE_TILES)


@triton.jit
def _rank_desc(keys: tl.tensor, N: tl.constexpr) -> tl.tensor:
    """rank_i = the number of keys greater than key i: an [N, N] comparison (keys are unique but for 0s)."""
    return tl.sum((keys[None, :] > keys[:, None]).to(tl.int32), axis=1)


@triton.jit
def _place(values: tl.tensor, slot: tl.tensor, K: tl.constexpr) -> tl.tensor:
    """out[s] = the value whose slot is s (s < K), 0 where none: a masked integer sum with at most one term."""
    s = tl.arange(0, K)
    return tl.sum(tl.where(slot[None, :] == s[:, None], values[None, :], 0), axis=1)


@triton.jit
def _top_k_rounds(keys: tl.tensor, out_ptr: tl.tensor, K: tl.constexpr, STORE: tl.constexpr) -> tl.tensor:
    """The K largest keys in descending order by K rounds of max-and-remove (any N; used when filtering fails)."""
    out = tl.zeros([K], tl.uint64)
    r = tl.arange(0, K)
    for i in range(K):  # a loop, not unrolled: this path is rare and unrolling it made up ~35% of the code
        m = tl.max(keys)
        out = tl.where(r == i, m, out)
        keys = tl.where(keys == m, 0, keys)
    if STORE:
        tl.store(out_ptr + r, out.to(tl.int64, bitcast=True))
    return out


@triton.jit
def _rank_few(
    keys: tl.tensor,
    passed: tl.tensor,
    pos: tl.tensor,
    count: tl.tensor,
    scratch_ptr: tl.tensor,
    out_ptr: tl.tensor,
    CAP: tl.constexpr,
    K: tl.constexpr,
    STORE: tl.constexpr,
) -> tl.tensor:
    """Scatter the passing keys to ``scratch_ptr[pos]`` (pos: 0 .. count - 1 <= CAP - 1), reload them as one
    vector of CAP and rank them: the K largest in descending order, returned, or with STORE written to
    ``out_ptr[0 .. K-1]`` straight from the ranks (no placement; the return value is then unused)."""
    # Flattened first: a 2-D scatter gets re-laid-out (three [NT, K] shared-memory round trips) before its store.
    flat_pos = tl.reshape(pos, [pos.numel])
    flat_keys = tl.reshape(keys, [keys.numel]).to(tl.int64, bitcast=True)
    tl.store(scratch_ptr + flat_pos, flat_keys, mask=tl.reshape(passed, [passed.numel]))
    tl.debug_barrier()  # the stores above are visible to the whole program after this barrier
    c = tl.arange(0, CAP)
    few = tl.load(scratch_ptr + c, mask=c < count, other=0, cache_modifier=".cg").to(tl.uint64, bitcast=True)
    rank = _rank_desc(few, CAP)
    if STORE:
        # Real keys are unique, so their ranks 0 .. count - 1 are too; padding slot c >= count goes to c.
        at = tl.where(c < count, rank, c)
        tl.store(out_ptr + at, few.to(tl.int64, bitcast=True), mask=at < K)
        top = tl.zeros([K], tl.uint64)
    else:
        top = _place(few, rank, K)
    return top


@triton.jit
def _compact_top_k(
    keys: tl.tensor,
    passed: tl.tensor,
    pos: tl.tensor,
    count: tl.tensor,
    scratch_ptr: tl.tensor,
    out_ptr: tl.tensor,
    K: tl.constexpr,
    CAP: tl.constexpr,
    STORE: tl.constexpr,
) -> tl.tensor:
    """The K largest keys (returned, or with STORE written to ``out_ptr``), given that every one of them passes
    (``passed``, ``count`` in all, compaction positions
    ``pos``): rank the survivors in CAP // 2 slots when they fit and CAP >= 4K (launch 2's usual case), else in CAP
    slots, else by 32 rounds."""
    if CAP >= 4 * K:
        if count <= CAP // 2:
            top = _rank_few(keys, passed, pos, count, scratch_ptr, out_ptr, CAP // 2, K, STORE)
        elif count <= CAP:
            top = _rank_few(keys, passed, pos, count, scratch_ptr, out_ptr, CAP, K, STORE)
        else:
            top = _top_k_rounds(tl.reshape(keys, [keys.numel]), out_ptr, K, STORE)
    else:
        if count <= CAP:
            top = _rank_few(keys, passed, pos, count, scratch_ptr, out_ptr, CAP, K, STORE)
        else:
            top = _top_k_rounds(tl.reshape(keys, [keys.numel]), out_ptr, K, STORE)
    return top


@triton.jit
def _kth_largest_value(vals: tl.tensor, N: tl.constexpr, k: tl.tensor) -> tl.tensor:
    """The k-th largest of N uint32 values counted with multiplicity (ties allowed): the largest v_i with at least k
    values >= v_i (0 when there is none)."""
    at_least = tl.sum((vals[None, :] >= vals[:, None]).to(tl.int32), axis=1)
    return tl.max(tl.where(at_least >= k, vals, 0))


# ------------------------------------------------------------------------------------ bitonic sorting networks
#
# Triton's own tl.sort and tl.topk, step for step (the same network: python/triton/language/standard.py, sort_impl),
# but an element's partner along an axis of two is the pair's sum minus itself (integers wrap: exact) instead of its
# xor_sum: the compiled step is the same (a shuffle or a register move, and one integer operation), while the
# interpreter runs tl.sum as one NumPy call and a custom-combine reduction such as xor_sum element by element in
# Python (7x slower over the segment selector's tests). Owning the network also keeps it fixed across Triton versions.


@triton.constexpr_function
def _log2(n: int) -> int:
    return int(n).bit_length() - 1


@triton.jit
def _axis_flag(n_dims: tl.constexpr, j: tl.constexpr) -> tl.tensor:
    """0/1 along the j-th innermost axis of a [2] * n_dims hypercube (Triton's _indicator)."""
    return tl.reshape(tl.arange(0, 2), [1] * (n_dims - j - 1) + [2] + [1] * j)


@triton.jit
def _exchange(h: tl.tensor, flip: tl.tensor, i: tl.constexpr) -> tl.tensor:
    """One compare-and-swap step along the i-th innermost axis of the hypercube h (integers)."""
    n_dims: tl.constexpr = _log2(h.numel)
    partner = tl.sum(h, axis=n_dims - 1 - i, keep_dims=True) - h
    return tl.where((h > partner) != (flip ^ _axis_flag(n_dims, i)), partner, h)


@triton.jit
def _merge(h: tl.tensor, stage: tl.constexpr, order: tl.constexpr) -> tl.tensor:
    """A bitonic merge of stage steps: ascending (order 0), descending (1) or alternating (2) runs of 2^stage."""
    if order == 2:
        flip = _axis_flag(_log2(h.numel), stage)
    else:
        flip = order
    for i in tl.static_range(stage):
        h = _exchange(h, flip, stage - 1 - i)
    return h


@triton.jit
def _bitonic(x: tl.tensor, k: tl.constexpr, DESCENDING: tl.constexpr, SORTED: tl.constexpr) -> tl.tensor:
    """The k largest (DESCENDING) or smallest of a 1-D block of 2^n integers, in that order (k = 2^n: a sort); for
    k < 2^n without SORTED in no particular order (the last merge, log2(k) exchanges, left out)."""
    log_n: tl.constexpr = _log2(x.numel)
    log_k: tl.constexpr = _log2(k)
    h = tl.reshape(x, [2] * log_n)
    for i in tl.static_range(1, log_k + 1):
        h = _merge(h, i, 2 if i < log_n else DESCENDING)
    # the bitonic top-k: halve by the larger (smaller) of the elements 2^log_k apart, merge again
    for i in tl.static_range(log_k + 1, log_n + 1):
        if DESCENDING:
            h = tl.max(h, axis=_log2(h.numel) - 1 - log_k)
        else:
            h = tl.min(h, axis=_log2(h.numel) - 1 - log_k)
        if SORTED or i < log_n:
            h = _merge(h, log_k, 2 if i < log_n else DESCENDING)
    return tl.reshape(h, [k])


@triton.jit
def _kth_largest_net(vals: tl.tensor, k: tl.constexpr) -> tl.tensor:
    """``_kth_largest_value`` of N >= k uint32 values (N and k powers of two) by a bitonic network: the least of the
    k largest."""
    return tl.min(_bitonic(vals, k, True, False))


@triton.jit
def _okey(keys: tl.tensor) -> tl.tensor:
    """The value part of §4.1 keys: okey, the high 32 bits (uint32; ordered as the logits are)."""
    return (keys >> 32).to(tl.uint32)


@triton.jit
def _threshold_top_k(
    keys: tl.tensor,
    tau: tl.tensor,
    scratch_ptr: tl.tensor,
    out_ptr: tl.tensor,
    K: tl.constexpr,
    CAP: tl.constexpr,
    STORE: tl.constexpr,
    SORTED: tl.constexpr,
) -> tl.tensor:
    """The K largest of [R, C] unique uint64 keys (0 = padding), descending, given a uint32 value threshold ``tau`` that
    is <= the okey of the K-th largest key (the caller's proof: K distinct keys have okey >= tau), so every one of the
    K largest passes ``okey >= tau``. Values are compared in 32 bits (half the work of a 64-bit key compare); ties in
    value all pass, and the rank is by the full key. The survivors are compacted group (row) by group: a scan along
    each group, inside a warp, and one over the R group counts, not a scan over all R * C keys; then ranked
    (_compact_top_k). SORTED: every group is already in descending order (launch 1's candidates), so its survivors
    are a prefix and their positions in the group need no scan.
    """
    passed = (_okey(keys) >= tau) & (keys != 0)
    p32 = passed.to(tl.int32)
    per_group = tl.sum(p32, axis=1)
    count = tl.sum(per_group)
    if SORTED:
        in_group = tl.arange(0, keys.shape[1])[None, :]
    else:
        in_group = tl.cumsum(p32, axis=1) - 1
    pos = (tl.cumsum(per_group, axis=0) - per_group)[:, None] + in_group
    return _compact_top_k(keys, passed, pos, count, scratch_ptr, out_ptr, K, CAP, STORE)


@triton.jit
def _top_k(
    keys: tl.tensor,
    scratch_ptr: tl.tensor,
    out_ptr: tl.tensor,
    N: tl.constexpr,
    K: tl.constexpr,
    CAP: tl.constexpr,
    STORE: tl.constexpr,
) -> tl.tensor:
    """The K largest of N unique uint64 keys (0 = padding), descending, padded with 0: exact, no sorting network.

    N <= 4K: rank every key against every other. N >= 1024: up to 64 groups give a threshold (their maxima, or the
    columns' on a partial tile; _threshold_top_k); the few keys that pass are compacted through ``scratch_ptr``
    (this program's CAP slots) and ranked. If more than CAP keys pass, fall back to rounds. STORE: write the K keys
    to ``out_ptr`` instead of returning them.
    """
    if N <= 4 * K:
        top = _place(keys, _rank_desc(keys, N), K)
        if STORE:
            tl.store(out_ptr + tl.arange(0, K), top.to(tl.int64, bitcast=True))
    elif N >= 1024:
        # Any partition into groups gives a valid tau; at most 64 groups keep the [G, G] ranking small (for a
        # Gaussian 4096-entry tile, 64 groups leave 44 survivors on average, 128 groups 37: not worth 4x the ranks).
        G: tl.constexpr = min(N // 32, 64)
        C: tl.constexpr = N // G  # >= 32 = K
        groups = tl.reshape(keys, [G, C])
        values = _okey(groups)  # padding: 0, as low as any real value can be (the NaN 0xFFFFFFFF has okey 0)
        # tau = the K-th largest group maximum value (with multiplicity): K distinct entries, the groups' maxima, have
        # values >= tau, so tau <= the value of the K-th largest key.
        tau = _kth_largest_value(tl.max(values, axis=1), G, K)
        if tau == 0:
            # Fewer than K nonempty groups: a partial last tile (V = 151936 leaves 384 entries in 6 of 64 groups).
            # The C column maxima (column c: entries c, c + C, ...) are distinct entries too, and a prefix of n >= C
            # entries fills every column, so tau is as tight as for a full tile; with n < C, tau may stay 0.
            tau = _kth_largest_value(tl.max(values, axis=0), C, K)
        top = _threshold_top_k(groups, tau, scratch_ptr, out_ptr, K, CAP, STORE, False)
    else:
        top = _top_k_rounds(keys, out_ptr, K, STORE)
    return top


@triton.jit
def _proposal_uniform(seed_ptr: tl.tensor, round_ptr: tl.tensor, pos_ptr: tl.tensor, domain: tl.tensor,
                      b: tl.tensor) -> tl.tensor:
    """§8: u = W_0 >> 40 of Philox4x64-10(counter = (round, position, 0, 0), key = (seed, domain)) for row b (int32);
    a sampled row's draw uses it, every other row ignores it."""
    seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
    rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
    pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True)
    zero = tl.zeros((), tl.uint64)
    w0, _w1, _w2, _w3 = philox_impl(rnd, pos, zero, zero, seed, domain.to(tl.uint64, bitcast=True))
    return (w0 >> 40).to(tl.int32)  # type: ignore[no-any-return]  # philox_impl is untyped


@triton.jit
def _row_outputs(
    top: tl.tensor,  # [K] uint64: the row's first K entries in §4.1 order (descending keys, 0-padding last)
    slot: tl.tensor,  # [K] int32: 0 .. K-1
    status: tl.tensor,  # the row's §3 status
    greedy: tl.tensor,  # an OK T0 row
    sampled: tl.tensor,  # an OK sampled row
    b: tl.tensor,  # the row
    tau: tl.tensor,  # fp32 drafter temperature, finite and > 0
    kc: tl.tuple,  # the scalar constants of §6 (_exp_scalars)
    tables: tl.tuple,  # §6's table (_exp_tables): with NET the exponential gathers from these registers
    c_ptr: tl.tensor,  # fp64 constants of §6 (layout: _common.C_*)
    u: tl.tensor,  # the row's §8 uniform (_proposal_uniform), used by sampled rows only
    status_ptr: tl.tensor,  # [B] int8 out
    token_ptr: tl.tensor,  # [B] int32 out
    ids_ptr: tl.tensor,  # [B, K] int32 out
    tickets_ptr: tl.tensor,  # [B, K] int32 out
    K: tl.constexpr,  # 32
    NET: tl.constexpr,  # the slots by a bitonic sort (within a warp: shuffles) instead of a [K, K] rank and placement
) -> None:
    """§4-§8 of one row from its first K entries: rank 0 is g with the row maximum m; the weights, the tickets, the
    draw, and the §7 outputs by row class (steps 2-7 of ``_finalize_kernel``). The uniform and the exponential's
    constants come in: they depend on no logit, so a kernel loads and computes them first, off this chain. With NET
    ``top`` may be in any order (its members are placed by a sort on their IDs; rank 0 is the largest key)."""
    ok = status == 0
    top_key = tl.max(top)
    g = _key_id(top_key)
    okey = (top >> 32).to(tl.uint32)
    member = okey >= 0x00800000  # finite: okey(-FLT_MAX) = 0x00800000; -inf and padding are below
    xbits = _value_bits(okey)
    m_okey = (top_key >> 32).to(tl.uint32)
    m = _value_bits(m_okey).to(tl.float32, bitcast=True)
    x = tl.where(member, xbits.to(tl.float32, bitcast=True), m)
    ids = _key_id(top)

    # 3. §5 steps 1-3: d = x - m, z = d / tau (IEEE), e = expf(z).
    d = tl.where(ok & member, x - m, 0.0)  # 0 elsewhere: failed rows and empty slots stay NaN-free
    z = tl.math.div_rn(d, tau)
    if NET:
        e = _expf_regs(z, kc, tables)
    else:
        e = _expf_with(z, kc, c_ptr)

    # 4. §5 step 4: slots in ascending ID order, the members first; ID and exponential move together, the ID high
    # and the fp32 bits low.
    if NET:
        # A bitonic sort of the packed pairs, the non-members' ID field 2^31 - 1 (above every ID): slot s holds the
        # member of the s-th lowest ID, then the non-members; they are the slots a rank would leave empty.
        e_bits = e.to(tl.uint32, bitcast=True).to(tl.int64)
        packed = (tl.where(member, ids, 0x7FFFFFFF).to(tl.int64) << 32) | tl.where(member, e_bits, 0)
        s_packed = _bitonic(packed, K, False, True)
        s_hi = (s_packed >> 32).to(tl.int32)
        s_ids = tl.where(s_hi == 0x7FFFFFFF, -1, s_hi)  # -1: an empty slot
    else:
        # Members (ranks 0..n-1) take slot = #members with a lower ID; the others keep their rank (>= n), so slots are
        # a permutation and empty slots come last. The ID field is ID + 1 (0 = not a member).
        lower = (ids[None, :] < ids[:, None]) & member[None, :]
        slot_of = tl.where(member, tl.sum(lower.to(tl.int32), axis=1), slot)
        packed = (tl.where(member, ids + 1, 0).to(tl.int64) << 32) | e.to(tl.uint32, bitcast=True).to(tl.int64)
        s_packed = _place(packed, slot_of, K)
        s_ids = (s_packed >> 32).to(tl.int32) - 1  # -1: an empty slot
    s_member = s_ids >= 0
    s_e = (s_packed & 0xFFFFFFFF).to(tl.uint32).to(tl.float32, bitcast=True)
    w = tl.where(s_member, s_e.to(tl.float64), 0.0)
    # A failed row's candidates may be NaN; give it a harmless point mass (its outputs are overwritten in step 7).
    w = tl.where(ok, w, tl.where(slot == 0, 1.0, 0.0))
    tl.static_assert(K == 32)
    total = _tree(w, K, 5)  # §5 step 4: the pairwise tree over the 32 slots

    # 5. §5 steps 5-6: floor counts (w * 2^24 exact; fp64 IEEE division; trunc = floor for q >= 0), remainder to rank 0.
    c = ((w * TICKETS_F) / total).to(tl.int32)
    rem = -tl.sum(c) + TICKETS  # -x + C, not C - x: _common.TICKETS
    s_tickets = c + tl.where(s_ids == g, rem, 0)

    # 6. §8: the draw (only sampled rows draw; u is the uniform of the row's Philox block).
    cum = tl.cumsum(s_tickets, axis=0)  # integer: exact
    pick = tl.sum((cum <= tl.where(sampled, u, 0)).to(tl.int32))
    drawn = tl.sum(tl.where(slot == pick, s_ids, 0))

    # 7. §7 outputs by row class.
    token = tl.where(sampled, drawn, tl.where(greedy, g, EMPTY_ID))
    out_ids = tl.where(sampled, s_ids, tl.where(greedy & (slot == 0), g, EMPTY_ID))
    out_tix = tl.where(sampled, s_tickets, tl.where(greedy & (slot == 0), TICKETS, 0))
    tl.store(status_ptr + b, status.to(tl.int8))
    tl.store(token_ptr + b, token)
    tl.store(ids_ptr + b * K + slot, out_ids)
    tl.store(tickets_ptr + b * K + slot, out_tix)


@triton.jit
def _tile_candidates_kernel(
    x_ptr: tl.tensor,  # [B, V_shard] raw logit bits: int32 (fp32) or int16 (fp16/bf16)
    stride_row: tl.tensor,  # elements between rows of x
    v_shard: tl.tensor,  # entries in this shard
    id_offset: tl.tensor,  # global token ID of the shard's entry 0 (int64)
    keys_ptr: tl.tensor,  # [B, n_tiles_total, K] int64 out: candidate keys (§4.1), descending
    flags_ptr: tl.tensor,  # [B, n_tiles_total] int32 out: bit0 NaN seen, bit1 +inf seen, bit2 finite seen
    tile_base: tl.tensor,  # index of this shard's first tile in the outputs
    n_tiles_total: tl.tensor,  # tiles per row over all shards
    scratch_ptr: tl.tensor,  # [B, n_tiles_total, CAP] int64 scratch for _top_k's compaction
    KIND: tl.constexpr,  # _common.KIND_F32 / KIND_F16 / KIND_BF16
    TILE: tl.constexpr,  # entries per program, a power of two >= K
    K: tl.constexpr,  # 32
    CAP: tl.constexpr,  # compaction slots per program
    PDL: tl.constexpr,  # launched with programmatic dependent launch (sm_90+; never in the interpreter)
) -> None:
    # Launch 1: one program per (row, tile) computes the tile's first K entries in the §4.1 order and its flags.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)  # rows on grid axis 0 (up to 2^31 - 1; axis 1 stops at 65535)
    t = tl.program_id(1)
    offs = t.to(tl.int64) * TILE + tl.arange(0, TILE)
    in_row = offs < v_shard
    raw = tl.load(x_ptr + b * stride_row + offs, mask=in_row, other=0)
    bits = _widen_bits(raw, KIND)

    # §3 flags for this tile: one reduction for the three flags.
    flags = tl.reduce(tl.where(in_row, _flag_bits(bits), 0), 0, _bit_or)

    # §4.1 keys; padding lanes get key 0, below every real entry.
    key = tl.where(in_row, _order_key(bits, id_offset + offs), 0)
    row_tile = b * n_tiles_total + tile_base + t
    # The tile's first K entries, in rank order, written by _top_k itself (from the ranks, no placement step).
    _top_k(key, scratch_ptr + row_tile * CAP, keys_ptr + row_tile * K, TILE, K, CAP, True)
    tl.store(flags_ptr + row_tile, flags)


@triton.jit
def _finalize_kernel(
    keys_ptr: tl.tensor,  # [B, n_tiles, K] int64: every tile's candidates (§4.1 keys)
    flags_ptr: tl.tensor,  # [B, n_tiles] int32: every tile's flags
    n_tiles: tl.tensor,  # tiles per row
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    seed_ptr: tl.tensor,  # [B] uint64 seed (as int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (as int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position (as int64 bits)
    tau: tl.tensor,  # fp32 drafter temperature, finite and > 0
    c_ptr: tl.tensor,  # fp64 constants of §6 (layout: _common.C_*)
    domain: tl.tensor,  # uint64 Philox key word 1: DOMAIN_PROPOSAL
    status_ptr: tl.tensor,  # [B] int8 out
    token_ptr: tl.tensor,  # [B] int32 out
    ids_ptr: tl.tensor,  # [B, K] int32 out
    tickets_ptr: tl.tensor,  # [B, K] int32 out
    scratch_ptr: tl.tensor,  # [B, CAP] int64 scratch for _top_k's compaction
    NC: tl.constexpr,  # power of two >= n_tiles * K
    NT: tl.constexpr,  # power of two >= n_tiles
    K: tl.constexpr,  # 32
    CAP: tl.constexpr,  # compaction slots per program
    PDL: tl.constexpr,  # launched with programmatic dependent launch (sm_90+; never in the interpreter)
    CHECKED: tl.constexpr,  # a caller's candidates: _check_candidates_kernel ran first and wrote each row's status
    BAD: tl.constexpr,  # the status it gives a row whose candidates break launch 1's contract
) -> None:
    # Launch 2: one program per row merges the candidates and runs §3-§8.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    slot = tl.arange(0, K)
    u = _proposal_uniform(seed_ptr, round_ptr, pos_ptr, domain, b)  # off the chain: no logit enters it
    kc = _exp_scalars(c_ptr)
    # The tiles this program reads: all of them, or none of a row the check failed (it then reads as a row of no
    # entries, whose arithmetic is that of any failed row, and keeps the check's status).
    n_read = n_tiles
    if CHECKED:
        n_read = tl.where(tl.load(status_ptr + b) == BAD, 0, n_tiles)

    # 1. §3 status from the OR of the tiles' flags, in precedence order.
    ti = tl.arange(0, NT)
    fl = tl.load(flags_ptr + b * n_tiles + ti, mask=ti < n_read, other=0)
    fl_all = tl.reduce(fl, 0, _bit_or)
    any_nan = fl_all & 1
    any_pinf = (fl_all >> 1) & 1
    any_fin = (fl_all >> 2) & 1
    temp = tl.load(temp_ptr + b)
    bad_temp = (temp != temp) | (temp < 0.0)
    status = tl.where(any_nan != 0, 1, tl.where(any_pinf != 0, 2, tl.where(any_fin == 0, 3, tl.where(bad_temp, 4, 0))))
    if CHECKED:
        status = tl.where(n_read == 0, BAD, status)
    ok = status == 0
    greedy = ok & (temp == 0.0)
    sampled = ok & (temp != 0.0)

    # 2. §4: global first K entries; rank 0 is the greedy token g with the row maximum m.
    if NT >= K and NT <= 2 * K:  # the [NT, NT] ranking of row maxima stays small
        rt = tl.arange(0, NT)[:, None]
        ci = rt * K + slot[None, :]
        cand = tl.load(keys_ptr + b * n_tiles * K + ci, mask=rt < n_read, other=0).to(tl.uint64, bitcast=True)
        # Every tile's candidates are in descending order. Two valid thresholds (each has K distinct keys above it):
        # the K-th largest tile maximum, and the (K/2)-th largest second candidate (K/2 tiles hold two keys >= it).
        # On Gaussian rows the second leaves fewer survivors below ~46 tiles (V = 163840: > 64 survivors in 3 % of
        # rows instead of 38 %, so the 64-slot rank; V = 32000: 53 on average instead of 179), the first above.
        second = n_tiles <= SECOND_CANDIDATE_TILES
        values = _okey(cand)
        col = tl.where(second, tl.max(tl.where(slot[None, :] == 1, values, 0), axis=1), tl.max(values, axis=1))
        bound = _kth_largest_value(col, NT, tl.where(second, K // 2, K))
        top = _threshold_top_k(cand, bound, scratch_ptr + b * CAP, scratch_ptr, K, CAP, False, True)  # top[0]: rank 0
    else:
        ci = tl.arange(0, NC)
        cand = tl.load(keys_ptr + b * n_tiles * K + ci, mask=ci < n_read * K, other=0).to(tl.uint64, bitcast=True)
        top = _top_k(cand, scratch_ptr + b * CAP, scratch_ptr, NC, K, CAP, False)
    _row_outputs(top, slot, status, greedy, sampled, b, tau, kc, _exp_tables(c_ptr), c_ptr, u, status_ptr, token_ptr,
                 ids_ptr, tickets_ptr, K, False)


@triton.jit
def _check_candidates_kernel(
    keys_ptr: tl.tensor,  # [B, n_tiles, K] int64: the candidates launch 2 is to merge
    flags_ptr: tl.tensor,  # [B, n_tiles] int32: their flags
    n_tiles: tl.tensor,  # tiles per row
    vocab_size: tl.tensor,  # V: every candidate's ID must be below it
    status_ptr: tl.tensor,  # [B] int8 out: BAD for a malformed row, else 0 (launch 2 then writes the row's own)
    token_ptr: tl.tensor,  # [B] int32 out (a malformed row's only)
    ids_ptr: tl.tensor,  # [B, K] int32 out (a malformed row's only)
    tickets_ptr: tl.tensor,  # [B, K] int32 out (a malformed row's only)
    CT: tl.constexpr,  # tiles per step
    K: tl.constexpr,  # 32
    BAD: tl.constexpr,  # the status of a row whose candidates break launch 2's contract
) -> None:
    # Before launch 2 on candidates a caller made (pp3.kernels.finalize): one program per row checks what launch 1
    # guarantees and launch 2 relies on, and fails the row (status BAD, the failed-row outputs of SPEC.md §7) if
    # any of it is broken: (1) each tile's keys strictly descending, 0-padding last; (2) every ID < V; (3) no ID
    # twice in a tile, the non-empty tiles in ascending, disjoint ID ranges (so no ID twice in the row); (4) no
    # flag bit but the three of §3; (5) the keys as the flags say: a NaN, +inf or finite key only in a tile flagged
    # so, and the first key of a tile flagged finite and neither NaN nor +inf finite (so an OK row's largest key is
    # finite, its weights too).
    b = tl.program_id(0).to(tl.int64)
    slot = tl.arange(0, K)
    ct = tl.arange(0, CT)
    bad = tl.zeros((), tl.int32)
    seen = tl.full((), -1, tl.int64)  # the largest ID of the tiles before this step
    for t0 in range(0, n_tiles, CT):
        t = t0 + ct
        in_row = t < n_tiles
        at = keys_ptr + (b * n_tiles + t[:, None]) * K + slot[None, :]
        key = tl.load(at, mask=in_row[:, None], other=0).to(tl.uint64, bitcast=True)
        nxt = tl.load(at + 1, mask=in_row[:, None] & (slot[None, :] < K - 1), other=0).to(tl.uint64, bitcast=True)
        fl = tl.load(flags_ptr + b * n_tiles + t, mask=in_row, other=0)
        bad |= tl.sum(((nxt != 0) & (nxt >= key)).to(tl.int32))  # (1)
        real = key != 0
        ids = _key_index(key).to(tl.int64)
        bad |= tl.sum((real & (ids >= vocab_size)).to(tl.int32))  # (2)
        twice = (ids[:, :, None] == ids[:, None, :]) & real[:, None, :] & (slot[None, :, None] < slot[None, None, :])
        bad |= tl.sum(tl.sum(twice.to(tl.int32), axis=2))  # (3) an ID twice in one tile (two values for one token)
        lo = tl.min(tl.where(real, ids, 1 << 33), axis=1)  # an empty tile: lo above and hi below every ID
        hi = tl.max(tl.where(real, ids, -1), axis=1)
        before = (ct[:, None] < ct[None, :]) & (hi[:, None] >= lo[None, :])  # tile s < t reaches into tile t
        bad |= tl.sum(before.to(tl.int32)) + tl.sum((lo <= seen).to(tl.int32))  # (3)
        seen = tl.maximum(seen, tl.max(hi))
        bad |= tl.sum(((fl & ~7) != 0).to(tl.int32))  # (4)
        okey = (key >> 32).to(tl.uint32)
        finite = (okey > OKEY_NEG_INF) & (okey < OKEY_POS_INF)
        flag = tl.where(finite, 4, tl.where(okey == OKEY_POS_INF, 2, tl.where(okey == OKEY_NEG_INF, 0, 1)))  # NaN: 1
        bad |= tl.sum((real & ((flag & ~fl[:, None]) != 0)).to(tl.int32))  # (5) a key its tile's flags deny
        first_finite = tl.max(tl.where((slot[None, :] == 0) & finite, 1, 0), axis=1)
        bad |= tl.sum((((fl & 7) == 4) & (first_finite == 0)).to(tl.int32))  # (5) a finite-only tile without one
    tl.store(status_ptr + b, tl.where(bad != 0, BAD, 0).to(tl.int8))
    if bad != 0:
        tl.store(token_ptr + b, tl.full((), EMPTY_ID, tl.int32))
        tl.store(ids_ptr + b * K + slot, tl.full([K], EMPTY_ID, tl.int32))
        tl.store(tickets_ptr + b * K + slot, tl.zeros([K], tl.int32))


# ------------------------------------------------------------------------------------------ the segment selector
#
# ``propose`` on one [B, V] tensor: three launches per position (two when C gathers); in A and B each program is one
# segment of L entries of a row, in C one program is one row.
#   A. Every segment's largest key (§4.1, every NaN above +inf: ``_best_key``) goes by an atomic max into one of the
#      row's NB buckets (segment s into bucket s mod NB); with BLOCKS the maximum of each block of BLK entries of the
#      segment is stored too. The largest bucket is then the row's largest key, which gives g and the §3 status; and
#      the K-th largest bucket value (with multiplicity) is a lower bound tau of the value of the row's K-th entry: the
#      buckets hold K distinct entries with values >= tau.
#   B. (Small batches, where C gathering is the longer chain.) Every segment of a sampled OK row again (an L2 read;
#      one warp per segment): tau by a bitonic top-K of the buckets' values, then its finite entries with a value >=
#      tau are appended to the row's survivors (an atomic slot counter). At V = 163840 about 44 entries of a Gaussian
#      row survive, the most seen 59.
#   C. Per row: without B (GATHERED), tau by a bitonic top-K of the buckets' values, and the blocks whose maximum
#      reaches tau (at V = 163840 about 44 of 2560 on a Gaussian row, the most seen 63 in 3000) are gathered, GATHER
#      at a time: their entries with a value >= tau are the survivors (``_survivors``); at large batches this reads
#      ~2 % of the row again instead of all of it, and computes tau once per row instead of once per segment. Then
#      the survivors' first K by a bitonic top-K of CAP/2 when they fit, else of CAP (when more survive, on tied,
#      masked or sorted rows, the row is scanned instead: ``_scan_top_k``), then §4-§8 on the first K
#      (``_row_outputs``, its slots by a bitonic sort); T0 and failed rows from g alone. C leaves the buckets and the
#      survivor counter as A and B need them (empty, 0).
# Exact by construction: every entry of the first K has a value >= tau (so its block's maximum does too) and passes
# the filter, and the order is by the full key. The blocks' maxima are read only for OK rows: no NaN, no +inf.

SIGN64 = tl.constexpr(-9223372036854775808)  # 2^63 as an int64: flips uint64 order into int64 order (atomic max)
OKEY_MIN_FINITE = tl.constexpr(0x00800000)  # okey(-FLT_MAX): the lowest finite value


@triton.jit
def _row_class(bucket_ptr: tl.tensor, b: tl.tensor, n_seg: tl.tensor, temp: tl.tensor, NB: tl.constexpr,
               NBP: tl.constexpr) -> tuple[tl.tensor, tl.tensor, tl.tensor, tl.tensor]:
    """From row b's buckets: its largest key, its §3 status, whether it is sampled (an OK row of T != 0), and the
    buckets' values (``_row_bound``'s input)."""
    bi = tl.arange(0, NBP)
    live = bi < tl.minimum(n_seg, NB)
    raw = tl.load(bucket_ptr + b * NB + bi, mask=live, other=SIGN64, cache_modifier=".cg")
    buckets = (raw ^ SIGN64).to(tl.uint64, bitcast=True)
    top_key = tl.max(buckets)
    top_okey = (top_key >> 32).to(tl.uint32)
    bad_temp = (temp != temp) | (temp < 0.0)
    status = tl.where(top_okey == 0xFFFFFFFF, 1, tl.where(top_okey == 0xFF800000, 2,
                      tl.where(top_okey < OKEY_MIN_FINITE, 3, tl.where(bad_temp, 4, 0))))
    return top_key, status, (status == 0) & (temp != 0.0), _okey(buckets)


@triton.jit
def _row_bound(values: tl.tensor, K: tl.constexpr) -> tl.tensor:
    """tau from the buckets' values: the K-th largest (0 when fewer than K buckets are filled; a bitonic network)
    raised to the lowest finite value."""
    return tl.maximum(_kth_largest_net(values, K), OKEY_MIN_FINITE)


@triton.jit
def _row_bound_floor(values: tl.tensor, NBP: tl.constexpr, K: tl.constexpr) -> tl.tensor:
    """A lower bound of ``_row_bound`` for the price of one reduction: the buckets in K groups, each group's largest
    value (K distinct entries), their least (at most the K-th largest value)."""
    return tl.min(tl.max(tl.reshape(values, [NBP // K, K]), axis=0))


@triton.jit
def _segment_max_kernel(
    x_ptr: tl.tensor,  # [B, V] raw logit bits: int32 (fp32) or int16 (fp16/bf16)
    stride_row: tl.tensor,  # elements between rows of x
    v: tl.tensor,  # entries per row
    bucket_ptr: tl.tensor,  # [B, NB] int64: the row's buckets (uint64 keys with the sign bit flipped), all empty
    block_ptr: tl.tensor,  # [B, n_seg * L / BLK] fp32 out (BLOCKS): every block's maximum (-inf past the row's end)
    KIND: tl.constexpr,  # _common.KIND_F32 / KIND_F16 / KIND_BF16
    L: tl.constexpr,  # entries per segment, a power of two
    NB: tl.constexpr,  # buckets per row
    BLK: tl.constexpr,  # entries per block, a power of two <= L
    BLOCKS: tl.constexpr,  # store the blocks' maxima (C gathers)
    PDL: tl.constexpr,  # launched with programmatic dependent launch (sm_90+; never in the interpreter)
) -> None:
    # Launch A: one program per (row, segment): the segment's largest key into bucket s mod NB, with BLOCKS its
    # blocks' maxima.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    n_seg = tl.num_programs(1)
    offs = s.to(tl.int64) * L + tl.arange(0, L)
    bits = _load_padded(x_ptr + b * stride_row + offs, offs < v, KIND)
    best = _best_key(bits, s.to(tl.int64) * L, L)
    tl.atomic_max(bucket_ptr + b * NB + s % NB, best.to(tl.int64, bitcast=True) ^ SIGN64, sem="relaxed")
    if BLOCKS:
        # The blocks' maxima as floats: C compares them with tau's value, and reads them only for rows without a NaN.
        block_max = tl.max(tl.reshape(bits.to(tl.float32, bitcast=True), [L // BLK, BLK]), axis=1)
        j = tl.arange(0, L // BLK)
        tl.store(block_ptr + (b * n_seg + s) * (L // BLK) + j, block_max)


@triton.jit
def _segment_filter_kernel(
    x_ptr: tl.tensor,  # [B, V] raw logit bits
    stride_row: tl.tensor,
    v: tl.tensor,
    n_seg: tl.tensor,  # segments per row
    bucket_ptr: tl.tensor,  # [B, NB] int64: launch A's buckets
    surv_ptr: tl.tensor,  # [B, CAP] int64 out: the survivors' keys (uint64 bits), the first CAP appended
    nsurv_ptr: tl.tensor,  # [B] int32: survivors appended (all 0 before the launch)
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    KIND: tl.constexpr,
    L: tl.constexpr,  # entries per segment
    NB: tl.constexpr,  # buckets per row
    NBP: tl.constexpr,  # power of two >= NB
    CAP: tl.constexpr,  # survivor slots per row
    K: tl.constexpr,  # 32
    PDL: tl.constexpr,
) -> None:
    # Launch B: one program per (row, segment) of sampled OK rows: append the segment's survivors. The segment is
    # loaded first, its latency hiding the bound's; survivors are found on 32-bit values, keys made for them alone.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    offs = s.to(tl.int64) * L + tl.arange(0, L)
    in_row = offs < v
    raw = tl.load(x_ptr + b * stride_row + offs, mask=in_row, other=0)
    _top_key, _status, sampled, values = _row_class(bucket_ptr, b, n_seg, tl.load(temp_ptr + b), NB, NBP)
    if sampled:
        bits = _widen_bits(raw, KIND)
        okey = tl.where(in_row, _value_key(bits), 0)
        # A segment whose maximum is below a lower bound of tau has no survivor (about half of the segments of a
        # Gaussian row) and skips tau's network.
        low = _row_bound_floor(values, NBP, K)
        if tl.max(okey) >= low:
            passed = okey >= _row_bound(values, K)
            n = tl.sum(passed.to(tl.int32))
            if n != 0:
                key = _order_key(bits, offs)
                at = tl.atomic_add(nsurv_ptr + b, n, sem="relaxed") + tl.cumsum(passed.to(tl.int32), axis=0) - 1
                tl.store(surv_ptr + b * CAP + at, key.to(tl.int64, bitcast=True), mask=passed & (at < CAP))


@triton.jit
def _survivors(
    row_ptr: tl.tensor,  # the row's raw logit bits
    v: tl.tensor,  # entries in the row
    block_ptr: tl.tensor,  # the row's n_blk block maxima (fp32)
    n_blk: tl.tensor,  # blocks in the row
    tau: tl.tensor,  # uint32 value bound, >= OKEY_MIN_FINITE
    scratch_ptr: tl.tensor,  # this row's 2 CAP int64 slots: the selected blocks, then the survivors
    KIND: tl.constexpr,
    BLK: tl.constexpr,  # entries per block
    BC: tl.constexpr,  # block maxima per step of the selection, a power of two
    GATHER: tl.constexpr,  # blocks per gather step, a power of two
    CAP: tl.constexpr,  # survivor slots
) -> tl.tensor:
    """The number of the row's finite entries with a value >= tau (the survivors), their keys written to
    ``scratch_ptr[CAP ..]`` (the first CAP of them); 2^30 when more than CAP blocks hold one (then more than CAP
    entries survive, and the caller scans the row)."""
    tau_f = _value_bits(tau).to(tl.float32, bitcast=True)  # okey(x) >= tau iff x >= tau_f (x finite or -inf)
    # 1. The blocks whose maximum reaches tau: their indices compacted into scratch_ptr[0 .. CAP - 1].
    n_sel = tl.zeros((), tl.int32)
    for c0 in range(0, n_blk, BC):
        bi = c0 + tl.arange(0, BC)
        sel = tl.load(block_ptr + bi, mask=bi < n_blk, other=float("-inf")) >= tau_f
        at = n_sel + tl.cumsum(sel.to(tl.int32), axis=0) - 1
        tl.store(scratch_ptr + at, bi.to(tl.int64), mask=sel & (at < CAP))
        n_sel += tl.sum(sel.to(tl.int32))
    count = tl.zeros((), tl.int32)
    if n_sel > CAP:
        count = tl.full((), 1 << 30, tl.int32)
    else:
        tl.debug_barrier()  # the indices stored above are visible to the whole program after this barrier
        # 2. Their entries with a value >= tau, appended to scratch_ptr[CAP ..], GATHER blocks at a time.
        for g0 in range(0, n_sel, GATHER):
            gi = g0 + tl.arange(0, GATHER)
            blk = tl.load(scratch_ptr + gi, mask=gi < n_sel, other=0, cache_modifier=".cg").to(tl.int32)
            offs = blk[:, None] * BLK + tl.arange(0, BLK)[None, :]
            live = (gi < n_sel)[:, None] & (offs < v)
            bits = _widen_bits(tl.load(row_ptr + offs, mask=live, other=0), KIND)
            passed = live & (_value_key(bits) >= tau)
            p32 = passed.to(tl.int32)
            per_block = tl.sum(p32, axis=1)
            pos = count + (tl.cumsum(per_block, axis=0) - per_block)[:, None] + tl.cumsum(p32, axis=1) - 1
            key = _order_key(bits, offs)
            tl.store(scratch_ptr + CAP + pos, key.to(tl.int64, bitcast=True), mask=passed & (pos < CAP))
            count += tl.sum(per_block)
    return count


@triton.jit
def _scan_top_k(
    row_ptr: tl.tensor,  # the row's raw logit bits
    v: tl.tensor,  # entries in the row
    tau: tl.tensor,  # uint32: entries below this value (or not finite) are not candidates
    scratch_ptr: tl.tensor,  # CAPS int64 slots of this program (for _top_k's compaction)
    KIND: tl.constexpr,
    C: tl.constexpr,  # entries per chunk, a power of two >= 1024 (_top_k's threshold path)
    K: tl.constexpr,
    CAPS: tl.constexpr,  # _top_k's compaction slots
) -> tl.tensor:
    """The row's first K candidates (finite, value >= tau), descending, 0-padded: a scan of the row in chunks that
    keeps the best K so far and merges only chunks with a key above the K-th best (the fallback for rows with more
    survivors than CAP: tied, masked, sorted or adversarial rows)."""
    slot = tl.arange(0, K)
    best = tl.zeros([K], tl.uint64)
    kth = tl.zeros((), tl.uint64)
    for c0 in range(0, v, C):
        offs = c0 + tl.arange(0, C).to(tl.int64)
        in_row = offs < v
        key = _order_key(_widen_bits(tl.load(row_ptr + offs, mask=in_row, other=0), KIND), offs)
        key = tl.where(in_row & (_okey(key) >= tau) & (key > kth), key, 0)
        if tl.max(key) != 0:
            chunk = _top_k(key, scratch_ptr, scratch_ptr, C, K, CAPS, False)
            both = tl.reshape(tl.join(best, chunk), [2 * K])
            best = _place(both, _rank_desc(both, 2 * K), K)
            kth = tl.sum(tl.where(slot == K - 1, best, 0))
    return best


@triton.jit
def _segment_merge_kernel(
    x_ptr: tl.tensor,  # [B, V] raw logit bits
    stride_row: tl.tensor,
    v: tl.tensor,
    n_seg: tl.tensor,  # segments per row
    bucket_ptr: tl.tensor,  # [B, NB] int64: launch A's buckets (left empty)
    block_ptr: tl.tensor,  # [B, n_blk] fp32: launch A's block maxima (GATHERED)
    n_blk: tl.tensor,  # blocks per row
    surv_ptr: tl.tensor,  # [B, CAP] int64: launch B's survivors (not GATHERED)
    nsurv_ptr: tl.tensor,  # [B] int32: survivors appended (not GATHERED; left 0)
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    seed_ptr: tl.tensor,  # [B] uint64 seed (as int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (as int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position (as int64 bits)
    tau: tl.tensor,  # fp32 drafter temperature, finite and > 0
    c_ptr: tl.tensor,  # fp64 constants of §6 (layout: _common.C_*)
    domain: tl.tensor,  # uint64 Philox key word 1: DOMAIN_PROPOSAL
    status_ptr: tl.tensor,  # [B] int8 out
    token_ptr: tl.tensor,  # [B] int32 out
    ids_ptr: tl.tensor,  # [B, K] int32 out
    tickets_ptr: tl.tensor,  # [B, K] int32 out
    scratch_ptr: tl.tensor,  # [B, 2 CAP + CAPS] int64: the selected blocks, the survivors (GATHERED), the scan's slots
    KIND: tl.constexpr,
    NB: tl.constexpr,
    NBP: tl.constexpr,
    GATHERED: tl.constexpr,  # the survivors from the blocks (no launch B)
    BLK: tl.constexpr,  # entries per block
    BC: tl.constexpr,  # block maxima per step of the selection
    GATHER: tl.constexpr,  # blocks per gather step
    CAP: tl.constexpr,  # survivor (and selected block) slots
    C: tl.constexpr,  # entries per chunk of the fallback scan
    CAPS: tl.constexpr,  # compaction slots of the fallback scan
    K: tl.constexpr,  # 32
    PDL: tl.constexpr,
) -> None:
    # Launch C: one program per row: its first K entries, then §4-§8; the buckets and the counter emptied.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    slot = tl.arange(0, K)
    temp = tl.load(temp_ptr + b)
    half = tl.arange(0, CAP // 2)
    scratch = scratch_ptr + b * (2 * CAP + CAPS)
    if GATHERED:
        surv = scratch + CAP
    else:
        surv = surv_ptr + b * CAP
        count = tl.load(nsurv_ptr + b)
        first = tl.load(surv + half)  # the usual survivors, loaded with the count (masked below)
    u = _proposal_uniform(seed_ptr, round_ptr, pos_ptr, domain, b)  # off the chain: no logit enters it
    kc = _exp_scalars(c_ptr)
    tables = _exp_tables(c_ptr)  # off the chain too: the exponential gathers from registers
    top_key, status, sampled, values = _row_class(bucket_ptr, b, n_seg, temp, NB, NBP)
    top = tl.where(slot == 0, top_key, 0)  # T0 and failed rows: rank 0 alone
    if sampled:
        row_ptr = x_ptr + b * stride_row
        if GATHERED:
            count = _survivors(row_ptr, v, block_ptr + b * n_blk, n_blk, _row_bound(values, K), scratch, KIND, BLK, BC,
                               GATHER, CAP)
            tl.debug_barrier()  # the survivors stored by _survivors are visible to the whole program after this
            first = tl.load(surv + half, mask=half < count, other=0, cache_modifier=".cg")
        if count <= CAP // 2:  # the usual case: a bitonic top-K of CAP/2
            few = tl.where(half < count, first, 0).to(tl.uint64, bitcast=True)
            top = _bitonic(few, K, True, False)  # the first K as a set: _row_outputs orders them
        elif count <= CAP:
            full = tl.arange(0, CAP)
            most = tl.load(surv + full, mask=full < count, other=0, cache_modifier=".cg").to(tl.uint64, bitcast=True)
            top = _bitonic(most, K, True, False)
        else:
            top = _scan_top_k(row_ptr, v, _row_bound(values, K), scratch + 2 * CAP, KIND, C, K, CAPS)
    bi = tl.arange(0, NBP)
    tl.store(bucket_ptr + b * NB + bi, tl.full([NBP], SIGN64, tl.int64), mask=bi < tl.minimum(n_seg, NB))
    if not GATHERED:
        tl.store(nsurv_ptr + b, 0)
    _row_outputs(top, slot, status, (status == 0) & (temp == 0.0), sampled, b, tau, kc, tables, c_ptr, u, status_ptr,
                 token_ptr, ids_ptr, tickets_ptr, K, True)


# ------------------------------------------------------------------------------------------ the one-launch selector
#
# ``propose`` with ``LaunchConfig(selector="onelaunch")`` on one [B, V] tensor: one launch per position, one program
# per segment of L entries of a row (a 1-D grid, a row's segments next to each other in launch order, so that they
# run side by side). Each program:
#   1. loads its segment once and keeps it in registers; G = 32 contiguous groups, their NaN-propagating maxima as
#      §4.1 okeys (every NaN as 0xFFFFFFFF, above +inf);
#   2. publishes PUB of them (the maxima of PUB runs of groups) by an atomic max into the row's NB buckets (group j of
#      segment s into bucket (s PUB + j) mod NB), and counts itself into the row's publications;
#   3. takes the best bound published so far: reads the buckets (at most POLLS times, never waiting for anything),
#      bound = the larger of their K-th largest value and its own least group maximum, raised to the lowest finite
#      value (T0 rows, which need the first entry alone: of the largest bucket and its own maximum); it reads again
#      while some of its entries pass the bound, the row's publications are not all in and polls are left (a read
#      that finds the buckets as they were keeps the bound);
#   4. appends its entries with a value >= the bound as §4.1 keys to the row's survivors (a slot counter; slots past
#      CAP are not written);
#   5. arrives on the row's counter; the last program of the row to arrive reads the buckets (now complete: the §3
#      status from their largest value), the survivor count and the first FEW slots in one batched load, takes the
#      first K of the survivors (a bitonic network or, ``top_rank``, a compare-and-count rank; more than FEW
#      survivors in steps of CHUNK; more than CAP: the fallback scan of the row by the same networks,
#      ``_scan_chunks_top_k``), leaves the buckets, the publications, the survivor count and the arrivals as it found
#      them (empty, 0), and runs §4-§8 (``_row_outputs``).
# Exact whatever the timing: every bucket holds the value of an entry of its own groups (the groups of different
# buckets are disjoint), or is empty, at every moment, so the K-th largest bucket a program reads is at most the value
# of the row's K-th entry (K distinct entries reach it); so is the least of a segment's G >= K group maxima; so every
# one of the row's first K entries has a value >= every program's bound and is appended (or, past CAP, the last
# program scans the row). Only how many survive depends on what a program sees, and so on timing.
#
# The protocol, and why each atomic has the semantics it has (PTX memory model, scope gpu):
# - Publications (``atomic_max``, relaxed): a read of a bucket returns some value that bucket held, and every value
#   it ever holds is a valid bound (above); nothing else is read through it, so no ordering is needed. The polls
#   load with ``volatile`` (ld.volatile: not cached in L1, never merged by the compiler with an earlier load of the
#   same address); a late reader sees a later, larger value, or the same one: either is a bound.
# - The publications counter (``atomic_add``, relaxed): a hint to stop polling. It may run ahead of the buckets it
#   counts (relaxed: no order between the two); a program then stops with a weaker bound, more survivors, the same
#   result.
# - The survivor slot counter (``atomic_add``, relaxed): only atomicity is needed (disjoint slot ranges); the keys
#   are plain stores, published by the arrival below.
# - The arrival (``_common._last_of_row``: a CTA barrier, then ``atomic_add`` acq_rel): the barrier orders every
#   thread's publications, slot reservation and key stores before the atomic of the thread that arrives, and its
#   release is cumulative, so they happen before the arrival; the last program's acquire (the old count n_seg - 1)
#   then sees every program's publications, count and keys. Its reads use ``.cg`` (L2: never a stale L1 line) after
#   the atomic, whose result every thread waits for (the branch depends on it).
# - The resets (plain stores by the last program, after its acquire): every other program of the row has arrived,
#   so it issues nothing more on these words in this launch; the next launch on the stream (or a CUDA-graph replay)
#   starts after this one ends (with PDL, after griddepcontrol.wait), so the buffers are empty and 0 again for it.
# - Progress: no program waits for another (polls are bounded, the counter is never spun on), so no co-residency
#   is assumed: a program that runs after its row's others have ended finds their publications and stops at once.
# The interpreter runs programs one after another (each sees every earlier program's publications and none of the
# later ones'): the protocol's timing cases are the GPU's; the interpreter checks the bits and every path, with a
# survivor capacity and polls that the tests set (tests/test_kernels_onelaunch.py).

SIGN32 = tl.constexpr(-2147483648)  # 2^31 as an int32: flips uint32 order into int32 order (the buckets' atomic max)


@triton.jit
def _group_okeys(x: tl.tensor, G: tl.constexpr) -> tl.tensor:
    """The §4.1 okeys (uint32) of the NaN-propagating maxima of G groups of contiguous entries of the fp32 block x,
    every NaN as 0xFFFFFFFF (above +inf), so that their uint32 maximum says whether a NaN is among them."""
    m = tl.reduce(tl.reshape(x, [G, x.numel // G]), 1, _max_nan)
    return tl.where(m != m, tl.full([G], 0xFFFFFFFF, tl.uint32), _value_key(m.to(tl.uint32, bitcast=True)))


@triton.jit
def _value_status(top: tl.tensor, temp: tl.tensor) -> tuple[tl.tensor, tl.tensor, tl.tensor]:
    """§3 from the okey of a row's largest value (every NaN as 0xFFFFFFFF) and its target temperature: the status,
    whether it is an OK T0 row, whether it is sampled."""
    bad_temp = (temp != temp) | (temp < 0.0)
    status = tl.where(top == 0xFFFFFFFF, 1, tl.where(top == OKEY_POS_INF, 2,
                      tl.where(top < OKEY_MIN_FINITE, 3, tl.where(bad_temp, 4, 0))))
    return status, (status == 0) & (temp == 0.0), (status == 0) & (temp != 0.0)


@triton.jit
def _bound_of(values: tl.tensor, t0: tl.tensor, K: tl.constexpr) -> tl.tensor:
    """A lower bound of the value (okey) of the row's K-th entry from bucket values: the K-th largest (T0 rows, which
    need the first entry alone: the largest), raised to the lowest finite value."""
    return tl.maximum(tl.where(t0, tl.max(values), _kth_largest_net(values, K)), OKEY_MIN_FINITE)


@triton.jit
def _merge_top_k(best: tl.tensor, kth: tl.tensor, keys: tl.tensor, K: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    """The K largest of ``best`` (a set of K keys, 0-padded; ``kth`` its least, 0 until it holds K) and the 1-D block
    ``keys`` (unique, 0 = none): the keys above ``kth`` by a bitonic top-K of the block, then one of both. A block with
    none above leaves them as they are."""
    keys = tl.where(keys > kth, keys, 0)
    if tl.max(keys) != 0:
        best = _bitonic(tl.reshape(tl.join(best, _bitonic(keys, K, True, False)), [2 * K]), K, True, False)
        kth = tl.min(best)
    return best, kth


@triton.jit
def _chunks_top_k(surv: tl.tensor, count: tl.tensor, CHUNK: tl.constexpr, K: tl.constexpr) -> tl.tensor:
    """The K largest of the ``count`` keys at ``surv`` (unique, > 0), as a set, CHUNK at a time (``_merge_top_k``)."""
    best = tl.zeros([K], tl.uint64)
    kth = tl.zeros((), tl.uint64)
    for c0 in range(0, count, CHUNK):
        i = c0 + tl.arange(0, CHUNK)
        chunk = tl.load(surv + i, mask=i < count, other=0, cache_modifier=".cg").to(tl.uint64, bitcast=True)
        best, kth = _merge_top_k(best, kth, chunk, K)
    return best


@triton.jit
def _scan_chunks_top_k(row_ptr: tl.tensor, v: tl.tensor, bound: tl.tensor, KIND: tl.constexpr, CHUNK: tl.constexpr,
                       K: tl.constexpr) -> tl.tensor:
    """The first K entries of an OK row (no NaN, no +inf) among those with a value >= bound (uint32, at least the
    lowest finite value), as a set: the row read CHUNK entries at a time, each step's keys merged by networks
    (``_merge_top_k``; the fallback when the survivors overflow their slots: small in registers, unlike
    ``_scan_top_k``'s ranks)."""
    best = tl.zeros([K], tl.uint64)
    kth = tl.zeros((), tl.uint64)
    for c0 in range(0, v, CHUNK):
        offs = c0 + tl.arange(0, CHUNK).to(tl.int64)
        in_row = offs < v
        bits = _widen_bits(tl.load(row_ptr + offs, mask=in_row, other=0), KIND)
        keys = tl.where(in_row & (_value_key(bits) >= bound), _order_key(bits, offs), 0)
        best, kth = _merge_top_k(best, kth, keys, K)
    return best


@triton.jit
def _survivors_top_k(
    first: tl.tensor,  # [FEW] int64: the survivor slots 0 .. FEW - 1, loaded with the count (those past it: any)
    count: tl.tensor,  # survivors appended (slots past CAP not written)
    surv: tl.tensor,  # the row's CAP survivor slots
    row_ptr: tl.tensor,  # the row's raw logit bits (the fallback scan)
    v: tl.tensor,  # entries in the row
    bound: tl.tensor,  # uint32: a lower bound of the value of the row's K-th entry (the fallback's filter)
    KIND: tl.constexpr,
    FEW: tl.constexpr,  # survivors taken by one network (or rank), a power of two >= K
    CHUNK: tl.constexpr,  # survivors (entries of the fallback scan) per step beyond FEW
    CAP: tl.constexpr,  # survivor slots
    K: tl.constexpr,
    RANK: tl.constexpr,  # FEW survivors by a compare-and-count rank instead of a bitonic network
) -> tl.tensor:
    """The row's first K entries as a set ([K] uint64, 0-padded), given that every one of them is among the survivors
    (or, with more than CAP, has a value >= bound)."""
    if count <= FEW:
        few = tl.where(tl.arange(0, FEW) < count, first, 0).to(tl.uint64, bitcast=True)
        if RANK:
            top = _place(few, _rank_desc(few, FEW), K)  # unique keys: ranks 0 .. count - 1; the 0s rank count
        else:
            top = _bitonic(few, K, True, False)
    elif count <= CAP:
        top = _chunks_top_k(surv, count, CHUNK, K)
    else:
        top = _scan_chunks_top_k(row_ptr, v, bound, KIND, CHUNK, K)
    return top


@triton.jit
def _onelaunch_kernel(
    x_ptr: tl.tensor,  # [B, V] raw logit bits: int32 (fp32) or int16 (fp16/bf16)
    stride_row: tl.tensor,  # elements between rows of x
    v: tl.tensor,  # entries per row
    n_seg: tl.tensor,  # segments per row
    bucket_ptr: tl.tensor,  # [B, NB] int32: the rows' buckets (okeys with the sign bit flipped), all empty (-2^31)
    arrive_ptr: tl.tensor,  # [B] int32: programs of the row that have arrived, all 0
    publish_ptr: tl.tensor,  # [B] int32: programs of the row that have published, all 0
    surv_ptr: tl.tensor,  # [B, CAP] int64: the survivors' keys (uint64 bits), the first CAP appended
    nsurv_ptr: tl.tensor,  # [B] int32: survivors appended, all 0
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    seed_ptr: tl.tensor,  # [B] uint64 seed (as int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (as int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position (as int64 bits)
    tau: tl.tensor,  # fp32 drafter temperature, finite and > 0
    c_ptr: tl.tensor,  # fp64 constants of §6 (layout: _common.C_*)
    domain: tl.tensor,  # uint64 Philox key word 1: DOMAIN_PROPOSAL
    status_ptr: tl.tensor,  # [B] int8 out
    token_ptr: tl.tensor,  # [B] int32 out
    ids_ptr: tl.tensor,  # [B, K] int32 out
    tickets_ptr: tl.tensor,  # [B, K] int32 out
    KIND: tl.constexpr,  # _common.KIND_F32 / KIND_F16 / KIND_BF16
    L: tl.constexpr,  # entries per segment, a power of two >= G
    G: tl.constexpr,  # groups per segment whose least maximum bounds it, >= K
    PUB: tl.constexpr,  # group maxima published per segment, a power of two <= G
    NB: tl.constexpr,  # buckets per row, a power of two >= K
    CAP: tl.constexpr,  # survivor slots per row
    FEW: tl.constexpr,  # survivors of the last program's one batched load
    CHUNK: tl.constexpr,  # survivors (and entries of the fallback scan) per step beyond FEW
    POLLS: tl.constexpr,  # reads of the buckets per program at most (>= 1)
    RANK: tl.constexpr,  # the survivors' first K by a rank instead of a network
    K: tl.constexpr,  # 32
    PDL: tl.constexpr,  # launched with programmatic dependent launch (sm_90+; never in the interpreter)
) -> None:
    # One launch: program p is segment p mod n_seg of row p / n_seg (the protocol above).
    _pdl_prologue(PDL)
    pid = tl.program_id(0)
    b = (pid // n_seg).to(tl.int64)
    s = pid % n_seg
    row_ptr = x_ptr + b * stride_row
    offs = s.to(tl.int64) * L + tl.arange(0, L)
    bits = _load_padded(row_ptr + offs, offs < v, KIND)  # past the row's end: -inf, never a survivor
    x = bits.to(tl.float32, bitcast=True)
    temp = tl.load(temp_ptr + b)
    t0 = temp == 0.0

    # 1-2. The groups' maxima; PUB of them published (relaxed: any value a bucket holds is a bound).
    groups = _group_okeys(x, G)
    published = tl.max(tl.reshape(groups, [PUB, G // PUB]), axis=1)
    at = (s * PUB + tl.arange(0, PUB)) % NB
    tl.atomic_max(bucket_ptr + b * NB + at, (published ^ 0x80000000).to(tl.int32, bitcast=True), sem="relaxed")
    tl.atomic_add(publish_ptr + b, 1, sem="relaxed")

    # 3. The best bound published so far. A row that shows a NaN or +inf (here or in the buckets) or whose temperature
    # is bad has failed whatever the rest holds: it appends nothing.
    own_max = tl.max(groups)
    own = tl.where(t0, own_max, tl.min(groups))  # the least of G >= K group maxima (T0: the largest)
    live = (temp == temp) & (temp >= 0.0) & (own_max < OKEY_POS_INF)
    bi = tl.arange(0, NB)
    n = tl.zeros((), tl.int32)
    bound = tl.full((), OKEY_POS_INF, tl.uint32)
    last = tl.zeros([NB], tl.uint32)  # the buckets as last read
    polls = tl.zeros((), tl.int32)
    go = live
    while go:
        raw = tl.load(bucket_ptr + b * NB + bi, volatile=True)
        seen = tl.load(publish_ptr + b, volatile=True)
        values = (raw ^ SIGN32).to(tl.uint32, bitcast=True)
        if (polls == 0) | (tl.max((values != last).to(tl.int32)) != 0):  # buckets as last read: the same bound
            top = tl.max(values)
            # One reduction first: a segment below a lower bound of the bound has no survivor and skips the network.
            low = tl.maximum(tl.where(t0, top, _row_bound_floor(values, NB, K)), own)
            if (own_max >= low) & (top < OKEY_POS_INF):
                bound = tl.maximum(_bound_of(values, t0, K), own)
                n = tl.sum((x >= _value_bits(bound).to(tl.float32, bitcast=True)).to(tl.int32))
            else:
                bound = tl.maximum(low, OKEY_MIN_FINITE)
                n = tl.zeros((), tl.int32)
        last = values
        polls += 1
        go = (n != 0) & (seen < n_seg) & (polls < POLLS)

    # 4. The survivors (x >= the bound's value is okey(x) >= bound for x finite or -inf; NaN never passes).
    if n != 0:
        passed = x >= _value_bits(bound).to(tl.float32, bitcast=True)
        key = _order_key(bits, offs)
        slot = tl.atomic_add(nsurv_ptr + b, n, sem="relaxed") + tl.cumsum(passed.to(tl.int32), axis=0) - 1
        tl.store(surv_ptr + b * CAP + slot, key.to(tl.int64, bitcast=True), mask=passed & (slot < CAP))

    # 5. Arrive; the last program of the row selects.
    if _last_of_row(arrive_ptr, b, n_seg):
        k = tl.arange(0, K)
        raw = tl.load(bucket_ptr + b * NB + bi, cache_modifier=".cg")
        count = tl.load(nsurv_ptr + b, cache_modifier=".cg")
        first = tl.load(surv_ptr + b * CAP + tl.arange(0, FEW), cache_modifier=".cg")  # with the count: one trip
        u = _proposal_uniform(seed_ptr, round_ptr, pos_ptr, domain, b)  # off the chain: no logit enters it
        kc = _exp_scalars(c_ptr)
        tables = _exp_tables(c_ptr)
        values = (raw ^ SIGN32).to(tl.uint32, bitcast=True)
        status, greedy, sampled = _value_status(tl.max(values), temp)
        top = tl.zeros([K], tl.uint64)  # failed rows: no entry
        if status == 0:
            top = _survivors_top_k(first, count, surv_ptr + b * CAP, row_ptr, v, _bound_of(values, t0, K), KIND, FEW,
                                   CHUNK, CAP, K, RANK)
        tl.store(bucket_ptr + b * NB + bi, tl.full([NB], SIGN32, tl.int32))
        tl.store(nsurv_ptr + b, 0)
        tl.store(publish_ptr + b, 0)
        _row_outputs(top, k, status, greedy, sampled, b, tau, kc, tables, c_ptr, u, status_ptr, token_ptr, ids_ptr,
                     tickets_ptr, K, True)


@triton.jit
def _row_select_kernel(
    x_ptr: tl.tensor,  # [B, V] raw logit bits
    stride_row: tl.tensor,
    v: tl.tensor,
    surv_ptr: tl.tensor,  # [B, CAP] int64: the survivors' keys (uint64 bits), the first CAP appended (any contents)
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    seed_ptr: tl.tensor,  # [B] uint64 seed (as int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (as int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position (as int64 bits)
    tau: tl.tensor,  # fp32 drafter temperature, finite and > 0
    c_ptr: tl.tensor,  # fp64 constants of §6 (layout: _common.C_*)
    domain: tl.tensor,  # uint64 Philox key word 1: DOMAIN_PROPOSAL
    status_ptr: tl.tensor,  # [B] int8 out
    token_ptr: tl.tensor,  # [B] int32 out
    ids_ptr: tl.tensor,  # [B, K] int32 out
    tickets_ptr: tl.tensor,  # [B, K] int32 out
    KIND: tl.constexpr,
    L: tl.constexpr,  # entries per step, a power of two >= NB
    NB: tl.constexpr,  # buckets (groups per step), a power of two >= K
    CAP: tl.constexpr,
    FEW: tl.constexpr,
    CHUNK: tl.constexpr,
    RANK: tl.constexpr,
    K: tl.constexpr,
    PDL: tl.constexpr,
) -> None:
    # The row selector: one program per row, no other program to wait for or to tell. Step by step (L entries, the
    # next step's load issued before this one is filtered), group j of each step raises bucket j (registers); the
    # bound is the K-th largest bucket (distinct entries: the groups of different buckets are disjoint), so the
    # entries of a step below it are not among the row's first K; those at or above it are appended. Then the first
    # K of the survivors and §4-§8, as the one-launch selector's last program.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    row_ptr = x_ptr + b * stride_row
    surv = surv_ptr + b * CAP
    temp = tl.load(temp_ptr + b)
    t0 = temp == 0.0
    live = (temp == temp) & (temp >= 0.0)
    lanes = tl.arange(0, L).to(tl.int64)
    buckets = tl.zeros([NB], tl.uint32)
    count = tl.zeros((), tl.int32)
    nxt = _load_padded(row_ptr + lanes, lanes < v, KIND)
    for c0 in range(0, v, L):
        offs = c0 + lanes
        bits = nxt
        ahead = offs + L
        nxt = _load_padded(row_ptr + ahead, ahead < v, KIND)  # past the row's end: nothing is read
        x = bits.to(tl.float32, bitcast=True)
        groups = _group_okeys(x, NB)
        buckets = tl.maximum(buckets, groups)
        top = tl.max(buckets)
        low = tl.where(t0, top, _row_bound_floor(buckets, NB, K))
        if live & (tl.max(groups) >= low) & (top < OKEY_POS_INF):
            bound = _bound_of(buckets, t0, K)
            passed = x >= _value_bits(bound).to(tl.float32, bitcast=True)
            n = tl.sum(passed.to(tl.int32))
            if n != 0:
                slot = count + tl.cumsum(passed.to(tl.int32), axis=0) - 1
                tl.store(surv + slot, _order_key(bits, offs).to(tl.int64, bitcast=True), mask=passed & (slot < CAP))
                count += n
    tl.debug_barrier()  # the survivors stored above are visible to the whole program after this barrier
    k = tl.arange(0, K)
    first = tl.load(surv + tl.arange(0, FEW), cache_modifier=".cg")
    u = _proposal_uniform(seed_ptr, round_ptr, pos_ptr, domain, b)
    kc = _exp_scalars(c_ptr)
    tables = _exp_tables(c_ptr)
    status, greedy, sampled = _value_status(tl.max(buckets), temp)
    top32 = tl.zeros([K], tl.uint64)
    if status == 0:
        top32 = _survivors_top_k(first, count, surv, row_ptr, v, _bound_of(buckets, t0, K), KIND, FEW, CHUNK, CAP, K,
                                 RANK)
    _row_outputs(top32, k, status, greedy, sampled, b, tau, kc, tables, c_ptr, u, status_ptr, token_ptr, ids_ptr,
                 tickets_ptr, K, True)
