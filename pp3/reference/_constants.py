"""SPEC.md §1, §11.1 and §12.1 constants, §3, §11.3 and §12.4 statuses."""

from __future__ import annotations

import enum

import numpy as np

SEMANTIC_ID = "dyadic24-floor-first-v1"
K = 32  # slots per row
TICKETS = 1 << 24  # tickets per row
TICKET_BITS = 24
DEFAULT_TAU = float(np.float32(0.7))  # 0x3F333333

DOMAIN_PROPOSAL = 0x7070335F70726F70  # "pp3_prop"
DOMAIN_ACCEPT = 0x7070335F61637074  # "pp3_acpt": the acceptance draws (§11.5)
DOMAIN_RESIDUAL = 0x7070335F72657364  # "pp3_resd": the residual draws (§11.5)

EMPTY_ID = -1  # id of an empty slot (§7)
MAX_VOCAB = (1 << 31) - 1  # V < 2^31 (§2)

ACCEPT_SEMANTIC_ID = "accept-dyadic24-v1"
P_BITS = 40  # the target distribution is given in tickets of 2^40 (§11.4)
P_TICKETS = 1 << P_BITS
Q_SHIFT = P_BITS - TICKET_BITS  # 16: one proposal ticket (of 2^24) is 2^16 target tickets


TREE_DRAW_SEMANTIC_ID = "tree-draw-dyadic24-v1"  # §12.4: a node's children
ACCEPT_TREE_SEMANTIC_ID = "accept-tree-dyadic24-v1"  # §12.6: verification of a sampled tree
WALK_TREE_SEMANTIC_ID = "walk-tree-dyadic24-v1"  # §12.9: verification of any tree by the walk
DOMAIN_TREE = 0x7070335F74726565  # "pp3_tree": the draws of a node's children (§12.3)
MAX_CHILDREN = K  # children per node (§12.2)


class Status(enum.IntEnum):
    """Row status (SPEC.md §3). Lower non-zero values take precedence."""

    OK = 0
    NAN_LOGIT = 1
    POS_INF_LOGIT = 2
    ZERO_MASS = 3
    BAD_TEMPERATURE = 4


class AcceptStatus(enum.IntEnum):
    """Row status of a verification (§11.3): SPEC.md §3's statuses (the same names and values as ``Status``), then
    BAD_DRAFT. Lower non-zero values take precedence."""

    OK = 0
    NAN_LOGIT = 1
    POS_INF_LOGIT = 2
    ZERO_MASS = 3
    BAD_TEMPERATURE = 4
    BAD_DRAFT = 5


class TreeStatus(enum.IntEnum):
    """Status of a node's draw (SPEC.md §12.4): SPEC.md §3's statuses (the same names and values as ``Status``), then
    SMALL_SUPPORT (6: the node has fewer drawable entries than children; 5 is the verifier's BAD_DRAFT)."""

    OK = 0
    NAN_LOGIT = 1
    POS_INF_LOGIT = 2
    ZERO_MASS = 3
    BAD_TEMPERATURE = 4
    SMALL_SUPPORT = 6
