"""SPEC.md §2 and §11.2 caller-error checks on the torch side: the one copy every entry point uses (selector, verifier,
pair, drafter, adapters). Imports torch but not triton.

Every check here reads shapes, dtypes, devices and addresses only, never device memory, so a checked call can be
captured in a CUDA graph. A public entry point checks and normalises each argument once here, then hands the results to
``pp3.kernels.launch``, whose launchers trust them. A check raises ``TypeError`` (a wrong type or dtype) or
``ValueError`` (a wrong shape, device or value) naming the argument, before any launch.
"""

from __future__ import annotations

import functools
import importlib.metadata
import numbers
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from pp3.kernels import buffers, config
from pp3.kernels.buffers import KIND, Candidates, Proposal, RowKeys, Verdict
from pp3.reference import _args as host
from pp3.reference._constants import MAX_VOCAB, K


def logits(name: str, x: Any, *, dims: int = 2, allow_empty: bool = False) -> torch.Tensor:
    """A [B, V] (``dims`` = 2) or [B, D+1, V] (3) fp32/fp16/bf16 tensor with B >= 1, D >= 1, V >= 1 (V >= 0 with
    ``allow_empty``: a rank's empty shard) and V <= 2^31 - 1; contiguous along V."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in KIND:
        raise TypeError(f"{name}: expected float32, float16 or bfloat16, got {x.dtype}")
    if x.layout != torch.strided:
        raise TypeError(f"{name}: expected a dense (strided) tensor, got layout {x.layout}")
    runs_on(name, x.device)
    shape = "[B, V]" if dims == 2 else "[B, D+1, V]"
    if x.dim() != dims:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(x.shape)}")
    least = (1, 0 if allow_empty else 1) if dims == 2 else (1, 2, 1)
    if any(n < m for n, m in zip(x.shape, least, strict=True)):
        raise ValueError(f"{name}: expected shape {shape} with sizes >= {least}, got shape {tuple(x.shape)}")
    if x.shape[-1] > MAX_VOCAB:
        raise ValueError(f"{name}: V = {x.shape[-1]} exceeds the maximum vocabulary 2^31 - 1")
    return x if x.shape[-1] == 0 or x.stride(-1) == 1 else x.contiguous()


def runs_on(name: str, device: torch.device) -> None:
    """``device`` is one the kernels run on: a CUDA GPU, or the CPU under Triton's interpreter."""
    if not (device.type == "cuda" or (device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")):
        raise ValueError(
            f"{name}: on {device}; the Triton kernels run on a CUDA GPU, or on the CPU through Triton's interpreter "
            "with TRITON_INTERPRET=1 set before triton is imported"
        )
    if device.type == "cpu":
        _interpreter_runs()


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("+")[0].split(".")[:2] if p.isdigit())


@functools.cache
def _interpreter_runs() -> None:
    """Triton 3.6's interpreter fails on a loop with a run-time bound under NumPy >= 2.4 (triton-lang/triton#9171,
    fixed in 3.7): refuse that pair in one line, before any launch, instead of a failure inside one."""
    triton_v, numpy_v = importlib.metadata.version("triton"), importlib.metadata.version("numpy")
    if _version(triton_v) < (3, 7) and _version(numpy_v) >= (2, 4):
        raise RuntimeError(
            f"Triton {triton_v}'s interpreter (TRITON_INTERPRET=1) fails with NumPy {numpy_v} "
            "(triton-lang/triton#9171): use numpy<2.4, or Triton >= 3.7"
        )


def integer(name: str, value: Any, low: int, high: int) -> int:
    """A Python (or NumPy) integer in ``low .. high``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if not low <= int(value) <= high:
        raise ValueError(f"{name}: expected {low} <= {name} <= {high}, got {int(value)}")
    return int(value)


def tile(value: Any, v: int) -> int:
    """The selector's tile: ``None`` (``config.auto_tile``) or a power of two in K .. 2^16."""
    if value is None:
        return config.auto_tile(v)
    t = integer("tile", value, K, 1 << 16)
    if t & (t - 1):
        raise ValueError(f"tile: must be a power of two >= {K}, got {t}")
    return t


def tiles_fit(n_tiles: int, what: str) -> None:
    """Launch 2 merges at most ``config.MAX_TILES`` tiles per row."""
    if n_tiles > config.MAX_TILES:
        raise ValueError(
            f"tile: {what} gives {n_tiles} tiles per row, more than the {config.MAX_TILES} launch 2 merges"
        )


def dense(name: str, t: Any, dtypes: tuple[torch.dtype, ...] | None = None) -> torch.Tensor:
    """``t`` as a dense (strided) tensor, of one of ``dtypes`` when given (TypeError naming ``name`` otherwise)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError(f"{name}: expected {' or '.join(str(d) for d in dtypes)}, got {t.dtype}")
    if t.layout != torch.strided:
        raise TypeError(f"{name}: expected a dense (strided) tensor, got layout {t.layout}")
    return t


def shaped(name: str, t: torch.Tensor, shape: tuple[int, ...], dims: str = "") -> None:
    """``t`` has exactly ``shape`` (``dims`` names its dimensions in the message)."""
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {dims + ' = ' if dims else ''}{shape}, got {tuple(t.shape)}")


def on(name: str, t: torch.Tensor, device: torch.device, of: str) -> None:
    """``t`` is on ``device``, where ``of`` ("the logits are", "ids is") already is."""
    if t.device != device:
        raise ValueError(f"{name}: on {t.device}, but {of} on {device}")


def _exact(name: str, t: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device, of: str) -> None:
    shaped(name, dense(name, t, (dtype,)), shape)
    on(name, t, device, f"the {of} are")


def tensor(name: str, t: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """A tensor of exactly ``dtype`` and ``shape`` on ``device``, made contiguous."""
    _exact(name, t, dtype, shape, device, "logits")
    return t.contiguous()  # type: ignore[no-any-return]


Named = Sequence[tuple[str, torch.Tensor]]  # (argument name, tensor)


def _byte_range(t: torch.Tensor) -> tuple[int | torch.SymInt, int | torch.SymInt]:
    """The bytes ``lo .. hi - 1`` of its storage that ``t`` can reach: from its lowest to its highest element."""
    lo = hi = t.storage_offset()
    for n, s in zip(t.shape, t.stride(), strict=True):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo * t.element_size(), (hi + 1) * t.element_size()


def _span(t: torch.Tensor) -> tuple[Any, int | torch.SymInt, int | torch.SymInt]:
    """Where ``t``'s bytes lie: an address space and the range ``lo .. hi - 1`` in it. A tensor with memory (its
    storage on a device) is placed by address (the storage's data pointer plus ``_byte_range``), so two tensors over
    one buffer overlap whatever storage objects hold them (views, ``torch.from_numpy`` of one array twice, DLPack). A
    fake or meta tensor has no memory (its storage is on meta): it is placed in its storage object, so views of one
    fake storage overlap as the real ones would."""
    storage = t.untyped_storage()
    lo, hi = _byte_range(t)
    if storage.device.type == "meta":
        return ("storage", storage._cdata), lo, hi
    base = storage.data_ptr()
    return ("memory", t.device), base + lo, base + hi


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    (where_a, alo, ahi), (where_b, blo, bhi) = _span(a), _span(b)
    return bool(where_a == where_b and alo < bhi and blo < ahi)


def tensors(named: Sequence[tuple[str, Any]]) -> Named:
    """The arguments of ``named`` that are tensors, as the caller passed them: what an output may not overlap (a
    check's copy of an argument is new memory, so the argument itself is what counts)."""
    return [(name, t) for name, t in named if isinstance(t, torch.Tensor)]


def disjoint(writes: Named, reads: Named) -> None:
    """No tensor of ``writes`` (what a launch writes) shares memory with another of them or with one of ``reads``
    (the caller's input tensors; those may share memory with each other): the one memory check of every ``out=``
    path. Two tensors share memory when their byte ranges (from the lowest to the highest byte their shapes and
    strides reach, at the storage's address: ``_span``) intersect, so a strided view counts with its whole range,
    and two storages over one buffer are one memory. Reads no device memory: fake and meta tensors are checked by
    their storage objects."""
    for i, (name, t) in enumerate(writes):
        for other, u in [*writes[:i], *reads]:
            if _overlap(t, u):
                raise ValueError(f"{name}: shares memory with {other} (an output may share none with another "
                                 "output or an input)")


def outputs(cls: Any, out: Any, spec: buffers.Spec, device: torch.device, reads: Named) -> Any:
    """A launcher's outputs: the caller-owned ``out`` (an instance of the dataclass ``cls``, every field exactly as
    ``spec`` says, on ``device``, contiguous, and sharing no memory with another field or with ``reads``, the
    launch's inputs: the kernels write it in place, so it cannot be copied into shape), or new tensors when ``out``
    is None."""
    if out is None:
        return buffers.new(cls, spec, device)
    if not isinstance(out, cls):
        raise TypeError(f"out: expected a pp3.kernels.{cls.__name__} of caller-owned buffers, got {type(out).__name__}")
    for field, (dtype, shape) in spec.items():
        t = getattr(out, field)
        _exact(f"out.{field}", t, dtype, shape, device, "inputs")
        if not t.is_contiguous():
            raise ValueError(f"out.{field}: must be contiguous (the kernels write it in place)")
    disjoint([(f"out.{field}", getattr(out, field)) for field in spec], reads)
    return out


def proposal_out(out: Any, b: int, device: torch.device, reads: Named) -> Proposal:
    """The selector's outputs: the caller's ``out`` (a ``Proposal``), checked against the launch's inputs ``reads``,
    or new buffers (``None``)."""
    result: Proposal = outputs(Proposal, out, buffers.proposal_spec(b), device, reads)
    return result


def verdict_out(out: Any, b: int, d1: int, device: torch.device, reads: Named) -> Verdict:
    """The verifier's outputs: the caller's ``out`` (a ``Verdict``), checked against the launch's inputs ``reads``,
    or new buffers (``None``)."""
    result: Verdict = outputs(Verdict, out, buffers.verdict_spec(b, d1), device, reads)
    return result


def _row_tensor(name: str, value: torch.Tensor, b: int, device: torch.device) -> torch.Tensor:
    """A per-row tensor argument of shape [] (broadcast) or [B], on the logits' device."""
    if value.dim() == 0:
        value = value.reshape(1).expand(b)
    if tuple(value.shape) != (b,):
        raise ValueError(f"{name}: expected shape ({b},) to match logits' {b} rows, got {tuple(value.shape)}")
    if value.device != device:
        raise ValueError(f"{name}: on {value.device}, but logits are on {device}")
    return value


def u64_rows(name: str, value: Any, b: int, device: torch.device) -> torch.Tensor:
    """A per-row uint64 argument as an int64 tensor of the same bits: a tensor [] or [B], or an int / int sequence
    (checked on the host, then one host-to-device copy)."""
    if isinstance(value, torch.Tensor):
        if value.dtype not in (torch.int64, torch.uint64):
            raise TypeError(f"{name}: expected an int64 or uint64 tensor (uint64 bits), got {value.dtype}")
        return _row_tensor(name, value, b, device).view(torch.int64).contiguous()
    arr = host.as_uint64_rows(name, value, b)
    return torch.from_numpy(arr.view(np.int64).copy()).to(device)


def temperature_rows(value: Any, b: int, device: torch.device) -> torch.Tensor:
    """Per-row target temperatures as fp32 (SPEC.md §2: other float types are rounded to fp32 first)."""
    name = "target_temperature"
    if isinstance(value, torch.Tensor):
        if not value.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating-point tensor, got {value.dtype}")
        return _row_tensor(name, value, b, device).to(torch.float32).contiguous()
    return torch.from_numpy(host.as_temperature_rows(name, value, b)).to(device)


def row_keys(target_temperature: Any, seed: Any, round: Any, position: Any, b: int, device: torch.device) -> RowKeys:
    """Every per-row key of a call, checked and on ``device`` (§2, §11.2)."""
    return RowKeys(
        temperature=temperature_rows(target_temperature, b, device),
        seed=u64_rows("seed", seed, b, device),
        round=u64_rows("round", round, b, device),
        position=u64_rows("position", position, b, device),
    )


def tau(value: Any) -> float:
    """§2: the drafter temperature, rounded to fp32, finite and > 0."""
    return float(host.as_tau(value))


def launch_config(value: Any) -> config.LaunchConfig:
    if not isinstance(value, config.LaunchConfig):
        raise TypeError(f"launch: expected a pp3.kernels.config.LaunchConfig, got {type(value).__name__}")
    return value


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def shards(xs: Sequence[Any], tile_value: Any, name: str = "shards") -> tuple[list[torch.Tensor], int]:
    """Checked shards of one batch (same rows, same device, in ID order) and the tile, which must fit launch 2.
    Errors name ``name[i]`` (``name`` alone for a single unsharded ``logits``)."""
    if not isinstance(xs, Sequence):  # a tensor too: it is not a list of shards (and its truth value is ambiguous)
        raise TypeError(f"{name}: expected a sequence of [B, V_r] tensors (a list of shards), got {type(xs).__name__}")
    if not xs:
        raise ValueError(f"{name}: need at least one shard")
    out = [logits(name if name == "logits" else f"{name}[{i}]", s) for i, s in enumerate(xs)]
    b = out[0].shape[0]
    for i, s in enumerate(out):
        if s.shape[0] != b or s.device != out[0].device:
            raise ValueError(f"shards[{i}]: expected {b} rows on {out[0].device}, got {tuple(s.shape)} on {s.device}")
    if sum(s.shape[1] for s in out) > MAX_VOCAB:
        raise ValueError("shards: the shards together exceed the maximum vocabulary 2^31 - 1")
    t = tile(tile_value, max(s.shape[1] for s in out))
    tiles_fit(sum(_cdiv(s.shape[1], t) for s in out), f"tile {t} over {len(out)} shard(s)")
    return out, t


def verify_tile(value: Any, v: int, rows: int) -> int:
    """The verifier's tile: ``None`` (VERIFY_TILE_SMALL for calls of at most VERIFY_SMALL_ENTRIES target entries over
    ``rows`` target rows, else VERIFY_TILE; doubled until a row has at most MAX_VERIFY_TILES tiles) or a power of two
    >= 2; clipped to the padded row."""
    if value is None:
        t = config.VERIFY_TILE_SMALL if rows * v <= config.VERIFY_SMALL_ENTRIES else config.VERIFY_TILE
        while _cdiv(v, t) > config.MAX_VERIFY_TILES:
            t *= 2
    else:
        t = integer("tile", value, 2, 1 << 16)
        if t & (t - 1):
            raise ValueError(f"tile: expected a power of two >= 2, got {value!r}")
        if _cdiv(v, t) > config.MAX_VERIFY_TILES:
            raise ValueError(
                f"tile: {t} splits V = {v} into more than {config.MAX_VERIFY_TILES} tiles; use a larger tile"
            )
    return min(t, _next_power_of_2(v))


def candidates_out(
    out: Any, b: int, n_tiles: int, tile_base: Any, device: torch.device, what: str, reads: Named
) -> tuple[Candidates, int]:
    """Where launch 1 writes the ``n_tiles`` tiles of a [``b``, V] shard (``what``: its tiling, for the message): the
    caller's ``out`` buffers from tile ``tile_base`` on, checked (keys and flags sharing no memory with each other or
    with ``reads``, the launch's inputs), or new buffers (``None``; ``tile_base`` must then be 0). Returns them and
    the base."""
    if out is None:
        tiles_fit(n_tiles, what)
        if tile_base != 0:
            raise ValueError("tile_base: needs out")
        return buffers.new_candidates(b, n_tiles, device), 0
    if not isinstance(out, Candidates):
        raise TypeError(f"out: expected a pp3.kernels.Candidates, got {type(out).__name__}")
    total = out.flags.shape[1] if out.flags.dim() == 2 else 0
    if out.keys.shape != (b, total, K) or out.flags.shape != (b, total):
        raise ValueError(f"out: expected keys [{b}, T, {K}] and flags [{b}, T], got {tuple(out.keys.shape)} and "
                         f"{tuple(out.flags.shape)}")
    for field in ("keys", "flags"):
        if getattr(out, field).device != device:
            raise ValueError(f"out.{field}: on {getattr(out, field).device}, but the inputs are on {device}")
    if out.keys.dtype != torch.int64 or out.flags.dtype != torch.int32:
        raise TypeError(f"out: expected int64 keys and int32 flags, got {out.keys.dtype} and {out.flags.dtype}")
    if not (out.keys.is_contiguous() and out.flags.is_contiguous()):
        raise ValueError("out: keys and flags must be contiguous (the kernel indexes them densely)")
    disjoint([("out.keys", out.keys), ("out.flags", out.flags)], reads)
    base = integer("tile_base", tile_base, 0, max(0, total - n_tiles))
    if base + n_tiles > total:
        raise ValueError(f"tile_base: {base} + {n_tiles} tiles do not fit the {total} tiles of out")
    return out, base


def candidates(cands: Any, vocab_size: Any) -> tuple[Candidates, int]:
    """Candidates a caller hands ``finalize`` and the vocabulary size: shapes, dtypes, devices and layout, and what
    ``tile_candidates`` recorded in ``cands.spans`` (if anything): every tile written, each starting at the ID where
    the tile before it ends, the first at 0 and the last ending at V."""
    if not isinstance(cands, Candidates):
        raise TypeError(f"cands: expected a pp3.kernels.Candidates, got {type(cands).__name__}")
    keys, flags = cands.keys, cands.flags
    for field, t in (("keys", keys), ("flags", flags)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"cands.{field}: expected a torch.Tensor, got {type(t).__name__}")
    if keys.dim() != 3 or keys.shape[2] != K or flags.shape != keys.shape[:2]:
        raise ValueError(f"cands: expected keys [B, T, {K}] and flags [B, T], got {tuple(keys.shape)} and "
                         f"{tuple(flags.shape)}")
    if keys.dtype != torch.int64 or flags.dtype != torch.int32:
        raise TypeError(f"cands: expected int64 keys and int32 flags, got {keys.dtype} and {flags.dtype}")
    runs_on("cands.keys", keys.device)
    if flags.device != keys.device:
        raise ValueError(f"cands.flags: on {flags.device}, but cands.keys are on {keys.device}")
    if not (keys.is_contiguous() and flags.is_contiguous()):
        raise ValueError("cands: keys and flags must be contiguous (the kernel indexes them densely)")
    b, n_tiles = flags.shape
    if b < 1 or n_tiles < 1:
        raise ValueError(f"cands: need B >= 1 rows and T >= 1 tiles, got keys of shape {tuple(keys.shape)}")
    tiles_fit(n_tiles, "cands")
    v = integer("vocab_size", vocab_size, 1, MAX_VOCAB)
    if cands.spans:
        ids = 0
        for tile in range(n_tiles):
            if tile not in cands.spans:
                last = tile
                while last + 1 < n_tiles and last + 1 not in cands.spans:
                    last += 1
                raise ValueError(f"cands: tiles {tile} .. {last} were never written by tile_candidates")
            lo, hi = cands.spans[tile]
            if lo != ids:
                raise ValueError(f"cands: tile {tile} starts at ID {lo}; the tiles before it end at {ids}")
            ids = hi
        if ids != v:
            raise ValueError(f"cands: the tiles cover IDs 0 .. {ids - 1}, not the vocabulary 0 .. {v - 1}")
    return cands, v
