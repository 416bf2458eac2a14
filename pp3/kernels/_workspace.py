"""Row counters for kernels whose last program of a row finishes the row (the verifier's row reductions). Imports
torch but not triton.

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

_GROW = 4096  # counters are int32: 16 KiB per buffer at first
_LIVE: dict[tuple[torch.device, int], torch.Tensor] = {}
_RETIRED: list[torch.Tensor] = []  # replaced buffers: a captured graph may still read and reset them


def counters(device: torch.device, n: int) -> torch.Tensor:
    """``n`` int32 counters, all 0, on ``device``, for launches on its current stream (the interpreter's CPU: one)."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    buf = _LIVE.get(key)
    if buf is None or buf.numel() < n:
        if buf is not None:
            _RETIRED.append(buf)
        size = _GROW
        while size < n:
            size *= 2
        buf = torch.zeros(size, dtype=torch.int32, device=device)
        _LIVE[key] = buf
    return buf[:n]
