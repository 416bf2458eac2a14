"""The selector's public entry points: ``propose`` (mirrors ``pp3.reference.propose``), ``propose_sharded`` and the
two launches on their own (``tile_candidates``, ``finalize``); ``greedy`` and ``greedy_sharded`` for calls whose
every row is greedy (one pass, two launches); and the kernels' own exponential and Philox.

Launch 1 (``tile_candidates``) runs per vocabulary tile and may run per shard with global ID offsets; launch 2
(``finalize``) merges every tile's candidates and does temperature, the exponential, normalisation, tickets and
the Philox draw for each row. Each entry point checks and normalises every argument once (``checks``), before any
launch and without reading device memory (so a call can be captured in a CUDA graph), then calls ``launchers``, whose
launchers trust them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pp3.kernels import checks, launchers
from pp3.kernels.buffers import BAD_CANDIDATES, Candidates, Proposal, RowKeys
from pp3.kernels.config import DEFAULT_LAUNCH, LaunchConfig
from pp3.reference._constants import DEFAULT_TAU, MAX_VOCAB

__all__ = [
    "BAD_CANDIDATES", "Candidates", "Proposal", "expf", "finalize", "greedy", "greedy_sharded", "philox", "propose",
    "propose_sharded", "tile_candidates",
]


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
    caller-owned output buffers (a ``Proposal`` of contiguous tensors that share no memory with each other or with an
    input) that the kernels write in place. ``tile``: the tile selector's tile, so only with
    ``launch=LaunchConfig(selector="tiles")``: the segment selector, which ``propose`` runs otherwise, has none (its
    size is ``LaunchConfig.segment``), and a tile it would not use is refused (``ValueError``) rather than ignored."""
    return launchers.propose(
        *propose_args([logits], target_temperature, seed, round, position, tau, tile, launch, out, "logits")
    )


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
    return launchers.propose(
        *propose_args(shards, target_temperature, seed, round, position, tau, tile, launch, out, "shards")
    )


def _named(name: str, xs: Sequence[Any]) -> list[tuple[str, Any]]:
    """The shards with the names ``checks.shards`` gives them."""
    return [(name if name == "logits" else f"{name}[{i}]", x) for i, x in enumerate(xs)]


def _keys(target_temperature: Any, seed: Any, round: Any, position: Any) -> list[tuple[str, Any]]:
    """The per-row keys as the caller passed them, with their names."""
    return [("target_temperature", target_temperature), ("seed", seed), ("round", round), ("position", position)]


def propose_args(
    xs: Sequence[Any],
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: Any,
    tile: Any,
    launch: Any,
    out: Any,
    name: str,
) -> tuple[list[torch.Tensor], int, RowKeys, float, LaunchConfig, Proposal]:
    """The arguments of ``propose`` (``[logits]``, ``name`` "logits") or ``propose_sharded`` (the shards, "shards"),
    checked, as ``launchers.propose`` takes them. The custom operators' fake implementations check through it too.
    A tile is refused where ``launchers.propose`` runs the segment, one-launch or row selector (one shard,
    ``launch.selector`` not "tiles"), which have none."""
    cfg = checks.launch_config(launch)
    checked, t = checks.shards(xs, tile, name)
    if tile is not None and len(checked) == 1 and cfg.selector != "tiles":
        call = "propose" if name == "logits" else "propose_sharded"
        runs = {"onelaunch": "one-launch", "rows": "row"}.get(cfg.selector, "segment")
        raise ValueError(f"tile: {call} on one tensor runs the {runs} selector (LaunchConfig.selector "
                         f"{cfg.selector!r}), which has no tile; pass launch=LaunchConfig(selector='tiles') to run the "
                         f"tile selector with this tile (LaunchConfig.segment sizes the {runs} selector)")
    b, dev = checked[0].shape[0], checked[0].device
    keys = checks.row_keys(target_temperature, seed, round, position, b, dev)
    reads = checks.tensors([*_named(name, xs), *_keys(target_temperature, seed, round, position)])
    dest = checks.proposal_out(out, b, dev, reads)
    return checked, t, keys, checks.tau(tau), cfg, dest


def greedy(
    logits: torch.Tensor,
    *,
    tile: int | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
    out: Proposal | None = None,
) -> Proposal:
    """The greedy selector: what ``propose`` returns for rows whose target temperature is 0 (SPEC.md §3, §4.2, §7:
    status, token g = the row maximum with the lowest ID among equal values, slot 0 = (g, 2^24), the other slots
    empty; a failed row's outputs), for calls whose every row is greedy. No keys: a T0 row draws nothing. One pass
    over each row: a launch over its tiles, then one program per row (``launch.warps[0]`` warps per program;
    ``launch.greedy``: how the tiles reduce, never what the call returns)."""
    return greedy_sharded([logits], tile=tile, launch=launch, out=out, name="logits")


def greedy_sharded(
    shards: Sequence[torch.Tensor],
    *,
    tile: int | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
    out: Proposal | None = None,
    name: str = "shards",
) -> Proposal:
    """``greedy`` over a row split by vocabulary into contiguous shards (in ID order), in one process."""
    return launchers.greedy(*greedy_args(shards, tile, launch, out, name))


def greedy_args(
    xs: Sequence[Any], tile: Any, launch: Any, out: Any, name: str
) -> tuple[list[torch.Tensor], int, LaunchConfig, Proposal]:
    """The arguments of ``greedy_sharded`` (``greedy``: ``name`` "logits"), checked, as ``launchers.greedy`` takes
    them (and the fake implementations check them)."""
    checked, t = checks.shards(xs, tile, name)
    dest = checks.proposal_out(out, checked[0].shape[0], checked[0].device, checks.tensors(_named(name, xs)))
    return checked, t, checks.launch_config(launch), dest


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

    With ``out`` the results go to tiles ``tile_base ..`` of an existing buffer (several shards, one buffer), and
    ``out.spans`` records the IDs of each tile written (a tile written again holds what the last call wrote).
    """
    x, offset, t, dest, base, cfg = tile_candidates_args(logits, id_offset, tile, out, tile_base, launch)
    launchers.tiles(x, offset, t, dest, base, cfg)
    v = x.shape[1]
    for i in range(-(-v // t)):
        dest.spans[base + i] = (offset + i * t, offset + min((i + 1) * t, v))
    return dest


def tile_candidates_args(
    logits: Any, id_offset: Any, tile: Any, out: Any, tile_base: Any, launch: Any
) -> tuple[torch.Tensor, int, int, Candidates, int, LaunchConfig]:
    """The arguments of ``tile_candidates``, checked, as ``launchers.tiles`` takes them (and the fake implementations
    check them)."""
    x = checks.logits("logits", logits)
    b, v = x.shape
    t = checks.tile(tile, v)
    offset = checks.integer("id_offset", id_offset, 0, MAX_VOCAB - v)
    dest, base = checks.candidates_out(out, b, -(-v // t), tile_base, x.device, f"tile {t} on V = {v}",
                                       [("logits", logits)])
    return x, offset, t, dest, base, checks.launch_config(launch)


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

    Candidates are a caller's data, so they are checked: before any launch, what ``tile_candidates`` recorded in
    ``cands.spans`` must tile the buffer and the vocabulary (ValueError); before launch 2, one more launch fails
    each row whose candidates break the contract launch 1 keeps (a tile's keys not strictly descending, an ID >= V,
    an ID twice in a tile, tiles out of ID order or overlapping, unknown flag bits, keys the flags deny) with status
    ``BAD_CANDIDATES`` and the failed-row outputs (token -1), and launch 2 reads none of that row: any buffer gives
    each row a status, never an out-of-range token."""
    c, keys, t, cfg, dest, v = finalize_args(cands, target_temperature, seed, round, position, tau, vocab_size, launch,
                                             out)
    return launchers.finalize(c, keys, t, cfg, dest, vocab_size=v)


def finalize_args(
    cands: Any,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: Any,
    vocab_size: Any,
    launch: Any,
    out: Any,
) -> tuple[Candidates, RowKeys, float, LaunchConfig, Proposal, int]:
    """The arguments of ``finalize``, checked, as ``launchers.finalize`` takes them (the last one its
    ``vocab_size``); the fake implementations check them too."""
    c, v = checks.candidates(cands, vocab_size)
    b, dev = c.flags.shape[0], c.keys.device
    keys = checks.row_keys(target_temperature, seed, round, position, b, dev)
    reads = checks.tensors([("cands.keys", c.keys), ("cands.flags", c.flags),
                            *_keys(target_temperature, seed, round, position)])
    dest = checks.proposal_out(out, b, dev, reads)
    return c, keys, checks.tau(tau), checks.launch_config(launch), dest, v


def expf(z: torch.Tensor) -> torch.Tensor:
    """SPEC.md §6 ``expf`` on a 1-D fp32 tensor of z <= 0, through the kernels' own device code."""
    if not isinstance(z, torch.Tensor) or z.dtype != torch.float32 or z.dim() != 1:
        raise TypeError("z: expected a 1-D float32 torch.Tensor")
    z = z.contiguous()
    return launchers.expf(z, torch.empty_like(z))


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
        launchers.philox(ctr.contiguous(), key.contiguous(), out)
    return out
