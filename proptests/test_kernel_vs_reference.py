"""SPEC.md §10: the Triton kernels return the reference's status, token, ids and tickets bit for bit.

Each format has a property test over ``strategies.cases`` and explicit ``@example`` cases, one per known edge; a
comment says what each one hits. A failure prints the differing rows, their logits as hex bits, the row's target
temperature, seed, round and position, and a ``make_case(...)`` line that replays it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given

from pp3.kernels.config import SECOND_CANDIDATE_TILES
from pp3.testing.call import FLT_MAX, FLT_MIN, FLT_TRUE_MIN, U64_MAX, Call, make_case
from pp3.testing.compare import assert_same
from proptests.strategies import cases, column_threshold_case, merge_threshold_case, prop_settings, threshold_case

pytestmark = [
    pytest.mark.interpreter,  # without a GPU, the kernels run through TRITON_INTERPRET=1
    # the interpreter's NumPy warnings on IEEE overflow / invalid operations (expected: d = -inf, z = -inf)
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
]

INF = float("inf")
NINF = -INF
NAN = float("nan")
TILES = (32, 64, 128, None)  # None: the launcher's own tile (1024 here, one program per row)


def check(case: Call, *, onelaunch: bool = False) -> None:
    """The selectors on the call (the segment selector of ``propose``, with launch B and with C's gather, the tile
    selector and, with ``onelaunch``, the one-launch selector, not yet shipped: fuzzed at fp32, its own tests beside)
    against the reference; and the greedy selector, both ways (``LaunchConfig.greedy``), against the reference on the
    call's rows as T0 rows."""
    want = case.run_reference()
    one = (case.as_onelaunch(),) if onelaunch and not case.cuts else ()
    for call in (case, *(() if case.cuts else (case.as_gather(),)), *one, case.as_tiles()):
        assert_same(call, call.run_kernel(), want)
    greedy = case.as_greedy()
    want0 = greedy.run_reference()
    for call in (greedy, case.as_rescan()):
        assert_same(call, call.run_kernel(), want0)


# ------------------------------------------------------------------------------------------------ fp32 edges

# A batch of every row class: T0 at +0.0 and -0.0 (the first of equal -0.0/+0.0 maxima is ID 0), sampled at +inf,
# bad temperature (NaN, negative, -0.0 is *not* bad), a NaN row and a +inf row. V = 33: two tiles of 32, ragged.
MIXED_BATCH = make_case(
    "fp32",
    [[-0.0, 0.0, *([-1.0] * 31)]] * 4 + [[1.0, 2.0, 2.0, *([0.5] * 30)]] * 2 + [[0.0] * 32 + [NAN]]
    + [[0.0] * 32 + [INF]],
    temperature=[0.0, -0.0, INF, 1.0, NAN, -1.0, 1.0, 1.0],
    seed=[0, 1, 2, 3, 4, 5, 6, 7],
    tile=32,
)
# Ties everywhere: 40 equal maxima, so only IDs 0..31 enter the support (K boundary) and share 2^24 tickets.
TIES_BEYOND_K = make_case("fp32", [[1.5] * 40], temperature=1.0, seed=12345, round=6, position=7, tile=32)
# -0.0 and +0.0 interleaved as the maximum of a sampled row: equal values, equal weights, ordered by ID.
SIGNED_ZEROS = make_case("fp32", [[-0.0, 0.0] * 20 + [-3.0] * 5], temperature=0.25, seed=99, tile=32)
# NaN in a tile that does not hold the maximum (last entry of the third tile), negative NaN payload; and a
# signalling NaN (0x7f800001) in a tile that is otherwise masked.
NAN_OTHER_TILE = make_case(
    "fp32",
    ["41200000 3f800000*63 ffc00001", "3f800000*32 ff800000*8 7f800001 ff800000*24"],
    temperature=1.0,
    tile=32,
)
# +inf first with a NaN last (NaN takes precedence, status 1); +inf alone in the second tile (status 2).
POS_INF = make_case("fp32", ["7f800000 3f800000*31 7fc00000", "3f800000*32 7f800000"], temperature=1.0, tile=32)
# Masks: every entry -inf (ZERO_MASS, also for a T0 row), and a single finite entry as the last of V = tile + 1.
MASKS = make_case(
    "fp32",
    ["ff800000*33", "ff800000*33", "ff800000*32 c2c80000"],
    temperature=[1.0, 0.0, 1.0],
    seed=[5, 6, 7],
    tile=32,
)
# Extreme magnitudes: FLT_MAX - (-FLT_MAX) overflows (d = -inf, e = 0); FLT_MIN and subnormals near 0; and a row
# whose maximum is -FLT_MAX (tied).
EXTREMES = make_case(
    "fp32",
    [
        [FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 0.0, FLT_MAX],
        [-FLT_MAX, NINF, -FLT_MAX, NINF, NINF, -FLT_MAX, NINF, NINF],
    ],
    temperature=[1.0, 2.0],
    seed=[U64_MAX, 3],
    tile=32,
)
# Gaps at tau 0.7: e^(-60/0.7) is normal, -65 .. -70 give subnormal e, -75 and below underflow to +0.0 (members
# with 0 tickets keep their slots).
GAPS = make_case(
    "fp32",
    [[0.0, -60.0, -62.0, -65.0, -68.0, -70.0, -72.0, -75.0, -80.0, -100.0, -104.0, -(2.0**100)] * 3],
    temperature=1.0,
    seed=2024,
    tile=32,
)
# tau at its edges with a tie: at FLT_MIN every non-maximal z is huge (e = 0), at FLT_MAX every z is ~0 (e = 1),
# and 1e-30 / 1e30 in between. Subnormal logits at tau = FLT_MIN give z near -1 ulp of 1.
TAU_MIN = make_case("fp32", [[1.0, 1.0, 0.5, FLT_TRUE_MIN, 0.0]], temperature=1.0, seed=1, tau=FLT_MIN, tile=32)
TAU_MAX = make_case("fp32", [[1.0, -FLT_MAX, 0.5, -(2.0**100), 0.0]], temperature=1.0, seed=2, tau=FLT_MAX, tile=32)
TAU_TINY = make_case("fp32", [[FLT_TRUE_MIN, 0.0, -FLT_TRUE_MIN, 2.0**-100]], temperature=1.0, tau=1e-30, tile=32)
TAU_HUGE = make_case("fp32", [[3.0, 2.0, 1.0, -FLT_MAX]], temperature=1.0, tau=1e30, tile=32)
# A subnormal tau (finite and > 0, so valid): only subnormal differences keep a finite z.
TAU_SUBNORMAL = make_case("fp32", [[0.0, -FLT_TRUE_MIN, -2 * FLT_TRUE_MIN, -FLT_MIN, 0.0]], temperature=1.0,
                          tau=FLT_TRUE_MIN, tile=32)
# Subnormal target temperatures: +2^-149 is sampled (not T0), -2^-149 is bad; a flush to zero would make both T0.
SUBNORMAL_TEMPERATURES = make_case("fp32", [[1.0, 0.5, 2.0, 0.0]] * 3,
                                   temperature=[FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MIN], seed=[7, 8, 9], tile=32)
# uint64 extremes of seed / round / position, passed as int64 tensors holding the uint64 bits.
U64_EXTREMES = make_case(
    "fp32",
    [[0.5 * i for i in range(40)]] * 4,
    temperature=[1.0, 1.0, 1.0, 1.0],
    seed=[U64_MAX, 1 << 63, 0, (1 << 63) - 1],
    round=[0, U64_MAX, 1 << 63, 1],
    position=[(1 << 63) - 1, 0, U64_MAX, 1 << 63],
    tile=64,
    tensor_args=True,
)
# V = tile - 1, tile, tile + 1 (tile 64) with 40 finite entries spread over the ragged tail.
_SPREAD = [NINF] * 65
for _i in range(40):
    _SPREAD[(_i * 37) % 65] = float(_i % 7) - 3.0
TILE_EDGES_63 = make_case("fp32", [_SPREAD[:63]], temperature=1.0, seed=11, tile=64)
TILE_EDGES_64 = make_case("fp32", [_SPREAD[:64]], temperature=1.0, seed=11, tile=64)
TILE_EDGES_65 = make_case("fp32", [_SPREAD[:65]], temperature=1.0, seed=11, tile=64)


@prop_settings()
@given(case=cases("fp32", tiles=TILES))
@example(case=MIXED_BATCH)
@example(case=TIES_BEYOND_K)
@example(case=SIGNED_ZEROS)
@example(case=NAN_OTHER_TILE)
@example(case=POS_INF)
@example(case=MASKS)
@example(case=EXTREMES)
@example(case=GAPS)
@example(case=TAU_MIN)
@example(case=TAU_MAX)
@example(case=TAU_TINY)
@example(case=TAU_HUGE)
@example(case=TAU_SUBNORMAL)
@example(case=SUBNORMAL_TEMPERATURES)
@example(case=U64_EXTREMES)
@example(case=TILE_EDGES_63)
@example(case=TILE_EDGES_64)
@example(case=TILE_EDGES_65)
def test_fp32_matches_reference(case: Call) -> None:
    check(case, onelaunch=True)


# ------------------------------------------------------------------------------------------------ fp16 edges

# fp16 extremes: +-65504 (d = -131008 is finite in fp32), subnormals 2^-24 and 1023 * 2^-24 (fp16 -> fp32 widening
# of subnormals goes through an exact product in the kernel), signed zeros.
FP16_EXTREMES = make_case(
    "fp16",
    ["7bff fbff 0001 8001 03ff 83ff 0000 8000 0400 8400 7bff"],
    temperature=1.0,
    seed=17,
    tile=32,
)
# fp16 NaN payloads (0x7c01 signalling, 0xfe00 negative quiet) beyond the first 32 / in another tile; +inf 0x7c00.
FP16_NAN = make_case(
    "fp16",
    ["3c00*40 7c01", "3c00*40 fe00", "3c00*20 7c00 3c00*20"],
    temperature=1.0,
    tile=32,
)
# fp16 gaps at tau 0.7 with ties, V = 33.
FP16_GAPS = make_case("fp16", [[0.0, 0.0, -60.0, -65.0, -70.0, -75.0, -100.0] * 4 + [-60.0] * 5], temperature=0.5,
                      seed=U64_MAX, tile=32)


@prop_settings()
@given(case=cases("fp16", tiles=TILES))
@example(case=FP16_EXTREMES)
@example(case=FP16_NAN)
@example(case=FP16_GAPS)
def test_fp16_matches_reference(case: Call) -> None:
    check(case)


# ------------------------------------------------------------------------------------------------ bf16 edges

# bf16 subnormals (0x0001 .. 0x007f, both signs): the interpreter's bf16 -> fp32 `.to()` is wrong on exactly these,
# so the kernel widens by bits; with tau = FLT_MIN they decide the support's weights.
BF16_SUBNORMALS = make_case(
    "bf16",
    ["0001 8001 007f 807f 0000 8000 0080 8080"] * 2,
    temperature=[1.0, 0.0],
    seed=23,
    tau=FLT_MIN,
    tile=32,
)
# bf16 +-max (0x7f7f / 0xff7f: d overflows to -inf), NaN payload 0x7f81 and 0xffff, +inf 0x7f80 in another tile.
BF16_EXTREMES = make_case(
    "bf16",
    ["7f7f ff7f 3f80*31", "3f80*32 7f81", "3f80*32 ffff", "3f80*32 7f80"],
    temperature=1.0,
    seed=[1, 2, 3, 4],
    tile=32,
)


@prop_settings()
@given(case=cases("bf16", tiles=TILES))
@example(case=BF16_SUBNORMALS)
@example(case=BF16_EXTREMES)
def test_bf16_matches_reference(case: Call) -> None:
    check(case)


# ------------------------------------------------------------------------------------------------ larger V

# Threshold-and-compact top-K (tiles >= 1024 in launch 1; >= 17 tiles in launch 2): exactly CAP survivors, and one
# more than CAP (the fallback), for CAP = 128 (tile 1024, launch 2) and CAP = 64 (tiles 2048, 4096).
THRESHOLD_EDGES = [
    threshold_case("fp32", 32, 96, tile=1024),  # launch 1, tile 1024: 128 survivors
    threshold_case("fp32", 32, 97, tile=1024),  # launch 1, tile 1024: 129 survivors, fallback
    threshold_case("fp32", 32, 96, tile=32),  # launch 2 over 32 tiles (now thresholded by second candidates)
    threshold_case("bf16", 32, 97, tile=32),  # launch 2 over 32 tiles
    threshold_case("bf16", 64, 32, tile=2048),  # launch 1, tile 2048: 64 survivors
    threshold_case("fp16", 64, 33, tile=2048),  # launch 1, tile 2048: 65 survivors, fallback
    threshold_case("fp32", 128, 32, tile=4096),  # launch 1, tile 4096: 64 survivors
    threshold_case("fp32", 128, 33, tile=None),  # automatic tile (1024 at V = 4096): 4 tiles
]
# A tile of 1024 with V = 128 / 129 real entries: the padding blocks set the threshold to 0, so every real entry
# survives: 128 (compaction) or 129 (fallback).
_R = np.random.default_rng(7).standard_normal(129).astype(np.float32)
PADDED_128 = make_case("fp32", [_R[:128].tolist()], temperature=1.0, seed=128, tile=1024)
PADDED_129 = make_case("fp32", [_R.tolist()], temperature=1.0, seed=129, tile=1024)


@prop_settings()
@given(case=cases("fp32", tiles=(32, 1024, 2048, 4096, None), max_v=4200, max_b=2, max_programs=40))
@example(case=PADDED_128)
@example(case=PADDED_129)
@example(case=THRESHOLD_EDGES[0])
@example(case=THRESHOLD_EDGES[1])
@example(case=THRESHOLD_EDGES[2])
@example(case=THRESHOLD_EDGES[3])
@example(case=THRESHOLD_EDGES[4])
@example(case=THRESHOLD_EDGES[5])
@example(case=THRESHOLD_EDGES[6])
@example(case=THRESHOLD_EDGES[7])
def test_large_vocab_matches_reference(case: Call) -> None:
    """V up to 4200: many tiles (launch 2 merging up to 132 tiles' candidates) or large tiles (launch 1)."""
    check(case)


# Exactly 64 / 65 / 128 / 129 survivors of each threshold the kernels take (pp3/kernels/_select.py): the edges of
# the 64-slot rank, the 128-slot rank and the rounds fallback. Launch 1 on a partial tile (fewer than 32 nonempty
# groups: the column maxima), at tiles 1024 (128 slots, tiered), 2048 and 4096 (64 slots); launch 2 over 17, 32
# and 45 tiles (the second candidates) and 46 and 64 tiles (the tile maxima).
SURVIVOR_EDGES = [
    *(column_threshold_case("fp32", 1024, 512, e) for e in (32, 33, 96, 97)),
    column_threshold_case("fp16", 2048, 992, 32),
    column_threshold_case("bf16", 2048, 992, 33),
    column_threshold_case("fp32", 4096, 1984, 32),
    column_threshold_case("fp32", 4096, 1984, 33),
    *(merge_threshold_case("fp32", t, e) for t in (32, 64) for e in (32, 33, 96, 97)),
    merge_threshold_case("bf16", 17, 97),
    merge_threshold_case("fp16", 45, 33),
    merge_threshold_case("fp32", 46, 65),
]


# The segment selector's edges (pp3/kernels/_select.py, segments of 32 here): exactly 64 / 65 / 128 / 129 survivors
# of its bucket bound (the CAP/2-slot rank, the CAP-slot rank, the fallback scan), with 64 segments (one per
# bucket), 100 and 160 (segments sharing buckets).
SEGMENT_EDGES = [
    *(threshold_case("fp32", 64, e, tile=32) for e in (32, 33, 96, 97)),
    threshold_case("bf16", 100, 33, tile=32),
    threshold_case("fp16", 160, 97, tile=32),
]


def test_the_segment_edges_are_the_selectors() -> None:
    from pp3.kernels import config

    assert config.SEGMENT_CAP == 128 and config.SEGMENT_BUCKETS == 64


@pytest.mark.parametrize("case", SEGMENT_EDGES, ids=lambda c: f"V{c.v}-seg{c.tile}-{c.fmt.name}-s{c.seed[0]}")
def test_segment_survivor_edges_match_reference(case: Call) -> None:
    check(case)  # the shipped selectors' thresholds (the one-launch selector's: its own tests)


def test_survivor_edges_use_the_kernels_switch() -> None:
    """merge_threshold_case puts its survivors where launch 2's threshold switch (second candidates or maxima) is."""
    from pp3.kernels import _select

    assert SECOND_CANDIDATE_TILES == _select.SECOND_CANDIDATE_TILES.value


@pytest.mark.parametrize("case", SURVIVOR_EDGES, ids=lambda c: f"V{c.v}-tile{c.tile}-{c.fmt.name}-s{c.seed[0]}")
def test_threshold_survivor_edges_match_reference(case: Call) -> None:
    check(case)
