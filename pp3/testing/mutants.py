"""The one catalogue of planted bugs: plausible misreadings of SPEC.md, each a replacement of one attribute of the
reference, with the clause it breaks and what it changes. Every tier that claims power draws its bugs from here:
the clause and golden tests (tests/), the kernel-vs-reference comparison (proptests/), the chi-square audits
(stats/) and the end-to-end losslessness audit (pp3.audit.e2e). None of this ever computes a result.

``Mutant.patch()`` swaps the attribute in (a context manager); a pytest test can use
``monkeypatch.setattr(*mutant.target_and_replacement())``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import accept, exponential, order, philox, select, tickets, tree
from pp3.reference._constants import (
    DOMAIN_PROPOSAL,
    DOMAIN_RESIDUAL,
    DOMAIN_TREE,
    EMPTY_ID,
    P_TICKETS,
    Q_SHIFT,
    TICKETS,
)

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]

# The reference functions the replacements wrap, taken before anything is patched.
_ALLOCATE = tickets.allocate
_BLOCK = philox.block
_PROPOSAL_UNIFORM = philox.proposal_uniform
_UNIFORM_BELOW = philox.uniform_below
_PROPOSE = select.propose
_VERIFY = accept.verify
_WEIGHTS = accept.weights
_FLT_MAX = np.float64(np.finfo(np.float32).max)
_VERIFY_NODE = tree.verify_node


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One planted bug: ``target`` ("module:attribute") is replaced by ``replacement``."""

    name: str
    clause: str  # the SPEC.md clause it breaks
    what: str  # what it changes, in words
    target: str
    replacement: Any

    def target_and_replacement(self) -> tuple[Any, str, Any]:
        """(module, attribute, replacement), for ``monkeypatch.setattr``."""
        module, attr = self.target.split(":")
        return importlib.import_module(module), attr, self.replacement

    @contextlib.contextmanager
    def patch(self) -> Iterator[None]:
        module, attr, value = self.target_and_replacement()
        old = getattr(module, attr)
        setattr(module, attr, value)
        try:
            yield
        finally:
            setattr(module, attr, old)


# --------------------------------------------------------------------------------------------- the replacements


def largest_remainder(w: F64, rank0_slot: I64) -> I64:
    """For ``tickets.allocate``: Hamilton's method, which SPEC.md §5 rejects — floor counts, then one ticket each to
    the R slots with the largest fractional parts of w·2^24/S (ties to the lower slot). Empty and zero-weight slots
    never get a ticket; what they cannot take goes to the rank-0 slot."""
    q = (w * np.float64(TICKETS)) / tickets.pairwise_sum(w)[:, None]
    c = np.floor(q).astype(np.int64)
    frac = np.where(w > 0, q - c, -1.0)
    remainder = TICKETS - c.sum(axis=-1)
    for r in range(c.shape[0]):
        by_frac = np.argsort(-frac[r], kind="stable")
        eligible = by_frac[frac[r][by_frac] >= 0][: remainder[r]]
        c[r, eligible] += 1
        c[r, rank0_slot[r]] += remainder[r] - eligible.size
    return c


def remainder_to_lowest_id(w: F64, rank0_slot: I64) -> I64:
    """For ``tickets.allocate``: floor-first, but the remainder goes to slot 0 (the lowest ID), not rank 0."""
    c = tickets.floor_counts(w)
    c[:, 0] += TICKETS - c.sum(axis=-1)
    return c


def draw_off_by_one(tix: I64, u: U64) -> I64:
    """For ``tickets.draw_slot``: the first slot with u <= C_j instead of u < C_j."""
    cum = np.cumsum(tix, axis=-1)
    return np.asarray((cum < u.astype(np.int64)[:, None]).sum(axis=-1), dtype=np.int64)


def left_fold_sum(w: F64) -> F64:
    """For ``tickets.pairwise_sum``: S as a left-to-right sum over the slots instead of the pairwise tree."""
    s = np.zeros(w.shape[:-1], dtype=np.float64)
    for j in range(w.shape[-1]):
        s = s + w[..., j]
    return s


def strided8_sum(w: F64) -> F64:
    """For ``tickets.pairwise_sum``: S in numpy.sum's order for 32 values (8 strided accumulators, then a tree)."""
    r = [left_fold_sum(w[..., k::8]) for k in range(8)]
    return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))


def uniform_low_bits(seed: U64, round_: U64, position: U64) -> U64:
    """For ``philox.proposal_uniform``: the low 24 bits of W_0 instead of the top 24 (§8)."""
    return _BLOCK(seed, round_, position, DOMAIN_PROPOSAL)[:, 0] & np.uint64(0xFFFFFF)


def uniform_23_bits(seed: U64, round_: U64, position: U64) -> U64:
    """For ``philox.proposal_uniform``: u = (W_0 >> 41) << 1, a 23-bit uniform."""
    return (_PROPOSAL_UNIFORM(seed, round_, position) >> np.uint64(1)) << np.uint64(1)


def round_ignored(seed: U64, round_: U64, position: U64) -> U64:
    """For ``philox.proposal_uniform``: counter (0, position): every round reuses the first round's draws."""
    return _PROPOSAL_UNIFORM(seed, np.zeros_like(round_), position)


def position_lsb_ignored(seed: U64, round_: U64, position: U64) -> U64:
    """For ``philox.proposal_uniform``: counter (round, position & ~1)."""
    return _PROPOSAL_UNIFORM(seed, round_, position & ~np.uint64(1))


def seed_lsb_ignored(seed: U64, round_: U64, position: U64) -> U64:
    """For ``philox.proposal_uniform``: key (seed & ~1, domain)."""
    return _PROPOSAL_UNIFORM(seed & ~np.uint64(1), round_, position)


def counter_swapped(seed: U64, round_: U64, position: U64, domain: int, index: int = 0) -> U64:
    """For ``philox.block``: counter (position, round, i, 0) instead of (round, position, i, 0)."""
    return _BLOCK(seed, position, round_, domain, index)


def signed_zeros_unequal(x: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """For ``order.order_value_key``: -0.0 not replaced by +0.0, so +0.0 outranks -0.0 (§4.1)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return np.where(bits & np.uint32(0x80000000), bits ^ np.uint32(0xFFFFFFFF), bits | np.uint32(0x80000000))


def ties_to_higher_id(x: npt.NDArray[np.float32], ids: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.uint64]:
    """For ``order.order_key``: equal values ordered by ID descending instead of ascending (§4.1)."""
    return (order.order_value_key(x).astype(np.uint64) << np.uint64(32)) | np.asarray(ids).astype(np.uint64)


def greedy_rows_sampled(logits: Any, target_temperature: Any, *args: Any, **kwargs: Any) -> Any:
    """For ``select.propose``: T0 rows (temperature ±0.0) are sampled like T = 1 rows (§3)."""
    temp = np.asarray(target_temperature, dtype=np.float32)
    return _PROPOSE(logits, np.where(temp == 0, np.float32(1.0), temp), *args, **kwargs)


def expf_final_rounding_in_fp32(z: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """For ``exponential.expf``: E8/E9 done in fp32 (round y to fp32, then scale by 2^m in fp32)."""
    m_ = exponential
    z32 = np.asarray(z, dtype=np.float32)
    with np.errstate(all="ignore"):
        x = np.maximum(z32, m_.ZMIN).astype(np.float64)
        kd = (x * m_.INV + m_.SHIFT) - m_.SHIFT
        k = kd.astype(np.int32)
        r = (x - kd * m_.L1) - kd * m_.L2
        p = r * (m_.ONE + r * (m_.C2 + r * (m_.C3 + r * (m_.C4 + r * m_.C5))))
        j, m = k & np.int32(63), k >> np.int32(6)
        y = m_.TH[j] + (m_.TL[j] + m_.TH[j] * p)
        scale = ((m.astype(np.int64) + np.int64(1023)) << np.int64(52)).view(np.float64)
        return np.asarray(y.astype(np.float32) * scale.astype(np.float32), dtype=np.float32)  # the bug


def verify_with_greedy_q(**kw: Any) -> Any:
    """For ``accept.verify``: the verifier is told each OK draft's q is the point mass on the draft (the greedy
    path's q), for sampled drafts too (§11.2)."""
    ids = np.full_like(np.asarray(kw["draft_ids"]), -1)
    tix = np.zeros_like(np.asarray(kw["draft_tickets"]))
    ok = np.asarray(kw["draft_status"]) == 0
    ids[..., 0] = np.where(ok, kw["draft_tokens"], -1)
    tix[..., 0] = np.where(ok, TICKETS, 0)
    return _VERIFY(**(kw | {"draft_ids": ids, "draft_tickets": tix}))


def difference_overflow_as_real(x: npt.NDArray[np.float32], m: npt.NDArray[np.float32],
                                temperature: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """For ``accept.weights``: a logit whose difference from m is below -FLT_MAX as a real number gets no weight, as
    the parenthetical of §11.4 P3 once read; P2 rounds such a difference to -FLT_MAX, finite, unless it is at most
    -(FLT_MAX + 2^103). The real difference is s + err exactly (Knuth's TwoSum in fp64: no fp32 difference overflows
    it)."""
    a = np.asarray(x, dtype=np.float64)
    b = -np.asarray(m, dtype=np.float64)[:, None]
    with np.errstate(invalid="ignore"):  # -inf logits: inf - inf in err, where below holds anyway
        s = a + b
        err = (a - (s - (s - a))) + (b - (s - a))
    below = (s < -_FLT_MAX) | ((s == -_FLT_MAX) & (err < 0))
    return np.where(below, np.float32(0.0), _WEIGHTS(x, m, temperature))


def residual_unnormalized(seed: U64, round_: U64, position: U64, domain: int, s: U64) -> U64:
    """For ``philox.uniform_below``: the residual is drawn with a uniform over 2^40, not over its sum, an overflow
    clamped to the last residual token (§11.7)."""
    if domain != DOMAIN_RESIDUAL:
        return _UNIFORM_BELOW(seed, round_, position, domain, s)
    full = _UNIFORM_BELOW(seed, round_, position, domain, np.full_like(s, P_TICKETS))
    out: U64 = np.minimum(full, s - np.uint64(1))
    return out


# ---------------------------------------------------------------------------------------- the draft trees (§12)


def tree_residual_unnormalized(a: U64, sigma: U64, keys: tree.Keys) -> I64:
    """For ``tree.final_draw``: the correction's uniform is over 2^40, not over the residual's sum Σ (an overflow
    clamped to the last ticket) (§12.6 N5)."""
    u, _ = tree.uniform_below_at(keys, DOMAIN_RESIDUAL, np.full(sigma.size, P_TICKETS, dtype=np.uint64),
                                 np.zeros(sigma.size, dtype=np.int64))
    u = np.minimum(u, sigma - np.uint64(1))
    return np.asarray((np.cumsum(a, axis=1, dtype=np.uint64) <= u[:, None]).sum(axis=1), dtype=np.int64)


def tree_q_not_reduced(qp: U64, s: U64, c: I64) -> tuple[U64, U64]:
    """For ``tree.remove_child``: a rejected child keeps its tickets, so the later siblings are tested against the
    node's whole q, not q without the children drawn before them (§12.6 N4)."""
    return qp, s


def tree_sibling_parent_p(a: U64, e: U64) -> tuple[U64, U64]:
    """For ``tree.residual``: the target state is never updated, so every sibling is tested against its parent's p
    and the correction is drawn from p (§12.6 N4)."""
    return a, a.sum(axis=1, dtype=np.uint64)


def tree_draw_with_replacement(ids: I64, tix: I64, k: I64, keys: tree.Keys) -> I64:
    """For ``tree.draw_without_replacement``: each child is drawn from the node's whole q (U below 2^24 over every
    slot), so children can repeat (§12.4 D4)."""
    r = ids.shape[0]
    kids = np.full((r, tix.shape[1]), EMPTY_ID, dtype=np.int64)
    offset = np.zeros(r, dtype=np.int64)
    for j in range(int(k.max()) if r else 0):
        a = np.flatnonzero(j < k)
        u, offset[a] = tree.uniform_below_at(keys.take(a), DOMAIN_TREE, np.full(a.size, TICKETS, np.uint64),
                                             offset[a])
        kids[a, j] = ids[a, (np.cumsum(tix[a], axis=1) <= u[:, None].astype(np.int64)).sum(axis=1)]
    return kids


def tree_bonus_from_residual(p: I64, ids: I64, tix: I64, kids: I64, k: I64, keys: tree.Keys) -> tuple[I64, U64, U64]:
    """For ``tree.verify_node``: at a final node the bonus is drawn from the residual max(P - Q 2^16, 0) of the node's
    own slots (§11.7's Q* = Q_a where a = n), not from P (§12.6 N5)."""
    j, a, sigma = _VERIFY_NODE(p, ids, tix, kids, k, keys)
    final = np.flatnonzero(k == 0)
    if final.size:
        v = p.shape[1]
        good = (ids[final] >= 0) & (ids[final] < v) & (tix[final] >= 0)
        q = tree.slots_to_vocab(np.where(good, ids[final], EMPTY_ID), np.where(good, tix[final], 0), v)
        r = np.maximum(p[final] - (q.astype(np.int64) << Q_SHIFT), 0)
        keep = r.sum(axis=1) > 0
        a[final[keep]] = r[keep].astype(np.uint64)
        sigma[final[keep]] = r[keep].sum(axis=1).astype(np.uint64)
    return j, a, sigma


# ------------------------------------------------------------------------------------------------- the catalogue

_T = "pp3.reference.tickets"
_P = "pp3.reference.philox"
_TREE = "pp3.reference.tree"

CATALOGUE: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant("draw-off-by-one", "§8", "the draw takes the first slot with u <= C_j (not u < C_j)",
               f"{_T}:draw_slot", draw_off_by_one),
        Mutant("largest-remainder", "§5 step 6", "the remainder goes by largest fractional part (Hamilton)",
               f"{_T}:allocate", largest_remainder),
        Mutant("remainder-lowest-id", "§5 step 6", "the remainder goes to slot 0 (the lowest ID), not rank 0",
               f"{_T}:allocate", remainder_to_lowest_id),
        Mutant("left-fold-sum", "§5 step 4", "S is a left-to-right sum, not the pairwise tree", f"{_T}:pairwise_sum",
               left_fold_sum),
        Mutant("strided8-sum", "§5 step 4", "S is numpy.sum's strided order, not the pairwise tree",
               f"{_T}:pairwise_sum", strided8_sum),
        Mutant("uniform-low-24-bits", "§8", "u is the low 24 bits of W_0, not the top 24",
               f"{_P}:proposal_uniform", uniform_low_bits),
        Mutant("uniform-23-bits", "§8", "u = (W_0 >> 41) << 1: a 23-bit uniform", f"{_P}:proposal_uniform",
               uniform_23_bits),
        Mutant("counter-reuse", "§8", "counter (0, position): rounds reuse the draws", f"{_P}:proposal_uniform",
               round_ignored),
        Mutant("position-lsb", "§8", "counter (round, position & ~1)", f"{_P}:proposal_uniform",
               position_lsb_ignored),
        Mutant("seed-lsb", "§8", "key (seed & ~1, domain)", f"{_P}:proposal_uniform", seed_lsb_ignored),
        Mutant("counter-swapped", "§8", "counter (position, round, i, 0), not (round, position, i, 0)",
               f"{_P}:block", counter_swapped),
        Mutant("signed-zeros-unequal", "§4.1", "+0.0 outranks -0.0 (the key keeps the sign bit)",
               "pp3.reference.order:order_value_key", signed_zeros_unequal),
        Mutant("ties-to-higher-id", "§4.1", "equal values go to the higher ID first",
               "pp3.reference.order:order_key", ties_to_higher_id),
        Mutant("t0-sampled", "§3", "greedy (T0) rows are sampled like T = 1 rows", "pp3.reference.select:propose",
               greedy_rows_sampled),
        Mutant("expf-no-c5", "§6 E5", "the degree-5 term of the polynomial is dropped",
               "pp3.reference.exponential:C5", np.float64(0.0)),
        Mutant("expf-fp32-final-rounding", "§6 E8-E9", "y is rounded to fp32 before the scale by 2^m",
               "pp3.reference.exponential:expf", expf_final_rounding_in_fp32),
        Mutant("domain-collision", "§11.5", "the acceptance draws are keyed with the proposal's domain",
               "pp3.reference.accept:DOMAIN_ACCEPT", DOMAIN_PROPOSAL),
        Mutant("q-from-greedy", "§11.2", "the verifier uses the greedy path's q (point mass) for sampled drafts",
               "pp3.reference.accept:verify", verify_with_greedy_q),
        Mutant("difference-overflow-as-real", "§11.4 P3",
               "a logit whose real difference from m is below -FLT_MAX gets no tickets (P2 rounds it to -FLT_MAX)",
               "pp3.reference.accept:weights", difference_overflow_as_real),
        Mutant("residual-unnormalized", "§11.7", "the residual uniform is over 2^40, not over the residual's sum",
               f"{_P}:uniform_below", residual_unnormalized),
        Mutant("tree-residual-unnormalized", "§12.6 N5", "the correction's uniform is over 2^40, not over Σ",
               f"{_TREE}:final_draw", tree_residual_unnormalized),
        Mutant("tree-q-not-reduced", "§12.6 N4", "later siblings are tested against the node's whole q",
               f"{_TREE}:remove_child", tree_q_not_reduced),
        Mutant("tree-sibling-parent-p", "§12.6 N4", "every sibling is tested against its parent's p (no residual)",
               f"{_TREE}:residual", tree_sibling_parent_p),
        Mutant("tree-draw-with-replacement", "§12.4 D4", "children are drawn with replacement from the whole q",
               f"{_TREE}:draw_without_replacement", tree_draw_with_replacement),
        Mutant("tree-bonus-from-residual", "§12.6 N5", "a final node's bonus is drawn from max(P - Q 2^16, 0)",
               f"{_TREE}:verify_node", tree_bonus_from_residual),
    )
}


def mutant(name: str) -> Mutant:
    """The catalogued mutant ``name`` (KeyError naming the catalogue's names if there is none)."""
    if name not in CATALOGUE:
        raise KeyError(f"no planted bug {name!r}; the catalogue has {sorted(CATALOGUE)}")
    return CATALOGUE[name]


def patched(name: str | None) -> contextlib.AbstractContextManager[None]:
    """The mutant ``name`` swapped in (``None``: nothing)."""
    return contextlib.nullcontext() if name is None else mutant(name).patch()


