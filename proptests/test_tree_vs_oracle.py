"""Property tests of SPEC.md §12 (draft trees): the reference (pp3.reference.tree) equals the independent reading in
exact rationals (tests/oracles/tree.py) on trees, logits, temperatures and drafts drawn by Hypothesis; every node's
law is p exactly (§12.8, by enumeration in rationals), and the enumeration sees each planted misreading; a chain is
§11 bit for bit (§12.10) on any input, invalid drafts included. NumPy only."""

from __future__ import annotations

import os
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pp3.reference import TICKETS, K, propose_tree, verify, verify_tree, verify_walk
from pp3.testing.call import U64_EDGES
from tests.oracles import tree as oracle

EXAMPLES = int(os.environ.get("PP3_PROPERTY_EXAMPLES", "40"))  # the oracle's expf is mpmath per logit: slow
INF, NAN = float("inf"), float("nan")
VALUES = (0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 4.0, -20.0, -60.0, 7.0)  # ties and -0.0 come from a small pool


@st.composite
def shapes(draw: st.DrawFn) -> list[int]:
    """A parent array: branching per level (1 .. 3 levels of 1 .. 3 children), or an unbalanced tree (some nodes of
    a level are leaves)."""
    branching = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    parents, level = [-1], [0]
    for k in branching:
        nxt = []
        for u in level:
            if len(parents) > 1 and draw(st.integers(0, 4)) == 0:
                continue  # a leaf above the last level
            for _ in range(k):
                parents.append(u)
                nxt.append(len(parents) - 1)
        level = nxt or level
        if len(parents) > 14:
            break
    if len(parents) == 1:
        parents.append(0)
    return parents


@st.composite
def logit_rows(draw: st.DrawFn, n: int, v: int) -> npt.NDArray[np.float32]:
    """n rows of v logits from the pool, with -inf masks; now and then a NaN or +inf (a failed row)."""
    x = np.array(draw(st.lists(st.lists(st.sampled_from(VALUES), min_size=v, max_size=v), min_size=n, max_size=n)),
                 dtype=np.float32)
    mask = np.array(draw(st.lists(st.booleans(), min_size=n * v, max_size=n * v)), dtype=bool).reshape(n, v)
    x[mask & (np.arange(v)[None, :] > 0)] = -INF  # column 0 stays finite: most rows keep a support
    if draw(st.integers(0, 5)) == 0:
        x[draw(st.integers(0, n - 1)), draw(st.integers(0, v - 1))] = draw(st.sampled_from([NAN, INF]))
    return x


temperatures = st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, INF, NAN, -1.0])
keys = st.one_of(st.sampled_from(U64_EDGES), st.integers(0, (1 << 64) - 1))


@settings(max_examples=EXAMPLES)
@given(parents=shapes(), v=st.integers(1, 9), data=st.data(), temp=temperatures, seed=keys, rnd=keys, pos=keys,
       children=st.sampled_from(["sampled", "top-k"]), tau=st.sampled_from([1.0, 0.7, 3.0]))
def test_propose_tree_matches_the_oracle(parents: list[int], v: int, data: st.DataObject, temp: float, seed: int,
                                         rnd: int, pos: int, children: Any, tau: float) -> None:
    n1 = len(parents)
    x = data.draw(logit_rows(n1, v))
    got = propose_tree(x[None], temp, seed, rnd, pos, parents, np.arange(n1), tau, children)
    want = oracle.propose_tree_row(x, temp, seed, rnd, pos, parents, list(range(n1)), tau, children)
    assert (got.status[0].tolist(), got.ids[0].tolist(), got.tickets[0].tolist(), got.tokens[0].tolist()) == want, (
        f"parents={parents} temp={temp!r} seed={seed} round={rnd} position={pos} children={children} tau={tau}\n"
        f"logits bits {[[f'{b:08x}' for b in r] for r in x.view(np.uint32).tolist()]}")


def corrupt(data: st.DataObject, draft: dict[str, npt.NDArray[Any]], v: int) -> None:
    """Now and then one fault of row data: a failed status, a garbage token, a duplicated sibling, a zero-ticket
    child, or slots that do not sum to 2^24."""
    n1 = draft["draft_tokens"].shape[1]
    kind = data.draw(st.sampled_from(["none", "none", "status", "token", "duplicate", "zero", "sum"]))
    u = data.draw(st.integers(0, n1 - 1))
    i = data.draw(st.integers(1, n1 - 1))
    if kind == "status":
        draft["draft_status"][0, u] = data.draw(st.sampled_from([1, 6, -1, 127]))
    elif kind == "token":
        draft["draft_tokens"][0, i] = data.draw(st.sampled_from([v, -1, (1 << 31) - 1, 0]))
    elif kind == "duplicate" and i + 1 < n1:
        draft["draft_tokens"][0, i + 1] = draft["draft_tokens"][0, i]
    elif kind == "zero":
        k = np.flatnonzero(draft["draft_ids"][0, u] == draft["draft_tokens"][0, i])
        if k.size:
            draft["draft_tickets"][0, u, 0] += draft["draft_tickets"][0, u, k[0]]
            draft["draft_tickets"][0, u, k[0]] = 0
    elif kind == "sum":
        draft["draft_tickets"][0, u, 0] += 1


@settings(max_examples=EXAMPLES)
@given(parents=shapes(), v=st.integers(2, 9), data=st.data(), temp=temperatures, seed=keys, rnd=keys, pos=keys,
       children=st.sampled_from(["sampled", "sampled", "top-k"]))
@example(parents=[-1, 0, 0, 0, 0], v=4, data=None, temp=1.0, seed=3, rnd=0, pos=0, children="sampled")  # k = V
def test_verify_tree_and_the_walk_match_the_oracle(parents: list[int], v: int, data: Any, temp: float, seed: int,
                                                   rnd: int, pos: int, children: Any) -> None:
    n1 = len(parents)
    if data is None:  # the explicit example: fixed logits
        target = np.tile(np.array([0.0, 1.0, -1.0, 2.0], np.float32), (n1, 1))
        drafter = target[:, ::-1].copy()
    else:
        target = data.draw(logit_rows(n1, v))
        drafter = data.draw(logit_rows(n1, v))
    prop = propose_tree(drafter[None], temp, seed, rnd, pos, parents, np.arange(n1), 1.0, children)
    draft: dict[str, npt.NDArray[Any]] = {"draft_tokens": prop.tokens.copy(), "draft_status": prop.status.copy(),
                                          "draft_ids": prop.ids.copy(), "draft_tickets": prop.tickets.copy()}
    if data is not None:
        corrupt(data, draft, v)
    row = (draft["draft_tokens"][0].tolist(), draft["draft_status"][0].tolist(), draft["draft_ids"][0].tolist(),
           draft["draft_tickets"][0].tolist())
    got = verify_tree(target[None], temp, parents, seed=seed, round=rnd, position=pos, **draft)
    want = oracle.verify_tree_row(target, temp, parents, *row, seed, rnd, pos)
    replay = f"parents={parents} temp={temp!r} seed={seed} round={rnd} position={pos} draft={row}"
    assert (int(got.status[0]), int(got.accepted[0]), got.path[0].tolist(), got.tokens[0].tolist()) == want, replay
    walk = verify_walk(target[None], temp, parents, draft["draft_tokens"], draft["draft_status"], seed, rnd, pos)
    want = oracle.verify_tree_row(target, temp, parents, *row, seed, rnd, pos, walk=True)
    assert (int(walk.status[0]), int(walk.accepted[0]), walk.path[0].tolist(), walk.tokens[0].tolist()) == want, replay


# ------------------------------------------------------------------------------------------- §12.8 the node's law


@st.composite
def tickets(draw: st.DrawFn, total: int, v: int, zeros: bool) -> list[int]:
    """v non-negative integers summing to ``total`` (some 0 if ``zeros``), odd values included."""
    cuts = sorted(draw(st.lists(st.integers(0, total), min_size=v - 1, max_size=v - 1)))
    parts = [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]
    if not zeros and min(parts) == 0:
        parts = [1] * v
        parts[0] = total - (v - 1)
    return parts


@settings(max_examples=EXAMPLES)
@given(v=st.integers(2, 5), data=st.data())
@example(v=2, data=None)  # a point-mass residual after the first rejection
def test_every_node_emits_exactly_p(v: int, data: Any) -> None:
    """§12.8, by enumeration in rationals: over every draw of the k children without replacement and every test
    outcome, the node emits token y with probability P(y) / 2^40 exactly."""
    if data is None:
        p, q, k = [1 << 39, 1 << 39], {0: 3 << 22, 1: 1 << 22}, 2
    else:
        p = data.draw(tickets(1 << 40, v, zeros=True))
        qs = data.draw(tickets(TICKETS, v, zeros=False))
        q = {i: t for i, t in enumerate(qs)}
        k = data.draw(st.integers(1, v))
    assert oracle.node_law(p, q, k) == [Fraction(x, 1 << 40) for x in p]


Q_FULL = {0: 1 << 23, 1: 1 << 22, 2: 1 << 22}  # the planted bugs' node: three children of these tickets
ORIGINAL_TEST = oracle.test_of
ORIGINAL_AFTER = oracle.after_rejection


def _unreduced_q(pi: list[Fraction], sigma: int, qp: dict[int, int], s: int, c: int) -> Any:
    """Planted: q is not reduced after a draw (each test and residual uses the node's full q)."""
    return ORIGINAL_TEST(pi, sigma, Q_FULL, TICKETS, c)


def _parent_p(pi: list[Fraction], sig: int, a: list[int], e: list[int]) -> tuple[list[Fraction], int]:
    """Planted: every sibling is tested against the parent's p (the state is never updated)."""
    return pi, sig


def _unnormalised(pi: list[Fraction], sig: int, a: list[int], e: list[int]) -> tuple[list[Fraction], int]:
    """Planted: the residual is not renormalised (the correction draws from pi - m, of mass below 1)."""
    return [p - Fraction(min(x, y), sig) for p, x, y in zip(pi, a, e, strict=True)], sig


PLANTED: dict[str, tuple[str, Callable[..., Any], int]] = {  # (the oracle's function, its replacement, k)
    "q-not-reduced": ("test_of", _unreduced_q, 3),
    "sibling-parent-p": ("after_rejection", _parent_p, 3),
    "residual-unnormalised": ("after_rejection", _unnormalised, 1),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_the_enumeration_sees_each_planted_misreading(bug: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact law is a test that can fail: each misreading of §12.6 gives a node a law other than p."""
    name, replacement, k = PLANTED[bug]
    p = [219902325555, 1 << 39, 329853488333]  # about (0.2, 0.5, 0.3), summing to 2^40
    assert oracle.node_law(p, Q_FULL, k) == [Fraction(x, 1 << 40) for x in p]
    monkeypatch.setattr(oracle, name, replacement)
    assert oracle.node_law(p, Q_FULL, k) != [Fraction(x, 1 << 40) for x in p], bug


# -------------------------------------------------------------------------------------------- §12.10 chains


@st.composite
def chain_calls(draw: st.DrawFn) -> dict[str, Any]:
    """A §11 call (B = 1): real drafts of random logits, then maybe one fault of row data."""
    d = draw(st.integers(1, 3))
    v = draw(st.integers(1, 9))
    target = draw(logit_rows(d + 1, v))
    drafter = draw(logit_rows(d, v))
    temp = draw(temperatures)
    seed, rnd, pos = draw(keys), draw(keys), draw(keys)
    tree = propose_tree(drafter[None], temp, seed, rnd, pos, np.arange(-1, d), np.arange(d))
    call: dict[str, Any] = {
        "target_logits": target[None], "target_temperature": temp, "seed": seed, "round": rnd, "position": pos,
        "draft_tokens": tree.tokens[:, 1:].copy(), "draft_status": tree.status, "draft_ids": tree.ids,
        "draft_tickets": tree.tickets,
    }
    fault = draw(st.sampled_from(["none", "status", "token", "ticket"]))
    j = draw(st.integers(0, d - 1))
    if fault == "status":
        call["draft_status"][0, j] = draw(st.sampled_from([1, 7, -1]))
    elif fault == "token":
        call["draft_tokens"][0, j] = draw(st.sampled_from([-1, v, 0]))
    elif fault == "ticket":
        call["draft_tickets"][0, j, draw(st.integers(0, K - 1))] += draw(st.sampled_from([1, -1, 1 << 20]))
    return call


@settings(max_examples=EXAMPLES * 3)
@given(call=chain_calls())
def test_a_chain_is_section_11_bit_for_bit(call: dict[str, Any]) -> None:
    want = verify(**call)
    b, d = call["draft_tokens"].shape
    tree = dict(call, parents=np.arange(-1, d))
    tree["draft_tokens"] = np.concatenate([np.full((b, 1), 3, np.int32), call["draft_tokens"]], axis=1)
    for f, fill in (("draft_status", 9), ("draft_ids", 1 << 30), ("draft_tickets", -5)):  # the leaf: garbage
        tree[f] = np.concatenate([call[f], np.full((b, 1, *call[f].shape[2:]), fill, call[f].dtype)], axis=1)
    got = verify_tree(**tree)
    assert (got.status.tolist(), got.accepted.tolist(), got.tokens.tolist()) == (
        want.status.tolist(), want.accepted.tolist(), want.tokens.tolist()), call
