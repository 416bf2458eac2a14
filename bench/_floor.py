"""The floors every pp3 row is compared with, in the same process (PERF_FACTS.md): an empty kernel (the launch floor
of a CUDA-graph node) and trivial row reductions that read the same bytes as the selector.

"2-launch": per-tile ``tl.max`` of the fp32 values into a [B, T] buffer, then one program per row takes the max of
the tile maxima. "1-launch": the same per-tile max, then the last program of a row (an ``acq_rel`` row counter, as
the selector's one launch) takes the row max and resets the counter. "read-only": the per-tile max, no merge.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

TILE = 4096


@triton.jit
def empty_kernel(x_ptr: tl.tensor) -> None:
    pass


@triton.jit
def _tile_max(x_ptr: tl.tensor, part_ptr: tl.tensor, v: tl.tensor, n_tiles: tl.tensor, TILE: tl.constexpr) -> None:
    """Program (b, t): the max of tile t of row b into part[b, t]."""
    b = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    offs = t * TILE + tl.arange(0, TILE)
    x = tl.load(x_ptr + b * v + offs, mask=offs < v, other=float("-inf")).to(tl.float32)
    tl.store(part_ptr + b * n_tiles + t, tl.max(x))


@triton.jit
def _tile_max_kernel(x_ptr: tl.tensor, part_ptr: tl.tensor, v: tl.tensor, n_tiles: tl.tensor,
                     TILE: tl.constexpr) -> None:
    _tile_max(x_ptr, part_ptr, v, n_tiles, TILE)


@triton.jit
def _row_max_kernel(part_ptr: tl.tensor, out_ptr: tl.tensor, n_tiles: tl.tensor, NT: tl.constexpr) -> None:
    b = tl.program_id(0).to(tl.int64)
    ti = tl.arange(0, NT)
    tl.store(out_ptr + b, tl.max(tl.load(part_ptr + b * n_tiles + ti, mask=ti < n_tiles, other=float("-inf"))))


@triton.jit
def _one_launch_max_kernel(x_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor, out_ptr: tl.tensor,
                           v: tl.tensor, n_tiles: tl.tensor, TILE: tl.constexpr, NT: tl.constexpr) -> None:
    _tile_max(x_ptr, part_ptr, v, n_tiles, TILE)
    b = tl.program_id(0).to(tl.int64)
    tl.debug_barrier()
    if tl.atomic_add(count_ptr + b, 1, sem="acq_rel", scope="gpu") == n_tiles - 1:
        tl.store(count_ptr + b, 0)
        ti = tl.arange(0, NT)
        parts = tl.load(part_ptr + b * n_tiles + ti, mask=ti < n_tiles, other=float("-inf"), cache_modifier=".cg")
        tl.store(out_ptr + b, tl.max(parts))


class RowMax:
    """A trivial row max over [B, V] logits: ``mode`` "2-launch", "1-launch" or "read-only"; buffers made once."""

    def __init__(self, mode: str, b: int, v: int, device: Any) -> None:
        self.mode = mode
        self.n_tiles = triton.cdiv(v, TILE)
        self.part = torch.empty((b, self.n_tiles), dtype=torch.float32, device=device)
        self.out = torch.empty(b, dtype=torch.float32, device=device)
        self.count = torch.zeros(b, dtype=torch.int32, device=device)

    def __call__(self, x: torch.Tensor) -> None:
        b, v = x.shape
        nt = self.n_tiles
        npow = triton.next_power_of_2(nt)
        if self.mode == "1-launch":
            _one_launch_max_kernel[(b, nt)](x, self.part, self.count, self.out, v, nt, TILE=TILE, NT=npow, num_warps=8)
            return
        _tile_max_kernel[(b, nt)](x, self.part, v, nt, TILE=TILE, num_warps=8)
        if self.mode == "2-launch":
            _row_max_kernel[(b,)](self.part, self.out, nt, NT=npow, num_warps=8)
