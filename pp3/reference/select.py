"""The reference selector: SPEC.md §2-§8 for one position of a batch of rows, in NumPy."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import _args, order, philox, tickets
from pp3.reference._constants import DEFAULT_TAU, EMPTY_ID, TICKETS, K, Status
from pp3.reference.exponential import expf


@dataclasses.dataclass(frozen=True)
class Proposal:
    """Per-row outputs (SPEC.md §7). ``ids``/``tickets`` hold K slots: non-empty first, ascending ID."""

    status: npt.NDArray[np.int8]  # [B] Status values
    token: npt.NDArray[np.int32]  # [B] proposed token, -1 for failed rows
    ids: npt.NDArray[np.int32]  # [B, K] slot token IDs, -1 for empty slots
    tickets: npt.NDArray[np.int32]  # [B, K] slot tickets, each row sums to 2^24 (0 for failed rows)


def classify(logits: npt.NDArray[np.float32], temperature: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
    """§3: one status per row, the first that applies in precedence order."""
    has_nan = np.isnan(logits).any(axis=1)
    has_pos_inf = (logits == np.inf).any(axis=1)
    zero_mass = ~np.isfinite(logits).any(axis=1)
    bad_temp = np.isnan(temperature) | (temperature < 0)
    status = np.full(logits.shape[0], Status.OK, dtype=np.int8)
    for cond, st in (
        (bad_temp, Status.BAD_TEMPERATURE),
        (zero_mass, Status.ZERO_MASS),
        (has_pos_inf, Status.POS_INF_LOGIT),
        (has_nan, Status.NAN_LOGIT),
    ):  # lowest precedence first, so the highest wins
        status[cond] = st
    return status


def propose(
    logits: Any,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
) -> Proposal:
    """Select one proposed token per row, exactly as SPEC.md defines (semantic ID dyadic24-floor-first-v1).

    ``logits`` is [B, V] fp32/fp16; ``target_temperature`` fp32 [B] (or a scalar); ``seed``, ``round`` and
    ``position`` uint64 [B] (or scalars); ``tau`` is the drafter temperature. Wrong arguments raise TypeError
    or ValueError naming the argument; bad row data (NaN, +inf, all -inf, a negative or NaN temperature) only
    fails its row with a status.
    """
    x = _args.as_logits("logits", logits, min_shape=(1, 1), dims="[B, V]")  # §2, §2.1
    b = x.shape[0]
    temp = _args.as_temperature_rows("target_temperature", target_temperature, b)
    seed64 = _args.as_uint64_rows("seed", seed, b)
    round64 = _args.as_uint64_rows("round", round, b)
    pos64 = _args.as_uint64_rows("position", position, b)
    tau32 = _args.as_tau(tau)

    status = classify(x, temp)  # §3
    token = np.full(b, EMPTY_ID, dtype=np.int32)
    ids = np.full((b, K), EMPTY_ID, dtype=np.int32)
    tix = np.zeros((b, K), dtype=np.int32)

    ok = status == Status.OK
    greedy = ok & (temp == 0)  # §3: +0.0 and -0.0
    sampled = ok & ~greedy

    if greedy.any():  # §4.2, §7
        g = order.first_k(x[greedy], 1)[:, 0]
        token[greedy] = g
        ids[greedy, 0] = g
        tix[greedy, 0] = TICKETS

    if sampled.any():
        rows = np.flatnonzero(sampled)
        xs = x[rows]
        ranked = order.first_k(xs, K)  # §4.3: [n_rows, min(K, V)], rank 0 first
        finite_count = np.isfinite(xs).sum(axis=1)
        n_take = ranked.shape[1]
        member = np.arange(n_take)[None, :] < np.minimum(finite_count, K)[:, None]  # first n = min(K, F)

        vals = np.take_along_axis(xs, ranked, axis=1)
        m = vals[:, :1]  # the row maximum (rank 0)
        with np.errstate(all="ignore"):
            d = (vals - m).astype(np.float32)  # §5 step 1, fp32
            z = (d / tau32).astype(np.float32)  # §5 step 2, fp32 IEEE division
        e = expf(z)  # §5 step 3

        slot_ids, slot_w, rank0_slot = tickets.place_slots(ranked, member, e)  # §5 step 4
        counts = tickets.allocate(slot_w, rank0_slot)  # §5 steps 4-6

        u = philox.proposal_uniform(seed64[rows], round64[rows], pos64[rows])  # §8
        slot = tickets.draw_slot(counts, u)
        token[rows] = np.take_along_axis(slot_ids, slot[:, None], axis=1)[:, 0]
        ids[rows] = slot_ids
        tix[rows] = counts

    return Proposal(status=status, token=token, ids=ids, tickets=tix)
