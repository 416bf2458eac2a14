"""Bit parity of the Triton verifier (pp3.kernels.accept) with the NumPy reference (SPEC.md §11).

Runs under TRITON_INTERPRET=1 (tiny sizes: ~0.1-0.3 s per row) or natively on a CUDA GPU; skipped otherwise.
Each case names the code path it hits. The cases of each path that the verifier's variants change (its screen,
launch 3's handed-over word and launches 6 and 7's S: ``LaunchConfig(screen=..., handover=...)``) run in both
variants (``VARIANTS``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from torch import Tensor

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pp3.kernels import LaunchConfig, _accept, _workspace  # noqa: E402
from pp3.kernels import uniform_below as uniform_below_dev  # noqa: E402
from pp3.kernels import verify as verify_dev  # noqa: E402
from pp3.reference import DOMAIN_ACCEPT, DOMAIN_RESIDUAL, float32_to_bf16_bits, uniform_below, verify  # noqa: E402
from pp3.testing.call import AcceptCall, to_numpy  # noqa: E402
from pp3.testing.compare import assert_equal  # noqa: E402
from pp3.testing.drafts import (  # noqa: E402
    REJECT_Q,
    REJECT_SEED_ACCEPT,
    REJECT_SEED_RESIDUAL,
    break_draft,
    point_drafts,
    random_case,
    two_slot_draft,
)

pytestmark = [
    pytest.mark.interpreter,
    # the interpreter's runtime-bound loops (the tile loops) convert 1-element arrays to ints (NumPy 2.3 warns)
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning"),  # -inf / +inf, masked
]
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
FIELDS = ("status", "accepted", "tokens")
SHIPPED = LaunchConfig(screen="pinned", handover=False)
# The shipped verifier and its other variants, together (each changes other launches: the screen launch 1, the
# handover launches 2, 3, 6 and 7).
NEXT = LaunchConfig(screen="ex2", handover=True)
VARIANTS = pytest.mark.parametrize("launch", [SHIPPED, NEXT], ids=["shipped", "ex2+handover"])


def same(case: dict[str, Any], tile: int | None = None, launch: LaunchConfig = SHIPPED) -> None:
    want = verify(**case)
    got = AcceptCall.of(**case, tile=tile).run_kernel(DEV, launch)
    for f in FIELDS:
        assert_equal(getattr(got, f), getattr(want, f), f"{f} (seeds {np.asarray(case['seed']).tolist()})")


@pytest.mark.parametrize(
    ("temp", "v", "tile"),
    [
        (1.0, 7, None),  # sampled, one tile (the default tile clipped to 8), ragged
        (0.3, 37, 16),  # sampled, 3 tiles: the tile tree and the tree over tile sums (padded to 4)
        (np.inf, 9, None),  # T = +inf: uniform over finite logits
        (0.0, 33, 8),  # T0 over 5 tiles: argmax across tiles, no random numbers
    ],
)
def test_random_rows(temp: float, v: int, tile: int | None) -> None:
    case = random_case(np.random.default_rng(v), 3, 2, v, temp)
    case["target_logits"][0, :, 1] = -np.inf  # a masked token
    case["target_logits"][1, 1, :] = 0.5  # a flat row: ties everywhere
    case["position"][2] = np.uint64(2**64 - 1)  # positions wrap
    same(case, tile)
    if temp == 0.3:  # sampled over 3 tiles: the variants' every launch
        same(case, tile, NEXT)


@VARIANTS
def test_back_to_back_calls_leave_the_row_counters_zero(launch: LaunchConfig) -> None:
    """Two calls in a row, other rows and tiles: every launch that finishes rows in their last program shares the
    row counters of ``_workspace``, so a counter the first call left nonzero would pick the wrong last program in
    the second (one that reduces before every tile is written, or none, leaving the row's values unwritten)."""
    first = random_case(np.random.default_rng(31), 3, 2, 37, 1.0)  # 9 target rows of 5 tiles
    first["target_temperature"] = np.array([1.0, 0.0, 0.7], dtype=np.float32)  # T0: launches 2, 3, 5 skip row 1
    first["target_logits"][2, 1, 3] = np.nan  # a failed target row, skipped by launches 2 and 3
    second = random_case(np.random.default_rng(32), 2, 1, 50, 0.5)  # 4 target rows of 4 tiles
    same(first, 8, launch)
    same(second, 16, launch)
    assert not _workspace.counters(DEV, 9).any()


@VARIANTS
def test_failed_rows_and_truncation(launch: LaunchConfig) -> None:
    case = random_case(np.random.default_rng(4), 6, 2, 40, 1.0)
    case["target_logits"][0, 1, 3] = np.nan  # NAN_LOGIT at row 1
    case["target_logits"][1, 0, :] = -np.inf  # ZERO_MASS at row 0
    case["target_logits"][2, 2, 0] = np.inf  # POS_INF at the bonus row
    case["draft_status"][3, 0] = 1  # n = 0: the bonus from p_0; later rows ignored
    case["target_logits"][3, 1:, 0] = np.nan
    break_draft("token_zero_tickets", case["draft_ids"][4:], case["draft_tickets"][4:], case["draft_tokens"][4:])
    case["target_logits"][5, 0, 7] = np.uint32(0xFFC00000).view(np.float32)  # a negative NaN
    same(case, 16, launch)
    assert verify(**case).status.tolist() == [1, 3, 2, 0, 5, 1]


@pytest.mark.parametrize("temp", [0.0, 1.0])
def test_the_argmax_across_tiles(temp: float) -> None:
    """§4.1's argmax where launch 1's tile peaks and its rescan of one tile could go wrong: -0.0 and +0.0 equal across
    tiles (a tile of -0.0 and one of +0.0 may peak at either zero: they compare equal), ties across and inside tiles,
    the maximum in the ragged last tile, a negative NaN after the maximum. A T0 request emits g_0 at index 0 whether
    draft 0 is accepted or not (and a sampled one weighs every row against its m)."""
    case = random_case(np.random.default_rng(5), 7, 1, 37, temp)  # tiles of 8: 5 per row, the last one of 5 entries
    rows = -1.0 - np.abs(case["target_logits"][:, 0, :])  # every entry below -1: the planted ones are the maxima
    rows[0, [3, 20]] = [-0.0, 0.0]  # -0.0 in tile 0, +0.0 in tile 2: g = 3
    rows[1, [20, 30]] = [-0.0, 0.0]  # the +0.0 in a later tile than the -0.0: g = 20
    rows[2, [12, 30]] = 2.0  # a tie across tiles: g = 12
    rows[3, [17, 19]] = 2.0  # a tie inside a tile: g = 17
    rows[4, 36] = 2.0  # in the ragged last tile: g = 36
    rows[5, 33] = 2.0  # in the last tile before a padded lane's -inf
    rows[6, [1, 35]] = [2.0, np.uint32(0xFFC00000).view(np.float32)]  # a negative NaN after the maximum: NaN row
    case["target_logits"][:, 0, :] = rows
    same(case, 8)
    got = verify(**case)
    assert got.status.tolist() == [0, 0, 0, 0, 0, 0, 1]
    if temp == 0.0:
        assert got.tokens[:6, 0].tolist() == [3, 20, 12, 17, 36, 33]


@pytest.mark.parametrize("garbage", [-(1 << 31), -1, (1 << 31) - 1])
def test_the_failed_draft_at_n_is_ignored_whatever_it_holds(garbage: int) -> None:
    """§11.3: drafts n .. D-1 are ignored entirely. The bonus at index n once read the failed draft n's slots as Q*'s
    corrections: negative tickets there gave a token outside the vocabulary."""
    case = random_case(np.random.default_rng(0), 4, 3, 40, 1.0)
    case["draft_status"][:, 1] = 1  # n = 1 in every row
    case["draft_tickets"][:, 1, :] = garbage
    case["draft_ids"][:2, 1, :] = np.arange(32, dtype=np.int32)[None, :] + 3  # IDs of the row, not empty
    same(case, 16)
    same(case)


@pytest.mark.parametrize("kind", ["sum", "descending", "id_out_of_range", "full_after_empty"])
def test_invalid_drafts(kind: str) -> None:
    case = random_case(np.random.default_rng(21), 2, 2, 40, 1.0)
    break_draft(kind, case["draft_ids"], case["draft_tickets"], case["draft_tokens"])
    same(case)


def test_bad_temperature_and_signed_zero_temperature() -> None:
    case = random_case(np.random.default_rng(2), 3, 1, 5, 1.0)
    case["target_temperature"] = np.array([np.nan, -0.0, -1.0], dtype=np.float32)
    same(case)


def test_the_acceptance_word_rejection_path() -> None:
    case = {
        "target_logits": np.zeros((1, 2, 5), dtype=np.float32),
        "target_temperature": 1.0,
        **two_slot_draft(1, 1, 1, REJECT_Q, 3),
        "seed": REJECT_SEED_ACCEPT,
        "round": 0,
        "position": 0,
    }
    same(case)


def test_uniform_below_on_the_device_matches_the_reference() -> None:
    s = np.array([REJECT_Q << 16, REJECT_Q << 16, 1, 3, 1 << 40, (1 << 40) - 1, 12345], dtype=np.uint64)
    seed = np.array([REJECT_SEED_ACCEPT, REJECT_SEED_RESIDUAL, 5, 6, 7, 8, 2**64 - 1], dtype=np.uint64)
    zero = np.zeros(7, dtype=np.uint64)
    for dom in (DOMAIN_ACCEPT, DOMAIN_RESIDUAL):
        want = uniform_below(seed, zero, zero, dom, s)

        def t(a: np.ndarray[Any, Any]) -> Tensor:
            on_device: Tensor = torch.from_numpy(a.view(np.int64).copy()).to(DEV)
            return on_device

        got = uniform_below_dev(t(seed), t(zero), t(zero), dom, t(s)).cpu().numpy().view(np.uint64)
        assert_equal(got, want, f"uniform_below, domain {dom:#x}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("v", [12, 32000])  # one tile; a row whose end falls inside its last tile (the H200 once
def test_half_precision_target_logits(dtype: str, v: int) -> None:  # classed those NaN: records/2026-12-01/h200-g)
    case = random_case(np.random.default_rng(8), 2, 1, v, 1.0)
    x = case["target_logits"]
    x[0, 0, 5] = 1e-40  # a subnormal (bf16 keeps it; fp16 flushes it to a subnormal fp16 or 0)
    if dtype == "float16":
        x16 = torch.from_numpy(x.astype(np.float16))
        want_x = x.astype(np.float16).astype(np.float32)
    else:
        bits = float32_to_bf16_bits(x)
        x16 = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)
        want_x = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    want = verify(**(case | {"target_logits": want_x}))
    res = verify_dev(
        x16.to(DEV),
        1.0,
        torch.from_numpy(case["draft_tokens"].astype(np.int32)).to(DEV),
        torch.from_numpy(case["draft_status"].astype(np.int8)).to(DEV),
        torch.from_numpy(case["draft_ids"].astype(np.int32)).to(DEV),
        torch.from_numpy(case["draft_tickets"].astype(np.int32)).to(DEV),
        case["seed"],
        case["round"],
        case["position"],
    )
    got = to_numpy(res)
    for f in FIELDS:
        assert_equal(getattr(got, f), getattr(want, f), f)


@pytest.mark.parametrize(
    ("name", "bad", "exc"),
    [
        ("target_logits", torch.zeros((2, 3, 4), dtype=torch.int32), TypeError),
        ("target_logits", torch.zeros((2, 1, 4)), ValueError),
        ("draft_tokens", torch.zeros((2, 2), dtype=torch.int64), TypeError),
        ("draft_status", torch.zeros((2, 3), dtype=torch.int8), ValueError),
        ("draft_ids", torch.zeros((2, 2, 31), dtype=torch.int32), ValueError),
        ("seed", -1, ValueError),
        ("tile", 3, ValueError),
        ("launch", "ex2", TypeError),
    ],
)
def test_bad_arguments_raise_before_any_launch(name: str, bad: Any, exc: type[Exception]) -> None:
    args: dict[str, Any] = {
        "target_logits": torch.zeros((2, 3, 4), device=DEV),
        "target_temperature": 1.0,
        "draft_tokens": torch.zeros((2, 2), dtype=torch.int32, device=DEV),
        "draft_status": torch.zeros((2, 2), dtype=torch.int8, device=DEV),
        "draft_ids": torch.zeros((2, 2, 32), dtype=torch.int32, device=DEV),
        "draft_tickets": torch.zeros((2, 2, 32), dtype=torch.int32, device=DEV),
        "seed": 0,
        "round": 0,
        "position": 0,
    }
    with pytest.raises(exc, match=name):  # on the kernels' device, so that only the named argument is wrong
        verify_dev(**(args | {name: bad.to(DEV) if isinstance(bad, torch.Tensor) else bad}))


def test_kernel_reproduces_the_accept_golden_vectors() -> None:
    """Every row of pp3/conformance/accept-dyadic24-v1.jsonl, on the kernel (SPEC.md §11.11)."""
    from pp3.testing.compare import row_mismatch
    from pp3.testing.golden import load_accept_golden

    bad = {c.name: np.flatnonzero(row_mismatch(c.call.run_kernel(DEV), c.expected)).tolist()
           for c in load_accept_golden()}
    assert not any(bad.values()), {k: v for k, v in bad.items() if v}


def _argmax_drafts(case: dict[str, Any]) -> dict[str, Any]:
    """The case with every draft replaced by the point mass on its target row's argmax: x_j = g_j everywhere, the
    tests that launch 3 may leave open (its chain has no remainders R)."""
    g = np.argmax(case["target_logits"][:, :-1], axis=-1)  # no ties in random normal rows: the lowest ID anyway
    return case | point_drafts(g)


@pytest.mark.parametrize(("bound", "launch"), [("default", SHIPPED), ("raised", SHIPPED), ("raised", NEXT)],
                         ids=["default", "raised", "raised-ex2+handover"])
def test_tests_of_the_argmax_decided_with_and_without_the_remainder(
    bound: str, launch: LaunchConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drafts x_j = g_j with q(g_j) = 1: U_j is uniform below 2^40 and the test accepts iff U_j < c + R. With the
    default bound (V) launch 3 decides them all (U_j < c or U_j >= c + V); with the bound raised to 2^40 every
    U_j >= c is open, so the request goes through launches 4 and 5 (the remainders, then the chain again). Both
    must equal the reference; a missing or wrong fallback leaves the provisional chain of launch 3 (rows stopped at
    the open test, no residual draw). With the handover, the marked requests are launch 3's loop over every row,
    which counts rows in for launches 4 and 5."""
    from pp3.kernels import accept

    if bound == "raised":
        monkeypatch.setattr(accept, "remainder_bound", lambda v: 1 << 40)
    case = _argmax_drafts(random_case(np.random.default_rng(41), 6, 3, 40, 1.0))
    want = verify(**case)
    assert (want.accepted < 3).sum() >= 3  # rejections of x_j = g_j: tests with U_j >= c, open when raised
    same(case, 16, launch)


def _screened_case() -> dict[str, Any]:
    """Sampled requests whose drafts are the reference's own proposals from the target rows (q close to p: tests
    near their acceptance boundary) at three temperatures, one of them a power of two."""
    case = random_case(np.random.default_rng(43), 12, 3, 40, 1.0)
    case["target_temperature"] = np.resize(np.array([1.0, 0.6, 0.5], dtype=np.float32), 12)
    return case


@pytest.mark.parametrize(("margin", "launch"), [("default", SHIPPED), ("raised", SHIPPED), ("default", NEXT)],
                         ids=["default", "raised", "default-ex2+handover"])
def test_tests_decided_by_the_screen_and_by_the_exact_sum(margin: str, launch: LaunchConfig,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Launch 2 decides a test by launch 1's interval S~ (1 +- margin) (pp3.kernels.screen). With the margin raised
    to 1/2 almost every test is open, so its request goes through launches 3 to 5 (the exact S of every row, the
    remainders, the chain again) and row a's S comes from launch 3 for every draw: both must equal the reference.
    The hardware screen decides the tests of the default margin as the pinned one does (the raised margin opens
    them whatever the screen: the handover's marked path is the argmax test's above)."""
    from pp3.kernels import accept

    if margin == "raised":
        monkeypatch.setattr(accept, "screen_margin", lambda: 0.5)
    same(_screened_case(), 16, launch)


@VARIANTS
def test_a_screen_margin_too_small_is_caught(launch: LaunchConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: an interval S~ (1 +- margin) that misses S (margin -1/4: S_hi below S~) accepts tests whose U_j lies
    between the exact floor count and c(S_hi). The comparison with the reference must see it; this is the power the
    default margin's derivation (pp3.kernels.screen) relies on in the tests above."""
    from pp3.kernels import accept

    monkeypatch.setattr(accept, "screen_margin", lambda: -0.25)
    case = _screened_case()
    with pytest.raises(AssertionError):
        same(case, 16, launch)


@triton.jit
def _floor_counts_probe(w_ptr: tl.tensor, s_ptr: tl.tensor, near: tl.tensor, c_ptr: tl.tensor, unsure_ptr: tl.tensor,
                        N: tl.constexpr) -> None:
    i = tl.program_id(0)
    s = tl.load(s_ptr + i)
    w = tl.load(w_ptr + i * N + tl.arange(0, N)).to(tl.float64)
    c, unsure = _accept._floor_counts_fast(w, _accept.P_TICKETS_F / s, near)
    tl.store(c_ptr + i * N + tl.arange(0, N), c)
    tl.store(unsure_ptr + i, unsure)


def test_fast_floor_counts_are_the_division_or_unsure() -> None:
    """Launch 6 counts floor(fl64(w 2^40) / S) by one multiplication by fl64(2^40 / S) and divides a tile where that
    is unsure (``_accept._floor_counts_fast``, proved there). Rows of random weights (zeros and w = 1 included): sure,
    and equal to the division. Rows where every w 2^40 / S is an integer k (w = d k 2^-40 with S = d, k < 2^15, odd
    d < 2^9 whose fl64(2^40 / d) lies furthest below 2^40 / d): there the product's floor is k - 1 for some entries
    (checked here, so the test can fail), so the helper must say unsure."""
    from pp3.kernels import accept

    rng = np.random.default_rng(7)
    n_rows, width = 6, 64
    w = np.exp(rng.uniform(-30.0, 0.0, (n_rows, width))).astype(np.float32)
    w[:, 0] = 1.0
    w[0, 1:9] = 0.0
    s = rng.uniform(1.0, 5000.0, n_rows)
    for r, d in zip(range(3, n_rows), (503.0, 479.0, 491.0), strict=True):
        k = rng.integers(3 << 13, 1 << 15, width).astype(np.float64)
        w[r] = (d * k / 2.0**40).astype(np.float32)  # exact: d k < 2^24, times a power of two
        s[r] = d
    want = np.floor((w.astype(np.float64) * 2.0**40) / s[:, None]).astype(np.int64)
    product = np.floor(w.astype(np.float64) * (2.0**40 / s)[:, None]).astype(np.int64)
    assert (product != want)[3:].any(axis=1).all()
    c = torch.empty((n_rows, width), dtype=torch.int64, device=DEV)
    unsure = torch.empty(n_rows, dtype=torch.int32, device=DEV)
    _floor_counts_probe[(n_rows,)](torch.from_numpy(w).to(DEV), torch.from_numpy(s).to(DEV), accept.count_margin(),
                                   c, unsure, N=width)
    assert unsure.tolist() == [0, 0, 0, 1, 1, 1]
    assert_equal(c.cpu().numpy()[:3], want[:3], "floor counts of the sure rows")


@pytest.mark.parametrize(("margin", "launch"), [("default", SHIPPED), ("raised", SHIPPED), ("raised", NEXT)],
                         ids=["default", "raised", "raised-ex2+handover"])
def test_residual_counts_by_the_reciprocal_and_by_the_division(margin: str, launch: LaunchConfig,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Launch 6's plain floor counts: by the reciprocal of S (the default margin: almost every tile), and with the
    margin raised to 1 by the division in every tile that holds a nonzero weight (``_floor_counts_fast`` is then
    unsure of it). Both must equal the reference's residual draws. With the handover, launches 6 and 7 form S from
    launch 3's tile sums, and launch 7 divides by it too."""
    from pp3.kernels import accept

    if margin == "raised":
        monkeypatch.setattr(accept, "count_margin", lambda: 1.0)
    case = _screened_case()
    case["target_logits"][0, :, 5:] = -np.inf  # S = 1 + ... on few entries: exact quotients, unsure tiles
    same(case, 16, launch)


@pytest.mark.parametrize("temp", [2.0**-126, 0.25, 1.0, 2.0, 2.0**127])
def test_power_of_two_temperatures_divide_as_a_product(temp: float) -> None:
    """P3 for T = 2^e is d times the exact reciprocal 2^-e (every launch that weighs, ``_accept._exponent``): the
    correctly rounded d 2^-e either way. Bit for bit on NumPy over every class of fp32 d (subnormal, overflowing,
    signed zero, -inf, random), then the kernel against the reference at that temperature."""
    f = np.float32
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, -1e-45, -1.1754942e-38, -1.5e-40, -3.4028235e38, -np.inf, -1.0, -0.7], dtype=f)
    d = np.concatenate([special, -rng.random(4096).astype(f) * f(100.0),
                        -(rng.integers(0, 0x7F800000, 4096, dtype=np.uint32).view(f))])
    with np.errstate(over="ignore", divide="ignore"):
        by_product = d * (f(1.0) / f(temp))
        by_division = d / f(temp)
    assert_equal(by_product.view(np.uint32), by_division.view(np.uint32), f"T = {temp}")
    case = random_case(np.random.default_rng(7), 3, 2, 24, temp)
    same(case, 8)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="V = 163840 rows: too slow for the interpreter")
@VARIANTS
def test_open_tests_at_the_full_vocabulary(launch: LaunchConfig) -> None:
    """Flat target rows at V = 163840: S = V, every floor count c = floor(2^40 / V) = 6710886 and R = 2^40 - V c =
    65536 (on g = 0). Drafts x = 0 with Q(0) = 103 tickets, so U is uniform below s = 103 * 2^16 = 6750208 < c + R:
    every test accepts. The rows with U >= c (0.58 %) fall in launch 3's open window c .. c + V - 1 and are decided
    by launches 4 and 5 with R; a fallback that left R out would reject them."""
    v, b, qx = 163840, 2048, 103
    c = (1 << 40) // v
    seed = np.arange(1, b + 1, dtype=np.uint64)
    zero = np.zeros(b, dtype=np.uint64)
    u = uniform_below(seed, zero, zero, DOMAIN_ACCEPT, np.full(b, qx << 16, dtype=np.uint64))
    opened = np.flatnonzero(u >= np.uint64(c))
    assert opened.size >= 1 and (u < np.uint64(c + 65536)).all()
    draft = two_slot_draft(b, 1, 0, qx, 1)
    dev = {k: torch.from_numpy(a).to(DEV) for k, a in draft.items()}
    seeds = torch.from_numpy(seed.view(np.int64)).to(DEV)
    got = to_numpy(verify_dev(torch.zeros((b, 2, v), device=DEV), 1.0, dev["draft_tokens"], dev["draft_status"],
                              dev["draft_ids"], dev["draft_tickets"], seeds, 0, 0, launch=launch))
    assert (got.accepted == 1).all()
    pick = np.concatenate([opened, np.arange(8)])
    want = verify(np.zeros((pick.size, 2, v), dtype=np.float32), np.float32(1.0),
                  **{k: a[pick] for k, a in draft.items()}, seed=seed[pick], round=0, position=0)
    for f in FIELDS:
        assert_equal(getattr(got, f)[pick], getattr(want, f), f)


def test_the_variants_are_chosen_as_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LaunchConfig.screen`` and ``handover`` pick the verifier's variants; None reads PP3_VERIFY_SCREEN and
    PP3_VERIFY_HANDOVER at each call (the shipped ones when unset); a bad value is refused, naming what is wrong."""
    from pp3.kernels import config

    monkeypatch.delenv("PP3_VERIFY_SCREEN", raising=False)
    monkeypatch.delenv("PP3_VERIFY_HANDOVER", raising=False)
    assert (config.verify_screen(), config.verify_handover()) == ("pinned", False)
    monkeypatch.setenv("PP3_VERIFY_SCREEN", "ex2")
    monkeypatch.setenv("PP3_VERIFY_HANDOVER", "1")
    assert (config.verify_screen(), config.verify_handover()) == ("ex2", True)
    assert (config.verify_screen(SHIPPED), config.verify_handover(SHIPPED)) == ("pinned", False)
    monkeypatch.setenv("PP3_VERIFY_SCREEN", "exp")
    with pytest.raises(ValueError, match="PP3_VERIFY_SCREEN"):
        config.verify_screen()
    monkeypatch.setenv("PP3_VERIFY_HANDOVER", "yes")
    with pytest.raises(ValueError, match="PP3_VERIFY_HANDOVER"):
        config.verify_handover()
    with pytest.raises(ValueError, match="screen"):
        LaunchConfig(screen="fast")
    with pytest.raises(TypeError, match="handover"):
        LaunchConfig(handover=1)  # type: ignore[arg-type]
