"""Write the golden vectors of SPEC.md, computed by the NumPy reference: pp3/conformance/dyadic24-floor-first-v1.jsonl
(the selector, §2-§8), pp3/conformance/accept-dyadic24-v1.jsonl (the verifier, §11), and the draft trees' (§12)
tree-draw-dyadic24-v1.jsonl, accept-tree-dyadic24-v1.jsonl and walk-tree-dyadic24-v1.jsonl.

Run: python tools/gen_golden.py   (make golden). The files are generated, never edited by hand; tests/test_golden.py
checks that build() and build_accept() reproduce them byte for byte. Every case is deterministic: random data comes
from the raw PCG64 stream (whose output NumPy keeps stable across versions) through exact IEEE arithmetic only (+, -,
*, no libm); drafts are the reference selector's own proposals. Format: pp3/conformance/README.md.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: make pp3 and tools importable

from pp3.reference import (
    ACCEPT_SEMANTIC_ID,
    DEFAULT_TAU,
    SEMANTIC_ID,
    TICKETS,
    K,
    TreeProposal,
    TreeVerdict,
    bf16_bits_to_float32,
    proposal_uniform,
    propose,
    propose_tree,
)
from pp3.testing.call import FORMATS, GIVEN_TEMPERATURE, AcceptCall
from pp3.testing.drafts import (
    BROKEN_DRAFTS,
    REJECT_Q,
    REJECT_SEED_ACCEPT,
    REJECT_SEED_RESIDUAL,
    break_draft,
    drafts,
    point_drafts,
    two_slot_draft,
)
from pp3.testing.golden import (
    ACCEPT_GOLDEN_FILE,
    ACCEPT_TREE_GOLDEN_FILE,
    GOLDEN_FILE,
    TREE_DRAW_GOLDEN_FILE,
    WALK_TREE_GOLDEN_FILE,
    AcceptCase,
    Case,
    Expected,
    TreeDrawCase,
    TreeVerifyCase,
    accept_case_to_json,
    dumps,
    tree_draw_case_to_json,
    tree_verify_case_to_json,
)

F32_MAX = float(np.finfo(np.float32).max)
INF, NAN = float("inf"), float("nan")
U64 = (1 << 64) - 1
MAX_BYTES = 2 * 1024 * 1024


# --- deterministic data --------------------------------------------------------------------------------------------

def raw(key: int, n: int) -> npt.NDArray[np.uint64]:
    """n raw 64-bit words of PCG64(key): a stream NumPy guarantees not to change."""
    return np.random.PCG64(key).random_raw(n)


def unif(key: int, shape: tuple[int, ...]) -> npt.NDArray[np.float64]:
    """Uniform on [0, 1) with 53 random bits, exactly (no rounding)."""
    n = int(np.prod(shape))
    return ((raw(key, n) >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(shape)


def logits_like(key: int, b: int, v: int, scale: float) -> npt.NDArray[np.float32]:
    """Bell-shaped logits (a sum of four uniforms) plus a few large spikes, as a drafter's logits look."""
    u = unif(key, (5, b, v))
    bell: npt.NDArray[np.float64] = (((u[0] + u[1]) + u[2]) + u[3] - 2.0) * scale
    spikes: npt.NDArray[np.float64] = np.where(u[4] < 0.002, 4.0 * scale * u[4] * 500.0, 0.0)
    return (bell + spikes).astype(np.float32)


def u64s(key: int, n: int) -> list[int]:
    return [int(x) for x in raw(key, n)]


def f32(values: Sequence[float] | npt.ArrayLike) -> npt.NDArray[np.float32]:
    return np.asarray(values, dtype=np.float32)


def f32_from_bits(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


# --- cases ---------------------------------------------------------------------------------------------------------

def make_case(
    name: str,
    reason: str,
    logits: npt.NDArray[np.generic],
    temp: Sequence[float] | float = 1.0,
    seed: Sequence[int] | int = 1,
    rnd: Sequence[int] | int = 0,
    pos: Sequence[int] | int = 0,
    tau: float = DEFAULT_TAU,
    dtype: str = "float32",
) -> Case:
    """A case whose expected outputs are the reference's. `logits` is fp32/fp16 values, or uint16 bits for bf16."""
    x = np.atleast_2d(np.asarray(logits))
    b = x.shape[0]

    def rows(v: Sequence[int] | int) -> npt.NDArray[np.uint64]:
        return np.array([v] * b if isinstance(v, int) else list(v), dtype=np.uint64)

    temps = np.array([temp] * b if isinstance(temp, float | int) else list(temp), dtype=np.float32)
    if dtype == "float32":
        bits = x.astype(np.float32).view(np.uint32)
    elif dtype == "float16":
        bits = x.astype(np.float16).view(np.uint16)
    else:
        bits = x.astype(np.uint16)
    case = Case(name=name, reason=reason, dtype=dtype, logits_bits=bits, tau=np.float32(tau), target_temperature=temps,
                seed=rows(seed), round=rows(rnd), position=rows(pos),
                expected=Expected(np.zeros(b, np.int8), np.zeros(b, np.int32), np.zeros((b, K), np.int32),
                                  np.zeros((b, K), np.int32)))
    p = propose(**case.args())
    got = Expected(p.status.astype(np.int8), p.token.astype(np.int32), p.ids.astype(np.int32),
                   p.tickets.astype(np.int32))
    return dataclasses.replace(case, expected=got)


def tie_at_32nd_place(a_id: int, a_val: float, b_id: int, b_val: float, v: int = 48) -> npt.NDArray[np.float32]:
    x = np.full(v, -50.0, dtype=np.float32)
    top = [i for i in range(v - 1, -1, -1) if i not in (a_id, b_id)][:31]
    x[top] = [10.0 - i / 6.0 for i in range(31)]  # 10 down to 5, distinct
    x[a_id], x[b_id] = a_val, b_val
    return x


def logit_with_tickets(target: int) -> float:
    """The fp32 z in (-104, 0] for which the row [z, 0.0] (tau 1) gives slot 0 exactly `target` tickets (bisection
    over bit patterns: for negative fp32 a larger pattern is more negative, and slot 0's tickets fall with z)."""
    def tickets_of(bits: int) -> int:
        p = propose(f32([[f32_from_bits(bits), 0.0]]), 1.0, 0, 0, 0, tau=1.0)
        return int(p.tickets[0, 0])

    enough, too_few = 0x80000000, 0xC2CFFFFF
    while too_few - enough > 1:
        mid = (enough + too_few) // 2
        if tickets_of(mid) >= target:
            enough = mid
        else:
            too_few = mid
    if tickets_of(enough) != target:
        raise RuntimeError(f"no fp32 logit gives slot 0 exactly {target} tickets")
    return f32_from_bits(enough)


def draw_boundary_cases() -> list[Case]:
    """u equal to a cumulative ticket count C_0: the token must be the next slot (u < C_j, not u <= C_j)."""
    def u_of(seed: int) -> int:
        return int(proposal_uniform(np.array([seed], np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64))[0])

    seed = next(s for s in range(1000) if 1 <= u_of(s) < 1 << 23)  # slot 0 (not rank 0) can hold < 2^23 tickets
    u = u_of(seed)
    z = logit_with_tickets(u)
    a = make_case("draw_u_equals_cumulative_boundary",
                  f"u = {u} = C_0 exactly (slot 0 owns [0, C_0)): the token is slot 1, a '<=' draw returns slot 0",
                  f32([[z, 0.0]]), seed=seed, tau=1.0)
    b = make_case("draw_boundary_then_zero_ticket_slot",
                  "u = C_0 = C_1 with a zero-ticket slot 1 between: the token is slot 2; zero-ticket slots own nothing",
                  f32([[z, -1000.0, 0.0]]), seed=seed, tau=1.0)
    for c, token in ((a, 1), (b, 2)):
        assert int(c.expected.tickets[0, 0]) == u and int(c.expected.token[0]) == token, c.name
    return [a, b]


def build_cases() -> list[Case]:
    cases: list[Case] = []
    add = cases.append
    neg_zero = -0.0

    add(make_case("t0_basic", "T0 rows (+0.0 and -0.0 temperature): point mass on the argmax, no random numbers",
                  logits_like(1, 2, 10, 3.0), temp=[0.0, neg_zero], seed=[5, 6]))
    add(make_case("t0_ties_lower_id", "T0 argmax ties go to the lower ID; -0.0 == +0.0 (§4.1)",
                  f32([[1.0, 3.0, 3.0, 2.0], [neg_zero, 0.0, -1.0, -INF], [0.0, neg_zero, -1.0, -INF],
                       [-INF, -2.0, -INF, -2.0]]), temp=0.0))
    add(make_case("support_tie_at_32nd_place",
                  "two entries tie for the 32nd place: the lower ID is in the support (equal values; -0.0 vs +0.0)",
                  np.stack([tie_at_32nd_place(3, 0.5, 9, 0.5), tie_at_32nd_place(2, neg_zero, 4, 0.0),
                            tie_at_32nd_place(2, 0.0, 4, neg_zero)]), seed=[1, 2, 3]))
    add(make_case("signed_zero_weights", "-0.0 and +0.0 logits get equal weights; rank 0 is the lowest ID",
                  f32([[neg_zero, 0.0, neg_zero], [0.0, neg_zero, 0.0]]), tau=1.0, seed=[7, 8]))
    x = np.full((2, 100), -INF, dtype=np.float32)
    x[0, [3, 17, 18, 40, 41, 42, 55, 60, 61, 62, 63, 70, 71, 80, 88, 90, 91, 95, 98, 99]] = logits_like(2, 1, 20, 2.0)
    x[1, 64] = -3.0
    add(make_case("neg_inf_masked_fewer_than_32",
                  "-inf entries are masked; with F < 32 finite entries the support is all of them",
                  x, seed=[11, 12]))
    add(make_case("v1", "V = 1: sampled and T0 rows take the single entry; a -inf row is ZERO_MASS",
                  f32([[2.5], [-F32_MAX], [-INF]]), temp=[1.0, 0.0, 1.0], seed=[1, 2, 3]))
    for v, why in ((31, "support is all 31"), (32, "support is exactly K = 32"), (33, "one entry left out")):
        add(make_case(f"v{v}", f"V = {v}: {why}", logits_like(100 + v, 2, v, 4.0), seed=[v, v + 1], tau=1.0))
    rows = [
        ([0.0, NAN, INF, 1.0], 1.0), ([INF, NAN, -INF, -INF], 1.0), ([INF, -INF, -INF, -INF], 1.0),
        ([1.0, INF, 2.0, 0.0], 0.0), ([-INF, -INF, -INF, -INF], 1.0), ([-INF, -INF, -INF, -INF], NAN),
        ([1.0, 2.0, 3.0, 4.0], NAN), ([1.0, 2.0, 3.0, 4.0], -1.0), ([1.0, 2.0, 3.0, 4.0], -INF),
        ([1.0, 2.0, 3.0, 4.0], -1e-45), ([1.0, NAN, 3.0, 4.0], NAN), ([1.0, NAN, 3.0, 4.0], -1.0),
        ([INF, 1.0, 2.0, 3.0], -INF), ([1.0, 2.0, 3.0, 4.0], INF), ([1.0, 2.0, 3.0, 4.0], neg_zero),
    ]
    add(make_case("status_precedence",
                  "NAN_LOGIT > POS_INF_LOGIT > ZERO_MASS > BAD_TEMPERATURE > OK; +inf temperature samples",
                  f32([r for r, _ in rows]), temp=[t for _, t in rows], seed=list(range(len(rows)))))
    x = logits_like(3, 6, 1000, 3.0)
    nan_bits = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF]
    for r, (where, bits) in enumerate(zip([0, 517, 999, 0, 999], nan_bits, strict=True)):
        x[r, where] = f32_from_bits(bits)
    add(make_case("nan_positions_and_payloads",
                  "NaN (quiet, negative, signalling, payloads) first/middle/last fails the row; the last row is fine",
                  x, temp=[1.0, 0.0, 1.0, -1.0, 1.0, 1.0], seed=list(range(6))))
    x = logits_like(4, 8, 300, 3.0)
    x[2, 7], x[5, :], x[6, 299] = NAN, -INF, INF
    add(make_case("mixed_batch", "T0, sampled and failed rows in one batch; failed rows change nothing else",
                  x, temp=[1.0, 0.0, 1.0, NAN, neg_zero, 1.0, 0.5, 2.0], seed=u64s(5, 8), rnd=u64s(6, 8),
                  pos=u64s(7, 8)))
    ext = [0, 1 << 63, U64]
    combos = [(s, r, p) for s in ext for r in ext for p in ext]
    add(make_case("uint64_extremes", "seed, round and position at 0, 2^63 and 2^64-1 in all 27 combinations",
                  logits_like(8, 27, 40, 3.0), seed=[c[0] for c in combos], rnd=[c[1] for c in combos],
                  pos=[c[2] for c in combos], tau=2.0))
    add(make_case("remainder_to_rank0_slot",
                  "floor counts leave R > 0; rank 0 is slot 1 (neither first nor last), which gets all R tickets",
                  f32([[-1.0, 0.0, -1.0, -2.0, -0.5]]), tau=1.0))
    add(make_case("zero_ticket_members_keep_id",
                  "members whose weight is 0 (e^-200) or a subnormal (e^-100) keep their slot and ID with 0 tickets",
                  f32([[0.0, -200.0, -100.0], [-100.0, 0.0, -150.0], [-INF, 0.0, -200.0]]), tau=1.0, seed=[1, 2, 3]))
    add(make_case("difference_overflows_to_neg_inf",
                  "d = fl32(-FLT_MAX - FLT_MAX) = -inf, so z = -inf and e = 0 (a member with 0 tickets)",
                  f32([[-F32_MAX, F32_MAX], [F32_MAX, -F32_MAX], [F32_MAX, 0.0]]), seed=[1, 2, 3]))
    add(make_case("tau_smallest_subnormal", "tau = 2^-149: every non-maximal member underflows to 0, ties share",
                  f32([[1.0, 1.0, 0.999, -3.0, 1.0], [0.0, 1e-45, 0.0, neg_zero, -1e-45]]), tau=1e-45, seed=[1, 2]))
    add(make_case("tau_flt_max", "tau = FLT_MAX: every member's weight rounds to 1, tickets uniform 2^19",
                  logits_like(9, 2, 33, 5.0), tau=F32_MAX, seed=[1, 2]))
    add(make_case("all_equal_v33", "33 equal logits: IDs 0..31 share 2^24 equally, ID 32 is left out",
                  np.full((1, 33), 1.25, dtype=np.float32), tau=0.5))
    words = raw(10, 4 * 64).astype(np.uint16).reshape(4, 64)
    words[0] &= 0x83FF  # fp16 subnormals and zeros
    words[1:] = np.where((words[1:] & 0x7C00) == 0x7C00, words[1:] & 0xFBFF, words[1:])  # finite
    words[2, 5] = 0xFC00  # -inf
    words[3, 9] = 0x7E00  # NaN
    add(make_case("fp16_rows", "fp16 logits (subnormals, -inf, a NaN row) are widened exactly (§2.1)",
                  words.view(np.float16), dtype="float16", seed=[1, 2, 3, 4]))
    add(make_case("fp16_extremes", "fp16 +-65504, the smallest subnormal 2^-24 and -0.0",
                  np.array([[65504.0, -65504.0, 2.0**-24, -(2.0**-24), neg_zero, 0.0]], dtype=np.float16),
                  dtype="float16", tau=1e-4))
    add(make_case("fp16_negative_extremes", "fp16 logits near -65504 with a sampled tau: the row maximum is -65408",
                  np.array([[-65504.0, -65472.0, -65440.0, -65504.0, -65408.0]], dtype=np.float16), dtype="float16",
                  tau=16.0))
    words = raw(11, 4 * 64).astype(np.uint16).reshape(4, 64)
    words[0] &= 0x807F  # bf16 subnormals and zeros
    words[1:] = np.where((words[1:] & 0x7F80) == 0x7F80, words[1:] & 0xBFFF, words[1:])  # finite
    words[2, :5] = 0xFF80  # -inf
    words[3, 1] = 0x7F80  # +inf
    add(make_case("bf16_rows", "bf16 bit patterns (subnormals, -inf, a +inf row) widened by << 16 (§2.1)",
                  words, dtype="bfloat16", seed=[1, 2, 3, 4]))
    cases.extend(draw_boundary_cases())
    # Left to right, (0.5 + 1 + 0.5) + tiny... stays 2; the pairwise tree adds the tiny weights among themselves
    # first and ends at 2 + 2ulp, which moves floor(0.5 * 2^24 / S) of the non-rank-0 slots 0 and 2.
    add(make_case("pairwise_sum_not_left_fold",
                  "S must be the pairwise tree: a left-to-right sum gives S = 2 exactly and other floor counts",
                  f32([[-0.6931472, 0.0, -0.6931472] + [-38.0] * 29]), tau=1.0))
    add(make_case("pairwise_sum_not_numpy_sum",
                  "S must be the pairwise tree: numpy.sum's 8 strided accumulators and a left fold both give S = 2",
                  f32([[{"h": -0.6931472, "o": 0.0, "t": -38.0, "u": -37.0, "z": -1000.0}[c]
                        for c in "zzhozuzzuthztottuhttuhuzttzutztz"]]), tau=1.0))
    add(make_case("exp_hard_cases",
                  "z = the hardest fp32 inputs of expf (e^z within 1.3-4 fp64 ulps of a binary32 midpoint)",
                  f32([[0.0, f32_from_bits(0xC16912CD), f32_from_bits(0xBBF0EDF1), f32_from_bits(0xBAE0E25C)]]),
                  tau=1.0))
    add(make_case("subnormal_logits", "fp32 subnormal logits: differences and z are subnormal, weights round to 1",
                  f32([[1e-45, 2e-45, 0.0, -1e-45, 1e-40, -1e-38]]), tau=DEFAULT_TAU))
    add(make_case("one_ulp_apart", "logits one ulp apart: the order is by value, weights 1 and 1 - 2^-24",
                  f32([[1.0, np.nextafter(np.float32(1.0), np.float32(2.0)), np.nextafter(np.float32(1.0),
                                                                                          np.float32(0.0))]]),
                  tau=1.0, seed=[3]))
    add(make_case("seed_sweep", "one row, 16 seeds: the drawn token follows u",
                  np.repeat(logits_like(12, 1, 50, 1.0), 16, axis=0), seed=list(range(16)), tau=1.0))
    add(make_case("round_position_sweep", "one row, round and position varied: distinct Philox blocks",
                  np.repeat(logits_like(13, 1, 50, 1.0), 16, axis=0), seed=99, rnd=[i % 4 for i in range(16)],
                  pos=[1000 + i // 4 for i in range(16)], tau=1.0))
    add(make_case("temperature_classes", "target temperature only classifies: +inf, 1e-45, 7 sample alike",
                  np.repeat(logits_like(14, 1, 40, 2.0), 4, axis=0), temp=[INF, 1e-45, 7.0, 0.0], seed=5))
    for v, b, scale, tau in ((1, 4, 3.0, DEFAULT_TAU), (33, 4, 2.0, DEFAULT_TAU), (1000, 4, 4.0, 0.9),
                             (4097, 2, 3.0, DEFAULT_TAU)):
        add(make_case(f"random_v{v}", f"random rows, V = {v}, B = {b}", logits_like(200 + v, b, v, scale),
                      temp=1.0, seed=u64s(300 + v, b), rnd=u64s(400 + v, b), pos=u64s(500 + v, b), tau=tau))
    x = logits_like(15, 2, 4097, 3.0)
    x[:, 40:] = -INF
    add(make_case("random_v4097_mostly_masked", "V = 4097 with only 40 finite entries", x, seed=[1, 2]))
    add(make_case("random_v32000", "one row of a 32000-token vocabulary", logits_like(16, 1, 32000, 3.0),
                  seed=u64s(17, 1), rnd=[5], pos=[12345], tau=DEFAULT_TAU))
    add(make_case("large_magnitudes", "logits near +-1e38: differences overflow or are huge, z reaches -inf",
                  f32([[3e38, 2.9e38, -3e38, 1e38, 0.0], [-3e38, -2.99e38, -3e38, -1e38, -INF]]), seed=[1, 2]))
    return cases


# --- the verifier's cases (§11) ------------------------------------------------------------------------------------


def accept_case(
    name: str,
    reason: str,
    target: npt.NDArray[np.generic],
    draft: dict[str, npt.NDArray[np.generic]],
    temp: Sequence[float] | float = 1.0,
    seed: Sequence[int] | int = 1,
    rnd: Sequence[int] | int = 0,
    pos: Sequence[int] | int = 0,
    dtype: str = "float32",
) -> AcceptCase:
    """A verifier case whose expected outputs are the reference's. ``target`` is [B, D+1, V] fp32/fp16 values, or
    uint16 bits for bf16."""
    b = target.shape[0]
    if dtype == "bfloat16":
        bits, fmt = np.asarray(target, dtype=np.uint16), FORMATS["bf16"]
    elif dtype == "float16":
        bits, fmt = np.asarray(target, dtype=np.float16).view(np.uint16), FORMATS["fp16"]
    else:
        bits, fmt = np.asarray(target, dtype=np.float32).view(np.uint32), FORMATS["fp32"]

    def rows(v: Sequence[int] | int) -> npt.NDArray[np.uint64]:
        return np.array([v] * b if isinstance(v, int) else list(v), dtype=np.uint64)

    temps = np.array([temp] * b if isinstance(temp, float | int) else list(temp), dtype=np.float32)
    d = bits.shape[1] - 1
    call = AcceptCall(
        fmt, bits.copy(), temps,
        np.asarray(draft["draft_tokens"], dtype=np.int32).reshape(b, d),
        np.asarray(draft["draft_status"], dtype=np.int8).reshape(b, d),
        np.asarray(draft["draft_ids"], dtype=np.int32).reshape(b, d, K),
        np.asarray(draft["draft_tickets"], dtype=np.int32).reshape(b, d, K),
        rows(seed), rows(rnd), rows(pos),
    )
    return AcceptCase(name, reason, call, call.run_reference())


def sampled_draft(key: int, b: int, d: int, v: int, temp: Sequence[float] | float, seed: Sequence[int],
                  rnd: int, pos: Sequence[int], tau: float = 1.0
                  ) -> tuple[npt.NDArray[np.float32], dict[str, npt.NDArray[Any]]]:
    """Target logits [B, D+1, V] and the reference selector's proposals from drafter logits near them."""
    target = logits_like(key, b * (d + 1), v, 2.0).reshape(b, d + 1, v)
    noise = logits_like(key + 1, b * d, v, 1.0).reshape(b, d, v)
    draft_logits = (target[:, :d] + noise).astype(np.float32)
    t = np.broadcast_to(np.asarray(temp, dtype=np.float32), (b,))
    return target, drafts(draft_logits, t, np.array(seed, np.uint64), rnd, np.array(pos, np.uint64), tau)


def build_accept_cases() -> list[AcceptCase]:
    cases: list[AcceptCase] = []
    add = cases.append
    seeds, poss = u64s(600, 6), [int(p) >> 24 for p in u64s(601, 6)]
    target, draft = sampled_draft(610, 6, 3, 40, 1.0, seeds, 2, poss)
    add(accept_case("sampled_rounds", "sampled rows, depth 3, V = 40: acceptance (§11.6), the correction from the "
                    "residual after a rejection and the bonus after full acceptance (§11.7)",
                    target, draft, seed=seeds, rnd=2, pos=poss))
    target, draft = sampled_draft(620, 4, 5, 300, [0.5, 2.0, INF, 1.0], seeds[:4], 7, poss[:4], tau=DEFAULT_TAU)
    add(accept_case("sampled_depth5_temperatures", "depth 5, V = 300, target temperatures 0.5, 2, +inf and 1 "
                    "(+inf: uniform over the finite logits)", target, draft, temp=[0.5, 2.0, INF, 1.0],
                    seed=seeds[:4], rnd=7, pos=poss[:4]))
    x = logits_like(630, 4 * 3, 33, 2.0).reshape(4, 3, 33)
    x[1, :, :] = np.round(x[1, :, :])  # ties: the argmax is the lowest ID among equal maxima
    g = x.argmax(axis=2)
    toks = g[:, :2].copy()
    toks[2, 1] = (toks[2, 1] + 1) % 33  # row 2 rejects at draft 1, row 3 at draft 0
    toks[3, 0] = (toks[3, 0] + 5) % 33
    add(accept_case("t0_rows", "T0 rows (+0.0, -0.0): accept iff the draft is the argmax, then the argmax; no draws",
                    x, point_drafts(toks), temp=[0.0, -0.0, 0.0, -0.0], seed=[1, 2, 3, 4]))
    x = np.full((3, 3, 40), -200.0, dtype=np.float32)
    x[:, :, 7] = 0.0  # P = 2^40 on token 7 at every position: a point-mass draft there is always accepted
    add(accept_case("bonus_after_full_acceptance", "P(7) = 2^40 and q a point mass on 7: every draft is accepted, "
                    "the bonus is drawn from p_D (the point mass)", x, point_drafts(np.full((3, 2), 7)),
                    seed=[5, 6, 7]))
    x = logits_like(640, 2 * 2, 40, 2.0).reshape(2, 2, 40)
    x[:, 0, 11] = -INF
    add(accept_case("draft_forbidden_by_target", "the target gives the drafted token 0 tickets (-inf logit): "
                    "always rejected, never the correction", x, two_slot_draft(2, 1, 11, 1 << 23, 3), seed=[8, 9]))
    add(accept_case("greedy_drafts_sampled_target", "point-mass drafts against a sampled target: the acceptance "
                    "bound is s = 2^40 (Q = 2^24)", logits_like(650, 3 * 3, 50, 2.0).reshape(3, 3, 50),
                    point_drafts(np.array([[1, 2], [3, 4], [5, 6]])), seed=u64s(651, 3)))
    add(accept_case("acceptance_word_rejected", f"Q = {REJECT_Q} and seed {REJECT_SEED_ACCEPT}: the first word of "
                    "the acceptance stream is rejected by Lemire's test, the second decides (§11.5)",
                    np.zeros((1, 2, 5), np.float32), two_slot_draft(1, 1, 1, REJECT_Q, 3), seed=REJECT_SEED_ACCEPT))
    x = np.zeros((1, 2, 5), np.float32)
    x[0, 0, 1] = -INF
    add(accept_case("residual_word_rejected", f"seed {REJECT_SEED_RESIDUAL}: the draft is rejected and the "
                    "residual stream's first word is tried against its own bound (§11.5, §11.7)",
                    x, two_slot_draft(1, 1, 1, REJECT_Q, 3), seed=REJECT_SEED_RESIDUAL))
    target, draft = sampled_draft(660, 4, 3, 40, 1.0, seeds[:4], 1, poss[:4])
    draft["draft_status"][0, 0] = 1  # n = 0: the bonus from p_0, every later target row ignored
    target[0, 1:, 0] = NAN
    draft["draft_status"][1, 1] = 3  # n = 1
    target[1, 2:, :] = -INF
    draft["draft_status"][2, 2] = 2  # n = 2
    add(accept_case("failed_draft_truncates", "a failed draft j truncates the round to n = j drafts; target rows "
                    "after n are ignored, even bad ones (§11.3 step 1)", target, draft, seed=seeds[:4], rnd=1,
                    pos=poss[:4]))
    target, draft = sampled_draft(670, 5, 2, 40, 1.0, seeds[:5], 0, poss[:5])
    target[0, 1, 3] = NAN
    target[1, 0, 9] = INF
    target[2, 2, :] = -INF
    target[3, 2, 5] = NAN
    target[3, 1, 6] = INF
    add(accept_case("target_row_status", "the class of the lowest bad target row j <= n: NaN, +inf, zero mass "
                    "(the bonus row too), the lower row wins (§11.3 step 2)", target, draft, seed=seeds[:5],
                    pos=poss[:5]))
    target, draft = sampled_draft(680, 5, 2, 40, 1.0, seeds[:5], 0, poss[:5])
    add(accept_case("bad_temperature", "NaN, -1, -inf, -2^-149 target temperatures fail the row; -0.0 is T0",
                    target, draft, temp=[NAN, -1.0, -INF, -1e-45, -0.0], seed=seeds[:5], pos=poss[:5]))
    for i, kind in enumerate(BROKEN_DRAFTS):
        target, draft = sampled_draft(700 + 10 * i, 2, 2, 40, 1.0, seeds[:2], 0, poss[:2])
        break_draft(kind, draft["draft_ids"], draft["draft_tickets"], draft["draft_tokens"])
        add(accept_case(f"bad_draft_{kind}", f"draft 0 of row 0 is invalid ({kind.replace('_', ' ')}): BAD_DRAFT; "
                        "row 1 is verified (§11.3 step 3)", target, draft, seed=seeds[:2], pos=poss[:2]))
    ext = [0, 1 << 63, U64]
    target, draft = sampled_draft(800, 3, 2, 40, 1.0, ext, int(U64), [U64, U64 - 1, 0])
    add(accept_case("uint64_extremes", "seed 0, 2^63, 2^64-1; round 2^64-1; positions that wrap mod 2^64",
                    target, draft, seed=ext, rnd=int(U64), pos=[U64, U64 - 1, 0]))
    target, draft = sampled_draft(810, 3, 2, 64, 1.0, seeds[:3], 4, poss[:3])
    add(accept_case("fp16_target", "fp16 target logits, widened exactly (§2.1)", target.astype(np.float16), draft,
                    seed=seeds[:3], rnd=4, pos=poss[:3], dtype="float16"))
    target, draft = sampled_draft(820, 3, 2, 64, 1.0, seeds[:3], 4, poss[:3])
    bf16 = (target.view(np.uint32) >> np.uint32(16)).astype(np.uint16)  # truncation: a value generator
    bf16[0, 1, :4] = 0x0001  # subnormals
    add(accept_case("bf16_target", "bf16 target logits (subnormals included), widened by << 16 (§2.1)", bf16, draft,
                    seed=seeds[:3], rnd=4, pos=poss[:3], dtype="bfloat16"))
    x = np.array([[[1.5], [-3.0]], [[0.0], [0.0]]], dtype=np.float32)
    add(accept_case("v1", "V = 1: the only token is accepted with P = 2^40, the bonus is token 0",
                    x, point_drafts(np.zeros((2, 1), np.int64)), temp=[1.0, 0.0]))
    cases.extend(clarified_cases())
    cases.extend(implementer_cases())
    return cases


def clarified_cases() -> list[AcceptCase]:
    """Cases for what §11 states explicitly since the cases above were written (each reason names its clause);
    appended, so that every earlier line of the file stays as it was."""
    cases: list[AcceptCase] = []
    add = cases.append
    x = np.array([[[F32_MAX, -F32_MAX]] * 2] * 2 + [[[0.0, -F32_MAX]] * 2] * 2, dtype=np.float32)
    add(accept_case("inf_temperature_overflowing_difference",
                    "T = +inf, logits [FLT_MAX, -FLT_MAX]: d_1 = fl32(-FLT_MAX - FLT_MAX) = -inf, so e_1 = 0 and "
                    "P(1) = 0: a draft of token 1 (Q(1) = 2^23) is always rejected and the correction is token 0 "
                    "(§11.4 P3); rows 2-3, [0, -FLT_MAX], have a finite difference: P uniform, the draft accepted",
                    x, two_slot_draft(4, 1, 1, 1 << 23, 0), temp=INF, seed=[1, 2, 3, 4]))
    target, draft = sampled_draft(900, 5, 3, 40, 1.0, [11, 12, 13, 14, 15], 0, [0, 0, 0, 0, 0])
    draft["draft_status"][0, 0] = 7  # n = 0: any non-zero status ends the draft, not only §3's 1 .. 4
    draft["draft_status"][1, 1] = -1  # n = 1; drafts 1 and 2 are garbage of the right type, ignored
    draft["draft_tokens"][1, 1:] = [(1 << 31) - 1, -(1 << 31)]
    draft["draft_ids"][1, 1:] = (1 << 31) - 1
    draft["draft_tickets"][1, 1] = (1 << 31) - 1
    draft["draft_tickets"][1, 2] = -(1 << 31)
    draft["draft_ids"][2, 0, K - 1] = (1 << 31) - 1  # an ID >= V: BAD_DRAFT
    draft["draft_tokens"][3, 0] = -(1 << 31)  # a token in no slot: BAD_DRAFT
    draft["draft_tickets"][4, 0, :2] += np.array([-(1 << 25), 1 << 25], dtype=np.int32)  # a negative ticket
    add(accept_case("draft_values_are_row_data",
                    "every int32 / int8 draft value is row data (§11.2): statuses 7 and -1 truncate, an ID "
                    "2^31-1 >= V, a token -2^31 and a negative ticket make the draft invalid (BAD_DRAFT); garbage "
                    "after n is ignored",
                    target, draft, seed=[11, 12, 13, 14, 15]))
    x = logits_like(910, 4 * 3, 40, 2.0).reshape(4, 3, 40)
    g = x.argmax(axis=2)  # logits_like rows have no ties at the maximum
    draft = point_drafts(g[:, :2])
    draft["draft_tickets"][0, 0, 0] += 1  # x_0 = g_0, but the tickets sum to 2^24 + 1
    draft["draft_ids"][1, 1, 0] = (g[1, 1] + 1) % 40  # x_1 = g_1 is in no slot
    draft["draft_ids"][3, 1, 0] = (g[3, 1] + 1) % 40  # the same fault at j = 1 >= n = 1: ignored
    draft["draft_status"][3, 1] = 1
    add(accept_case("bad_draft_t0_rows",
                    "T0 rows validate their drafts too (§11.3): x_0 = g_0 with tickets summing to 2^24 + 1, or "
                    "x_1 = g_1 in no slot, is BAD_DRAFT; row 2 is valid; row 3 has the fault at j >= n, ignored",
                    x, draft, temp=[0.0, -0.0, 0.0, -0.0], seed=[1, 2, 3, 4]))
    target, draft = sampled_draft(920, 6, 3, 40, 1.0, [21, 22, 23, 24, 25, 26], 0, [0] * 6)
    draft["draft_tickets"][:, 0, 0] += 1  # draft 0 of every row is invalid
    target[0, 2, 5] = NAN  # n = 3: target row 2 decides, NAN_LOGIT
    target[1, 3, 7] = INF  # the bonus row n = 3: POS_INF_LOGIT
    target[2, 2, 5] = NAN
    draft["draft_status"][2, 1] = 4  # n = 1: target row 2 is ignored, BAD_DRAFT
    target[3, 1, :] = -INF  # ZERO_MASS
    add(accept_case("target_class_before_lower_invalid_draft",
                    "draft 0 is invalid in every row, yet a bad target row j <= n decides (§11.3): NaN at j = 2 of "
                    "n = 3 (NAN_LOGIT), +inf in the bonus row (POS_INF_LOGIT), -inf row 1 (ZERO_MASS); a NaN above "
                    "n = 1 is ignored (BAD_DRAFT); a NaN temperature (BAD_TEMPERATURE); the invalid draft alone",
                    target, draft, temp=[1.0, 1.0, 1.0, 1.0, NAN, 1.0], seed=[21, 22, 23, 24, 25, 26]))
    target, draft = sampled_draft(930, 4, 3, 40, 1.0, [31, 32, 33, 34], 0, [0] * 4)
    draft["draft_status"][:, 1] = 1  # n = 1 in every row: the bonus (or the correction of draft 0) at index <= 1
    garbage = np.array([-(1 << 31), -1, (1 << 31) - 1, -(1 << 16)], np.int32)
    draft["draft_tickets"][:, 1] = garbage[:, None]  # the failed draft's own slots
    draft["draft_ids"][:2, 1] = np.arange(K, dtype=np.int32) + 3  # IDs of the row, where Q* would read them
    add(accept_case("failed_draft_at_n_holds_garbage",
                    "draft n = 1 failed and its own slots hold garbage (negative, huge tickets; in-row IDs): it is "
                    "ignored like every draft after it (§11.3 step 1), so the bonus at index 1 is a draw from P_1 "
                    "and never reads Q_1",
                    target, draft, seed=[31, 32, 33, 34]))
    return cases


def given_temperature_case(name: str, reason: str, dtype: str, bits: Sequence[int], key: int) -> AcceptCase:
    """Sampled rows at V = 40, depth 2, whose target temperatures are given as ``dtype`` (raw ``bits``): the
    call's fp32 temperatures are their rounding (SPEC.md §11.2), its drafts the reference selector's at those, and
    its expected outputs the reference's on the temperatures as given (a construction check: the same as on their
    fp32 values)."""
    bits_type, numpy_type, _ = GIVEN_TEMPERATURE[dtype]
    given = np.array(bits, dtype=bits_type)
    with np.errstate(all="ignore"):
        t32 = bf16_bits_to_float32(given) if numpy_type is None else given.view(numpy_type).astype(np.float32)
    b = given.size
    seeds = u64s(key, b)
    target, draft = sampled_draft(key + 1, b, 2, 40, t32.tolist(), seeds, 3, [0] * b)
    call = AcceptCall.of(target, t32, np.array(seeds, np.uint64), 3, 0, None, "", **draft).replace(
        given_temperature=(dtype, given))
    expected = call.run_reference()
    as_fp32 = dataclasses.replace(call, given_temperature=None).run_reference()
    if any(not np.array_equal(getattr(expected, f), getattr(as_fp32, f)) for f in ("status", "accepted", "tokens")):
        raise AssertionError(f"{name}: the temperatures as given and as fp32 verify differently")
    return AcceptCase(name, reason, call, expected)


def implementer_cases() -> list[AcceptCase]:
    """Cases for what an implementation written from SPEC.md §11's text alone got wrong (each reason names its
    clause); appended, so that every earlier line of the file stays as it was."""
    cases: list[AcceptCase] = []
    f32_below_2_103 = float(np.nextafter(np.float32(2.0**103), np.float32(0)))  # 2^103 - 2^79
    ms = [1.0, 1.0, 1.0, 2.0**102, 2.0**102, f32_below_2_103, f32_below_2_103, 2.0**103]
    x = np.array([[[m, -F32_MAX]] * 2 for m in ms], dtype=np.float32)
    case = accept_case("inf_temperature_difference_rounds_finite",
                       "T = +inf, logits [m, -FLT_MAX] with 0 < m < 2^103: the real difference -FLT_MAX - m is below "
                       "-FLT_MAX, but P2 rounds it to -FLT_MAX, finite, so P is uniform (2^39 each) and a point-mass "
                       "draft of token 1 is accepted about half the time (§11.4 P3); the last row, m = 2^103, is "
                       "the tie -(FLT_MAX + 2^103), which rounds to -inf: P(1) = 0, always rejected",
                       x, point_drafts(np.ones((len(ms), 1), np.int64)), temp=INF, seed=list(range(1, len(ms) + 1)))
    finite = case.expected.accepted[:-1]
    if not ((finite == 1).any() and (finite == 0).any() and case.expected.accepted[-1] == 0):
        raise AssertionError("inf_temperature_difference_rounds_finite: the rows do not tell the readings apart")
    cases.append(case)
    cases.append(given_temperature_case(
        "temperature_given_float64",
        "float64 target temperatures, rounded to fp32 first (§11.2, RNE): -1e-50 and -2^-150 are -0.0 (T0, not "
        "BAD_TEMPERATURE), 2^-150 is +0.0 (a tie to even: T0) but 2^-150 (1 + 2^-52) is 2^-149 (sampled), 1e39 is "
        "+inf (sampled, P3) and -1e39 is -inf, 0.1 is 0x3dcccccd, 1 + 2^-24 ties to 1 and 1 + 3 2^-24 to "
        "1 + 2^-22, NaN",
        "float64",
        [int(np.float64(t).view(np.uint64)) for t in (-1e-50, -(2.0**-150), 2.0**-150, 2.0**-150 * (1 + 2.0**-52),
                                                      1e39, -1e39, 0.1, 1 + 2.0**-24, 1 + 3 * 2.0**-24, NAN)],
        940))
    cases.append(given_temperature_case(
        "temperature_given_float16",
        "fp16 target temperatures, widened exactly (§11.2): 0.1 as fp16 (0x2e66), -0.0 (T0), the smallest "
        "subnormal 2^-24 (sampled), +inf, 65504, NaN and -1 (BAD_TEMPERATURE), 0.5",
        "float16", [0x2E66, 0x8000, 0x0001, 0x7C00, 0x7BFF, 0x7E00, 0xBC00, 0x3800], 950))
    cases.append(given_temperature_case(
        "temperature_given_bfloat16",
        "bf16 target temperatures, widened by << 16 (§11.2): 0x3dcd (0.10009765625), -0.0 (T0), the subnormal "
        "0x0001 (2^-133, sampled), +inf, the largest finite bf16, a NaN and -1 (BAD_TEMPERATURE), 1",
        "bfloat16", [0x3DCD, 0x8000, 0x0001, 0x7F80, 0x7F7F, 0xFFC1, 0xBF80, 0x3F80], 960))
    return cases


def build_accept() -> str:
    text = "".join(accept_case_to_json(c) + "\n" for c in build_accept_cases())
    if len(text.encode()) > MAX_BYTES:
        raise RuntimeError(f"accept golden file would be {len(text.encode())} bytes > {MAX_BYTES}")
    return text


def build() -> str:
    text = dumps(build_cases())
    if len(text.encode()) > MAX_BYTES:
        raise RuntimeError(f"golden file would be {len(text.encode())} bytes > {MAX_BYTES}")
    return text


# --- the draft trees' cases (§12) ----------------------------------------------------------------------------------

TREE_2X2 = [-1, 0, 0, 1, 1, 2, 2]
TREE_421 = [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, *range(5, 13)]
TREE_WIDE8 = [-1] + [0] * 8
TREE_CHAIN4 = [-1, 0, 1, 2, 3]
TREE_UNEVEN = [-1, 0, 0, 0, 1, 1, 3]  # node 2 is a leaf at depth 1; nodes 1 and 3 have 2 and 1 children


def _bits(values: npt.NDArray[np.generic], dtype: str) -> npt.NDArray[Any]:
    """fp32 / fp16 values as raw bits, or uint16 bf16 bits as they are."""
    if dtype == "bfloat16":
        return np.asarray(values, dtype=np.uint16)
    if dtype == "float16":
        return np.asarray(values, dtype=np.float16).view(np.uint16)
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def _rows(v: Sequence[int] | int, b: int) -> npt.NDArray[np.uint64]:
    return np.array([v] * b if isinstance(v, int) else list(v), dtype=np.uint64)


def _temps(temp: Sequence[float] | float, b: int) -> npt.NDArray[np.float32]:
    return np.array([temp] * b if isinstance(temp, float | int) else list(temp), dtype=np.float32)


def tree_draw_case(name: str, reason: str, logits: npt.NDArray[np.generic], parents: list[int], nodes: Sequence[int],
                   temp: Sequence[float] | float = 1.0, seed: Sequence[int] | int = 1, rnd: Sequence[int] | int = 0,
                   pos: Sequence[int] | int = 0, tau: float = 1.0, children: str = "sampled",
                   dtype: str = "float32") -> TreeDrawCase:
    """A propose_tree case ([B, M, V] logits for the M ``nodes``) whose expected outputs are the reference's."""
    b = logits.shape[0]
    case = TreeDrawCase(name, reason, dtype, _bits(logits, dtype).copy(), _temps(temp, b), _rows(seed, b),
                        _rows(rnd, b), _rows(pos, b), parents, list(nodes), np.float32(tau), children,
                        TreeProposal(np.zeros(0, np.int8), np.zeros(0, np.int32), np.zeros(0, np.int32),
                                     np.zeros(0, np.int32)))
    return dataclasses.replace(case, expected=case.run())


def tree_logits(key: int, b: int, n: int, v: int, scale: float = 2.0) -> npt.NDArray[np.float32]:
    return logits_like(key, b * n, v, scale).reshape(b, n, v)


def drafted(key: int, parents: list[int], b: int, v: int, temp: Sequence[float] | float, seed: Sequence[int],
            rnd: int, pos: Sequence[int], children: str = "sampled", noise: float = 1.0
            ) -> tuple[npt.NDArray[np.float32], dict[str, npt.NDArray[Any]]]:
    """Target logits [B, N+1, V] and a tree drafted by the reference from drafter logits near them (node u's
    drafter row: the target's row u plus noise; every node in one call)."""
    n1 = len(parents)
    target = tree_logits(key, b, n1, v)
    drafter = (target + tree_logits(key + 1, b, n1, v, noise)).astype(np.float32)
    prop = propose_tree(drafter, _temps(temp, b), _rows(seed, b), rnd, _rows(pos, b), parents, np.arange(n1), 1.0,
                        children)  # type: ignore[arg-type]
    return target, {"draft_tokens": prop.tokens.copy(), "draft_status": prop.status.copy(),
                    "draft_ids": prop.ids.copy(), "draft_tickets": prop.tickets.copy()}


def tree_verify_case(name: str, reason: str, target: npt.NDArray[np.generic], parents: list[int],
                     draft: dict[str, npt.NDArray[Any]], temp: Sequence[float] | float = 1.0,
                     seed: Sequence[int] | int = 1, rnd: Sequence[int] | int = 0, pos: Sequence[int] | int = 0,
                     dtype: str = "float32", walk: bool = False) -> TreeVerifyCase:
    """A verify_tree (or, with ``walk``, verify_walk) case whose expected outputs are the reference's."""
    b = target.shape[0]
    case = TreeVerifyCase(
        name, reason, dtype, _bits(target, dtype).copy(), _temps(temp, b), parents,
        np.asarray(draft["draft_tokens"], dtype=np.int32), np.asarray(draft["draft_status"], dtype=np.int8),
        None if walk else np.asarray(draft["draft_ids"], dtype=np.int32),
        None if walk else np.asarray(draft["draft_tickets"], dtype=np.int32),
        _rows(seed, b), _rows(rnd, b), _rows(pos, b),
        TreeVerdict(np.zeros(0, np.int8), np.zeros(0, np.int32), np.zeros((0, 0), np.int32),
                    np.zeros((0, 0), np.int32)),
    )
    return dataclasses.replace(case, expected=case.run())


def build_tree_draw_cases() -> list[TreeDrawCase]:
    cases: list[TreeDrawCase] = []
    add = cases.append
    seeds = u64s(1000, 8)
    add(tree_draw_case("root_of_2x2", "the root of a 2x2 tree: two children drawn without replacement from the "
                       "node's tickets (§12.4 D4) at T = 1, 0.5, 2, +inf", tree_logits(1001, 4, 1, 40), TREE_2X2, [0],
                       temp=[1.0, 0.5, 2.0, INF], seed=seeds[:4], rnd=3, pos=[0, 5, 1 << 40, 7]))
    add(tree_draw_case("level_1_of_2x2", "the two depth-1 nodes of a 2x2 tree in one call: each on its own tree "
                       "stream (position + 1, columns 0 and 1)", tree_logits(1002, 4, 2, 40), TREE_2X2, [1, 2],
                       seed=seeds[:4], rnd=3, pos=[0, 5, 1 << 40, 7]))
    add(tree_draw_case("every_node_of_4_2_1", "all 21 nodes of a 4-2-1 tree in one call, leaves included (their "
                       "slots are computed, nothing is drawn)", tree_logits(1003, 2, 21, 50), TREE_421,
                       range(21), seed=seeds[:2], rnd=9, pos=[100, 200]))
    add(tree_draw_case("wide8_temperatures", "8 children of the root drawn without replacement at T = 0.5, 1, 2, "
                       "+inf; a T0 row takes the first 8 in the §4.1 order with D3's slots",
                       tree_logits(1004, 5, 1, 40), TREE_WIDE8, [0], temp=[0.5, 1.0, 2.0, INF, 0.0],
                       seed=seeds[:5]))
    add(tree_draw_case("top_k_children", "children = \"top-k\": the first k in the §4.1 order, no random numbers; "
                       "the slots are still the node's q (§5) at sampled temperatures", tree_logits(1005, 3, 1, 40),
                       TREE_WIDE8, [0], temp=[1.0, 2.0, 0.0], seed=seeds[:3], children="top-k"))
    ties = f32([[1.0, 3.0, 3.0, 2.0, 3.0, -0.0, 0.0, 3.0], [0.0, -0.0, 0.0, -0.0, -1.0, -1.0, 5.0, -INF],
                [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]])[:, None, :]
    for children in ("sampled", "top-k"):
        add(tree_draw_case(f"ties_{children.replace('-', '_')}", f"equal logits and -0.0 = +0.0 (§4.1): ranked "
                           f"children and T0 slots go to the lower ID; children = {children}", ties,
                           [-1, 0, 0, 0, 0], [0], temp=[0.0, 1.0, 0.5], seed=[1, 2, 3], children=children))
    x = np.full((4, 1, 30), -INF, dtype=np.float32)
    x[:, 0, [2, 5, 11, 17, 23, 29]] = tree_logits(1006, 4, 1, 6)[:, 0]
    add(tree_draw_case("neg_inf_masks_k_equals_the_support", "-inf masks: 6 finite entries and 6 children: k "
                       "equal to the support, drawn (sampled), ranked (T0) and top-k", x, [-1] + [0] * 6, [0],
                       temp=[1.0, 2.0, 0.0, 1.0], seed=seeds[:4]))
    x = f32([[0.0, -1.0, -200.0, -INF, -INF], [0.0, -1.0, -2.0, -INF, -INF], [0.0, -1.0, -2.0, -INF, -INF],
             [0.0, -1.0, -2.0, -3.0, -INF]])[:, None, :]
    add(tree_draw_case("small_support", "k = 3 children: a member with 0 tickets (e^-200) leaves 2 drawable slots "
                       "(SMALL_SUPPORT, §12.4 D2); a T0 row with F = 3 gives them; a sampled row with F = 3 draws "
                       "all three; F = 4 leaves one", x, [-1, 0, 0, 0], [0], temp=[1.0, 0.0, 1.0, 1.0],
                       seed=seeds[:4]))
    add(tree_draw_case("small_support_top_k", "top-k children need min(K, F) >= k entries: F = 3 < 4 is "
                       "SMALL_SUPPORT; zero-ticket members are ranked children", f32([[0.0, -1.0, -200.0, -INF],
                                                                                   [0.0, -200.0, -300.0, -1.0]])
                       [:, None, :], [-1, 0, 0, 0, 0], [0], temp=[1.0, 1.0], children="top-k"))
    x = tree_logits(1007, 6, 3, 12)
    x[0, 0, 4] = NAN
    x[1, 1, 0] = INF
    x[2, 2, :] = -INF
    x[4, 1, 7] = f32_from_bits(0x7FC00001)
    add(tree_draw_case("failed_nodes", "a NaN, +inf or all -inf row fails its node only (status 1-3, empty slots, "
                       "children -1); a NaN or negative temperature fails every node of its request",
                       x, TREE_2X2, [0, 1, 2], temp=[1.0, 1.0, 1.0, NAN, 0.0, -1.0], seed=seeds[:6]))
    x = np.zeros((3, 1, 40), dtype=np.float32)
    x[:, 0, 17] = 10.0  # e^-10 2^24 / S: about 760 tickets on each of the 31 others, the rest on token 17
    add(tree_draw_case("child_with_the_largest_tickets", "one slot holds 99.9% of the 2^24 tickets: the first child "
                       "is it in almost every draw, the others come from the few tickets left", x, [-1, 0, 0, 0],
                       [0], seed=seeds[:3]))
    ext = [0, 1 << 63, U64]
    add(tree_draw_case("uint64_extremes_wrap", "seed, round 0 / 2^63 / 2^64-1; position 2^64-1: the depth-1 nodes' "
                       "children are drawn at position 0 (mod 2^64)", tree_logits(1008, 3, 2, 40), TREE_2X2, [1, 2],
                       seed=ext, rnd=ext[::-1], pos=[U64, U64, U64 - 1]))
    add(tree_draw_case("fp16_logits", "fp16 drafter logits, widened exactly (§2.1)",
                       tree_logits(1009, 2, 3, 40).astype(np.float16), TREE_2X2, [0, 1, 2], seed=[1, 2],
                       dtype="float16"))
    add(tree_draw_case("bf16_logits", "bf16 drafter logits (bits << 16, §2.1)",
                       (tree_logits(1010, 2, 3, 40).view(np.uint32) >> np.uint32(16)).astype(np.uint16), TREE_2X2,
                       [0, 1, 2], seed=[1, 2], dtype="bfloat16"))
    add(tree_draw_case("chain_of_1", "k = 1 at every node: the slots are the selector's (§7), the child a draw of "
                       "the selector's law from DOMAIN_TREE words (§12.4 Chains); a request of 40 equal logits",
                       np.concatenate([tree_logits(1011, 3, 4, 40), np.zeros((1, 4, 40), np.float32)]),
                       TREE_CHAIN4, range(4), seed=[1, 2, 3, 4]))
    return cases


def build_tree_accept_cases() -> list[TreeVerifyCase]:
    cases: list[TreeVerifyCase] = []
    add = cases.append
    seeds, poss = u64s(2000, 8), [int(p) >> 24 for p in u64s(2001, 8)]
    for name, parents, b in (("2x2", TREE_2X2, 8), ("4_2_1", TREE_421, 4), ("uneven", TREE_UNEVEN, 6)):
        target, draft = drafted(2010 + b, parents, b, 40, 1.0, seeds[:b], 2, poss[:b])
        add(tree_verify_case(f"sampled_{name}", f"a sampled {name.replace('_', '-')} tree, T = 1, V = 40: children "
                             "tested in draw order against the floored residual (§12.6 N1-N4), descent into the "
                             "accepted child, the correction (N5) or the bonus at a final node", target, parents,
                             draft, seed=seeds[:b], rnd=2, pos=poss[:b]))
    temps = [0.5, 1.0, 2.0, INF] * 2
    target, draft = drafted(2020, TREE_WIDE8, 8, 40, temps, seeds, 4, poss)
    add(tree_verify_case("sampled_wide8_temperatures", "8 siblings at T = 0.5, 1, 2, +inf: up to 8 tests per node, "
                         "the later ones in N3's second case", target, TREE_WIDE8, draft, temp=temps, seed=seeds,
                         rnd=4, pos=poss))
    target, draft = drafted(2030, TREE_WIDE8, 8, 40, 1.0, seeds, 5, poss, noise=6.0)
    add(tree_verify_case("far_drafter_many_rejections", "a drafter far from the target: most siblings are rejected, "
                         "N3's second case with bounds Q'(c) Σ up to 2^64 (Lemire rejects a word with probability up "
                         "to 1/2, §12.3), residuals renormalised by N1", target, TREE_WIDE8, draft, seed=seeds, rnd=5,
                         pos=poss))
    for name, parents in (("2x2", TREE_2X2), ("4_2_1", TREE_421)):
        target, draft = drafted(2040 + len(parents), parents, 4, 40, 0.0, seeds[:4], 0, poss[:4], noise=0.3)
        add(tree_verify_case(f"t0_{name}", "T0 rows (+0.0, -0.0): ranked children with D3's slots; descend into the "
                             "child that is the target's argmax, else emit it (§12.6 T0)", target, parents, draft,
                             temp=[0.0, -0.0, 0.0, -0.0], seed=seeds[:4], pos=poss[:4]))
    target, draft = drafted(2050, TREE_CHAIN4, 6, 40, 1.0, seeds[:6], 1, poss[:6])
    add(tree_verify_case("chain", "a chain of depth 4 (§12.10): §11 bit for bit, path = 1 .. a", target, TREE_CHAIN4,
                         draft, seed=seeds[:6], rnd=1, pos=poss[:6]))
    target, draft = drafted(2060, TREE_2X2, 5, 40, 1.0, seeds[:5], 0, poss[:5])
    draft["draft_status"][0, 0] = 1  # the root failed: the bonus from P_0
    draft["draft_status"][1, 1] = 6  # node 1 failed: its children 3, 4 are not live ...
    target[1, 3:5, 0] = NAN  # ... and their NaN target rows are ignored
    draft["draft_tokens"][1, 3:5] = [-(1 << 31), (1 << 31) - 1]
    draft["draft_status"][2, 2] = 3  # node 2 failed: children 5, 6 garbage
    draft["draft_ids"][2, 2] = 1 << 30
    draft["draft_status"][3, 1:3] = [2, 1]  # both depth-1 nodes failed
    add(tree_verify_case("failed_draws_truncate", "a failed draw (any non-zero status) truncates the tree below its "
                         "node (§12.5 V1): at the root, at node 1 with NaN target rows and garbage below, at node 2, "
                         "at both; the failed node is final (its bonus)", target, TREE_2X2, draft, seed=seeds[:5],
                         pos=poss[:5]))
    target, draft = drafted(2070, TREE_2X2, 5, 40, 1.0, seeds[:5], 0, poss[:5])
    target[0, 6, 3] = NAN
    target[0, 4, 1] = INF  # row 0: node 4 (+inf) is below node 6 (NaN) in index: POS_INF_LOGIT
    target[1, 5, :] = -INF  # a leaf's target row: ZERO_MASS
    target[2, 3, 0] = NAN
    draft["draft_status"][2, 1] = 1  # row 2: node 3 is not live: OK
    draft["draft_tokens"][3, 1] = 40  # row 3: an invalid draft, but node 0's target row is NaN
    target[3, 0, 9] = NAN
    add(tree_verify_case("target_row_status", "the class of the lowest live node whose target row is bad (§12.5 V2, "
                         "V4): +inf at node 4 before NaN at node 6, zero mass at a leaf, a NaN below a failed node "
                         "ignored, a bad target row before an invalid draft", target, TREE_2X2, draft,
                         seed=seeds[:5], pos=poss[:5]))
    target, draft = drafted(2080, TREE_2X2, 5, 40, 1.0, seeds[:5], 0, poss[:5])
    add(tree_verify_case("bad_temperature", "NaN, -1, -inf, -2^-149 target temperatures fail the row; -0.0 is T0",
                         target, TREE_2X2, draft, temp=[NAN, -1.0, -INF, -1e-45, -0.0], seed=seeds[:5],
                         pos=poss[:5]))
    add(bad_tree_drafts(seeds, poss))
    x = f32([[[0.0, 1.0, -1.0, 0.5]] * 5] * 4)
    prop = propose_tree(f32([[[0.3, 0.2, 0.1, 0.0]] * 5] * 4), 1.0, seeds[:4], 0, 0, [-1, 0, 0, 0, 0], range(5))
    add(tree_verify_case("k_equals_the_support", "V = 4 and 4 children at the root: every token is a child, the "
                         "last one tested against what the first three left", x, [-1, 0, 0, 0, 0],
                         {"draft_tokens": prop.tokens, "draft_status": prop.status, "draft_ids": prop.ids,
                          "draft_tickets": prop.tickets}, seed=seeds[:4]))
    drafter = np.zeros((8, 3, 40), dtype=np.float32)
    drafter[:, :, 17] = 10.0  # q: 99.9% of the tickets on token 17, about 760 on each of the 31 others
    x = tree_logits(2085, 8, 3, 40, 0.5)  # the target: nearly uniform, p(17) about 1/40
    prop = propose_tree(drafter, 1.0, seeds, 0, 0, [-1, 0, 0], range(3))
    assert (prop.tokens[:, 1] == 17).all()
    add(tree_verify_case("child_with_the_largest_tickets", "the first child (token 17) holds 99.9% of q's tickets and "
                         "about 1/40 of p: it is mostly rejected, and the second child is tested against q with its "
                         "tickets removed (S = the 2^24 - Q(17) tickets left)", x, [-1, 0, 0],
                         {"draft_tokens": prop.tokens, "draft_status": prop.status, "draft_ids": prop.ids,
                          "draft_tickets": prop.tickets}, seed=seeds))
    add(point_mass_residual())
    ext = [0, 1 << 63, U64]
    target, draft = drafted(2090, TREE_2X2, 3, 40, 1.0, ext, int(U64), [U64, U64 - 1, 0])
    add(tree_verify_case("uint64_extremes", "seed 0, 2^63, 2^64-1; round 2^64-1; positions 2^64-1, 2^64-2: node "
                         "streams at position + depth wrap mod 2^64", target, TREE_2X2, draft, seed=ext,
                         rnd=int(U64), pos=[U64, U64 - 1, 0]))
    target, draft = drafted(2100, TREE_2X2, 3, 64, 1.0, seeds[:3], 4, poss[:3])
    add(tree_verify_case("fp16_target", "fp16 target logits, widened exactly (§2.1)", target.astype(np.float16),
                         TREE_2X2, draft, seed=seeds[:3], rnd=4, pos=poss[:3], dtype="float16"))
    bf16 = (target.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    add(tree_verify_case("bf16_target", "bf16 target logits (bits << 16, §2.1)", bf16, TREE_2X2, draft,
                         seed=seeds[:3], rnd=4, pos=poss[:3], dtype="bfloat16"))
    target, draft = drafted(2110, TREE_2X2, 3, 40, 1.0, seeds[:3], 0, poss[:3])
    draft["draft_status"][:, 3:] = [[9, -1, 127, 5]] * 3  # leaves: statuses, slots and node 0's token never read
    draft["draft_ids"][:, 3:] = (1 << 31) - 1
    draft["draft_tickets"][:, 3:] = -(1 << 31)
    draft["draft_tokens"][:, 0] = -7
    add(tree_verify_case("ignored_entries", "entries §12.5 never reads are row data of any value: the leaves' "
                         "statuses and slots, the root's token", target, TREE_2X2, draft, seed=seeds[:3],
                         pos=poss[:3]))
    return cases


def bad_tree_drafts(seeds: list[int], poss: list[int]) -> TreeVerifyCase:
    """One invalid expanding node per row (§12.5 V3), and a valid row."""
    target, draft = drafted(2120, TREE_2X2, 7, 40, [1.0] * 6 + [0.0], seeds[:7], 0, poss[:7])
    tok, ids, tix = draft["draft_tokens"], draft["draft_ids"], draft["draft_tickets"]
    tok[0, 2] = tok[0, 1]  # duplicate siblings
    tok[1, 3] = sorted(set(range(40)) - set(ids[1, 1].tolist()))[0]  # a child in no slot of node 1
    k = int(np.flatnonzero(ids[2, 0] == tok[2, 2])[0])  # the second child of the root keeps its slot, 0 tickets
    other = int(np.flatnonzero((ids[2, 0] >= 0) & (tix[2, 0] > 0) & (np.arange(K) != k))[0])
    tix[2, 0, other] += tix[2, 0, k]
    tix[2, 0, k] = 0
    tix[3, 2, 0] += 1  # node 2's slots sum to 2^24 + 1
    ids[4, 1, [0, 1]] = ids[4, 1, [1, 0]]  # node 1's slots out of order
    tix[4, 1, [0, 1]] = tix[4, 1, [1, 0]]
    tok[5, 5] = 40  # a child ID >= V
    tix[6, 0, :2] = tix[6, 0, 1::-1]  # T0 row: the first child (the argmax) with 0 tickets
    return tree_verify_case("bad_drafts", "BAD_DRAFT (§12.5 V3): duplicate siblings, a child in no slot, a later "
                            "child with 0 tickets on a sampled row, slots summing to 2^24 + 1, slots out of order, a "
                            "child ID >= V, a T0 row's first child with 0 tickets", target, TREE_2X2, draft,
                            temp=[1.0] * 6 + [0.0], seed=seeds[:7], pos=poss[:7])


def point_mass_residual() -> TreeVerifyCase:
    """P = (2^39, 2^39), Q = (3 2^22, 2^22), children (0, 1): token 0 is rejected with probability 1/3, leaving the
    residual 2^38 tickets on token 1 alone, which N1 shifts to 2^40; the second child, token 1, is then accepted."""
    b = 16
    ids = np.full((b, 3, K), -1, np.int32)
    tix = np.zeros((b, 3, K), np.int32)
    ids[:, 0, :2] = [0, 1]
    tix[:, 0, :2] = [3 << 22, 1 << 22]
    draft: dict[str, npt.NDArray[Any]] = {"draft_tokens": np.tile(np.array([-1, 0, 1], np.int32), (b, 1)),
                                          "draft_status": np.zeros((b, 3), np.int8), "draft_ids": ids,
                                          "draft_tickets": tix}
    case = tree_verify_case("residual_point_mass", "P = (2^39, 2^39), Q = (3 2^22, 2^22), children 0 then 1: after "
                            "rejecting token 0 the residual is a point mass on token 1 (2^38 tickets, shifted by "
                            "b = 2 to 2^40), and the second child is always accepted (§12.6 N1-N4)",
                            np.zeros((b, 3, 2), np.float32), [-1, 0, 0], draft, seed=list(range(b)))
    assert set(case.expected.path[:, 0].tolist()) == {1, 2}, "both children must be accepted in some row"
    return case


def build_tree_walk_cases() -> list[TreeVerifyCase]:
    cases: list[TreeVerifyCase] = []
    add = cases.append
    seeds, poss = u64s(3000, 8), [int(p) >> 24 for p in u64s(3001, 8)]
    temps = [0.5, 1.0, 2.0, INF, 0.5, 1.0, 2.0, 0.0]
    for name, parents, v in (("2x2", TREE_2X2, 10), ("4_2_1", TREE_421, 10), ("wide8", TREE_WIDE8, 40)):
        target, draft = drafted(3018 + len(parents), parents, 8, v, temps, seeds, 1, poss, "top-k")
        add(tree_verify_case(f"top_k_{name}", f"a deterministic top-k {name.replace('_', '-')} tree, V = {v}, at "
                             "T = 0.5, 1, 2, +inf and T0: draw y from p at each node (its residual stream, §12.9 W1) "
                             "and descend while y is a child (W2)", target, parents, draft, temp=temps, seed=seeds,
                             rnd=1, pos=poss, walk=True))
    target, draft = drafted(3030, TREE_2X2, 8, 12, 1.0, seeds, 2, poss, noise=0.3)
    add(tree_verify_case("sampled_children", "the walk verifies any children: a tree of sampled children (its "
                         "slots are not read), V = 12", target, TREE_2X2, draft, seed=seeds, rnd=2, pos=poss,
                         walk=True))
    target, draft = drafted(3040, TREE_CHAIN4, 6, 40, 1.0, seeds[:6], 3, poss[:6], "top-k", noise=0.3)
    add(tree_verify_case("chain", "a top-1 chain by the walk: a draft x is accepted with probability p(x) (not "
                         "§11's min(1, p/q))", target, TREE_CHAIN4, draft, seed=seeds[:6], rnd=3, pos=poss[:6],
                         walk=True))
    target, draft = drafted(3050, TREE_2X2, 7, 40, 1.0, seeds[:7], 0, poss[:7], "top-k")
    draft["draft_status"][0, 0] = 1
    draft["draft_status"][1, 1] = 6
    target[1, 3:5, :] = NAN  # below the failed node 1: ignored
    draft["draft_tokens"][2, 2] = draft["draft_tokens"][2, 1]  # duplicate siblings: BAD_DRAFT
    draft["draft_tokens"][3, 6] = -1  # a child out of range: BAD_DRAFT
    target[4, 2, 0] = INF
    target[6, 5, 3] = NAN
    add(tree_verify_case("status", "the walk's statuses (§12.5 with its V3): a failed root or node 1 truncates (NaN "
                         "rows below ignored), duplicate siblings or a child out of range is BAD_DRAFT, +inf or NaN "
                         "at a live node fails the row, so does a NaN temperature", target, TREE_2X2, draft,
                         temp=[1.0] * 5 + [NAN, 1.0], seed=seeds[:7], pos=poss[:7], walk=True))
    ext = [0, 1 << 63, U64]
    target, draft = drafted(3060, TREE_2X2, 3, 40, 1.0, ext, int(U64), [U64, U64 - 1, 0], "top-k")
    add(tree_verify_case("uint64_extremes", "uint64-extreme keys; positions that wrap mod 2^64 with the depth",
                         target, TREE_2X2, draft, seed=ext, rnd=int(U64), pos=[U64, U64 - 1, 0], walk=True))
    return cases


def build_tree_file(cases: Sequence[TreeDrawCase | TreeVerifyCase]) -> str:
    text = "".join((tree_draw_case_to_json(c) if isinstance(c, TreeDrawCase) else tree_verify_case_to_json(c)) + "\n"
                   for c in cases)
    if len(text.encode()) > MAX_BYTES:
        raise RuntimeError(f"tree golden file would be {len(text.encode())} bytes > {MAX_BYTES}")
    return text


def build_tree_draw() -> str:
    return build_tree_file(build_tree_draw_cases())


def build_accept_tree() -> str:
    return build_tree_file(build_tree_accept_cases())


def build_walk_tree() -> str:
    return build_tree_file(build_tree_walk_cases())


def main() -> None:
    text = build()
    GOLDEN_FILE.write_text(text)
    n = text.count("\n")
    print(f"wrote {GOLDEN_FILE} ({SEMANTIC_ID}): {n} cases, {len(text.encode())} bytes; tickets per row {TICKETS}")
    text = build_accept()
    ACCEPT_GOLDEN_FILE.write_text(text)
    print(f"wrote {ACCEPT_GOLDEN_FILE} ({ACCEPT_SEMANTIC_ID}): {text.count(chr(10))} cases, {len(text.encode())} bytes")
    for path, build_file in ((TREE_DRAW_GOLDEN_FILE, build_tree_draw), (ACCEPT_TREE_GOLDEN_FILE, build_accept_tree),
                             (WALK_TREE_GOLDEN_FILE, build_walk_tree)):
        text = build_file()
        path.write_text(text)
        print(f"wrote {path} ({path.stem}): {text.count(chr(10))} cases, {len(text.encode())} bytes")


if __name__ == "__main__":
    main()
