"""The draft trees' public entry points (SPEC.md §12): ``propose_tree``, ``verify_tree`` and ``verify_walk`` mirror
``pp3.reference.propose_tree``, ``verify_tree`` and ``verify_walk`` (same argument order, same results) on torch
tensors.

The tree (``parents``) and a draw's ``nodes`` are the round's shape: host arrays (lists, NumPy arrays, CPU tensors),
checked on the host by the reference's own checks and turned once per (tree, device) into a small device table
(``tree_table``, cached: a CUDA graph captured after one eager call with the same tree copies nothing). Every other
argument is checked here once (``checks``), before any launch and without reading device memory; then
``launchers.propose_tree`` / ``launchers.verify_tree`` run the launches of docs/TREE_KERNELS.md, trusting them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pp3.kernels import checks, launchers
from pp3.kernels.buffers import RowKeys, TreeProposal, TreeVerdict, tree_proposal_spec, tree_verdict_spec
from pp3.kernels.config import DEFAULT_LAUNCH, LaunchConfig
from pp3.reference import tree as reference
from pp3.reference._constants import DEFAULT_TAU, K

__all__ = ["TreeProposal", "TreeVerdict", "propose_tree", "tree_table", "verify_tree", "verify_walk"]

_TABLES: dict[tuple[bytes, torch.device], torch.Tensor] = {}
_NODES: dict[tuple[bytes, torch.device], torch.Tensor] = {}


def _host(name: str, value: Any) -> Any:
    """A host array argument (``parents``, ``nodes``) as NumPy; a device tensor is refused (reading it would
    synchronise, and a captured graph could not)."""
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise ValueError(f"{name}: a tree's shape is host data (a list, a NumPy array or a CPU tensor), got a "
                             f"tensor on {value.device}")
        return value.numpy()
    return value


def tree_table(tree: reference.Tree, device: torch.device) -> torch.Tensor:
    """The tree as the kernels read it: [5, N+1] int32 (``_tree.T_*``: parents, depth, column, first child,
    branching), on ``device``; one copy per (tree, device), kept."""
    fields = np.stack([tree.parents, tree.depth, tree.column, tree.first_child, tree.branching]).astype(np.int32)
    return _cached(_TABLES, fields, device)


def _cached(cache: dict[tuple[bytes, torch.device], torch.Tensor], arr: Any, device: torch.device) -> torch.Tensor:
    """``arr`` on ``device``, one copy per (contents, device). Only real tensors are kept: under FakeTensorMode (a
    custom operator's fake, torch.compile's tracing) the copy is a fake tensor, which a later real call must not
    get."""
    key = (arr.tobytes(), device)
    t = cache.get(key)
    if t is None:
        t = torch.from_numpy(arr).to(device)
        if type(t) is torch.Tensor:
            cache[key] = t
    return t


def _node_table(nodes: Any, device: torch.device) -> torch.Tensor:
    return _cached(_NODES, np.ascontiguousarray(nodes, dtype=np.int32), device)


def propose_tree(
    logits: torch.Tensor,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    parents: Any,
    nodes: Any,
    tau: float = DEFAULT_TAU,
    children: str = "sampled",
    *,
    tile: int | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
    out: TreeProposal | None = None,
) -> TreeProposal:
    """The Triton tree draw (SPEC.md §12.4, ``tree-draw-dyadic24-v1``): same arguments and results as
    ``pp3.reference.propose_tree``, on torch tensors. ``logits`` [B, M, V] fp32/fp16/bf16; keys as ``propose``'s;
    ``parents``, ``nodes`` host arrays. ``tile``: the tile selector's tile (its candidates give the ranked children);
    ``out``: caller-owned buffers (a ``TreeProposal`` of contiguous tensors sharing no memory with each other or an
    input), written in place."""
    return launchers.propose_tree(*propose_tree_args(logits, target_temperature, seed, round, position, parents, nodes,
                                                     tau, children, tile, launch, out))


def propose_tree_args(
    logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, parents: Any, nodes: Any, tau: Any,
    children: Any, tile: Any, launch: Any, out: Any,
) -> tuple[torch.Tensor, int, RowKeys, float, torch.Tensor, torch.Tensor, bool, LaunchConfig, TreeProposal]:
    """The arguments of ``propose_tree``, checked, as ``launchers.propose_tree`` takes them (the custom operators'
    fake implementations check through it too)."""
    x = checks.logits("logits", logits, dims=3, rows="M")
    b, m, v = x.shape
    dev = x.device
    keys = checks.row_keys(target_temperature, seed, round, position, b, dev)
    tree = reference.as_tree("parents", _host("parents", parents))
    node = reference._as_nodes("nodes", _host("nodes", nodes), tree, m)
    t = checks.tile(tile, v)
    checks.tiles_fit(-(-v // t), f"tile {t} on V = {v}")
    tau32 = checks.tau(tau)
    if children not in reference.CHILDREN:
        raise ValueError(f"children: expected one of {reference.CHILDREN}, got {children!r}")
    cfg = checks.launch_config(launch)
    reads = checks.tensors([("logits", logits), ("target_temperature", target_temperature), ("seed", seed),
                            ("round", round), ("position", position)])
    dest: TreeProposal = checks.outputs(TreeProposal, out, tree_proposal_spec(b, m, tree.size), dev, reads)
    return (x.reshape(b * m, v), t, keys, tau32, tree_table(tree, dev), _node_table(node, dev),
            children == "sampled", cfg, dest)


def verify_tree(
    target_logits: torch.Tensor,
    target_temperature: Any,
    parents: Any,
    draft_tokens: torch.Tensor,
    draft_status: torch.Tensor,
    draft_ids: torch.Tensor,
    draft_tickets: torch.Tensor,
    seed: Any,
    round: Any,
    position: Any,
    *,
    tile: int | None = None,
    out: TreeVerdict | None = None,
) -> TreeVerdict:
    """The Triton tree verifier (SPEC.md §12.5-§12.6, ``accept-tree-dyadic24-v1``): same arguments and results as
    ``pp3.reference.verify_tree``, on torch tensors: ``target_logits`` [B, N+1, V] fp32/fp16/bf16, ``parents`` a host
    array, drafts as ``propose_tree`` returns them gathered per node (int32 tokens [B, N+1], int8 statuses
    [B, N+1], int32 slots [B, N+1, K]), keys as ``verify``'s. ``out``: caller-owned buffers (a ``TreeVerdict``)."""
    return launchers.verify_tree(*verify_tree_args(target_logits, target_temperature, parents, draft_tokens,
                                                   draft_status, draft_ids, draft_tickets, seed, round, position,
                                                   tile, out, walk=False))


def verify_walk(
    target_logits: torch.Tensor,
    target_temperature: Any,
    parents: Any,
    draft_tokens: torch.Tensor,
    draft_status: torch.Tensor,
    seed: Any,
    round: Any,
    position: Any,
    *,
    tile: int | None = None,
    out: TreeVerdict | None = None,
) -> TreeVerdict:
    """The Triton walk (SPEC.md §12.9, ``walk-tree-dyadic24-v1``): same arguments and results as
    ``pp3.reference.verify_walk``; arguments as ``verify_tree`` without the slots."""
    return launchers.verify_tree(*verify_tree_args(target_logits, target_temperature, parents, draft_tokens,
                                                   draft_status, None, None, seed, round, position, tile, out,
                                                   walk=True))


def verify_tree_args(
    target_logits: Any, target_temperature: Any, parents: Any, draft_tokens: Any, draft_status: Any, draft_ids: Any,
    draft_tickets: Any, seed: Any, round: Any, position: Any, tile: Any, out: Any, *, walk: bool,
) -> tuple[torch.Tensor, int, torch.Tensor, int, torch.Tensor, torch.Tensor, torch.Tensor | None,
           torch.Tensor | None, RowKeys, TreeVerdict]:
    """The arguments of ``verify_tree`` (``walk`` False) or ``verify_walk`` (True), checked, as
    ``launchers.verify_tree`` takes them (the slots None for the walk)."""
    x = checks.logits("target_logits", target_logits, dims=3)
    b, n1, v = x.shape
    dev = x.device
    keys = checks.row_keys(target_temperature, seed, round, position, b, dev)
    tree = reference.as_tree("parents", _host("parents", parents))
    if tree.size != n1:
        raise ValueError(f"parents: a tree of {tree.size} nodes, but target_logits has {n1} rows per request (one per "
                         "node, the root first)")
    t = checks.verify_tile(tile, v, b * n1)
    tok = checks.tensor("draft_tokens", draft_tokens, torch.int32, (b, n1), dev)
    dst = checks.tensor("draft_status", draft_status, torch.int8, (b, n1), dev)
    named = [("target_logits", target_logits), ("target_temperature", target_temperature),
             ("draft_tokens", draft_tokens), ("draft_status", draft_status), ("seed", seed), ("round", round),
             ("position", position)]
    ids = tix = None
    if not walk:
        ids = checks.tensor("draft_ids", draft_ids, torch.int32, (b, n1, K), dev)
        tix = checks.tensor("draft_tickets", draft_tickets, torch.int32, (b, n1, K), dev)
        named += [("draft_ids", draft_ids), ("draft_tickets", draft_tickets)]
    dest: TreeVerdict = checks.outputs(TreeVerdict, out, tree_verdict_spec(b, tree.height), dev,
                                       checks.tensors(named))
    return x, t, tree_table(tree, dev), tree.height, tok, dst, ids, tix, keys, dest
