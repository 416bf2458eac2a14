"""The Triton kernels of pp3, bit-identical to ``pp3.reference`` (SPEC.md): the selector's entry points (``select``),
the verifier's (``accept``) and the draft trees' (``tree``). Each checks its arguments once (``checks``) and calls the
launchers that trust them (``launchers``), which launch the ``@triton.jit`` bodies (``_select``, ``_accept``,
``_tree``, ``_rows``, ``_common``). The
names below are imported on first use (PEP 562), so ``config``, ``buffers`` and ``checks`` import without triton."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pp3.kernels.accept import Verdict, uniform_below, verify
    from pp3.kernels.config import LaunchConfig
    from pp3.kernels.select import (
        BAD_CANDIDATES,
        Candidates,
        Proposal,
        expf,
        finalize,
        greedy,
        greedy_sharded,
        philox,
        propose,
        propose_sharded,
        tile_candidates,
    )
    from pp3.kernels.tree import TreeProposal, TreeVerdict, propose_tree, verify_tree, verify_walk

_WHERE = {
    "BAD_CANDIDATES": "select",
    "Candidates": "select",
    "Proposal": "select",
    "expf": "select",
    "finalize": "select",
    "greedy": "select",
    "greedy_sharded": "select",
    "philox": "select",
    "propose": "select",
    "propose_sharded": "select",
    "tile_candidates": "select",
    "Verdict": "accept",
    "uniform_below": "accept",
    "verify": "accept",
    "LaunchConfig": "config",
    "TreeProposal": "tree",
    "TreeVerdict": "tree",
    "propose_tree": "tree",
    "verify_tree": "tree",
    "verify_walk": "tree",
}
__all__ = [
    "BAD_CANDIDATES",
    "Candidates",
    "LaunchConfig",
    "Proposal",
    "TreeProposal",
    "TreeVerdict",
    "Verdict",
    "expf",
    "finalize",
    "greedy",
    "greedy_sharded",
    "philox",
    "propose",
    "propose_sharded",
    "propose_tree",
    "tile_candidates",
    "uniform_below",
    "verify",
    "verify_tree",
    "verify_walk",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'pp3.kernels' has no attribute {name!r}")
    return getattr(importlib.import_module(f"pp3.kernels.{_WHERE[name]}"), name)
