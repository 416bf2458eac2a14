"""Launchers of the Triton selector: ``propose`` (mirrors ``pp3.reference.propose``) and its two launches.

Launch 1 (``tile_candidates``) runs per vocabulary tile and may run per shard with global ID offsets; launch 2
(``finalize``) merges every tile's candidates and does temperature, the exponential, normalisation, tickets and
the Philox draw for each row. Every argument is checked here, before any launch, without reading device memory
(so the launchers can be captured in a CUDA graph).
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import triton

from pp3.kernels import _select
from pp3.reference import _args
from pp3.reference._constants import DEFAULT_TAU, DOMAIN_PROPOSAL, MAX_VOCAB, K
from pp3.reference.expf import C2, C3, C4, C5, INV, L1, L2, ONE, SHIFT, TH, TL

DEFAULT_TILE = 4096  # largest tile: 16 KiB of fp32 per program; smaller rows get smaller tiles (auto_tile)
# Warps per program for launch 1 and launch 2 (bits do not depend on them: no float reduction depends on the
# layout). Tuned on the H200 by bench/ (see bench/NOTES.md); a list so the benchmark can sweep it.
WARPS = [8, 8]
FINALIZE_CAP = 128  # compaction slots in launch 2 (_top_k); more survivors fall back to rounds of max
MAX_TILES = 512  # tiles per row that launch 2 merges in one program (512 * 32 keys = 128 KiB)


def auto_tile(v: int) -> int:
    """The tile for a row of ``v`` entries: >= 32 tiles where possible (a good launch-2 threshold, §_top_k),
    between 1024 and DEFAULT_TILE entries, a power of two."""
    t = 1024
    while t < DEFAULT_TILE and v >= 64 * t:
        t *= 2
    return t


def tile_cap(tile: int) -> int:
    """Compaction slots in launch 1: groups of 32 leave ~40 survivors at 2048+ entries, ~120 at 1024."""
    return 128 if tile <= 1024 else 64


# Exact arithmetic (SPEC.md "Keywords"): no FMA contraction, no flush to zero. The interpreter ignores both.
EXACT = {"enable_fp_fusion": False, "enable_reflect_ftz": False}


def use_pdl(device: torch.device) -> bool:
    """Programmatic dependent launch for both launches, on CUDA devices of compute capability >= 9 (Hopper), never
    in the interpreter; PP3_PDL=0 turns it off. It only lets a launch start early: both kernels wait
    (griddepcontrol.wait) for the previous kernel and its memory before they read anything, so no arithmetic and
    no result changes (GPU parity was run both ways, VERIFY.md). It was off by default for a while because of an
    illegal memory access on the H200, which turned out to be the benchmark's own use-after-free, with PDL on or
    off (bench/NOTES.md, "The fault"). Read at every launch."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1" or os.environ.get("PP3_PDL") == "0":
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def _launch_opts(pdl: bool) -> dict[str, Any]:
    return {**EXACT, "launch_pdl": True} if pdl else dict(EXACT)

_KIND = {
    torch.float32: _select.KIND_F32.value,
    torch.float16: _select.KIND_F16.value,
    torch.bfloat16: _select.KIND_BF16.value,
}
_RAW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
_U64_MAX = (1 << 64) - 1
_DOMAIN_BITS = DOMAIN_PROPOSAL  # < 2^63: Triton passes it as an int64 with the same bits


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
    flags (§3). ``finalize`` relies on that order: build these with ``tile_candidates`` (or exchange its outputs)."""

    keys: torch.Tensor  # [B, n_tiles, K] int64
    flags: torch.Tensor  # [B, n_tiles] int32


_CONSTS: dict[torch.device, torch.Tensor] = {}


def exp_constants(device: torch.device) -> torch.Tensor:
    """The fp64 constants of SPEC.md §6, laid out as ``_select.C_*``, taken from the reference (one source)."""
    cached = _CONSTS.get(device)
    if cached is None:
        table = np.zeros(_select.C_TL.value + 64, dtype=np.float64)
        for slot, val in (
            (_select.C_INV, INV),
            (_select.C_SHIFT, SHIFT),
            (_select.C_L1, L1),
            (_select.C_L2, L2),
            (_select.C_C2, C2),
            (_select.C_C3, C3),
            (_select.C_C4, C4),
            (_select.C_C5, C5),
            (_select.C_ONE, ONE),
        ):
            table[slot.value] = val
        table[_select.C_TH.value : _select.C_TH.value + 64] = TH
        table[_select.C_TL.value : _select.C_TL.value + 64] = TL
        cached = torch.from_numpy(table).to(device)
        _CONSTS[device] = cached
    return cached


def _check_logits(name: str, logits: Any) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(logits).__name__}")
    if logits.dtype not in _KIND:
        raise TypeError(f"{name}: expected float32, float16 or bfloat16, got {logits.dtype}")
    if logits.dim() != 2:
        raise ValueError(f"{name}: expected shape [B, V], got {tuple(logits.shape)}")
    if logits.shape[0] < 1 or logits.shape[1] < 1:
        raise ValueError(f"{name}: need B >= 1 rows and V >= 1 entries, got shape {tuple(logits.shape)}")
    return logits if logits.stride(1) == 1 else logits.contiguous()


def _check_tile(tile: Any, v: int) -> int:
    if tile is None:
        return auto_tile(v)
    if isinstance(tile, bool) or not isinstance(tile, int):
        raise TypeError(f"tile: expected an int, got {type(tile).__name__}")
    if tile < K or tile & (tile - 1):
        raise ValueError(f"tile: must be a power of two >= {K}, got {tile}")
    return tile


def _row_tensor(name: str, value: torch.Tensor, b: int, device: torch.device) -> torch.Tensor:
    """A per-row tensor argument of shape [] (broadcast) or [B], on the logits' device."""
    if value.dim() == 0:
        value = value.reshape(1).expand(b)
    if tuple(value.shape) != (b,):
        raise ValueError(f"{name}: expected shape ({b},) to match logits' {b} rows, got {tuple(value.shape)}")
    if value.device != device:
        raise ValueError(f"{name}: on {value.device}, but logits are on {device}")
    return value


def _u64_rows(name: str, value: Any, b: int, device: torch.device) -> torch.Tensor:
    """A per-row uint64 argument as an int64 tensor of the same bits: a tensor [B] or an int / int sequence."""
    if isinstance(value, torch.Tensor):
        if value.dtype not in (torch.int64, torch.uint64):
            raise TypeError(f"{name}: expected an int64 or uint64 tensor (uint64 bits), got {value.dtype}")
        return _row_tensor(name, value, b, device).view(torch.int64).contiguous()
    arr = _args.as_uint64_rows(name, value, b)  # validates ints, ranges and shape on the host
    return torch.from_numpy(arr.view(np.int64).copy()).to(device)


def _temperature_rows(value: Any, b: int, device: torch.device) -> torch.Tensor:
    """Per-row target temperatures as fp32 (SPEC.md §2: other float types are rounded to fp32 first)."""
    name = "target_temperature"
    if isinstance(value, torch.Tensor):
        if not value.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating-point tensor, got {value.dtype}")
        return _row_tensor(name, value, b, device).to(torch.float32).contiguous()
    arr = _args.as_temperature_rows(name, value, b)
    return torch.from_numpy(arr).to(device)


def tile_candidates(
    logits: torch.Tensor,
    *,
    id_offset: int = 0,
    tile: int | None = None,
    out: Candidates | None = None,
    tile_base: int = 0,
) -> Candidates:
    """Launch 1 on one shard ``[id_offset, id_offset + V_shard)``: per tile, its first K keys and its flags.

    With ``out`` the results go to tiles ``tile_base ..`` of an existing buffer (several shards, one buffer).
    """
    x = _check_logits("logits", logits)
    tile = _check_tile(tile, x.shape[1])
    if isinstance(id_offset, bool) or not isinstance(id_offset, numbers.Integral) or id_offset < 0:
        raise ValueError(f"id_offset: expected an int >= 0, got {id_offset!r}")
    b, v = x.shape
    if id_offset + v > MAX_VOCAB:
        raise ValueError(f"id_offset: the shard ends at {id_offset + v}, beyond the maximum vocabulary 2^31 - 1")
    n_tiles = triton.cdiv(v, tile)
    if out is None and n_tiles > MAX_TILES:
        raise ValueError(f"tile: {tile} splits V = {v} into {n_tiles} tiles, more than the {MAX_TILES} launch 2 merges")
    if out is None:
        if tile_base != 0:
            raise ValueError("tile_base: needs out")
        out = Candidates(
            keys=torch.empty((b, n_tiles, K), dtype=torch.int64, device=x.device),
            flags=torch.empty((b, n_tiles), dtype=torch.int32, device=x.device),
        )
    total = out.flags.shape[1]
    if out.keys.shape != (b, total, K) or out.flags.shape != (b, total) or out.keys.device != x.device:
        raise ValueError(f"out: expected keys [{b}, T, {K}] and flags [{b}, T] on {x.device}")
    if out.keys.dtype != torch.int64 or out.flags.dtype != torch.int32:
        raise TypeError(f"out: expected int64 keys and int32 flags, got {out.keys.dtype} and {out.flags.dtype}")
    if not (out.keys.is_contiguous() and out.flags.is_contiguous()):
        raise ValueError("out: keys and flags must be contiguous (the kernel indexes them densely)")
    if not 0 <= tile_base <= total - n_tiles:
        raise ValueError(f"tile_base: {tile_base} + {n_tiles} tiles do not fit the {total} tiles of out")
    cap = tile_cap(tile)
    scratch = torch.empty((b, total, cap), dtype=torch.int64, device=x.device)
    pdl = use_pdl(x.device)
    _select._tile_candidates_kernel[(b, n_tiles)](
        x.view(_RAW[x.dtype]),
        x.stride(0),
        v,
        id_offset,
        out.keys,
        out.flags,
        tile_base,
        total,
        scratch,
        KIND=_KIND[x.dtype],
        TILE=tile,
        K=K,
        CAP=cap,
        PDL=pdl,
        num_warps=WARPS[0],
        **_launch_opts(pdl),
    )
    return out


def finalize(
    cands: Candidates,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
) -> Proposal:
    """Launch 2: merge all tiles' candidates per row and apply SPEC.md §3-§8 (``cands`` as ``tile_candidates``
    writes them: each tile's keys in descending order)."""
    keys, flags = cands.keys, cands.flags
    if keys.dim() != 3 or keys.shape[2] != K or flags.shape != keys.shape[:2]:
        raise ValueError(f"cands: expected keys [B, T, {K}] and flags [B, T], got {tuple(keys.shape)}")
    if keys.dtype != torch.int64 or flags.dtype != torch.int32:
        raise TypeError(f"cands: expected int64 keys and int32 flags, got {keys.dtype} and {flags.dtype}")
    if not (keys.is_contiguous() and flags.is_contiguous()):
        raise ValueError("cands: keys and flags must be contiguous (the kernel indexes them densely)")
    b, n_tiles = flags.shape
    if n_tiles > MAX_TILES:
        raise ValueError(
            f"cands: {n_tiles} tiles per row exceed the {MAX_TILES} that launch 2 merges; use a larger tile"
        )
    dev = keys.device
    temp = _temperature_rows(target_temperature, b, dev)
    seed_t = _u64_rows("seed", seed, b, dev)
    round_t = _u64_rows("round", round, b, dev)
    pos_t = _u64_rows("position", position, b, dev)
    tau32 = float(_args.as_tau(tau))
    status = torch.empty(b, dtype=torch.int8, device=dev)
    token = torch.empty(b, dtype=torch.int32, device=dev)
    ids = torch.empty((b, K), dtype=torch.int32, device=dev)
    tickets = torch.empty((b, K), dtype=torch.int32, device=dev)
    # One spare row: launch 2 relies on every tile's keys being in descending order with 0-padding last, as
    # tile_candidates writes them (its survivors are then a prefix of each row). Candidates that break this give
    # unspecified results, and the spare row keeps even their compaction stores (at most K - 1 slots past a row's
    # CAP) inside this buffer.
    scratch = torch.empty((b + 1, FINALIZE_CAP), dtype=torch.int64, device=dev)
    pdl = use_pdl(dev)
    _select._finalize_kernel[(b,)](
        keys,
        flags,
        n_tiles,
        temp,
        seed_t,
        round_t,
        pos_t,
        tau32,
        exp_constants(dev),
        _DOMAIN_BITS,
        status,
        token,
        ids,
        tickets,
        scratch,
        NC=triton.next_power_of_2(n_tiles * K),
        NT=triton.next_power_of_2(n_tiles),
        K=K,
        CAP=FINALIZE_CAP,
        PDL=pdl,
        num_warps=WARPS[1],
        **_launch_opts(pdl),
    )
    return Proposal(status=status, token=token, ids=ids, tickets=tickets)


def propose(
    logits: torch.Tensor,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
    *,
    tile: int | None = None,
) -> Proposal:
    """The Triton selector: same arguments and results as ``pp3.reference.propose``, on torch tensors."""
    x = _check_logits("logits", logits)
    b = x.shape[0]
    # Check every argument before the first launch.
    tile = _check_tile(tile, x.shape[1])
    if triton.cdiv(x.shape[1], tile) > MAX_TILES:
        raise ValueError(f"tile: {tile} splits V = {x.shape[1]} into more than the {MAX_TILES} tiles launch 2 merges")
    _temperature_rows(target_temperature, b, x.device)
    for name, val in (("seed", seed), ("round", round), ("position", position)):
        _u64_rows(name, val, b, x.device)
    _args.as_tau(tau)
    return finalize(tile_candidates(x, tile=tile), target_temperature, seed, round, position, tau)


def expf(z: torch.Tensor) -> torch.Tensor:
    """SPEC.md §6 ``expf`` on a 1-D fp32 tensor of z <= 0, through the selector's own device code."""
    if not isinstance(z, torch.Tensor) or z.dtype != torch.float32 or z.dim() != 1:
        raise TypeError("z: expected a 1-D float32 torch.Tensor")
    z = z.contiguous()
    out = torch.empty_like(z)
    block = 1024
    _select._expf_kernel[(triton.cdiv(z.numel(), block),)](
        z, out, exp_constants(z.device), z.numel(), BLOCK=block, **EXACT
    )
    return out


def propose_sharded(
    shards: Sequence[torch.Tensor],
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
    *,
    tile: int | None = None,
) -> Proposal:
    """The selector over a row split by vocabulary into contiguous shards (in ID order), in one process."""
    if not shards:
        raise ValueError("shards: need at least one shard")
    xs = [_check_logits(f"shards[{i}]", s) for i, s in enumerate(shards)]
    b = xs[0].shape[0]
    for i, s in enumerate(xs):
        if s.shape[0] != b or s.device != xs[0].device:
            raise ValueError(f"shards[{i}]: expected {b} rows on {xs[0].device}, got {tuple(s.shape)} on {s.device}")
    tile = _check_tile(tile, max(s.shape[1] for s in xs))
    tiles = [triton.cdiv(s.shape[1], tile) for s in xs]
    if sum(tiles) > MAX_TILES:
        raise ValueError(f"tile: {sum(tiles)} tiles over all shards exceed the {MAX_TILES} that launch 2 merges")
    out = Candidates(
        keys=torch.empty((b, sum(tiles), K), dtype=torch.int64, device=xs[0].device),
        flags=torch.empty((b, sum(tiles)), dtype=torch.int32, device=xs[0].device),
    )
    offset = 0
    base = 0
    for s, nt in zip(xs, tiles, strict=True):
        tile_candidates(s, id_offset=offset, tile=tile, out=out, tile_base=base)
        offset += s.shape[1]
        base += nt
    return finalize(out, target_temperature, seed, round, position, tau)
