"""pp3: exact, reproducible sampled draft proposals for speculative decoding, and their lossless verification.

The definition is SPEC.md (semantic IDs ``dyadic24-floor-first-v1`` for the selector, ``accept-dyadic24-v1`` for
the verifier, and for draft trees ``tree-draw-dyadic24-v1``, ``accept-tree-dyadic24-v1`` and
``walk-tree-dyadic24-v1``); :mod:`pp3.reference` is its pure NumPy reference and :mod:`pp3.kernels` the Triton kernels
that match it bit for bit (the draft trees have the reference only, so far). Importing ``pp3`` imports neither torch
nor triton.
"""

from pp3.reference import (
    DEFAULT_TAU,
    SEMANTIC_ID,
    TICKETS,
    AcceptStatus,
    K,
    Proposal,
    Status,
    TreeProposal,
    TreeStatus,
    TreeVerdict,
    Verdict,
    propose,
    propose_tree,
    verify,
    verify_tree,
    verify_walk,
)

__all__ = [
    "DEFAULT_TAU",
    "SEMANTIC_ID",
    "TICKETS",
    "AcceptStatus",
    "K",
    "Proposal",
    "Status",
    "TreeProposal",
    "TreeStatus",
    "TreeVerdict",
    "Verdict",
    "propose",
    "propose_tree",
    "verify",
    "verify_tree",
    "verify_walk",
]
__version__ = "0.1.0"
