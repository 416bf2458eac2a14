"""SPEC.md §2.1: exact widening of fp16 and bf16 logits to fp32."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def bf16_bits_to_float32(bits: npt.NDArray[np.uint16]) -> npt.NDArray[np.float32]:
    """Widen bf16 values, given as their raw uint16 bit patterns, to fp32 exactly (bits << 16)."""
    arr = np.asarray(bits)
    if arr.dtype != np.uint16:
        raise TypeError(f"bits: expected a uint16 array of bf16 bit patterns, got dtype {arr.dtype}")
    return (arr.astype(np.uint32) << np.uint32(16)).view(np.float32)


def float32_to_bf16_bits(x: npt.NDArray[np.float32]) -> npt.NDArray[np.uint16]:
    """The upper 16 bits of fp32 values: exact for values that are bf16-representable (test helper)."""
    arr = np.asarray(x, dtype=np.float32)
    return (arr.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
