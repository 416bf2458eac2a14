"""The engines' tree layouts (pp3.tree_layouts) round-trip exactly with pp3's canonical parent arrays (SPEC.md §12.2):
paths (vLLM, Medusa/EAGLE choices), SGLang's first child / next sibling with any node numbering, and tree masks; a
layout that is no tree is refused naming its argument. NumPy only."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from pp3.reference import as_tree
from pp3.tree_layouts import (
    parents_from_paths,
    parents_from_retrive,
    parents_from_tree_mask,
    paths_from_parents,
    retrive_from_parents,
    tree_mask_from_parents,
)

SHAPES = {
    "chain": [-1, 0, 1, 2],
    "2x2": [-1, 0, 0, 1, 1, 2, 2],
    "4-2-1": [-1, *[0] * 4, *[i for i in range(1, 5) for _ in range(2)], *range(5, 13)],
    "uneven": [-1, 0, 0, 0, 1, 1, 1, 3, 4, 4],
    "wide32": [-1, *[0] * 32],
}


def _random_tree(rng: np.random.Generator, n: int) -> list[int]:
    """A random canonical tree of n + 1 nodes: each new level's nodes hang off the previous level in order."""
    parents = [-1]
    level = [0]
    while len(parents) < n + 1:
        width = [int(rng.integers(0, 4)) for _ in level]
        if not any(width):
            width[0] = 1
        nxt = []
        for u, k in zip(level, width, strict=True):
            for _ in range(min(k, n + 1 - len(parents))):
                nxt.append(len(parents))
                parents.append(u)
        level = nxt
    return parents


def _trees() -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [*SHAPES.values(), *(_random_tree(rng, int(rng.integers(1, 60))) for _ in range(40))]


@pytest.mark.parametrize("parents", _trees())
def test_paths_round_trip(parents: list[int]) -> None:
    paths = paths_from_parents(parents)
    back, order = parents_from_paths(paths)
    assert back.tolist() == parents and order.tolist() == [-1, *range(len(paths))]
    rng = np.random.default_rng(len(parents))
    shuffled = [paths[i] for i in rng.permutation(len(paths))]  # any listing order gives the same tree
    back, order = parents_from_paths(shuffled)
    assert back.tolist() == parents and [shuffled[i] for i in order[1:]] == paths


@pytest.mark.parametrize("parents", _trees())
def test_retrive_round_trip_in_any_numbering(parents: list[int]) -> None:
    index, nt, ns = retrive_from_parents(parents, 3)
    n1 = len(parents)
    assert index.tolist() == np.arange(3 * n1).reshape(3, n1).tolist()
    back, order = parents_from_retrive(nt[1], ns[1])
    assert back.tolist() == parents and order.tolist() == list(range(n1))
    # the engine numbers the draft nodes in its own order (node 0 stays the root)
    perm = np.concatenate([[0], 1 + np.random.default_rng(n1).permutation(n1 - 1)])  # canonical i -> engine perm[i]
    e_nt, e_ns = np.full(n1, -1), np.full(n1, -1)
    e_nt[perm] = np.where(nt[0] >= 0, perm[nt[0]], -1)
    e_ns[perm] = np.where(ns[0] >= 0, perm[ns[0]], -1)
    back, order = parents_from_retrive(e_nt, e_ns)
    assert back.tolist() == parents and order.tolist() == perm.tolist()


def test_sglang_walk_visits_children_in_draw_order() -> None:
    """The verify walk engines run over next_token / next_sibling meets node u's children as c_1, c_2, ...."""
    parents = SHAPES["uneven"]
    tree = as_tree("parents", parents)
    _, nt, ns = retrive_from_parents(parents, 1)
    for u in range(len(parents)):
        seen, c = [], int(nt[0, u])
        while c != -1:
            seen.append(c)
            c = int(ns[0, c])
        assert seen == tree.children(u).tolist()


@pytest.mark.parametrize("parents", _trees())
def test_tree_mask_round_trip(parents: list[int]) -> None:
    mask = tree_mask_from_parents(parents)
    tree = as_tree("parents", parents)
    assert (mask.sum(axis=1) == tree.depth + 1).all()
    assert parents_from_tree_mask(mask).tolist() == parents


@pytest.mark.parametrize(("call", "name"), [
    (lambda: parents_from_paths([(0,), (0,)]), "paths"),
    (lambda: parents_from_paths([(0,), (1, 0)]), "paths"),
    (lambda: parents_from_paths([()]), "paths"),
    (lambda: parents_from_retrive([1, 2, 1], [-1, -1, -1]), "next_sibling"),  # a cycle: 1 -> 2 -> 1
    (lambda: parents_from_retrive([1, -1, -1], [-1, -1, -1]), "next_token"),  # node 2 unreachable
    (lambda: parents_from_retrive([3, -1, -1], [-1, -1, -1]), "next_token"),
    (lambda: parents_from_tree_mask(np.ones((3, 3), dtype=bool)), "mask"),
    (lambda: parents_from_tree_mask(np.eye(3, dtype=bool)), "mask"),
    (lambda: paths_from_parents([-1, 1]), "parents"),
])
def test_a_layout_that_is_no_tree_is_refused(call: Callable[[], object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()
