"""Vocabulary-parallel selector over ``torch.distributed``: every rank holds a shard of each row (SPEC.md §2.2).

Rank ``r`` holds the logits of the contiguous global IDs ``[o_r, o_r + V_r)`` of every row; the shards tile
``0 … V-1`` exactly, in any assignment to ranks and with uneven sizes (an empty shard, ``V_r = 0``, is allowed).
One position costs one collective:

1. launch 1 (``pp3.kernels.launchers.tiles``) on the rank's own shard, with global IDs, written straight
   into the rank's message: per tile, its first K keys (§4.1) and its flags (§3);
2. one ``all_gather`` of the messages (NCCL on GPUs, gloo on CPUs, any world size);
3. launch 2 (``pp3.kernels.launchers.finalize``) on every rank over the gathered candidates of all ranks.

The arguments are checked once per call (``pp3.kernels.checks``, and the plan below), then the launchers run on them
as they do inside ``pp3.kernels.propose``: the gathered candidates are launch 1's outputs of this call on ranks that
share one plan, so launch 2 trusts them, as it trusts launch 1 within one process (``pp3.kernels.finalize``, for
candidates a caller builds, also runs the candidates check; this path does not).

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

With ``merge_local=True`` a rank first reduces its tiles to one (the first K keys of all its tiles and the OR
of their flags, with ``torch.topk`` on the unique int64 keys) and sends ``B·K`` keys whatever ``V_r`` and the tile
are; ``finalize`` then merges ``W`` tiles instead of ``W·T``. Same bits (a merged tile is a tile: its first K
keys and its flags); a few more small kernels per position, a message ``T`` times smaller.

**The plan.** Everything that fixes the exchange (every rank's offset and size, the batch size, ``vocab_size``,
the tile, ``merge_local``) and ``tau`` must be the same on every rank. ``check_shards`` (collective: one
``all_gather`` of a 46-word descriptor per rank and a host read) checks that: it detects overlapping shards,
gaps, a shard past ``vocab_size``, ranks that disagree on the batch size, ``vocab_size``, the tile,
``merge_local`` or ``tau``, more tiles than launch 2 merges (``W·T > pp3.kernels.config.MAX_TILES``), ranks that
are in different calls (``check_shards`` on one, ``propose_vocab_parallel`` on another) and, where given, a
digest of the per-row temperature, seed, round and position; every rank raises the same :class:`ShardError`
listing every problem. A caller error on one rank (any argument: a wrong dtype, a shard on ``meta``, a bad
``launch=`` or ``timeout=``) is checked before the gather and gathered too, reported by every rank as
"rank r: <the error naming the argument>" (``TypeError`` on the rank that made a type error), so no rank is left
waiting in a collective. It returns
a :class:`ShardPlan`, the group's **current plan**: each ``check_shards`` on a process group replaces it (a
failed one leaves none), so every rank's current plan comes from the same collective and is the same plan.

**Per-position calls.** ``propose_vocab_parallel(..., plan=plan)`` trusts the plan instead of checking the
setup again: it checks on the host, without communication, that ``plan`` is the group's current plan (else
"stale plan": a later ``check_shards`` replaced it) and that this rank's call matches it (shard offset and size,
batch size, ``vocab_size``, tile, ``merge_local``, ``tau``), raising ``ValueError`` before any work if not; then
it issues launch 1, one ``all_gather``, two small copies (rank-major to row-major) and launch 2: no ``.item()``,
no host read, no host-to-device copy when the per-row keys are device tensors, so it can be captured in a CUDA
graph where the collective can (NCCL collectives are capturable from NCCL 2.9.6 on; gloo's are not;
``bench/pair.py`` records whether capture works on the pair). Warm it up eagerly before capture (Triton
compiles, NCCL creates its communicator). ``plan=None`` (the default) runs the setup check in every call: safe,
but a second collective and a host sync per call (it does not touch the group's current plan). Not checked on
the trusted path, because it would cost a collective or a host sync per position: that the ranks' per-row keys
agree (ranks that disagree get different results, each self-consistent) and that the shards hold the same rows
of the same model. The dtype is never checked across ranks: fp32, fp16 and bf16 shards may be mixed, because
widening is exact (§2.1) and the result is the reference's on the widened row (``tests/test_pair.py`` checks it).

**Timeouts.** Every collective of this module has a timeout of its own, ``timeout`` seconds
(``DEFAULT_TIMEOUT_S`` = 300 unless ``check_shards(..., timeout=)`` set another for the plan or the call passes
``timeout=``): where the host waits for the gather (the setup check on every backend; every gather of CPU
tensors, so every gloo call) a rank that does not take part within it (dead, stalled, or in another call) makes
the others raise :class:`CollectiveError` within that time (a rank that died usually makes them raise at once,
its connection closed). A rank whose call is wrong on the trusted path raises ``TypeError`` or ``ValueError`` at
once, naming its rank and the argument, and its peers raise ``CollectiveError`` after the timeout (agreeing would
cost the collective per position that the plan saves). After a ``CollectiveError`` the process group may be
unusable (a gather may still be pending in it): destroy it. On CUDA tensors the per-position gather is
stream-ordered (the host does not wait, so that it can be captured); there the process group's own timeout
(NCCL's watchdog) bounds it, not pp3's. Ranks in different collectives whose messages differ in length cannot be
caught by pp3 on the trusted path: gloo aborts the process (SIGABRT); pass every rank the same plan.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist

from pp3.kernels import buffers, checks, launchers
from pp3.kernels.buffers import Candidates, Proposal
from pp3.kernels.config import DEFAULT_LAUNCH, MAX_TILES, LaunchConfig
from pp3.reference._constants import DEFAULT_TAU, MAX_VOCAB, K

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "CollectiveError",
    "ShardError",
    "ShardPlan",
    "check_shards",
    "merge_messages",
    "message_words",
    "propose_vocab_parallel",
    "shard_message",
]

DEFAULT_TIMEOUT_S = 300.0  # seconds a rank waits in a collective of this module for the others (override: timeout=)

# Setup descriptor: one int64 vector per rank, gathered by check_shards.
_MAGIC = 0x7070335F70616932  # "pp3_pai2": a rank running another protocol version shows up as a mismatch
_D_MAGIC, _D_KIND, _D_ERROR, _D_OFFSET, _D_SIZE, _D_ROWS, _D_VOCAB, _D_TILE, _D_TAU, _D_MERGE = range(10)
_D_DIGEST = 10  # 10 .. 13: temperature, seed, round, position digests (-1: not given)
_D_MSG = 14  # 14 .. 14 + _MSG_WORDS: the rank's own caller error, UTF-8, zero padded
_MSG_WORDS = 32  # 256 bytes
_D_LEN = _D_MSG + _MSG_WORDS
_DIGEST_NAMES = ("target_temperature", "seed", "round", "position")
_NOT_GIVEN = -1
_SIGN64 = -(1 << 63)  # the int64 sign bit
_ERR_NONE, _ERR_VALUE, _ERR_TYPE = 0, 1, 2
_KIND_SETUP, _KIND_CALL = 1, 2  # check_shards; propose_vocab_parallel without a plan
_KIND_NAMES = {_KIND_SETUP: "check_shards", _KIND_CALL: "propose_vocab_parallel(plan=None)"}


class ShardError(ValueError):
    """The ranks' shard setup is inconsistent (raised with the same text on every rank)."""


class CollectiveError(RuntimeError):
    """A collective of ``pp3.pair`` failed or did not complete within its timeout: a rank died, stalled, or is in
    another call. The process group may be unusable afterwards."""


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """The checked setup of one process group (``check_shards``): every rank's shard and how the ranks exchange."""

    rank: int  # this process's rank in the group
    offsets: tuple[int, ...]  # global ID of each rank's first entry
    sizes: tuple[int, ...]  # entries per row on each rank
    rows: int  # batch size B, the same on every rank
    vocab_size: int  # V
    tile: int  # launch-1 tile, the same on every rank
    merge_local: bool  # one merged tile per rank (else one message entry per tile)
    tau: float  # the drafter temperature (fp32 value), the same on every rank
    timeout_s: float  # the default timeout of the calls that use this plan
    generation: int  # which check_shards on this group made it (1, 2, …; the same on every rank)
    group: Any = dataclasses.field(default=None, compare=False, repr=False)  # the process group (never None)

    @property
    def world(self) -> int:
        return len(self.sizes)

    @property
    def max_tiles(self) -> int:
        """The largest per-shard tile count (``cdiv(V_r, tile)``) of any rank."""
        return max(-(-s // self.tile) for s in self.sizes)

    @property
    def tiles(self) -> int:
        """Tiles per rank in a message: ``max_tiles``, or 1 with ``merge_local``."""
        return 1 if self.merge_local else self.max_tiles

    @property
    def id_order(self) -> tuple[int, ...]:
        """The ranks in the ID order of their shards (``finalize`` takes the tiles in ID order)."""
        return tuple(sorted(range(self.world), key=lambda r: (self.offsets[r], self.sizes[r])))


# The current plan of each process group, and how many check_shards ran on it (process-local, host only).
_CURRENT: dict[Any, ShardPlan] = {}
_SETUPS: dict[Any, int] = {}


# ------------------------------------------------------------------------------------------ argument checks


def _check_layout(x: Any, vocab_offset: Any, vocab_size: Any, tile: Any) -> tuple[torch.Tensor, int, int, int]:
    """A rank's shard (a [B, V_r] tensor, V_r = 0 allowed), its offset, ``vocab_size`` and the tile (``None``: the
    automatic tile of ``vocab_size``, the same on every rank)."""
    shard = checks.logits("logits_shard", x, allow_empty=True)
    vsize = checks.integer("vocab_size", vocab_size, 1, MAX_VOCAB)
    offset = checks.integer("vocab_offset", vocab_offset, 0, MAX_VOCAB)
    if offset + shard.shape[1] > vsize:
        raise ValueError(
            f"vocab_offset: the shard [{offset}, {offset + shard.shape[1]}) ends past vocab_size = {vsize}"
        )
    return shard, offset, vsize, checks.tile(tile, vsize)


def _timeout(value: Any) -> float:
    """``timeout``: seconds, finite and > 0 (``None``: ``DEFAULT_TIMEOUT_S``)."""
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"timeout: expected seconds as a number, got {type(value).__name__}")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"timeout: expected a finite number of seconds > 0, got {value}")
    return float(value)


def _digest(arr: npt.NDArray[Any]) -> int:
    """A 63-bit digest of a row array's bytes (fp32 temperatures compare by their bits)."""
    return int.from_bytes(hashlib.blake2b(np.ascontiguousarray(arr).tobytes(), digest_size=8).digest(), "little") >> 1


def _tau_bits(tau: float) -> int:
    return int(np.array(tau, dtype=np.float32).view(np.uint32))


# ------------------------------------------------------------------------------------------ collectives


def _group(group: Any) -> Any:
    """The process group object (``None``: the default group)."""
    return group if group is not None else dist.group.WORLD


def _all_gather(
    inp: torch.Tensor, world: int, group: Any, timeout_s: float, what: str, *, host_wait: bool
) -> torch.Tensor:
    """One ``all_gather`` of a 1-D tensor into [W, n], rank-major (``all_gather_single`` where torch has it).

    The output is allocated flat, the concatenation form, which NCCL and gloo both accept (gloo rejects [W, n]).
    The host waits for it at most ``timeout_s`` seconds where it waits at all: with ``host_wait`` and for CPU
    tensors (gloo); a CUDA gather without ``host_wait`` is stream-ordered, as a CUDA graph needs. A failure or a
    timeout raises :class:`CollectiveError`.
    """
    out = torch.empty(world * inp.numel(), dtype=inp.dtype, device=inp.device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    if not host_wait and inp.device.type != "cpu":
        gather(out, inp, group=group)
        return out.view(world, inp.numel())
    t0 = time.monotonic()
    cause: Exception | None = None
    try:
        work = gather(out, inp, group=group, async_op=True)
        done = work.wait(timeout=timedelta(seconds=timeout_s))
    except RuntimeError as e:  # gloo: "Operation timed out!", or the peer's connection closed
        cause, done = e, False
    if done is False:
        elapsed = time.monotonic() - t0
        why = "did not complete within" if elapsed >= timeout_s else "failed before"
        raise CollectiveError(
            f"pp3.pair: rank {dist.get_rank(group)} of {world}: the all_gather of {what} {why} the timeout of "
            f"{timeout_s:g} s (after {elapsed:.1f} s): another rank died, stalled or is in another call; this "
            f"process group may be unusable now (set the timeout with timeout=)"
            + ("" if cause is None else f" [{type(cause).__name__}: {cause}]")
        ) from cause
    return out.view(world, inp.numel())


def _collective_device(group: Any, logits: Any) -> torch.device:
    """Where this rank's setup descriptor is gathered: its shard's device, where that is a CPU or CUDA device; else (a
    caller error: no tensor, or one on meta) the backend's (CUDA for NCCL, else the CPU), so that a rank with a bad
    shard still joins the gather that reports its error to every rank."""
    if isinstance(logits, torch.Tensor) and logits.device.type in ("cpu", "cuda"):
        return logits.device
    if "nccl" in str(dist.get_backend(group)):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# ------------------------------------------------------------------------------------------ setup check


@dataclasses.dataclass(frozen=True)
class _Call:
    """One rank's arguments of a call, checked and normalised (``pp3.kernels.checks``)."""

    shard: torch.Tensor  # [B, V_r]
    offset: int
    vocab_size: int
    tile: int
    merge_local: bool
    keys: buffers.RowKeys
    tau: float
    launch: LaunchConfig


def _check_call(
    logits: Any,
    vocab_offset: Any,
    vocab_size: Any,
    keys: tuple[Any, Any, Any, Any],
    tau: Any,
    tile: Any,
    merge_local: Any,
    launch: Any,
) -> _Call:
    """Every argument of this rank's call (``check_shards`` passes ``DEFAULT_LAUNCH``): the setup check runs it inside
    the gather of the descriptors, so that an error on one rank reaches every rank."""
    x, offset, vsize, t = _check_layout(logits, vocab_offset, vocab_size, tile)
    if not isinstance(merge_local, bool):
        raise TypeError(f"merge_local: expected a bool, got {type(merge_local).__name__}")
    temp, seed, rnd, pos = (0 if k is None else k for k in keys)  # a key not given (check_shards) is not compared
    row_keys = checks.row_keys(temp, seed, rnd, pos, x.shape[0], x.device)
    return _Call(x, offset, vsize, t, merge_local, row_keys, checks.tau(tau), checks.launch_config(launch))


def _describe(kind: int, call: _Call | None, given: tuple[bool, ...], error: Exception | None) -> list[int]:
    """This rank's setup descriptor: its checked call, or its own caller error (reported through the gather, not
    raised: a rank that raised alone would leave the others waiting)."""
    d = [_NOT_GIVEN] * _D_LEN
    d[_D_MAGIC], d[_D_KIND], d[_D_ERROR] = _MAGIC, kind, _ERR_NONE
    if call is not None:
        x = call.shard
        d[_D_OFFSET], d[_D_SIZE], d[_D_ROWS], d[_D_VOCAB] = call.offset, x.shape[1], x.shape[0], call.vocab_size
        d[_D_TILE], d[_D_TAU], d[_D_MERGE] = call.tile, _tau_bits(call.tau), int(call.merge_local)
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
    kind = _differs(table, _D_KIND, "the call", lambda v: _KIND_NAMES.get(v, f"call {v}"))
    if kind is not None:
        return [kind]
    errors = [f"rank {r}: {_message_text(table[r])}" for r in range(world) if table[r, _D_ERROR] != _ERR_NONE]
    if errors:
        return errors
    out = [
        p
        for p in (
            _differs(table, _D_ROWS, "the batch size", lambda v: f"B={v}"),
            _differs(table, _D_VOCAB, "vocab_size", lambda v: f"vocab_size={v}"),
            _differs(table, _D_TILE, "tile", lambda v: f"tile={v}"),
            _differs(table, _D_MERGE, "merge_local", lambda v: f"merge_local={bool(v)}"),
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
    # Launch 2 merges at most MAX_TILES tiles per row (the same numbers on every rank).
    if not out:
        tile = int(table[0, _D_TILE])
        tiles = 1 if table[0, _D_MERGE] else max(-(-int(s) // tile) for s in table[:, _D_SIZE])
        if world * tiles > MAX_TILES:
            out.append(
                f"tile: {world} ranks x {tiles} tiles = {world * tiles} tiles per row, more than the {MAX_TILES} "
                "that launch 2 merges; use a larger tile or merge_local=True"
            )
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
    merge_local: bool = False,
    timeout: float | None = None,
) -> ShardPlan:
    """Check the shard setup of every rank of ``group`` (collective: every rank must call it); return its plan.

    One ``all_gather`` of a 46-word descriptor per rank and a host read, waiting at most ``timeout`` seconds
    (``DEFAULT_TIMEOUT_S``; then :class:`CollectiveError`). Raises :class:`ShardError` with the same text on every
    rank if the shards overlap, leave a gap, need more tiles than launch 2 merges, or the ranks disagree on the
    batch size, ``vocab_size``, ``tile``, ``merge_local``, ``tau`` or (those given) the per-row keys; a caller
    error on any rank is raised on every rank (``TypeError`` on the rank that made a type error, ``ShardError``
    otherwise). The returned plan becomes the group's current plan (replacing the previous one; a failed check
    leaves none): pass it as ``propose_vocab_parallel(..., plan=plan)`` with the same arguments (the per-row keys
    may change) to skip the check; ``timeout`` is then the calls' default.
    """
    plan, _ = _check_setup(
        _KIND_SETUP,
        logits_shard,
        vocab_offset,
        vocab_size,
        (target_temperature, seed, round, position),
        tau,
        group,
        tile,
        merge_local,
        DEFAULT_LAUNCH,
        timeout,
    )
    return plan


def _check_setup(
    kind: int,
    logits_shard: Any,
    vocab_offset: Any,
    vocab_size: Any,
    keys: tuple[Any, Any, Any, Any],
    tau: Any,
    group: Any,
    tile: Any,
    merge_local: Any,
    launch: Any,
    timeout: Any,
) -> tuple[ShardPlan, _Call]:
    """``check_shards`` (``kind`` says which call runs it), also returning this rank's checked call."""
    call: _Call | None = None
    own_error: Exception | None = None
    timeout_s = DEFAULT_TIMEOUT_S
    try:  # every caller error is reported through the gather, on every rank
        timeout_s = _timeout(timeout)
        call = _check_call(logits_shard, vocab_offset, vocab_size, keys, tau, tile, merge_local, launch)
    except Exception as e:
        own_error = e
    desc = _describe(kind, call, tuple(k is not None for k in keys), own_error)
    pg = _group(group)
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    generation = 0
    if kind == _KIND_SETUP:  # a new setup replaces the group's plan, whatever its outcome
        generation = _SETUPS[pg] = _SETUPS.get(pg, 0) + 1
        _CURRENT.pop(pg, None)
    mine = torch.tensor(desc, dtype=torch.int64).to(_collective_device(group, logits_shard))
    gathered = _all_gather(mine, world, group, timeout_s, "the setup descriptors", host_wait=True)
    table: npt.NDArray[np.int64] = gathered.cpu().numpy()
    problems = _problems(table)
    if problems or call is None:
        text = f"pp3.pair.check_shards: inconsistent setup across {world} ranks: " + "; ".join(problems)
        if isinstance(own_error, TypeError):
            raise TypeError(text) from own_error  # its own type on the rank that made a type error (SPEC §2)
        raise ShardError(text) from own_error
    plan = ShardPlan(
        rank=rank,
        offsets=tuple(int(v) for v in table[:, _D_OFFSET]),
        sizes=tuple(int(v) for v in table[:, _D_SIZE]),
        rows=int(table[0, _D_ROWS]),
        vocab_size=int(table[0, _D_VOCAB]),
        tile=int(table[0, _D_TILE]),
        merge_local=bool(table[0, _D_MERGE]),
        tau=call.tau,
        timeout_s=timeout_s,
        generation=generation,
        group=pg,
    )
    if kind == _KIND_SETUP:
        _CURRENT[pg] = plan
    return plan, call


def _check_plan(plan: Any, call: _Call, group: Any) -> ShardPlan:
    """``plan`` is the group's current plan and this rank's call matches it (host only, no communication)."""
    if not isinstance(plan, ShardPlan):
        raise TypeError(f"plan: expected the ShardPlan that check_shards returned, got {type(plan).__name__}")
    pg = _group(group)
    if plan.group is not pg:
        raise ValueError("plan: made by check_shards on another process group than this call's group")
    current = _CURRENT.get(pg)
    if current != plan:
        now = (
            f"check_shards #{current.generation} replaced it"
            if current is not None
            else f"the latest check_shards (#{_SETUPS.get(pg, 0)}) on this group failed, so it has no current plan"
        )
        raise ValueError(
            f"plan: stale plan: it comes from check_shards #{plan.generation} on this process group, but {now}; "
            "pass the plan that the latest check_shards returned"
        )
    x = call.shard
    got = {
        "vocab_offset": call.offset,
        "the shard's size V_r": x.shape[1],
        "the batch size": x.shape[0],
        "vocab_size": call.vocab_size,
        "tile": call.tile,
        "merge_local": call.merge_local,
        "tau": call.tau,
    }
    want = {
        "vocab_offset": plan.offsets[plan.rank],
        "the shard's size V_r": plan.sizes[plan.rank],
        "the batch size": plan.rows,
        "vocab_size": plan.vocab_size,
        "tile": plan.tile,
        "merge_local": plan.merge_local,
        "tau": plan.tau,
    }
    bad = [f"{k} = {got[k]} (the plan has {want[k]})" for k in got if got[k] != want[k]]
    if bad:
        raise ValueError(
            f"plan: rank {plan.rank}'s call does not match the plan of check_shards #{plan.generation}: "
            + "; ".join(bad)
            + "; pass the arguments given to check_shards, or call check_shards again on every rank"
        )
    return plan


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
    x = checks.logits("logits_shard", logits_shard, allow_empty=True)
    t = checks.tile(tile, max(x.shape[1], 1))
    offset = checks.integer("vocab_offset", vocab_offset, 0, MAX_VOCAB - x.shape[1])
    n_tiles = -(-x.shape[1] // t)
    if n_tiles > checks.integer("max_tiles", max_tiles, 1, MAX_VOCAB):
        raise ValueError(f"max_tiles: the shard has {n_tiles} tiles of {t}, more than max_tiles = {max_tiles}")
    return _shard_message(x, offset, max_tiles, t, merge_local, checks.launch_config(launch))


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
        launchers.tiles(x, vocab_offset, tile, out, 0, launch)
        return msg
    # An explicit buffer: launch 2 never merges these n_tiles tiles (topk does), so its tile cap does not apply.
    local = buffers.new_candidates(b, n_tiles, x.device)
    launchers.tiles(x, vocab_offset, tile, local, 0, launch)
    # A merged tile is a tile: its first K keys and the OR of its flags. Keys are uint64 held as int64: flipping
    # the sign bit makes the signed order the unsigned one, and topk on them is exact (the keys are unique).
    flipped = local.keys.view(b, n_tiles * K) ^ _SIGN64
    out.keys.view(b, K).copy_(torch.topk(flipped, K, dim=1).values ^ _SIGN64)
    f = local.flags
    out.flags.view(b).copy_((f & 1).amax(dim=1) | (f & 2).amax(dim=1) | (f & 4).amax(dim=1))
    return msg


def merge_messages(
    gathered: torch.Tensor, rows: int, tiles: int, order: Sequence[int] | None = None
) -> Candidates:
    """The gathered messages [W, n] (rank-major) as one row-major ``Candidates`` of ``W·tiles`` tiles (two copies),
    the ranks taken in ``order`` (``ShardPlan.id_order``: their shards' ID order; ``None``: rank order)."""
    world = gathered.shape[0]
    if gathered.dim() != 2 or gathered.shape[1] != message_words(rows, tiles):
        raise ValueError(f"gathered: expected [W, {message_words(rows, tiles)}], got {tuple(gathered.shape)}")
    if order is not None and tuple(order) != tuple(range(world)):
        if sorted(order) != list(range(world)):
            raise ValueError(f"order: expected a permutation of the {world} ranks, got {tuple(order)}")
        gathered = torch.stack([gathered[r] for r in order])  # one device copy per rank, no index tensor to upload
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
    merge_local: bool = False,
    plan: ShardPlan | None = None,
    timeout: float | None = None,
    launch: LaunchConfig = DEFAULT_LAUNCH,
) -> Proposal:
    """One position of the selector with the vocabulary split over the ranks of ``group`` (collective).

    ``logits_shard`` [B, V_r] holds global IDs ``[vocab_offset, vocab_offset + V_r)`` of ``vocab_size``; the
    per-row keys and ``tau`` are those of ``pp3.kernels.propose`` and must be the same on every rank. Returns
    the same ``Proposal`` on every rank, equal bit for bit to ``pp3.reference.propose`` on the whole rows.

    ``plan=None`` runs the setup check (``check_shards``'s, one more collective) first. ``plan=`` the
    ``ShardPlan`` that the group's latest ``check_shards`` returned trusts it instead: the call raises
    ``ValueError`` before any work if the plan is stale or this rank's shard, batch size, ``vocab_size``,
    ``tile``, ``merge_local`` or ``tau`` differ from the plan's. ``timeout`` (seconds; default the plan's, else
    ``DEFAULT_TIMEOUT_S``) bounds every host wait for a collective (:class:`CollectiveError`).
    """
    keys = (target_temperature, seed, round, position)
    if plan is None:  # every argument is checked inside the setup's gather: an error on one rank reaches them all
        plan, call = _check_setup(
            _KIND_CALL, logits_shard, vocab_offset, vocab_size, keys, tau, group, tile, merge_local, launch, timeout
        )
        timeout_s = plan.timeout_s
    else:  # no collective to agree through: this rank raises alone, before any work, naming itself
        try:
            call = _check_call(logits_shard, vocab_offset, vocab_size, keys, tau, tile, merge_local, launch)
            own_timeout = None if timeout is None else _timeout(timeout)
        except (TypeError, ValueError) as e:
            raise type(e)(f"pp3.pair: rank {dist.get_rank(group)}: {e}") from e
        plan = _check_plan(plan, call, group)
        timeout_s = plan.timeout_s if own_timeout is None else own_timeout
    x, b, cfg = call.shard, call.shard.shape[0], call.launch
    msg = _shard_message(x, call.offset, plan.max_tiles, call.tile, call.merge_local, cfg)
    gathered = _all_gather(msg, plan.world, group, timeout_s, "the candidates", host_wait=False)  # the one collective
    cands = merge_messages(gathered, b, plan.tiles, plan.id_order)
    return launchers.finalize(cands, call.keys, call.tau, cfg, buffers.new_proposal(b, x.device))
