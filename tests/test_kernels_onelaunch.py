"""The one-launch selector (``LaunchConfig(selector="onelaunch")``: one program per segment, the row's last program to
arrive selects; ``pp3/kernels/_select.py``) and the row selector (``selector="rows"``: one program per row, a running
bound) against the reference, bit for bit, on the rows built to defeat their bounds: Gaussian rows, all-equal rows,
the 32nd and 33rd entries tied across segments, -inf masks leaving fewer than K finite entries, NaN and +inf rows, a
row whose early segments hold only small values (and a sorted one), every row class in one batch, fp16 and bf16; the
survivors' three paths taken deterministically (n equal finite entries among -inf survive every bound: exactly n
survivors, whatever a program saw): one batched load (n <= FEW), steps (FEW < n <= CAP, with CHUNK set small), the
fallback scan (n > CAP, with CAP set small), and a Gaussian row with CAP below its survivors; polls; calls one after
another (buckets, counters and survivor counts left as found); the compare-and-count rank beside the network.
Planted bugs (a bound one too tight, a segment's own bound one too tight, the steps one short, the fallback scan's
bound one too tight) fail these tests.

The interpreter runs a launch's programs one after another, so a program sees every earlier program's publications
and none of the later ones': the protocol's races are the GPU's (``make selector-next-gpu``, compute-sanitizer over
``tools/sanitize_cases.py``). Runs through Triton's interpreter on the CPU or natively on a CUDA GPU.
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
from pp3.kernels import LaunchConfig, _select, config, launchers, propose  # noqa: E402
from pp3.testing.compare import assert_equal  # noqa: E402

pytestmark = pytest.mark.interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FIELDS = ("status", "token", "ids", "tickets")
# 64-entry segments (steps): many programs at interpreter sizes; one poll each (the interpreter's order makes more
# polls see nothing new).
ONE = LaunchConfig(selector="onelaunch", segment=64, polls=1)
ROWS = LaunchConfig(selector="rows", segment=64)
BOTH = (ONE, ROWS)


def _check(x: np.ndarray[Any, Any], temp: Any = 1.0, launches: tuple[LaunchConfig, ...] = BOTH,
           what: str = "") -> None:
    """The call through each launch configuration against the reference."""
    b = x.shape[0]
    t = np.broadcast_to(np.asarray(temp, np.float32), (b,)).copy()
    pos = np.arange(b, dtype=np.uint64) + np.uint64(11)
    with np.errstate(over="ignore", invalid="ignore"):
        want = ref.propose(x, t, 7, 3, pos)
    for launch in launches:
        got = propose(torch.from_numpy(x).to(DEVICE), torch.from_numpy(t).to(DEVICE), 7, 3,
                      torch.from_numpy(pos.view(np.int64)).to(DEVICE), launch=launch)
        for f in FIELDS:
            assert_equal(getattr(got, f).cpu().numpy(), getattr(want, f), f"{what} {launch.selector} {f}")


def _gaussian(b: int, v: int, seed: int) -> np.ndarray[Any, Any]:
    return (np.random.default_rng(seed).standard_normal((b, v)) * 3).astype(np.float32)


def _equal_among_masked(n: int, v: int = 1024, seed: int = 0) -> np.ndarray[Any, Any]:
    """One row of ``n`` entries 2.5 spread over the row, the rest -inf: exactly n survivors whatever the bounds."""
    x = np.full((1, v), -np.inf, np.float32)
    x[0, np.sort(np.random.default_rng(seed).choice(v, n, replace=False))] = 2.5
    return x


def test_launch_configuration() -> None:
    """The one-launch selector's segment rule and publications (config.onelaunch_segment, onelaunch_publish); the
    new LaunchConfig fields at their limits (their refusals: tests/test_kernels_select.py)."""
    from pp3.kernels.config import onelaunch_publish, onelaunch_segment

    assert [onelaunch_segment(163840, b) for b in (1, 2, 4, 8, 64, 256)] == [512, 1024, 2048, 4096, 4096, 4096]
    assert [onelaunch_segment(v, 1) for v in (1, 31, 100, 300, 5000)] == [32, 32, 128, 256, 256]
    assert [onelaunch_publish(s) for s in (32, 512, 1024, 4096, 65536)] == [1, 1, 2, 8, 32]
    for v in (1, 33, 4097, 32000, 151936, 262144):
        for b in (1, 3, 64, 1024):
            s = onelaunch_segment(v, b)
            assert s & (s - 1) == 0 and 32 <= s <= 4096 and (s < 2 * v or s == 32), (v, b, s)
    LaunchConfig(selector="rows", onelaunch_warps=2, top_rank=True, polls=64, max_registers=128)
    LaunchConfig(selector="onelaunch", onelaunch_warps=32, polls=1, max_registers=24)
    LaunchConfig(selector="onelaunch", max_registers=255)


def test_launch_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every launch of the two selectors is given the EXACT options, the warps of ``onelaunch_warps`` (by default 4,
    8 from 4096 entries on; the row selector 8) and ptxas's register cap only where ``max_registers`` sets one; one
    launch per call, one program per segment (or per row)."""
    seen: list[tuple[str, Any, dict[str, Any]]] = []

    class Spy:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getitem__(self, grid: Any) -> Any:
            return lambda *args, **kwargs: seen.append((self.name, grid, kwargs))

    for name in ("_onelaunch_kernel", "_row_select_kernel"):
        monkeypatch.setattr(_select, name, Spy(name))
    x = torch.zeros(3, 5000, device=DEVICE)
    for cfg in (LaunchConfig(selector="onelaunch"), LaunchConfig(selector="onelaunch", segment=4096),
                LaunchConfig(selector="onelaunch", onelaunch_warps=2, max_registers=96), LaunchConfig(selector="rows"),
                LaunchConfig(selector="rows", onelaunch_warps=4, max_registers=128)):
        propose(x, 1.0, 1, 2, 3, launch=cfg)
    assert [(n, g, o["num_warps"], o.get("maxnreg")) for n, g, o in seen] == [
        ("_onelaunch_kernel", (60,), 4, None), ("_onelaunch_kernel", (6,), 8, None),
        ("_onelaunch_kernel", (60,), 2, 96), ("_row_select_kernel", (3,), 8, None),
        ("_row_select_kernel", (3,), 4, 128)]
    for _, _, opts in seen:
        assert {k: opts[k] for k in config.EXACT} == config.EXACT


@pytest.mark.parametrize("v", [1, 33, 1500])  # one short segment; a ragged last segment
def test_gaussian_rows(v: int) -> None:
    _check(_gaussian(2, v, v), what=f"V={v}")


def test_the_rank_and_the_defaults() -> None:
    """The compare-and-count rank for the first K, more polls, warps, the automatic segment and step, and a register
    cap (ignored by the interpreter) give the same bits."""
    rank = tuple(dataclasses.replace(c, top_rank=True) for c in BOTH)
    _check(_gaussian(1, 1024, 1), launches=rank, what="rank")
    _check(_gaussian(1, 700, 2), launches=(dataclasses.replace(ONE, polls=3, onelaunch_warps=2),
                                            LaunchConfig(selector="onelaunch", max_registers=128),
                                            LaunchConfig(selector="rows")), what="defaults")


def test_all_equal_rows() -> None:
    """Every entry survives every bound: more than CAP survivors, the fallback scan (and -0.0 equal to +0.0)."""
    x = np.stack([np.full(1100, 2.0, np.float32), np.where(np.arange(1100) % 3 == 0, -0.0, 0.0).astype(np.float32)])
    _check(x, what="all equal")


def test_32nd_and_33rd_tie_across_segments() -> None:
    """31 distinct large entries, then the 32nd and 33rd values equal in segments far apart (and a third copy): the
    bound is that value, every copy survives, the lower IDs win the tie."""
    x = _gaussian(1, 1024, 3) - 20.0
    x[0, np.arange(31) * 30 + 7] = 10.0 + np.arange(31)
    x[0, [100, 600, 1000]] = 5.0
    _check(x, what="tie")
    _check(x, 0.0, what="tie T0")


@pytest.mark.parametrize("finite", [1, 31, 32, 33])
def test_masks_leaving_few_finite_entries(finite: int) -> None:
    x = np.full((1, 1024), -np.inf, np.float32)
    rng = np.random.default_rng(finite)
    x[0, rng.choice(1024, finite, replace=False)] = rng.standard_normal(finite).astype(np.float32)
    _check(x, what=f"{finite} finite")


def test_nan_and_inf_rows() -> None:
    """NaN (either sign, in a late segment), +inf, both, all -inf: the failed-row outputs; a T0 row beside them."""
    x = _gaussian(6, 400, 4)
    x[0, 390] = np.nan
    x[1, 200] = np.float32(-np.nan)
    x[2, 399] = np.inf
    x[3, 0], x[3, 399] = np.inf, np.nan
    x[4] = -np.inf
    _check(x, [1.0, 1.0, 2.0, 0.5, 1.0, 0.0], what="NaN / +inf")


def test_early_segments_small() -> None:
    """The row's first K entries all in its last segments: the early programs bound by their own groups alone (the
    interpreter's order shows them nothing published), many survivors; and an ascending row (sorted)."""
    x = _gaussian(1, 1024, 5) - 30.0
    x[0, -64:] = 10.0 + np.random.default_rng(6).standard_normal(64).astype(np.float32)
    _check(x, what="small then large")
    _check(np.arange(1024, dtype=np.float32)[None, :] * np.float32(0.25), what="ascending")


def test_every_row_class_in_one_batch_and_half_precision() -> None:
    x = _gaussian(7, 300, 5)
    x[1, 7] = np.nan
    x[2, 9] = np.inf
    x[3] = -np.inf
    temps = [1.0, 1.0, 1.0, 1.0, 0.0, -0.0, np.nan]
    _check(x, temps, what="classes")
    _check(x.astype(np.float16).astype(np.float32), temps, what="fp16 values")


def test_fp16_and_bf16_logits() -> None:
    """The kernels' own widening of 16-bit logits (bf16 through its bits)."""
    from pp3.testing.call import FORMATS, Call

    x = _gaussian(2, 400, 8)
    for fmt in ("fp16", "bf16"):
        bits = (x.astype(np.float16).view(np.uint16) if fmt == "fp16"
                else (x.view(np.uint32) >> 16).astype(np.uint16))
        call = Call(FORMATS[fmt], bits, np.ones(2, np.float32), (1, 2), (3, 4), (5, 6), 0.7, 64, True, name=fmt)
        want = call.run_reference()
        for kernel in ("onelaunch", "rows"):
            got = call.replace(kernel=kernel).run_kernel(DEVICE)
            for f in FIELDS:
                assert_equal(getattr(got, f), getattr(want, f), f"{fmt} {kernel} {f}")


def test_pp3_verify_runs_them_only_where_named() -> None:
    """Not yet shipped, the two selectors are pp3's kernels' variants (``pp3.harness.builtin``) that ``pp3 verify``
    checks only where ``--selectors`` names them; a written case of either replays through it."""
    from pp3.audit.parity import implementations
    from pp3.harness import builtin

    default = [i.variant or "propose" for i in implementations((), None)["selector"]]
    assert default == list(builtin.SELECTOR_KERNELS)
    asked = implementations((), ["propose", "onelaunch", "rows"])["selector"]
    assert [i.variant or "propose" for i in asked] == ["propose", "onelaunch", "rows"]
    assert all(builtin.kernel(k).variant == k and builtin.kernel(k).sharded is None for k in ("onelaunch", "rows"))


@pytest.mark.parametrize("n", [63, 64, 65, 100])
def test_survivors_in_one_load_or_in_steps(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exactly n survivors: up to FEW = 64 one batched load, more in steps (CHUNK 32: several steps, the K-th best
    skipping the steps below it)."""
    monkeypatch.setattr(launchers, "ONELAUNCH_CHUNK", 32)
    _check(_equal_among_masked(n), what=f"{n} survivors")


def test_the_fallback_scan_past_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """CAP = 64: 65 equal survivors overflow the slots (the scan); a Gaussian row whose early segments (bounded by
    their own groups alone in the interpreter) overflow them too; 64 exactly still fit."""
    monkeypatch.setattr(launchers, "ONELAUNCH_CAP", 64)
    _check(_equal_among_masked(65, seed=1), what="65 > CAP")
    _check(_equal_among_masked(64, seed=2), what="64 = CAP")
    _check(_gaussian(1, 1024, 7), what="Gaussian past CAP")


def test_calls_leave_the_buckets_and_counters_as_they_found_them() -> None:
    """The same call twice, other calls between (T0 only, another size, the shipped selectors): the same bits."""
    x = _gaussian(2, 600, 9)
    for _ in range(2):
        _check(x, launches=(ONE,), what="repeat")
        _check(_gaussian(3, 200, 2), 0.0, launches=(ONE, LaunchConfig(segment=32)), what="T0 between")
        _check(_gaussian(1, 1024, 3), 2.0, launches=(dataclasses.replace(ONE, segment=128),), what="other size")


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA-graph capture and replay need a CUDA GPU")
@pytest.mark.parametrize("launch", (*BOTH, LaunchConfig(selector="onelaunch")), ids=("one64", "rows64", "one"))
def test_cuda_graph_replays_match_the_reference(launch: LaunchConfig) -> None:
    """Three positions captured in one CUDA graph (the same buffers, buckets and counters for each launch), replayed
    with new logits four times: every position of every replay equals the reference (so each launch leaves them as
    it found them); the batch holds a NaN row, an all-equal row (the fallback) and a T0 row."""
    b, v, depth = 6, 20000, 3
    xs = [torch.zeros((b, v), device=DEVICE) for _ in range(depth)]
    temp = torch.tensor([1.0, 1.0, 0.0, 2.0, 1.0, 0.5], device=DEVICE)
    seed = torch.arange(b, device=DEVICE, dtype=torch.int64)

    def step() -> list[Any]:
        return [propose(x, temp, seed, 3, d, launch=launch) for d, x in enumerate(xs)]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = step()
    for replay in range(4):
        host = [_gaussian(b, v, 100 * replay + d) for d in range(depth)]
        for x in host:
            x[0, v // 2] = np.nan
            x[1] = 1.5
        for x, h in zip(xs, host, strict=True):
            x.copy_(torch.from_numpy(h))
        graph.replay()
        torch.cuda.synchronize()
        for d, (h, got) in enumerate(zip(host, outs, strict=True)):
            want = ref.propose(h, temp.cpu().numpy(), seed.cpu().numpy().view(np.uint64), 3, d)
            for f in FIELDS:
                assert_equal(getattr(got, f).cpu().numpy(), getattr(want, f), f"replay {replay} position {d} {f}")


# ------------------------------------------------------------------------------------------------ planted bugs


def _interpreter_only() -> None:
    """A planted jit helper takes effect in the interpreter; a GPU keeps the binary it compiled."""
    if DEVICE != "cpu":
        pytest.skip("a planted jit helper takes effect in the interpreter")


_BOUND = _select._bound_of


@triton.jit
def _bound_one_too_tight(values: tl.tensor, t0: tl.tensor, K: tl.constexpr) -> tl.tensor:
    """A planted bug: every bound from the buckets one above the K-th largest."""
    return _BOUND(values, t0, K) + 1


def _descending_spikes() -> np.ndarray[Any, Any]:
    """One row of 32 segments (steps) of 64 entries, for 32 buckets: segment s holds 73 - s at its entry 2 s, every
    other entry is -1. Segment s publishes its spike (one maximum per segment of 64) to bucket s; the row selector's
    bucket s (group s of a step: entries 2 s, 2 s + 1) takes it too. So the program of segment 31 (the 32nd entry,
    42), which the interpreter runs after segments 0 .. 30, sees the buckets 73 .. 42: its bound is exactly 42."""
    x = np.full((1, 32 * 64), -1.0, np.float32)
    x[0, np.arange(32) * 66] = 73.0 - np.arange(32)
    return x


def _own_bound_row() -> np.ndarray[Any, Any]:
    """32 equal entries in one segment of 64, one in each of its groups, are the row's entries 2 .. 33; the row's
    maximum sits alone in another segment."""
    x = np.full((1, 2048), -5.0, np.float32)
    x[0, 512:576:2] = 1.0
    x[0, 100] = 3.0
    return x


def _scan_row() -> np.ndarray[Any, Any]:
    """Equal entries but three larger ones: every entry survives, the fallback scan, whose bound is the equal
    entries' value (32 buckets, every one filled by 32 segments)."""
    x = np.full((1, 2048), 2.0, np.float32)
    x[0, [100, 1000, 2000]] = 3.0
    return x


def _steps_row() -> np.ndarray[Any, Any]:
    """65 equal survivors (more than the one batched load of 64) among -inf, the last of them raised to 9.0: the
    interpreter appends it last."""
    x = _equal_among_masked(65, v=2048, seed=3)
    x[0, np.flatnonzero(np.isfinite(x[0]))[-1]] = 9.0
    return x


def test_the_planted_bugs_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows the planted bugs below fail on, without a bug, with the 32 buckets they use."""
    monkeypatch.setattr(launchers, "ONELAUNCH_BUCKETS", 32)
    rows = [_descending_spikes(), _own_bound_row(), _scan_row(), _steps_row()]
    _check(np.concatenate(rows), what="planted bugs' rows")


def test_a_bound_one_too_tight_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The programs that hold the row's 32nd entry see a bound equal to it: one too tight drops it."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_bound_of", _bound_one_too_tight)
    monkeypatch.setattr(launchers, "ONELAUNCH_BUCKETS", 32)
    for launch in BOTH:
        with pytest.raises(AssertionError):
            _check(_descending_spikes(), launches=(launch,), what="too tight")


_GROUPS = _select._group_okeys


@triton.jit
def _groups_one_too_high(x: tl.tensor, G: tl.constexpr) -> tl.tensor:
    """A planted bug: every group maximum one above its value (a segment's own bound, and what it publishes)."""
    return tl.minimum(_GROUPS(x, G), 0xFFFFFFFE) + 1


def test_a_segment_bound_one_too_tight_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 32 equal entries of ``_own_bound_row`` reach their segment's own bound exactly: one too high drops them
    (the row's maximum stays)."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_group_okeys", _groups_one_too_high)
    monkeypatch.setattr(launchers, "ONELAUNCH_BUCKETS", 32)
    with pytest.raises(AssertionError):
        _check(_own_bound_row(), launches=(ONE,), what="own bound too tight")


_CHUNKS = _select._chunks_top_k


@triton.jit
def _chunks_one_short(surv: tl.tensor, count: tl.tensor, CHUNK: tl.constexpr, K: tl.constexpr) -> tl.tensor:
    """A planted bug: the steps over the survivors stop one short of the last."""
    return _CHUNKS(surv, count - 1, CHUNK, K)


def test_steps_one_short_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_steps_row``: steps that stop one survivor short miss the row's maximum, appended last."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_chunks_top_k", _chunks_one_short)
    with pytest.raises(AssertionError):
        _check(_steps_row(), what="steps one short")


_SCAN = _select._scan_chunks_top_k


@triton.jit
def _scan_one_too_tight(row_ptr: tl.tensor, v: tl.tensor, bound: tl.tensor, KIND: tl.constexpr,
                        CHUNK: tl.constexpr, K: tl.constexpr) -> tl.tensor:
    """A planted bug: the fallback scan filters one above its bound."""
    return _SCAN(row_ptr, v, bound + 1, KIND, CHUNK, K)


def test_a_fallback_scan_one_too_tight_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_scan_row`` takes the scan; one too tight drops its equal entries (the three larger ones stay)."""
    _interpreter_only()
    monkeypatch.setattr(_select, "_scan_chunks_top_k", _scan_one_too_tight)
    monkeypatch.setattr(launchers, "ONELAUNCH_BUCKETS", 32)
    for launch in BOTH:
        with pytest.raises(AssertionError):
            _check(_scan_row(), launches=(launch,), what="scan too tight")
