"""Triton body of the one-pass masked row gather for ``pp3.adapters`` on the GPU (launcher: ``launch.gather_rows``):
``out[t] = source[index[t]]`` where ``valid[t]``, ``fill`` elsewhere, in one launch that reads only the valid rows
and writes each output element once.

Torch needs two passes for it (``index_select``, then ``masked_fill_`` over the whole output), and the second pass
costs more than the gather: on the [B, D+1, V] target logits at B = 64 the two take 218 µs against this kernel's
98 µs (one H200, bench/NOTES.md). The kernel moves raw bits (every element viewed as the signed integer of its
width, the fill value too), so no float operation touches a value.
"""

from __future__ import annotations

import triton
import triton.language as tl

from pp3.kernels._common import _masked_by


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
        v = tl.load(src_ptr + i * row_len + col, mask=_masked_by(inside, ok), other=0)
        v = tl.where(ok, v, fill.to(v.dtype))
        tl.store(dst_ptr + t * row_len + col, v, mask=inside)
