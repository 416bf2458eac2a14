"""Vocabulary-parallel selector over ``torch.distributed``: every rank holds a shard of each row (SPEC.md §2.2).

Rank ``r`` holds the logits of the contiguous global IDs ``[o_r, o_r + V_r)`` of every row; the shards tile
``0 … V-1`` exactly, in any assignment to ranks and with uneven sizes (an empty shard, ``V_r = 0``, is allowed).
One position costs one collective:

1. launch 1 (``tile_candidates``) on the rank's own shard, with global IDs, written straight into the rank's
   message: per tile, its first K keys (§4.1) and its flags (§3);
2. one ``all_gather`` of the messages (NCCL on GPUs, gloo on CPUs, any world size);
3. launch 2 (``finalize``) on every rank over the gathered candidates of all ranks.

Every rank runs ``finalize`` on bit-identical data, so every rank gets the same status, token, ids and tickets
(§7) without a copy of the token, and they equal the unsharded ``pp3.reference.propose`` (§9: the result does
not depend on the split, the tile size or the number of ranks).

**Message layout** (one int64 tensor per rank, the same length on every rank, so that ``all_gather`` applies):
``[0, B·T·K)`` keys ``[B, T, K]`` int64, then ``ceil(B·T / 2)`` int64 words holding the flags ``[B, T]`` int32
(two per word; the spare half-word of an odd ``B·T`` is zero). ``T`` is the largest tile count of any rank
(``max_r cdiv(V_r, tile)``: tiles are per shard); a rank with fewer tiles pads with **empty tiles**, keys 0 and
flags 0. An empty tile is neutral for ``finalize``: key 0 lies below every real key (the lowest real key is
``(0 << 32) | (2^32 - 1 - id) ≥ 2^31``, for the negative NaN 0xFFFFFFFF), so it enters a row's first K only where
the whole row has fewer than K entries, like launch 1's own key-0 padding lanes, and it is never a member; flags 0
add nothing to the row's OR. ``tests/test_pair.py`` checks this against ``finalize`` directly (V < K included).
The tile must be the same on every rank (``check_shards`` checks it), and ``W·T`` may not exceed the tiles that
launch 2 merges (``pp3.kernels.config.MAX_TILES``; checked before launch 1, identically on every rank).

With ``merge_local=True`` a rank first reduces its tiles to one (the first K keys of all its tiles and the OR
of their flags, with ``torch.topk`` on the unique int64 keys) and sends ``B·K`` keys whatever ``V_r`` and the tile
are; ``finalize`` then merges ``W`` tiles instead of ``W·T``. Same bits (a merged tile is a tile: its first K
keys and its flags); a few more small kernels per position, a message ``T`` times smaller.

**Setup check.** ``check_shards`` (one small ``all_gather`` and a host read, once at setup) detects overlapping
shards, gaps, a shard past ``vocab_size``, and batch size, ``vocab_size``, tile or ``tau`` differing between ranks,
and (where given) a digest of the per-row temperature, seed, round and position; every rank raises the same
:class:`ShardError` listing every problem. A caller error on one rank (a wrong dtype, say) is gathered too and
reported by every rank, so no rank is left waiting in a collective. Not checked, because it would cost a
collective or a host sync per position: that later positions' temperatures, seeds, rounds and positions agree
between ranks (ranks that disagree get different results, each self-consistent), that the shards hold the same
rows of the same model, and the dtype (fp32, fp16 and bf16 shards may be mixed: widening is exact, §2.1).

**Per-position cost and CUDA graphs.** ``propose_vocab_parallel(..., checked=True)`` looks the setup up in a
process-local table (host only) and then issues launch 1, one ``all_gather``, two small copies (rank-major to
row-major) and launch 2: no ``.item()``, no host read, no host-to-device copy when the per-row keys are device
tensors, so it can be captured in a CUDA graph where the collective can (NCCL collectives are capturable from
NCCL 2.9.6 on; gloo's are not; ``bench/pair.py`` records whether capture works on the pair). Warm it up eagerly
before capture (Triton compiles, NCCL creates its communicator). With ``checked=False`` (the default) every call
runs ``check_shards`` first: safe, but a second collective and a host sync per call. With ``checked=True``, a
caller error on one rank is raised on that rank before the collective, and the other ranks block in it until
the process group's timeout.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist

from pp3.kernels import _args, select
from pp3.kernels.config import DEFAULT_LAUNCH, MAX_TILES, LaunchConfig
from pp3.kernels.select import Candidates, Proposal
from pp3.reference._constants import DEFAULT_TAU, MAX_VOCAB, K

__all__ = [
    "ShardError",
    "ShardPlan",
    "check_shards",
    "merge_messages",
    "message_words",
    "propose_vocab_parallel",
    "shard_message",
]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Setup descriptor: one int64 vector per rank, gathered by check_shards.
_MAGIC = 0x7070335F70616972  # "pp3_pair": a rank running another protocol version shows up as a mismatch
_D_MAGIC, _D_ERROR, _D_OFFSET, _D_SIZE, _D_ROWS, _D_VOCAB, _D_TILE, _D_TAU = range(8)
_D_DIGEST = 8  # 8 .. 11: temperature, seed, round, position digests (-1: not given)
_D_MSG = 12  # 12 .. 12 + _MSG_WORDS: the rank's own caller error, UTF-8, zero padded
_MSG_WORDS = 32  # 256 bytes
_D_LEN = _D_MSG + _MSG_WORDS
_DIGEST_NAMES = ("target_temperature", "seed", "round", "position")
_NOT_GIVEN = -1
_SIGN64 = -(1 << 63)  # the int64 sign bit
_ERR_NONE, _ERR_VALUE, _ERR_TYPE = 0, 1, 2


class ShardError(ValueError):
    """The ranks' shard setup is inconsistent (raised with the same text on every rank)."""


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """The checked setup of one process group: every rank's shard, and what the messages look like."""

    rank: int  # this process's rank in the group
    offsets: tuple[int, ...]  # global ID of each rank's first entry
    sizes: tuple[int, ...]  # entries per row on each rank
    rows: int  # batch size B, the same on every rank
    vocab_size: int  # V
    tile: int  # launch-1 tile, the same on every rank

    @property
    def world(self) -> int:
        return len(self.sizes)

    @property
    def max_tiles(self) -> int:
        """Tiles per rank in a message: the largest per-shard tile count (``cdiv(V_r, tile)``) of any rank."""
        return max(-(-s // self.tile) for s in self.sizes)


_PLANS: dict[tuple[Any, ...], ShardPlan] = {}


# ------------------------------------------------------------------------------------------ argument checks


def _check_layout(x: Any, vocab_offset: Any, vocab_size: Any, tile: Any) -> tuple[torch.Tensor, int, int, int]:
    """A rank's shard (a [B, V_r] tensor, V_r = 0 allowed), its offset, ``vocab_size`` and the tile (``None``: the
    automatic tile of ``vocab_size``, the same on every rank)."""
    shard = _args.logits("logits_shard", x, allow_empty=True)
    vsize = _args.integer("vocab_size", vocab_size, 1, MAX_VOCAB)
    offset = _args.integer("vocab_offset", vocab_offset, 0, MAX_VOCAB)
    if offset + shard.shape[1] > vsize:
        raise ValueError(
            f"vocab_offset: the shard [{offset}, {offset + shard.shape[1]}) ends past vocab_size = {vsize}"
        )
    return shard, offset, vsize, _args.tile(tile, vsize)


def _digest(arr: npt.NDArray[Any]) -> int:
    """A 63-bit digest of a row array's bytes (fp32 temperatures compare by their bits)."""
    return int.from_bytes(hashlib.blake2b(np.ascontiguousarray(arr).tobytes(), digest_size=8).digest(), "little") >> 1


# ------------------------------------------------------------------------------------------ collectives


def _all_gather(inp: torch.Tensor, world: int, group: Any) -> torch.Tensor:
    """One ``all_gather`` of a 1-D tensor into [W, n], rank-major (``all_gather_single`` where torch has it).

    The output is allocated flat, the concatenation form, which NCCL and gloo both accept (gloo rejects [W, n]).
    """
    out = torch.empty(world * inp.numel(), dtype=inp.dtype, device=inp.device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, inp, group=group)
    return out.view(world, inp.numel())


def _collective_device(group: Any, logits: Any) -> torch.device:
    if isinstance(logits, torch.Tensor):
        return logits.device
    if "nccl" in str(dist.get_backend(group)):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _plan_key(group: Any, offset: int, size: int, rows: int, vocab_size: int, tile: int) -> tuple[Any, ...]:
    pg = group if group is not None else dist.group.WORLD
    return (pg, dist.get_rank(group), dist.get_world_size(group), offset, size, rows, vocab_size, tile)


# ------------------------------------------------------------------------------------------ setup check


@dataclasses.dataclass(frozen=True)
class _Call:
    """One rank's arguments of a call, checked and normalised (``_args``)."""

    shard: torch.Tensor  # [B, V_r]
    offset: int
    vocab_size: int
    tile: int
    keys: _args.RowKeys
    tau: float


def _check_call(
    logits: Any, vocab_offset: Any, vocab_size: Any, keys: tuple[Any, Any, Any, Any], tau: Any, tile: Any
) -> _Call:
    x, offset, vsize, t = _check_layout(logits, vocab_offset, vocab_size, tile)
    temp, seed, rnd, pos = (0 if k is None else k for k in keys)  # a key not given (check_shards) is not compared
    return _Call(x, offset, vsize, t, _args.row_keys(temp, seed, rnd, pos, x.shape[0], x.device), _args.tau(tau))


def _describe(call: _Call | None, given: tuple[bool, ...], error: Exception | None) -> list[int]:
    """This rank's setup descriptor: its checked call, or its own caller error (reported through the gather, not
    raised: a rank that raised alone would leave the others waiting)."""
    d = [_NOT_GIVEN] * _D_LEN
    d[_D_MAGIC] = _MAGIC
    d[_D_ERROR] = _ERR_NONE
    if call is not None:
        x = call.shard
        d[_D_OFFSET], d[_D_SIZE], d[_D_ROWS], d[_D_VOCAB] = call.offset, x.shape[1], x.shape[0], call.vocab_size
        d[_D_TILE] = call.tile
        d[_D_TAU] = int(np.array(call.tau, dtype=np.float32).view(np.uint32))
        rows = (call.keys.temperature, call.keys.seed, call.keys.round, call.keys.position)
        for i, (t, g) in enumerate(zip(rows, given, strict=True)):
            if g:
                d[_D_DIGEST + i] = _digest(t.cpu().numpy())
    if error is not None:
        d[_D_ERROR] = _ERR_TYPE if isinstance(error, TypeError) else _ERR_VALUE
        text = f"{type(error).__name__}: {error}".encode()[: 8 * _MSG_WORDS]
        words = np.frombuffer(text.ljust(8 * _MSG_WORDS, b"\0"), dtype=np.int64)
        d[_D_MSG : _D_MSG + _MSG_WORDS] = [int(w) for w in words]
    return d


def _message_text(row: npt.NDArray[np.int64]) -> str:
    raw = row[_D_MSG : _D_MSG + _MSG_WORDS].astype(np.int64).tobytes().rstrip(b"\0")
    return raw.decode(errors="replace")


def _differs(table: npt.NDArray[np.int64], field: int, what: str, show: Any = str) -> str | None:
    col = table[:, field]
    if (col == col[0]).all():
        return None
    return f"{what} differs across ranks: " + ", ".join(f"rank {r} has {show(int(v))}" for r, v in enumerate(col))


def _problems(table: npt.NDArray[np.int64]) -> list[str]:
    """Every inconsistency in the gathered descriptors (the same list on every rank: the same data)."""
    world = table.shape[0]
    if (table[:, _D_MAGIC] != _MAGIC).any():
        bad = [r for r in range(world) if table[r, _D_MAGIC] != _MAGIC]
        return [f"ranks {bad} do not run this pp3.pair protocol"]
    errors = [f"rank {r}: {_message_text(table[r])}" for r in range(world) if table[r, _D_ERROR] != _ERR_NONE]
    if errors:
        return errors
    out = [
        p
        for p in (
            _differs(table, _D_ROWS, "the batch size", lambda v: f"B={v}"),
            _differs(table, _D_VOCAB, "vocab_size", lambda v: f"vocab_size={v}"),
            _differs(table, _D_TILE, "tile", lambda v: f"tile={v}"),
            _differs(table, _D_TAU, "tau", lambda v: f"tau bits 0x{v:08x}"),
            *(
                _differs(
                    table, _D_DIGEST + i, f"{name} (digest)", lambda v: "not given" if v == _NOT_GIVEN else f"{v:016x}"
                )
                for i, name in enumerate(_DIGEST_NAMES)
            ),
        )
        if p is not None
    ]
    # §2.2: the shards must tile 0 .. V-1 exactly. Walk them in ID order; empty shards cover nothing.
    vocab = int(table[0, _D_VOCAB])
    spans = sorted((int(table[r, _D_OFFSET]), int(table[r, _D_SIZE]), r) for r in range(world))
    end, owner = 0, -1
    for off, size, r in spans:
        if size == 0:
            continue
        if off < end:
            o0, s0 = int(table[owner, _D_OFFSET]), int(table[owner, _D_SIZE])
            out.append(
                f"overlapping shards: rank {owner} covers [{o0}, {o0 + s0}) and rank {r} covers [{off}, {off + size})"
            )
        elif off > end:
            out.append(f"gap: IDs [{end}, {off}) are on no rank")
        if off + size > end:
            end, owner = off + size, r
    if end < vocab:
        out.append(f"gap: IDs [{end}, {vocab}) are on no rank (vocab_size = {vocab})")
    return out


def check_shards(
    logits_shard: Any,
    vocab_offset: Any,
    vocab_size: Any,
    target_temperature: Any = None,
    seed: Any = None,
    round: Any = None,
    position: Any = None,
    tau: float = DEFAULT_TAU,
    *,
    group: Any = None,
    tile: int | None = None,
) -> ShardPlan:
    """Check the shard setup of every rank of ``group`` (collective: every rank must call it) and remember it.

    One ``all_gather`` of a 44-word descriptor per rank and a host read. Raises :class:`ShardError` with the
    same text on every rank if the shards overlap, leave a gap, or the ranks disagree on the batch size,
    ``vocab_size``, ``tile``, ``tau`` or (those given) the per-row keys; a caller error on any rank is raised
    on every rank (``TypeError`` on the rank that made a type error, ``ShardError`` otherwise). Returns the plan
    that ``propose_vocab_parallel(..., checked=True)`` then looks up without communication.
    """
    plan, _ = _check_setup(
        logits_shard, vocab_offset, vocab_size, (target_temperature, seed, round, position), tau, group, tile
    )
    return plan


def _check_setup(
    logits_shard: Any,
    vocab_offset: Any,
    vocab_size: Any,
    keys: tuple[Any, Any, Any, Any],
    tau: Any,
    group: Any,
    tile: Any,
) -> tuple[ShardPlan, _Call]:
    """``check_shards``, also returning this rank's checked call."""
    call: _Call | None = None
    own_error: Exception | None = None
    try:
        call = _check_call(logits_shard, vocab_offset, vocab_size, keys, tau, tile)
    except Exception as e:  # every caller error is reported through the gather, on every rank
        own_error = e
    desc = _describe(call, tuple(k is not None for k in keys), own_error)
    world = dist.get_world_size(group)
    dev = _collective_device(group, logits_shard)
    mine = torch.tensor(desc, dtype=torch.int64).to(dev)
    table: npt.NDArray[np.int64] = _all_gather(mine, world, group).cpu().numpy()
    problems = _problems(table)
    if problems or call is None:
        text = f"pp3.pair.check_shards: inconsistent setup across {world} ranks: " + "; ".join(problems)
        if isinstance(own_error, TypeError):
            raise TypeError(text) from own_error  # its own type on the rank that made a type error (SPEC §2)
        raise ShardError(text) from own_error
    rank = dist.get_rank(group)
    plan = ShardPlan(
        rank=rank,
        offsets=tuple(int(v) for v in table[:, _D_OFFSET]),
        sizes=tuple(int(v) for v in table[:, _D_SIZE]),
        rows=int(table[0, _D_ROWS]),
        vocab_size=int(table[0, _D_VOCAB]),
        tile=int(table[0, _D_TILE]),
    )
    key = _plan_key(group, plan.offsets[rank], plan.sizes[rank], plan.rows, plan.vocab_size, plan.tile)
    _PLANS[key] = plan
    return plan, call


# ------------------------------------------------------------------------------------------ messages


def _views(msg: torch.Tensor, b: int, t: int) -> Candidates:
    """The keys [B, T, K] and flags [B, T] int32 regions of a message (views, no copy)."""
    n_keys = b * t * K
    return Candidates(
        keys=msg[:n_keys].view(b, t, K),
        flags=msg[n_keys:].view(torch.int32)[: b * t].view(b, t),
    )


def message_words(rows: int, tiles: int) -> int:
    """int64 words of a message carrying ``tiles`` tiles per row."""
    return rows * tiles * K + (rows * tiles + 1) // 2


def shard_message(
    logits_shard: torch.Tensor,
    vocab_offset: int,
    max_tiles: int,
    *,
    tile: int | None = None,
    merge_local: bool = False,
    launch: LaunchConfig = DEFAULT_LAUNCH,
) -> torch.Tensor:
    """Launch 1 on one shard, into a new message (int64, ``message_words(B, T)``), padded with empty tiles.

    ``T`` is ``max_tiles`` (every rank's tile count must fit it), or 1 with ``merge_local``. ``tile=None`` is the
    automatic tile of the shard's own size (pass the plan's tile when the shards differ in size).
    """
    x = _args.logits("logits_shard", logits_shard, allow_empty=True)
    t = _args.tile(tile, max(x.shape[1], 1))
    offset = _args.integer("vocab_offset", vocab_offset, 0, MAX_VOCAB - x.shape[1])
    n_tiles = -(-x.shape[1] // t)
    if n_tiles > _args.integer("max_tiles", max_tiles, 1, MAX_VOCAB):
        raise ValueError(f"max_tiles: the shard has {n_tiles} tiles of {t}, more than max_tiles = {max_tiles}")
    return _shard_message(x, offset, max_tiles, t, merge_local, _args.launch_config(launch))


def _shard_message(
    x: torch.Tensor, vocab_offset: int, max_tiles: int, tile: int, merge_local: bool, launch: LaunchConfig
) -> torch.Tensor:
    """``shard_message`` on checked arguments."""
    b, v = x.shape
    n_tiles = -(-v // tile)
    t = 1 if merge_local else max_tiles
    words = message_words(b, t)
    padded = (b * t) % 2 == 1 or (merge_local and v == 0) or (not merge_local and n_tiles < t)
    msg = (torch.zeros if padded else torch.empty)(words, dtype=torch.int64, device=x.device)
    out = _views(msg, b, t)
    if v == 0:
        return msg  # an empty shard sends empty tiles only
    if not merge_local:
        select._launch_tiles(x, vocab_offset, tile, out, 0, launch)
        return msg
    # An explicit buffer: launch 2 never merges these n_tiles tiles (topk does), so its tile cap does not apply.
    local = select._empty_candidates(b, n_tiles, x.device)
    select._launch_tiles(x, vocab_offset, tile, local, 0, launch)
    # A merged tile is a tile: its first K keys and the OR of its flags. Keys are uint64 held as int64: flipping
    # the sign bit makes the signed order the unsigned one, and topk on them is exact (the keys are unique).
    flipped = local.keys.view(b, n_tiles * K) ^ _SIGN64
    out.keys.view(b, K).copy_(torch.topk(flipped, K, dim=1).values ^ _SIGN64)
    f = local.flags
    out.flags.view(b).copy_((f & 1).amax(dim=1) | (f & 2).amax(dim=1) | (f & 4).amax(dim=1))
    return msg


def merge_messages(gathered: torch.Tensor, rows: int, tiles: int) -> Candidates:
    """The gathered messages [W, n] (rank-major) as one row-major ``Candidates`` of ``W·tiles`` tiles (two copies)."""
    world = gathered.shape[0]
    if gathered.dim() != 2 or gathered.shape[1] != message_words(rows, tiles):
        raise ValueError(f"gathered: expected [W, {message_words(rows, tiles)}], got {tuple(gathered.shape)}")
    n_keys = rows * tiles * K
    keys = gathered[:, :n_keys].view(world, rows, tiles, K).transpose(0, 1).contiguous()
    flags = gathered[:, n_keys:].view(torch.int32)[:, : rows * tiles].view(world, rows, tiles)
    return Candidates(
        keys=keys.view(rows, world * tiles, K),
        flags=flags.transpose(0, 1).contiguous().view(rows, world * tiles),
    )


# ------------------------------------------------------------------------------------------ the selector


def propose_vocab_parallel(
    logits_shard: torch.Tensor,
    vocab_offset: int,
    vocab_size: int,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    tau: float = DEFAULT_TAU,
    *,
    group: Any = None,
    tile: int | None = None,
    checked: bool = False,
    merge_local: bool = False,
    launch: LaunchConfig = DEFAULT_LAUNCH,
) -> Proposal:
    """One position of the selector with the vocabulary split over the ranks of ``group`` (collective).

    ``logits_shard`` [B, V_r] holds global IDs ``[vocab_offset, vocab_offset + V_r)`` of ``vocab_size``; the
    per-row keys and ``tau`` are those of ``pp3.kernels.propose`` and must be the same on every rank. Returns
    the same ``Proposal`` on every rank, equal bit for bit to ``pp3.reference.propose`` on the whole rows.
    ``checked=True`` skips the setup check (one collective per call) and needs an earlier ``check_shards`` with
    the same shard, batch size, ``vocab_size`` and tile.
    """
    cfg = _args.launch_config(launch)
    keys = (target_temperature, seed, round, position)
    if checked:
        call = _check_call(logits_shard, vocab_offset, vocab_size, keys, tau, tile)  # before any work (§2)
    else:
        _, call = _check_setup(logits_shard, vocab_offset, vocab_size, keys, tau, group, tile)
    x, offset, vsize, t = call.shard, call.offset, call.vocab_size, call.tile
    b, v = x.shape
    plan = _PLANS.get(_plan_key(group, offset, v, b, vsize, t))
    if plan is None:
        raise ValueError(
            f"checked=True: no check_shards for this rank's shard [{offset}, {offset + v}), B={b}, "
            f"vocab_size={vsize}, tile={t}; call check_shards(...) on every rank first"
        )
    tiles = 1 if merge_local else plan.max_tiles
    if plan.world * tiles > MAX_TILES:
        # The same numbers on every rank: every rank raises here, before the collective.
        raise ValueError(
            f"tile: {plan.world} ranks x {tiles} tiles = {plan.world * tiles} tiles per row, more than the "
            f"{MAX_TILES} that launch 2 merges; use a larger tile or merge_local=True"
        )
    msg = _shard_message(x, offset, plan.max_tiles, t, merge_local, cfg)
    gathered = _all_gather(msg, plan.world, group)  # the one collective of a position
    return select._launch_finalize(merge_messages(gathered, b, tiles), call.keys, call.tau, cfg)
