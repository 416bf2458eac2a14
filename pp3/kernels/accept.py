"""The verifier's public entry point: ``verify`` mirrors ``pp3.reference.verify`` (SPEC.md §11) on torch tensors.

Every argument is checked here once (``checks``), before any launch and without reading device memory, so a
verification can be captured in a CUDA graph with the draft; then ``launchers.verify`` runs the seven launches
(``_accept.py``), trusting them.
"""

from __future__ import annotations

from typing import Any

import torch

from pp3.kernels import checks, config, launchers, screen
from pp3.kernels.buffers import RowKeys, Verdict
from pp3.kernels.config import DEFAULT_LAUNCH, LaunchConfig
from pp3.reference._constants import K

__all__ = ["Verdict", "count_margin", "expf_screen", "remainder_bound", "screen_margin", "uniform_below", "verify"]


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
    out: Verdict | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
) -> Verdict:
    """The Triton verifier: same arguments and results as ``pp3.reference.verify``, on torch tensors.

    ``target_logits`` [B, D+1, V] fp32/fp16/bf16; drafts as ``pp3.drafter.Draft`` holds them (int32 tokens, int8
    statuses, int32 slots); ``seed``/``round``/``position`` int64 tensors of uint64 bits (or ints / sequences).
    Seven launches (``_accept.py``); no host synchronisation, so a call can be captured in a CUDA graph. ``out``:
    caller-owned output buffers (a ``Verdict`` of contiguous tensors that share no memory with each other or with an
    input), written in place. ``launch``: its ``screen`` and ``handover`` pick the verifier's variants (the same
    bits either way).
    """
    return launchers.verify(*verify_args(target_logits, target_temperature, draft_tokens, draft_status, draft_ids,
                                         draft_tickets, seed, round, position, tile, out, launch))


def verify_args(
    target_logits: Any,
    target_temperature: Any,
    draft_tokens: Any,
    draft_status: Any,
    draft_ids: Any,
    draft_tickets: Any,
    seed: Any,
    round: Any,
    position: Any,
    tile: Any,
    out: Any,
    launch: Any = DEFAULT_LAUNCH,
) -> tuple[torch.Tensor, int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, RowKeys, int, float,
           float, LaunchConfig, Verdict]:
    """The arguments of ``verify``, checked, as ``launchers.verify`` takes them (the custom operators' fake
    implementations check through it too)."""
    x = checks.logits("target_logits", target_logits, dims=3)
    b, d1, v = x.shape
    d = d1 - 1
    dev = x.device
    t = checks.verify_tile(tile, v, b * d1)
    tok = checks.tensor("draft_tokens", draft_tokens, torch.int32, (b, d), dev)
    dst = checks.tensor("draft_status", draft_status, torch.int8, (b, d), dev)
    ids = checks.tensor("draft_ids", draft_ids, torch.int32, (b, d, K), dev)
    tix = checks.tensor("draft_tickets", draft_tickets, torch.int32, (b, d, K), dev)
    keys = checks.row_keys(target_temperature, seed, round, position, b, dev)
    reads = checks.tensors([
        ("target_logits", target_logits), ("draft_tokens", draft_tokens), ("draft_status", draft_status),
        ("draft_ids", draft_ids), ("draft_tickets", draft_tickets), ("target_temperature", target_temperature),
        ("seed", seed), ("round", round), ("position", position),
    ])
    dest = checks.verdict_out(out, b, d1, dev, reads)
    config = checks.launch_config(launch)
    return x, t, tok, dst, ids, tix, keys, remainder_bound(v), screen_margin(), count_margin(), config, dest


def screen_margin() -> float:
    """The relative margin around launch 1's S~ that holds every row's S (``pp3.kernels.screen``). Launch 2 decides
    a test by the interval S~ (1 +- margin) unless U_j falls between the floor counts at its ends (then launches 3 to
    5 do, with the exact S); a larger margin only sends more tests there (the tests raise it to 1/2 to run that path
    for almost every test)."""
    return screen.SCREEN_MARGIN


def count_margin() -> float:
    """How close to an integer launch 6's fast floor count w fl64(2^40 / S) may come, relative to itself, before its
    tile is counted again by the division (``_accept._floor_counts_fast``, where 2^-49 is proved enough); a larger
    margin only sends more tiles to the division (the tests raise it to 1 to send every tile there)."""
    return 2.0**-49


def remainder_bound(v: int) -> int:
    """An upper bound on the remainder R of every target row (SPEC.md §11.4 "Range": R <= F' <= V). Launch 2 decides
    the test of a draft x_j = g_j without R unless U_j falls in c .. c + bound - 1 (then launches 3 to 5 do, with R);
    a larger bound only sends more tests there (the tests raise it to 2^40 to run that path often)."""
    return v


def expf_screen(z: torch.Tensor, screen: str = "pinned", *, block: int = 1024) -> torch.Tensor:
    """The verifier's screening exponential ``screen`` ("pinned" or "ex2": ``pp3.kernels.screen``, never an output)
    on a 1-D fp32 tensor of z <= 0, through the kernels' own device code, ``block`` inputs per program (a power of
    two; the interpreter's audit of every input takes large ones): for the audit of its bound
    (stats/audit_screen.py)."""
    if not isinstance(z, torch.Tensor) or z.dtype != torch.float32 or z.dim() != 1:
        raise TypeError("z: expected a 1-D float32 torch.Tensor")
    if screen not in config.SCREENS:
        raise ValueError(f"screen: expected 'pinned' or 'ex2', got {screen!r}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1 or block & (block - 1) or block > 1 << 24:
        raise ValueError(f"block: expected a power of two in 1 .. 2^24, got {block!r}")
    z = z.contiguous()
    return launchers.expf_screen(z, screen, torch.empty_like(z), block)


def uniform_below(seed: torch.Tensor, round: torch.Tensor, position: torch.Tensor, domain: int,
                  s: torch.Tensor) -> torch.Tensor:
    """§11.5 on the device (int64 tensors of uint64 bits, 1 <= s <= 2^40): the kernel's own ``_uniform_below``."""
    if not isinstance(seed, torch.Tensor) or seed.dim() != 1:
        raise TypeError("seed: expected a 1-D int64 torch.Tensor")
    n, dev = seed.shape[0], seed.device
    sd, rd, ps, bound = (checks.tensor(name, t, torch.int64, (n,), dev)
                         for name, t in (("seed", seed), ("round", round), ("position", position), ("s", s)))
    dom = checks.integer("domain", domain, 0, (1 << 64) - 1)
    return launchers.uniform_below(sd, rd, ps, dom, bound, torch.empty(n, dtype=torch.int64, device=dev))
