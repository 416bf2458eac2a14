"""The tensors pp3's launchers take and return, each defined once: the per-row keys of a call (``RowKeys``), the
selector's outputs (``Proposal``, SPEC.md §7), launch 1's candidates (``Candidates``), the verifier's outputs
(``Verdict``, §11.8), the bits a kernel loads for each logit format, and fresh buffers of each. ``checks`` checks a
caller's buffers against the same shapes and dtypes; ``launch`` writes into them. Imports torch, not triton.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch

from pp3.reference._constants import K

KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}  # the logit formats (_common.KIND_*)
RAW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}  # the bits a kernel loads

# The status of a row whose candidates break launch 2's contract (``finalize`` only; ``propose`` never returns it). It
# is not one of SPEC.md §3's statuses (0-4): the reference has no candidates, and such a row has no defined q.
BAD_CANDIDATES = 8

# The element types the row gather moves (``launch.gather_rows``), each as the signed integer of its width.
GATHER_BITS = {
    torch.bool: torch.int8, torch.int8: torch.int8, torch.uint8: torch.int8, torch.int16: torch.int16,
    torch.int32: torch.int32, torch.int64: torch.int64, torch.float16: torch.int16, torch.bfloat16: torch.int16,
    torch.float32: torch.int32, torch.float64: torch.int64,
}


@dataclasses.dataclass(frozen=True)
class RowKeys:
    """The per-row keys of a call, checked and on the device: what a launch reads besides the logits."""

    temperature: torch.Tensor  # [B] fp32 target temperature
    seed: torch.Tensor  # [B] int64 (uint64 bits)
    round: torch.Tensor  # [B] int64 (uint64 bits)
    position: torch.Tensor  # [B] int64 (uint64 bits)

    def at(self, depth: int) -> RowKeys:
        """The keys of draft ``depth`` of a proposal loop: position + depth (int64 addition wraps mod 2^64)."""
        return dataclasses.replace(self, position=self.position + depth) if depth else self


@dataclasses.dataclass(frozen=True)
class Proposal:
    """Device outputs, SPEC.md §7 (same fields and dtypes as ``pp3.reference.Proposal``)."""

    status: torch.Tensor  # [B] int8
    token: torch.Tensor  # [B] int32
    ids: torch.Tensor  # [B, K] int32
    tickets: torch.Tensor  # [B, K] int32


@dataclasses.dataclass(frozen=True)
class Candidates:
    """Launch-1 output for a batch: every tile's first K keys (§4.1; in descending order, 0-padding last) and its
    flags (§3), the tiles in ascending ID order. ``finalize`` relies on that: build these with ``tile_candidates``
    (or exchange its outputs).

    ``spans``: the IDs of each tile that ``tile_candidates`` wrote into these buffers, ``tile -> (first ID, last ID
    + 1)``, as its last write left them (host-side, kept by the object; empty for buffers it did not write, such as
    an exchange's)."""

    keys: torch.Tensor  # [B, n_tiles, K] int64
    flags: torch.Tensor  # [B, n_tiles] int32
    spans: dict[int, tuple[int, int]] = dataclasses.field(default_factory=dict, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Device outputs, §11.8 (same fields and dtypes as ``pp3.reference.Verdict``)."""

    status: torch.Tensor  # [B] int8
    accepted: torch.Tensor  # [B] int32
    tokens: torch.Tensor  # [B, D+1] int32


Spec = dict[str, tuple[torch.dtype, tuple[int, ...]]]  # field -> (dtype, shape)
T = TypeVar("T")


def proposal_spec(b: int) -> Spec:
    return {"status": (torch.int8, (b,)), "token": (torch.int32, (b,)), "ids": (torch.int32, (b, K)),
            "tickets": (torch.int32, (b, K))}


def verdict_spec(b: int, d1: int) -> Spec:
    return {"status": (torch.int8, (b,)), "accepted": (torch.int32, (b,)), "tokens": (torch.int32, (b, d1))}


def new(cls: type[T], spec: Spec, device: Any) -> T:
    """Fresh (uninitialised) buffers of ``spec`` on ``device``, as an instance of the dataclass ``cls``."""
    return cls(**{f: torch.empty(shape, dtype=dtype, device=device) for f, (dtype, shape) in spec.items()})


def new_proposal(b: int, device: Any) -> Proposal:
    return new(Proposal, proposal_spec(b), device)


def new_verdict(b: int, d1: int, device: Any) -> Verdict:
    return new(Verdict, verdict_spec(b, d1), device)


def new_candidates(b: int, n_tiles: int, device: Any) -> Candidates:
    return Candidates(
        keys=torch.empty((b, n_tiles, K), dtype=torch.int64, device=device),
        flags=torch.empty((b, n_tiles), dtype=torch.int32, device=device),
    )
