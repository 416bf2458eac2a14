"""One round of speculative decoding, the loop that the demo and the end-to-end audit share: draft (``TPDrafter``,
greedy or sampled) -> score (the target's logits at every drafted position) -> verify (SPEC.md §11) -> advance.

Arrays are NumPy on the host; the drafter runs on its own device. A target is any function from the tokens before
each scored position, ``[B, D+1]`` int64 (the previous token, then the drafts), to the target's logits there,
``[B, D+1, V]`` fp32 or fp16: row j scores position ``position + j``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from pp3.drafter import Draft, TPDrafter

Mode = Literal["sampled", "greedy"]
MODES: tuple[Mode, ...] = ("sampled", "greedy")
Target = Callable[[npt.NDArray[np.int64]], npt.NDArray[Any]]
Verifier = Callable[..., Any]  # pp3.reference.verify's keyword arguments -> a Verdict of NumPy arrays


@dataclasses.dataclass(frozen=True)
class Round:
    """What one round emitted per row: ``accepted + 1`` tokens, ``tokens[:, :accepted + 1]``."""

    accepted: npt.NDArray[np.int32]  # [B]
    tokens: npt.NDArray[np.int32]  # [B, D+1]

    @property
    def emitted(self) -> npt.NDArray[np.int64]:
        return self.accepted.astype(np.int64) + 1

    def last(self) -> npt.NDArray[np.int64]:
        """[B]: each row's last emitted token (the context of the next round)."""
        last: npt.NDArray[np.int64] = self.tokens[np.arange(self.tokens.shape[0]), self.accepted].astype(np.int64)
        return last


def speculation_round(
    drafter: TPDrafter,
    target: Target,
    verify: Verifier,
    *,
    mode: Mode,
    prev: npt.NDArray[np.int64],
    temperature: float,
    seed: npt.NDArray[np.uint64],
    round: int,
    position: npt.NDArray[np.uint64],
) -> Round:
    """Draft ``drafter.depth`` tokens after ``prev`` [B] (sampled: keyed by seed, round and absolute position, the
    first draft at ``position``), score them with ``target``, verify them. Raises if a row fails verification (the
    callers' rows are all valid)."""
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    dev = drafter_device(drafter)
    ctx = torch.from_numpy(np.ascontiguousarray(prev, dtype=np.int64))[:, None].to(dev)
    draft: Draft = (
        drafter.draft_sampled(ctx, temperature, seed, round, position) if mode == "sampled" else drafter.draft(ctx)
    )
    arrs = draft.numpy()
    before = np.concatenate([prev[:, None], np.maximum(arrs["draft_tokens"], 0)], axis=1).astype(np.int64)
    res = verify(
        target_logits=target(before),
        target_temperature=np.float32(temperature),
        seed=seed,
        round=round,
        position=position,
        **arrs,
    )
    status = np.asarray(res.status)
    if (status != 0).any():
        raise AssertionError(f"speculation rows failed verification: statuses {np.unique(status).tolist()}")
    return Round(accepted=np.asarray(res.accepted), tokens=np.asarray(res.tokens))


def drafter_device(drafter: TPDrafter) -> torch.device:
    """The device of a drafter's model (a model with an ``embedding`` tensor, else the CPU)."""
    emb = getattr(drafter.model, "embedding", None)
    return emb.device if isinstance(emb, torch.Tensor) else torch.device("cpu")
