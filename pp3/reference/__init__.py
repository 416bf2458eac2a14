"""The pure NumPy reference of SPEC.md (semantic IDs ``dyadic24-floor-first-v1`` and ``accept-dyadic24-v1``).
Imports neither torch nor triton.

Modules mirror the SPEC: ``widen`` (§2.1), ``order`` (§4), ``tickets`` (§5, §8 draw), ``exponential`` (§6),
``philox`` (§8, §11.5), ``select`` (§2-§8, the selector) and ``accept`` (§11, the verifier).
"""

from pp3.reference._constants import (
    ACCEPT_SEMANTIC_ID,
    DEFAULT_TAU,
    DOMAIN_ACCEPT,
    DOMAIN_PROPOSAL,
    DOMAIN_RESIDUAL,
    EMPTY_ID,
    P_BITS,
    P_TICKETS,
    Q_SHIFT,
    SEMANTIC_ID,
    TICKETS,
    AcceptStatus,
    K,
    Status,
)
from pp3.reference.accept import Verdict, target_tickets, verify
from pp3.reference.exponential import expf
from pp3.reference.philox import philox4x64_10, proposal_uniform, uniform_below
from pp3.reference.select import Proposal, propose
from pp3.reference.widen import bf16_bits_to_float32, float32_to_bf16_bits

__all__ = [
    "ACCEPT_SEMANTIC_ID",
    "DEFAULT_TAU",
    "DOMAIN_ACCEPT",
    "DOMAIN_PROPOSAL",
    "DOMAIN_RESIDUAL",
    "EMPTY_ID",
    "P_BITS",
    "P_TICKETS",
    "Q_SHIFT",
    "SEMANTIC_ID",
    "TICKETS",
    "AcceptStatus",
    "K",
    "Proposal",
    "Status",
    "Verdict",
    "bf16_bits_to_float32",
    "expf",
    "float32_to_bf16_bits",
    "philox4x64_10",
    "proposal_uniform",
    "propose",
    "target_tickets",
    "uniform_below",
    "verify",
]
