"""Bit parity of the draft trees' Triton kernels (pp3.kernels.tree) with the NumPy reference (SPEC.md §12).

Runs under TRITON_INTERPRET=1 (small trees, V <= 1100) or natively on a CUDA GPU; skipped otherwise. Every output
(statuses, slots, children, accepted counts, paths, tokens) is compared with ``==``: ordinary trees (2x2, 4-2-1,
chains), T0 rows, failed draws and target rows, bad temperatures and drafts, malformed trees; the tree golden vectors
(a fast subset here, every case with ``--runslow`` and on the GPU); planted bugs the comparisons catch. The design
is docs/TREE_KERNELS.md.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU", allow_module_level=True)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.language.random import philox_impl  # noqa: E402

import pp3.ops  # noqa: E402, F401  (registers torch.ops.pp3.*)
from pp3.kernels import _tree  # noqa: E402
from pp3.kernels import tree as dev  # noqa: E402
from pp3.reference import TreeStatus  # noqa: E402
from pp3.reference import tree as ref  # noqa: E402
from pp3.testing import mutants  # noqa: E402
from pp3.testing.compare import assert_equal  # noqa: E402
from pp3.testing.golden import (  # noqa: E402
    ACCEPT_TREE_GOLDEN_FILE,
    WALK_TREE_GOLDEN_FILE,
    TreeDrawCase,
    TreeVerifyCase,
    load_tree_draw_golden,
    load_tree_verify_golden,
)

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning"),
]
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
OPS = torch.ops.pp3
TWO_BY_TWO = [-1, 0, 0, 1, 1, 2, 2]
FOUR_TWO_ONE = [-1, *[0] * 4, *[i for i in range(1, 5) for _ in range(2)], *range(5, 13)]
CHAIN = [-1, 0, 1, 2]
DRAW_FIELDS = ("status", "ids", "tickets", "tokens")
VERDICT_FIELDS = ("status", "accepted", "path", "tokens")


def _t(a: Any) -> Any:
    """A NumPy array as a tensor on DEV (anything else as it is)."""
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV) if isinstance(a, np.ndarray) else a


def _host(value: Any) -> Any:
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _same(got: Any, want: Any, fields: tuple[str, ...], what: str) -> None:
    for f in fields:
        assert_equal(_host(getattr(got, f)), np.asarray(getattr(want, f)), f"{what}: {f}")


def _draw(x: np.ndarray, temp: np.ndarray, parents: list[int], nodes: list[int], children: ref.Children,
          keys: tuple[int, int, int] = (5, 6, 7), tile: int | None = None) -> tuple[Any, Any]:
    """(kernel, reference) ``propose_tree`` of the same call (``tile``: the selector's, whose candidates give the
    ranked children)."""
    seed, rnd, pos = keys
    want = ref.propose_tree(x, temp, seed, rnd, pos, parents, nodes, 1.0, children)
    got = dev.propose_tree(_t(x), _t(temp), seed, rnd, pos, parents, nodes, 1.0, children, tile=tile)
    return got, want


def _verify(target: np.ndarray, temp: np.ndarray, parents: list[int], p: Any, walk: bool,
            tile: int | None = None) -> tuple[Any, Any]:
    """(kernel, reference) ``verify_tree`` (or ``verify_walk``) of the drafts ``p`` (a reference TreeProposal over
    every node); ``tile``: the verifier's (a small one splits each target row into several tiles)."""
    keys = (11, 12, 13)
    if walk:
        want = ref.verify_walk(target, temp, parents, p.tokens, p.status, *keys)
        got = dev.verify_walk(_t(target), _t(temp), parents, _t(p.tokens), _t(p.status), *keys, tile=tile)
    else:
        want = ref.verify_tree(target, temp, parents, p.tokens, p.status, p.ids, p.tickets, *keys)
        got = dev.verify_tree(_t(target), _t(temp), parents, _t(p.tokens), _t(p.status), _t(p.ids), _t(p.tickets),
                              *keys, tile=tile)
    return got, want


def _pair(parents: list[int], b: int, v: int, temp: np.ndarray, children: ref.Children, seed: int,
          noise: float = 0.7) -> tuple[np.ndarray, Any]:
    """Drafter logits at every node, their drafts (the reference's), and target logits near them (so children are
    accepted and rejected): (target, drafts)."""
    rng = np.random.default_rng(seed)
    n1 = len(parents)
    x = (rng.standard_normal((b, n1, v)) * 3).astype(np.float32)
    drafts = ref.propose_tree(x, temp, 5, 6, 7, parents, list(range(n1)), 1.0, children)
    target = (x + rng.standard_normal(x.shape) * noise).astype(np.float32)
    return target, drafts


# ------------------------------------------------------------------------------------------------------ §12.4


@pytest.mark.parametrize("children", ref.CHILDREN)
def test_draw_equals_the_reference(children: ref.Children) -> None:
    """Sampled, T0 and failed node rows of a 2x2 tree's three inner nodes at V = 1100: a NaN row, a row whose
    support is smaller than its branching (SMALL_SUPPORT); for the ranked children the selector's tile 256 (5 tiles of
    candidates merged)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 3, 1100)) * 2).astype(np.float32)
    x[1, 2, 7] = np.nan  # status 1 at node 2 of request 1
    x[3, 1, 1:] = -np.inf  # one finite logit: k = 2 > its support
    temp = np.array([1.0, 0.0, 0.7, 1.3], np.float32)
    got, want = _draw(x[:, :3], temp, TWO_BY_TWO, [0, 1, 2], children, tile=256 if children == "top-k" else None)
    assert (want.status == TreeStatus.SMALL_SUPPORT).any() and (want.status == 1).any()
    _same(got, want, DRAW_FIELDS, f"propose_tree {children}")


def test_draw_of_wide_nodes_and_their_keys() -> None:
    """An 8-wide root and its children in one call, uint64 keys near 2^64 (the position wraps), fp16 logits."""
    rng = np.random.default_rng(4)
    parents = [-1, *[0] * 8, *range(1, 9)]
    x = (rng.standard_normal((2, 9, 300)) * 1.5).astype(np.float16)
    temp = np.array([0.8, 1.0], np.float32)
    keys = (2**64 - 1, 2**64 - 2, 2**64 - 1)
    got, want = _draw(x, temp, parents, list(range(9)), "sampled", keys)
    _same(got, want, DRAW_FIELDS, "propose_tree wide")


# ------------------------------------------------------------------------------------------------------ §12.6, §12.9


def test_verify_tree_of_a_4_2_1_tree() -> None:
    """A sampled request over a 4-2-1 tree (21 nodes) whose target is near its drafter: children accepted and
    rejected, and the round ends below the root; tile 128 (3 tiles per target row)."""
    temp = np.array([1.0], np.float32)
    target, p = _pair(FOUR_TWO_ONE, 1, 257, temp, "sampled", 5)
    got, want = _verify(target, temp, FOUR_TWO_ONE, p, walk=False, tile=128)
    assert want.accepted[0] >= 1
    _same(got, want, VERDICT_FIELDS, "verify_tree 4-2-1")


def _statuses(walk: bool) -> tuple[np.ndarray, np.ndarray, Any]:
    """A 2x2 batch of every row status: OK (sampled and T0), a failed draw truncating the tree (and a NaN target row
    below it, ignored), a NaN target row at a live node, a bad temperature, a bad draft (slot tickets or, for the
    walk, a child token out of range), a wide-open target (a far drafter: rejections and corrections)."""
    temp = np.array([1.0, 0.0, 1.0, 0.9, np.nan, 1.0, 1.0], np.float32)
    target, p = _pair(TWO_BY_TWO, 7, 129, temp, "top-k" if walk else "sampled", 6)
    st, tok, tix = p.status.copy(), p.tokens.copy(), p.tickets.copy()
    st[2, 1] = 1  # node 1's draw failed: nodes 3, 4 are not live
    target[2, 3, 0] = np.nan  # ... so this row is ignored
    target[3, 2, 5] = np.nan  # a live node's target row: status 1
    if walk:
        tok[5, 4] = 129
    else:
        tix[5, 1, 0] += 1
    target[6] = np.random.default_rng(7).standard_normal(target[6].shape).astype(np.float32) * 3
    drafts = ref.TreeProposal(status=st, ids=p.ids, tickets=tix, tokens=tok)
    return target, temp, drafts


@pytest.mark.parametrize("walk", [False, True], ids=["accept-tree", "walk"])
def test_every_row_status(walk: bool) -> None:
    """Every status, over 3 tiles per target row (tile 64 at V = 129: the correction's tile found from the tile
    sums)."""
    target, temp, p = _statuses(walk)
    got, want = _verify(target, temp, TWO_BY_TWO, p, walk, tile=64)
    assert sorted(set(want.status.tolist())) == [0, 1, 4, 5]
    _same(got, want, VERDICT_FIELDS, "walk" if walk else "verify_tree")


def test_a_chain_is_the_chain_verifier() -> None:
    """§12.10 across kernels: verify_tree on a chain returns the chain verifier's (pp3.kernels.verify) status,
    accepted count and tokens, and the path 1 .. a."""
    from pp3.kernels import verify

    temp = np.array([1.0, 0.0], np.float32)
    target, p = _pair(CHAIN, 2, 200, temp, "sampled", 8, noise=0.3)
    got, _ = _verify(target, temp, CHAIN, p, walk=False)
    chain = verify(_t(target), _t(temp), _t(p.tokens[:, 1:]), _t(p.status[:, :-1]), _t(p.ids[:, :-1]),
                   _t(p.tickets[:, :-1]), 11, 12, 13)
    for f in ("status", "accepted", "tokens"):
        assert_equal(_host(getattr(got, f)), _host(getattr(chain, f)), f"chain {f}")
    a = _host(got.accepted)
    path = np.where(np.arange(3)[None, :] < a[:, None], np.arange(1, 4, dtype=np.int32)[None, :], np.int32(-1))
    assert_equal(_host(got.path), path, "path")


# ------------------------------------------------------------------------------------------------------ golden vectors

# The cases run by default (the interpreter takes ~0.1 s per node program); every case with --runslow and on the GPU.
FAST_GOLDEN = ("failed_nodes", "small_support_top_k", "uint64_extremes_wrap", "bf16_logits", "ties_top_k",
               "k_equals_the_support")


def _kernel_draw(**kw: Any) -> Any:
    return dev.propose_tree(**{k: _t(v) for k, v in kw.items()})


def _kernel_verify(walk: bool) -> Callable[..., Any]:
    def run(**kw: Any) -> Any:
        return (dev.verify_walk if walk else dev.verify_tree)(**{k: _t(v) for k, v in kw.items()})
    return run


def _golden() -> list[Any]:
    cases: list[Any] = [*load_tree_draw_golden(), *load_tree_verify_golden(ACCEPT_TREE_GOLDEN_FILE),
                        *load_tree_verify_golden(WALK_TREE_GOLDEN_FILE)]
    return [pytest.param(c, id=c.name, marks=() if c.name in FAST_GOLDEN else pytest.mark.slow) for c in cases]


def _run_golden(case: TreeDrawCase | TreeVerifyCase) -> tuple[Any, tuple[str, ...]]:
    if isinstance(case, TreeDrawCase):
        return case.run(_kernel_draw), DRAW_FIELDS
    return case.run(_kernel_verify(case.walk)), VERDICT_FIELDS


@pytest.mark.parametrize("case", _golden())
def test_golden_vectors_through_the_kernels(case: TreeDrawCase | TreeVerifyCase) -> None:
    got, fields = _run_golden(case)
    _same(got, case.expected, fields, case.name)


# ------------------------------------------------------------------------------------------------------ planted bugs

VERIFY_MUTANTS = ("tree-residual-unnormalized", "tree-q-not-reduced", "tree-sibling-parent-p",
                  "tree-bonus-from-residual")


def _mutant_draw() -> tuple[Any, Any]:
    """A small sampled draw (B = 2, the 2x2 tree's three inner nodes, V = 64): kernel outputs and its arguments."""
    rng = np.random.default_rng(10)
    x = (rng.standard_normal((2, 3, 64)) * 0.5).astype(np.float32)
    temp = np.array([1.0, 1.2], np.float32)
    return dev.propose_tree(_t(x), _t(temp), 5, 6, 7, TWO_BY_TWO, [0, 1, 2]), (x, temp, 5, 6, 7, TWO_BY_TWO,
                                                                                 [0, 1, 2])


def _mutant_verify() -> tuple[Any, Any]:
    """A small sampled verification (B = 4 over the 2x2 tree, V = 40; two targets near the drafter, two far):
    rejected siblings, corrections, bonuses at leaves. Kernel outputs and the reference's arguments."""
    temp = np.ones(4, np.float32)
    target, p = _pair(TWO_BY_TWO, 4, 40, temp, "sampled", 13, noise=0.2)  # a seed where every mutant shows
    target[2:] = np.random.default_rng(113).standard_normal(target[2:].shape).astype(np.float32)
    got, _ = _verify(target, temp, TWO_BY_TWO, p, walk=False)
    return got, (target, temp, TWO_BY_TWO, p.tokens, p.status, p.ids, p.tickets, 11, 12, 13)


@pytest.fixture(scope="module")
def kernel_outputs() -> dict[str, tuple[Any, Any]]:
    """The kernels' outputs on the small calls the planted bugs change (computed once)."""
    return {"draw": _mutant_draw(), "verify": _mutant_verify()}


def _mismatches(got: Any, want: Any) -> int:
    return sum(int((_host(getattr(got, f)) != np.asarray(getattr(want, f))).sum())
               for f in ("status", "ids", "tickets", "tokens", "accepted", "path") if hasattr(got, f))


@pytest.mark.parametrize("mutant", ["tree-draw-with-replacement", *VERIFY_MUTANTS])
def test_a_planted_reference_bug_disagrees_with_the_kernels(kernel_outputs: dict[str, Any], mutant: str) -> None:
    """The comparisons can fail: the kernels' bits against the reference with a catalogued §12 bug swapped in differ,
    and against the unmutated reference they agree."""
    draw = mutant == "tree-draw-with-replacement"
    got, args = kernel_outputs["draw" if draw else "verify"]
    run = ref.propose_tree if draw else ref.verify_tree
    assert _mismatches(got, run(*args)) == 0
    with mutants.patched(mutant):
        want = run(*args)
    assert _mismatches(got, want) > 0, f"the comparison missed the planted bug {mutant}"


@triton.jit
def _tree_uniform_column_0(seed: tl.tensor, rnd: tl.tensor, pos: tl.tensor, col: tl.tensor, domain: tl.tensor,
                           s: tl.tensor, offset: tl.tensor) -> tuple[tl.tensor, tl.tensor]:
    """A planted bug in the kernels: ``_tree._tree_uniform`` with every node's streams keyed as column 0 (§12.3), so
    the nodes of one depth share their words."""
    s = tl.maximum(s, 1)
    t = ((0xFFFFFFFFFFFFFFFF % s) + 1) % s
    out = tl.zeros_like(s)
    done = tl.zeros((), tl.int32)
    off = offset
    while done == 0:
        w0, w1, w2, w3 = philox_impl(rnd, pos, (off // 4).to(tl.uint64), tl.zeros_like(col), seed, domain)
        i = off % 4
        w = tl.where(i == 0, w0, tl.where(i == 1, w1, tl.where(i == 2, w2, w3)))
        take = w * s >= t
        out = tl.where(take, tl.math.umulhi(w, s), out)
        done = take.to(tl.int32)
        off += 1
    return out, off


def test_a_planted_kernel_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streams keyed without the node's column change the children drawn at node 2 (column 1), and the comparison
    with the reference says so (interpreter: a jit helper is replaced only there; a GPU keeps its binary)."""
    if DEV.type != "cpu":
        pytest.skip("a planted jit helper takes effect in the interpreter")
    monkeypatch.setattr(_tree, "_tree_uniform", _tree_uniform_column_0)
    got, args = _mutant_draw()
    assert _mismatches(got, ref.propose_tree(*args)) > 0


# ------------------------------------------------------------------------------------------------------ bad input


def _small_call(b: int = 2) -> dict[str, Any]:
    temp = np.array([1.0, 0.0][:b], np.float32)
    target, p = _pair(TWO_BY_TWO, b, 40, temp, "sampled", 9)
    return {"target_logits": _t(target), "target_temperature": _t(temp), "parents": TWO_BY_TWO,
            "draft_tokens": _t(p.tokens), "draft_status": _t(p.status), "draft_ids": _t(p.ids),
            "draft_tickets": _t(p.tickets), "seed": 11, "round": 12, "position": 13}


MALFORMED = {
    "cycle": [-1, 1, 0],  # a parent not before its child
    "decreasing": [-1, 0, 1, 0],
    "root": [0, 0, 1],
    "wide": [-1, *[0] * 33],
    "2-D": [[-1, 0]],
    "one node": [-1],
}


@pytest.mark.parametrize("parents", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_tree_is_refused_as_the_reference_refuses_it(parents: list[Any]) -> None:
    kw = _small_call() | {"parents": parents}
    with pytest.raises(ValueError, match="parents") as want:
        ref.verify_tree(**{k: _host(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
    with pytest.raises(ValueError, match="parents") as got:
        dev.verify_tree(**kw)
    assert str(got.value) == str(want.value)
    x = torch.zeros(1, 1, 40, device=DEV)
    with pytest.raises(ValueError, match="parents"):
        dev.propose_tree(x, 1.0, 1, 2, 3, parents, [0])


@pytest.mark.parametrize(("change", "error", "name"), [
    ({"parents": [-1, 0, 1]}, ValueError, "parents"),  # 3 nodes, 7 target rows
    ({"parents": np.array([-1.0, 0.0])}, TypeError, "parents"),
    ({"draft_tokens": torch.zeros(2, 7, dtype=torch.int64)}, TypeError, "draft_tokens"),
    ({"draft_status": torch.zeros(2, 6, dtype=torch.int8)}, ValueError, "draft_status"),
    ({"draft_ids": torch.zeros(2, 7, 31, dtype=torch.int32)}, ValueError, "draft_ids"),
    ({"seed": torch.zeros(3, dtype=torch.int64)}, ValueError, "seed"),
    ({"target_temperature": torch.zeros(2, dtype=torch.int32)}, TypeError, "target_temperature"),
])
def test_a_wrong_argument_is_named_before_any_launch(change: dict[str, Any], error: type[Exception],
                                                     name: str) -> None:
    kw = _small_call() | {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in change.items()}
    with pytest.raises(error, match=name):
        dev.verify_tree(**kw)


def test_draw_arguments_are_named() -> None:
    x = torch.zeros(2, 2, 40, device=DEV)
    for nodes, error in (([0, 0], ValueError), ([0, 7], ValueError), (np.array([0.0, 1.0]), TypeError)):
        with pytest.raises(error, match="nodes"):
            dev.propose_tree(x, 1.0, 1, 2, 3, TWO_BY_TWO, nodes)
    with pytest.raises(ValueError, match="children"):
        dev.propose_tree(x, 1.0, 1, 2, 3, TWO_BY_TWO, [0, 1], children="greedy")
    with pytest.raises(ValueError, match="logits"):
        dev.propose_tree(torch.zeros(2, 40, device=DEV), 1.0, 1, 2, 3, TWO_BY_TWO, [0, 1])


def test_out_buffers_are_checked_for_shared_memory() -> None:
    kw = _small_call()
    b = 2
    h = ref.as_tree("parents", TWO_BY_TWO).height
    buf = torch.empty(b * h + b * (h + 1) - 1, dtype=torch.int32, device=DEV)  # path and tokens share one entry
    shared = dev.TreeVerdict(status=torch.empty(b, dtype=torch.int8, device=DEV),
                             accepted=torch.empty(b, dtype=torch.int32, device=DEV),
                             path=buf[: b * h].view(b, h), tokens=buf[b * h - 1:].view(b, h + 1))
    with pytest.raises(ValueError, match="shares memory"):
        dev.verify_tree(**kw, out=shared)
    into_input = dataclasses.replace(shared, path=torch.empty(b, h, dtype=torch.int32, device=DEV),
                                     tokens=kw["draft_tokens"].view(-1)[: b * (h + 1)].view(b, h + 1))
    with pytest.raises(ValueError, match="shares memory"):
        dev.verify_tree(**kw, out=into_input)


# ------------------------------------------------------------------------------------------------------ custom ops


def test_the_custom_operators_equal_the_entry_points() -> None:
    """torch.ops.pp3.{propose_tree, verify_tree, verify_walk}: the entry points' bits."""
    kw = _small_call(1)
    keys = [torch.tensor([11], device=DEV), torch.tensor([12], device=DEV), torch.tensor([13], device=DEV)]
    args = (kw["target_logits"], kw["target_temperature"], TWO_BY_TWO, kw["draft_tokens"], kw["draft_status"])
    got = OPS.verify_tree(*args, kw["draft_ids"], kw["draft_tickets"], *keys)
    _same(dev.TreeVerdict(*got), dev.verify_tree(**kw), VERDICT_FIELDS, "pp3::verify_tree")
    walked = OPS.verify_walk(*args, *keys)
    _same(dev.TreeVerdict(*walked), dev.verify_walk(*args, 11, 12, 13), VERDICT_FIELDS, "pp3::verify_walk")
    drawn = OPS.propose_tree(kw["target_logits"][:, :3].contiguous(), kw["target_temperature"], *keys, TWO_BY_TWO,
                             [0, 1, 2])
    _same(dev.TreeProposal(*drawn), dev.propose_tree(kw["target_logits"][:, :3], kw["target_temperature"], 11, 12,
                                                     13, TWO_BY_TWO, [0, 1, 2]), DRAW_FIELDS, "pp3::propose_tree")


def test_opcheck() -> None:
    """torch.library.opcheck of the walk (the cheapest): schema, fake against real, dispatch under AOT tracing."""
    kw = _small_call(1)
    keys = [torch.tensor([11], device=DEV), torch.tensor([12], device=DEV), torch.tensor([13], device=DEV)]
    torch.library.opcheck(OPS.verify_walk.default, (kw["target_logits"], kw["target_temperature"], TWO_BY_TWO,
                                                    kw["draft_tokens"], kw["draft_status"], *keys))


def test_the_fakes_give_the_launchers_shapes_and_refusals() -> None:
    """Under FakeTensorMode nothing runs (V = 163840 costs nothing): the outputs have the launchers' shapes and
    dtypes, and a wrong argument is refused by the fake as by the entry point."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        i64, temp = torch.empty(4, dtype=torch.int64), torch.empty(4)
        drawn = OPS.propose_tree(torch.empty(4, 3, 163840), temp, i64, i64, i64, FOUR_TWO_ONE, [0, 1, 2])
        assert [(tuple(t.shape), t.dtype) for t in drawn] == [
            ((4, 3), torch.int8), ((4, 3, 32), torch.int32), ((4, 3, 32), torch.int32), ((4, 21), torch.int32)]
        target = torch.empty(4, 21, 163840)
        tok, st = torch.empty(4, 21, dtype=torch.int32), torch.empty(4, 21, dtype=torch.int8)
        slots = torch.empty(4, 21, 32, dtype=torch.int32)
        for got in (OPS.verify_tree(target, temp, FOUR_TWO_ONE, tok, st, slots, slots, i64, i64, i64),
                    OPS.verify_walk(target, temp, FOUR_TWO_ONE, tok, st, i64, i64, i64)):
            assert [(tuple(t.shape), t.dtype) for t in got] == [
                ((4,), torch.int8), ((4,), torch.int32), ((4, 3), torch.int32), ((4, 4), torch.int32)]
        with pytest.raises(ValueError, match="parents"):
            OPS.verify_walk(target, temp, TWO_BY_TWO, tok, st, i64, i64, i64)
        with pytest.raises(TypeError, match="draft_tokens"):
            OPS.verify_walk(target, temp, FOUR_TWO_ONE, st, st, i64, i64, i64)


def test_a_compiled_walk_equals_eager() -> None:
    """The walk under torch.compile(fullgraph=True) with device-tensor keys: one graph, the eager call's bits."""
    kw = _small_call(1)
    keys = [torch.tensor([11], device=DEV), torch.tensor([12], device=DEV), torch.tensor([13], device=DEV)]

    def step(target: Any, temp: Any, tok: Any, st: Any, seed: Any, rnd: Any, pos: Any) -> Any:
        return OPS.verify_walk(target, temp, TWO_BY_TWO, tok, st, seed, rnd, pos)

    args = (kw["target_logits"], kw["target_temperature"], kw["draft_tokens"], kw["draft_status"], *keys)
    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    _same(dev.TreeVerdict(*compiled(*args)), dev.TreeVerdict(*step(*args)), VERDICT_FIELDS, "compiled walk")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_a_captured_tree_step_replays_with_new_keys() -> None:
    """A draw at the root and the walk captured in one CUDA graph with device-tensor keys: a replay with new keys
    gives the eager calls' bits (the tree table was copied by the eager warm-up, not in the capture)."""
    temp = torch.tensor([1.0, 0.0], device=DEV)
    x = torch.randn(2, 1, 1000, device=DEV)
    target = torch.randn(2, 7, 1000, device=DEV)
    st = torch.zeros(2, 7, dtype=torch.int8, device=DEV)
    seed, rnd, pos = (torch.tensor([1, 2], device=DEV) for _ in range(3))
    keys = (seed, rnd, pos)

    def step() -> tuple[Any, Any]:
        p = dev.propose_tree(x, temp, seed, rnd, pos, TWO_BY_TWO, [0])
        return p, dev.verify_walk(target, temp, TWO_BY_TWO, p.tokens, st, seed, rnd, pos)

    step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for k in keys:
        k.add_(5)
    graph.replay()
    eager = step()
    _same(captured[0], eager[0], DRAW_FIELDS, "captured draw")
    _same(captured[1], eager[1], VERDICT_FIELDS, "captured walk")
