"""pp3: exact, reproducible sampled draft proposals for speculative decoding, and their lossless verification.

The definition is SPEC.md (semantic IDs ``dyadic24-floor-first-v1`` for the selector, ``accept-dyadic24-v1`` for
the verifier); :mod:`pp3.reference` is its pure NumPy reference and :mod:`pp3.kernels` the Triton kernels that
match it bit for bit. Importing ``pp3`` imports neither torch nor triton.
"""

from pp3.reference import (
    DEFAULT_TAU,
    SEMANTIC_ID,
    TICKETS,
    AcceptStatus,
    K,
    Proposal,
    Status,
    Verdict,
    propose,
    verify,
)

__all__ = [
    "DEFAULT_TAU",
    "SEMANTIC_ID",
    "TICKETS",
    "AcceptStatus",
    "K",
    "Proposal",
    "Status",
    "Verdict",
    "propose",
    "verify",
]
__version__ = "0.1.0"
