"""Lossless verification of a speculation round: SPEC.md §11 (semantic ID ``accept-dyadic24-v1``).

``pp3.accept.reference`` is the pure NumPy reference (imported here); ``pp3.accept.kernel`` is the Triton kernel
that matches it bit for bit. The kernel imports torch and triton, so it is never imported by this package: import
``pp3.accept.kernel`` explicitly.
"""

from pp3.accept._constants import ACCEPT_SEMANTIC_ID, P_BITS, P_TICKETS, Q_SHIFT, AcceptStatus
from pp3.accept.reference import Verdict, target_tickets, uniform_below, verify

__all__ = [
    "ACCEPT_SEMANTIC_ID",
    "P_BITS",
    "P_TICKETS",
    "Q_SHIFT",
    "AcceptStatus",
    "Verdict",
    "target_tickets",
    "uniform_below",
    "verify",
]
