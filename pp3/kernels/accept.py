"""Launcher of the Triton verifier: ``verify`` mirrors ``pp3.reference.verify`` (SPEC.md §11) on torch tensors.

Every argument is checked here once (``_args``), before the launches and without reading device memory, so a
verification can be captured in a CUDA graph with the draft. Seven launches over the target rows' tiles
(``_accept.py``); the last program of a row in launches 1, 2, 4 and 6 reduces the row's partials once, counted in
with the row counters of ``_workspace``, into per-row buffers the later launches read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import triton

from pp3.kernels import _accept, _args, _workspace
from pp3.kernels.config import (
    COUNT_CHUNK,
    EXACT,
    MAX_VERIFY_TILES,
    VERIFY_SMALL_ENTRIES,
    VERIFY_TILE,
    VERIFY_TILE_SMALL,
    VERIFY_WARPS,
)
from pp3.kernels.select import exp_constants
from pp3.reference._constants import DOMAIN_ACCEPT, DOMAIN_RESIDUAL, K


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Device outputs, §11.8 (same fields and dtypes as ``pp3.reference.Verdict``)."""

    status: torch.Tensor  # [B] int8
    accepted: torch.Tensor  # [B] int32
    tokens: torch.Tensor  # [B, D+1] int32


def _verify_tile(tile: Any, v: int, rows: int) -> int:
    """The verifier's tile: ``None`` (VERIFY_TILE_SMALL for calls of at most VERIFY_SMALL_ENTRIES target entries over
    ``rows`` target rows, else VERIFY_TILE; doubled until a row has at most MAX_VERIFY_TILES tiles) or a power of two
    >= 2; clipped to the padded row."""
    if tile is None:
        t = VERIFY_TILE_SMALL if rows * v <= VERIFY_SMALL_ENTRIES else VERIFY_TILE
        while triton.cdiv(v, t) > MAX_VERIFY_TILES:
            t *= 2
    else:
        t = _args.integer("tile", tile, 2, 1 << 16)
        if t & (t - 1):
            raise ValueError(f"tile: expected a power of two >= 2, got {tile!r}")
        if triton.cdiv(v, t) > MAX_VERIFY_TILES:
            raise ValueError(f"tile: {t} splits V = {v} into more than {MAX_VERIFY_TILES} tiles; use a larger tile")
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
    out: Verdict | None = None,
) -> Verdict:
    """The Triton verifier: same arguments and results as ``pp3.reference.verify``, on torch tensors.

    ``target_logits`` [B, D+1, V] fp32/fp16/bf16; drafts as ``pp3.drafter.Draft`` holds them (int32 tokens, int8
    statuses, int32 slots); ``seed``/``round``/``position`` int64 tensors of uint64 bits (or ints / sequences).
    Seven launches (``_accept.py``); no host synchronisation, so a call can be captured in a CUDA graph. ``out``:
    caller-owned output buffers (a ``Verdict`` of contiguous tensors), written in place.
    """
    x = _args.logits("target_logits", target_logits, dims=3)
    b, d1, v = x.shape
    d = d1 - 1
    dev = x.device
    tile = _verify_tile(tile, v, b * d1)
    tok = _args.tensor("draft_tokens", draft_tokens, torch.int32, (b, d), dev)
    dst = _args.tensor("draft_status", draft_status, torch.int8, (b, d), dev)
    ids = _args.tensor("draft_ids", draft_ids, torch.int32, (b, d, K), dev)
    tix = _args.tensor("draft_tickets", draft_tickets, torch.int32, (b, d, K), dev)
    keys = _args.row_keys(target_temperature, seed, round, position, b, dev)
    dest = _verdict_out(out, b, d1, dev)
    n_tiles = triton.cdiv(v, tile)
    ntp = max(2, triton.next_power_of_2(n_tiles))
    n_prog = triton.cdiv(n_tiles, COUNT_CHUNK)
    rows = b * d1
    counters = _workspace.counters(dev, rows)  # launches 1, 2, 4 and 6 leave them all 0 again
    tile_okey, tile_id, tile_mag = (torch.empty((rows, n_tiles), dtype=torch.int32, device=dev) for _ in range(3))
    cls = torch.empty(rows, dtype=torch.int32, device=dev)
    argmax = torch.empty(rows, dtype=torch.int32, device=dev)
    maxima = torch.empty(rows, dtype=torch.float32, device=dev)
    sums = torch.empty((rows, n_tiles), dtype=torch.float64, device=dev)
    total = torch.empty(rows, dtype=torch.float64, device=dev)
    counts = torch.empty((rows, n_tiles), dtype=torch.int64, device=dev)
    remainder = torch.empty(rows, dtype=torch.int64, device=dev)
    # Zeroed: launch 3 writes it, and its own read of the marked flag (taken only in launch 5) is still issued.
    state = torch.zeros((b, 4), dtype=torch.int32, device=dev)
    plain = torch.empty((b, n_tiles), dtype=torch.int64, device=dev)
    corr = torch.empty((b, n_tiles), dtype=torch.int64, device=dev)
    draw = torch.empty((b, 3), dtype=torch.int64, device=dev)
    status, accepted, tokens = dest.status, dest.accepted, dest.tokens
    consts = exp_constants(dev)
    raw = x.view(_args.RAW[x.dtype])
    logits = (raw, x.stride(0), x.stride(1), v)
    row = (*logits, n_tiles)  # the target logits and their tiles
    weigh = (cls, maxima, keys.temperature, consts)  # what launches 2 and 4 read to weigh a row
    kind = _args.KIND[x.dtype]
    dp = max(2, triton.next_power_of_2(d1))
    ntp_log = ntp.bit_length() - 1
    grid = (rows * n_tiles,)
    _accept._verify_tiles_kernel[grid](
        *row, counters, tile_okey, tile_id, tile_mag, cls, argmax, maxima,
        D=d, KIND=kind, TILE=tile, NTP=ntp, num_warps=VERIFY_WARPS, **EXACT,
    )
    _accept._verify_sums_kernel[grid](
        *row, counters, *weigh, sums, total,
        D=d, KIND=kind, TILE=tile, TILE_LOG=tile.bit_length() - 1, NTP=ntp, NTP_LOG=ntp_log,
        num_warps=VERIFY_WARPS, **EXACT,
    )
    chain = (
        *logits, cls, argmax, maxima, total, remainder, keys.temperature, tok, dst, ids, tix, keys.seed, keys.round,
        keys.position, consts, DOMAIN_ACCEPT, status, accepted, tokens, state,
    )
    sizes = {"D": d, "DP": dp, "K": K, "KIND": kind}
    _accept._verify_rows_kernel[(b,)](*chain, 0, remainder_bound(v), **sizes, **EXACT)
    _accept._verify_counts_kernel[(rows * n_prog,)](
        *row, counters, *weigh, total, state, counts, remainder, n_prog,
        D=d, KIND=kind, TILE=tile, CHUNK=COUNT_CHUNK, NTP=ntp, num_warps=VERIFY_WARPS, **EXACT,
    )
    _accept._verify_rows_kernel[(b,)](*chain, 1, remainder_bound(v), **sizes, **EXACT)
    _accept._verify_residual_kernel[(b * n_tiles,)](
        *row, counters, argmax, maxima, total, keys.temperature, ids, tix, keys.seed, keys.round, keys.position,
        consts, DOMAIN_RESIDUAL, state, plain, corr, draw, D=d, K=K, KIND=kind, TILE=tile, NTP=ntp,
        num_warps=VERIFY_WARPS, **EXACT,
    )
    _accept._verify_draw_kernel[(b,)](
        *logits, argmax, maxima, total, keys.temperature, ids, tix, consts, state, draw, tokens,
        D=d, K=K, KIND=kind, TILE=tile, **EXACT,
    )
    return dest


def remainder_bound(v: int) -> int:
    """An upper bound on the remainder R of every target row (SPEC.md §11.4 "Range": R <= F' <= V). Launch 3 decides
    the test of a draft x_j = g_j without R unless U_j falls in c .. c + bound - 1 (then launches 4 and 5 do, with R);
    a larger bound only sends more tests there (the tests raise it to 2^40 to run that path often)."""
    return v


def _verdict_out(out: Any, b: int, d1: int, device: torch.device) -> Verdict:
    """The caller's output buffers, checked (``out``), or new ones (``None``)."""
    spec = {"status": (torch.int8, (b,)), "accepted": (torch.int32, (b,)), "tokens": (torch.int32, (b, d1))}
    result: Verdict = _args.outputs(Verdict, out, spec, device)
    return result


def uniform_below(seed: torch.Tensor, round: torch.Tensor, position: torch.Tensor, domain: int,
                  s: torch.Tensor) -> torch.Tensor:
    """§11.5 on the device (int64 tensors of uint64 bits, 1 <= s <= 2^40): the kernel's own ``_uniform_below``."""
    n = seed.numel()
    out = torch.empty(n, dtype=torch.int64, device=seed.device)
    dom = domain - (1 << 64) if domain >= 1 << 63 else domain
    _accept._uniform_below_kernel[(n,)](seed, round, position, s, out, dom, **EXACT)
    return out
