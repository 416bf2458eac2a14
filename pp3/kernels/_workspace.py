"""Buffers that the kernels leave as they found them: the row counters of kernels whose last program of a row
finishes the row (the verifier's row reductions, the one-launch selector), and the segment selectors' per-row buckets
and survivor counters. Imports torch but not triton.

Protocol: every program of row r adds 1 to ``counter[r]`` with an ``acq_rel`` atomic at GPU scope after a barrier (so
the whole program's stores are released), and the program that sees the old value n - 1 (the last of the row's n
programs, whatever the order they ran in: no co-residency is assumed) writes 0 back before it reads the others'
partials. So the buffer is all zeros between launches, and one buffer serves every launch that runs after another.

One buffer per (device, stream): launches on one stream run one after the other, so they never share a counter at the
same time. A CUDA graph keeps the buffer of the stream it was captured on; graphs captured on one stream (by default
``torch.cuda.graph`` captures every graph on one shared side stream) therefore share a buffer, and their replays must
not overlap in time: replay them on one stream (the usual case), or capture graphs that run concurrently on streams
of their own. A buffer that grows is replaced, and the old one is kept: a graph captured earlier still uses it.
"""

from __future__ import annotations

import torch

_GROW = 4096  # rows (or counters) of a buffer at first; it doubles as needed
_LIVE: dict[tuple[str, torch.device, int], torch.Tensor] = {}
_RETIRED: list[torch.Tensor] = []  # replaced buffers: a captured graph may still read and reset them


def _buffer(name: str, device: torch.device, rows: int, width: int, dtype: torch.dtype, fill: int) -> torch.Tensor:
    """``rows`` rows of ``width`` entries of ``fill``, on ``device``, for launches on its current stream (the
    interpreter's CPU: one); the kernels that use it leave every entry ``fill`` again."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (name, device, stream)
    buf = _LIVE.get(key)
    if buf is None or buf.shape[0] < rows:
        if buf is not None:
            _RETIRED.append(buf)
        size = _GROW
        while size < rows:
            size *= 2
        buf = torch.full((size, width), fill, dtype=dtype, device=device)
        _LIVE[key] = buf
    return buf[:rows]


def counters(device: torch.device, n: int) -> torch.Tensor:
    """``n`` int32 counters, all 0."""
    return _buffer("counters", device, n, 1, torch.int32, 0).view(-1)


def buckets(device: torch.device, rows: int, width: int) -> torch.Tensor:
    """[rows, width] int64, all -2^63: the segment selector's buckets (uint64 keys with the sign bit flipped, so an
    int64 atomic max orders them), empty."""
    return _buffer(f"buckets{width}", device, rows, width, torch.int64, -(1 << 63))


def value_buckets(device: torch.device, rows: int, width: int) -> torch.Tensor:
    """[rows, width] int32, all -2^31: the one-launch selector's buckets (uint32 §4.1 okeys with the sign bit flipped,
    so an int32 atomic max orders them), empty."""
    return _buffer(f"values{width}", device, rows, width, torch.int32, -(1 << 31))


def survivor_slots(device: torch.device, rows: int, width: int) -> torch.Tensor:
    """[rows, width] int64: the segment selector's survivor slots. Not restored: a launch reads only the slots it
    wrote, and its speculative loads of the others read defined memory (zeros at first, earlier survivors later)."""
    return _buffer(f"slots{width}", device, rows, width, torch.int64, 0)


def survivor_counts(device: torch.device, rows: int) -> torch.Tensor:
    """[rows] int32, all 0: the segment selector's survivor slots taken per row."""
    return _buffer("survivors", device, rows, 1, torch.int32, 0).view(-1)
