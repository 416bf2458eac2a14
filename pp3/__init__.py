"""pp3: exact, reproducible sampled draft proposals for speculative decoding.

The definition is SPEC.md (semantic ID ``dyadic24-floor-first-v1``); :mod:`pp3.reference` is its pure NumPy
reference and :mod:`pp3.kernels` the Triton kernels that match it bit for bit. Importing ``pp3`` imports
neither torch nor triton.
"""

from pp3.reference import (
    DEFAULT_TAU,
    SEMANTIC_ID,
    TICKETS,
    K,
    Proposal,
    Status,
    propose,
)

__all__ = ["DEFAULT_TAU", "SEMANTIC_ID", "TICKETS", "K", "Proposal", "Status", "propose"]
__version__ = "0.1.0"
