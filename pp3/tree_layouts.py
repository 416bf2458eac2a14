"""Exact adapters between pp3's tree layout (SPEC.md §12.2: a parent array in the canonical order) and the layouts
engines use for draft trees, as pure NumPy functions (issue #55, goal 4). Each returns, besides the other layout, the
map between the two numberings of the nodes, so per-node data (tokens, statuses, slots, logits rows) moves with it.

- **Paths** (vLLM's ``speculative_token_tree``, Medusa's and EAGLE's "choices"): a list of tuples, one per draft node,
  the child ranks from the root, e.g. ``[(0,), (1,), (0, 0)]``; the root is the empty path, not listed.
  ``parents_from_paths`` / ``paths_from_parents``.
- **First child / next sibling** (SGLang's EAGLE ``retrive_next_token`` / ``retrive_next_sibling``, per request
  ``[N+1]``, -1 for none, node 0 the root) and ``retrive_index`` (each node's flat row ``b (N+1) + i`` in the batch):
  ``retrive_from_parents`` / ``parents_from_retrive``. An engine's numbering need not be canonical: the adapter
  numbers the nodes breadth first, each node's children in sibling order (the draw order).
- **Tree masks** (``[N+1, N+1]`` bool, row i true at i's ancestors and i itself: the attention mask of a tree
  verification): ``tree_mask_from_parents`` / ``parents_from_tree_mask`` (children in the mask's index order).

Every function checks its input and raises ``ValueError`` naming the argument for a layout that is no tree (a cycle,
a node unreachable from the root, a path whose parent path is missing); ``pp3.reference.as_tree`` checks the parent
arrays. Imports neither torch nor triton.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference.tree import Tree, as_tree

I64 = npt.NDArray[np.int64]


def parents_from_paths(paths: Sequence[Sequence[int]]) -> tuple[I64, I64]:
    """The canonical parent array of a tree given by its nodes' paths, and ``order`` [N+1]: the index in ``paths`` of
    each canonical node (-1 for the root). Nodes are ordered by depth, then by path (so each node's children follow
    their ranks: the draw order). ValueError naming ``paths`` if one is repeated, empty, negative, or its parent path
    is missing."""
    as_tuples = [tuple(int(c) for c in p) for p in paths]
    index = {p: i for i, p in enumerate(as_tuples)}
    if len(index) != len(as_tuples):
        raise ValueError("paths: a path is listed twice")
    for p in as_tuples:
        if not p or min(p) < 0:
            raise ValueError(f"paths: {p} is no path of child ranks (non-empty, each >= 0)")
        if len(p) > 1 and p[:-1] not in index:
            raise ValueError(f"paths: {p}'s parent path {p[:-1]} is missing")
    ordered = sorted(as_tuples, key=lambda p: (len(p), p))
    node = {(): 0} | {p: i + 1 for i, p in enumerate(ordered)}
    parents = np.array([-1, *[node[p[:-1]] for p in ordered]], dtype=np.int64)
    order = np.array([-1, *[index[p] for p in ordered]], dtype=np.int64)
    as_tree("parents", parents)  # canonical by construction; checks the branching (<= 32 children)
    return parents, order


def paths_from_parents(parents: Any) -> list[tuple[int, ...]]:
    """The paths of nodes 1 .. N of a canonical tree (node i's path: its parent's, then its index among its
    siblings)."""
    tree = as_tree("parents", parents)
    paths: list[tuple[int, ...]] = [()]
    for i in range(1, tree.size):
        p = int(tree.parents[i])
        paths.append((*paths[p], i - int(tree.first_child[p])))
    return paths[1:]


def retrive_from_parents(parents: Any, batch: int) -> tuple[I64, I64, I64]:
    """SGLang's layout of a canonical tree for ``batch`` requests: ``retrive_index`` [B, N+1] (b (N+1) + i),
    ``retrive_next_token`` [B, N+1] (each node's first child, -1 for a leaf) and ``retrive_next_sibling`` [B, N+1]
    (the next child of the same parent, -1 for the last)."""
    tree = as_tree("parents", parents)
    n1 = tree.size
    first = np.where(tree.branching > 0, tree.first_child, -1)
    nxt = np.full(n1, -1, dtype=np.int64)
    i = np.arange(1, n1)
    same = np.append(tree.parents[2:] == tree.parents[1:-1], False)  # node i + 1 has node i's parent
    nxt[i] = np.where(same, i + 1, -1)
    index = np.arange(batch * n1, dtype=np.int64).reshape(batch, n1)
    return index, np.tile(first, (batch, 1)), np.tile(nxt, (batch, 1))


def parents_from_retrive(next_token: Any, next_sibling: Any) -> tuple[I64, I64]:
    """The canonical parent array of one request's tree in SGLang's layout (``next_token``, ``next_sibling`` [N+1],
    node 0 the root, any numbering), and ``order`` [N+1]: the engine's index of each canonical node (0 for the root).
    Breadth first from the root, each node's children in sibling order. ValueError naming the argument for an index
    out of range, a node reached twice (a cycle or a shared child) or never."""
    nt, ns = np.asarray(next_token, dtype=np.int64), np.asarray(next_sibling, dtype=np.int64)
    n1 = nt.size
    if nt.ndim != 1 or ns.shape != nt.shape or n1 < 2:
        raise ValueError(f"next_token: expected two [N+1] arrays (N >= 1), got {nt.shape} and {ns.shape}")
    for name, arr in (("next_token", nt), ("next_sibling", ns)):
        if arr.min() < -1 or arr.max() >= n1:
            raise ValueError(f"{name}: indices must lie in -1 .. {n1 - 1}")
    order, parents = [0], [-1]
    seen = np.zeros(n1, dtype=bool)
    seen[0] = True
    head = 0
    while head < len(order):
        c = int(nt[order[head]])
        while c != -1:
            if seen[c]:
                raise ValueError(f"next_sibling: node {c} is reached twice (a cycle or a shared child)")
            seen[c] = True
            order.append(c)
            parents.append(head)
            c = int(ns[c])
        head += 1
    if not seen.all():
        raise ValueError(f"next_token: nodes {np.flatnonzero(~seen).tolist()} are not reached from the root")
    p = np.array(parents, dtype=np.int64)
    as_tree("parents", p)
    return p, np.array(order, dtype=np.int64)


def tree_mask_from_parents(parents: Any) -> npt.NDArray[np.bool_]:
    """The tree attention mask [N+1, N+1]: row i is true at node i and its ancestors."""
    tree: Tree = as_tree("parents", parents)
    return _ancestor_mask(tree.parents)


def parents_from_tree_mask(mask: Any) -> I64:
    """The parent array of a tree attention mask (node 0 the root, nodes numbered as in the mask, which must already
    be canonical): each node's parent is its deepest proper ancestor. ValueError naming ``mask`` if it is no tree's
    mask."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2 or m.shape[0] != m.shape[1] or m.shape[0] < 2:
        raise ValueError(f"mask: expected a square [N+1, N+1] mask, N >= 1, got shape {m.shape}")
    depth = m.sum(axis=1)  # ancestors and self
    proper = m & ~np.eye(m.shape[0], dtype=bool)
    parents = np.where(proper.any(axis=1), np.argmax(np.where(proper, depth[None, :], -1), axis=1), -1)
    parents = parents.astype(np.int64)
    if parents[0] != -1 or not np.array_equal(_ancestor_mask(parents), m):
        raise ValueError("mask: not the ancestor mask of a tree rooted at node 0")
    as_tree("parents", parents)
    return parents


def _ancestor_mask(parents: I64) -> npt.NDArray[np.bool_]:
    """Row i true at node i and its ancestors, for any array with 0 <= parents[i] < i for i >= 1 (all false
    otherwise: no tree's mask)."""
    n1 = parents.size
    mask = np.eye(n1, dtype=bool)
    for i in range(1, n1):
        if not 0 <= parents[i] < i:
            return np.zeros((n1, n1), dtype=bool)
        mask[i] |= mask[parents[i]]
    return mask
