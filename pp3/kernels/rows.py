"""One-pass masked row gather for ``pp3.adapters`` on the GPU: ``out[t] = source[index[t]]`` where ``valid[t]``,
``fill`` elsewhere, in one launch that reads only the valid rows and writes each output element once.

Torch needs two passes for it (``index_select``, then ``masked_fill_`` over the whole output), and the second pass
costs more than the gather: on the [B, D+1, V] target logits at B = 64 the two take 218 µs against this kernel's
98 µs (one H200, bench/NOTES.md). The kernel moves raw bits (every element viewed as the signed integer of its
width, the fill value too), so no float operation touches a value.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from pp3.kernels.config import EXACT

# The dtypes the kernel moves, each as the signed integer of its width.
_BITS = {
    torch.bool: torch.int8, torch.int8: torch.int8, torch.uint8: torch.int8, torch.int16: torch.int16,
    torch.int32: torch.int32, torch.int64: torch.int64, torch.float16: torch.int16, torch.bfloat16: torch.int16,
    torch.float32: torch.int32, torch.float64: torch.int64,
}
_BLOCK = 4096  # elements per program and row (the block measured; a smaller row gets its next power of two)
_MAX_PROGRAMS_PER_ROW = 65535  # CUDA's grid limit in y; longer rows are walked in strides


@triton.jit(do_not_specialize=["fill"])
def _gather_rows_kernel(
    src_ptr: tl.tensor,  # [R, row_len] source rows, as integers of the element's width
    dst_ptr: tl.tensor,  # [n, row_len] out, the same integers
    index_ptr: tl.tensor,  # [n] int64 source row of each output row
    valid_ptr: tl.tensor,  # [n] int8: 0 = the row holds fill
    fill: tl.tensor,  # the fill value's bits, as a signed integer of the element's width
    row_len: tl.tensor,  # elements per row
    BLOCK: tl.constexpr,
) -> None:
    """Program (t, p): output row t, columns p * BLOCK + [0, BLOCK) and every grid-y stride after. Invalid rows
    issue no load from ``src``: their ``index`` is never used as an address."""
    t = tl.program_id(0).to(tl.int64)
    ok = tl.load(valid_ptr + t) != 0
    i = tl.load(index_ptr + t)
    lane = tl.arange(0, BLOCK)
    for start in range(tl.program_id(1).to(tl.int64) * BLOCK, row_len, tl.num_programs(1).to(tl.int64) * BLOCK):
        col = start + lane
        inside = col < row_len
        v = tl.load(src_ptr + i * row_len + col, mask=inside & ok, other=0)
        v = tl.where(ok, v, fill.to(v.dtype))
        tl.store(dst_ptr + t * row_len + col, v, mask=inside)


def bits_dtype(dtype: torch.dtype) -> torch.dtype | None:
    """The integer dtype ``gather_rows`` moves ``dtype``'s elements as, or None for a dtype it does not take."""
    return _BITS.get(dtype)


def gather_rows(source: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, fill_bits: int) -> torch.Tensor:
    """Rows ``index`` of ``source`` [R, ...] where ``valid``, every element the value with bits ``fill_bits``
    elsewhere: a fresh [len(index), ...] tensor of ``source``'s dtype. ``index``: [n] int64, each valid entry in
    0 .. R-1 (the callers clamp them; nothing is read for an invalid one); ``valid``: [n] bool; ``fill_bits``: the
    fill's bits as a signed integer of the element's width (``pp3.adapters`` computes them on the host). A
    non-contiguous ``source`` is copied first. On a CUDA device, or anywhere under TRITON_INTERPRET=1."""
    bits = bits_dtype(source.dtype)
    if bits is None:
        raise ValueError(f"source: the row gather does not take {source.dtype}")
    width = 8 * source.dtype.itemsize
    if not -(1 << (width - 1)) <= fill_bits < 1 << (width - 1):
        raise ValueError(f"fill_bits: {fill_bits} is not a signed {width}-bit integer")
    n, rest = index.shape[0], source.shape[1:]
    out = torch.empty((n, *rest), dtype=source.dtype, device=source.device)
    row_len = math.prod(rest)
    if n == 0 or row_len == 0:
        return out
    block = min(_BLOCK, triton.next_power_of_2(row_len))
    grid = (n, min(triton.cdiv(row_len, block), _MAX_PROGRAMS_PER_ROW))
    _gather_rows_kernel[grid](
        source.contiguous().view(bits), out.view(bits), index, valid.view(torch.int8), fill_bits, row_len,
        BLOCK=block, num_warps=4 if block >= 1024 else 1, **EXACT,
    )
    return out
