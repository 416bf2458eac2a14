"""The segment selector (``propose`` on one tensor: launches A, B and C of ``pp3/kernels/_select.py``, or A and C
alone when C gathers; every check runs both ways) against the reference, bit for bit, on the rows that test its bound
and its fallback: Gaussian rows (survivors well under CAP/2), exactly CAP/2, CAP/2 + 1, CAP and CAP + 1 survivors,
64 / 65 / 128 / 129 blocks at the bound (gather steps, the scan), a block with two or three survivors, the selection
in steps, segments sharing buckets,
ties at the bound, rows masked to a few finite entries (spread out or contiguous), sorted rows and all-equal rows
(the fallback scan), every row class in one batch, and calls one after another (the buckets and counters left as
they were found). Planted bugs (a bound one too tight, launch B's pre-check of it one too high, C's selection one
block short, its gather one too tight, a bitonic merge one exchange short, the fallback scan one entry short) fail
these tests.

Runs through Triton's interpreter on the CPU or natively on a CUDA GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from pp3 import reference as ref  # noqa: E402
from pp3.kernels import LaunchConfig, _select, propose  # noqa: E402
from pp3.testing.compare import assert_equal  # noqa: E402
from proptests.strategies import threshold_case  # noqa: E402

pytestmark = pytest.mark.interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FIELDS = ("status", "token", "ids", "tickets")
SEG = LaunchConfig(selector="segments", segment=32)  # 32-entry segments: many segments at interpreter sizes
GATHER = dataclasses.replace(SEG, segment_gather=True)
FILTER = dataclasses.replace(SEG, segment_gather=False)


def _check(x: np.ndarray[Any, Any], temp: Any = 1.0, launch: LaunchConfig = SEG, what: str = "") -> None:
    """The call against the reference, through launch B and through C's gather (unless ``launch`` picks one)."""
    b = x.shape[0]
    t = np.broadcast_to(np.asarray(temp, np.float32), (b,)).copy()
    pos = np.arange(b, dtype=np.uint64) + np.uint64(11)
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref.propose(x, t, 7, 3, pos)
    modes = (False, True) if launch.segment_gather is None else (launch.segment_gather,)
    for gather in modes:
        got = propose(torch.from_numpy(x).to(DEVICE), torch.from_numpy(t).to(DEVICE), 7, 3,
                      torch.from_numpy(pos.view(np.int64)).to(DEVICE),
                      launch=dataclasses.replace(launch, segment_gather=gather))
        for f in FIELDS:
            assert_equal(getattr(got, f).cpu().numpy(), getattr(want, f), f"{what} gather={gather} {f}")


def _gaussian(b: int, v: int, seed: int) -> np.ndarray[Any, Any]:
    return (np.random.default_rng(seed).standard_normal((b, v)) * 3).astype(np.float32)


def test_c_gathers_from_16_rows_at_8_warps() -> None:
    """config.segment_gathers and segment_warps: by default C gathers from 16 rows on, at 8 warps (4 with launch B);
    a launch configuration's own choice wins."""
    from pp3.kernels.config import segment_gathers, segment_warps

    assert [segment_gathers(b) for b in (1, 4, 8, 15, 16, 64)] == [False] * 4 + [True] * 2
    assert segment_warps(False) == (4, 1, 4) and segment_warps(True) == (4, 1, 8)
    assert segment_gathers(1, GATHER) and not segment_gathers(64, FILTER)
    assert segment_warps(True, LaunchConfig(segment_warps=(2, 2, 2))) == (2, 2, 2)
    with pytest.raises(TypeError, match="segment_gather"):
        LaunchConfig(segment_gather=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="segment_warps"):
        LaunchConfig(segment_warps=(4, 8))  # type: ignore[arg-type]


def test_segment_size_fills_every_bucket_and_shortens_small_batches() -> None:
    """config.segment_size: at V = 163840 the sizes measured best on the H200 (records/2026-12-02/h200-c: 256 at
    B = 1 and 2, 512 at B = 4, 1024 from B = 8 on; records/2026-12-04/h200-a: 2048 when C gathers); everywhere a power
    of two in 32 .. 1024 (2048 when C gathers) that fills the 64 buckets when the row allows it, never below 256 for
    the batch's sake."""
    from pp3.kernels.config import SEGMENT_BUCKETS, segment_size

    assert [segment_size(163840, b) for b in (1, 2, 4, 8, 16, 64, 1024)] == [256, 256, 512, 1024, 1024, 1024, 1024]
    assert [segment_size(163840, b, True) for b in (16, 64)] == [2048, 2048]
    assert segment_size(128256, 64, True) == 1024  # 63 segments of 2048 would leave a bucket empty
    for gather, top in ((False, 1024), (True, 2048)):
        for v in (1, 31, 100, 2048, 5000, 32000, 128256, 151936, 163840, 262144, 1 << 20):
            by_row = segment_size(v, 1 << 20, gather)  # a batch large enough that only the row's rule counts
            assert by_row & (by_row - 1) == 0 and 32 <= by_row <= top
            assert by_row == 32 or -(-v // by_row) >= SEGMENT_BUCKETS
            for b in (1, 2, 4, 8, 64):
                s = segment_size(v, b, gather)
                assert s == by_row or 256 <= s < by_row, (v, b, s)


def _crowded_block(n: int) -> np.ndarray[Any, Any]:
    """``_blocks_at_the_bound(0)`` (32 blocks reach tau = 42, one survivor each) with n - 1 more entries 50.5,
    50.25, ... in the block of the spike 50: that block holds n survivors, every one of them among the first K (they
    push the spikes 42, 43, ... out)."""
    x = _blocks_at_the_bound(0)
    x[0, 40 * 32 + 6 + np.arange(n - 1)] = 50.0 + 0.5 ** (1 + np.arange(n - 1))
    return x


@pytest.mark.parametrize("n", [2, 3])
def test_a_block_with_two_or_three_survivors(n: int) -> None:
    _check(_crowded_block(n), what=f"{n} in a block")


@pytest.mark.parametrize("v", [2048, 5000])  # 64 segments (one per bucket); 157 (sharing buckets)
def test_gaussian_rows(v: int) -> None:
    _check(_gaussian(3, v, v), what=f"V={v}")


@pytest.mark.parametrize("extras", [32, 33, 96, 97])  # 64 / 65 / 128 / 129 survivors
def test_exact_survivor_counts(extras: int) -> None:
    case = threshold_case("fp32", 64, extras, tile=32)
    _check(case.logits32(), what=f"{32 + extras} survivors")


def _blocks_at_the_bound(extras: int) -> np.ndarray[Any, Any]:
    """One row of 320 segments of 32 entries (5 per bucket): segment j < 64 holds the spike 10 + j, so tau = 42 (the
    32nd largest bucket); ``extras`` other segments of the buckets j >= 32 hold one entry 42 each (no bucket maximum
    changes). With segments of 32 every block is a segment: 32 + extras blocks reach tau, with one survivor each."""
    x = np.full((1, 320 * 32), -1.0, np.float32)
    x[0, np.arange(64) * 32 + 5] = 10.0 + np.arange(64)
    at = [(j + 64 * k) * 32 + 17 for k in range(1, 5) for j in range(32, 64)]
    x[0, at[:extras]] = 42.0
    return x


@pytest.mark.parametrize("extras", [32, 33, 96, 97])  # 64 / 65 / 128 / 129 blocks: one or two gathers, or the scan
def test_blocks_at_the_bound(extras: int) -> None:
    _check(_blocks_at_the_bound(extras), what=f"{32 + extras} blocks")


def test_the_selection_in_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """C's selection over the block maxima in steps of 64 (SEGMENT_SELECT is 4096: one step up to V = 262144): the
    Gaussian rows, the block edges and a ragged row end give the same bits."""
    from pp3.kernels import launchers

    monkeypatch.setattr(launchers, "SEGMENT_SELECT", 64)
    _check(_gaussian(2, 5000, 3), launch=GATHER, what="steps, Gaussian")
    for extras in (33, 97):
        _check(_blocks_at_the_bound(extras), launch=GATHER, what=f"steps, {32 + extras} blocks")
    _check(_gaussian(2, 4096, 8), launch=dataclasses.replace(GATHER, segment=256), what="steps, 64-entry blocks")


def test_ties_at_the_bound_and_signed_zeros() -> None:
    x = _gaussian(2, 2048, 1) - 20.0
    x[0, ::32] = 0.0  # every segment's maximum is 0.0 (-0.0 in half of them): all tie at the bound
    x[0, 16::64] = -0.0
    x[1, ::31] = 5.0  # 67 entries tie at the top: more than CAP/2, fewer than CAP survive
    _check(x, what="ties")


@pytest.mark.parametrize("finite", [1, 31, 32, 33, 100, 300])
def test_rows_masked_to_a_few_finite_entries(finite: int) -> None:
    x = np.full((2, 4096), -np.inf, np.float32)
    rng = np.random.default_rng(finite)
    x[0, rng.choice(4096, finite, replace=False)] = rng.standard_normal(finite).astype(np.float32)
    x[1, 1000:1000 + finite] = rng.standard_normal(finite).astype(np.float32)  # a contiguous allowed range
    _check(x, what=f"{finite} finite")


def test_sorted_and_all_equal_rows_take_the_fallback() -> None:
    x = np.stack([np.arange(3000, dtype=np.float32), -np.arange(3000, dtype=np.float32),
                  np.full(3000, 2.0, np.float32)])
    _check(x, what="sorted / equal")


def test_every_row_class_in_one_batch_and_half_precision() -> None:
    x = _gaussian(7, 2100, 5)
    x[1, 7] = np.nan
    x[2, 9] = np.inf
    x[3] = -np.inf
    temps = [1.0, 1.0, 1.0, 1.0, 0.0, -0.0, np.nan]
    _check(x, temps, what="classes")
    for dtype in (np.float16,):
        _check(x.astype(dtype).astype(np.float32), temps, what="fp16 values")


def test_calls_leave_the_buckets_and_counters_as_they_found_them() -> None:
    """The same call three times, with other calls between (T0 only, another size): the same bits each time."""
    x = _gaussian(3, 2500, 9)
    for _ in range(3):
        _check(x, what="repeat")
        _check(_gaussian(5, 700, 2), 0.0, what="T0 between")
        _check(_gaussian(2, 4096, 3), 2.0, launch=LaunchConfig(selector="segments"), what="automatic segment")


# ------------------------------------------------------------------------------------------------ planted bugs


def _interpreter_only() -> None:
    """A planted jit helper takes effect in the interpreter; a GPU keeps the binary it compiled."""
    if DEVICE != "cpu":
        pytest.skip("a planted jit helper takes effect in the interpreter")


_KTH = _select._kth_largest_net


@triton.jit
def _one_too_tight(vals: tl.tensor, k: tl.constexpr) -> tl.tensor:
    """A planted bug: the k-th largest value plus one, a bound that the k-th entry itself fails."""
    return _KTH(vals, k) + 1


def test_a_bound_one_too_tight_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound of a row whose 32nd entry is the 32nd largest bucket (no extras): one too tight drops it."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_kth_largest_net", _one_too_tight)
    with pytest.raises(AssertionError):
        _check(threshold_case("fp32", 64, 0, tile=32).logits32(), what="too tight")


_FLOOR = _select._row_bound_floor


@triton.jit
def _floor_one_too_high(values: tl.tensor, NBP: tl.constexpr, K: tl.constexpr) -> tl.tensor:
    """A planted bug: launch B's lower bound of tau one above it, so that a segment whose maximum is tau is skipped."""
    return _FLOOR(values, NBP, K) + 1


def test_a_pre_check_one_too_high_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same row (its 32nd entry the 32nd largest bucket: tau is a segment's maximum, and the buckets' least group
    maximum): a pre-check one too high skips that segment and loses the entry."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_row_bound_floor", _floor_one_too_high)
    with pytest.raises(AssertionError):
        _check(threshold_case("fp32", 64, 0, tile=32).logits32(), launch=FILTER, what="pre-check too high")


_SURVIVORS = _select._survivors


@triton.jit
def _last_block_unread(row_ptr: tl.tensor, v: tl.tensor, block_ptr: tl.tensor, n_blk: tl.tensor, tau: tl.tensor,
                       scratch_ptr: tl.tensor, KIND: tl.constexpr, BLK: tl.constexpr, BC: tl.constexpr,
                       GATHER: tl.constexpr, CAP: tl.constexpr) -> tl.tensor:
    """A planted bug: C's selection stops one block short of the row's end."""
    return _SURVIVORS(row_ptr, v, block_ptr, n_blk - 1, tau, scratch_ptr, KIND, BLK, BC, GATHER, CAP)


def test_a_selection_one_block_short_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gaussian row whose maximum is its last entry: a selection that never reads the last block loses it."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_survivors", _last_block_unread)
    x = _gaussian(1, 2048, 6)
    x[0, -1] = 100.0
    with pytest.raises(AssertionError):
        _check(x, launch=GATHER, what="one block short")


@triton.jit
def _gather_one_too_tight(row_ptr: tl.tensor, v: tl.tensor, block_ptr: tl.tensor, n_blk: tl.tensor, tau: tl.tensor,
                          scratch_ptr: tl.tensor, KIND: tl.constexpr, BLK: tl.constexpr, BC: tl.constexpr,
                          GATHER: tl.constexpr, CAP: tl.constexpr) -> tl.tensor:
    """A planted bug: C selects and gathers against a bound one above tau, so entries at tau are dropped."""
    return _SURVIVORS(row_ptr, v, block_ptr, n_blk, tau + 1, scratch_ptr, KIND, BLK, BC, GATHER, CAP)


def test_a_gather_one_too_tight_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The row whose 32nd entry is the 32nd largest bucket, and the blocks whose maximum is tau: a gather one too tight
    loses them."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_survivors", _gather_one_too_tight)
    for x in (threshold_case("fp32", 64, 0, tile=32).logits32(), _blocks_at_the_bound(40)):
        with pytest.raises(AssertionError):
            _check(x, launch=GATHER, what="gather too tight")


@triton.jit
def _merge_one_short(h: tl.tensor, stage: tl.constexpr, order: tl.constexpr) -> tl.tensor:
    """A planted bug: a bitonic merge without its last exchange (adjacent pairs are never compared)."""
    if order == 2:
        flip = _select._axis_flag(_select._log2(h.numel), stage)
    else:
        flip = order
    for i in tl.static_range(stage - 1):
        h = _select._exchange(h, flip, stage - 1 - i)
    return h


def test_a_network_one_exchange_short_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gaussian rows: a bitonic merge one exchange short misplaces keys (the wrong bound, first K or slots out of ID
    order)."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_merge", _merge_one_short)
    with pytest.raises(AssertionError):
        _check(_gaussian(2, 2048, 4), what="merge one short")


_SCAN = _select._scan_top_k


@triton.jit
def _short_scan(row_ptr: tl.tensor, v: tl.tensor, tau: tl.tensor, scratch_ptr: tl.tensor, KIND: tl.constexpr,
                C: tl.constexpr, K: tl.constexpr, CAPS: tl.constexpr) -> tl.tensor:
    """A planted bug: the fallback scan stops one entry short of the row's end."""
    return _SCAN(row_ptr, v - 1, tau, scratch_ptr, KIND, C, K, CAPS)


def test_a_short_fallback_scan_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sorted row (its first K at the end) takes the fallback; a scan one entry short misses its maximum."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_scan_top_k", _short_scan)
    with pytest.raises(AssertionError):
        _check(np.arange(3000, dtype=np.float32)[None, :], what="short scan")
