"""Triton body of the greedy selector (SPEC.md §3, §4.2, §7 for T0 rows): one pass over each row in two launches.
The launcher is ``launchers.greedy``; the helpers (widening, the §4.1 key) are ``_common``'s.

Launch 1 (``_tiles_kernel``), one program per (row, tile), reduces the tile to one partial; launch 2
(``_rows_kernel``), one program per row, reduces the row's partials and writes its outputs. Two launches measured
faster than one whose row's last program finishes the row (its row counter's atomic and fence in every program cost
more than a second launch under programmatic dependent launch: bench/NOTES.md, "The greedy path in two launches").

A row's largest §4.1 key, with every NaN moved above +inf, is its maximum with the lowest ID among equal values
(§4.2), and tells the row's §3 status by itself: NaN if it is a NaN, +inf if it is +inf, zero mass if it is -inf.
Without RESCAN a tile's partial is its largest key (``_best_key``: two reductions on 32-bit values) and launch 2 takes
the largest of them.

With RESCAN (one shard) a tile reduces its entries to their NaN-propagating maximum alone, one operation per entry:
NaN if the tile holds one, else its maximum value. The row's maximum M of these gives the §3 status the same way
(NaN, +inf, -inf); the lowest ID with the value M lies in the first tile whose maximum equals M (-0.0 and +0.0 equal,
as §4.2 compares them), which launch 2 reads again for the lowest index there. The same outputs as the keys, with
the index search on one tile instead of on all.
"""

from __future__ import annotations

import triton
import triton.language as tl

from pp3.kernels._common import (
    EMPTY_ID,
    KIND_BF16,
    KIND_F32,
    OKEY_NEG_INF,
    OKEY_POS_INF,
    TICKETS,
    _best_key,
    _key_id,
    _load_padded,
    _lowest_at,
    _masked_by,
    _max_class,
    _max_nan,
    _pdl_prologue,
    _widen_bits,
)


@triton.jit
def _peak(raw: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """The NaN-propagating maximum of a block of raw logit bits, as an fp32 scalar (its value exactly): fp32 as it is;
    bf16 widened by a shift (§2.1, as ``_widen_bits``); fp16 reduced as fp16 (two entries per instruction on the GPU)
    and its maximum widened, which is the maximum of the widened entries (widening is exact and keeps the order)."""
    if KIND == KIND_F32:
        m = tl.reduce(raw.to(tl.float32, bitcast=True), 0, _max_nan)
    elif KIND == KIND_BF16:
        m = tl.reduce((raw.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True), 0, _max_nan)
    else:
        m = tl.reduce(raw.to(tl.float16, bitcast=True), 0, _max_nan).to(tl.float32)
    return m


@triton.jit
def _rescan_row(x_ptr: tl.tensor, stride_row: tl.tensor, v_shard: tl.tensor, part_ptr: tl.tensor, b: tl.tensor,
                n_tiles: tl.tensor, KIND: tl.constexpr, TILE: tl.constexpr, NT: tl.constexpr
                ) -> tuple[tl.tensor, tl.tensor]:
    """Row b's §3 status and §4.2 token from its tiles' NaN-propagating maxima (RESCAN; one shard): the row's maximum
    M, the status from M alone, and the lowest index equal to M in the first tile whose maximum is M, read again."""
    ti = tl.arange(0, NT)
    peaks = tl.load(part_ptr + b * n_tiles + ti, mask=ti < n_tiles, other=0, cache_modifier=".cg")  # L2: launch 1's
    peaks = tl.where(ti < n_tiles, peaks.to(tl.int32).to(tl.float32, bitcast=True), float("-inf"))
    m = tl.reduce(peaks, 0, _max_nan)
    status = _max_class(m)  # §3 from the row's maximum alone
    ok = status == 0
    # §4.2: the first tile holding m, read again (from L2 where it still is), and the lowest index in it equal to m.
    first_tile = _lowest_at(peaks, m, NT).to(tl.int64)
    again = first_tile * TILE + tl.arange(0, TILE)
    row = _load_padded(x_ptr + b * stride_row + again, _masked_by(again < v_shard, ok), KIND)
    first = _lowest_at(row.to(tl.float32, bitcast=True), m, TILE)
    return status, tl.where(ok, (first_tile * TILE + first).to(tl.int32), EMPTY_ID)


@triton.jit
def _tiles_kernel(
    x_ptr: tl.tensor,  # [B, V_shard] raw logit bits: int32 (fp32) or int16 (fp16/bf16)
    stride_row: tl.tensor,  # elements between rows of x
    v_shard: tl.tensor,  # entries in this shard (>= 1)
    id_offset: tl.tensor,  # global token ID of the shard's entry 0
    part_ptr: tl.tensor,  # [B, n_tiles] int64 out: each tile's largest key (uint64 bits) or maximum (RESCAN)
    tile_base: tl.tensor,  # index of this shard's first tile in the row's tiles
    n_tiles: tl.tensor,  # tiles per row over all shards
    KIND: tl.constexpr,  # _common.KIND_F32 / KIND_F16 / KIND_BF16
    TILE: tl.constexpr,  # entries per program, a power of two
    PDL: tl.constexpr,  # launched with programmatic dependent launch (sm_90+; never in the interpreter)
    RESCAN: tl.constexpr,  # tiles store their NaN-propagating maxima (one shard)
) -> None:
    # Launch 1, one program per (row, tile): the tile's largest key (or maximum).
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    # A whole tile (all but a row's last, where V is no multiple of TILE) loads without a mask; the last tile pads
    # with -inf (_load_padded).
    lanes = tl.arange(0, TILE)
    tile_ptr = x_ptr + b * stride_row + t.to(tl.int64) * TILE
    left = v_shard - t * TILE  # entries from this tile's first to the row's end
    if RESCAN:
        # One operation per entry: the NaN-propagating maximum.
        if left >= TILE:
            peak = _peak(tl.load(tile_ptr + lanes), KIND)
        else:
            peak = _peak(_load_padded(tile_ptr + lanes, lanes < left, KIND), KIND_F32)  # widened: fp32 bits
        tl.store(part_ptr + b * n_tiles + tile_base + t, peak.to(tl.int32, bitcast=True).to(tl.int64))
    else:
        first_id = id_offset + t.to(tl.int64) * TILE
        if left >= TILE:
            best = _best_key(_widen_bits(tl.load(tile_ptr + lanes), KIND), first_id, TILE)
        else:
            best = _best_key(_load_padded(tile_ptr + lanes, lanes < left, KIND), first_id, TILE)
        tl.store(part_ptr + b * n_tiles + tile_base + t, best.to(tl.int64, bitcast=True))


@triton.jit
def _rows_kernel(
    x_ptr: tl.tensor,  # [B, V] raw logit bits, as launch 1's (RESCAN: the one shard; else not read)
    stride_row: tl.tensor,
    v_shard: tl.tensor,
    part_ptr: tl.tensor,  # [B, n_tiles] the tiles' partials (launch 1)
    n_tiles: tl.tensor,
    status_ptr: tl.tensor,  # [B] int8 out
    token_ptr: tl.tensor,  # [B] int32 out
    ids_ptr: tl.tensor,  # [B, K] int32 out
    tickets_ptr: tl.tensor,  # [B, K] int32 out
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NT: tl.constexpr,  # power of two >= n_tiles
    K: tl.constexpr,  # 32
    PDL: tl.constexpr,
    RESCAN: tl.constexpr,  # as launch 1's
) -> None:
    # Launch 2, one program per row: the row's status and token from its tiles' partials, then its outputs.
    _pdl_prologue(PDL)
    b = tl.program_id(0).to(tl.int64)
    if RESCAN:
        status, g = _rescan_row(x_ptr, stride_row, v_shard, part_ptr, b, n_tiles, KIND, TILE, NT)
    else:
        ti = tl.arange(0, NT)
        parts = tl.load(part_ptr + b * n_tiles + ti, mask=ti < n_tiles, other=0, cache_modifier=".cg")
        top = tl.max(parts.to(tl.uint64, bitcast=True))
        okey = (top >> 32).to(tl.uint32)
        # §3 in precedence order, from the row's largest key alone.
        status = tl.where(okey == 0xFFFFFFFF, 1, tl.where(okey == OKEY_POS_INF, 2,
                                                          tl.where(okey <= OKEY_NEG_INF, 3, 0)))
        g = tl.where(status == 0, _key_id(top), EMPTY_ID)  # §4.2: the maximum, the lowest ID among equal values
    ok = status == 0
    slot = tl.arange(0, K)
    tl.store(status_ptr + b, status.to(tl.int8))
    tl.store(token_ptr + b, g)
    # §7: a T0 row's slot 0 is (g, 2^24), the other slots empty; a failed row has every slot empty.
    tl.store(ids_ptr + b * K + slot, tl.where(slot == 0, g, EMPTY_ID))
    tl.store(tickets_ptr + b * K + slot, tl.where((slot == 0) & ok, TICKETS, 0))
