"""The Hypothesis strategies of the property tiers and the selector ``Call``s they build (``pp3.testing.call``;
NumPy only: no torch, no triton).

A ``Call`` is one call of the selector: a [B, V] batch of logits held as raw bit patterns of its format (fp32, fp16
or bf16), per-row target temperatures, seeds, rounds and positions, the call's ``tau`` and the kernel tile size.
Its ``repr`` is a ``make_case(...)`` call, so a falsifying example printed by Hypothesis can be pasted into an
``@example`` as it is.

What the strategies aim at (SPEC.md section in brackets):
- rows with ties and duplicates (values from a small per-row pool) and -0.0 / +0.0 [§4.1];
- masks (-inf) of any density, down to 0 .. 40 finite entries [§3 ZERO_MASS, §4.3];
- NaN (several payloads, both signs) and +inf at the first or last entry, inside or beyond the first 32 in the
  order, in another tile than the maximum [§3];
- extreme magnitudes: +-max finite, min normal, subnormals, and gaps (0 against -60 .. -100) whose exponentials
  are subnormal or zero at tau 0.7 [§5, §6];
- vocabulary sizes 1, 31, 32, 33, tile-1, tile, tile+1 and random (tile ragged tails, K boundary) [§4];
- rows whose top entries are spread one per 32-entry block with a chosen number of near-top extras: the worst
  and best cases of a threshold-then-compact top-K selection (``spikes`` style, ``threshold_case``), and rows that
  put exactly 64 / 65 / 128 / 129 entries at or above each threshold the kernels take (``column_threshold_case``,
  ``merge_threshold_case``) [§4.3];
- batches mixing T0 (+0.0 and -0.0), sampled (> 0, +inf), bad-temperature (NaN, < 0) and failed rows [§3];
- seeds, rounds and positions at the uint64 extremes [§8]; tau at its edges [§2].
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import settings
from hypothesis import strategies as st

from pp3.kernels.config import SECOND_CANDIDATE_TILES, auto_tile
from pp3.reference import DEFAULT_TAU, propose
from pp3.testing.call import (
    FLT_MAX,
    FLT_MIN,
    FLT_TRUE_MIN,
    FORMATS,
    TAU_EDGES,
    U64_EDGES,
    U64_MAX,
    AcceptCall,
    Call,
    Fmt,
    fp32,
    make_case,
)

# --------------------------------------------------------------------------------------------------- strategies


def uint64s() -> st.SearchStrategy[int]:
    """Seed / round / position: the uint64 extremes or anything in 0 .. 2^64 - 1."""
    return st.one_of(st.sampled_from(U64_EDGES), st.integers(0, U64_MAX))


def taus() -> st.SearchStrategy[float]:
    """The drafter temperature: the default, its edges (FLT_MIN .. FLT_MAX), or an ordinary fp32 value."""
    return st.one_of(
        st.just(DEFAULT_TAU),
        st.sampled_from(TAU_EDGES),
        st.floats(fp32(1e-3), fp32(1e3), width=32),
    )


# Values every format holds exactly: ties come from drawing a row out of a few of them. The negative ones against a
# maximum of 0 are the gaps of §5 at tau 0.7: -60/0.7 gives a normal e, -65 .. -70 a subnormal one, <= -75 zero.
NICE = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -2.5, 7.0, 10.0, -20.0, -60.0, -65.0, -70.0, -75.0, -80.0, -100.0,
        100.0, 1000.0)

_NEG_NAN = float(np.uint32(0xFFC00001).view(np.float32))


def temperatures() -> st.SearchStrategy[float]:
    """Target temperatures (fp32): T0 (+-0.0) ~1/5, sampled (> 0, +inf) ~3/5, bad (NaN, < 0) ~1/5 (§3)."""
    sampled = st.floats(fp32(1e-3), 10.0, width=32)
    return st.one_of(
        st.sampled_from((0.0, -0.0)),
        sampled,
        st.sampled_from((1.0, math.inf, FLT_MAX, FLT_MIN, FLT_TRUE_MIN)),
        sampled,
        st.sampled_from((math.nan, _NEG_NAN, -1.0, -math.inf, -FLT_TRUE_MIN, -FLT_MAX)),
    )


def _finite(fmt: Fmt, b: int) -> int:
    """Any bit pattern made finite: an all-ones exponent (inf / NaN) loses its lowest exponent bit."""
    return b ^ fmt.min_normal if (b & fmt.pos_inf) == fmt.pos_inf else b


def finite_bits(fmt: Fmt) -> st.SearchStrategy[int]:
    """One finite value of ``fmt``: a NICE value, an extreme, an ordinary value, or any finite bit pattern."""
    nice = [int(b) for b in fmt.exact_bits(NICE)]
    return st.one_of(
        st.sampled_from(nice),
        st.sampled_from(fmt.extremes),
        st.floats(-100.0, 100.0, width=32).map(lambda x: int(fmt.round_bits(x))),
        st.integers(0, (1 << fmt.width) - 1).map(lambda b: _finite(fmt, b)),
    )


def special_bits(fmt: Fmt, *, failing: bool) -> st.SearchStrategy[int]:
    """A value planted at a chosen position: a benign special (-inf, +-0, extremes), or with ``failing`` also
    NaN or +inf (the row fails, §3) about half the time."""
    benign = st.sampled_from((fmt.neg_inf, 0, fmt.sign, *fmt.extremes))
    return st.one_of(st.sampled_from(fmt.nans), st.just(fmt.pos_inf), benign, benign) if failing else benign


def _rank_order(fmt: Fmt, row: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Entry indices in (roughly) the §4.1 order: larger value first, then lower ID; NaN last. Only aims positions."""
    x = fmt.widen(row)
    x = np.where(np.isnan(x), -np.inf, x)
    return np.asarray(np.lexsort((np.arange(row.size), -x)), dtype=np.intp)


@st.composite
def logit_rows(draw: st.DrawFn, fmt: Fmt, v: int, tile: int) -> npt.NDArray[Any]:
    """One row of ``v`` raw bits: a base (pool with ties / normal / any finite bits), a mask, planted specials."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    style = draw(st.sampled_from(("pool", "pool", "normal", "anybits", "spikes")))
    if style == "pool":
        pool = np.array(draw(st.lists(finite_bits(fmt), min_size=1, max_size=6)), dtype=fmt.dtype)
        row = rng.choice(pool, size=v)
    elif style == "normal":
        scale = draw(st.sampled_from((1e-3, 0.25, 1.0, 8.0, 100.0)))
        row = fmt.round_bits(rng.standard_normal(v) * scale)
    elif style == "spikes":  # one high entry per 32-entry block over a low background, plus near-top extras
        x = rng.standard_normal(v) - 20.0
        blocks = -(-v // 32)
        x[np.minimum(np.arange(blocks) * 32 + rng.integers(0, 32, blocks), v - 1)] = 10.0 + rng.permutation(blocks)
        extras = rng.choice(v, size=min(v, draw(st.integers(0, 160))), replace=False)
        x[extras] = 10.5 + rng.integers(0, blocks, extras.size)
        row = fmt.round_bits(x)
    else:
        raw = rng.integers(0, 1 << fmt.width, size=v, dtype=np.uint64).astype(fmt.dtype)
        nonfinite = (raw & fmt.pos_inf) == fmt.pos_inf
        row = np.where(nonfinite, raw ^ fmt.dtype(fmt.min_normal), raw)  # drop the lowest exponent bit: finite
    row = np.asarray(row, dtype=fmt.dtype).copy()

    mask = draw(st.sampled_from(("none", "none", "fraction", "keep")))
    if mask == "fraction":
        p = draw(st.sampled_from((0.1, 0.5, 0.9, 0.99, 1.0)))
        row[rng.random(v) < p] = fmt.neg_inf
    elif mask == "keep":  # exactly f finite entries (fewer than K = 32 possible)
        f = draw(st.integers(0, min(40, v)))
        kept = np.full(v, fmt.neg_inf, dtype=fmt.dtype)
        keep = rng.choice(v, size=f, replace=False)
        kept[keep] = row[keep]
        row = kept

    # About one row in four may fail on its data (NaN / +inf); the others keep the OK paths busy.
    failing = draw(st.sampled_from((False, False, False, True)))
    for _ in range(draw(st.sampled_from((0, 0, 1, 1, 2, 3)))):
        where = draw(st.sampled_from(("first", "last", "max", "top", "beyond", "other_tile", "any")))
        order = _rank_order(fmt, row)
        if where == "first":
            idx = 0
        elif where == "last":
            idx = v - 1
        elif where == "max":
            idx = int(order[0])
        elif where == "top":  # inside the first K = 32 in the order
            idx = int(order[draw(st.integers(0, min(31, v - 1)))])
        elif where == "beyond" and v > 32:  # outside the first 32
            idx = int(order[draw(st.integers(32, v - 1))])
        elif where == "other_tile" and v > tile:  # a tile that does not hold the maximum
            max_tile = int(order[0]) // tile
            others = [t for t in range(-(-v // tile)) if t != max_tile]
            t = draw(st.sampled_from(others))
            idx = min(v - 1, t * tile + draw(st.integers(0, tile - 1)))
        else:
            idx = draw(st.integers(0, v - 1))
        row[idx] = draw(special_bits(fmt, failing=failing))
    return row


def vocab_sizes(tile: int | None, max_v: int = 300) -> st.SearchStrategy[int]:
    """V: 1, the K boundary (31, 32, 33), the tile boundary (tile-1, tile, tile+1), or any size up to max_v."""
    t = auto_tile(max_v) if tile is None else tile
    edges = sorted(v for v in {1, 31, 32, 33, t - 1, t, t + 1} if 1 <= v <= max_v)
    return st.one_of(st.sampled_from(edges), st.integers(1, max_v))


@st.composite
def cases(
    draw: st.DrawFn,
    fmt: str,
    *,
    tiles: Sequence[int | None] = (32, 64, 128),
    max_v: int = 300,
    min_b: int = 1,
    max_b: int = 4,
    max_programs: int = 12,
    b: int | None = None,
    v: int | None = None,
    tau: float | None = None,
    tensor_args: bool | None = None,
) -> Call:
    """A whole call. ``max_programs`` bounds B x tiles (the interpreter's cost) when B is drawn (B >= min_b)."""
    f = FORMATS[fmt]
    tile = draw(st.sampled_from(tuple(tiles)))
    vv = draw(vocab_sizes(tile, max_v)) if v is None else v
    t = auto_tile(vv) if tile is None else tile
    n_tiles = -(-vv // t)
    bb = draw(st.integers(min_b, max(min_b, min(max_b, max_programs // n_tiles)))) if b is None else b
    bits = np.stack([draw(logit_rows(f, vv, t)) for _ in range(bb)])
    temps = np.array([draw(temperatures()) for _ in range(bb)], dtype=np.float32)
    seed = tuple(draw(uint64s()) for _ in range(bb))
    rnd = tuple(draw(uint64s()) for _ in range(bb))
    pos = tuple(draw(uint64s()) for _ in range(bb))
    tau32 = float(np.float32(draw(taus()) if tau is None else tau))
    targs = draw(st.booleans()) if tensor_args is None else tensor_args
    return Call(f, bits, temps, seed, rnd, pos, tau32, tile, targs)


@st.composite
def shard_cuts(draw: st.DrawFn, v: int) -> tuple[int, ...]:
    """Cut points 0 < c_1 < ... < v of a split into 1 .. 4 contiguous shards, 1-entry shards included."""
    n = draw(st.integers(1, min(4, v)))
    if n == 1:
        return ()
    if draw(st.booleans()):  # a 1-entry shard [c, c + 1) (or at either end)
        c = draw(st.integers(0, v - 1))
        forced = {x for x in (c, c + 1) if 0 < x < v}
    else:
        forced = set()
    rest = draw(st.lists(st.integers(1, v - 1), min_size=0, max_size=n - 1, unique=True))
    cuts = sorted(forced | set(rest))
    return tuple(cuts[: n - 1]) if len(cuts) > n - 1 else tuple(cuts)


def plant_tie_at(case: Call, cut: int) -> Call:
    """Make entries cut-1 and cut equal to each row's largest finite value (1.0 if none): equal maxima on both
    sides of a shard boundary, where only the lower ID may rank first (§4.1)."""
    bits = case.bits.copy()
    x = case.logits32()
    for r in range(case.b):
        finite = np.flatnonzero(np.isfinite(x[r]))
        if finite.size:
            top = finite[np.argmax(x[r, finite])]
            bits[r, cut - 1] = bits[r, cut] = bits[r, top]
        else:
            bits[r, cut - 1] = bits[r, cut] = case.fmt.exact_bits([1.0])[0]
    return case.replace(bits=bits)


def threshold_case(fmt: str, blocks: int, extras: int, *, tile: int | None, temperature: float = 1.0) -> Call:
    """V = 32 * blocks entries whose 32 largest 32-block maxima pass a threshold tau (the 32nd largest block
    maximum) together with exactly ``extras`` more entries: 32 + extras keys are >= tau.

    Block g holds one spike 10 + g; ``extras`` entries of value (10 + blocks - 32) + 0.5 sit in the blocks whose
    spike is larger (so no block maximum changes); everything else is -1. A selection that thresholds by block
    maxima and compacts at most CAP survivors sees exactly CAP survivors with extras = CAP - 32, one too many
    with CAP - 31 (CAP = 128 or 64 in pp3.kernels): the two sides of its fallback.
    """
    if blocks < 32 or not 0 <= extras <= 31 * 31:
        raise ValueError(f"need blocks >= 32 and 0 <= extras <= 961, got {blocks}, {extras}")
    x = np.full(32 * blocks, -1.0)
    spike_at = np.arange(blocks) * 32 + (np.arange(blocks) * 7) % 32
    x[spike_at] = 10.0 + np.arange(blocks)
    free = [i for g in range(blocks - 31, blocks) for i in range(32 * g, 32 * g + 32) if i != spike_at[g]]
    x[free[:extras]] = 10.0 + blocks - 32 + 0.5
    return make_case(fmt, [x.tolist()], temperature=temperature, seed=blocks * 1000 + extras, tile=tile)


def column_threshold_case(fmt: str, tile: int, n: int, extras: int, *, temperature: float = 1.0) -> Call:
    """Launch 1's threshold for a partial tile: one row of V = n entries in one tile of ``tile`` (>= 1024) entries,
    so fewer than 32 of the tile's G = min(tile / 32, 64) groups of C = tile / G entries are nonempty, the group
    threshold is 0 and the kernel thresholds by the C column maxima instead (column c: entries i = c mod C).

    Column c's maximum 10 + c sits at entry c; ``extras`` entries of value (10 + C - 32) + 0.5 sit lower in the
    columns whose maximum is larger (no column maximum changes); everything else is -1. So 32 + extras keys are
    >= tau = the 32nd largest column maximum: extras = 32 / 33 gives 64 / 65 survivors, 96 / 97 gives 128 / 129,
    the edges of the 64-slot rank, the 128-slot rank and the rounds fallback.
    """
    g = min(tile // 32, 64)
    c = tile // g
    if not (tile >= 1024 and 2 * c <= n <= 31 * c):
        raise ValueError(f"need tile >= 1024 and {2 * c} <= n <= {31 * c}, got tile {tile}, n {n}")
    x = np.full(n, -1.0)
    x[:c] = 10.0 + np.arange(c)
    free = [r * c + col for col in range(c - 31, c) for r in range(1, -(-n // c)) if r * c + col < n]
    if extras > len(free):
        raise ValueError(f"extras: at most {len(free)}, got {extras}")
    x[free[:extras]] = 10.0 + c - 32 + 0.5
    return make_case(fmt, [x.tolist()], temperature=temperature, seed=n * 1000 + extras, tile=tile)


def merge_threshold_case(fmt: str, n_tiles: int, extras: int, *, temperature: float = 1.0) -> Call:
    """Launch 2's threshold over ``n_tiles`` tiles of 32 entries (every entry is a tile candidate), 17 .. 64 tiles.

    Up to SECOND_CANDIDATE_TILES tiles the kernel takes tau = the 16th largest second candidate: tile t holds
    10 + t + 0.25 and 10 + t, so the top 16 tiles give 32 keys >= tau and no other tile's maximum reaches it. Above,
    tau = the 32nd largest tile maximum: tile t holds one 10 + t. ``extras`` entries of value tau + 0.5 sit in tiles
    whose second candidate (or maximum) is larger, which changes no tile's first two; everything else is -1. So
    exactly 32 + extras keys survive (64 / 65: the 64-slot rank's edge; 128 / 129: the rounds fallback's).
    """
    if not 17 <= n_tiles <= 64:
        raise ValueError(f"n_tiles: expected 17 .. 64, got {n_tiles}")
    x = np.full((n_tiles, 32), -1.0)
    t = np.arange(n_tiles)
    if n_tiles <= SECOND_CANDIDATE_TILES:
        x[:, 0] = 10.0 + t + 0.25
        x[:, 1] = 10.0 + t
        tau, first_free, hosts = 10.0 + n_tiles - 16, 2, range(n_tiles - 15, n_tiles)
    else:
        x[:, 0] = 10.0 + t
        tau, first_free, hosts = 10.0 + n_tiles - 32, 1, range(n_tiles - 31, n_tiles)
    free = [(h, j) for h in hosts for j in range(first_free, 32)]
    if extras > len(free):
        raise ValueError(f"extras: at most {len(free)}, got {extras}")
    for h, j in free[:extras]:
        x[h, j] = tau + 0.5
    return make_case(fmt, [x.ravel().tolist()], temperature=temperature, seed=n_tiles * 1000 + extras, tile=32)


FORMAT_NAMES = ("fp32", "fp16", "bf16")


def any_format_cases(**kw: Any) -> st.SearchStrategy[Call]:
    """``cases`` in any of the three formats."""
    return st.sampled_from(FORMAT_NAMES).flatmap(lambda f: cases(f, **kw))


@st.composite
def sharded_cases(draw: st.DrawFn, /, **kw: Any) -> tuple[Call, tuple[int, ...]]:
    """A case (any format) and a split of its vocabulary; half the time equal maxima straddle one cut."""
    case = draw(any_format_cases(**kw))
    cuts: tuple[int, ...] = draw(shard_cuts(case.v))
    tie: bool = draw(st.booleans())
    if cuts and tie:
        case = plant_tie_at(case, draw(st.sampled_from(cuts)))
    return case, cuts


# ----------------------------------------------------------------------------------------------- the verifier


@st.composite
def accept_calls(draw: st.DrawFn, *, max_v: int = 48, max_b: int = 3, max_d: int = 3) -> AcceptCall:
    """A whole verifier call (SPEC.md §11.2): target rows of any format from ``logit_rows`` (ties, masks, NaN, +inf),
    drafts that the reference selector proposed from drafter rows near them (so most drafts are valid and some are
    accepted), then, per row, sometimes a failed draft (truncation), a point-mass (greedy) draft, a drafted token the
    target forbids, or a broken draft (BAD_DRAFT); temperatures of every class; uint64-extreme keys."""
    fmt = FORMATS[draw(st.sampled_from(FORMAT_NAMES))]
    v = draw(st.one_of(st.sampled_from((1, 2, 31, 32, 33)), st.integers(1, max_v)))
    b = draw(st.integers(1, max_b))
    d = draw(st.integers(1, max_d))
    rows = np.stack([draw(logit_rows(fmt, v, 32)) for _ in range(b * (d + 1))]).reshape(b, d + 1, v)
    temps = np.array([draw(temperatures()) for _ in range(b)], dtype=np.float32)
    seed, rnd, pos = (np.array([draw(uint64s()) for _ in range(b)], dtype=np.uint64) for _ in range(3))
    # The drafter: the target's rows (widened) plus small dyadic noise, with tau drawn; its real proposals.
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x32 = fmt.widen(rows[:, :d]).astype(np.float32)
    with np.errstate(all="ignore"):
        drafter = np.where(np.isfinite(x32), x32 + rng.integers(-4, 5, size=x32.shape) / 4, x32).astype(np.float32)
    props = [propose(drafter[:, j], temps, seed, rnd, pos + np.uint64(j), draw(taus())) for j in range(d)]
    tok = np.stack([p.token for p in props], 1)
    dst = np.stack([p.status for p in props], 1)
    ids = np.stack([p.ids for p in props], 1)
    tix = np.stack([p.tickets for p in props], 1)
    for r in range(b):
        j = draw(st.integers(0, d - 1))
        what = draw(st.sampled_from(("none", "none", "none", "failed", "greedy", "forbidden", "ticket", "id")))
        if what == "failed":  # a failed draft: the round is truncated there
            dst[r, j] = draw(st.integers(1, 4))
        elif what == "greedy":  # the greedy path's point mass on some token
            tok[r, j] = draw(st.integers(0, v - 1))
            ids[r, j], tix[r, j] = -1, 0
            ids[r, j, 0], tix[r, j, 0], dst[r, j] = tok[r, j], 1 << 24, 0
        elif what == "forbidden" and dst[r, j] == 0:  # the target gives the drafted token -inf
            rows[r, j, tok[r, j]] = fmt.neg_inf
        elif what == "ticket" and dst[r, j] == 0:  # tickets that do not sum to 2^24
            tix[r, j, 0] += 1
        elif what == "id" and dst[r, j] == 0:  # a slot ID outside 0 .. V-1
            ids[r, j, int((ids[r, j] >= 0).sum()) - 1] = v
    return AcceptCall(fmt, rows, temps, tok, dst, ids, tix, seed, rnd, pos)


# ------------------------------------------------------------------------------- one row, for the reference oracle

# fp32 rows for the reference-vs-oracle property (test_reference_vs_oracle.py: Python floats, one row per example):
# any fp32 (NaN, infinities, subnormals), biased towards ties, signed zeros, -inf masks and extremes.
_INF, _NAN = float("inf"), float("nan")
_SPECIAL_LOGITS = st.sampled_from([0.0, -0.0, -_INF, 1.0, -1.0, FLT_MAX, -FLT_MAX, 1e-45, -1e-45, 2.0, -38.0, -104.0])
_ANY_LOGIT = st.one_of(
    st.floats(width=32),
    st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-30.0, max_value=30.0),
    st.integers(-3, 3).map(float),
    _SPECIAL_LOGITS,
)
_FINITE_LOGIT = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-50.0, max_value=50.0),
    st.integers(-3, 3).map(float),
    st.sampled_from([0.0, -0.0, -_INF]),
)
row_temperature = st.one_of(
    st.sampled_from([1.0, 0.0, -0.0, 0.5, _INF, _NAN, -1.0, -_INF, 1e-45]), st.floats(width=32)
)
row_uint64 = st.one_of(st.sampled_from([0, 1, 1 << 63, U64_MAX - 1, U64_MAX]), st.integers(0, U64_MAX))
row_tau = st.one_of(
    st.sampled_from([float(np.float32(0.7)), 1.0, 1e-45, FLT_MAX, 1e-3, 1e6]),
    st.floats(width=32, min_value=2.0**-149, max_value=FLT_MAX, allow_nan=False, allow_infinity=False),
)


@st.composite
def oracle_rows(draw: st.DrawFn, max_v: int = 80) -> list[float]:
    """A row of logits: mostly finite (so that most rows are OK), sometimes any fp32 at all."""
    element = draw(st.sampled_from([_FINITE_LOGIT, _FINITE_LOGIT, _FINITE_LOGIT, _ANY_LOGIT]))
    return draw(st.lists(element, min_size=1, max_size=max_v))


# ------------------------------------------------------------------------------------------------------ sizing

# Examples per property test by Hypothesis profile (the root conftest registers the profiles), beside each test's
# explicit @example cases, which always run. ``ci``: under the Triton interpreter a call of the segment selector
# (three launches, a program per segment) costs seconds of a CPU, and at 40 examples the kernel properties took
# ~16 of make test's ~35 CPU-minutes (2 busy cores); at 15, ~6 (budget: 6; re-time after changing the kernels).
# ``gpu``: compiled kernels on a CUDA GPU (make props-gpu), where the examples are cheap.
EXAMPLES = {"ci": 15, "dev": 100, "gpu": 2000}


def prop_settings(factor: float = 1.0) -> settings:
    """The loaded profile with ``max_examples`` = the tier's size times ``factor`` (expensive tests take fewer), so
    the property tier's sizing does not depend on other tiers' tests in the same session."""
    name = os.environ.get("HYPOTHESIS_PROFILE", "dev")
    return settings(max_examples=max(2, round(EXAMPLES[name] * factor)))
