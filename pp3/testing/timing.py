"""CUDA-graph capture and event timing: the one way the benchmarks, the demo and the GPU runs time a call.

A call is captured once (after a warm-up on a side stream, so that compilation and constant tables happen outside
the capture) and replayed; each replay is bracketed by its own CUDA events. Inputs are device tensors that the
caller refreshes in place between replays; outputs are the static tensors the graph writes.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def cuda_graph(fn: Callable[[], T], warmup: int = 2) -> tuple[Callable[[], None], T]:
    """Capture ``fn`` (e.g. a whole depth-D draft call on device tensors) in one CUDA graph: (replay, outputs)."""
    import torch

    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph.replay, out


def summary(us: list[float]) -> dict[str, float]:
    """Median and the 10th / 90th percentiles of per-replay times, in µs."""
    s = sorted(us)
    return {"median_us": statistics.median(s), "p10_us": s[len(s) // 10], "p90_us": s[(9 * len(s)) // 10]}


def time_graph(
    build: Callable[[int], Callable[[], Any]], n_sets: int, replays: int, warmup: int = 20
) -> dict[str, float]:
    """Capture one CUDA graph per input set (``build(set)`` returns the step to capture) and time replays.

    Sets rotate round-robin, so that L2 does not hold the inputs between replays. Returns median/p10/p90 in µs.
    """
    import torch

    graphs = []
    # Every set's step stays alive until the replays end: a step may own tensors that only its graph reads (the
    # "launch 2 only" candidates). Dropping them was a use-after-free: their blocks went back to the allocator while
    # the graph still read them, and once a block was unmapped the replay faulted (bench/NOTES.md, "The fault").
    steps = []
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    for s in range(n_sets):
        step = build(s)
        steps.append(step)
        stream.wait_stream(torch.cuda.current_stream())  # build() may have queued work there (inputs, candidates)
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm-up outside capture: compile, allocate caches
                step()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            step()
        graphs.append(g)
    torch.cuda.synchronize()
    # Hand every unused cached block back to the driver before replaying: a graph that reads freed memory then
    # faults at once instead of reading stale data (a self-check of the harness; it costs no replay time).
    torch.cuda.empty_cache()
    for i in range(warmup):
        graphs[i % n_sets].replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]  # type: ignore[no-untyped-call]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]  # type: ignore[no-untyped-call]
    for i in range(replays):
        starts[i].record()
        graphs[i % n_sets].replay()
        ends[i].record()
    torch.cuda.synchronize()
    del steps
    return summary([1000.0 * a.elapsed_time(b) for a, b in zip(starts, ends, strict=True)])


def time_calls(fn: Callable[[], Any], replays: int, *, graph: bool = True) -> dict[str, float]:
    """Median/p10/p90 (µs) of one call: CUDA-graph replays with events where ``graph`` (a GPU), else wall time."""
    if graph:
        return time_graph(lambda _: fn, 1, replays)
    import time

    fn()
    us = []
    for _ in range(replays):
        t = time.perf_counter()
        fn()
        us.append((time.perf_counter() - t) * 1e6)
    return summary(us)
