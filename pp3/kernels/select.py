"""Launchers of the Triton selector: ``propose`` (mirrors ``pp3.reference.propose``), ``propose_sharded`` and the
two launches on their own.

Launch 1 (``tile_candidates``) runs per vocabulary tile and may run per shard with global ID offsets; launch 2
(``finalize``) merges every tile's candidates and does temperature, the exponential, normalisation, tickets and
the Philox draw for each row. Each public function checks and normalises its arguments once (``_args``), before any
launch and without reading device memory (so a call can be captured in a CUDA graph), then calls the private
``_launch_*`` functions, which trust them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import triton

from pp3.kernels import _args, _common, _select
from pp3.kernels.config import DEFAULT_LAUNCH, EXACT, FINALIZE_CAP, LaunchConfig, tile_cap, use_pdl
from pp3.reference._constants import DEFAULT_TAU, DOMAIN_PROPOSAL, MAX_VOCAB, K
from pp3.reference.exponential import C2, C3, C4, C5, INV, L1, L2, ONE, SHIFT, TH, TL


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

    ``spans``: what ``tile_candidates`` wrote into these buffers, ``tile_base -> (tiles, first ID, last ID + 1)``
    (host-side, kept by the object; empty for buffers it did not write, such as an exchange's)."""

    keys: torch.Tensor  # [B, n_tiles, K] int64
    flags: torch.Tensor  # [B, n_tiles] int32
    spans: dict[int, tuple[int, int, int]] = dataclasses.field(default_factory=dict, compare=False, repr=False)


# The status of a row whose candidates break launch 2's contract (``finalize`` only; ``propose`` never returns it). It
# is not one of SPEC.md §3's statuses (0-4): the reference has no candidates, and such a row has no defined q.
BAD_CANDIDATES = 8
_CHECK_TILES = 16  # tiles per step of the candidates check


_CONSTS: dict[torch.device, torch.Tensor] = {}


def exp_constants(device: torch.device) -> torch.Tensor:
    """The fp64 constants of SPEC.md §6, laid out as ``_common.C_*``, taken from the reference (one source)."""
    cached = _CONSTS.get(device)
    if cached is None:
        table = np.zeros(_common.C_TL.value + 64, dtype=np.float64)
        for slot, val in (
            (_common.C_INV, INV),
            (_common.C_SHIFT, SHIFT),
            (_common.C_L1, L1),
            (_common.C_L2, L2),
            (_common.C_C2, C2),
            (_common.C_C3, C3),
            (_common.C_C4, C4),
            (_common.C_C5, C5),
            (_common.C_ONE, ONE),
        ):
            table[slot.value] = val
        table[_common.C_TH.value : _common.C_TH.value + 64] = TH
        table[_common.C_TL.value : _common.C_TL.value + 64] = TL
        cached = torch.from_numpy(table).to(device)
        _CONSTS[device] = cached
    return cached


def _launch_opts(pdl: bool) -> dict[str, Any]:
    return {**EXACT, "launch_pdl": True} if pdl else dict(EXACT)


def _empty_candidates(b: int, n_tiles: int, device: torch.device) -> Candidates:
    return Candidates(
        keys=torch.empty((b, n_tiles, K), dtype=torch.int64, device=device),
        flags=torch.empty((b, n_tiles), dtype=torch.int32, device=device),
    )


# ------------------------------------------------------------------------------------------ launches (trusting)


def _launch_tiles(
    x: torch.Tensor, id_offset: int, tile: int, out: Candidates, tile_base: int, launch: LaunchConfig
) -> None:
    """Launch 1 on a checked shard ``x`` [B, V_shard] into tiles ``tile_base ..`` of a checked ``out``."""
    b, v = x.shape
    total = out.flags.shape[1]
    cap = tile_cap(tile)
    scratch = torch.empty((b, total, cap), dtype=torch.int64, device=x.device)
    pdl = use_pdl(x.device, launch)
    _select._tile_candidates_kernel[(b, triton.cdiv(v, tile))](
        # inputs
        x.view(_args.RAW[x.dtype]),
        x.stride(0),
        v,
        id_offset,
        # outputs: this shard's tiles of the candidates
        out.keys,
        out.flags,
        tile_base,
        total,
        scratch,
        # compile-time
        KIND=_args.KIND[x.dtype],
        TILE=tile,
        K=K,
        CAP=cap,
        PDL=pdl,
        num_warps=launch.warps[0],
        **_launch_opts(pdl),
    )


def _proposal_out(out: Any, b: int, device: torch.device) -> Proposal:
    """The caller's output buffers, checked (``out``), or new ones (``None``)."""
    spec = {"status": (torch.int8, (b,)), "token": (torch.int32, (b,)), "ids": (torch.int32, (b, K)),
            "tickets": (torch.int32, (b, K))}
    result: Proposal = _args.outputs(Proposal, out, spec, device)
    return result


def _launch_finalize(
    cands: Candidates, keys: _args.RowKeys, tau: float, launch: LaunchConfig, out: Proposal, *, trusted: bool = True
) -> Proposal:
    """Launch 2 on checked candidates and keys, into checked outputs. ``trusted``: the candidates were written by
    launch 1 in this call; else a caller made them, and the scratch starts zeroed (``finalize``)."""
    b, n_tiles = cands.flags.shape
    dev = cands.keys.device
    # One spare row: launch 2 relies on every tile's keys being in descending order with 0-padding last, as
    # tile_candidates writes them (its survivors are then a prefix of each row). On candidates that break this the
    # spare row keeps even the compaction stores (at most K - 1 slots past a row's CAP) inside this buffer, and a
    # zeroed scratch keeps the reads defined (the check after launch 2 then fails the row).
    scratch = (torch.empty if trusted else torch.zeros)((b + 1, FINALIZE_CAP), dtype=torch.int64, device=dev)
    pdl = use_pdl(dev, launch)
    _select._finalize_kernel[(b,)](
        # inputs
        cands.keys,
        cands.flags,
        n_tiles,
        keys.temperature,
        keys.seed,
        keys.round,
        keys.position,
        tau,
        exp_constants(dev),
        DOMAIN_PROPOSAL,  # < 2^63: Triton passes it as an int64 with the same bits
        # outputs
        out.status,
        out.token,
        out.ids,
        out.tickets,
        scratch,
        # compile-time
        NC=triton.next_power_of_2(n_tiles * K),
        NT=triton.next_power_of_2(n_tiles),
        K=K,
        CAP=FINALIZE_CAP,
        PDL=pdl,
        num_warps=launch.warps[1],
        **_launch_opts(pdl),
    )
    return out


def _propose_shards(
    xs: Sequence[torch.Tensor], tile: int, keys: _args.RowKeys, tau: float, launch: LaunchConfig, out: Proposal
) -> Proposal:
    """Both launches over checked contiguous shards (in ID order) whose tiles fit launch 2, into checked outputs."""
    tiles = [triton.cdiv(s.shape[1], tile) for s in xs]
    cands = _empty_candidates(xs[0].shape[0], sum(tiles), xs[0].device)
    offset = base = 0
    for s, nt in zip(xs, tiles, strict=True):
        _launch_tiles(s, offset, tile, cands, base, launch)
        offset += s.shape[1]
        base += nt
    return _launch_finalize(cands, keys, tau, launch, out)


# ------------------------------------------------------------------------------------------ public launchers


def _check_shards(shards: Sequence[Any], tile: Any, name: str = "shards") -> tuple[list[torch.Tensor], int]:
    """Checked shards of one batch (same rows, same device) and the tile, which must fit launch 2. Errors name
    ``name[i]`` (``name`` alone for a single unsharded ``logits``)."""
    if not shards:
        raise ValueError(f"{name}: need at least one shard")
    xs = [_args.logits(name if name == "logits" else f"{name}[{i}]", s) for i, s in enumerate(shards)]
    b = xs[0].shape[0]
    for i, s in enumerate(xs):
        if s.shape[0] != b or s.device != xs[0].device:
            raise ValueError(f"shards[{i}]: expected {b} rows on {xs[0].device}, got {tuple(s.shape)} on {s.device}")
    if sum(s.shape[1] for s in xs) > MAX_VOCAB:
        raise ValueError("shards: the shards together exceed the maximum vocabulary 2^31 - 1")
    t = _args.tile(tile, max(s.shape[1] for s in xs))
    _args.tiles_fit(sum(triton.cdiv(s.shape[1], t) for s in xs), f"tile {t} over {len(xs)} shard(s)")
    return xs, t


def propose(
    logits: torch.Tensor,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
    *,
    tile: int | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
    out: Proposal | None = None,
) -> Proposal:
    """The Triton selector: same arguments and results as ``pp3.reference.propose``, on torch tensors. ``out``:
    caller-owned output buffers (a ``Proposal`` of contiguous tensors) that the kernels write in place."""
    xs, t = _check_shards([logits], tile, "logits")
    b, dev = xs[0].shape[0], xs[0].device
    keys = _args.row_keys(target_temperature, seed, round, position, b, dev)
    dest = _proposal_out(out, b, dev)
    return _propose_shards(xs, t, keys, _args.tau(tau), _args.launch_config(launch), dest)


def propose_sharded(
    shards: Sequence[torch.Tensor],
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
    *,
    tile: int | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
    out: Proposal | None = None,
) -> Proposal:
    """The selector over a row split by vocabulary into contiguous shards (in ID order), in one process."""
    xs, t = _check_shards(shards, tile)
    b, dev = xs[0].shape[0], xs[0].device
    keys = _args.row_keys(target_temperature, seed, round, position, b, dev)
    dest = _proposal_out(out, b, dev)
    return _propose_shards(xs, t, keys, _args.tau(tau), _args.launch_config(launch), dest)


def tile_candidates(
    logits: torch.Tensor,
    *,
    id_offset: int = 0,
    tile: int | None = None,
    out: Candidates | None = None,
    tile_base: int = 0,
    launch: LaunchConfig = DEFAULT_LAUNCH,
) -> Candidates:
    """Launch 1 on one shard ``[id_offset, id_offset + V_shard)``: per tile, its first K keys and its flags.

    With ``out`` the results go to tiles ``tile_base ..`` of an existing buffer (several shards, one buffer).
    """
    x = _args.logits("logits", logits)
    b, v = x.shape
    t = _args.tile(tile, v)
    offset = _args.integer("id_offset", id_offset, 0, MAX_VOCAB - v)
    n_tiles = triton.cdiv(v, t)
    if out is None:
        _args.tiles_fit(n_tiles, f"tile {t} on V = {v}")
        if tile_base != 0:
            raise ValueError("tile_base: needs out")
        out = _empty_candidates(b, n_tiles, x.device)
    total = out.flags.shape[1]
    if out.keys.shape != (b, total, K) or out.flags.shape != (b, total) or out.keys.device != x.device:
        raise ValueError(f"out: expected keys [{b}, T, {K}] and flags [{b}, T] on {x.device}")
    if out.keys.dtype != torch.int64 or out.flags.dtype != torch.int32:
        raise TypeError(f"out: expected int64 keys and int32 flags, got {out.keys.dtype} and {out.flags.dtype}")
    if not (out.keys.is_contiguous() and out.flags.is_contiguous()):
        raise ValueError("out: keys and flags must be contiguous (the kernel indexes them densely)")
    base = _args.integer("tile_base", tile_base, 0, max(0, total - n_tiles))
    if base + n_tiles > total:
        raise ValueError(f"tile_base: {base} + {n_tiles} tiles do not fit the {total} tiles of out")
    _launch_tiles(x, offset, t, out, base, _args.launch_config(launch))
    out.spans[base] = (n_tiles, offset, offset + v)
    return out


def _check_spans(cands: Candidates, vocab_size: int) -> None:
    """What ``tile_candidates`` recorded in ``cands`` (if anything) must tile the buffer's tiles and IDs 0 .. V-1,
    in the same order: no tile left unwritten or written twice, no shard offset that skips or repeats IDs."""
    if not cands.spans:
        return
    tiles = ids = 0
    for base, (n, lo, hi) in sorted(cands.spans.items()):
        if base != tiles:
            what = "were never written" if base > tiles else "were written twice"
            first, last = min(base, tiles), max(base, tiles) - 1
            raise ValueError(f"cands: tiles {first} .. {last} {what} by tile_candidates")
        if lo != ids:
            raise ValueError(f"cands: the shard at tile {base} starts at ID {lo}; the shards before it end at {ids}")
        tiles, ids = base + n, hi
    if tiles != cands.flags.shape[1]:
        raise ValueError(f"cands: tiles {tiles} .. {cands.flags.shape[1] - 1} were never written by tile_candidates")
    if ids != vocab_size:
        raise ValueError(f"cands: the shards cover IDs 0 .. {ids - 1}, not the vocabulary 0 .. {vocab_size - 1}")


def _launch_check(cands: Candidates, vocab_size: int, out: Proposal) -> None:
    """The candidates check after launch 2: fails each row whose candidates break its contract (BAD_CANDIDATES)."""
    b, n_tiles = cands.flags.shape
    _select._check_candidates_kernel[(b,)](
        cands.keys, cands.flags, n_tiles, vocab_size, out.status, out.token, out.ids, out.tickets,
        CT=_CHECK_TILES, K=K, BAD=BAD_CANDIDATES, num_warps=4, **EXACT,
    )


def finalize(
    cands: Candidates,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
    *,
    vocab_size: int,
    launch: LaunchConfig = DEFAULT_LAUNCH,
    out: Proposal | None = None,
) -> Proposal:
    """Launch 2: merge all tiles' candidates per row and apply SPEC.md §3-§8 to the vocabulary 0 .. ``vocab_size``
    - 1 (``cands`` as ``tile_candidates`` writes them); ``out`` as for ``propose``.

    Candidates are a caller's data, so they are checked: before the launch, what ``tile_candidates`` recorded in
    ``cands.spans`` must tile the buffer and the vocabulary (ValueError); after launch 2, one more launch fails each
    row whose candidates break the contract launch 1 keeps (a tile's keys not strictly descending, an ID >= V,
    tiles out of ID order or overlapping, unknown flag bits) with status ``BAD_CANDIDATES`` and the failed-row
    outputs (token -1): never an out-of-range token."""
    keys, flags = cands.keys, cands.flags
    if keys.dim() != 3 or keys.shape[2] != K or flags.shape != keys.shape[:2]:
        raise ValueError(f"cands: expected keys [B, T, {K}] and flags [B, T], got {tuple(keys.shape)}")
    if keys.dtype != torch.int64 or flags.dtype != torch.int32:
        raise TypeError(f"cands: expected int64 keys and int32 flags, got {keys.dtype} and {flags.dtype}")
    if not (keys.is_contiguous() and flags.is_contiguous()):
        raise ValueError("cands: keys and flags must be contiguous (the kernel indexes them densely)")
    b, n_tiles = flags.shape
    if b < 1 or n_tiles < 1:
        raise ValueError(f"cands: need B >= 1 rows and T >= 1 tiles, got keys of shape {tuple(keys.shape)}")
    _args.tiles_fit(n_tiles, "cands")
    v = _args.integer("vocab_size", vocab_size, 1, MAX_VOCAB)
    _check_spans(cands, v)
    row_keys = _args.row_keys(target_temperature, seed, round, position, b, keys.device)
    dest = _proposal_out(out, b, keys.device)
    _launch_finalize(cands, row_keys, _args.tau(tau), _args.launch_config(launch), dest, trusted=False)
    _launch_check(cands, v, dest)
    return dest


def expf(z: torch.Tensor) -> torch.Tensor:
    """SPEC.md §6 ``expf`` on a 1-D fp32 tensor of z <= 0, through the kernels' own device code."""
    if not isinstance(z, torch.Tensor) or z.dtype != torch.float32 or z.dim() != 1:
        raise TypeError("z: expected a 1-D float32 torch.Tensor")
    z = z.contiguous()
    out = torch.empty_like(z)
    block = 1024
    _common._expf_kernel[(triton.cdiv(z.numel(), block),)](
        z, out, exp_constants(z.device), z.numel(), BLOCK=block, **EXACT
    )
    return out


def philox(ctr: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Philox4x64-10 through the kernels' own device code: ``ctr`` [n, 4] and ``key`` [n, 2] int64 tensors of uint64
    bits -> [n, 4] int64 (uint64 bits). For the Random123 known-answer vectors (SPEC.md §8)."""
    for name, t, w in (("ctr", ctr, 4), ("key", key, 2)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != 2 or t.shape[1] != w:
            raise TypeError(f"{name}: expected an int64 torch.Tensor of shape [n, {w}]")
    if ctr.shape[0] != key.shape[0] or ctr.device != key.device:
        raise ValueError("key: expected as many rows as ctr, on the same device")
    out = torch.empty_like(ctr)
    if ctr.shape[0]:
        _common._philox_kernel[(ctr.shape[0],)](ctr.contiguous(), key.contiguous(), out, **EXACT)
    return out
