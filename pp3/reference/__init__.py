"""The pure NumPy reference of SPEC.md (semantic ID ``dyadic24-floor-first-v1``). Imports neither torch nor triton.

Modules mirror the SPEC: ``order`` (§4), ``expf`` (§6), ``tickets`` (§5, §8 draw), ``philox`` (§8), ``propose`` (§2-§8).
"""

from pp3.reference._constants import (
    DEFAULT_TAU,
    DOMAIN_ACCEPT,
    DOMAIN_PROPOSAL,
    DOMAIN_RESIDUAL,
    EMPTY_ID,
    SEMANTIC_ID,
    TICKETS,
    K,
    Status,
)
from pp3.reference.expf import expf
from pp3.reference.philox import philox4x64_10, proposal_uniform
from pp3.reference.propose import Proposal, propose
from pp3.reference.widen import bf16_bits_to_float32, float32_to_bf16_bits

__all__ = [
    "DEFAULT_TAU",
    "DOMAIN_ACCEPT",
    "DOMAIN_PROPOSAL",
    "DOMAIN_RESIDUAL",
    "EMPTY_ID",
    "SEMANTIC_ID",
    "TICKETS",
    "K",
    "Proposal",
    "Status",
    "bf16_bits_to_float32",
    "expf",
    "float32_to_bf16_bits",
    "philox4x64_10",
    "proposal_uniform",
    "propose",
]
