"""SPEC.md §11 (accept-dyadic24-v1), one clause per test, on the NumPy reference ``pp3.reference.accept``."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pp3.reference import (
    ACCEPT_SEMANTIC_ID,
    DOMAIN_ACCEPT,
    DOMAIN_PROPOSAL,
    DOMAIN_RESIDUAL,
    P_BITS,
    P_TICKETS,
    Q_SHIFT,
    TICKETS,
    AcceptStatus,
    K,
    Status,
    proposal_uniform,
    target_tickets,
    verify,
)
from pp3.reference.philox import block, lemire_threshold, mulhilo64, uniform_below
from pp3.testing.compare import assert_equal
from pp3.testing.drafts import (
    REJECT_Q,
    REJECT_SEED_ACCEPT,
    REJECT_SEED_RESIDUAL,
    break_draft,
    point_drafts,
    random_case,
    two_slot_draft,
    u64,
)
from tests.oracles import accept as accept_oracle

F32 = npt.NDArray[np.float32]
INF = np.float32(np.inf)

# ---------------------------------------------------------------------------------------------------- §11.1


def test_constants() -> None:
    assert ACCEPT_SEMANTIC_ID == "accept-dyadic24-v1"
    assert (P_BITS, P_TICKETS, Q_SHIFT) == (40, 1 << 40, 16)
    assert DOMAIN_ACCEPT.to_bytes(8, "big") == b"pp3_acpt"
    assert DOMAIN_RESIDUAL.to_bytes(8, "big") == b"pp3_resd"
    assert int(AcceptStatus.BAD_DRAFT) == 5
    # §11.3: SPEC.md §3's statuses with the same names and values, then BAD_DRAFT
    assert [(m.name, m.value) for m in AcceptStatus] == [(m.name, m.value) for m in Status] + [("BAD_DRAFT", 5)]
    assert all(int(AcceptStatus[m.name]) == int(m) for m in Status)  # AcceptStatus.X == Status.X as integers


# ---------------------------------------------------------------------------------------------------- §11.4


@pytest.mark.parametrize("v", [1, 2, 3, 31, 32, 33, 1000, 4097])  # V = 1, powers of two +-1, ragged padding
def test_target_tickets_sum_to_2_40_with_the_remainder_at_the_argmax(v: int) -> None:
    rng = np.random.default_rng(v)
    x = rng.normal(scale=3.0, size=(6, v)).astype(np.float32)
    temp = np.array([1.0, 0.5, 2.0, 1e-3, 1e3, np.inf], dtype=np.float32)
    g, tix = target_tickets(x, temp)
    assert (tix.sum(axis=1) == P_TICKETS).all()
    assert (tix >= 0).all()
    assert_equal(g, np.argmax(x, axis=1).astype(np.int64), "g (no ties in normal samples)")
    # P5-P6 recomputed: floor counts everywhere but the argmax, which holds the rest.
    for r in range(6):
        others = np.delete(tix[r], g[r])
        assert tix[r, g[r]] == P_TICKETS - others.sum()


def test_target_tickets_remainder_is_at_most_the_number_of_positive_weights() -> None:
    v = 163840  # the production vocabulary: R <= F' (§11.4 range), a flat row makes R large
    x = np.zeros((1, v), dtype=np.float32)
    x[0, ::3] = np.float32(-0.5)
    g, tix = target_tickets(x, np.array([1.0], dtype=np.float32))
    assert g[0] == 1  # the first entry of the top value
    r = tix[0, 1] - tix[0, 2]  # entry 2 has the same value: its count is the common floor count
    assert 0 <= r <= v
    assert r > 1000  # a flat row really does leave many tickets (why P_BITS is 40, §11.10)
    assert tix[0].sum() == P_TICKETS


def test_target_tickets_padding_to_a_larger_power_of_two_changes_nothing() -> None:
    from pp3.reference import tickets as tk
    from pp3.reference.exponential import expf

    rng = np.random.default_rng(5)
    x = rng.normal(scale=4.0, size=(4, 37)).astype(np.float32)
    _, tix = target_tickets(x, np.ones(4, dtype=np.float32))
    m = x.max(axis=1, keepdims=True)
    w = expf((x - m).astype(np.float32)).astype(np.float64)
    for width in (64, 128, 1024):
        pad = np.zeros((4, width))
        pad[:, :37] = w
        s = tk.pairwise_sum(pad)
        c = np.floor((w * float(P_TICKETS)) / s[:, None]).astype(np.int64)
        g = x.argmax(axis=1)
        c[np.arange(4), g] += P_TICKETS - c.sum(axis=1)
        assert_equal(tix, c, f"tickets with padding to {width}")


def test_masked_logits_get_no_tickets_and_infinite_temperature_is_uniform_over_finite_logits() -> None:
    x = np.array([[-np.inf, 1.0, -3.0, -np.inf, 7.0], [-np.inf, -np.inf, -1e30, 5.0, -np.inf]], dtype=np.float32)
    _, tix = target_tickets(x, np.array([np.inf, np.inf], dtype=np.float32))
    third = P_TICKETS // 3
    assert tix[0].tolist() == [0, third, third, 0, P_TICKETS - 2 * third]
    half = P_TICKETS // 2
    assert tix[1].tolist() == [0, 0, half, half, 0]
    _, tix1 = target_tickets(x, np.array([1.0, 1.0], dtype=np.float32))
    assert (tix1[x == -np.inf] == 0).all()


def test_overflowing_difference_gets_weight_zero_at_every_temperature() -> None:
    fmax = np.finfo(np.float32).max
    x = np.array([[fmax, -fmax, 0.0]], dtype=np.float32)  # -FLT_MAX - FLT_MAX = -inf (P2), so e = 0 (P3)
    for t in (1.0, np.inf):
        _, tix = target_tickets(x, np.array([t], dtype=np.float32))
        assert tix[0, 1] == 0
        assert tix[0].sum() == P_TICKETS


def test_infinite_temperature_is_uniform_only_over_finite_differences() -> None:
    """§11.4 P3, SPEC's example: V = 2, logits [FLT_MAX, -FLT_MAX], T = +inf: d_1 = -inf, so P = [2^40, 0] and a
    draft of token 1 is never accepted, whatever the draw; [0, -FLT_MAX] has a finite difference: P uniform."""
    fmax = np.finfo(np.float32).max
    x = np.array([[fmax, -fmax], [0.0, -fmax]], dtype=np.float32)
    _, tix = target_tickets(x, np.full(2, np.inf, dtype=np.float32))
    assert tix.tolist() == [[P_TICKETS, 0], [P_TICKETS // 2, P_TICKETS // 2]]
    b = 64
    logits = np.repeat(x[:, None, :], 2, axis=1)[np.arange(b) % 2]
    res = verify(logits, np.inf, **two_slot_draft(b, 1, 1, 1 << 23, 0), seed=np.arange(b, dtype=np.uint64), round=0,
                 position=0)
    assert (res.accepted[0::2] == 0).all() and (res.tokens[0::2, 0] == 0).all()  # rejected, corrected to 0
    assert (res.accepted[1::2] == 1).all()  # P(1) = 2^39 >= s = 2^39: accepted

def test_target_tickets_are_within_the_quantisation_bound_of_the_weights() -> None:
    rng = np.random.default_rng(11)
    v = 5000
    x = rng.normal(scale=2.0, size=(3, v)).astype(np.float32)
    _, tix = target_tickets(x, np.ones(3, dtype=np.float32))
    w = np.exp((x - x.max(axis=1, keepdims=True)).astype(np.float64))
    tv = 0.5 * np.abs(tix / float(P_TICKETS) - w / w.sum(axis=1, keepdims=True)).sum(axis=1)
    assert (tv < (v + 1) * 2.0**-40 + 1e-7).all(), tv  # 1e-7: expf's fp32 rounding of each weight


def test_target_tickets_match_the_independent_oracle() -> None:
    rng = np.random.default_rng(3)
    for v, temp in ((7, 1.0), (16, 0.37), (9, np.inf), (5, 1e-40)):
        x = rng.normal(scale=5.0, size=(1, v)).astype(np.float32)
        x[0, 2] = -np.inf
        _, tix = target_tickets(x, np.array([temp], dtype=np.float32))
        assert tix[0].tolist() == accept_oracle.tickets([float(a) for a in x[0]], float(temp))


# ---------------------------------------------------------------------------------------------------- §11.5


@pytest.mark.parametrize("bits", [0, 1, 16, 24, 40])
def test_uniform_below_a_power_of_two_is_the_top_bits_of_w0(bits: int) -> None:
    n = 64
    seed = np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    rnd, pos = np.full(n, 5, dtype=np.uint64), np.arange(n, dtype=np.uint64)
    u = uniform_below(seed, rnd, pos, DOMAIN_RESIDUAL, np.full(n, 1 << bits, dtype=np.uint64))
    w0 = block(seed, rnd, pos, DOMAIN_RESIDUAL, 0)[:, 0]
    want = w0 >> np.uint64(64 - bits) if bits else np.zeros(n, dtype=np.uint64)
    assert_equal(u, want, f"uniform_below(2^{bits})")


def test_uniform_below_2_24_of_the_proposal_stream_is_the_selector_uniform() -> None:
    seed, rnd, pos = u64(1, 2, 3), u64(0, 7, 2**64 - 1), u64(9, 0, 5)
    got = uniform_below(seed, rnd, pos, DOMAIN_PROPOSAL, np.full(3, TICKETS, dtype=np.uint64))
    assert_equal(got, proposal_uniform(seed, rnd, pos), "uniform_below(2^24) vs SPEC.md §8 u")


def test_stream_block_i_is_counter_word_2() -> None:
    seed, rnd, pos = u64(42), u64(3), u64(4)
    for index in (0, 1, 2):
        got = [int(w) for w in block(seed, rnd, pos, DOMAIN_ACCEPT, index)[0]]
        assert got == accept_oracle.words(42, DOMAIN_ACCEPT, 3, 4, index)


def test_rejection_seed_makes_the_first_word_fail_and_the_second_decide() -> None:
    s = REJECT_Q << Q_SHIFT
    t = (1 << 64) % s
    for seed, domain in ((REJECT_SEED_ACCEPT, DOMAIN_ACCEPT), (REJECT_SEED_RESIDUAL, DOMAIN_RESIDUAL)):
        w = accept_oracle.words(seed, domain, 0, 0, 0)
        assert (w[0] * s) % (1 << 64) < t, "W_0 must be rejected"
        assert (w[1] * s) % (1 << 64) >= t, "W_1 must be accepted"
        got = uniform_below(u64(seed), u64(0), u64(0), domain, u64(s))
        assert int(got[0]) == (w[1] * s) >> 64 == accept_oracle.uniform_below(seed, domain, 0, 0, s)


def test_uniform_below_moves_to_the_next_block_after_four_rejected_words(monkeypatch: pytest.MonkeyPatch) -> None:
    from pp3.reference import philox

    real = philox.block
    calls: list[int] = []

    def zero_first_block(seed: Any, rnd: Any, pos: Any, domain: int, index: int = 0) -> Any:
        calls.append(index)
        w = real(seed, rnd, pos, domain, index)
        return np.zeros_like(w) if index == 0 else w  # W = 0 gives lo = 0 < t whenever t > 0

    monkeypatch.setattr(philox, "block", zero_first_block)
    s = u64(3)  # t = 2^64 mod 3 = 1
    got = philox.uniform_below(u64(1), u64(0), u64(0), DOMAIN_RESIDUAL, s)
    w4 = real(u64(1), u64(0), u64(0), DOMAIN_RESIDUAL, 1)[0, 0]
    assert calls == [0, 1]
    assert int(got[0]) == (int(w4) * 3) >> 64


@pytest.mark.parametrize("width", [4, 8])
def test_lemire_rule_is_exactly_uniform_at_small_word_widths(width: int) -> None:
    # §11.5's argument holds for any word width: check the rule exhaustively at 4 and 8 bits.
    top = 1 << width
    for s in range(1, top + 1):
        t = top % s
        counts = [0] * s
        for w in range(top):
            if (w * s) % top >= t:
                counts[(w * s) // top] += 1
        assert len(set(counts)) == 1 and counts[0] == top // s, (width, s, counts)


def test_mulhilo64_elementwise_and_threshold() -> None:
    a = u64(0, 1, 2**64 - 1, 0xDEADBEEFCAFEBABE)
    b = u64(5, 2**64 - 1, 2**64 - 1, 0x123456789ABCDEF1)
    hi, lo = mulhilo64(a, b)
    for i in range(4):
        prod = int(a[i]) * int(b[i])
        assert (int(hi[i]), int(lo[i])) == (prod >> 64, prod & ((1 << 64) - 1))
    s = u64(1, 3, 1 << 40, (1 << 40) - 1, REJECT_Q << Q_SHIFT)
    assert [int(t) for t in lemire_threshold(s)] == [(1 << 64) % int(x) for x in s]


@pytest.mark.parametrize("s", [0, P_TICKETS + 1])
def test_uniform_below_rejects_bounds_outside_1_to_2_40(s: int) -> None:
    with pytest.raises(ValueError, match="s must lie"):
        uniform_below(u64(0), u64(0), u64(0), DOMAIN_ACCEPT, u64(s))


# ---------------------------------------------------------------------------------------------------- §11.6-7


def test_t0_accepts_iff_the_draft_is_the_argmax_and_corrects_to_the_argmax() -> None:
    x = np.array([[[0.0, 3.0, 3.0, 1.0], [5.0, 0.0, 0.0, 0.0], [-0.0, 0.0, -1.0, -1.0]]], dtype=np.float32)
    x = np.repeat(x, 3, axis=0)  # rows: all accepted, second rejected, first rejected
    toks = np.array([[1, 0], [1, 3], [2, 0]])
    res = verify(x, 0.0, **point_drafts(toks), seed=u64(1, 2, 3), round=0, position=0)
    assert res.accepted.tolist() == [2, 1, 0]
    # argmaxes: row 0 of the target -> 1 (lower ID of the tie), row 1 -> 0, row 2 -> 0 (-0.0 == +0.0)
    assert res.tokens.tolist() == [[1, 0, 0], [1, 0, -1], [1, -1, -1]]


def test_t0_rows_ignore_seed_round_and_position() -> None:
    rng = np.random.default_rng(0)
    case = random_case(rng, 8, 3, 20, 0.0)
    a = verify(**case)
    b = verify(**(case | {"seed": case["seed"] + np.uint64(1), "round": 9, "position": 0}))
    for f in ("status", "accepted", "tokens"):
        assert_equal(getattr(a, f), getattr(b, f), f)


def test_a_draft_with_p_at_least_q_is_always_accepted() -> None:
    b, d, v = 256, 2, 6
    x = np.zeros((b, d + 1, v), dtype=np.float32)  # p = 1/6 per token: P(x) ~ 2^40 / 6 >= s = 2^16 * 2^16
    res = verify(x, 1.0, **two_slot_draft(b, d, 2, 1 << 16, 4), seed=np.arange(b, dtype=np.uint64), round=0,
                 position=0)
    assert (res.accepted == d).all()


def test_a_draft_the_target_forbids_is_always_rejected_and_never_the_correction() -> None:
    b, d, v = 256, 2, 6
    x = np.zeros((b, d + 1, v), dtype=np.float32)
    x[:, :, 2] = -np.inf  # p(2) = 0
    res = verify(x, 1.0, **two_slot_draft(b, d, 2, TICKETS // 2, 4), seed=np.arange(b, dtype=np.uint64), round=0,
                 position=0)
    assert (res.accepted == 0).all()
    assert (res.tokens[:, 0] != 2).all()
    assert (res.tokens[:, 1:] == -1).all()


def test_acceptance_is_the_integer_comparison_with_the_acceptance_stream() -> None:
    rng = np.random.default_rng(8)
    case = random_case(rng, 64, 1, 12, 1.0)
    res = verify(**case)
    x0 = case["draft_tokens"][:, 0]
    _, big_p = target_tickets(case["target_logits"][:, 0], np.ones(64, dtype=np.float32))
    qx = (case["draft_tickets"][:, 0] * (case["draft_ids"][:, 0] == x0[:, None])).sum(axis=1)
    u = uniform_below(case["seed"], np.full(64, 3, np.uint64), case["position"], DOMAIN_ACCEPT,
                      qx.astype(np.uint64) << np.uint64(Q_SHIFT))
    want = u < big_p[np.arange(64), x0].astype(np.uint64)
    assert_equal(res.accepted == 1, want, "accepted")


def test_bonus_is_a_draw_from_p_with_the_top_24_bits_of_the_residual_word() -> None:
    b, v = 128, 9
    rng = np.random.default_rng(4)
    x = rng.normal(size=(b, 2, v)).astype(np.float32)
    toks = np.full((b, 1), 3)
    x[:, 0, 3] = 50.0  # p_0(3) ~ 1: the draft is accepted
    seed = np.arange(b, dtype=np.uint64)
    res = verify(x, 1.0, **point_drafts(toks), seed=seed, round=2, position=100)
    assert (res.accepted == 1).all()
    _, big_p = target_tickets(x[:, 1], np.ones(b, dtype=np.float32))
    w0 = block(seed, np.full(b, 2, np.uint64), np.full(b, 101, np.uint64), DOMAIN_RESIDUAL, 0)[:, 0]
    u = (w0 >> np.uint64(24)).astype(np.int64)
    want = (np.cumsum(big_p, axis=1) <= u[:, None]).sum(axis=1)
    assert_equal(res.tokens[:, 1], want.astype(np.int32), "bonus token")


def test_the_correction_is_always_a_token_where_p_exceeds_q() -> None:
    rng = np.random.default_rng(12)
    case = random_case(rng, 400, 1, 10, 1.0)
    res = verify(**case)
    rej = np.flatnonzero(res.accepted == 0)
    assert rej.size > 20
    y = res.tokens[rej, 0]
    _, big_p = target_tickets(case["target_logits"][rej, 0], np.ones(rej.size, dtype=np.float32))
    q = (case["draft_tickets"][rej, 0] * (case["draft_ids"][rej, 0] == y[:, None])).sum(axis=1)
    assert (big_p[np.arange(rej.size), y] > (q.astype(np.int64) << Q_SHIFT)).all()


def test_greedy_drafts_against_a_sampled_target_use_s_2_40() -> None:
    rng = np.random.default_rng(13)
    b, v = 200, 7
    x = rng.normal(size=(b, 2, v)).astype(np.float32)
    toks = rng.integers(0, v, size=(b, 1))
    seed = np.arange(b, dtype=np.uint64)
    res = verify(x, 1.0, **point_drafts(toks), seed=seed, round=0, position=0)
    _, big_p = target_tickets(x[:, 0], np.ones(b, dtype=np.float32))
    w0 = block(seed, np.zeros(b, np.uint64), np.zeros(b, np.uint64), DOMAIN_ACCEPT, 0)[:, 0]
    want = (w0 >> np.uint64(24)) < big_p[np.arange(b), toks[:, 0]].astype(np.uint64)
    assert_equal(res.accepted == 1, want, "accepted")


def test_rejection_path_in_verify_matches_the_oracle() -> None:
    v = 5
    x = np.zeros((1, 2, v), dtype=np.float32)
    case: dict[str, Any] = {
        "target_logits": x,
        "target_temperature": 1.0,
        **two_slot_draft(1, 1, 1, REJECT_Q, 3),
        "seed": REJECT_SEED_ACCEPT,
        "round": 0,
        "position": 0,
    }
    res = verify(**case)
    want = accept_oracle.verify_row(x[0], 1.0, [1], [0], case["draft_ids"][0].tolist(),
                                    case["draft_tickets"][0].tolist(), REJECT_SEED_ACCEPT, 0, 0)
    assert (int(res.status[0]), int(res.accepted[0]), res.tokens[0].tolist()) == want


# ---------------------------------------------------------------------------------------------------- §11.3


def test_a_failed_draft_truncates_and_later_target_rows_are_ignored() -> None:
    rng = np.random.default_rng(2)
    case = random_case(rng, 16, 4, 8, 1.0)
    case["draft_status"][:, 2] = 1  # draft 2 failed: n = 2
    case["draft_tokens"][:, 2] = -1
    case["target_logits"][:, 3:] = np.nan  # rows n+1 .. D are never looked at
    case["draft_ids"][:, 3] = 99  # nor are drafts n .. D-1
    res = verify(**case)
    assert (res.status == 0).all()
    assert (res.accepted <= 2).all()
    full = np.flatnonzero(res.accepted == 2)
    assert full.size  # those rows drew the bonus from p_2 (Q* = 0)
    assert (res.tokens[:, 3:] == -1).all()


@pytest.mark.parametrize(
    ("rows", "status"),
    [
        ({0: "nan"}, AcceptStatus.NAN_LOGIT),
        ({1: "inf"}, AcceptStatus.POS_INF_LOGIT),
        ({2: "masked"}, AcceptStatus.ZERO_MASS),  # row n = D = 2: the bonus row is checked too
        ({1: "inf", 2: "nan"}, AcceptStatus.POS_INF_LOGIT),  # the lowest bad row decides
        ({0: "masked", 1: "nan"}, AcceptStatus.ZERO_MASS),
        ({0: "inf_nan"}, AcceptStatus.NAN_LOGIT),  # within a row, SPEC.md §3 precedence
    ],
)
def test_target_row_status_is_the_class_of_the_lowest_bad_row(rows: dict[int, str], status: AcceptStatus) -> None:
    rng = np.random.default_rng(1)
    case = random_case(rng, 3, 2, 6, 1.0)
    victim = case["target_logits"][1]
    for j, kind in rows.items():
        if kind == "nan":
            victim[j, 3] = np.nan
        elif kind == "inf":
            victim[j, 0] = np.inf
        elif kind == "masked":
            victim[j, :] = -np.inf
        else:
            victim[j, 0], victim[j, 1] = np.inf, np.nan
    case["target_temperature"] = np.array([1.0, -1.0, 1.0], dtype=np.float32)  # a bad temperature loses to rows
    res = verify(**case)
    assert res.status[1] == status
    assert res.accepted[1] == -1 and (res.tokens[1] == -1).all()
    clean = verify(**(case | {"target_temperature": 1.0}))
    for r in (0, 2):  # a failed row never changes another row
        assert res.accepted[r] == clean.accepted[r] and (res.tokens[r] == clean.tokens[r]).all()


@pytest.mark.parametrize("temp", [np.nan, -1.0, -np.inf, -1e-45])
def test_bad_temperature(temp: float) -> None:
    case = random_case(np.random.default_rng(0), 2, 2, 5, 1.0)
    res = verify(**(case | {"target_temperature": temp}))
    assert (res.status == AcceptStatus.BAD_TEMPERATURE).all()


def test_bad_temperature_beats_bad_draft() -> None:
    case = random_case(np.random.default_rng(0), 2, 2, 5, 1.0)
    case["draft_tickets"][:, 0, 0] += 1
    assert (verify(**(case | {"target_temperature": np.nan})).status == AcceptStatus.BAD_TEMPERATURE).all()
    assert (verify(**case).status == AcceptStatus.BAD_DRAFT).all()


@pytest.mark.parametrize(
    "kind",
    ["sum", "negative", "token_absent", "token_zero_tickets", "descending", "id_out_of_range",
     "empty_with_tickets", "full_after_empty"],
)
def test_invalid_drafts_fail_the_row(kind: str) -> None:
    case = random_case(np.random.default_rng(21), 2, 2, 40, 1.0)
    break_draft(kind, case["draft_ids"], case["draft_tickets"], case["draft_tokens"])
    res = verify(**case)
    assert res.status.tolist() == [AcceptStatus.BAD_DRAFT, AcceptStatus.OK]
    t0 = verify(**(case | {"target_temperature": 0.0}))  # T0 rows validate their drafts too
    assert t0.status[0] == AcceptStatus.BAD_DRAFT


def test_a_bad_target_row_above_an_invalid_draft_decides() -> None:
    """§11.3's example: n = 3, draft 0 invalid and a NaN in target row 2: NAN_LOGIT; with draft 1 failed (n = 1) row 2
    is ignored: BAD_DRAFT."""
    case = random_case(np.random.default_rng(22), 2, 3, 40, 1.0)
    case["draft_tickets"][:, 0, 0] += 1
    case["target_logits"][:, 2, 5] = np.nan
    case["draft_status"][1, 1] = 2
    assert verify(**case).status.tolist() == [AcceptStatus.NAN_LOGIT, AcceptStatus.BAD_DRAFT]


def test_invalid_drafts_after_a_failed_draft_are_ignored() -> None:
    case = random_case(np.random.default_rng(21), 2, 3, 40, 1.0)
    case["draft_status"][:, 1] = 3
    case["draft_tickets"][:, 2, 0] += 7
    assert (verify(**case).status == 0).all()


def test_an_empty_draft_list_draws_the_bonus_from_p() -> None:
    case = random_case(np.random.default_rng(9), 4, 2, 6, 1.0)
    case["draft_status"][:, 0] = 2  # n = 0
    res = verify(**case)
    assert (res.accepted == 0).all() and (res.status == 0).all()
    _, big_p = target_tickets(case["target_logits"][:, 0], np.ones(4, dtype=np.float32))
    w0 = block(case["seed"], np.full(4, 3, np.uint64), case["position"], DOMAIN_RESIDUAL, 0)[:, 0]
    want = (np.cumsum(big_p, axis=1) <= (w0 >> np.uint64(24)).astype(np.int64)[:, None]).sum(axis=1)
    assert_equal(res.tokens[:, 0], want.astype(np.int32), "bonus at n = 0")


# ---------------------------------------------------------------------------------------------------- §11.8-11


def test_output_layout() -> None:
    case = random_case(np.random.default_rng(6), 300, 3, 8, 1.0)
    res = verify(**case)
    a = res.accepted
    assert set(np.unique(a).tolist()) <= {0, 1, 2, 3} and len(np.unique(a)) > 2
    for r in range(300):
        assert res.tokens[r, : a[r]].tolist() == case["draft_tokens"][r, : a[r]].tolist()
        assert 0 <= res.tokens[r, a[r]] < 8
        assert (res.tokens[r, a[r] + 1 :] == -1).all()
    assert res.status.dtype == np.int8 and res.accepted.dtype == np.int32 and res.tokens.dtype == np.int32


def test_batch_permutation_and_split_invariance() -> None:
    case = random_case(np.random.default_rng(7), 40, 3, 11, 0.8)
    full = verify(**case)
    perm = np.random.default_rng(1).permutation(40)
    per_row = {k: (v[perm] if isinstance(v, np.ndarray) and v.ndim >= 1 else v) for k, v in case.items()}
    shuffled = verify(**per_row)
    halves = [verify(**{k: (v[s] if isinstance(v, np.ndarray) and v.ndim >= 1 else v) for k, v in case.items()})
              for s in (slice(0, 17), slice(17, 40))]
    for f in ("status", "accepted", "tokens"):
        assert_equal(getattr(shuffled, f), getattr(full, f)[perm], f"{f} (permuted)")
        assert_equal(np.concatenate([getattr(h, f) for h in halves]), getattr(full, f), f"{f} (split)")


def test_fp16_target_logits_equal_fp32_of_the_same_values() -> None:
    case = random_case(np.random.default_rng(10), 32, 2, 9, 1.0)
    half = case["target_logits"].astype(np.float16)
    a = verify(**(case | {"target_logits": half}))
    b = verify(**(case | {"target_logits": half.astype(np.float32)}))
    for f in ("status", "accepted", "tokens"):
        assert_equal(getattr(a, f), getattr(b, f), f)


@pytest.mark.parametrize("temp", [1.0, 0.3, np.inf, 0.0])
def test_against_the_independent_reading_of_the_spec(temp: float) -> None:
    rng = np.random.default_rng(int(1000 * min(temp, 9)))
    case = random_case(rng, 12, 3, 7, temp)
    case["target_logits"][0, :, 4] = -np.inf
    case["target_logits"][1, 1, :] = case["target_logits"][1, 1, 0]  # a flat row: ties everywhere
    case["draft_status"][2, 1] = 1
    case["position"][3] = np.uint64(2**64 - 2)  # positions wrap mod 2^64
    res = verify(**case)
    for r in range(12):
        want = accept_oracle.verify_row(
            case["target_logits"][r], temp, case["draft_tokens"][r].tolist(), case["draft_status"][r].tolist(),
            case["draft_ids"][r].tolist(), case["draft_tickets"][r].tolist(), int(case["seed"][r]), 3,
            int(case["position"][r]),
        )
        got = (int(res.status[r]), int(res.accepted[r]), res.tokens[r].tolist())
        assert got == want, f"row {r}: got {got}, oracle {want}"


@pytest.mark.parametrize(
    ("name", "bad", "exc"),
    [
        ("target_logits", np.zeros((2, 3, 4), dtype=np.int32), TypeError),
        ("target_logits", np.zeros((2, 4), dtype=np.float32), ValueError),
        ("target_logits", np.zeros((2, 1, 4), dtype=np.float32), ValueError),  # D = 0
        ("target_logits", np.zeros((2, 3, 0), dtype=np.float32), ValueError),
        ("draft_tokens", np.zeros((2, 3), dtype=np.int32), ValueError),
        ("draft_tokens", np.zeros((2, 2), dtype=np.float32), TypeError),
        ("draft_status", np.full((2, 2), 300), ValueError),
        ("draft_ids", np.zeros((2, 2, 31), dtype=np.int32), ValueError),
        ("draft_tickets", np.zeros((2, 2, K), dtype=np.bool_), TypeError),
        ("seed", -1, ValueError),
        ("round", 1.5, TypeError),
        ("position", np.zeros(3, dtype=np.uint64), ValueError),
        ("target_temperature", "hot", TypeError),
    ],
)
def test_bad_argument_raises_naming_it(name: str, bad: Any, exc: type[Exception]) -> None:
    case = random_case(np.random.default_rng(0), 2, 2, 4, 1.0)
    with pytest.raises(exc, match=name):
        verify(**(case | {name: bad}))


# ---------------------------------------------------------------------------------------------------- §11.2


def test_draft_arrays_of_any_integer_dtype_with_values_in_range_are_the_same_call() -> None:
    """§11.2: the types are value ranges; the reference takes any integer array whose values fit them."""
    case = random_case(np.random.default_rng(30), 4, 2, 9, 1.0)
    want = verify(**case)
    keys = ("draft_tokens", "draft_status", "draft_ids", "draft_tickets")
    for changed in (
        {k: case[k].astype(np.int64) for k in keys},
        {"draft_tokens": case["draft_tokens"].astype(np.uint32), "draft_tickets": case["draft_tickets"].astype(
            np.uint32)},  # every value >= 0
        {"draft_tokens": case["draft_tokens"].astype(np.int16), "draft_status": case["draft_status"].astype(np.int16)},
        {k: case[k].tolist() for k in keys},
    ):
        got = verify(**(case | changed))
        for f in ("status", "accepted", "tokens"):
            assert_equal(getattr(got, f), getattr(want, f), f"{f} with drafts {sorted(changed)} converted")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("draft_tokens", 1 << 31),
        ("draft_tokens", -(1 << 31) - 1),
        ("draft_status", 128),
        ("draft_status", -129),
        ("draft_ids", 1 << 31),
        ("draft_tickets", -(1 << 31) - 1),
    ],
)
def test_a_draft_value_that_does_not_fit_its_type_is_a_caller_error(name: str, value: int) -> None:
    case = random_case(np.random.default_rng(31), 2, 2, 9, 1.0)
    bad = case[name].astype(np.int64)
    bad.reshape(-1)[-1] = value
    with pytest.raises(ValueError, match=name):
        verify(**(case | {name: bad}))


@pytest.mark.parametrize("name", ["draft_tokens", "draft_status", "draft_ids", "draft_tickets"])
@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
def test_a_draft_array_of_a_non_integer_dtype_is_a_caller_error(name: str, dtype: type) -> None:
    case = random_case(np.random.default_rng(32), 2, 2, 9, 1.0)
    with pytest.raises(TypeError, match=name):
        verify(**(case | {name: case[name].astype(dtype)}))


def test_every_draft_value_of_its_type_is_row_data() -> None:
    """§11.2: any int8 status truncates (not only §3's 1 .. 4), any int32 ID, token or ticket is row data: an ID >= V,
    a token -2^31 or a negative ticket makes the draft invalid; garbage after n is ignored."""
    case = random_case(np.random.default_rng(33), 7, 2, 40, 1.0)
    st, tok, ids, tix = (case[k] for k in ("draft_status", "draft_tokens", "draft_ids", "draft_tickets"))
    st[0, 0], st[1, 0], st[2, 1] = 7, -128, 127  # n = 0, 0, 1
    tok[2, 1], tix[2, 1] = (1 << 31) - 1, -(1 << 31)  # ignored (j >= n)
    ids[3, 0, K - 1] = (1 << 31) - 1  # an ID >= V
    tok[4, 0] = -(1 << 31)  # a token in no slot
    tix[5, 0, 0] -= 1 << 25  # a negative ticket (the sum kept)
    tix[5, 0, 1] += 1 << 25
    res = verify(**case)
    assert res.status.tolist() == [0, 0, 0, 5, 5, 5, 0]
    assert res.accepted[:2].tolist() == [0, 0] and res.accepted[2] <= 1


@pytest.mark.parametrize(
    ("t64", "t32"),
    [
        (-1e-50, -0.0),  # < 0 as a float64 (BAD_TEMPERATURE), -0.0 in fp32: a T0 row
        (1e-50, 0.0),  # a T0 row
        (0.1, float(np.float32(0.1))),  # 0x3DCCCCCD: rounded up, not truncated
        (1e39, np.inf),  # overflows to +inf: a sampled row with P3's T = +inf
        (-1e39, -np.inf),
    ],
)
def test_a_float64_temperature_is_rounded_to_fp32_first(t64: float, t32: float) -> None:
    case = random_case(np.random.default_rng(34), 6, 2, 9, 1.0)
    want = verify(**(case | {"target_temperature": np.float32(t32)}))
    for given in (np.float64(t64), t64, np.full(6, t64)):
        got = verify(**(case | {"target_temperature": given}))
        for f in ("status", "accepted", "tokens"):
            assert_equal(getattr(got, f), getattr(want, f), f"{f}, T = {t64!r} as {type(given).__name__}")
    assert np.float32(0.1).view(np.uint32) == 0x3DCCCCCD
