"""SPEC.md §12 (draft trees: tree-draw-dyadic24-v1, accept-tree-dyadic24-v1, walk-tree-dyadic24-v1), one clause per
test, on the NumPy reference ``pp3.reference.tree``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import pp3
from pp3.audit.chisq import pearson
from pp3.reference import (
    ACCEPT_TREE_SEMANTIC_ID,
    DOMAIN_ACCEPT,
    DOMAIN_PROPOSAL,
    DOMAIN_RESIDUAL,
    DOMAIN_TREE,
    MAX_CHILDREN,
    P_TICKETS,
    TICKETS,
    TREE_DRAW_SEMANTIC_ID,
    WALK_TREE_SEMANTIC_ID,
    AcceptStatus,
    K,
    Status,
    TreeStatus,
    as_tree,
    propose,
    propose_tree,
    target_tickets,
    verify,
    verify_tree,
    verify_walk,
)
from pp3.reference import tree as T
from pp3.reference.philox import philox4x64_10, uniform_below
from pp3.testing.compare import assert_equal
from pp3.testing.drafts import BROKEN_DRAFTS, break_draft, random_case
from pp3.testing.mutants import patched

F32 = npt.NDArray[np.float32]
U64 = npt.NDArray[np.uint64]
INF = float("inf")
CHAIN3 = [-1, 0, 1, 2]
TWO_BY_TWO = [-1, 0, 0, 1, 1, 2, 2]
FOUR_TWO_ONE = [-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, *range(5, 13)]
WIDE8 = [-1] + [0] * 8


def u64(*v: int) -> U64:
    return np.array(v, dtype=np.uint64)


def keys(n: int, seed: int = 7, rnd: int = 3, pos: int = 11, col: int = 0) -> T.Keys:
    return T.Keys(np.full(n, seed, np.uint64), np.full(n, rnd, np.uint64), np.full(n, pos, np.uint64),
                  np.full(n, col, np.uint64))


def tree_case(parents: list[int], b: int, v: int, temperature: float, seed: int = 0, tau: float = 1.0,
              children: T.Children = "sampled") -> dict[str, Any]:
    """Target logits [B, N+1, V] and a tree drafted from drafter logits near them (all nodes in one call)."""
    rng = np.random.default_rng(seed)
    n1 = len(parents)
    target = (rng.normal(size=(b, n1, v)) * 2).astype(np.float32)
    drafter = (target + rng.normal(size=(b, n1, v))).astype(np.float32)
    keys_ = {"seed": rng.integers(0, 2**63, size=b, dtype=np.uint64), "round": 5,
             "position": rng.integers(0, 2**40, size=b, dtype=np.uint64)}
    prop = propose_tree(drafter, temperature, parents=parents, nodes=np.arange(n1), tau=tau, children=children,
                        **keys_)
    return {"target_logits": target, "target_temperature": temperature, "parents": parents,
            "draft_tokens": prop.tokens, "draft_status": prop.status, "draft_ids": prop.ids,
            "draft_tickets": prop.tickets, **keys_}


def walk_args(case: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in case.items() if k not in ("draft_ids", "draft_tickets")}


# ----------------------------------------------------------------------------------------------------------- §12.1


def test_constants() -> None:
    assert (TREE_DRAW_SEMANTIC_ID, ACCEPT_TREE_SEMANTIC_ID, WALK_TREE_SEMANTIC_ID) == (
        "tree-draw-dyadic24-v1", "accept-tree-dyadic24-v1", "walk-tree-dyadic24-v1")
    assert DOMAIN_TREE.to_bytes(8, "big") == b"pp3_tree"
    assert len({DOMAIN_TREE, DOMAIN_PROPOSAL, DOMAIN_ACCEPT, DOMAIN_RESIDUAL}) == 4
    assert MAX_CHILDREN == K == 32
    # §12.4: §3's statuses with the same names and values, then SMALL_SUPPORT = 6 (5 is the verifier's BAD_DRAFT)
    assert [(m.name, m.value) for m in TreeStatus] == [(m.name, m.value) for m in Status] + [("SMALL_SUPPORT", 6)]
    assert int(AcceptStatus.BAD_DRAFT) == 5
    assert {pp3.propose_tree, pp3.verify_tree, pp3.verify_walk} == {propose_tree, verify_tree, verify_walk}


# ----------------------------------------------------------------------------------------------------------- §12.2


@pytest.mark.parametrize(("parents", "depth", "column", "branching"), [
    (CHAIN3, [0, 1, 2, 3], [0, 0, 0, 0], [1, 1, 1, 0]),
    (TWO_BY_TWO, [0, 1, 1, 2, 2, 2, 2], [0, 0, 1, 0, 1, 2, 3], [2, 2, 2, 0, 0, 0, 0]),
    (WIDE8, [0] + [1] * 8, [0, *range(8)], [8] + [0] * 8),
    ([-1, 0, 0, 1], [0, 1, 1, 2], [0, 0, 1, 0], [2, 1, 0, 0]),  # unbalanced: node 2 is a leaf at depth 1
])
def test_tree_layout(parents: list[int], depth: list[int], column: list[int], branching: list[int]) -> None:
    t = as_tree("parents", parents)
    assert t.depth.tolist() == depth and t.column.tolist() == column and t.branching.tolist() == branching
    for u in range(t.size):  # children contiguous, in index order, each with parent u
        assert [int(i) for i in t.children(u)] == [i for i, p in enumerate(parents) if p == u]
    assert t.height == max(depth)


def test_four_two_one_has_twenty_nodes() -> None:
    t = as_tree("parents", FOUR_TWO_ONE)
    assert t.size == 21 and [t.level(d).size for d in range(4)] == [1, 4, 8, 8]


@pytest.mark.parametrize(("parents", "exc", "words"), [
    (np.array([-1.0, 0.0]), TypeError, "integer"),
    (np.array([[-1, 0]]), ValueError, "1-D"),
    ([-1], ValueError, "N + 1 >= 2"),
    ([0, 0], ValueError, "root"),
    ([-1, 1], ValueError, "node 1 has parent 1"),  # a node its own parent
    ([-1, 2, 1], ValueError, "node 1 has parent 2"),  # a cycle 1 -> 2 -> 1: a parent after its child
    ([-1, 0, -1], ValueError, "node 2 has parent -1"),
    ([-1, 0, 5], ValueError, "node 2 has parent 5"),  # out of range
    ([-1, 0, 1, 0], ValueError, "decrease"),  # not level by level
    ([-1] + [0] * 33, ValueError, "33 children"),
])
def test_parents_caller_errors(parents: Any, exc: type[Exception], words: str) -> None:
    with pytest.raises(exc, match="parents") as e:
        as_tree("parents", parents)
    assert words in str(e.value)
    case = tree_case(CHAIN3, 1, 5, 1.0)
    with pytest.raises(exc, match="parents"):  # the verifier checks it before any work
        verify_tree(**case | {"parents": parents})


def test_tree_size_must_match_the_target_rows() -> None:
    case = tree_case(CHAIN3, 2, 5, 1.0)
    with pytest.raises(ValueError, match="parents: a tree of 3 nodes, but target_logits has 4 rows"):
        verify_tree(**case | {"parents": [-1, 0, 1]})
    with pytest.raises(ValueError, match="parents"):
        verify_walk(**walk_args(case) | {"parents": [-1, 0, 1, 2, 3]})


@pytest.mark.parametrize(("field", "value", "exc"), [
    ("draft_tokens", np.zeros((2, 3), np.int32), ValueError),
    ("draft_status", np.zeros((2, 4), np.float32), TypeError),
    ("draft_ids", np.zeros((2, 4, 31), np.int32), ValueError),
    ("draft_tickets", np.full((2, 4, K), 1 << 31, np.int64), ValueError),
    ("seed", -1, ValueError),
    ("target_logits", np.zeros((2, 4, 5), np.float64), TypeError),
])
def test_verify_tree_caller_errors(field: str, value: Any, exc: type[Exception]) -> None:
    case = tree_case(CHAIN3, 2, 5, 1.0)
    with pytest.raises(exc, match=field):
        verify_tree(**case | {field: value})


@pytest.mark.parametrize(("kw", "exc", "name"), [
    ({"nodes": [0, 0]}, ValueError, "nodes"),  # duplicates
    ({"nodes": [0, 7]}, ValueError, "nodes"),  # out of range
    ({"nodes": [0]}, ValueError, "nodes"),  # not one per row of logits
    ({"nodes": [0.0, 1.0]}, TypeError, "nodes"),
    ({"children": "top-3"}, ValueError, "children"),
    ({"tau": 0.0}, ValueError, "tau"),
    ({"parents": [-1, 0, 1, 0]}, ValueError, "parents"),
    ({"logits": np.zeros((1, 2), np.float32)}, ValueError, "logits"),
])
def test_propose_tree_caller_errors(kw: dict[str, Any], exc: type[Exception], name: str) -> None:
    args: dict[str, Any] = {"logits": np.zeros((1, 2, 5), np.float32), "target_temperature": 1.0, "seed": 1, "round": 0,
            "position": 0, "parents": CHAIN3, "nodes": [0, 1]}
    with pytest.raises(exc, match=name):
        propose_tree(**args | kw)


# ----------------------------------------------------------------------------------------------------------- §12.3


def test_stream_with_column_0_is_section_11_5s() -> None:
    s = np.array([1, 3, 1 << 24, (1 << 40) - 1, 1 << 40, 12648641 << 16], dtype=np.uint64)
    n = s.size
    k = keys(n, seed=10864490, rnd=0, pos=0)
    got, nxt = T.uniform_below_at(k, DOMAIN_ACCEPT, s, np.zeros(n, np.int64))
    assert_equal(got, uniform_below(k.seed, k.round, k.position, DOMAIN_ACCEPT, s), "uniform below")
    assert (nxt >= 1).all() and int(nxt[-1]) == 2  # the Lemire rejection of this seed's first word (§11.5)


def test_stream_counter_word_3_is_the_column_and_uses_continue() -> None:
    k = keys(1, seed=99, rnd=1 << 63, pos=(1 << 64) - 1, col=5)
    words = [int(w) for i in range(2) for w in philox4x64_10([[1 << 63, (1 << 64) - 1, i, 5]], [[99, DOMAIN_TREE]])[0]]
    # s = 2^24 takes W_i >> 40 (t = 0): six uses take six words, across a block boundary
    off = np.zeros(1, np.int64)
    for i in range(6):
        u, off = T.uniform_below_at(k, DOMAIN_TREE, u64(TICKETS), off)
        assert int(u[0]) == words[i] >> 40 and int(off[0]) == i + 1


def test_uniform_below_beyond_2_40() -> None:
    s = (1 << 63) + 12345  # t = 2^64 - s: about half the words are rejected
    k = keys(40, seed=1)
    k = T.Keys(np.arange(40, dtype=np.uint64), k.round, k.position, k.column)
    got, nxt = T.uniform_below_at(k, DOMAIN_ACCEPT, np.full(40, s, np.uint64), np.zeros(40, np.int64))
    t = (1 << 64) % s
    for r in range(40):
        ws = [int(w) for i in range(4) for w in philox4x64_10([[3, 11, i, 0]], [[r, DOMAIN_ACCEPT]])[0]]
        first = next(i for i, w in enumerate(ws) if (w * s) % (1 << 64) >= t)
        assert int(got[r]) == (ws[first] * s) >> 64 and int(nxt[r]) == first + 1
    assert (nxt > 1).any(), "no row rejected a word: the test would not see the method"


# ----------------------------------------------------------------------------------------------------------- §12.4


def one_node(x: F32, temperature: float, k: int, children: T.Children = "sampled", seed: int = 1,
             tau: float = 1.0) -> tuple[int, list[int], list[int], list[int]]:
    """(status, ids, tickets, children) of the root of a tree of branching k, drawn alone."""
    parents = [-1] + [0] * k
    p = propose_tree(x[None, None, :], temperature, seed, 0, 0, parents, [0], tau, children)
    return int(p.status[0, 0]), p.ids[0, 0].tolist(), p.tickets[0, 0].tolist(), p.tokens[0, 1:].tolist()


def test_d1_status_and_slots_are_the_selectors() -> None:
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(6, 40)) * 2).astype(np.float32)
    x[1, 5] = np.nan
    x[2, :] = -INF
    temps = np.array([1.0, 1.0, 1.0, np.nan, 0.5, INF], np.float32)
    p = propose_tree(x[:, None, :], temps, np.arange(6, dtype=np.uint64), 2, 9, WIDE8, [0], 1.0)
    s = propose(x, temps, np.arange(6, dtype=np.uint64), 2, 9 + 1, 1.0)  # the keys do not change the slots
    assert_equal(p.status[:, 0], s.status, "status")
    assert_equal(p.ids[:, 0], s.ids, "ids")
    assert_equal(p.tickets[:, 0], s.tickets, "tickets")


def test_d2_small_support() -> None:
    x = np.array([0.0, -1.0, -200.0, -INF, -INF], np.float32)  # F = 3; slot of -200 has 0 tickets: n+ = 2
    assert one_node(x, 1.0, 2)[0] == TreeStatus.OK  # k equal to the support
    st, ids, tix, kids = one_node(x, 1.0, 3)
    assert (st, ids, tix, kids) == (TreeStatus.SMALL_SUPPORT, [-1] * K, [0] * K, [-1] * 3)
    assert one_node(x, 1.0, 3, "top-k")[0] == TreeStatus.OK  # ranked children need min(K, F) = 3 entries
    assert one_node(x, 0.0, 3)[0] == TreeStatus.OK
    assert one_node(x, 0.0, 4)[0] == TreeStatus.SMALL_SUPPORT  # T0: F = 3 < 4
    assert one_node(x, 1.0, 4, "top-k")[0] == TreeStatus.SMALL_SUPPORT
    x33 = np.zeros(40, np.float32)
    assert one_node(x33, 1.0, 32)[0] == TreeStatus.OK  # 32 equal entries: the support is K = 32
    assert one_node(x33, 0.0, 32, "top-k")[3] == list(range(32))  # ties go to the lower ID


def test_d3_t0_slots() -> None:
    x = np.array([1.0, 3.0, 2.0, 3.0, -INF], np.float32)
    _, ids, tix, kids = one_node(x, 0.0, 3)
    assert kids == [1, 3, 2]  # rank order, ties to the lower ID
    assert ids[:3] == [1, 2, 3] and tix[:3] == [TICKETS, 0, 0] and ids[3:] == [-1] * (K - 3)
    t0 = propose(x[None], 0.0, 1, 0, 0)  # k = 1: §7's T0 slots
    _, ids1, tix1, _ = one_node(x, -0.0, 1)
    assert ids1 == t0.ids[0].tolist() and tix1 == t0.tickets[0].tolist()


def test_d4_drawn_without_replacement() -> None:
    x = np.log(np.array([8, 4, 2, 1, 1], np.float32)).astype(np.float32)
    for seed in range(30):
        st, ids, tix, kids = one_node(x, 1.0, 5, seed=seed)
        assert st == 0 and sorted(kids) == [0, 1, 2, 3, 4]  # all five, each once
        # replay the draws by hand: U_j below S_j on node 0's tree stream, mapped through the slots not drawn yet
        left = {i: t for i, t in zip(ids, tix, strict=True) if i >= 0}
        off = np.zeros(1, np.int64)
        k = keys(1, seed=seed, rnd=0, pos=0)
        for c in kids:
            u, off = T.uniform_below_at(k, DOMAIN_TREE, u64(sum(left.values())), off)
            cum = np.cumsum([left[i] for i in sorted(left)])
            assert sorted(left)[int((cum <= int(u[0])).sum())] == c
            del left[c]


@pytest.mark.parametrize("mutant", [None, "tree-draw-with-replacement"])
def test_d4_children_have_the_without_replacement_law(mutant: str | None) -> None:
    """§12.4 D4 in law: over 20,000 seeds the ordered pair of children (c_1, c_2) has the exact law
    Q(a) Q(b) / (2^24 (2^24 - Q(a))), a != b (Pearson's chi-square, alpha = 0.001); drawing with replacement
    (pp3.testing.mutants) puts draws where that law has none and is rejected outright."""
    n, v = 20_000, 5
    x = np.tile(np.array([[[0.0, -0.5, -1.0, -1.5, -2.0]]], np.float32), (n, 1, 1))
    with patched(mutant):
        p = propose_tree(x, 1.0, np.arange(n, dtype=np.uint64), 3, 7, [-1, 0, 0], [0], tau=1.0)
    q = np.zeros(v)
    q[p.ids[0, 0, :v]] = p.tickets[0, 0, :v]
    law = np.array([[q[a] * q[b] / (TICKETS * (TICKETS - q[a])) if a != b else 0.0 for b in range(v)]
                    for a in range(v)])
    counts = np.bincount(p.tokens[:, 1] * v + p.tokens[:, 2], minlength=v * v)
    test = pearson(counts, law.ravel())
    assert (test.p > 1e-3) if mutant is None else (test.p == 0.0 and test.support_violations > 0), test


def test_d4_first_draw_maps_w0_top_24_bits() -> None:
    x = np.array([0.0, -0.5, -1.0, -3.0], np.float32)
    ids, tix = one_node(x, 1.0, 1, seed=42)[1:3]
    w0 = int(philox4x64_10([[0, 0, 0, 0]], [[42, DOMAIN_TREE]])[0, 0])
    cum = np.cumsum(tix)
    assert one_node(x, 1.0, 1, seed=42)[3] == [ids[int((cum <= (w0 >> 40)).sum())]]


def test_d4_ranked_children_use_no_random_numbers() -> None:
    x = np.array([0.5, 2.0, -0.0, 0.0, 2.0, -INF], np.float32)
    for seed in (0, 1, (1 << 64) - 1):
        assert one_node(x, 1.0, 4, "top-k", seed=seed)[3] == [1, 4, 0, 2]  # -0.0 == +0.0: ID 2 before ID 3


def test_d5_tokens_in_the_tree_layout() -> None:
    rng = np.random.default_rng(4)
    x = (rng.normal(size=(2, 3, 20)) * 2).astype(np.float32)
    x[1, 1, 0] = np.nan  # request 1: node 1 fails, its children stay -1
    p = propose_tree(x, 1.0, [1, 2], 0, 0, TWO_BY_TWO, [0, 1, 2])
    assert p.status.tolist() == [[0, 0, 0], [0, 1, 0]]
    assert (p.tokens[:, 0] == -1).all() and (p.tokens[0, 1:] >= 0).all()
    assert p.tokens[1, 3:5].tolist() == [-1, -1] and (p.tokens[1, [1, 2, 5, 6]] >= 0).all()
    leaves = propose_tree(x[:, :2], 1.0, [1, 2], 0, 0, TWO_BY_TWO, [3, 6])  # leaves: slots, nothing drawn
    assert (leaves.tokens == -1).all() and (leaves.tickets.sum(axis=-1)[leaves.status == 0] == TICKETS).all()


def test_node_outputs_do_not_depend_on_the_grouping_of_calls() -> None:
    rng = np.random.default_rng(5)
    x = (rng.normal(size=(3, 21, 50)) * 2).astype(np.float32)
    args = (1.0, u64(1, 2, (1 << 64) - 1), 7, u64(0, 100, (1 << 64) - 2), FOUR_TWO_ONE)
    whole = propose_tree(x, *args, np.arange(21))
    tokens = np.full((3, 21), -1, np.int32)
    for d in range(4):  # level by level, as an engine drafts
        nodes = as_tree("parents", FOUR_TWO_ONE).level(d)
        part = propose_tree(x[:, nodes], *args, nodes)
        assert_equal(part.ids, whole.ids[:, nodes], "ids")
        assert_equal(part.tickets, whole.tickets[:, nodes], "tickets")
        tokens = np.where(part.tokens >= 0, part.tokens, tokens)
    assert_equal(tokens, whole.tokens, "tokens")


def test_chain_proposal_equals_the_selector_in_slots_and_law(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    x = (rng.normal(size=(64, 30)) * 2).astype(np.float32)
    seeds = rng.integers(0, 2**63, size=64, dtype=np.uint64)
    s = propose(x, 1.0, seeds, 4, 17)
    p = propose_tree(x[:, None], 1.0, seeds, 4, 17, [-1, 0], [0])
    assert_equal(p.ids[:, 0], s.ids, "ids")
    assert_equal(p.tickets[:, 0], s.tickets, "tickets")
    assert (p.tokens[:, 1] != s.token).any(), "other words: the tokens differ in bits"
    # ... and only the words differ: in the proposal's domain the tree's first draw is §8's, bit for bit
    monkeypatch.setattr(T, "DOMAIN_TREE", DOMAIN_PROPOSAL)
    same = propose_tree(x[:, None], 1.0, seeds, 4, 17, [-1, 0], [0])
    assert_equal(same.tokens[:, 1], s.token, "token")


# ----------------------------------------------------------------------------------------------------------- §12.5


def test_v1_a_failed_draw_truncates_the_tree() -> None:
    case = tree_case(TWO_BY_TWO, 8, 12, 1.0, seed=7)
    case["draft_status"][:, 1] = TreeStatus.SMALL_SUPPORT  # node 1 fails: nodes 3 and 4 are not live
    base = verify_tree(**case)
    junk = {k: np.array(v, copy=True) for k, v in case.items() if isinstance(v, np.ndarray)}
    junk["target_logits"][:, 3:5] = np.nan
    junk["draft_tokens"][:, 3:5] = (1 << 31) - 1
    junk["draft_ids"][:, 1] = 5
    junk["draft_tickets"][:, 1] = -7
    got = verify_tree(**case | junk)
    for f in ("status", "accepted", "path", "tokens"):
        assert_equal(getattr(got, f), getattr(base, f), f)
    assert (base.status == 0).all() and not np.isin(base.path, [3, 4]).any()
    assert (base.path[:, 0] == 1).any(), "node 1 (final) is accepted in some row and emits a bonus"


def test_v2_the_lowest_live_bad_target_row_decides() -> None:
    case = tree_case(TWO_BY_TWO, 4, 12, 1.0, seed=8)
    t = case["target_logits"]
    t[0, 5, 0] = np.nan
    t[0, 6, 1] = INF  # row 0: node 5 (NaN) before node 6 (+inf)
    t[1, 2, :] = -INF  # row 1: zero mass at node 2
    t[2, 3, 0] = np.nan
    case["draft_status"][2, 1] = 1  # row 2: node 3 is not live, its NaN is ignored
    t[3, 0, 0] = INF
    st = verify_tree(**case).status.tolist()
    assert st == [AcceptStatus.NAN_LOGIT, AcceptStatus.ZERO_MASS, AcceptStatus.OK, AcceptStatus.POS_INF_LOGIT]


def _with(case: dict[str, Any], row: int, **edits: Any) -> dict[str, Any]:
    out = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in case.items()}
    for field, fn in edits.items():
        fn(out[field][row])
    return out


def test_v3_validity() -> None:
    base = tree_case(TWO_BY_TWO, 2, 40, 1.0, seed=9)
    assert (verify_tree(**base).status == 0).all()

    def dup(tok: Any) -> None:
        tok[2] = tok[1]

    def absent(tok: Any) -> None:
        tok[1] = sorted(set(range(40)) - set(base["draft_ids"][0, 0].tolist()))[0]  # an ID in no slot of node 0

    def zero_ticket(tix: Any) -> None:  # node 0's second child keeps its slot with 0 tickets
        k = int(np.flatnonzero(base["draft_ids"][0, 0] == base["draft_tokens"][0, 2])[0])
        other = int(np.flatnonzero((base["draft_ids"][0, 0] >= 0) & (base["draft_tickets"][0, 0] > 0)
                                   & (np.arange(K) != k))[0])
        tix[0, other] += tix[0, k]
        tix[0, k] = 0

    def bad_sum(tix: Any) -> None:
        tix[1, 0] += 1

    for edit in ({"draft_tokens": dup}, {"draft_tokens": absent}, {"draft_tickets": zero_ticket},
                 {"draft_tickets": bad_sum}):
        st = verify_tree(**_with(base, 0, **edit)).status.tolist()
        assert st == [AcceptStatus.BAD_DRAFT, AcceptStatus.OK], edit
    # a leaf's slots and statuses are never read
    junk = _with(base, 0, draft_ids=lambda a: a.__setitem__(3, 1 << 20), draft_status=lambda a: a.__setitem__(4, 9))
    assert verify_tree(**junk).status.tolist() == [0, 0]


def test_v3_t0_rows_later_children_may_have_zero_tickets() -> None:
    case = tree_case(TWO_BY_TWO, 3, 20, 0.0, seed=10)  # T0 drafts: ranked children, D3 slots
    assert (case["draft_tickets"][:, 0, :2].min(axis=1) == 0).all()
    assert (verify_tree(**case).status == 0).all()
    first_zero = _with(case, 0, draft_tickets=lambda t: t[0].__setitem__(slice(None), t[0][::-1]))
    assert verify_tree(**first_zero).status[0] == AcceptStatus.BAD_DRAFT  # Q(c_1) >= 1 is required at T0 too


def test_v3_walk_validity_reads_no_slots() -> None:
    case = tree_case(TWO_BY_TWO, 2, 20, 1.0, seed=11, children="top-k")
    w = walk_args(case)
    assert (verify_walk(**w).status == 0).all()
    dup = _with(w, 0, draft_tokens=lambda t: t.__setitem__(6, t[5]))
    out_of_range = _with(w, 1, draft_tokens=lambda t: t.__setitem__(1, 20))
    assert verify_walk(**dup).status.tolist() == [AcceptStatus.BAD_DRAFT, 0]
    assert verify_walk(**out_of_range).status.tolist() == [0, AcceptStatus.BAD_DRAFT]


def test_v4_status_precedence() -> None:
    case = tree_case(CHAIN3, 3, 10, 1.0, seed=12)
    case["draft_tokens"][:, 2] = 10  # every row: node 1's child is in none of its slots (BAD_DRAFT) ...
    case["target_logits"][0, 3, 0] = np.nan  # ... but in row 0 a bad target row wins
    temps = np.array([1.0, np.nan, 1.0], np.float32)  # and in row 1 a bad temperature
    st = verify_tree(**case | {"target_temperature": temps}).status.tolist()
    assert st == [AcceptStatus.NAN_LOGIT, AcceptStatus.BAD_TEMPERATURE, AcceptStatus.BAD_DRAFT]


@pytest.mark.parametrize("parents", [CHAIN3, TWO_BY_TWO, WIDE8, FOUR_TWO_ONE])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_v5_outputs(parents: list[int], temperature: float) -> None:
    case = tree_case(parents, 32, 16, temperature, seed=13)
    tree = as_tree("parents", parents)
    for verdict in (verify_tree(**case), verify_walk(**walk_args(case))):
        assert verdict.path.shape == (32, tree.height) and verdict.tokens.shape == (32, tree.height + 1)
        for r in range(32):
            a = int(verdict.accepted[r])
            path = verdict.path[r, :a].tolist()
            assert [int(tree.parents[v]) for v in path] == [0, *path][:a]  # a chain of parent links from the root
            assert verdict.tokens[r, :a].tolist() == case["draft_tokens"][r, path].tolist()
            assert 0 <= verdict.tokens[r, a] < 16 and (verdict.path[r, a:] == -1).all()
            assert (verdict.tokens[r, a + 1:] == -1).all()


# ----------------------------------------------------------------------------------------------------------- §12.6


def test_n1_normalise() -> None:
    a = np.array([[3, 0, 1], [1 << 40, 0, 0], [1, 0, 0]], dtype=np.uint64)
    sigma = np.array([4, 1 << 40, 1], dtype=np.uint64)
    a2, s2 = T.normalise(a, sigma)
    assert s2.tolist() == [1 << 40, 1 << 40, 1 << 40] and a2[0].tolist() == [3 << 38, 0, 1 << 38]
    a3, s3 = T.normalise(np.array([[5, 2]], np.uint64), np.array([7], np.uint64))
    assert s3.tolist() == [7 << 37] and a3.tolist() == [[5 << 37, 2 << 37]]  # 2^39 < 7 * 2^37 <= 2^40


def test_n2_draft_in_target_units() -> None:
    qp = np.array([[3, 5, 0], [1 << 24, 0, 0]], dtype=np.uint64)
    e = T.draft_in_target_units(qp, np.array([8, 1 << 24], np.uint64), np.array([1 << 40, 1 << 40], np.uint64))
    assert e.tolist() == [[3 << 37, 5 << 37, 0], [1 << 40, 0, 0]]  # S divides Σ: exact
    s, sigma = 7, (1 << 40) - 3
    e = T.draft_in_target_units(np.array([[3, 4]], np.uint64), u64(s), u64(sigma))
    assert e.tolist() == [[(3 * sigma) // s, (4 * sigma) // s]]


def test_n3_the_test_in_both_cases() -> None:
    # first case: S | Σ (here the first child, §11.6's test): U below E(c) = Q'(c) 2^16, accept iff U < A(c)
    k = T.Keys(u64(5, 6, 7, 8), u64(0, 0, 0, 0), u64(0, 0, 0, 0), u64(0, 0, 0, 0))
    qc = u64(3, 3, 1 << 20, 1 << 20)
    ec = qc << np.uint64(16)
    ac = ec // np.uint64(3)
    ok, _ = T.child_test(ac, ec, qc, np.full(4, 1 << 24, np.uint64), np.full(4, 1 << 40, np.uint64), k,
                         np.zeros(4, np.int64))
    u, _ = T.uniform_below_at(k, DOMAIN_ACCEPT, ec, np.zeros(4, np.int64))
    assert_equal(ok, u < ac, "accepted")
    assert_equal(u, uniform_below(k.seed, k.round, k.position, DOMAIN_ACCEPT, ec), "§11.6's uniform")
    # second case: S does not divide Σ, U below Q'(c) Σ, accept iff U < min(A(c), E(c)) S
    s, sigma, q = 3, (1 << 40) - 1, 2
    e = (q * sigma) // s
    for a in (e - 5, e + 5):
        ok, _ = T.child_test(u64(a), u64(e), u64(q), u64(s), u64(sigma), keys(1, seed=8), np.zeros(1, np.int64))
        u, _ = T.uniform_below_at(keys(1, seed=8), DOMAIN_ACCEPT, u64(q * sigma), np.zeros(1, np.int64))
        assert bool(ok[0]) == (int(u[0]) < min(a, e) * s)


def test_n4_residual_and_the_removed_child() -> None:
    a, sig = T.residual(np.array([[5, 0, 9, 2]], np.uint64), np.array([[7, 3, 4, 2]], np.uint64))
    assert a.tolist() == [[0, 0, 5, 0]] and sig.tolist() == [5]
    qp, s = T.remove_child(np.array([[3, 4, 0]], np.uint64), u64(7), np.array([1]))
    assert qp.tolist() == [[3, 0, 0]] and s.tolist() == [3]


def test_n5_the_bonus_is_section_11_7s_draw() -> None:
    rng = np.random.default_rng(14)
    x = (rng.normal(size=(16, 30)) * 2).astype(np.float32)
    _, p = target_tickets(x, np.ones(16, np.float32))
    k = keys(16)
    k = T.Keys(np.arange(16, dtype=np.uint64), k.round, k.position, k.column)
    z = T.final_draw(p.astype(np.uint64), np.full(16, P_TICKETS, np.uint64), k)
    w0 = philox4x64_10(np.stack([k.round, k.position, np.zeros(16, np.uint64), k.column], 1),
                       np.stack([k.seed, np.full(16, DOMAIN_RESIDUAL, np.uint64)], 1))[:, 0]
    want = (np.cumsum(p, axis=1) <= (w0 >> np.uint64(24)).astype(np.int64)[:, None]).sum(axis=1)
    assert_equal(z, want, "bonus")


def test_t0_rows_descend_to_the_argmax() -> None:
    x = np.zeros((1, 7, 5), np.float32)
    x[0, 0, 3] = 1.0  # g_0 = 3: node 2's token
    x[0, 2, 4] = 1.0  # g_2 = 4: node 6's token
    x[0, 6, 1] = 1.0  # bonus at node 6: g_6 = 1
    toks = np.array([[-1, 0, 3, 1, 2, 0, 4]], np.int32)
    ids = np.full((1, 7, K), -1, np.int32)
    tix = np.zeros((1, 7, K), np.int32)
    for u, kids in ((0, [0, 3]), (1, [1, 2]), (2, [0, 4])):
        ids[0, u, :2] = sorted(kids)
        tix[0, u, :2] = [TICKETS if c == kids[0] else 0 for c in sorted(kids)]
    for got in (verify_tree(x, 0.0, TWO_BY_TWO, toks, np.zeros((1, 7), np.int8), ids, tix, 1, 2, 3),
                verify_walk(x, -0.0, TWO_BY_TWO, toks, np.zeros((1, 7), np.int8), 1, 2, 3)):
        assert (int(got.accepted[0]), got.path[0].tolist(), got.tokens[0].tolist()) == (2, [2, 6], [3, 4, 1])


def test_a_residual_that_is_a_point_mass() -> None:
    """P = (2^39, 2^39), Q = (3 2^22, 2^22): E = Q 2^16 at the first child; token 0 is rejected with probability
    1 - 2^39 / (3 2^38) = 1/3, and the residual max(P - E, 0) is then 2^38 tickets on token 1 alone. N1 shifts it by
    b = 2 to 2^40, and the second child, token 1 (Q' = S = 2^22, E = 2^40 = A), is always accepted."""
    p = np.array([[1 << 39, 1 << 39, 0]], np.int64)
    ids = np.array([[0, 1] + [-1] * (K - 2)])
    tix = np.array([[3 << 22, 1 << 22] + [0] * (K - 2)])
    e = T.draft_in_target_units(T.slots_to_vocab(ids, tix, 3), u64(1 << 24), u64(1 << 40))
    a, sig = T.residual(p.astype(np.uint64), e)
    assert a.tolist() == [[0, 1 << 38, 0]] and sig.tolist() == [1 << 38]
    a2, s2 = T.normalise(a, sig)
    assert s2.tolist() == [1 << 40] and a2.tolist() == [[0, 1 << 40, 0]]
    j = np.array([int(T.verify_node(p, ids, tix, np.array([[0, 1]]), np.array([2]), keys(1, seed=seed))[0][0])
                  for seed in range(60)])
    assert set(j.tolist()) == {0, 1} and 10 <= (j == 1).sum() <= 30  # the second child: every time it is tried


def test_the_widest_node() -> None:
    parents = [-1] + [0] * 32
    case = tree_case(parents, 16, 40, 1.0, seed=15)
    got = verify_tree(**case)
    assert (got.status == 0).all() and (got.accepted == 1).mean() > 0.5


def test_every_integer_fits_64_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """§12.7 on wide nodes of far-apart p and q (many rejections): every bound s is in 1 .. 2^64 - 1, both N3 cases
    occur, every E(y) <= 2^40, and Σ stays in 1 .. 2^40."""
    seen: dict[str, list[int]] = {"s": [], "e": [], "sigma": []}
    orig_u, orig_e, orig_r = T.uniform_below_at, T.draft_in_target_units, T.residual

    def spy_u(keys: T.Keys, domain: int, s: U64, offset: Any) -> Any:
        seen["s"] += [int(v) for v in s]
        return orig_u(keys, domain, s, offset)

    def spy_e(qp: U64, s: U64, sigma: U64) -> U64:
        e = orig_e(qp, s, sigma)
        seen["e"].append(int(e.max()))
        return e

    def spy_r(a: U64, e: U64) -> Any:
        a2, sig = orig_r(a, e)
        seen["sigma"] += [int(v) for v in sig]
        return a2, sig

    monkeypatch.setattr(T, "uniform_below_at", spy_u)
    monkeypatch.setattr(T, "draft_in_target_units", spy_e)
    monkeypatch.setattr(T, "residual", spy_r)
    rng = np.random.default_rng(16)
    parents = [-1] + [0] * 16 + [1] * 2
    target = (rng.normal(size=(64, 19, 40)) * 3).astype(np.float32)
    drafter = (rng.normal(size=(64, 19, 40)) * 3).astype(np.float32)  # unrelated to the target
    prop = propose_tree(drafter, 1.0, np.arange(64, dtype=np.uint64), 0, 0, parents, np.arange(19))
    verify_tree(target, 1.0, parents, prop.tokens, prop.status, prop.ids, prop.tickets, np.arange(64, dtype=np.uint64),
                0, 0)
    assert 1 <= min(seen["s"]) and max(seen["s"]) < 1 << 64 and max(seen["s"]) > 1 << 40
    assert max(seen["e"]) <= 1 << 40 and 1 <= min(seen["sigma"]) and max(seen["sigma"]) <= 1 << 40


# ----------------------------------------------------------------------------------------------------------- §12.9


def test_w1_w2_the_walk_descends_while_the_draw_is_a_child() -> None:
    case = tree_case(WIDE8, 64, 10, 2.0, seed=17, children="top-k")
    got = verify_walk(**walk_args(case))
    tree_keys = keys(64)
    tree_keys = T.Keys(case["seed"], np.full(64, 5, np.uint64), case["position"], tree_keys.column)
    _, p = target_tickets(case["target_logits"][:, 0], np.full(64, 2.0, np.float32))
    y = T.final_draw(p.astype(np.uint64), np.full(64, P_TICKETS, np.uint64), tree_keys)  # W1 at the root
    kids = case["draft_tokens"][:, 1:]
    hit = (kids == y[:, None]).any(axis=1)
    assert_equal(got.accepted, hit.astype(np.int32), "accepted")
    assert_equal(got.tokens[:, 0], y.astype(np.int32), "the first token is the draw, a child or not")


def test_ranked_children_need_the_walk() -> None:
    """§12.6: verify_tree is lossless for drawn children only. The top-1 child of a sampled row (token 0, with
    q(0) = 0.536 at tau 0.7) verified by §12.6 is accepted with probability 0.5 / 0.536 = 0.93 and never corrected to
    (the residual has no mass on it), where p(0) = 1/2; the walk emits it half the time."""
    n = 400
    parents = [-1, 0]
    drafter = np.tile(np.array([[[0.1, 0.0]]], np.float32), (n, 1, 1))
    prop = propose_tree(drafter, 1.0, np.arange(n, dtype=np.uint64), 0, 0, parents, [0], children="top-k")
    assert (prop.tokens[:, 1] == 0).all()
    target = np.zeros((n, 2, 2), np.float32)  # p = (1/2, 1/2) at every node
    status = np.concatenate([prop.status, np.zeros((n, 1), np.int8)], axis=1)
    ids = np.concatenate([prop.ids, np.full((n, 1, K), -1, np.int32)], axis=1)
    tix = np.concatenate([prop.tickets, np.zeros((n, 1, K), np.int32)], axis=1)
    seeds = np.arange(n, dtype=np.uint64) + np.uint64(1000)
    wrong = verify_tree(target, 1.0, parents, prop.tokens, status, ids, tix, seeds, 0, 0)
    walk = verify_walk(target, 1.0, parents, prop.tokens, status, seeds, 0, 0)
    assert (wrong.tokens[:, 0] == 0).mean() > 0.9 and 0.4 < (walk.tokens[:, 0] == 0).mean() < 0.6


# ----------------------------------------------------------------------------------------------------------- §12.10


def as_chain(case: dict[str, Any]) -> dict[str, Any]:
    """§12.10: a §11 call as a chain tree (node i's token is §11's draft i - 1; node D's slots are empty)."""
    b, d = case["draft_tokens"].shape
    pad = {"draft_tokens": np.full((b, 1), 7, np.int32), "draft_status": np.full((b, 1), 3, np.int8),
           "draft_ids": np.full((b, 1, K), 1 << 30, np.int32), "draft_tickets": np.full((b, 1, K), -1, np.int32)}
    out = dict(case)
    out["parents"] = np.arange(-1, d)
    out["draft_tokens"] = np.concatenate([pad["draft_tokens"], case["draft_tokens"]], axis=1)
    for f in ("draft_status", "draft_ids", "draft_tickets"):  # entry D (the leaf) holds garbage: never read
        out[f] = np.concatenate([np.asarray(case[f]), pad[f]], axis=1)
    return out


@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 2.0, INF])
def test_a_chain_is_section_11_bit_for_bit(temperature: float) -> None:
    rng = np.random.default_rng(18)
    for d in (1, 2, 4):
        case = random_case(rng, 24, d, 33, temperature)
        case["draft_status"] = np.where(rng.random((24, d)) < 0.1, 2, case["draft_status"]).astype(np.int8)
        want = verify(**case)
        got = verify_tree(**as_chain(case))
        for f in ("status", "accepted", "tokens"):
            assert_equal(getattr(got, f), getattr(want, f), f"{f} (depth {d})")
        ok = want.status == 0
        a = want.accepted[ok]
        assert (got.path[ok] == np.where(np.arange(d)[None] < a[:, None], np.arange(1, d + 1)[None], -1)).all()


@pytest.mark.parametrize("kind", BROKEN_DRAFTS)
def test_a_chain_with_an_invalid_draft_is_section_11_too(kind: str) -> None:
    case = random_case(np.random.default_rng(19), 2, 2, 40, 1.0)
    break_draft(kind, case["draft_ids"], case["draft_tickets"], case["draft_tokens"])
    want = verify(**case)
    got = verify_tree(**as_chain(case))
    assert int(want.status[0]) == AcceptStatus.BAD_DRAFT
    for f in ("status", "accepted", "tokens"):
        assert_equal(getattr(got, f), getattr(want, f), f)


# ----------------------------------------------------------------------------------------------------------- docs


def test_the_engine_loop_of_docs_trees_runs() -> None:
    """docs/TREES.md's first Python block (an engine's round: draft level by level, verify once), run with a toy
    Markov drafter and target; its outputs are §12.5 V5's."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "TREES.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    rng = np.random.default_rng(20)
    drafter = (rng.normal(size=(12, 12)) * 2).astype(np.float32)
    target = (drafter + rng.normal(size=(12, 12))).astype(np.float32)
    accepted = []
    for seed in range(8):
        ns: dict[str, Any] = {
            "last_token": 3, "temperature": 1.0, "seed": seed, "round": 0, "position": 10,
            "drafter_logits": lambda tokens, nodes: drafter[np.maximum(tokens[:, nodes], 0)],
            "target_forward": lambda tokens, parents: target[np.maximum(tokens, 0)],
        }
        exec(code, ns)
        v, a = ns["v"], ns["a"]
        assert int(v.status[0]) == 0 and ns["emitted"].size == a + 1 and ns["kept"].tolist() == v.path[0, :a].tolist()
        accepted.append(a)
    assert max(accepted) == 2  # the loop drafts both levels
