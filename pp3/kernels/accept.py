"""Launcher of the Triton verifier: ``verify`` mirrors ``pp3.reference.verify`` (SPEC.md §11) on torch tensors.

Every argument is checked here once (``_args``), before the launch and without reading device memory, so a
verification can be captured in a CUDA graph with the draft. One program per request row walks the vocabulary in
tiles.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import triton

from pp3.kernels import _accept, _args
from pp3.kernels.config import EXACT, VERIFY_TILE
from pp3.kernels.select import exp_constants
from pp3.reference._constants import DOMAIN_ACCEPT, DOMAIN_RESIDUAL, K


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Device outputs, §11.8 (same fields and dtypes as ``pp3.reference.Verdict``)."""

    status: torch.Tensor  # [B] int8
    accepted: torch.Tensor  # [B] int32
    tokens: torch.Tensor  # [B, D+1] int32


def _verify_tile(tile: Any, v: int) -> int:
    """The verifier's tile: ``None`` (VERIFY_TILE) or a power of two >= 2 (clipped to the padded row)."""
    t = VERIFY_TILE if tile is None else _args.integer("tile", tile, 2, 1 << 16)
    if t & (t - 1):
        raise ValueError(f"tile: expected a power of two >= 2, got {tile!r}")
    return min(t, triton.next_power_of_2(v))


def verify(
    target_logits: torch.Tensor,
    target_temperature: Any,
    draft_tokens: torch.Tensor,
    draft_status: torch.Tensor,
    draft_ids: torch.Tensor,
    draft_tickets: torch.Tensor,
    seed: Any,
    round: Any,
    position: Any,
    *,
    tile: int | None = None,
) -> Verdict:
    """The Triton verifier: same arguments and results as ``pp3.reference.verify``, on torch tensors.

    ``target_logits`` [B, D+1, V] fp32/fp16/bf16; drafts as ``pp3.drafter.Draft`` holds them (int32 tokens, int8
    statuses, int32 slots); ``seed``/``round``/``position`` int64 tensors of uint64 bits (or ints / sequences).
    """
    x = _args.logits("target_logits", target_logits, dims=3)
    b, d1, v = x.shape
    d = d1 - 1
    dev = x.device
    tile = _verify_tile(tile, v)
    tok = _args.tensor("draft_tokens", draft_tokens, torch.int32, (b, d), dev)
    dst = _args.tensor("draft_status", draft_status, torch.int8, (b, d), dev)
    ids = _args.tensor("draft_ids", draft_ids, torch.int32, (b, d, K), dev)
    tix = _args.tensor("draft_tickets", draft_tickets, torch.int32, (b, d, K), dev)
    keys = _args.row_keys(target_temperature, seed, round, position, b, dev)
    nt = max(2, triton.next_power_of_2(triton.cdiv(v, tile)))
    status = torch.empty(b, dtype=torch.int8, device=dev)
    accepted = torch.empty(b, dtype=torch.int32, device=dev)
    tokens = torch.empty((b, d1), dtype=torch.int32, device=dev)
    _accept._verify_kernel[(b,)](
        # inputs: the target's logits and temperature, the draft, the keys
        x.view(_args.RAW[x.dtype]),
        x.stride(0),
        x.stride(1),
        v,
        keys.temperature,
        tok,
        dst,
        ids,
        tix,
        keys.seed,
        keys.round,
        keys.position,
        exp_constants(dev),
        DOMAIN_ACCEPT,
        DOMAIN_RESIDUAL,
        # outputs
        status,
        accepted,
        tokens,
        # compile-time
        D=d,
        DP=max(2, triton.next_power_of_2(d1)),
        K=K,
        KIND=_args.KIND[x.dtype],
        TILE=tile,
        TILE_LOG=tile.bit_length() - 1,
        NT=nt,
        NT_LOG=nt.bit_length() - 1,
        **EXACT,
    )
    return Verdict(status=status, accepted=accepted, tokens=tokens)


def uniform_below(seed: torch.Tensor, round: torch.Tensor, position: torch.Tensor, domain: int,
                  s: torch.Tensor) -> torch.Tensor:
    """§11.5 on the device (int64 tensors of uint64 bits, 1 <= s <= 2^40): the kernel's own ``_uniform_below``."""
    n = seed.numel()
    out = torch.empty(n, dtype=torch.int64, device=seed.device)
    dom = domain - (1 << 64) if domain >= 1 << 63 else domain
    _accept._uniform_below_kernel[(n,)](seed, round, position, s, out, dom, **EXACT)
    return out
