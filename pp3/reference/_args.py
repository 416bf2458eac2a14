"""SPEC.md §2 and §11.2: validation of arguments, NumPy side (caller errors raise; row data never does)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference._constants import MAX_VOCAB

_U64_MAX = (1 << 64) - 1


def as_logits(name: str, value: Any, *, min_shape: tuple[int, ...], dims: str) -> npt.NDArray[np.float32]:
    """§2, §2.1: fp32 or fp16 logits of shape ``dims`` (each size >= ``min_shape``'s, V <= 2^31 - 1) -> fp32 (fp16
    widens exactly; bf16: pass ``bf16_bits_to_float32(bits)``)."""
    # fp32 logits are read in place: no module writes into them
    return check_logits(name, value, min_shape=min_shape, dims=dims).astype(np.float32, copy=False)


def check_logits(
    name: str, value: Any, *, min_shape: tuple[int, ...], dims: str, bf16_bits: bool = False
) -> npt.NDArray[Any]:
    """``as_logits``'s checks; the fp32 or fp16 array as given. With ``bf16_bits`` (``pp3.audit.fast_accept``, which
    widens only the rows it reads), the checks of the uint16 bit patterns of bf16 logits instead."""
    arr = np.asarray(value)
    if bf16_bits and arr.dtype != np.uint16:
        raise TypeError(f"{name}: expected a uint16 array of bf16 bit patterns, got dtype {arr.dtype}")
    if not bf16_bits and arr.dtype not in (np.float32, np.float16):
        raise TypeError(
            f"{name}: expected float32 or float16 (bf16: pass bf16_bits_to_float32(bits)), got dtype {arr.dtype}"
        )
    if arr.ndim != len(min_shape):
        raise ValueError(f"{name}: expected shape {dims}, got {arr.shape}")
    if any(n < m for n, m in zip(arr.shape, min_shape, strict=True)):
        raise ValueError(f"{name}: expected shape {dims} with sizes >= {min_shape}, got shape {arr.shape}")
    if arr.shape[-1] > MAX_VOCAB:
        raise ValueError(f"{name}: V = {arr.shape[-1]} exceeds the maximum vocabulary 2^31 - 1")
    return arr


def as_int_array(name: str, value: Any, shape: tuple[int, ...], lo: int, hi: int) -> npt.NDArray[np.int64]:
    """An integer array of exactly ``shape`` with every value in ``lo .. hi`` (§11.2's draft fields) -> int64."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise ValueError(f"{name}: values must lie in {lo} .. {hi}, got {int(arr.min())} .. {int(arr.max())}")
    return arr.astype(np.int64)


def as_uint64_rows(name: str, value: Any, b: int) -> npt.NDArray[np.uint64]:
    """A per-row uint64 argument: an int or an integer array of shape [] or [B], every value in 0 .. 2^64 - 1."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name}: expected unsigned 64-bit integers, got a bool")
    if isinstance(value, numbers.Integral):
        v = int(value)
        if not 0 <= v <= _U64_MAX:
            raise ValueError(f"{name}: {v} is outside the uint64 range 0 .. 2^64 - 1")
        return np.full(b, v, dtype=np.uint64)
    # A sequence of Python ints may mix small values with values >= 2^63: keep them exact as objects.
    arr = np.array(value, dtype=object) if isinstance(value, list | tuple) else np.asarray(value)
    if arr.dtype == object:
        items = arr.ravel().tolist()
        if not all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in items):
            raise TypeError(f"{name}: expected integers, got {sorted({type(x).__name__ for x in items})}")
        bad = [int(x) for x in items if not 0 <= int(x) <= _U64_MAX]
        if bad:
            raise ValueError(f"{name}: {bad[0]} is outside the uint64 range 0 .. 2^64 - 1")
        arr = np.array([int(x) for x in items], dtype=np.uint64).reshape(arr.shape)
    elif arr.dtype.kind == "i":
        if arr.size and int(arr.min()) < 0:
            raise ValueError(f"{name}: {int(arr.min())} is outside the uint64 range 0 .. 2^64 - 1")
        arr = arr.astype(np.uint64)
    elif arr.dtype.kind != "u":
        raise TypeError(f"{name}: expected unsigned 64-bit integers, got dtype {arr.dtype}")
    if arr.ndim == 0:
        return np.full(b, int(arr), dtype=np.uint64)
    if arr.shape != (b,):
        raise ValueError(f"{name}: expected shape ({b},) to match logits' {b} rows, got {arr.shape}")
    return arr.astype(np.uint64)


def as_temperature_rows(name: str, value: Any, b: int) -> npt.NDArray[np.float32]:
    """Per-row target temperatures as fp32 (any value is row data, §3); shape [] or [B]."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name}: expected floating-point temperatures, got a bool")
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"{name}: expected floating-point temperatures, got dtype {arr.dtype}")
    with np.errstate(all="ignore"):
        arr32 = arr.astype(np.float32)
    if arr32.ndim == 0:
        return np.full(b, arr32, dtype=np.float32)
    if arr32.shape != (b,):
        raise ValueError(f"{name}: expected shape ({b},) to match logits' {b} rows, got {arr32.shape}")
    return arr32


def as_tau(tau: Any) -> np.float32:
    """§2: the drafter temperature, rounded to fp32, must be finite and > 0."""
    if isinstance(tau, bool | np.bool_) or not isinstance(tau, numbers.Real):
        raise TypeError(f"tau: expected a real number, got {type(tau).__name__}")
    with np.errstate(all="ignore"):
        t32 = np.float32(tau)
    if not (math.isfinite(float(t32)) and float(t32) > 0.0):
        raise ValueError(f"tau: must be finite and > 0 after rounding to fp32, got {tau!r} -> {float(t32)!r}")
    return t32
