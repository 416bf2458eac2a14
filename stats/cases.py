"""The rows the audits draw from. Every case is a logits row (so the same case runs on the reference, a mutant and
the GPU kernels); its exact tickets come from ``oracle.spec_tickets``.

Ticket-vector cases are designed for a ticket shape; end-to-end cases are random rows from a fixed generator;
T0 rows are greedy rows with awkward maxima. ``Case.heavy`` cases get ``heavy_n`` draws: they exist to catch
allocation bugs that move a few tickets into slots that must have none (see STATS.md "Power").
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt

from pp3.reference import DEFAULT_TAU, TICKETS
from stats.oracle import spec_tickets

_LN_TICKETS = math.log(TICKETS)
_RNG_SEED = 0x70703353  # "pp3S": every random row below comes from this generator, in this order


@dataclasses.dataclass(frozen=True)
class Case:
    """One row to draw from: ``name``, why it is here, the logits, the drafter temperature."""

    name: str
    why: str
    row: npt.NDArray[np.floating]
    tau: float = DEFAULT_TAU
    heavy: bool = False  # drawn heavy_n times (a bug that moves < 32 tickets must show up as impossible draws)
    enumerate_quick: bool = False  # the exhaustive draw-map check runs on it in the quick suite too


def _targeted(targets: npt.NDArray[np.float64], rank0: int, tau: float = DEFAULT_TAU) -> npt.NDArray[np.float32]:
    """A 32-entry row with logit 0 at ``rank0`` and, elsewhere, slots whose exact share 2^24 w_j / S is ``targets``.

    With w_0 = 1 and w_j = t_j S / 2^24, S = 1 + sum w solves to S = 1 / (1 - sum t / 2^24); the fp32 rounding of
    the logit moves each share by about 1e-6 relative, far less than the distance to the nearest integer we need.
    """
    s = 1.0 / (1.0 - targets.sum() / TICKETS)
    x = np.zeros(32, dtype=np.float32)
    others = [j for j in range(32) if j != rank0]
    x[others] = ((np.log(targets * s) - _LN_TICKETS) * tau).astype(np.float32)
    return x


def _with_remainder(row: npt.NDArray[np.float32], want: int, tau: float = DEFAULT_TAU) -> npt.NDArray[np.float32]:
    got = spec_tickets(row, tau).remainder
    if got != want:  # a construction check: the case must be what its name says
        raise AssertionError(f"case construction: remainder {got}, expected {want}")
    return row


def ticket_cases() -> list[Case]:
    """The designed ticket vectors: uniform, peaked, one-hot, zero-ticket slots, < 32 slots, floor-first remainder."""
    rng = np.random.default_rng(_RNG_SEED)
    one_hot = np.full(32, -300.0, dtype=np.float32)
    one_hot[9] = 0.0
    zero_slots = rng.normal(0.0, 1.0, 32).astype(np.float32)
    zero_slots[0::2] = -200.0  # e^(-200/0.7) underflows fp32: 16 zero-ticket slots, slot 0 among them
    masked = np.full(1000, -np.inf, dtype=np.float32)
    masked[rng.choice(1000, 12, replace=False)] = rng.normal(0.0, 1.5, 12).astype(np.float32)
    ties = rng.choice(np.array([0.0, -0.5, -1.0], dtype=np.float32), 64)
    return [
        Case("uniform32", "32 equal logits: 2^19 tickets each, R = 0", np.zeros(32, np.float32), enumerate_quick=True),
        Case(
            "peaked",
            "geometric tail from rank 0 at ID 13: 1..10^7 tickets, 9 zero-ticket slots",
            -np.abs(np.arange(32, dtype=np.float32) - 13),
            enumerate_quick=True,
        ),
        Case("one-hot", "all 2^24 tickets on slot 9, 31 zero-ticket slots", one_hot),
        Case(
            "zero-slots",
            "16 zero-ticket slots interleaved with 16 live ones, slot 0 zero",
            zero_slots,
            enumerate_quick=True,
        ),
        Case("few-slots", "V = 5: 5 slots, 27 empty", rng.normal(0.0, 1.0, 5).astype(np.float32)),
        Case("masked", "V = 1000, 12 finite logits: 12 slots, 20 empty", masked),
        Case("ties", "V = 64 from {0, -0.5, -1}: the top 32 cut through a tie, lower IDs first", ties),
        Case("two-way", "V = 2, logits (0, -0.5)", np.array([0.0, -0.5], dtype=np.float32)),
        Case(
            "one-ticket",
            "31 slots of exactly 1 ticket, rank 0 at slot 16 holds the rest",
            _with_remainder(_targeted(np.linspace(1.05, 1.95, 31), 16), 16),
        ),
        Case(
            "remainder",
            "floor-first remainder R = 30: every slot's share is k + 0.95, slot 5 is rank 0",
            _with_remainder(_targeted(np.floor(np.geomspace(20, 20000, 31)) + 0.95, 5), 30),
            enumerate_quick=True,
        ),
        Case(
            "flood",
            "R = 30 and 31 zero-ticket slots of share 0.90..0.995: a mis-allocated remainder lands on "
            "slots that must never be drawn",
            _with_remainder(_targeted(np.linspace(0.90, 0.995, 31), 31), 30),
            heavy=True,
        ),
    ]


def e2e_cases() -> list[Case]:
    """Random logit rows (fixed generator) for the end-to-end audits against q and against the ideal softmax."""
    rng = np.random.default_rng(_RNG_SEED + 1)
    masked = rng.normal(0.0, 2.0, 1000).astype(np.float32)
    masked[rng.random(1000) < 0.4] = -np.inf
    return [
        Case("rand-v1000", "V = 1000, N(0, 2^2) logits", rng.normal(0.0, 2.0, 1000).astype(np.float32)),
        Case("rand-v32k", "V = 32000, N(0, 1) logits: a flat top 32", rng.normal(0.0, 1.0, 32000).astype(np.float32)),
        Case("rand-fp16", "V = 100, fp16 logits N(0, 1.5^2)", rng.normal(0.0, 1.5, 100).astype(np.float16)),
        Case("rand-v20-tau1.5", "V = 20 (< 32 slots), tau = 1.5", rng.normal(0.0, 1.0, 20).astype(np.float32), tau=1.5),
        Case("rand-masked", "V = 1000, 40% masked (-inf), N(0, 2^2)", masked),
        Case(
            "rand-gumbel-tau0.25",
            "V = 1000 Gumbel logits, tau = 0.25: peaked",
            rng.gumbel(0.0, 1.0, 1000).astype(np.float32),
            tau=0.25,
        ),
    ]


def t0_rows() -> list[tuple[str, npt.NDArray[np.floating]]]:
    """Greedy rows: the token must be the first entry of the §4.1 order whatever the key."""
    rng = np.random.default_rng(_RNG_SEED + 2)
    tie = rng.normal(0.0, 1.0, 1000).astype(np.float32)
    tie[[700, 5, 333]] = tie.max() + 1.0  # three-way tie at the maximum: ID 5 wins
    zeros = np.full(50, -1.0, dtype=np.float32)
    zeros[[40, 7]] = [0.0, -0.0]  # -0.0 == +0.0: ID 7 wins
    return [
        ("rand-v1000", rng.normal(0.0, 2.0, 1000).astype(np.float32)),
        ("tie-at-max", tie),
        ("signed-zero-max", zeros),
        ("fp16", rng.normal(0.0, 1.0, 300).astype(np.float16)),
        ("v1", np.array([3.0], dtype=np.float32)),
    ]


def greedy_token(row: npt.NDArray[np.floating]) -> int:
    """§4.2: the maximum logit, lowest ID among ties (-0.0 == +0.0)."""
    x = np.asarray(row, dtype=np.float32)
    return int(np.flatnonzero(x == x.max())[0])
