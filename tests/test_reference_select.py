"""One test per SPEC.md clause for pp3.reference.propose (§2-§9), a cross-check against an independent reading of the
SPEC (tests/oracles/select.py) on random rows, and proof that the clause tests catch the planted bugs of their
clauses (pp3.testing.mutants)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pp3.reference import DEFAULT_TAU, TICKETS, K, Proposal, Status, bf16_bits_to_float32, propose
from pp3.reference import philox as philox_mod
from pp3.reference.tickets import floor_counts
from pp3.reference.widen import float32_to_bf16_bits
from pp3.testing import mutants
from pp3.testing.compare import assert_equal, first_lines
from tests.oracles import select as spec_oracle
from tests.oracles.expf import cr_expf

F32 = np.float32
FMAX = float(np.finfo(np.float32).max)
INF, NAN = float("inf"), float("nan")
U64 = (1 << 64) - 1
EXTREMES = [0, 1 << 63, U64]


def run(
    logits: Any,
    temp: Any = 1.0,
    seed: Any = 7,
    rnd: Any = 3,
    pos: Any = 11,
    tau: float = DEFAULT_TAU,
    dtype: Any = np.float32,
) -> Proposal:
    x = np.asarray(logits, dtype=dtype)
    if x.ndim == 1:
        x = x[None, :]
    b = x.shape[0]
    t = np.broadcast_to(np.asarray(temp, dtype=np.float32), (b,)).copy()
    s, r, p = (np.broadcast_to(np.asarray(v, dtype=np.uint64), (b,)).copy() for v in (seed, rnd, pos))
    return propose(x, t, s, r, p, tau=tau)


@dataclass(frozen=True)
class Out:
    status: int
    token: int
    ids: list[int]
    tickets: list[int]


def out(p: Proposal, r: int = 0) -> Out:
    return Out(int(p.status[r]), int(p.token[r]), [int(i) for i in p.ids[r]], [int(t) for t in p.tickets[r]])


def members(o: Out) -> list[int]:
    return [i for i in o.ids if i >= 0]


def assert_same_proposal(got: Proposal, want: Proposal, what: str) -> None:
    for field in ("status", "token", "ids", "tickets"):
        assert_equal(getattr(got, field), getattr(want, field), f"{what}: {field}")


def u_of(seed: int, rnd: int, pos: int) -> int:
    return spec_oracle.philox_word0(seed, rnd, pos) >> 40  # numpy's Philox, not pp3's


def failed_row(status: Status) -> Out:
    return Out(int(status), -1, [-1] * K, [0] * K)


def point_mass(g: int) -> Out:
    return Out(0, g, [g] + [-1] * (K - 1), [TICKETS] + [0] * (K - 1))


# --- §4.1 order: ties and signed zeros -----------------------------------------------------------------------------

@pytest.mark.parametrize(
    "row,g",
    [
        ([1.0, 3.0, 3.0, 2.0], 1),  # tie at the max: lower ID
        ([3.0, 1.0, 3.0], 0),
        ([-5.0, -2.0, -7.0, -2.0, -2.0], 1),
        ([-0.0, 0.0], 0),  # -0.0 == +0.0: lower ID, whatever the sign bit
        ([0.0, -0.0], 0),
        ([-1.0, -0.0, 0.0, -0.0], 1),
        ([-INF, -0.0, -INF, 0.0], 1),
    ],
)
def test_t0_argmax_ties_go_to_lower_id(row: list[float], g: int) -> None:
    assert out(run(row, temp=0.0)) == point_mass(g)


def _tie_at_32nd_place(a_id: int, a_val: float, b_id: int, b_val: float, v: int = 48) -> npt.NDArray[np.float32]:
    """31 entries clearly above, two tied entries for rank 31 (the 32nd place), the rest clearly below."""
    x = np.full(v, -50.0, dtype=np.float32)
    top = [i for i in range(v - 1, -1, -1) if i not in (a_id, b_id)][:31]  # high IDs on top, so ID order != rank
    x[top] = [10.0 - i / 6.0 for i in range(31)]  # 10 down to 5, distinct
    x[a_id], x[b_id] = a_val, b_val
    return x


@pytest.mark.parametrize(
    "lo,lo_val,hi,hi_val",
    [
        (3, 0.5, 9, 0.5),  # equal values: the lower ID takes the last slot
        (2, -0.0, 4, 0.0),  # -0.0 at the lower ID ties +0.0: the lower ID wins, not the larger bit pattern
        (2, 0.0, 4, -0.0),
    ],
)
def test_support_tie_at_32nd_place_goes_to_lower_id(lo: int, lo_val: float, hi: int, hi_val: float) -> None:
    o = out(run(_tie_at_32nd_place(lo, lo_val, hi, hi_val)))
    assert o.status == 0 and len(members(o)) == K
    assert lo in o.ids and hi not in o.ids, f"ids {o.ids}: want {lo} in, {hi} out"


def test_signed_zeros_get_equal_tickets() -> None:
    o = out(run([-0.0, 0.0, -0.0], tau=1.0))
    assert o.ids[:3] == [0, 1, 2]
    assert sorted(o.tickets[:3]) == [5592405, 5592405, 5592406] and o.tickets[0] == 5592406  # rank 0 = ID 0


# --- §3 classification -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "row,temp,status",
    [
        ([0.0, NAN, INF, 1.0], 1.0, Status.NAN_LOGIT),  # NaN beats +inf
        ([INF, NAN], 1.0, Status.NAN_LOGIT),
        ([INF, -INF, -INF], 1.0, Status.POS_INF_LOGIT),  # +inf and all others -inf: +inf beats zero mass
        ([1.0, INF, 2.0], 0.0, Status.POS_INF_LOGIT),  # also for a T0 row
        ([-INF, -INF, -INF], 1.0, Status.ZERO_MASS),
        ([-INF], 0.0, Status.ZERO_MASS),
        ([-INF, -INF], NAN, Status.ZERO_MASS),  # zero mass beats a bad temperature
        ([1.0, 2.0], NAN, Status.BAD_TEMPERATURE),
        ([1.0, 2.0], -1.0, Status.BAD_TEMPERATURE),
        ([1.0, 2.0], -INF, Status.BAD_TEMPERATURE),
        ([1.0, 2.0], -1e-45, Status.BAD_TEMPERATURE),  # the smallest negative fp32 is < 0
        ([1.0, NAN], NAN, Status.NAN_LOGIT),  # a NaN logit row with a bad temperature is NAN_LOGIT
        ([1.0, NAN], -1.0, Status.NAN_LOGIT),
        ([INF, 1.0], -INF, Status.POS_INF_LOGIT),
        ([1.0, 2.0], INF, Status.OK),  # +inf temperature: sampled
        ([1.0, 2.0], -0.0, Status.OK),  # -0.0 temperature: greedy
    ],
)
def test_status_precedence(row: list[float], temp: float, status: Status) -> None:
    o = out(run(row, temp=temp))
    assert o.status == status, f"row {row} temp {temp}: status {Status(o.status).name}, want {status.name}"
    if status != Status.OK:
        assert o == failed_row(status)


NAN_PATTERNS = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF]  # quiet, negative, signalling, payloads


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("nan_bits", NAN_PATTERNS, ids=[f"{b:08x}" for b in NAN_PATTERNS])
def test_nan_anywhere_fails_the_row(where: str, nan_bits: int) -> None:
    x = np.random.default_rng(0).normal(size=1000).astype(np.float32)
    x[{"first": 0, "middle": 517, "last": 999}[where]] = np.array([nan_bits], dtype=np.uint32).view(np.float32)[0]
    for temp in (1.0, 0.0):
        assert out(run(x, temp=temp)) == failed_row(Status.NAN_LOGIT)


@pytest.mark.parametrize("where", [0, 517, 999])
def test_pos_inf_anywhere_fails_the_row(where: int) -> None:
    x = np.random.default_rng(1).normal(size=1000).astype(np.float32)
    x[where] = INF
    assert out(run(x)) == failed_row(Status.POS_INF_LOGIT)


def test_failed_rows_do_not_change_other_rows() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(0, 3, size=(8, 300)).astype(np.float32)
    temp = np.array([1.0, 0.7, 0.0, 1.0, 2.0, -0.0, 1.0, 0.5], dtype=np.float32)
    bad = x.copy()
    bad[1, 5] = NAN
    bad[3, :] = -INF
    bad[6, 9] = INF
    temp_bad = temp.copy()
    temp_bad[4] = NAN
    seed = rng.integers(0, U64, 8, dtype=np.uint64, endpoint=True)
    rnd, pos = np.arange(8, dtype=np.uint64), np.arange(8, dtype=np.uint64) * np.uint64(1000)
    got = propose(bad, temp_bad, seed, rnd, pos)
    for r in range(8):
        alone = propose(bad[r : r + 1], temp_bad[r : r + 1], seed[r : r + 1], rnd[r : r + 1], pos[r : r + 1])
        assert out(got, r) == out(alone), f"row {r} differs inside the batch"
    healthy = propose(x, temp, seed, rnd, pos)
    for r in (0, 2, 5, 7):
        assert out(got, r) == out(healthy, r), f"row {r} changed because other rows failed"
    assert [int(s) for s in got.status] == [0, 1, 0, 3, 4, 0, 2, 0]


# --- §4.2 / §7 greedy rows ---------------------------------------------------------------------------------------

class RngRecorder:
    """Stands in for philox.proposal_uniform and philox.block, recording the rows each is asked for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, list[int]]] = []
        real_uniform, real_block = philox_mod.proposal_uniform, philox_mod.block

        def uniform(seed: Any, round_: Any, position: Any) -> Any:
            self.calls.append(("proposal_uniform", [int(s) for s in seed]))
            return real_uniform(seed, round_, position)

        def block(seed: Any, round_: Any, position: Any, domain: int) -> Any:
            self.calls.append(("block", [int(s) for s in seed]))
            return real_block(seed, round_, position, domain)

        monkeypatch.setattr(philox_mod, "proposal_uniform", uniform)
        monkeypatch.setattr(philox_mod, "block", block)


def test_t0_rows_draw_no_random_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = RngRecorder(monkeypatch)
    x = np.random.default_rng(3).normal(size=(4, 100)).astype(np.float32)
    p = run(x, temp=[0.0, -0.0, 0.0, -0.0], seed=[1, 2, 3, 4])
    assert rec.calls == [], f"T0 rows reached the generator: {rec.calls}"
    assert all(out(p, r) == point_mass(int(np.argmax(x[r]))) for r in range(4))


def test_only_sampled_rows_draw_random_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = RngRecorder(monkeypatch)
    x = np.random.default_rng(4).normal(size=(6, 50)).astype(np.float32)
    x[4, 3] = NAN
    seeds = [10, 11, 12, 13, 14, 15]
    run(x, temp=[0.0, 1.0, -0.0, 0.5, 1.0, NAN], seed=seeds)
    assert rec.calls == [("proposal_uniform", [11, 13]), ("block", [11, 13])], rec.calls


def test_t0_is_independent_of_seed_round_position() -> None:
    x = np.random.default_rng(5).normal(size=(1, 64)).astype(np.float32)
    want = point_mass(int(np.argmax(x[0])))
    for t in (0.0, -0.0):
        for s in EXTREMES:
            for r in EXTREMES:
                for p in EXTREMES:
                    assert out(run(x, temp=t, seed=s, rnd=r, pos=p)) == want, (t, s, r, p)


def test_failed_rows_are_independent_of_seed_round_position() -> None:
    for s in EXTREMES:
        for r in EXTREMES:
            for p in EXTREMES:
                assert out(run([1.0, NAN], seed=s, rnd=r, pos=p)) == failed_row(Status.NAN_LOGIT), (s, r, p)


# --- §4.3 support --------------------------------------------------------------------------------------------------

def test_neg_inf_is_never_in_support_and_gets_no_tickets() -> None:
    rng = np.random.default_rng(6)
    for f in (1, 5, 31, 32, 33, 60):
        x = np.full(100, -INF, dtype=np.float32)
        finite = rng.choice(100, f, replace=False)
        x[finite] = rng.normal(size=f)
        o = out(run(x, tau=1e-3))
        assert o.status == 0
        assert set(members(o)) <= set(finite.tolist()), f"F={f}: -inf IDs in support {members(o)}"
        assert len(members(o)) == min(K, f)
        if f < K:
            assert members(o) == sorted(finite.tolist()), f"F={f} < 32: every finite entry is in the support"
        assert sum(o.tickets) == TICKETS


@pytest.mark.parametrize(
    "v",
    [1, 31, 32, 33, 100],  # 1: single entry; 31/32/33: support n = V, = K, = K with one left out
)
def test_support_size_and_members(v: int) -> None:
    x = np.random.default_rng(v).normal(size=v).astype(np.float32)
    o = out(run(x, tau=1.0))
    n = min(K, v)
    want = sorted(np.argsort(-x, kind="stable")[:n].tolist())
    assert members(o) == want and o.ids[n:] == [-1] * (K - n) and o.tickets[n:] == [0] * (K - n)
    assert sum(o.tickets) == TICKETS


def test_v1_rows() -> None:
    for temp in (1.0, 0.0):
        for val in (0.0, -FMAX, FMAX, 1e-45):
            assert out(run([val], temp=temp)) == point_mass(0)
    assert out(run([-INF])) == failed_row(Status.ZERO_MASS)


# --- §5 weights and tickets ----------------------------------------------------------------------------------------

def _random_ok_rows(n: int, seed: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, 200)) * rng.choice([0.01, 1.0, 5.0, 40.0], size=(n, 1))).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = -INF
    x[:, 0] = rng.normal(size=n)  # keep F >= 1
    temp = rng.choice(np.array([0.0, 0.3, 1.0, 2.0, INF], dtype=np.float32), size=n)
    return x, temp


def test_tickets_sum_to_2_24_and_ids_ascend() -> None:
    x, temp = _random_ok_rows(500, 7)
    for tau in (DEFAULT_TAU, 1e-30, 0.01, 1.0, 100.0, FMAX):
        p = run(x, temp=temp, seed=np.arange(500), tau=tau)
        assert np.all(p.status == 0)
        sums = p.tickets.astype(np.int64).sum(axis=1)
        bad = np.flatnonzero(sums != TICKETS)
        assert bad.size == 0, f"tau={tau}: {bad.size} rows do not sum to 2^24, first {bad[:5]}: {sums[bad[:5]]}"
        for r in range(500):
            o = out(p, r)
            n = len(members(o))
            assert o.ids[:n] == sorted(set(o.ids[:n])) and o.ids[n:] == [-1] * (K - n), f"row {r}: ids {o.ids}"
            assert all(t >= 0 for t in o.tickets) and o.tickets[n:] == [0] * (K - n)


def _by_hand(x: list[float], tau: float) -> tuple[list[int], int, int]:
    """§5 steps 1-6 with Python floats and mpmath's expf: (floor counts in slot order, R, rank-0 slot)."""
    n = len(x)
    ranked = sorted(range(n), key=lambda i: (-x[i], i))
    m = F32(x[ranked[0]])
    w = [cr_expf(float(F32(F32(xi) - m) / F32(tau))) for xi in x] + [0.0] * (K - n)
    s = spec_oracle.pairwise(w)
    c = [int((wj * TICKETS) / s // 1) for wj in w]
    return c, TICKETS - sum(c), ranked[0]


def test_remainder_goes_to_rank0_slot() -> None:
    x = [-1.0, 0.0, -1.0, -2.0, -0.5]  # rank 0 is ID 1 = slot 1: neither the first nor the last slot
    c, r, g = _by_hand(x, 1.0)
    assert r > 0 and g == 1, (c, r)
    o = out(run(x, tau=1.0))
    want = c[:]
    want[1] += r
    assert o.tickets == want, f"tickets {o.tickets}, want floor counts {c} with R={r} on slot 1"


def _left_fold(w: list[float]) -> float:
    s = 0.0
    for v in w:
        s += v
    return s


def _strided8(w: list[float]) -> float:
    """numpy.sum's order for 32 values: 8 strided left-fold accumulators, then a tree over the 8."""
    r = [_left_fold(w[k::8]) for k in range(8)]
    return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))


_SUM_ROWS = {  # h: weight 0.5, o: 1 (rank 0 at the first o), t/u: ~2^-55 / ~2^-53.4, z: 0
    "vs_left_fold": "hoh" + "t" * 29,
    "vs_numpy_sum": "zzhozuzzuthztottuhttuhuzttzutztz",
}


@pytest.mark.parametrize("row", list(_SUM_ROWS))
def test_sum_is_the_pairwise_tree(row: str) -> None:
    """§5 step 4: S is the pairwise tree over 32 slots. In these rows another summation order absorbs each tiny weight
    into the large partial sum and gives S = 2 (or 4), while the tree adds tiny weights together first and gives a
    larger S, which changes the
    floor counts of the 0.5-weight slots."""
    x = [{"h": -0.6931472, "o": 0.0, "t": -38.0, "u": -37.0, "z": -1000.0}[c] for c in _SUM_ROWS[row]]
    w = [cr_expf(float(F32(v))) for v in x]
    base = _left_fold(w)  # 0.5 * (number of h) + (number of o): 2 or 4
    assert base in (2.0, 4.0) and spec_oracle.pairwise(w) > base, "the row no longer separates the summation orders"
    assert row == "vs_left_fold" or _strided8(w) == base
    c, r, g = _by_hand(x, 1.0)
    c[g] += r
    o = out(run(x, tau=1.0))
    assert o.tickets == c, f"tickets {o.tickets}, want {c}"
    h_tickets = {c[i] for i, ch in enumerate(_SUM_ROWS[row]) if ch == "h"}
    assert h_tickets == {int(TICKETS / (2 * base)) - 1}, h_tickets  # S = base would give 2^24 / (2 base) exactly


def test_remainder_bound_0_to_32() -> None:
    """§5.1: 0 <= R <= 32 for any weights, recomputed through floor_counts on 20,000 random weight rows."""
    rng = np.random.default_rng(8)
    rows = 20_000
    n = rng.integers(1, K + 1, rows)
    kind = rng.integers(0, 4, rows)[:, None]
    w = np.where(kind == 0, rng.random((rows, K)),  # uniform
        np.where(kind == 1, 1.0 - rng.random((rows, K)) * 2.0**-20,  # all nearly equal: fractions near 1
        np.where(kind == 2, 1.0 / rng.integers(1, 64, (rows, K)),  # 1/k: repeating fractions
                 np.exp(-rng.random((rows, K)) * 110.0))))  # down to subnormal and zero in fp32
    w = w.astype(np.float32).astype(np.float64)
    w[np.arange(K)[None, :] >= n[:, None]] = 0.0
    w[np.arange(rows), rng.integers(0, n)] = 1.0  # the rank-0 weight
    c = floor_counts(w)
    rem = TICKETS - c.sum(axis=1)
    bad = np.flatnonzero((rem < 0) | (rem > K))
    assert bad.size == 0, f"{bad.size} rows with R outside [0, 32], first R {rem[bad[:5]]}"
    assert int(rem.max()) > 16, "the sample never stresses the bound"
    assert np.all(rem <= n), "R > number of members"


def test_propose_tickets_are_floor_counts_plus_remainder_at_rank0() -> None:
    x, _ = _random_ok_rows(300, 9)
    p = run(x, temp=1.0, tau=0.5)
    for r in range(300):
        o = out(p, r)
        ids = np.array(members(o))
        vals = x[r, ids]
        e = np.array([cr_expf(float(F32(F32(v) - vals.max()) / F32(0.5))) for v in vals])
        w = np.zeros(K)
        w[: ids.size] = e
        c = floor_counts(w[None, :])[0]
        rank0 = int(np.flatnonzero(ids == ids[np.argmax(vals)])[0])  # argmax: first max = lowest ID
        c[rank0] += TICKETS - c.sum()
        assert o.tickets == c.tolist(), f"row {r}: tickets {o.tickets}, want {c.tolist()}"


@pytest.mark.parametrize(
    "x,tau,want_tickets",
    [
        ([0.0, -200.0], 1.0, [TICKETS, 0]),  # e = 0: a zero-weight member keeps its slot
        ([0.0, -100.0], 1.0, [TICKETS, 0]),  # e = 3.7e-44, a binary32 subnormal: weight > 0, 0 tickets
        ([-100.0, 0.0, -150.0], 1.0, [0, TICKETS, 0]),
        ([-FMAX, FMAX], DEFAULT_TAU, [0, TICKETS]),  # d = fl32(-FMAX - FMAX) = -inf: z = -inf, e = 0
        ([FMAX, -FMAX, 0.0], 1.0, [TICKETS, 0, 0]),
    ],
)
def test_zero_ticket_members_keep_their_id(x: list[float], tau: float, want_tickets: list[int]) -> None:
    n = len(x)
    for seed in range(20):
        o = out(run(x, tau=tau, seed=seed))
        assert o.status == 0
        assert o.ids == list(range(n)) + [-1] * (K - n)
        assert o.tickets == want_tickets + [0] * (K - n)
        assert o.token == want_tickets.index(TICKETS), "drew a zero-ticket slot"


def test_tiny_tau_is_one_hot_among_ties() -> None:
    for tau in (1e-45, 1e-30, 1e-10):  # 1e-45 is the smallest fp32 subnormal
        o = out(run([1.0, 1.0, 0.999, -3.0, 1.0], tau=tau))
        third = TICKETS // 3
        assert o.tickets[:5] == [third + 1, third, 0, 0, third], f"tau={tau}: {o.tickets[:5]}"


def test_huge_tau_is_uniform_over_the_support() -> None:
    x = np.random.default_rng(10).uniform(-10, 10, 33).astype(np.float32)
    for tau in (1e30, FMAX):
        o = out(run(x, tau=tau))
        assert o.tickets == [TICKETS // K] * K, f"tau={tau}: {o.tickets}"
        assert int(np.argmin(x)) not in o.ids


# --- §2.1 widening -------------------------------------------------------------------------------------------------

def test_fp16_equals_fp32_of_the_same_values() -> None:
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 1 << 16, size=(64, 100), dtype=np.uint64).astype(np.uint16)
    bits[:40] &= 0x83FF  # 40 rows of fp16 subnormals and zeros
    bits[40:, :] = np.where((bits[40:] & 0x7C00) == 0x7C00, bits[40:] & 0xFBFF, bits[40:])  # finite ...
    bits[60, 3] = 0x7E00  # ... except a NaN row
    bits[61, 7] = 0x7C00  # a +inf row
    bits[62, :] = 0xFC00  # an all -inf row
    x16 = bits.view(np.float16)
    temp = np.where(np.arange(64) % 3 == 0, 0.0, 1.0)
    assert_same_proposal(run(x16, temp=temp, seed=np.arange(64), dtype=np.float16),
                         run(x16.astype(np.float32), temp=temp, seed=np.arange(64)), "fp16 vs fp32")


def _bf16_value(b: int) -> float:
    """The real value of a bf16 bit pattern, decoded from sign/exponent/mantissa (no bit shifting)."""
    sign = -1.0 if b & 0x8000 else 1.0
    e, f = (b >> 7) & 0xFF, b & 0x7F
    if e == 0xFF:
        return sign * INF if f == 0 else NAN
    if e == 0:
        return sign * f * 2.0**-133  # subnormal: f * 2^(1 - 127 - 7)
    return sign * (1 + f / 128) * 2.0 ** (e - 127)


def test_bf16_widening_is_exact_for_every_pattern() -> None:
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    got = bf16_bits_to_float32(bits)
    want = np.array([_bf16_value(int(b)) for b in bits], dtype=np.float64)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    with np.errstate(invalid="ignore"):  # widening a signalling NaN raises the invalid flag
        bad = np.flatnonzero(~nan & (got.astype(np.float64) != want))
    assert bad.size == 0, f"{bad.size} bf16 patterns widen wrongly, first {[hex(b) for b in bad[:5]]}"
    assert_equal(got.view(np.uint32) >> np.uint32(16), bits.astype(np.uint32), "bf16 bits survive")
    assert_equal(float32_to_bf16_bits(got), bits, "float32_to_bf16_bits round trip")


def test_bf16_rows_equal_fp32_rows_of_the_same_values() -> None:
    rng = np.random.default_rng(12)
    bits = rng.integers(0, 1 << 16, size=(32, 80), dtype=np.uint64).astype(np.uint16)
    bits[:16] &= 0x807F  # subnormal bf16 patterns (and zeros)
    bits[16:] = np.where((bits[16:] & 0x7F80) == 0x7F80, bits[16:] & 0xBFFF, bits[16:])
    decoded = np.array([[_bf16_value(int(b)) for b in row] for row in bits], dtype=np.float32)
    assert_same_proposal(run(bf16_bits_to_float32(bits), seed=np.arange(32)), run(decoded, seed=np.arange(32)),
                         "bf16 widened vs fp32")
    assert np.all(run(bf16_bits_to_float32(bits)).status == 0)


# --- §8 the draw ---------------------------------------------------------------------------------------------------

def test_token_is_the_slot_whose_interval_contains_u() -> None:
    x, temp = _random_ok_rows(400, 13)
    temp = np.where(temp == 0, 1.0, temp).astype(np.float32)
    rng = np.random.default_rng(14)
    seed, rnd, pos = (rng.integers(0, U64, 400, dtype=np.uint64, endpoint=True) for _ in range(3))
    p = run(x, temp=temp, seed=seed, rnd=rnd, pos=pos, tau=2.0)
    bad = []
    for r in range(400):
        u = u_of(int(seed[r]), int(rnd[r]), int(pos[r]))
        slot = int(np.searchsorted(np.cumsum(p.tickets[r]), u, side="right"))  # first C_j > u
        if int(p.token[r]) != int(p.ids[r, slot]):
            bad.append(f"row {r} seed={int(seed[r])} round={int(rnd[r])} position={int(pos[r])} u={u:#08x}: "
                       f"token {int(p.token[r])}, want {int(p.ids[r, slot])}")
    assert not bad, f"{len(bad)} of 400 rows drew the wrong token:\n" + first_lines(bad)


def _seed_with_u(lo: int, hi: int) -> tuple[int, int]:
    seed = next(s for s in range(10_000) if lo <= u_of(s, 0, 0) < hi)
    return seed, u_of(seed, 0, 0)


def _logit_with_tickets(target: int, rank0_logit_id: int) -> float:
    """Bisect an fp32 z in (-104, 0] so that the two-entry row {z, 0.0} gives the z slot `target` tickets.

    For negative fp32 a larger bit pattern is more negative, and the z slot's tickets fall as z falls.
    """
    def tickets_of(bits: int) -> int:
        z = float(np.array([bits], dtype=np.uint32).view(np.float32)[0])
        row = [z, 0.0] if rank0_logit_id == 1 else [0.0, z]
        return out(run(row, tau=1.0)).tickets[1 - rank0_logit_id]

    enough, too_few = 0x80000000, 0xC2CFFFFF  # tickets(-0.0) = 2^23 >= target > 0 = tickets(-103.99999)
    while too_few - enough > 1:
        mid = (enough + too_few) // 2
        if tickets_of(mid) >= target:
            enough = mid
        else:
            too_few = mid
    assert tickets_of(enough) == target, f"no fp32 logit gives {target} tickets"
    return float(np.array([enough], dtype=np.uint32).view(np.float32)[0])


def test_u_on_an_interval_boundary_belongs_to_the_next_slot() -> None:
    """u == C_0 exactly: slot 0 owns [0, C_0), so the token is slot 1 (a `<=` draw would return slot 0)."""
    seed, u = _seed_with_u(1, 1 << 23)
    z = _logit_with_tickets(u, rank0_logit_id=1)
    o = out(run([z, 0.0], tau=1.0, seed=seed, rnd=0, pos=0))
    assert o.tickets[0] == u and o.token == 1, f"u={u:#x}, tickets {o.tickets[:2]}, token {o.token}"
    o = out(run([z, -1000.0, 0.0], tau=1.0, seed=seed, rnd=0, pos=0))  # a zero-ticket slot in between
    assert o.tickets[:3] == [u, 0, TICKETS - u] and o.token == 2, (o.tickets[:3], o.token)


# --- §9 invariance -------------------------------------------------------------------------------------------------

def test_batch_permutation_and_split_invariance() -> None:
    x, temp = _random_ok_rows(64, 15)
    x[5, 3] = NAN
    x[9, :] = -INF
    temp[11] = -2.0
    rng = np.random.default_rng(16)
    seed, rnd, pos = (rng.integers(0, U64, 64, dtype=np.uint64, endpoint=True) for _ in range(3))
    full = propose(x, temp, seed, rnd, pos)
    perm = rng.permutation(64)
    permuted = propose(x[perm], temp[perm], seed[perm], rnd[perm], pos[perm])
    for f in ("status", "token", "ids", "tickets"):
        assert_equal(getattr(permuted, f), getattr(full, f)[perm], f"permuted batch: {f}")
    parts = [propose(x[a:b], temp[a:b], seed[a:b], rnd[a:b], pos[a:b]) for a, b in ((0, 1), (1, 30), (30, 64))]
    for f in ("status", "token", "ids", "tickets"):
        assert_equal(np.concatenate([getattr(q, f) for q in parts]), getattr(full, f), f"split batch: {f}")


# --- uint64 extremes and the independent reading of the SPEC -------------------------------------------------------

@pytest.mark.parametrize("which", ["seed", "round", "position"])
@pytest.mark.parametrize("value", EXTREMES, ids=["0", "2^63", "2^64-1"])
def test_uint64_extremes(which: str, value: int) -> None:
    x = np.random.default_rng(17).normal(size=(4, 40)).astype(np.float32)
    args = {"seed": [5, 6, 7, 8], "round": [1, 2, 3, 4], "position": [9, 10, 11, 12]}
    args[which] = [value] * 4
    args[which][1] = U64 - value
    p = run(x, seed=args["seed"], rnd=args["round"], pos=args["position"], tau=3.0)
    for r in range(4):
        want = spec_oracle.propose_row(x[r], 1.0, args["seed"][r], args["round"][r], args["position"][r], 3.0)
        assert out(p, r) == Out(want.status, want.token, want.ids, want.tickets), f"row {r}: {which}={value:#x}"


def test_against_independent_reading_of_the_spec() -> None:
    """200 rows of every kind (sampled, T0, failed; V from 1 to 300; five taus) against tests/oracles/select.py."""
    rng = np.random.default_rng(18)
    bad = []
    for i in range(200):
        v = int(rng.choice([1, 2, 31, 32, 33, 100, 300]))
        x = (rng.normal(size=v) * rng.choice([0.001, 1.0, 10.0, 100.0])).astype(np.float32)
        x[rng.random(v) < 0.1] = -INF
        if rng.random() < 0.3:
            x = np.round(x)  # ties
        if rng.random() < 0.05:
            x[rng.integers(v)] = rng.choice([NAN, INF])
        temp = float(rng.choice([1.0, 0.0, -0.0, 0.5, INF, NAN, -1.0], p=[0.5, 0.1, 0.05, 0.2, 0.05, 0.05, 0.05]))
        tau = float(rng.choice([DEFAULT_TAU, 1e-3, 1.0, 7.5, 1e6]))
        seed, rnd, pos = (int(rng.integers(0, U64, dtype=np.uint64, endpoint=True)) for _ in range(3))
        got = out(run(x, temp=temp, seed=seed, rnd=rnd, pos=pos, tau=tau))
        w = spec_oracle.propose_row(x, temp, seed, rnd, pos, tau)
        if got != Out(w.status, w.token, w.ids, w.tickets):
            bad.append(f"case {i} V={v} temp={temp} tau={tau} seed={seed} round={rnd} position={pos}: "
                       f"got {got}, want {w}")
    assert not bad, f"{len(bad)} of 200 rows differ:\n" + first_lines(bad, 4)


# --- §2 argument validation ----------------------------------------------------------------------------------------

GOOD: dict[str, Any] = {
    "logits": np.zeros((2, 5), dtype=np.float32),
    "target_temperature": np.ones(2, dtype=np.float32),
    "seed": np.array([1, 2], dtype=np.uint64),
    "round": np.array([0, 0], dtype=np.uint64),
    "position": np.array([3, 4], dtype=np.uint64),
    "tau": DEFAULT_TAU,
}

BAD_ARGS = [
    ("logits", np.zeros(5, np.float32), ValueError),  # 1-D
    ("logits", np.zeros((2, 5, 1), np.float32), ValueError),  # 3-D
    ("logits", np.zeros((2, 5), np.int32), TypeError),
    ("logits", np.zeros((2, 5), np.float64), TypeError),
    ("logits", np.zeros((0, 5), np.float32), ValueError),  # B = 0
    ("logits", np.zeros((2, 0), np.float32), ValueError),  # V = 0
    ("logits", [[1.0, 2.0]], TypeError),  # a list becomes float64
    *[(name, bad, exc) for name in ("seed", "round", "position") for bad, exc in (
        (-1, ValueError),
        (1 << 64, ValueError),
        ([1, -1], ValueError),
        ([1, 1 << 64], ValueError),
        (np.array([1, -1], np.int64), ValueError),
        (1.0, TypeError),
        (np.array([1.0, 2.0]), TypeError),
        (True, TypeError),
        (np.array([1, 2, 3], np.uint64), ValueError),  # wrong length
        (np.array([[1, 2]], np.uint64), ValueError),
    )],
    ("tau", 0.0, ValueError),
    ("tau", -0.7, ValueError),
    ("tau", NAN, ValueError),
    ("tau", INF, ValueError),
    ("tau", 1e39, ValueError),  # finite in fp64, +inf in fp32
    ("tau", 1e-50, ValueError),  # rounds to 0 in fp32
    ("tau", "0.7", TypeError),
    ("tau", None, TypeError),
    ("target_temperature", np.ones(3, np.float32), ValueError),
    ("target_temperature", "hot", TypeError),
    ("target_temperature", np.array(["a", "b"]), TypeError),
]


@pytest.mark.parametrize("name,bad,exc", BAD_ARGS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD_ARGS)])
def test_bad_argument_raises_naming_it(name: str, bad: Any, exc: type[Exception]) -> None:
    kwargs = dict(GOOD, **{name: bad})
    with pytest.raises(exc, match=rf"\b{name}\b"):
        propose(**kwargs)


def test_good_arguments_and_scalars_are_accepted() -> None:
    p = propose(**GOOD)
    assert np.all(p.status == 0)
    q = propose(GOOD["logits"], 1.0, 1, 0, 3)  # scalars broadcast over rows
    assert out(q, 0) == out(p, 0)
    for v in (U64, [U64, 0], np.array([U64, 1 << 63], np.uint64)):
        propose(GOOD["logits"], 1.0, v, v, v)


# --- the clause tests catch the planted bugs of their clauses -----------------------------------------------------

# The clause tests each mutant must fail (plain calls of the test functions above).
CLAUSE_TESTS: dict[str, list[tuple[Any, tuple[Any, ...]]]] = {
    "largest-remainder": [(test_remainder_goes_to_rank0_slot, ()),
                          (test_propose_tickets_are_floor_counts_plus_remainder_at_rank0, ()),
                          (test_against_independent_reading_of_the_spec, ())],
    "remainder-lowest-id": [(test_remainder_goes_to_rank0_slot, ()),
                            (test_against_independent_reading_of_the_spec, ())],
    "uniform-low-24-bits": [(test_token_is_the_slot_whose_interval_contains_u, ()),
                            (test_against_independent_reading_of_the_spec, ())],
    "draw-off-by-one": [(test_u_on_an_interval_boundary_belongs_to_the_next_slot, ())],
    "left-fold-sum": [(test_sum_is_the_pairwise_tree, ("vs_left_fold",)),
                      (test_sum_is_the_pairwise_tree, ("vs_numpy_sum",))],
    "strided8-sum": [(test_sum_is_the_pairwise_tree, ("vs_numpy_sum",))],
}


@pytest.mark.parametrize("name", list(CLAUSE_TESTS))
def test_clause_tests_detect_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(*mutants.mutant(name).target_and_replacement())
    caught = []
    for test, args in CLAUSE_TESTS[name]:
        try:
            test(*args)
        except AssertionError:
            caught.append(f"{test.__name__}{list(args) or ''}")
    print(f"mutant {name}: caught by {caught}")
    assert caught, f"no clause test in {CLAUSE_TESTS[name]} detects the mutant {name}"
