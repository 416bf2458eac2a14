"""SPEC.md §2 and §11.2 caller-error checks on the torch side: the one copy every launcher uses (selector, verifier,
pair, drafter). Imports torch but not triton.

Every check here reads shapes, dtypes and devices only, never device memory, so a checked call can be captured in a
CUDA graph. A public launcher checks and normalises each argument once, then hands the results to private launch
functions that trust them.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Any

import numpy as np
import torch

from pp3.kernels import config
from pp3.reference import _args as host
from pp3.reference._constants import MAX_VOCAB, K

KIND = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}  # _common.KIND_*
RAW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}  # the bits a kernel loads


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


def logits(name: str, x: Any, *, dims: int = 2, allow_empty: bool = False) -> torch.Tensor:
    """A [B, V] (``dims`` = 2) or [B, D+1, V] (3) fp32/fp16/bf16 tensor with B >= 1, D >= 1, V >= 1 (V >= 0 with
    ``allow_empty``: a rank's empty shard) and V <= 2^31 - 1; contiguous along V."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in KIND:
        raise TypeError(f"{name}: expected float32, float16 or bfloat16, got {x.dtype}")
    if x.layout != torch.strided:
        raise TypeError(f"{name}: expected a dense (strided) tensor, got layout {x.layout}")
    if not (x.device.type == "cuda" or (x.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1")):
        raise ValueError(
            f"{name}: on {x.device}; the Triton kernels run on a CUDA GPU, or on the CPU through Triton's interpreter "
            "with TRITON_INTERPRET=1 set before triton is imported"
        )
    shape = "[B, V]" if dims == 2 else "[B, D+1, V]"
    if x.dim() != dims:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(x.shape)}")
    least = (1, 0 if allow_empty else 1) if dims == 2 else (1, 2, 1)
    if any(n < m for n, m in zip(x.shape, least, strict=True)):
        raise ValueError(f"{name}: expected shape {shape} with sizes >= {least}, got shape {tuple(x.shape)}")
    if x.shape[-1] > MAX_VOCAB:
        raise ValueError(f"{name}: V = {x.shape[-1]} exceeds the maximum vocabulary 2^31 - 1")
    return x if x.shape[-1] == 0 or x.stride(-1) == 1 else x.contiguous()


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


def _exact(name: str, t: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device, of: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name}: expected {dtype}, got {t.dtype}")
    if tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: on {t.device}, but the {of} are on {device}")


def tensor(name: str, t: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """A tensor of exactly ``dtype`` and ``shape`` on ``device``, made contiguous."""
    _exact(name, t, dtype, shape, device, "logits")
    return t.contiguous()  # type: ignore[no-any-return]


def outputs(cls: Any, out: Any, spec: dict[str, tuple[torch.dtype, tuple[int, ...]]], device: torch.device) -> Any:
    """A launcher's outputs: the caller-owned ``out`` (an instance of the dataclass ``cls``, every field exactly as
    ``spec`` says, on ``device`` and contiguous: the kernels write it in place, so it cannot be copied into shape;
    buffers that overlap each other are the caller's error), or new tensors when ``out`` is None."""
    if out is None:
        return cls(**{f: torch.empty(shape, dtype=dtype, device=device) for f, (dtype, shape) in spec.items()})
    if not isinstance(out, cls):
        raise TypeError(f"out: expected a pp3.kernels.{cls.__name__} of caller-owned buffers, got {type(out).__name__}")
    for field, (dtype, shape) in spec.items():
        t = getattr(out, field)
        _exact(f"out.{field}", t, dtype, shape, device, "inputs")
        if not t.is_contiguous():
            raise ValueError(f"out.{field}: must be contiguous (the kernels write it in place)")
    return out


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
