"""``pp3.audit.fast_accept`` (the bulk audit's verifier) gives the bits of the plain reference ``pp3.reference.accept``
(SPEC.md §11), by equality, path by path: §6's exponential by NumPy's fp64 exp and a rounding test (on a sweep of
the domain and its hardest inputs; an exp that errs by more than the margin is caught), §3's classes from one
maximum per row (fp32) or from the bits (fp16), fp16 and bf16 rows (§11.4 P2-P3), rows in blocks (P1-P6), §11.4
evaluated only for the target rows that reach an output, and the residual at the draft's slots (§11.7); V from 1 to
163840, forced edge uniforms and random cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pp3.audit import fast_accept
from pp3.reference import (
    DOMAIN_ACCEPT,
    Q_SHIFT,
    accept,
    bf16_bits_to_float32,
    exponential,
    float32_to_bf16_bits,
    philox,
)
from pp3.testing.compare import assert_equal, assert_same_verdict
from pp3.testing.drafts import drafts, point_drafts
from pp3.testing.golden import load_expf_wc

F32 = npt.NDArray[np.float32]
U64 = npt.NDArray[np.uint64]
TEMPS = [1.0, 0.3, 2.0, 1e-30, 1e30, 1e-45, np.inf]


def _narrow(x: F32, fmt: str) -> F32:
    """fp32 values as the nearest fp16 values, or truncated to bf16, widened back to fp32 (exact, §2.1)."""
    if fmt == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    if fmt == "bf16":
        return bf16_bits_to_float32(float32_to_bf16_bits(x))
    return x


def _narrow_row(fmt: str, v: int, seed: int) -> F32:
    """A row of fp16 or bf16 values widened to fp32: normal logits, -inf, +-0.0, the format's extremes."""
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=4.0, size=v).astype(np.float32)
    x[rng.integers(0, v, size=v // 8)] = -np.inf
    x[rng.integers(0, v, size=min(v, 32))] = np.float32(-0.0)
    x[rng.integers(0, v, size=min(v, 32))] = np.float32(0.0)
    if fmt == "fp16" and v >= 8:
        x[:4] = [6e-8, -6e-8, -65504.0, 1e-5]  # fp16 subnormals and its largest magnitude
    if fmt == "bf16" and v >= 8:
        x[:4] = [1e-40, -3e38, -1e-38, 3e38]  # an fp32 subnormal, differences that overflow to -inf
    return _narrow(x, fmt)


# ----------------------------------------------------------------------------------------------------- §11.4


def _sweep(count: int) -> F32:
    """~``count`` evenly spaced fp32 z of [-104, -0.0] (bit patterns 0x80000000 .. 0xC2D00000), the hardest inputs
    of §6 (``expf.wc``), and -inf, +0.0 and a few z < -104."""
    step = (0xC2D00000 - 0x80000000) // count
    bits = np.arange(0x80000000, 0xC2D00001, step, dtype=np.uint64).astype(np.uint32)
    hard, _ = load_expf_wc()
    edges = np.array([0xFF800000, 0x00000000, 0xC2D00000, 0xC2D00001, 0xC3480000, 0xFF7FFFFF], dtype=np.uint32)
    return np.concatenate([bits.view(np.float32), hard, edges.view(np.float32)])


def test_expf_equals_the_reference_on_a_sweep_and_the_hardest_inputs() -> None:
    z = _sweep(1 << 20)
    assert_equal(fast_accept.expf(z).view(np.uint32), exponential.expf(z).view(np.uint32), "expf, sweep")


@pytest.mark.parametrize(("margin", "caught"), [(fast_accept.EXP_MARGIN, True), (np.float64(2.0**-29), False)])
def test_an_exp_that_errs_by_more_than_the_margin_is_caught(
    margin: np.float64, caught: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted fp64 exp off by 2^-30 relative: with the margin (2^-40) the rounding test decides values it gets
    wrong, and the sweep sees them; with a margin above its error (2^-29) every decided value is still §6's."""
    exp = np.exp
    monkeypatch.setattr(np, "exp", lambda x: exp(x) * np.float64(1.0 + 2.0**-30))
    z = _sweep(1 << 18)
    differ = int((fast_accept.expf(z, margin).view(np.uint32) != exponential.expf(z).view(np.uint32)).sum())
    assert (differ > 100) if caught else (differ == 0), differ


def test_target_class_equals_the_reference() -> None:
    """Every class and §3's precedence (NaN over +inf over zero mass), NaNs of either sign and any payload, -0.0, in
    fp32 and fp16 rows."""
    rows = {
        "finite": [1.0, -2.0, 0.0, -0.0], "nan": [1.0, np.nan, -np.inf, np.inf], "neg_nan": [-np.inf, 0.0, 0.0, 0.0],
        "inf": [np.inf, -np.inf, 3.0, -0.0], "zero_mass": [-np.inf] * 4,
        "one_finite": [-np.inf, -np.inf, -7.0, -np.inf], "nan_only": [np.nan] * 4, "inf_only": [np.inf] * 4,
    }
    x = np.array(list(rows.values()), dtype=np.float32)
    x.view(np.uint32)[2, 1] = 0xFFC00001  # a negative NaN with a payload (fp16: 0xFE00)
    want = accept.target_class(x)
    assert set(want.tolist()) == {0, 1, 2, 3}
    assert_equal(fast_accept.target_class(x), want, "classes, fp32")
    x16 = x.astype(np.float16)
    x16.view(np.uint16)[0, 3] = 0x7C01  # a signalling-NaN pattern in the finite row: it is NaN now
    assert_equal(fast_accept.target_class(x16), accept.target_class(x16.astype(np.float32)), "classes, fp16")
    assert fast_accept.target_class(x16)[0] == 1
    b16 = float32_to_bf16_bits(x)  # bf16 as its bit patterns (verify(..., bf16_bits=True))
    b16[0, 3] = 0x7F81  # a NaN pattern in the finite row
    assert_equal(fast_accept.target_class(b16), accept.target_class(bf16_bits_to_float32(b16)), "classes, bf16")
    assert fast_accept.target_class(b16)[0] == 1


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("t", TEMPS)
def test_the_weights_of_narrow_rows_are_the_reference_weights(fmt: str, t: float) -> None:
    x = _narrow_row(fmt, 1 << 15, 7)
    g = accept.argmax(x[None])
    m = x[g]
    temp = np.array([t], dtype=np.float32)
    got = fast_accept._weights(x, m[0], temp[0])
    assert_equal(got.view(np.uint32), accept.weights(x[None], m, temp)[0].view(np.uint32), f"{fmt} e, T = {t}")


def test_the_entrywise_weights_are_the_reference_weights() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(scale=30.0, size=(len(TEMPS), 1000)).astype(np.float32)
    fmax = float(np.finfo(np.float32).max)
    x[:, :4] = np.array([fmax, -fmax, -np.inf, 1e-45], dtype=np.float32)  # d = -inf two ways; a subnormal
    g = accept.argmax(x)
    m = x[np.arange(x.shape[0]), g]
    temp = np.array(TEMPS, dtype=np.float32)
    got = fast_accept._weights(x, m[:, None], temp[:, None])
    assert_equal(got.view(np.uint32), accept.weights(x, m, temp).view(np.uint32), "e, one temperature per row")


@pytest.mark.parametrize(
    ("v", "rows"),
    [
        (1, 1 + (1 << 15)),  # V = 1: 2^15 rows per block, so two blocks
        (2, 5),
        (37, 1025),  # 512 rows per block (padded to 64): a ragged third block
        (4097, 9),  # padded to 8192: 4 rows per block, three blocks
        (1 << 15, 3),  # the largest rows taken together: one row per block
        ((1 << 15) + 1, 2),  # one row at a time: a full block and a block of one entry, padded to 2^16
        (100003, 2),  # four blocks, the last ragged, padded to 2^17
        (163840, 4),  # the production vocabulary: five blocks, padded to 2^18 (three blocks of +0.0)
    ],
)
def test_tickets_in_blocks_are_the_reference_tickets(v: int, rows: int) -> None:
    rng = np.random.default_rng(v)
    x = rng.normal(scale=3.0, size=(rows, v)).astype(np.float32)
    x[rng.random((rows, v)) < 0.1] = -np.inf
    x[np.arange(rows), rng.integers(0, v, size=rows)] = np.float32(5e3)  # a finite entry in every row
    for fmt, sl in (("fp16", slice(1, None, 3)), ("bf16", slice(2, None, 3))):  # rows of all three formats
        x[sl] = _narrow(x[sl], fmt)
    temp = np.array([TEMPS[i % len(TEMPS)] for i in range(rows)], dtype=np.float32)
    g, p = accept.target_tickets(x, temp)
    fast_g, fast_p = fast_accept.target_tickets(x, temp)
    assert_equal(fast_g, g, f"g, V = {v}")
    assert_equal(fast_p, p, f"P, V = {v}")


# ----------------------------------------------------------------------------------------------------- §11.3-8


def _case(v: int, fmt: str, seed: int, d: int = 3) -> dict[str, Any]:
    """A call of every kind of row: T0 (+-0.0), sampled (+inf included), bad temperatures, a truncation with garbage
    after it, an invalid draft, bad target rows below and above n, masked entries, a flat row; drafts proposed from
    logits near the target's (each target row has a spike, so that drafts are accepted too)."""
    rng = np.random.default_rng([v, seed])
    b = 12
    x = rng.normal(scale=2.0, size=(b, d + 1, v)).astype(np.float32)
    x[np.arange(b)[:, None], np.arange(d + 1), rng.integers(0, v, size=(b, d + 1))] += np.float32(min(12.0, v))
    x[0, :, rng.integers(0, v, size=v // 4)] = -np.inf
    x[1, 1] = x[1, 1, 0]  # a flat row: ties everywhere
    x = _narrow(x, fmt)
    temp = np.array([1.0, 0.7, 0.0, -0.0, np.inf, 2.0, 1e-30, 1.0, np.nan, -1.0, 0.5, 1.0], dtype=np.float32)
    noise = rng.normal(scale=0.5, size=(b, d, v)).astype(np.float32)
    seed64 = rng.integers(0, 1 << 64, size=b, dtype=np.uint64)
    pos = rng.integers(0, 1 << 64, size=b, dtype=np.uint64)
    pos[5] = np.uint64((1 << 64) - 2)  # positions wrap mod 2^64
    draft = drafts(x[:, :d] + noise, temp, seed64, 9, pos)
    n7 = min(1, d - 1)  # row 7: n = 1 (0 at D = 1), drafts n .. D-1 and target rows n+1 .. D are ignored
    draft["draft_status"][7, n7] = 3
    draft["draft_tokens"][7, n7:] = v + 5
    x[7, n7 + 1 :, 0] = np.nan
    draft["draft_tickets"][10, 0, 0] += 1  # an invalid draft: BAD_DRAFT
    x[11, d, 0] = np.inf  # the bonus row is bad: POS_INF_LOGIT
    return {"target_logits": x, "target_temperature": temp, **draft, "seed": seed64, "round": 9, "position": pos}


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("v", [1, 2, 33, 4097, 1 << 15, 163840])
def test_verify_equals_the_reference(v: int, fmt: str) -> None:
    case = _case(v, fmt, 0)
    want = accept.verify(**case)
    assert_same_verdict(fast_accept.verify(**case), want, f"fast vs reference, V = {v}, {fmt}")
    if fmt != "fp32":  # the 16-bit rows as the bulk run's workers pass them, widened only where they are read
        x16 = case["target_logits"].astype(np.float16) if fmt == "fp16" else float32_to_bf16_bits(case["target_logits"])
        got = fast_accept.verify(**{**case, "target_logits": x16}, bf16_bits=fmt == "bf16")
        assert_same_verdict(got, want, f"fast vs reference, V = {v}, {fmt} rows unwidened")
    if v >= 33:  # every status and both kinds of OK row occur
        assert {0, 2, 4, 5} <= set(want.status.tolist()) and (want.accepted > 0).any(), want.status


def test_bf16_bits_must_be_uint16() -> None:
    case = _case(40, "bf16", 0)
    with pytest.raises(TypeError, match="target_logits: expected a uint16 array of bf16 bit patterns"):
        fast_accept.verify(**case, bf16_bits=True)  # fp32 values where bit patterns are meant
    with pytest.raises(TypeError, match="target_logits: expected float32 or float16"):
        fast_accept.verify(**{**case, "target_logits": float32_to_bf16_bits(case["target_logits"])})


@pytest.mark.parametrize("seed", range(6))
def test_verify_equals_the_reference_on_random_cases(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v = int(rng.choice([1, 3, 40, 257, 5000]))
    case = _case(v, ("fp32", "fp16", "bf16")[seed % 3], 100 + seed, d=int(rng.integers(1, 6)))
    assert_same_verdict(fast_accept.verify(**case), accept.verify(**case), f"fast vs reference, V = {v}")


def _forced(mode: str, p_of: dict[tuple[int, int], int]) -> Callable[..., U64]:
    """A ``philox.uniform_below`` that returns an edge of each draw's range instead of a random value: 0 or s - 1
    (``lo`` / ``hi``), or for the acceptance tests U_j = P_j(x_j) - 1 (accept) or P_j(x_j) (reject: U_j < P_j(x_j) is
    strict), clipped to 0 .. s - 1; ``p_of`` maps (seed, position + j) to P_j(x_j)."""

    def uniform_below(seed: U64, rnd: U64, pos: U64, domain: int, s: U64) -> U64:
        s = np.asarray(s, dtype=np.uint64)
        if mode == "lo":
            return np.zeros(s.shape, dtype=np.uint64)
        if mode == "hi" or domain != DOMAIN_ACCEPT:
            return s - np.uint64(1)
        p = np.array([p_of[(int(a), int(c))] for a, c in zip(seed, pos, strict=True)], dtype=np.int64)
        u = p - 1 if mode == "p_minus_1" else p
        return np.clip(u, 0, s.astype(np.int64) - 1).astype(np.uint64)

    return uniform_below


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
@pytest.mark.parametrize("mode", ["lo", "hi", "p_minus_1", "p"])
def test_verify_equals_the_reference_with_forced_edge_uniforms(
    mode: str, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both modules draw through ``philox.uniform_below``: replaced by edge values, the acceptance comparison and the
    residual draw are taken at their boundaries (U = P_j(x_j) rejects, P_j(x_j) - 1 accepts; U = 0 is the first token
    with r > 0, U = Σr - 1 the last)."""
    v, d = 300, 4
    case = _case(v, fmt, 7, d=d)
    x, t = case["target_logits"], case["target_temperature"]
    p_of: dict[tuple[int, int], int] = {}  # P_j(x_j) of every target row j < D that is OK, of rows with T > 0
    for r, j in zip(*np.nonzero((t[:, None] > 0) & (accept.target_class(x[:, :d]) == 0)), strict=True):
        _, p = accept.target_tickets(x[r, j][None], t[r : r + 1])
        tok = int(case["draft_tokens"][r, j])
        with np.errstate(over="ignore"):  # position + j mod 2^64
            key = (int(case["seed"][r]), int(case["position"][r] + np.uint64(j)))
        p_of[key] = int(p[0, tok]) if 0 <= tok < v else 0
    monkeypatch.setattr(philox, "uniform_below", _forced(mode, p_of))
    want = accept.verify(**case)
    assert_same_verdict(fast_accept.verify(**case), want, f"fast vs reference, forced {mode}")
    ok_sampled = (want.status == 0) & (t > 0)
    if mode in ("p_minus_1", "lo"):  # every test of a drafted token the target allows passes
        assert (want.accepted[ok_sampled] > 0).any()
    if mode == "p":
        s = (case["draft_tickets"][:, 0] * (case["draft_ids"][:, 0] == case["draft_tokens"][:, :1])).sum(axis=1)
        p0 = np.array([p_of.get((int(case["seed"][r]), int(case["position"][r])), 0) for r in range(12)])
        below = ok_sampled & (p0 < (s.astype(np.int64) << Q_SHIFT))  # U_0 = P_0(x_0) < s_0: rejected
        assert below.any() and (want.accepted[below] == 0).all()


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
def test_rows_after_the_token_row_do_not_change_either_verdict(fmt: str) -> None:
    """Target rows after the token row a (the fast path never reads them; the reference reads every row j <= n) do
    not change the verdict: other OK values there give the same bits in both."""
    rng = np.random.default_rng(11)
    b, d, v = 4, 5, 1 << 15
    x = rng.normal(scale=2.0, size=(b, d + 1, v)).astype(np.float32)
    x[np.arange(b)[:, None], np.arange(d + 1), rng.integers(0, v, size=(b, d + 1))] = np.float32(12.0)
    x = _narrow(x, fmt)
    seed = rng.integers(0, 1 << 63, size=b, dtype=np.uint64)
    pos = rng.integers(0, 1 << 40, size=b, dtype=np.uint64)
    temp = np.array([1.0, 0.0, 0.7, 1.0], dtype=np.float32)
    draft = drafts((x[:, :d] + rng.normal(scale=0.5, size=(b, d, v))).astype(np.float32), temp, seed, 2, pos)
    first = accept.verify(x, temp, **draft, seed=seed, round=2, position=pos)
    assert (first.status == 0).all() and (first.accepted < d).any()
    y = x.copy()
    for i in range(b):  # rows after the token row a: other OK values
        y[i, first.accepted[i] + 1 :] = _narrow(rng.normal(scale=2.0, size=(d - first.accepted[i], v)).astype(
            np.float32), fmt)
    for name, f in (("reference", accept.verify), ("fast", fast_accept.verify)):
        assert_same_verdict(f(y, temp, **draft, seed=seed, round=2, position=pos), first, f"{name}, other rows > a")


def test_point_mass_drafts_on_the_argmax_equal_the_reference() -> None:
    """x_j = g_j with q_j the point mass (s_j = 2^40): the tests the fast path's §11.4 shortcut decides from P_j(g_j),
    with the remainder R; flat rows make R large."""
    rng = np.random.default_rng(5)
    b, d, v = 16, 4, 4097
    x = rng.normal(scale=1.0, size=(b, d + 1, v)).astype(np.float32)
    top = rng.integers(0, v, size=(b, d + 1, 2))
    x[np.arange(b)[:, None], np.arange(d + 1), top[..., 0]] = np.float32(11.0)  # p(g) near 1 ...
    x[::2, :, :][np.arange(b // 2)[:, None], np.arange(d + 1), top[::2, :, 1]] = np.float32(11.0)  # ... tied at g
    x[1::4, 1] = 0.0  # flat rows: R = 2^40 - V floor(2^40 / V) on g = 0
    g = accept.argmax(x.reshape(-1, v)).reshape(b, d + 1)
    case: dict[str, Any] = {"target_logits": x, "target_temperature": np.float32(1.0), **point_drafts(g[:, :d]),
            "seed": np.arange(b, dtype=np.uint64), "round": 0, "position": 0}
    want = accept.verify(**case)
    assert_same_verdict(fast_accept.verify(**case), want, "fast vs reference, argmax drafts")
    assert (want.accepted < d).any() and (want.accepted > 0).any()
