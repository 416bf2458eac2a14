"""The pure NumPy reference of SPEC.md (semantic IDs ``dyadic24-floor-first-v1``, ``accept-dyadic24-v1`` and the
draft trees' ``tree-draw-dyadic24-v1``, ``accept-tree-dyadic24-v1``, ``walk-tree-dyadic24-v1``). Imports neither
torch nor triton.

Modules mirror the SPEC: ``widen`` (§2.1), ``order`` (§4), ``tickets`` (§5, §8 draw), ``exponential`` (§6),
``philox`` (§8, §11.5), ``select`` (§2-§8, the selector), ``accept`` (§11, the verifier) and ``tree`` (§12, draft
trees).
"""

from pp3.reference._constants import (
    ACCEPT_SEMANTIC_ID,
    ACCEPT_TREE_SEMANTIC_ID,
    DEFAULT_TAU,
    DOMAIN_ACCEPT,
    DOMAIN_PROPOSAL,
    DOMAIN_RESIDUAL,
    DOMAIN_TREE,
    EMPTY_ID,
    MAX_CHILDREN,
    P_BITS,
    P_TICKETS,
    Q_SHIFT,
    SEMANTIC_ID,
    TICKETS,
    TREE_DRAW_SEMANTIC_ID,
    WALK_TREE_SEMANTIC_ID,
    AcceptStatus,
    K,
    Status,
    TreeStatus,
)
from pp3.reference.accept import Verdict, target_tickets, verify
from pp3.reference.exponential import expf
from pp3.reference.philox import philox4x64_10, proposal_uniform, uniform_below
from pp3.reference.select import Proposal, propose
from pp3.reference.tree import Tree, TreeProposal, TreeVerdict, as_tree, propose_tree, verify_tree, verify_walk
from pp3.reference.widen import bf16_bits_to_float32, float32_to_bf16_bits

__all__ = [
    "ACCEPT_SEMANTIC_ID",
    "ACCEPT_TREE_SEMANTIC_ID",
    "DEFAULT_TAU",
    "DOMAIN_ACCEPT",
    "DOMAIN_PROPOSAL",
    "DOMAIN_RESIDUAL",
    "DOMAIN_TREE",
    "EMPTY_ID",
    "MAX_CHILDREN",
    "P_BITS",
    "P_TICKETS",
    "Q_SHIFT",
    "SEMANTIC_ID",
    "TICKETS",
    "TREE_DRAW_SEMANTIC_ID",
    "WALK_TREE_SEMANTIC_ID",
    "AcceptStatus",
    "K",
    "Proposal",
    "Status",
    "Tree",
    "TreeProposal",
    "TreeStatus",
    "TreeVerdict",
    "Verdict",
    "as_tree",
    "bf16_bits_to_float32",
    "expf",
    "float32_to_bf16_bits",
    "philox4x64_10",
    "proposal_uniform",
    "propose",
    "propose_tree",
    "target_tickets",
    "uniform_below",
    "verify",
    "verify_tree",
    "verify_walk",
]
