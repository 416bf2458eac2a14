"""SPEC.md §1 constants and §3 statuses."""

from __future__ import annotations

import enum

import numpy as np

SEMANTIC_ID = "dyadic24-floor-first-v1"
K = 32  # slots per row
TICKETS = 1 << 24  # tickets per row
TICKET_BITS = 24
DEFAULT_TAU = float(np.float32(0.7))  # 0x3F333333

DOMAIN_PROPOSAL = 0x7070335F70726F70  # "pp3_prop"
DOMAIN_ACCEPT = 0x7070335F61637074  # "pp3_acpt", reserved for acceptance draws
DOMAIN_RESIDUAL = 0x7070335F72657364  # "pp3_resd", reserved for residual draws

EMPTY_ID = -1  # id of an empty slot (§7)
MAX_VOCAB = (1 << 31) - 1  # V < 2^31 (§2)


class Status(enum.IntEnum):
    """Row status (SPEC.md §3). Lower non-zero values take precedence."""

    OK = 0
    NAN_LOGIT = 1
    POS_INF_LOGIT = 2
    ZERO_MASS = 3
    BAD_TEMPERATURE = 4
