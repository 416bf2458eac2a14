"""Triton bodies of the verifier (SPEC.md §11). The launcher and argument checks live in ``accept.py``; the helpers
both operations use (widening, the §4.1 key, the §3 flags, ``_expf``, the pairwise tree) in ``_common.py``, with the
arithmetic model every exact-path kernel follows. A verification is seven launches over the target rows and their
tiles (below). Every sum but the §11.4 P4 tree and launch 1's screen is over integers (exact).
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.random import philox_impl

from pp3.kernels._common import (
    EMPTY_ID,
    TICKETS,
    _expf,
    _last_of_row,
    _load_padded,
    _lowest_at,
    _masked_by,
    _max_class,
    _max_nan,
    _screen_exp,
    _tree,
    _widen_bits,
)

P_TICKETS_F = tl.constexpr(1099511627776.0)  # 2^40 as fp64: w * 2^40 is exact
P_TICKETS_I = tl.constexpr(1099511627776)  # 2^40

# The per-request state that launch 2 (or 5) writes and launches 3-7 read: SW int32 words per request row, STATE
# (16 bytes), or STATE_HANDOVER (32) with the handed-over word (``config.LaunchConfig.handover``).
STATE = tl.constexpr(4)
STATE_HANDOVER = tl.constexpr(8)
ST_DRAWS = tl.constexpr(0)  # 1: a sampled OK request whose token at index a launches 6 and 7 draw
ST_A = tl.constexpr(1)  # a, the accepted drafts (§11.6)
ST_MARKED = tl.constexpr(2)  # 1: launch 2 left a test open; launches 3 to 5 decide it with S and R
ST_REJECTED = tl.constexpr(3)  # 1: draft a was rejected (Q* = Q_a); 0: the bonus (Q* = 0)
# With STATE_HANDOVER, words 4 and 5 (8-byte aligned) hold one int64 that launch 2 writes for launch 3: bit 0 draws,
# bit 1 marked, bits 2 .. 31 a, bits 32 .. 63 the bits of row a's maximum m (launch 1's, the logit at g_a).
ST_WORD = tl.constexpr(4)
HAND_DRAWS = tl.constexpr(1)
HAND_MARKED = tl.constexpr(2)


@triton.jit
def _exponent(x: tl.tensor, m: tl.tensor, temp: tl.tensor) -> tl.tensor:
    """§11.4 P2-P3's argument of the exponential: z = fl32(fl32(x - m) / T), -inf where d = -inf.

    A temperature that is a power of two 2^e (-126 <= e <= 127: its reciprocal 2^-e is an fp32 number, subnormal at
    e = 127) divides as the product by that reciprocal: both are the correctly rounded value of the same real d 2^-e,
    so every bit is the division's (``tests/test_kernels_accept.py`` checks it on every fp32 d class); T = 1, the
    usual target temperature, then costs one multiplication instead of an IEEE division per entry."""
    d = x - m  # P2: fp32
    tb = temp.to(tl.uint32, bitcast=True)
    ex = (tb >> 23) & 0xFF
    if ((tb & 0x807FFFFF) == 0) & (ex >= 1) & (ex <= 254):
        z = d * tl.math.div_rn(1.0, temp)  # the exact reciprocal of a power of two: finite and > 0, so -inf stays
    else:
        # P3: IEEE fp32 division, NaN only where d = -inf and T = +inf: -inf there (expf(-inf) = +0.0)
        z = tl.where(d == float("-inf"), float("-inf"), tl.math.div_rn(d, temp))
    return z


@triton.jit
def _weights(x: tl.tensor, m: tl.tensor, temp: tl.tensor, c_ptr: tl.tensor) -> tl.tensor:
    """§11.4 P2-P3 and the exact widening of P4: fp32 logits -> fp64 weights (0 where d = -inf)."""
    return _expf(_exponent(x, m, temp), c_ptr).to(tl.float64)


@triton.jit
def _load_fp32(row_ptr: tl.tensor, offs: tl.tensor, mask: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    raw = tl.load(row_ptr + offs, mask=mask, other=0)
    return _widen_bits(raw, KIND).to(tl.float32, bitcast=True)


@triton.jit
def _floor_count(w: tl.tensor, s: tl.tensor) -> tl.tensor:
    """§11.4 P5: floor(fl64(fl64(w * 2^40) / S)) as int64 (the quotient is >= 0, so truncation is the floor)."""
    # No annotated local here: Triton 3.9's interpreter casts to a local's annotation (tl.tensor is no dtype), and the
    # constexpr factor makes the expression Any to mypy.
    return ((w * P_TICKETS_F) / s).to(tl.int64)  # type: ignore[no-any-return]


UNSURE = tl.constexpr(-1)  # launch 6: a tile whose sum of counts c launch 7 forms by the division
TWO_52 = tl.constexpr(4503599627370496.0)  # 2^52: (q + 2^52) - 2^52 = rint(q) for 0 <= q < 2^51
TWO_52_BITS = tl.constexpr(0x4330000000000000)  # the fp64 bits of 2^52


@triton.jit
def _floor_counts_fast(w: tl.tensor, inv: tl.tensor, near: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    """``_floor_count(w, S)`` of a vector of weights w >= 0 by one multiplication by ``inv`` = fl64(2^40 / S) per
    entry instead of a division, and whether the vector holds an entry too close to an integer to tell (then the
    counts may be wrong and the caller divides). ``near``: 2^-49 (``accept.count_margin``; any larger value only
    flags more entries).

    Proof that the counts of an unflagged vector are the division's. With u = 2^-53, x = w 2^40 / S (real) and
    q = fl64(w inv), q = x (1 + d1)(1 + d2), |d1|, |d2| <= u, so |q - x| < 2^-51.9 x, and x <= 2^40 (w <= 1 <= S:
    row a's largest weight is expf(0) = 1). Then r = (q + 2^52) - 2^52 = rint(q) exactly (q < 2^51: the sum lies in
    [2^52, 2^53), where the spacing is 1) and f = q - r is exact (|f| <= 1/2; Sterbenz for r >= 1, f = q for r = 0).
    If q > 0 and |f| > 2^-49 q, no integer lies within 2^-49 q of q, so none within 2^-50 x of x: floor(x) =
    floor(q), and fl64(x) stays on the same side of every integer (it moves x by at most u x < 2^-50 x, and integers
    below 2^53 are fp64 numbers), so floor(fl64(x)) = floor(q) = r - [f < 0], read from the bits of q + 2^52. If
    q = 0 then w = 0 (w > 0 is at least 2^-149 and inv at least 2^40 / V) and the count is 0. An entry is flagged
    with probability about 2^-48 q, and the q of a row sum to at most 2^40: about 2^-8 of the rows that draw have
    a flagged tile, or fewer."""
    q = w * inv
    big = q + TWO_52
    f = q - (big - TWO_52)
    c = big.to(tl.int64, bitcast=True) - TWO_52_BITS - (f < 0.0).to(tl.int64)
    return c, tl.max(((q != 0.0) & (tl.abs(f) <= q * near)).to(tl.int32))


@triton.jit
def _lemire_step(
    w: tl.tensor, s: tl.tensor, t: tl.tensor, out: tl.tensor, done: tl.tensor
) -> tuple[tl.tensor, tl.tensor]:
    """One word of §11.5: take floor(w * s / 2^64) if nothing was taken yet and (w * s mod 2^64) >= t."""
    lo = w * s  # the low word of the 128-bit product (uint64 multiplication wraps)
    take = (done == 0) & (lo >= t)
    return tl.where(take, tl.math.umulhi(w, s), out), tl.where(take, 1, done)


@triton.jit
def _uniform_below(seed: tl.tensor, rnd: tl.tensor, pos: tl.tensor, domain: tl.tensor, s: tl.tensor) -> tl.tensor:
    """§11.5: an integer exactly uniform on 0 .. s-1 (1 <= s <= 2^40), Lemire's method on the stream's words; ``pos``
    and ``s`` a scalar or one vector of lanes (each lane its own stream and bound; the others scalars).

    Words W_{4i+k} are word k of Philox4x64-10(counter = (rnd, pos, i, 0), key = (seed, domain)). The threshold
    t = 2^64 mod s is computed as ((2^64 - 1) mod s + 1) mod s, with no 65-bit value.
    """
    # s >= 1 already (§11.5). The max is for the compiler: Triton 3.6's axis analysis takes a scalar summed in a
    # loop from zero to be the constant 0 and crashes on the remainder by it (TritonGPUCoalesce fails).
    s = tl.maximum(s, 1)
    t = ((0xFFFFFFFFFFFFFFFF % s) + 1) % s
    out = tl.zeros_like(s)
    done = tl.zeros_like(s).to(tl.int32)
    pos = pos + tl.zeros_like(s)
    blk = tl.zeros((), tl.uint64)
    zero = tl.zeros((), tl.uint64)
    # (+ a [1] vector: a reduction over a scalar does not compile)
    while tl.min(done + tl.zeros([1], tl.int32)) == 0:  # a word is rejected with probability < 2^-24
        w0, w1, w2, w3 = philox_impl(rnd, pos, blk, zero, seed, domain)
        out, done = _lemire_step(w0, s, t, out, done)
        out, done = _lemire_step(w1, s, t, out, done)
        out, done = _lemire_step(w2, s, t, out, done)
        out, done = _lemire_step(w3, s, t, out, done)
        blk += 1
    return out


# ------------------------------------------------------------------------------------------ the seven launches
#
# A verification runs as seven launches over the target rows r = (b, j) (row b of the batch, target position j) and
# their tiles t. Partial results go to [R, n_tiles] buffers; the row's program that counts in last
# (``_last_of_row``, the row counters of ``_workspace``) reduces them once into [R] or [B] buffers that later launches
# read as scalars. Each reduction is in a fixed order (the P4 tree) or over integers, so which program is last changes
# no bit.
#   1. Per tile: its NaN-propagating maximum (the peak), and for sampled requests the screen
#      (``pp3.kernels.screen``: a cheap fp32 exponential against the tile's maximum); the row's class, g and m, and
#      its S~, with S_lo = S~ (1 - 2^-12) <= S <= S_hi = S~ (1 + 2^-12).
#   2. Per request: the status and the acceptance chain (§11.6) by the interval alone. P_j(x_j) = c + [x_j = g_j] R
#      with the floor count c between c(S_hi) and c(S_lo) and 0 <= R <= V (§11.4, "Range"), so U_j < c(S_hi)
#      accepts and U_j >= c(S_lo) + [x_j = g_j] V rejects whatever S and R are. A U_j in between stops the chain and
#      marks the request: probability about 2^-11 p_j(x_j) / q_j(x_j) + [x_j = g_j] V / 2^40 per test.
#   3. Per tile of the rows whose exact S a later launch reads (row a of a request that draws, every row of a
#      marked one): the §11.4 P4 subtree sums of the weights; the row's S.
#   4. Only for marked requests, CHUNK tiles per program: the P5 floor counts of every target row; the row's R.
#   5. Only for marked requests: launch 2's chain again, with S and R (the same code with ``have_r``).
#   6. Per tile of row (b, a) of every request that draws (§11.7): the sum of the plain floor counts c (by the
#      reciprocal of S; UNSURE in the rare tiles too close to an integer to tell), and the sum of min(c(y), Q*(y)
#      2^16) over the slots of Q* in the tile but g's.
#   7. Per request that draws: the UNSURE tiles' sums by the division; since r = P - min(P, Q* 2^16), the residual's
#      tile sums follow from launch 6's and R = 2^40 - (the sum of c), with g's own term; U below their sum (§11.5),
#      the tile t* that holds the draw, the residual over tile t* alone, its cumulative sum from the sums before t*,
#      and the token: the first y with U < C(y).
# A launch skips whole rows that no later launch reads; the skip depends on the row alone (values of an earlier
# launch), so either every program of a row counts in or none does, and a skipped row's counter stays 0.
# Two variants change how, never what (``config.LaunchConfig``): ``screen`` picks launch 1's screening exponential
# (SCREEN: the pinned fp32 polynomial, or the hardware's ex2.approx.f32 under its audited bound, SPEC.md §11.12); its
# values go to launch 1's own buffers, and only S~ is read after it, by launch 2. ``handover`` (HANDOVER, SW =
# STATE_HANDOVER): launch 2 also writes one int64 per request (ST_WORD: draws, marked, a, row a's maximum), which a
# tile of launch 3 reads in one load before row a's logits (a drawing request's row a is OK: no class to read);
# launch 3 then stores row a's weights and tile sums and ends there (the row counters only for marked requests,
# whose S launches 4 and 5 read), and launches 6 and 7 form S by the P4 tree over the tile sums (``_row_s``).


@triton.jit
def _row_argmax(peak_ptr: tl.tensor, row: tl.tensor, v: tl.tensor, r: tl.tensor, n_tiles: tl.tensor,
                KIND: tl.constexpr, TILE: tl.constexpr, NTP: tl.constexpr
                ) -> tuple[tl.tensor, tl.tensor, tl.tensor]:
    """Target row r's class (§3: 1 NaN, 2 +inf, 3 zero mass, 0 OK), argmax g (the largest value, the lowest ID among
    equal values, -0.0 and +0.0 equal: §4.1) and the logit m at g (its bits as they are), from launch 1's per-tile
    peaks: the row's NaN-propagating maximum M of them gives the class, and the first tile whose peak equals M holds
    g, read again (from L2: this launch has just read it). A row that is not OK gets some g and m that no launch reads
    (its request fails, §11.3 step 2, or the row lies past n); a NaN row's tile is none, and nothing is read."""
    ti = tl.arange(0, NTP)
    peaks = tl.load(peak_ptr + r * n_tiles + ti, mask=ti < n_tiles, other=float("-inf"), cache_modifier=".cg")
    best = tl.reduce(peaks, 0, _max_nan)
    cls = _max_class(best)
    first = _lowest_at(peaks, best, NTP)  # a padding lane (-inf) never precedes a live one
    lanes = tl.arange(0, TILE)
    offs = first * TILE + lanes
    bits = _load_padded(row + offs, offs < v, KIND)  # past the row's end -inf, after every real entry
    at = _lowest_at(bits.to(tl.float32, bitcast=True), best, TILE)
    m = tl.max(tl.where(lanes == at, bits, 0)).to(tl.float32, bitcast=True)  # the one lane at g: its bits as they are
    return cls, first * TILE + at, m


@triton.jit
def _row_total(sums_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor, NTP: tl.constexpr,
               NTP_LOG: tl.constexpr) -> tl.tensor:
    """§11.4 P4: S of target row r, the tree over its tile subtree sums padded with zeros to NTP (the tree over any
    larger power of two gives the same S)."""
    ti = tl.arange(0, NTP)
    sums = tl.load(sums_ptr + r * n_tiles + ti, mask=ti < n_tiles, other=0.0, cache_modifier=".cg")
    return _tree(sums, NTP, NTP_LOG)


@triton.jit
def _row_s(s_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor, NTP: tl.constexpr, NTP_LOG: tl.constexpr,
           HANDOVER: tl.constexpr) -> tl.tensor:
    """Row r's S for launches 6 and 7: launch 3's row total at ``s_ptr``, or with HANDOVER the P4 tree over its tile
    sums there (``_row_total``: the same tree, the same bits, formed by every program that reads it)."""
    if HANDOVER:
        s = _row_total(s_ptr, r, n_tiles, NTP, NTP_LOG)
    else:
        s = tl.load(s_ptr + r)
    return s


@triton.jit
def _row_screen(peak_ptr: tl.tensor, sums_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor, m: tl.tensor,
                temp: tl.tensor, NTP: tl.constexpr, NTP_LOG: tl.constexpr, SCREEN: tl.constexpr) -> tl.tensor:
    """S~ of target row r (``pp3.kernels.screen``): each tile's screen sum against its maximum m_t times the
    screening exponential of (m_t - m) / T, summed by the fp64 tree (0 for a tile of -inf: its sum is 0)."""
    ti = tl.arange(0, NTP)
    live = ti < n_tiles
    peaks = tl.load(peak_ptr + r * n_tiles + ti, mask=live, other=float("-inf"), cache_modifier=".cg")
    sums = tl.load(sums_ptr + r * n_tiles + ti, mask=live, other=0.0, cache_modifier=".cg")
    factor = _screen_exp(_exponent(peaks, m, temp), SCREEN)
    return _tree(tl.where(live, sums * factor.to(tl.float64), 0.0), NTP, NTP_LOG)


@triton.jit
def _row_remainder(counts_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor, NTP: tl.constexpr) -> tl.tensor:
    """§11.4 P6: R = 2^40 - the sum of target row r's floor counts (int64, exact)."""
    ti = tl.arange(0, NTP)
    counts = tl.load(counts_ptr + r * n_tiles + ti, mask=ti < n_tiles, other=0, cache_modifier=".cg")
    return -tl.sum(counts) + P_TICKETS_I  # type: ignore[no-any-return]  # -x + C: _common.TICKETS


@triton.jit
def _verify_tiles_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits: int32 (fp32) or int16 (fp16 / bf16)
    stride_b: tl.tensor,  # elements between request rows of x
    stride_j: tl.tensor,  # elements between positions of x
    v: tl.tensor,  # vocabulary size V
    n_tiles: tl.tensor,  # tiles per target row
    cnt_ptr: tl.tensor,  # [>= R] int32 row counters, all 0 (_workspace; left all 0)
    peak_ptr: tl.tensor,  # [R, n_tiles] fp32 out: each tile's peak, its NaN-propagating maximum
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64 out: each tile's screen sum against its own maximum (sampled requests)
    cls_ptr: tl.tensor,  # [R] int32 out: each row's class (§3: 1 NaN, 2 +inf, 3 zero mass, 0 OK)
    g_ptr: tl.tensor,  # [R] int32 out: each row's argmax g (§11.4 P1)
    m_ptr: tl.tensor,  # [R] fp32 out: each row's maximum, the logit at g
    approx_ptr: tl.tensor,  # [R] fp64 out: S~ of the OK rows of sampled requests (pp3.kernels.screen)
    D: tl.constexpr,  # proposal depth
    KIND: tl.constexpr,  # logits dtype (_common.KIND_*)
    TILE: tl.constexpr,  # vocabulary entries per tile, a power of two
    TILE_LOG: tl.constexpr,  # log2(TILE)
    NTP: tl.constexpr,  # power of two >= n_tiles (>= 2)
    NTP_LOG: tl.constexpr,  # log2(NTP)
    SCREEN: tl.constexpr,  # the screening exponential (_common.SCREEN_PINNED or SCREEN_EX2: config.LaunchConfig.screen)
) -> None:
    # Launch 1: §11.3 step 2's row classes and §11.4 P1's argmax, and for sampled requests the screen. Per tile, its
    # peak m_t, the NaN-propagating maximum of its entries (a NaN if one is; -0.0 and +0.0 as the hardware's maximum
    # leaves them, which no later comparison tells apart), one operation per entry; and the screen: the fp32 tree of
    # the screening exponential of every entry against m_t. The row's last program reduces them: class, g and m
    # (``_row_argmax``, one tile read again), and S~ = sum over tiles of (tile sum) * screen((m_t - m) / T). Entries
    # past the row's end read as -inf: they neither raise the maximum nor flag anything nor weigh in S (in S~ each
    # weighs less than 2^-124, which pp3.kernels.screen bounds), and a row whose maximum is -inf has failed (zero
    # mass) whatever g is.
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_tiles
    t = (pid % n_tiles).to(tl.int32)
    row = x_ptr + (r // (D + 1)) * stride_b + (r % (D + 1)) * stride_j
    offs = t * TILE + tl.arange(0, TILE)
    if t * TILE + TILE <= v:  # a whole tile (all but a row's last, where V is no multiple of TILE): no mask
        bits = _widen_bits(tl.load(row + offs), KIND)
    else:
        bits = _load_padded(row + offs, offs < v, KIND)
    x = bits.to(tl.float32, bitcast=True)
    mt = tl.reduce(x, 0, _max_nan)  # NaN for a tile that holds a NaN
    tl.store(peak_ptr + pid, mt)
    temp = tl.load(temp_ptr + r // (D + 1))
    if temp > 0.0:
        e = _screen_exp(_exponent(x, mt, temp), SCREEN)
        # A tile of -inf alone weighs nothing (its x - m_t would be NaN); a NaN or +inf tile fails its row.
        tl.store(sums_ptr + pid, tl.where(mt > float("-inf"), _tree(e, TILE, TILE_LOG), 0.0).to(tl.float64))
    if _last_of_row(cnt_ptr, r, n_tiles):
        cls, g, m = _row_argmax(peak_ptr, row, v, r, n_tiles, KIND, TILE, NTP)
        tl.store(cls_ptr + r, cls)
        tl.store(g_ptr + r, g)
        tl.store(m_ptr + r, m)
        if (cls == 0) & (temp > 0.0):
            tl.store(approx_ptr + r, _row_screen(peak_ptr, sums_ptr, r, n_tiles, m, temp, NTP, NTP_LOG, SCREEN))


@triton.jit
def _sum_rows(x_ptr: tl.tensor, stride_b: tl.tensor, stride_j: tl.tensor, v: tl.tensor, n_tiles: tl.tensor,
              cnt_ptr: tl.tensor, cls_ptr: tl.tensor, m_ptr: tl.tensor, c_ptr: tl.tensor, sums_ptr: tl.tensor,
              s_ptr: tl.tensor, w_ptr: tl.tensor, b: tl.tensor, t: tl.tensor, offs: tl.tensor, in_row: tl.tensor,
              temp: tl.tensor, lo: tl.tensor, hi: tl.tensor, marked: tl.tensor, D: tl.constexpr, KIND: tl.constexpr,
              TILE: tl.constexpr, TILE_LOG: tl.constexpr, NTP: tl.constexpr, NTP_LOG: tl.constexpr) -> None:
    """Launch 3 on tile t of request b's rows lo .. hi - 1 that are OK: the weights (stored for row a unless
    ``marked``), the tile's P4 subtree sum, and in the row's last program its S."""
    for j in range(lo, hi):
        r = b * (D + 1) + j
        if tl.load(cls_ptr + r) == 0:  # temp > 0: the request is sampled
            row = x_ptr + b * stride_b + (r % (D + 1)) * stride_j
            e = _expf(_exponent(_load_fp32(row, offs, in_row, KIND), tl.load(m_ptr + r), temp), c_ptr)
            if marked == 0:
                tl.store(w_ptr + b * v + offs, e, mask=in_row)
            w = e.to(tl.float64)  # P4's exact widening
            tl.store(sums_ptr + r * n_tiles + t, _tree(tl.where(in_row, w, 0.0), TILE, TILE_LOG))
            if _last_of_row(cnt_ptr, r, n_tiles):
                tl.store(s_ptr + r, _row_total(sums_ptr, r, n_tiles, NTP, NTP_LOG))


@triton.jit
def _verify_sums_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    cnt_ptr: tl.tensor,  # [>= R] int32 row counters, all 0
    cls_ptr: tl.tensor,  # [R] int32: launch 1's row classes
    m_ptr: tl.tensor,  # [R] fp32: launch 1's row maxima
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    c_ptr: tl.tensor,  # fp64 constants of SPEC.md §6 (layout: _common.C_*)
    state_ptr: tl.tensor,  # [B, SW] int32: launch 2's state (ST_*)
    sums_ptr: tl.tensor,  # [R, n_tiles] fp64 out: each tile's P4 subtree sum (rows that are summed)
    s_ptr: tl.tensor,  # [R] fp64 out: each summed row's S (every summed row; with HANDOVER, marked requests' rows)
    w_ptr: tl.tensor,  # [B, V] fp32 out: row a's weights, for requests that draw and are not marked
    D: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    TILE_LOG: tl.constexpr,  # log2(TILE)
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,  # log2(NTP)
    SW: tl.constexpr,  # state words per request (STATE, or STATE_HANDOVER with HANDOVER)
    HANDOVER: tl.constexpr,  # config.LaunchConfig.handover
) -> None:
    # Launch 3: §11.4 P2-P4 per tile (b, t) of the rows whose exact S a later launch reads: row a of a request that
    # draws (launches 6 and 7, which read its weights from w_ptr), every OK row of a marked one (launches 4 and 5;
    # its row a is known only after launch 5, so launches 6 and 7 weigh it themselves); the row's last program
    # computes S. With HANDOVER a tile of a drawing request waits on one load (launch 2's word: a and m) before its
    # logits, where without it waits on four in turn (the state, then a, then row a's class, then its maximum); and
    # it ends at its stores: launches 6 and 7 form S from the tile sums, so only marked requests' rows count in here.
    pid = tl.program_id(0).to(tl.int64)
    b = pid // n_tiles
    t = pid % n_tiles
    if HANDOVER:
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        hand = tl.load((state_ptr + SW * b + ST_WORD).to(tl.pointer_type(tl.int64)))
        temp = tl.load(temp_ptr + b)
        marked = (hand & HAND_MARKED) != 0
        if marked:  # every row (rare): as without the handover
            zero = tl.zeros_like(t)
            _sum_rows(x_ptr, stride_b, stride_j, v, n_tiles, cnt_ptr, cls_ptr, m_ptr, c_ptr, sums_ptr, s_ptr, w_ptr,
                      b, t, offs, in_row, temp, zero, zero + (D + 1), marked, D, KIND, TILE, TILE_LOG, NTP, NTP_LOG)
        elif (hand & HAND_DRAWS) != 0:  # row a is OK (the request is): no class to read
            a = ((hand >> 2) & 0x3FFFFFFF).to(tl.int32)
            m = (hand >> 32).to(tl.int32).to(tl.float32, bitcast=True)
            row = x_ptr + b * stride_b + a.to(tl.int64) * stride_j
            e = _expf(_exponent(_load_fp32(row, offs, in_row, KIND), m, temp), c_ptr)
            tl.store(w_ptr + b * v + offs, e, mask=in_row)
            w = e.to(tl.float64)  # P4's exact widening
            tl.store(sums_ptr + (b * (D + 1) + a) * n_tiles + t, _tree(tl.where(in_row, w, 0.0), TILE, TILE_LOG))
    else:
        marked = tl.load(state_ptr + SW * b + ST_MARKED) != 0
        if marked | (tl.load(state_ptr + SW * b + ST_DRAWS) != 0):
            a = tl.load(state_ptr + SW * b + ST_A)
            temp = tl.load(temp_ptr + b)
            offs = t * TILE + tl.arange(0, TILE)
            in_row = offs < v
            _sum_rows(x_ptr, stride_b, stride_j, v, n_tiles, cnt_ptr, cls_ptr, m_ptr, c_ptr, sums_ptr, s_ptr, w_ptr,
                      b, t, offs, in_row, temp, tl.where(marked, 0, a), tl.where(marked, D + 1, a + 1), marked, D, KIND,
                      TILE, TILE_LOG, NTP, NTP_LOG)


@triton.jit
def _verify_counts_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    cnt_ptr: tl.tensor,  # [>= R] int32 row counters, all 0
    cls_ptr: tl.tensor,  # [R] int32: launch 1's row classes
    m_ptr: tl.tensor,  # [R] fp32: launch 1's row maxima
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    c_ptr: tl.tensor,  # fp64 constants of §6
    s_ptr: tl.tensor,  # [R] fp64: launch 3's S
    state_ptr: tl.tensor,  # [B, SW] int32: launch 2's state (ST_*)
    counts_ptr: tl.tensor,  # [R, n_tiles] int64 out: each tile's sum of P5 floor counts (marked requests)
    rem_ptr: tl.tensor,  # [R] int64 out: each counted row's remainder R
    n_prog: tl.tensor,  # programs per target row: cdiv(n_tiles, CHUNK)
    D: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    CHUNK: tl.constexpr,  # tiles per program
    NTP: tl.constexpr,
    SW: tl.constexpr,  # state words per request
) -> None:
    # Launch 4: §11.4 P5, CHUNK tiles per program, for the rows of requests that launch 2 marked (rare: a grid of
    # programs that mostly return at once); the row's last program computes R (P6).
    pid = tl.program_id(0).to(tl.int64)
    r = pid // n_prog
    p = pid % n_prog
    b = r // (D + 1)
    if tl.load(state_ptr + SW * b + ST_MARKED) != 0:
        temp = tl.load(temp_ptr + b)
        if (tl.load(cls_ptr + r) == 0) & (temp > 0.0):
            row = x_ptr + b * stride_b + (r % (D + 1)) * stride_j
            m = tl.load(m_ptr + r)
            s = tl.load(s_ptr + r)
            for t in range(p * CHUNK, tl.minimum(p * CHUNK + CHUNK, n_tiles)):
                offs = t * TILE + tl.arange(0, TILE)
                in_row = offs < v
                w = _weights(_load_fp32(row, offs, in_row, KIND), m, temp, c_ptr)
                tl.store(counts_ptr + r * n_tiles + t, tl.sum(tl.where(in_row, _floor_count(w, s), 0)))
            if _last_of_row(cnt_ptr, r, n_prog):
                tl.store(rem_ptr + r, _row_remainder(counts_ptr, r, n_tiles, NTP))


@triton.jit
def _verify_rows_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    cls_ptr: tl.tensor,  # [R] int32: launch 1's row classes
    g_ptr: tl.tensor,  # [R] int32: launch 1's argmaxes
    m_ptr: tl.tensor,  # [R] fp32: launch 1's row maxima
    approx_ptr: tl.tensor,  # [R] fp64: launch 1's S~ (read only without have_r)
    s_ptr: tl.tensor,  # [R] fp64: launch 3's S (read only with have_r)
    rem_ptr: tl.tensor,  # [R] int64: launch 4's R (read only with have_r)
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
    out_ptr: tl.tensor,  # [B, D+1] int32 out: tokens (a sampled row's token at index a: launch 7 writes it)
    state_ptr: tl.tensor,  # [B, SW] int32 out: the state (ST_*) for launches 3-7
    have_r: tl.tensor,  # 0: launch 2, every request, by S~ and without R; 1: launch 5, the marked ones, with S and R
    r_bound: tl.tensor,  # an upper bound on every R (V, §11.4 "Range"; tests raise it to open more tests)
    up: tl.tensor,  # fp32 1 + margin and 1 - margin, both exact: S lies within S~ (1 +- margin)
    down: tl.tensor,  # (margin: screen.SCREEN_MARGIN; tests raise it likewise)
    D: tl.constexpr,  # proposal depth
    DP: tl.constexpr,  # power of two >= D + 1
    K: tl.constexpr,  # 32
    KIND: tl.constexpr,
    SW: tl.constexpr,  # state words per request (STATE, or STATE_HANDOVER with HANDOVER)
    HANDOVER: tl.constexpr,  # launch 2 writes the handed-over word for launch 3 (config.LaunchConfig.handover)
) -> None:
    # Launches 2 and 5: one program per request row.
    b = tl.program_id(0).to(tl.int64)
    if (have_r == 0) | (tl.load(state_ptr + SW * b + ST_MARKED) != 0):
        jd = tl.arange(0, DP)
        slot = tl.arange(0, K)
        x_row = x_ptr + b * stride_b

        # 1. §11.3 step 1: n = leading OK drafts.
        dst = tl.load(dst_ptr + b * D + jd, mask=jd < D, other=0).to(tl.int32)
        n = tl.min(tl.where((dst != 0) & (jd < D), jd, D))

        # 2. §11.3 step 2 and §11.4 P1: per target row, its class and its argmax g (launch 1).
        cls = tl.load(cls_ptr + b * (D + 1) + jd, mask=jd < D + 1, other=0)
        bad = tl.min(tl.where((cls != 0) & (jd <= n), jd, DP))  # the lowest j <= n whose row is not OK (DP: none)
        target_status = tl.sum(tl.where(jd == bad, cls, 0))
        gvec = tl.load(g_ptr + b * (D + 1) + jd, mask=jd < D + 1, other=0)

        # 3. §11.3 step 3: validity of drafts j < n, and Q_j(x_j) for the acceptance test, every draft at once
        # ([DP, K]: draft j's slots in row j).
        temp = tl.load(temp_ptr + b)
        draft = jd < D
        base = (b * D + jd[:, None]) * K + slot[None, :]
        ids = tl.load(ids_ptr + base, mask=draft[:, None], other=EMPTY_ID)
        tix = tl.load(tix_ptr + base, mask=draft[:, None], other=0)
        nxt = tl.load(ids_ptr + base + 1, mask=draft[:, None] & (slot[None, :] + 1 < K), other=0)
        toks = tl.load(tok_ptr + b * D + jd, mask=draft, other=0)
        empty = (ids == EMPTY_ID) & (tix == 0)
        full = (ids >= 0) & (ids < v) & (tix >= 0)
        nfull = tl.sum(full.to(tl.int32), axis=1)
        ok_slots = tl.min((empty | full).to(tl.int32), axis=1) != 0
        full_first = tl.min((full == (slot[None, :] < nfull[:, None])).to(tl.int32), axis=1) != 0
        ascending = tl.min(((slot[None, :] + 1 >= nfull[:, None]) | (ids < nxt)).to(tl.int32), axis=1) != 0
        total = tl.sum(tix.to(tl.int64), axis=1) == TICKETS
        own = full & (ids == toks[:, None])
        qvec = tl.sum(tl.where(own, tix, 0).to(tl.int64), axis=1)
        drawable = tl.max((own & (tix >= 1)).to(tl.int32), axis=1) != 0
        valid = ok_slots & full_first & ascending & total & drawable
        invalid = tl.max(((jd < n) & (valid == 0)).to(tl.int32))

        # 4. §11.3 step 4: the row status, by precedence; then the row class (§3).
        bad_temp = (temp != temp) | (temp < 0.0)
        status = tl.where(target_status != 0, target_status, tl.where(bad_temp, 4, tl.where(invalid != 0, 5, 0)))
        ok = status == 0
        greedy = ok & (temp == 0.0)
        sampled = ok & (temp != 0.0)
        seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
        rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
        pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True)

        # 5. §11.6: acceptance, draft by draft, while every earlier draft was accepted. Every test j < n is
        # evaluated at once (each U_j has its own Philox counter, so a test past the first rejection changes nothing)
        # and the chain is the first test that does not accept. Without R (launch 2) a test whose U_j the interval
        # leaves open does not accept either: if it is the first, the chain stops there and the request is marked.
        # The tests that draw U_j (every draft j < n is valid here). Not (jd < n) & sampled: Triton 3.9's interpreter
        # gives a vector & a scalar a mask dtype its loads reject.
        live = jd < tl.where(sampled, n, 0)
        r = b * (D + 1) + jd
        hit_g = toks == gvec
        wx = _weights(_load_fp32(x_row + jd * stride_j, toks, live, KIND), tl.load(m_ptr + r, mask=live, other=0.0),
                      temp, c_ptr)
        u = _uniform_below(seed, rnd, pos + jd.to(tl.uint64), dom_acc.to(tl.uint64, bitcast=True),
                           (qvec << 16).to(tl.uint64))
        if have_r != 0:
            c = _floor_count(wx, tl.load(s_ptr + r, mask=live, other=1.0)).to(tl.uint64)
            rem = tl.load(rem_ptr + r, mask=live & hit_g, other=0).to(tl.uint64)
            accept = u < c + rem  # P_j(x_j), §11.4 P6
            open_test = tl.zeros([DP], tl.int1)
        else:
            # c is nonincreasing in S and S_lo <= S <= S_hi: c(S_hi) <= c <= c(S_lo) (pp3.kernels.screen).
            s_apx = tl.load(approx_ptr + r, mask=live, other=1.0)
            c_lo = _floor_count(wx, s_apx * up).to(tl.uint64)
            c_hi = _floor_count(wx, s_apx * down).to(tl.uint64)
            accept = u < c_lo  # P_j(x_j) >= c >= c_lo; r_bound can be Triton's constant 1 (no .to on it)
            open_test = (u >= c_lo) & (u < c_hi + tl.where(hit_g, r_bound, 0).to(tl.uint64))
        accept = tl.where(sampled, accept, greedy & hit_g)  # T0: accept iff x_j = g_j
        # a = n if every test accepts, 0 for a failed request (as if its first test did not accept)
        a = tl.min(tl.where((jd < n) & ((accept == 0) | (ok == 0)), jd, n))
        marked = (sampled & (a < n) & (tl.max(((jd == a) & open_test).to(tl.int32)) != 0)).to(tl.int32)

        # 6. §11.7 and §11.8: T0 rows emit the argmax at index a; a sampled row's draw is launches 6 and 7.
        token = tl.where(sampled, 0, tl.sum(tl.where(jd == a, gvec, 0)))
        out = tl.where(jd < a, toks, tl.where(jd == a, token, EMPTY_ID))  # a <= n <= D: toks' padding never shows
        out = tl.where(ok, out, EMPTY_ID)
        tl.store(status_ptr + b, status.to(tl.int8))
        tl.store(acc_ptr + b, tl.where(ok, a, EMPTY_ID))
        tl.store(out_ptr + b * (D + 1) + jd, out, mask=jd < D + 1)
        draws = (sampled & (marked == 0)).to(tl.int32)
        tl.store(state_ptr + SW * b + ST_DRAWS, draws)
        tl.store(state_ptr + SW * b + ST_A, a)
        if have_r == 0:  # launch 5 leaves the mark: launches 6 and 7 weigh a marked request's row a themselves
            tl.store(state_ptr + SW * b + ST_MARKED, marked)
            if HANDOVER:  # launch 3's word: what it reads before row a's logits, in one load
                mrow = tl.load(m_ptr + b * (D + 1) + jd, mask=jd < D + 1, other=0.0).to(tl.uint32, bitcast=True)
                m_a = tl.sum(tl.where(jd == a, mrow, 0))  # the one lane at a: its bits as they are
                word = (m_a.to(tl.int64) << 32) | (a.to(tl.int64) << 2) | (marked.to(tl.int64) << 1) | draws
                tl.store((state_ptr + SW * b + ST_WORD).to(tl.pointer_type(tl.int64)), word)
        tl.store(state_ptr + SW * b + ST_REJECTED, (a < n).to(tl.int32))


@triton.jit
def _row_a_weights(row_ptr: tl.tensor, w_ptr: tl.tensor, offs: tl.tensor, mask: tl.tensor, m: tl.tensor,
                   temp: tl.tensor, c_ptr: tl.tensor, stored: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """Row a's §11.4 P2-P3 weights at ``offs`` where ``mask`` (fp64, exact widenings of fp32): launch 3's stored
    values if ``stored`` (the request was not marked), else weighed from the logits as launch 3 weighs them."""
    if stored:
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float64)
    else:
        w = _weights(_load_fp32(row_ptr, offs, mask, KIND), m, temp, c_ptr)
    return w


@triton.jit
def _counts_at(row_ptr: tl.tensor, w_ptr: tl.tensor, offs: tl.tensor, live: tl.tensor, m: tl.tensor, temp: tl.tensor,
               s: tl.tensor, c_ptr: tl.tensor, stored: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """Row a's P5 floor counts c(y) by the division at the IDs ``offs`` where ``live`` (0 elsewhere; nothing is read
    there): draft slots (launch 6), a tile (launch 7), g alone."""
    c = _floor_count(_row_a_weights(row_ptr, w_ptr, offs, live, m, temp, c_ptr, stored, KIND), s)
    return tl.where(live, c, 0)


@triton.jit
def _verify_residual_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    g_ptr: tl.tensor,  # [R] int32: launch 1's argmaxes
    m_ptr: tl.tensor,  # [R] fp32: launch 1's row maxima
    s_ptr: tl.tensor,  # [R] fp64: launch 3's S; with HANDOVER [R, n_tiles]: its tile sums, whose tree S is
    w_ptr: tl.tensor,  # [B, V] fp32: launch 3's weights of row a (requests that were not marked)
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    ids_ptr: tl.tensor,  # [B, D, K] int32 draft slot IDs
    tix_ptr: tl.tensor,  # [B, D, K] int32 draft slot tickets
    c_ptr: tl.tensor,  # fp64 constants of §6
    near: tl.tensor,  # fp32 scalar: _floor_counts_fast's margin (accept.count_margin, a power of two)
    state_ptr: tl.tensor,  # [B, SW] int32: launch 2's or 5's state (ST_*)
    plain_ptr: tl.tensor,  # [B, n_tiles] int64 out: each tile's sum of floor counts c, or UNSURE (drawing rows)
    corr_ptr: tl.tensor,  # [B, n_tiles] int64 out: each tile's sum of min(c, Q* 2^16) at Q*'s slots but g
    D: tl.constexpr,
    K: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,  # power of two >= n_tiles (>= 2)
    NTP_LOG: tl.constexpr,  # log2(NTP)
    SW: tl.constexpr,  # state words per request
    HANDOVER: tl.constexpr,  # S of row a from launch 3's tile sums (config.LaunchConfig.handover)
) -> None:
    # Launch 6: §11.7 on the tiles of row (b, a). Q* is draft a's q when draft a was rejected, else 0 (the bonus).
    # The plain counts by the reciprocal of S (_floor_counts_fast); a tile it is unsure of is left to launch 7.
    pid = tl.program_id(0).to(tl.int64)
    b = pid // n_tiles
    t = pid % n_tiles
    if tl.load(state_ptr + SW * b + ST_DRAWS) != 0:
        a = tl.load(state_ptr + SW * b + ST_A)
        rejected = tl.load(state_ptr + SW * b + ST_REJECTED) != 0
        r = b * (D + 1) + a
        row = x_ptr + b * stride_b + a.to(tl.int64) * stride_j
        m = tl.load(m_ptr + r)
        temp = tl.load(temp_ptr + b)
        s = _row_s(s_ptr, r, n_tiles, NTP, NTP_LOG, HANDOVER)
        g = tl.load(g_ptr + r)
        stored = tl.load(state_ptr + SW * b + ST_MARKED) == 0
        w_row = w_ptr + b * v
        offs = t * TILE + tl.arange(0, TILE)
        in_row = offs < v
        w = tl.where(in_row, _row_a_weights(row, w_row, offs, in_row, m, temp, c_ptr, stored, KIND), 0.0)
        c, unsure = _floor_counts_fast(w, P_TICKETS_F / s, near)
        tl.store(plain_ptr + pid, tl.where(unsure != 0, UNSURE, tl.sum(c)))
        sbase = (b * D + tl.minimum(a, D - 1)) * K
        # Draft a's slots are Q* only if draft a was rejected (it is then valid: ascending IDs, empty slots -1); for
        # the bonus they may hold anything (a failed draft at n, read as garbage), so only slots `here` count.
        ids = tl.load(ids_ptr + sbase + tl.arange(0, K))
        q = tl.load(tix_ptr + sbase + tl.arange(0, K)).to(tl.int64) << 16
        here = _masked_by((ids >= t * TILE) & (ids < t * TILE + TILE) & (ids != g), rejected)
        tile_corr = tl.where(here, tl.minimum(_counts_at(row, w_row, ids, here, m, temp, s, c_ptr, stored, KIND), q),
                             0)
        tl.store(corr_ptr + pid, tl.sum(tile_corr))


@triton.jit
def _verify_draw_kernel(
    x_ptr: tl.tensor,  # [B, D+1, V] raw target logit bits
    stride_b: tl.tensor,
    stride_j: tl.tensor,
    v: tl.tensor,
    n_tiles: tl.tensor,
    g_ptr: tl.tensor,  # [R] int32: launch 1's argmaxes
    m_ptr: tl.tensor,  # [R] fp32: launch 1's row maxima
    s_ptr: tl.tensor,  # [R] fp64: launch 3's S; with HANDOVER [R, n_tiles]: its tile sums, whose tree S is
    w_ptr: tl.tensor,  # [B, V] fp32: launch 3's weights of row a (requests that were not marked)
    temp_ptr: tl.tensor,  # [B] fp32 target temperature
    ids_ptr: tl.tensor,  # [B, D, K] int32 draft slot IDs
    tix_ptr: tl.tensor,  # [B, D, K] int32 draft slot tickets
    seed_ptr: tl.tensor,  # [B] uint64 seed (int64 bits)
    round_ptr: tl.tensor,  # [B] uint64 round (int64 bits)
    pos_ptr: tl.tensor,  # [B] uint64 absolute position of draft 0 (int64 bits)
    c_ptr: tl.tensor,  # fp64 constants of §6
    dom_res: tl.tensor,  # DOMAIN_RESIDUAL (< 2^63, passed as int64)
    state_ptr: tl.tensor,  # [B, SW] int32: the state (ST_*)
    plain_ptr: tl.tensor,  # [B, n_tiles] int64: launch 6's tile sums of c (UNSURE: counted here)
    corr_ptr: tl.tensor,  # [B, n_tiles] int64: launch 6's tile sums of min(c, Q* 2^16) at Q*'s slots but g
    out_ptr: tl.tensor,  # [B, D+1] int32 out: the token at index a
    D: tl.constexpr,
    K: tl.constexpr,
    KIND: tl.constexpr,
    TILE: tl.constexpr,
    NTP: tl.constexpr,
    NTP_LOG: tl.constexpr,  # log2(NTP)
    SW: tl.constexpr,  # state words per request
    HANDOVER: tl.constexpr,  # S of row a from launch 3's tile sums (config.LaunchConfig.handover)
) -> None:
    # Launch 7: one program per request that draws. The residual's tile sums from launch 6's (its UNSURE tiles
    # counted here by the division, one at a time: rare) and R = 2^40 - (the sum of c) with g's own term; U below
    # their sum (§11.5); the tile t* of the first C(y) > U; the token is t* TILE + the number of y of tile t* with
    # C(y) <= U.
    b = tl.program_id(0).to(tl.int64)
    if tl.load(state_ptr + SW * b + ST_DRAWS) != 0:
        a = tl.load(state_ptr + SW * b + ST_A)
        rejected = tl.load(state_ptr + SW * b + ST_REJECTED) != 0
        r = b * (D + 1) + a
        row = x_ptr + b * stride_b + a.to(tl.int64) * stride_j
        w_row = w_ptr + b * v
        m = tl.load(m_ptr + r)
        temp = tl.load(temp_ptr + b)
        s = _row_s(s_ptr, r, n_tiles, NTP, NTP_LOG, HANDOVER)
        g = tl.load(g_ptr + r)
        stored = tl.load(state_ptr + SW * b + ST_MARKED) == 0
        ti = tl.arange(0, NTP)
        live = ti < n_tiles
        plain = tl.load(plain_ptr + b * n_tiles + ti, mask=live, other=0)
        corr = tl.load(corr_ptr + b * n_tiles + ti, mask=live, other=0)
        for _ in range(tl.sum((plain == UNSURE).to(tl.int32))):
            tu = tl.min(tl.where(plain == UNSURE, ti, NTP))
            at = tu * TILE + tl.arange(0, TILE)
            cu = _counts_at(row, w_row, at, at < v, m, temp, s, c_ptr, stored, KIND)
            plain = tl.where(ti == tu, tl.sum(cu), plain)
        rem = -tl.sum(plain) + P_TICKETS_I  # §11.4 P6 (int64, exact); -x + C: _common.TICKETS
        pg = _counts_at(row, w_row, g, g < v, m, temp, s, c_ptr, stored, KIND) + rem  # P(g)
        sbase = (b * D + tl.minimum(a, D - 1)) * K  # draft a's slots: Q* if rejected (launch 6)
        ids = tl.load(ids_ptr + sbase + tl.arange(0, K))
        q = tl.load(tix_ptr + sbase + tl.arange(0, K)).to(tl.int64) << 16
        qg = tl.sum(tl.where(rejected & (ids == g), q, 0))  # Q*(g) 2^16
        # r(g) = P(g) - min(P(g), Q*(g) 2^16), of which the plain tile sum holds c(g)
        res = plain - corr + tl.where(ti == g // TILE, rem - tl.minimum(pg, qg), 0)
        incl = tl.cumsum(res, axis=0)  # int64: exact
        seed = tl.load(seed_ptr + b).to(tl.uint64, bitcast=True)
        rnd = tl.load(round_ptr + b).to(tl.uint64, bitcast=True)
        pos = tl.load(pos_ptr + b).to(tl.uint64, bitcast=True)
        u = _uniform_below(seed, rnd, pos + a.to(tl.uint64), dom_res.to(tl.uint64, bitcast=True),
                           tl.sum(res).to(tl.uint64)).to(tl.int64)
        tstar = tl.sum((live & (incl <= u)).to(tl.int32))  # C is nondecreasing: the tile of the first C(y) > U
        left = u - tl.sum(tl.where(ti == tstar, incl - res, 0))  # U less the residual before tile t*
        offs = tstar * TILE + tl.arange(0, TILE)
        c = _counts_at(row, w_row, offs, offs < v, m, temp, s, c_ptr, stored, KIND)
        c += tl.where(offs == g, rem, 0)  # P = c + R at g (§11.4 P6)
        if rejected:  # Q* = draft a's q, at the slots inside tile t*
            lo = tl.sum(((ids >= 0) & (ids < tstar * TILE)).to(tl.int32))  # ascending: slots lo .. hi-1 are here
            hi = tl.sum(((ids >= 0) & (ids < tstar * TILE + TILE)).to(tl.int32))
            for k in range(lo, hi):
                sid = tl.load(ids_ptr + sbase + k)
                stq = tl.load(tix_ptr + sbase + k).to(tl.int64) << 16
                c = tl.where(offs == sid, tl.maximum(c - stq, 0), c)  # r(y) = max(0, P(y) - Q*(y) 2^16)
        cum = tl.cumsum(c, axis=0)  # int64: exact
        below = tl.sum(((offs < v) & (cum <= left)).to(tl.int32))
        tl.store(out_ptr + b * (D + 1) + a, (tstar * TILE + below).to(tl.int32))


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
