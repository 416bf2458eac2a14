"""Triton helpers of both operations, the selector (``_select.py``) and the verifier (``_accept.py``).

Arithmetic model of every exact-path kernel: launched with ``enable_fp_fusion=False`` (no FMA contraction) and
``enable_reflect_ftz=False`` (subnormals kept), see ``config.EXACT``; fp32 division is ``div_rn``; no ``tl.exp``
(the exponential is ``_expf``, SPEC.md §6); the only float reductions are the fixed pairwise trees of §5 step 4 and
§11.4 (``_tree``); selection, ticket placement and the draws use integers. ``pp3.audit.ptx`` checks the compiled
code of every kernel for instructions that would break this. One function is exempt, and only in its own lines: the
verifier's hardware screening exponential ``_expf_screen_ex2`` (SPEC.md §11.12), whose value reaches no output.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
from triton.language.random import philox_impl

from pp3.kernels.screen import LOG2E, MAGIC, POLY, SCREEN_FLOOR

# Layout of the fp64 constants tensor of §6 (built from pp3.reference.exponential by select.exp_constants).
C_INV = tl.constexpr(0)
C_SHIFT = tl.constexpr(1)
C_L1 = tl.constexpr(2)
C_L2 = tl.constexpr(3)
C_C2 = tl.constexpr(4)
C_C3 = tl.constexpr(5)
C_C4 = tl.constexpr(6)
C_C5 = tl.constexpr(7)
C_ONE = tl.constexpr(8)
C_TH = tl.constexpr(16)  # TH[0..63]
C_TL = tl.constexpr(80)  # TL[0..63]

# Logit formats: the raw bits a kernel loads (int32 for fp32, int16 for fp16 and bf16).
KIND_F32 = tl.constexpr(0)
KIND_F16 = tl.constexpr(1)
KIND_BF16 = tl.constexpr(2)


# §5 and §7: the tickets of a row (2^24, also as an fp64 factor: w * 2^24 is exact) and the ID of an empty slot.
# A constant minus a tensor is written -x + C: Triton 3.9's interpreter gives C - x (a constexpr on the left) a result
# wrapped in a constexpr, which its tl.store refuses; the compiled code is the same.
TICKETS = tl.constexpr(16777216)
TICKETS_F = tl.constexpr(16777216.0)
EMPTY_ID = tl.constexpr(-1)

# §3 flag bits of an entry (and, OR-reduced, of a tile or a row).
FLAG_NAN = tl.constexpr(1)
FLAG_POS_INF = tl.constexpr(2)
FLAG_FINITE = tl.constexpr(4)
OKEY_NEG_INF = tl.constexpr(0x007FFFFF)  # okey(-inf)
OKEY_POS_INF = tl.constexpr(0xFF800000)  # okey(+inf)


@triton.jit
def _widen_bits(raw: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """§2.1: raw logit bits (int32 for fp32, int16 for fp16/bf16) -> fp32 bits as uint32, exactly.

    Integer operations only: the interpreter widens bf16 subnormals wrongly through ``.to``.
    """
    if KIND == KIND_F32:
        bits = raw.to(tl.uint32, bitcast=True)
    elif KIND == KIND_BF16:
        bits = raw.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
    else:
        h = raw.to(tl.uint16, bitcast=True).to(tl.uint32)
        sign = (h & 0x8000) << 16
        ex = (h >> 10) & 0x1F
        man = h & 0x3FF
        normal = sign | ((ex + 112) << 23) | (man << 13)
        special = sign | 0x7F800000 | (man << 13)  # inf / NaN (payload kept)
        # subnormal fp16: man * 2^-24, an exact product (man < 2^10, the result is a normal fp32)
        sub = (man.to(tl.float32) * 5.9604644775390625e-08).to(tl.uint32, bitcast=True) | sign
        bits = tl.where(ex == 0, sub, tl.where(ex == 31, special, normal))
    return bits


@triton.jit
def _load_padded(ptr: tl.tensor, mask: tl.tensor, KIND: tl.constexpr) -> tl.tensor:
    """Logit bits widened to fp32 bits (``_widen_bits``), the entries outside ``mask`` read as -inf (0xFF800000).

    The -inf is selected in registers after the load, which pads with 0: Triton 3.6 to 3.8 pack a negative 16-bit
    ``other`` of a vectorised load into 32-bit registers sign-extended (``mov.u32 %r, 0xfffffffffffffc00``), so every
    second padded fp16/bf16 entry read 0xFFFF, a NaN (the H200 showed it, records/2026-12-01/h200-g; Triton 3.9 packs
    0xfc00fc00). ``pp3.audit.ptx`` fails any kernel with such a move."""
    return tl.where(mask, _widen_bits(tl.load(ptr, mask=mask, other=0), KIND), 0xFF800000)


@triton.jit
def _flag_bits(bits: tl.tensor) -> tl.tensor:
    """§3 per entry: FLAG_NAN | FLAG_POS_INF | FLAG_FINITE of fp32 bits (int32; OR them over a row)."""
    mag = bits & 0x7FFFFFFF
    code = (mag > 0x7F800000).to(tl.int32) | ((bits == 0x7F800000).to(tl.int32) << 1)
    return code | ((mag < 0x7F800000).to(tl.int32) << 2)


@triton.jit
def _masked_by(mask: tl.tensor, flag: tl.tensor) -> tl.tensor:
    """``mask & flag`` for a block ``mask`` and a scalar ``flag`` (both bool), through int8: Triton 3.9's interpreter
    gives a block & a scalar an int32 mask, which its masked loads refuse. The compiled code is that of ``&``."""
    return (mask.to(tl.int8) & flag.to(tl.int8)) != 0


@triton.jit
def _bit_or(a: tl.tensor, b: tl.tensor) -> tl.tensor:
    return a | b


@triton.jit
def _value_key(bits: tl.tensor) -> tl.tensor:
    """§4.1 okey(x) as uint32 from fp32 bits: ordered as the values are (-0.0 is +0.0); -inf is OKEY_NEG_INF, +inf
    OKEY_POS_INF, a positive NaN above it, a negative NaN below -inf."""
    canon = tl.where(bits == 0x80000000, 0, bits).to(tl.uint32)
    return tl.where((canon & 0x80000000) != 0, canon ^ 0xFFFFFFFF, canon | 0x80000000)


@triton.jit
def _value_bits(okey: tl.tensor) -> tl.tensor:
    """The fp32 bits (uint32) of a §4.1 okey: the inverse of ``_value_key`` (-0.0 comes back as +0.0)."""
    return tl.where((okey & 0x80000000) != 0, okey & 0x7FFFFFFF, okey ^ 0xFFFFFFFF)


@triton.jit
def _order_key(bits: tl.tensor, gid: tl.tensor) -> tl.tensor:
    """§4.1 ``key(x, i)`` = okey(x) << 32 | (2^32 - 1 - i) as uint64, from fp32 bits and global IDs (-0.0 is +0.0):
    a larger key ranks first. Every real key is >= 2^31, so 0 can pad below them all."""
    return (_value_key(bits).to(tl.uint64) << 32) | (0xFFFFFFFF - gid.to(tl.uint64))


@triton.jit
def _key_index(key: tl.tensor) -> tl.tensor:
    """The ID field of a §4.1 key, 2^32 - 1 - (its low 32 bits), as uint64 (any value 0 .. 2^32 - 1)."""
    return 0xFFFFFFFF - (key & 0xFFFFFFFF)


@triton.jit
def _key_id(key: tl.tensor) -> tl.tensor:
    """The token ID of a §4.1 key (int32; a key launch 1 wrote has an ID < 2^31)."""
    return _key_index(key).to(tl.int32)


@triton.jit
def _pdl_prologue(PDL: tl.constexpr) -> None:
    """With programmatic dependent launch the program may start before the previous kernel on the stream ends: wait
    for it (and for its memory) before reading anything, then let the next kernel start its own launch early."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()


NAN_KEY = tl.constexpr(0xFFFFFFFF00000000)  # above the §4.1 key of every number: okey 0xFFFFFFFF, the lowest ID field


@triton.jit
def _max_nan(a: tl.tensor, b: tl.tensor) -> tl.tensor:
    """The larger of a and b, NaN if either is (PTX max.NaN.f32): a block's maximum then says whether it holds a NaN."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _best_key(bits: tl.tensor, first_id: tl.tensor, N: tl.constexpr) -> tl.tensor:
    """The largest §4.1 key of a block of N entries with IDs first_id .. first_id + N - 1, every NaN above them all
    (``NAN_KEY``), as a uint64 scalar. Entries past a row's end must read as -inf (``_load_padded``): their IDs are
    above every real one, so they never win. With two reductions on 32-bit values instead of one on 64-bit keys: the
    NaN-propagating maximum m (NaN if the block holds a NaN; else exact, -0.0 and +0.0 equal) and the lowest index
    whose value equals m (none when m is a NaN, whose key is NAN_KEY)."""
    x = bits.to(tl.float32, bitcast=True)
    m = tl.reduce(x, 0, _max_nan)
    first = tl.min(tl.where(x == m, tl.arange(0, N), N))
    gid = (first_id + first).to(tl.uint64)
    key = (_value_key(m.to(tl.uint32, bitcast=True)).to(tl.uint64) << 32) | (0xFFFFFFFF - gid)
    return tl.where(m != m, NAN_KEY, key)


@triton.jit
def _max_class(m: tl.tensor) -> tl.tensor:
    """§3's class of a row from its NaN-propagating maximum m (``_max_nan``), in precedence order: 1 NaN, 2 +inf,
    3 zero mass (every entry -inf), 0 OK."""
    return tl.where(m != m, 1, tl.where(m == float("inf"), 2, tl.where(m == float("-inf"), 3, 0)))


@triton.jit
def _lowest_at(values: tl.tensor, m: tl.tensor, N: tl.constexpr) -> tl.tensor:
    """The lowest index i < N with values[i] == m, N if none: §4.2's tie rule (-0.0 and +0.0 equal for floats)."""
    return tl.min(tl.where(values == m, tl.arange(0, N), N))


@triton.jit
def _last_of_row(cnt_ptr: tl.tensor, r: tl.tensor, n_tiles: tl.tensor) -> tl.tensor:
    """Count this program of row r in (after all its stores); true in the row's last program, which resets the
    counter and may then read every program's partials (with ``.cg`` loads: L2, never a stale L1 line)."""
    tl.debug_barrier()  # every thread's stores precede the release of the atomic below
    old = tl.atomic_add(cnt_ptr + r, 1, sem="acq_rel", scope="gpu")
    last = old == n_tiles - 1
    if last:
        tl.store(cnt_ptr + r, 0)  # all n_tiles programs have counted: no later add in this launch
    return last


@triton.jit
def _exp_scalars(c_ptr: tl.tensor) -> tuple[tl.tensor, ...]:
    """The scalar fp64 constants of §6 from the table at ``c_ptr``: INV, SHIFT, L1, L2, C2, C3, C4, C5, 1. A kernel
    whose exponential is on its critical path loads them early (``_expf_with``), so their latency overlaps."""
    return (tl.load(c_ptr + C_INV), tl.load(c_ptr + C_SHIFT), tl.load(c_ptr + C_L1), tl.load(c_ptr + C_L2),
            tl.load(c_ptr + C_C2), tl.load(c_ptr + C_C3), tl.load(c_ptr + C_C4), tl.load(c_ptr + C_C5),
            tl.load(c_ptr + C_ONE))


@triton.jit
def _expf(z: tl.tensor, c_ptr: tl.tensor) -> tl.tensor:
    """SPEC.md §6 E1-E9, one IEEE fp64 operation per step, constants from the fp64 table at ``c_ptr``."""
    zc = tl.maximum(z, -104.0)  # E1
    x = zc.to(tl.float64)  # E1: exact
    t = x * tl.load(c_ptr + C_INV)  # E2
    shift = tl.load(c_ptr + C_SHIFT)
    kd = (t + shift) - shift  # E3: nearest integer, ties to even
    k = kd.to(tl.int32)  # E3: exact
    r = (x - kd * tl.load(c_ptr + C_L1)) - kd * tl.load(c_ptr + C_L2)  # E4
    c2 = tl.load(c_ptr + C_C2)
    c3 = tl.load(c_ptr + C_C3)
    c4 = tl.load(c_ptr + C_C4)
    c5 = tl.load(c_ptr + C_C5)
    one = tl.load(c_ptr + C_ONE)
    return _expf_tail(k, r, one, c2, c3, c4, c5, c_ptr)


@triton.jit
def _expf_with(z: tl.tensor, kc: tl.tuple, c_ptr: tl.tensor) -> tl.tensor:
    """``_expf`` with its scalar constants given (``_exp_scalars``): the same operations in the same order."""
    k, r = _expf_reduce(z, kc)
    return _expf_tail(k, r, kc[8], kc[4], kc[5], kc[6], kc[7], c_ptr)


@triton.jit
def _exp_tables(c_ptr: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    """§6's table 2^(j/64) = TH[j] + TL[j], j = 0 .. 63, as two [64] fp64 blocks (``_expf_regs``)."""
    j = tl.arange(0, 64)
    return tl.load(c_ptr + C_TH + j), tl.load(c_ptr + C_TL + j)


@triton.jit
def _expf_regs(z: tl.tensor, kc: tl.tuple, tables: tl.tuple) -> tl.tensor:
    """``_expf_with`` with the table given too (``_exp_tables``, loaded off the chain): E7's two entries are gathered
    from registers (inside a warp, shuffles) instead of loaded from memory after E6. A gather copies; every
    arithmetic step is ``_expf_with``'s, in the same order (``_expf_reduce`` as there, ``_expf_poly`` and
    ``_expf_scale`` as ``_expf_tail``'s)."""
    k, r = _expf_reduce(z, kc)
    j = k & 63  # E6
    th = tl.gather(tables[0], j, 0)
    tlo = tl.gather(tables[1], j, 0)
    p = _expf_poly(r, kc[8], kc[4], kc[5], kc[6], kc[7])  # E5
    m = k >> 6  # E6: arithmetic shift (k is signed)
    return _expf_scale(p, m, th, tlo)


@triton.jit
def _expf_reduce(z: tl.tensor, kc: tl.tuple) -> tuple[tl.tensor, tl.tensor]:
    """§6 E1-E4 with the scalar constants given (``_exp_scalars``): E3's k and E4's r."""
    zc = tl.maximum(z, -104.0)  # E1
    x = zc.to(tl.float64)  # E1: exact
    t = x * kc[0]  # E2
    kd = (t + kc[1]) - kc[1]  # E3: nearest integer, ties to even
    k = kd.to(tl.int32)  # E3: exact
    r = (x - kd * kc[2]) - kd * kc[3]  # E4
    return k, r


@triton.jit
def _expf_tail(k: tl.tensor, r: tl.tensor, one: tl.tensor, c2: tl.tensor, c3: tl.tensor, c4: tl.tensor,
               c5: tl.tensor, c_ptr: tl.tensor) -> tl.tensor:
    """§6 E5-E9 from E3's k and E4's r."""
    p = _expf_poly(r, one, c2, c3, c4, c5)  # E5
    j = k & 63  # E6
    m = k >> 6  # E6: arithmetic shift (k is signed)
    th = tl.load(c_ptr + C_TH + j)
    tlo = tl.load(c_ptr + C_TL + j)
    return _expf_scale(p, m, th, tlo)


@triton.jit
def _expf_poly(r: tl.tensor, one: tl.tensor, c2: tl.tensor, c3: tl.tensor, c4: tl.tensor, c5: tl.tensor) -> tl.tensor:
    """§6 E5: the polynomial p(r), Horner's rule, one fp64 operation per step."""
    return r * (one + r * (c2 + r * (c3 + r * (c4 + r * c5))))


@triton.jit
def _expf_scale(p: tl.tensor, m: tl.tensor, th: tl.tensor, tlo: tl.tensor) -> tl.tensor:
    """§6 E7-E9 from E5's p, E6's m and the table's TH[j], TL[j]."""
    y = th + (tlo + th * p)  # E7
    scale = ((m + 1023).to(tl.int64) << 52).to(tl.float64, bitcast=True)  # E8: 2^m from its bits
    return (y * scale).to(tl.float32)  # E8, E9: one fp64 -> fp32 rounding


# The verifier's screening exponential (``pp3.kernels.screen``: its NumPy twin, the constants and its audited bound).
SCREEN_FLOOR_Z = tl.constexpr(SCREEN_FLOOR)
SCREEN_LOG2E = tl.constexpr(LOG2E)
SCREEN_MAGIC = tl.constexpr(MAGIC)
SCREEN_MAGIC_BITS = tl.constexpr(0x4B400000)  # the bits of MAGIC
SCREEN_C1 = tl.constexpr(POLY[0])
SCREEN_C2 = tl.constexpr(POLY[1])
SCREEN_C3 = tl.constexpr(POLY[2])
SCREEN_C4 = tl.constexpr(POLY[3])


@triton.jit
def _expf_screen(z: tl.tensor) -> tl.tensor:
    """``screen.expf_screen`` (fp32 z <= 0, -inf allowed), step for step: within ``screen.SCREEN_REL`` of §6's
    ``expf`` for z >= -86, that of -86 below (< 2^-124). Never an output: the verifier's launch 1 bounds S with it."""
    zc = tl.maximum(z, SCREEN_FLOOR_Z)
    y = zc * SCREEN_LOG2E
    big = y + SCREEN_MAGIC
    kf = big - SCREEN_MAGIC  # rint(y), ties to even
    f = y - kf  # exact (Sterbenz), |f| <= 1/2
    p = SCREEN_C3 + f * SCREEN_C4
    p = SCREEN_C2 + f * p
    p = SCREEN_C1 + f * p
    p = 1.0 + f * p
    k = big.to(tl.int32, bitcast=True) - SCREEN_MAGIC_BITS
    scale = ((k + 127) << 23).to(tl.float32, bitcast=True)  # 2^k, k in [-124, 0]
    return p * scale  # type: ignore[no-any-return]  # (k: a tensor minus a constexpr, Any to mypy)


# The screening exponentials (``config.SCREENS``), as a kernel's SCREEN takes them.
SCREEN_PINNED = tl.constexpr(0)
SCREEN_EX2 = tl.constexpr(1)


@triton.jit
def _expf_screen_ex2(z: tl.tensor) -> tl.tensor:
    """``screen.expf_screen_ex2`` (fp32 z <= 0, -inf allowed): 2^fl32(z LOG2E) by the hardware's exponential,
    ``ex2.approx.f32`` (MUFU.EX2; the interpreter: NumPy's fp32 exp2). Within ``screen.SCREEN_REL`` of §6's
    ``expf`` for z >= -86 and below ``screen.SCREEN_ABS`` under it, from the instruction's documented error
    (``pp3.kernels.screen``) and audited on every input. SPEC.md §11.12: the one function of pp3's kernels whose
    lines may hold an approximate instruction (``pp3.audit.ptx`` counts them); its value reaches only S~."""
    return tl.math.exp2(z * SCREEN_LOG2E)


@triton.jit
def _screen_exp(z: tl.tensor, SCREEN: tl.constexpr) -> tl.tensor:
    """The verifier's screening exponential that SCREEN names (``SCREEN_PINNED``: ``_expf_screen``, every
    operation pinned; ``SCREEN_EX2``: ``_expf_screen_ex2``)."""
    if SCREEN == SCREEN_EX2:
        e = _expf_screen_ex2(z)
    else:
        e = _expf_screen(z)
    return e


@triton.jit
def _tree(w: tl.tensor, N: tl.constexpr, LOG: tl.constexpr) -> tl.tensor:
    """§5 step 4 / §11.4 P4: the fp64 pairwise tree over N = 2^LOG entries, adjacent pairs first (a fixed order on every
    backend); a scalar."""
    s = w
    for i in tl.static_range(LOG):
        # Level i + 1: a sum over an axis of two is one addition, a + b = b + a (IEEE addition commutes), so the
        # order inside the pair is free and Triton keeps the work spread over the threads (a shuffle and one add per
        # level). tl.split + add gave the same bits but gathered the whole tree into every thread: 511 fp64 adds per
        # thread for 512 entries instead of 25 (static SASS; bench/NOTES.md, "Verifier: the tree spread over the
        # threads").
        s = tl.sum(tl.reshape(s, [N >> (i + 1), 2]), axis=1)
    return tl.sum(s, axis=0)  # one element: no rounding


@triton.jit
def _expf_kernel(
    z_ptr: tl.tensor,  # [n] fp32 inputs (z <= 0)
    out_ptr: tl.tensor,  # [n] fp32 out: expf(z), SPEC.md §6
    c_ptr: tl.tensor,  # fp64 constants of §6
    n: tl.tensor,  # number of inputs
    BLOCK: tl.constexpr,
) -> None:
    # The kernels' exponential alone, for the exhaustive audit of every fp32 z <= 0 and the worst-case file.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, _expf(z, c_ptr), mask=mask)


@triton.jit
def _expf_screen_kernel(
    z_ptr: tl.tensor,  # [n] fp32 inputs (z <= 0)
    out_ptr: tl.tensor,  # [n] fp32 out: the screening exponential (pp3.kernels.screen)
    n: tl.tensor,  # number of inputs
    BLOCK: tl.constexpr,
    SCREEN: tl.constexpr,  # which one (SCREEN_PINNED, SCREEN_EX2)
) -> None:
    # The verifier's screening exponential alone, for the exhaustive audit of its bound (stats/audit_screen.py).
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, _screen_exp(z, SCREEN), mask=mask)


@triton.jit
def _philox_kernel(
    ctr_ptr: tl.tensor,  # [n, 4] uint64 counters (int64 bits)
    key_ptr: tl.tensor,  # [n, 2] uint64 keys (int64 bits)
    out_ptr: tl.tensor,  # [n, 4] int64 out: Philox4x64-10(ctr, key), uint64 bits
) -> None:
    # The kernels' Philox4x64-10 (Triton's philox_impl, as _finalize_kernel and _uniform_below call it) on one block,
    # for the Random123 known-answer vectors (SPEC.md §8).
    i = tl.program_id(0).to(tl.int64)
    c0 = tl.load(ctr_ptr + 4 * i).to(tl.uint64, bitcast=True)
    c1 = tl.load(ctr_ptr + 4 * i + 1).to(tl.uint64, bitcast=True)
    c2 = tl.load(ctr_ptr + 4 * i + 2).to(tl.uint64, bitcast=True)
    c3 = tl.load(ctr_ptr + 4 * i + 3).to(tl.uint64, bitcast=True)
    k0 = tl.load(key_ptr + 2 * i).to(tl.uint64, bitcast=True)
    k1 = tl.load(key_ptr + 2 * i + 1).to(tl.uint64, bitcast=True)
    w0, w1, w2, w3 = philox_impl(c0, c1, c2, c3, k0, k1)
    tl.store(out_ptr + 4 * i, w0.to(tl.int64, bitcast=True))
    tl.store(out_ptr + 4 * i + 1, w1.to(tl.int64, bitcast=True))
    tl.store(out_ptr + 4 * i + 2, w2.to(tl.int64, bitcast=True))
    tl.store(out_ptr + 4 * i + 3, w3.to(tl.int64, bitcast=True))
