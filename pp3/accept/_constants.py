"""SPEC.md §11.1 constants and §11.3 statuses of the acceptance step."""

from __future__ import annotations

import enum

from pp3.reference._constants import DOMAIN_ACCEPT, DOMAIN_RESIDUAL, TICKET_BITS, TICKETS

ACCEPT_SEMANTIC_ID = "accept-dyadic24-v1"
P_BITS = 40  # the target distribution is given in tickets of 2^40 (§11.4)
P_TICKETS = 1 << P_BITS
Q_SHIFT = P_BITS - TICKET_BITS  # 16: one proposal ticket (of 2^24) is 2^16 target tickets
Q_TICKETS = TICKETS  # 2^24, the proposal's ticket total (§5)

__all__ = [
    "ACCEPT_SEMANTIC_ID",
    "DOMAIN_ACCEPT",
    "DOMAIN_RESIDUAL",
    "P_BITS",
    "P_TICKETS",
    "Q_SHIFT",
    "Q_TICKETS",
    "AcceptStatus",
]


class AcceptStatus(enum.IntEnum):
    """Row status of a verification (§11.3). Values 1-4 are SPEC.md §3's; lower non-zero values take precedence."""

    OK = 0
    NAN_LOGIT = 1
    POS_INF_LOGIT = 2
    ZERO_MASS = 3
    BAD_TEMPERATURE = 4
    BAD_DRAFT = 5
