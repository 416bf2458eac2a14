"""The GPU pair: parity and speed of the vocabulary-parallel selector ``pp3.pair`` on 2 GPUs (``make bench-pair``).

    python -m bench.pair [--quick] [--out DIR] [--parity-rows 1000] [--batch 1 2 4] [--depth 5] [--replays 200]
    TRITON_INTERPRET=1 python -m bench.pair --cpu     # plumbing check on CPU (gloo, tiny sizes, no speed claims)

The ranks (``--world``, default 2) are processes of ``bench._ranks``: NCCL over 127.0.0.1, one GPU each, NVLink
multicast off.

1. **parity**: rows of V = 163840 (B from 1 to 64, fp32 and bf16, ~``--parity-rows`` rows; Gaussian rows mixed with
   ties, masks, NaN, +inf, all -inf, one shard all -inf, tied maxima on both sides of the shard boundary, and the
   bulk suite's hashed rows), each rank's ``propose_vocab_parallel`` (per-tile and ``merge_local`` messages, an even
   and an uneven split, so the padding path runs on the GPU) against ``pp3.reference.propose`` on the whole rows,
   bit for bit; the single-GPU ``pp3.kernels.propose`` is checked on the same rows.
2. **speed**: the depth-D proposal (D positions, each on its own logits) at B = 1, 2, 4, in one CUDA graph per
   input set where capture works (else eager; the JSON says which and why), event-timed, median and spread per
   rank, for: ``pair`` (``propose_vocab_parallel(plan=...)``, the plan checked once per mode), ``pair merge_local``,
   ``staging`` (all_gather both full shards, select on the leader with the single-GPU ``propose``, broadcast the
   token back: with two ranks an all_gather moves the same bytes per link direction as a gather to the leader, and
   NCCL has no gather primitive), and ``single GPU`` (``pp3.kernels.propose`` on the unsharded rows, rank 0 alone).
   The pair paths are checked against the single-GPU selector on the timed inputs before timing.
3. **link**: all_gather of 256 MiB per rank (time, per-rank GB/s, bus GB/s) and of 256 B to 8 KiB per rank
   (the selector's message sizes), eager and inside a CUDA graph (graphs of 1 and of D calls).

Results: ``$OUT/pair.json`` (``--out``, else ``$OUT``, else ``results/``): the environment stamp with the world
size, NCCL's version and the multicast settings next to it, and every rank's results; a table on stdout. The parent
kills ranks still alive after ``--timeout`` seconds; wrap the whole command in ``timeout`` as well (``make
bench-pair`` does).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench._ranks import Rank, load, spawn
from pp3.audit.suites import hashed_rows
from pp3.reference import DEFAULT_TAU, Proposal
from pp3.testing.call import FORMATS, Call, to_numpy
from pp3.testing.compare import fields, row_mismatch, rows_per_field
from pp3.testing.timing import summary, time_calls

FIELDS = fields(Proposal)
TEMP_POOL = np.array([1.0, 1.0, 0.5, 2.0, 0.0, -0.0, np.inf, np.nan, -1.0], dtype=np.float32)


# ---------------------------------------------------------------------------------------------------- inputs


def shard_sizes(v: int, world: int, uneven: bool, tile: int) -> list[int]:
    """Shard sizes in rank order: even (V/W each), or uneven (rank r ~ r+1 parts, not on tile boundaries)."""
    if not uneven:
        return [v // world + (r < v % world) for r in range(world)]
    weights = np.arange(1, world + 1, dtype=np.float64)
    cuts = [int(v * w) for w in np.cumsum(weights)[:-1] / weights.sum()]
    cuts = [c - c % tile + tile // 3 for c in cuts]  # off the tile grid: every shard ends in a partial tile
    edges = [0, *cuts, v]
    return [edges[i + 1] - edges[i] for i in range(world)]


def offsets(sizes: list[int]) -> list[int]:
    return [int(o) for o in np.concatenate([[0], np.cumsum(sizes)[:-1]])]


def parity_batch(seed: int, b: int, v: int, bounds: list[int]) -> dict[str, Any]:
    """One batch of fp32 rows with the hard cases mixed in; ``bounds``: shard boundaries (global IDs)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, v), dtype=np.float32) * np.float32(4.0)
    kinds = rng.integers(0, 12, size=b)
    for r, k in enumerate(kinds):
        s = int(bounds[rng.integers(len(bounds))])
        if k == 0:
            x[r] = np.round(x[r])  # many ties
        elif k == 1:
            x[r, rng.random(v) < 0.9995] = -np.inf  # ~80 finite entries
        elif k == 2:
            x[r] = -np.inf  # ZERO_MASS
        elif k == 3:
            x[r, rng.integers(v)] = np.nan
        elif k == 4:
            x[r, rng.integers(v)] = np.inf
        elif k == 5:
            x[r, s - 1] = x[r, s] = x[r].max() + 1.0  # tied maxima on both sides of a boundary
        elif k == 6:
            x[r, s - 20 : s + 20] = x[r].max() + 1.0  # 40 tied maxima straddling a boundary
        elif k == 7:
            x[r, :s] = -np.inf  # the shards below the boundary all -inf
        elif k == 8:
            x[r, s:] = -np.inf
        elif k == 9:
            x[r] = hashed_rows(rng.integers(0, 1 << 32, size=1, dtype=np.uint64), v)[0]  # the bulk suite's rows
    return {
        "x": x,
        "temp": TEMP_POOL[rng.integers(len(TEMP_POOL), size=b)],
        "keys": rng.integers(0, 1 << 64, size=(3, b), dtype=np.uint64, endpoint=False),
    }


def parity_call(data: dict[str, Any], dtype: str) -> Call:
    """The batch as a selector call of format ``dtype`` (bfloat16: the fp32 rows rounded by torch, to nearest)."""
    import torch

    x = data["x"]
    if dtype == "bfloat16":
        fmt, bits = FORMATS["bf16"], torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    else:
        fmt, bits = FORMATS["fp32"], x.view(np.uint32)
    seed, rnd, pos = (tuple(int(k) for k in keys) for keys in data["keys"])
    return Call(fmt, bits, data["temp"], seed, rnd, pos, DEFAULT_TAU, None, True, name=dtype)


def step_parity(ctx: Rank) -> None:
    """Pair (both message forms, even and uneven splits) and single GPU == the NumPy reference, bit for bit."""
    from pp3 import pair

    a = ctx.args
    v, tile = a.vocab, a.tile
    splits = {name: shard_sizes(v, ctx.world, name == "uneven", tile) for name in ("even", "uneven")}
    bounds = sorted({o for sizes in splits.values() for o in offsets(sizes)[1:]})
    batches = [1, 2, 3, 4, 5, 8, 16, 31, 32, 33, 64] if not a.cpu else [1, 3]
    table: dict[str, dict[str, int]] = {}
    first: list[dict[str, Any]] = []
    rows, i, t0 = 0, 0, time.perf_counter()
    while rows < a.parity_rows:
        b, dtype = batches[i % len(batches)], ("float32", "bfloat16")[(i // len(batches)) % 2]
        call = parity_call(parity_batch(1000 + i, b, v, bounds), dtype)
        want = call.run_reference()
        x = call.torch_logits(ctx.dev)
        temp, seed, rnd, pos = call.kernel_row_args(ctx.dev)
        results = {"single GPU": call.run_kernel(ctx.dev)}  # the kernels' own tile choice
        for sname, sizes in splits.items():
            off, size = offsets(sizes)[ctx.rank], sizes[ctx.rank]
            shard = x[:, off : off + size].contiguous()
            for merge in (False, True):
                plan = pair.check_shards(shard, off, v, temp, seed, rnd, pos, group=None, tile=tile, merge_local=merge)
                results[f"pair {sname}{' merge_local' if merge else ''}"] = to_numpy(pair.propose_vocab_parallel(
                    shard, off, v, temp, seed, rnd, pos, tile=tile, plan=plan, merge_local=merge
                ))
        for name, got in results.items():
            mism = rows_per_field(got, want)
            key = f"{name} {dtype}"
            acc = table.setdefault(key, {"rows": 0} | dict.fromkeys(FIELDS, 0))
            acc["rows"] += b
            for f in FIELDS:
                acc[f] += mism[f]
            if any(mism.values()) and len(first) < 4:
                bad_rows = [int(r) for r in np.flatnonzero(row_mismatch(got, want))[:4]]
                first.append(
                    {
                        "impl": key,
                        "batch_seed": 1000 + i,
                        "B": b,
                        "mismatching_rows": mism,
                        "rows": bad_rows,
                        "replay": f"parity_call(parity_batch({1000 + i}, {b}, {v}, {bounds}), {dtype!r}), "
                        f"rows {bad_rows}",
                    }
                )
        rows += b
        i += 1
    ctx.res["parity"] = {
        "V": v,
        "tile": tile,
        "splits": splits,
        "rows": rows,
        "table": table,
        "first": first,
        "seconds": time.perf_counter() - t0,
    }
    bad = sum(acc[f] for acc in table.values() for f in FIELDS)
    ctx.log(f"parity: {rows} rows x {len(table)} impl/dtype, {bad} mismatching (row, field) pairs")


# ---------------------------------------------------------------------------------------------------- timing


def _graphs(ctx: Rank, steps: list[Callable[[], Any]], stream: Any, collective: bool) -> tuple[list[Any] | None, str]:
    """One CUDA graph per step, or None and why not. With ``collective`` every rank captures, and the graphs are
    used only if capture worked on every rank (one eager all_reduce decides), so the ranks replay the same
    collectives.

    Not ``pp3.testing.timing``: it captures in CUDA's global mode, where a CUDA call from another thread of a rank
    (the NCCL watchdog polls events) can invalidate the capture; here the mode is ``--capture-mode`` (default
    thread_local). One attempt per step: a retry after a capture that failed past a collective could leave this
    rank's NCCL op order out of step with the other ranks'.
    """
    import torch
    import torch.distributed as dist

    mode = ctx.args.capture_mode
    graphs: list[Any] = []
    why = f"{mode} capture"
    for step in steps:
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g, stream=stream, capture_error_mode=mode):
                step()
        except Exception as e:
            torch.cuda.synchronize(ctx.dev)
            why = f"{mode} capture: {e.__class__.__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            break
        graphs.append(g)
    ok = len(graphs) == len(steps)
    if collective:
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=ctx.dev)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        if ok and not flag.item():
            return None, "capture failed on another rank"
        ok = bool(flag.item())
    return (graphs if ok else None), why


def time_impl(
    ctx: Rank, build: Callable[[int], Callable[[], Any]], n_sets: int, collective: bool, graph: bool
) -> dict[str, Any]:
    """Median and spread (``pp3.testing.timing.summary``) of one call of the step (per input set, round robin), in
    a CUDA graph if ``graph`` and capture works (``_graphs``), each replay bracketed by CUDA events. On the CPU
    (the plumbing check): eager, wall clock (``pp3.testing.timing.time_calls``)."""
    import torch

    replays = ctx.args.replays
    steps = [build(s) for s in range(n_sets)]
    if not ctx.cuda:
        turn = itertools.count()
        return {"mode": "eager (cpu)", **time_calls(lambda: steps[next(turn) % n_sets](), replays, graph=False)}
    stream = torch.cuda.Stream(ctx.dev)  # type: ignore[no-untyped-call]
    with torch.cuda.stream(stream):
        for step in steps:  # warm-up outside capture: Triton compiles, NCCL connects, caches fill
            for _ in range(3):
                step()
    ctx.sync()
    mode, why = "eager", "graph not requested"
    runs: list[Callable[[], Any]] = list(steps)
    if graph:
        graphs, why = _graphs(ctx, steps, stream, collective)
        if graphs is not None:
            mode, runs = "graph", [g.replay for g in graphs]
    ctx.sync()
    for i in range(min(20, replays)):
        runs[i % n_sets]()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]  # type: ignore[no-untyped-call]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]  # type: ignore[no-untyped-call]
    for i in range(replays):
        starts[i].record()
        runs[i % n_sets]()
        ends[i].record()
    ctx.sync()
    us = [1000.0 * s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return {"mode": mode, "capture": why, **summary(us)}


def step_speed(ctx: Rank) -> None:
    """Depth-D proposals: pair, pair merge_local, staging (leader selects), single GPU (rank 0 alone)."""
    import torch

    a = ctx.args
    sizes = shard_sizes(a.vocab, ctx.world, False, a.tile)
    if len(set(sizes)) != 1:
        raise ValueError(f"speed: the staging baseline needs equal shards; V={a.vocab} over {ctx.world} ranks")
    rows: list[dict[str, Any]] = ctx.res.setdefault("speed", [])
    for dtype in [getattr(torch, d) for d in a.dtype]:
        for b in a.batch:
            rows += speed_case(ctx, dtype, b, sizes[0])
            ctx.save()
            if ctx.cuda:
                torch.cuda.empty_cache()


def speed_case(ctx: Rank, dtype: Any, b: int, vr: int) -> list[dict[str, Any]]:
    """Every implementation at one dtype and batch size; the pair paths checked against one GPU first."""
    import torch
    import torch.distributed as dist

    from pp3 import pair
    from pp3.kernels import propose

    a = ctx.args
    v, tile, depth = a.vocab, a.tile, a.depth
    off = vr * ctx.rank
    n_sets = 2 if a.cpu else max(2, min(8, (64 << 20) // (b * v * dtype.itemsize * depth) + 1))  # L2 rotation
    gen = torch.Generator().manual_seed(7 + b)  # a CPU generator: the same full rows on every rank, bit for bit
    fulls = [
        [(torch.randn((b, v), generator=gen) * 4.0).to(dtype).to(ctx.dev) for _ in range(depth)] for _ in range(n_sets)
    ]
    shards = [[x[:, off : off + vr].contiguous() for x in xs] for xs in fulls]
    temp = torch.ones(b, device=ctx.dev)
    seed = torch.arange(b, device=ctx.dev, dtype=torch.int64) * 7919 + 1
    rnd = torch.full((b,), 3, device=ctx.dev, dtype=torch.int64)
    pos = [torch.full((b,), 100 + d, device=ctx.dev, dtype=torch.int64) for d in range(depth)]
    token = torch.empty(b, dtype=torch.int32, device=ctx.dev)
    plans: dict[bool, Any] = {}

    def check(merge: bool) -> None:  # a collective: every rank, in the same order; the group's plan from now on
        plans[merge] = pair.check_shards(shards[0][0], off, v, temp, seed, rnd, pos[0], tile=tile, merge_local=merge)

    def pair_at(s: int, d: int, merge: bool) -> Any:
        return pair.propose_vocab_parallel(
            shards[s][d], off, v, temp, seed, rnd, pos[d], tile=tile, plan=plans[merge], merge_local=merge
        )

    # The timed code, checked against the single-GPU selector on the timed inputs.
    for merge in (False, True):
        check(merge)
        for s in range(n_sets):
            for d in range(depth):
                got, want = pair_at(s, d, merge), propose(fulls[s][d], temp, seed, rnd, pos[d])
                if row_mismatch(to_numpy(got), to_numpy(want)).any():
                    raise AssertionError(f"speed inputs: pair (merge_local={merge}) != single GPU at B={b}, {dtype}")

    def pair_build(s: int, merge: bool) -> Callable[[], None]:
        def step() -> None:
            for d in range(depth):
                pair_at(s, d, merge)

        return step

    def staging_build(s: int) -> Callable[[], None]:
        def step() -> None:
            for d in range(depth):
                g = ctx.gather(shards[s][d].view(-1))  # both full shards, on every rank
                if ctx.rank == 0:
                    full = g.view(ctx.world, b, vr).permute(1, 0, 2).reshape(b, v)
                    token.copy_(propose(full, temp, seed, rnd, pos[d]).token)
                dist.broadcast(token, src=0)

        return step

    def single_build(s: int) -> Callable[[], None]:
        def step() -> None:
            for d in range(depth):
                propose(fulls[s][d], temp, seed, rnd, pos[d])  # the kernels' own tile choice

        return step

    impls: list[tuple[str, Callable[[int], Callable[[], None]], bool, int]] = [
        ("pair", lambda s: pair_build(s, False), True, 8 * pair.message_words(b, -(-vr // tile))),
        ("pair merge_local", lambda s: pair_build(s, True), True, 8 * pair.message_words(b, 1)),
        ("staging", staging_build, True, b * vr * dtype.itemsize),
        ("single GPU", single_build, False, 0),
    ]
    rows = []
    for name, build, collective, msg_bytes in impls:
        ctx.barrier()
        if name.startswith("pair"):
            check(name.endswith("merge_local"))  # graphs are captured under the plan of their mode
        if collective or ctx.rank == 0:
            for graph in (True, False) if ctx.cuda else (False,):
                t = time_impl(ctx, build, n_sets, collective, graph)
                row = {
                    "impl": name,
                    "V": v,
                    "B": b,
                    "depth": depth,
                    "dtype": str(dtype).removeprefix("torch."),
                    "message_bytes_per_rank": msg_bytes,
                    **t,
                }
                rows.append(row)
                ctx.log(json.dumps(row))
        ctx.barrier()
    return rows


def step_link(ctx: Rank) -> None:
    """all_gather: 256 MiB per rank (bandwidth), 256 B to 8 KiB per rank (latency), eager and in graphs."""
    import torch

    a = ctx.args
    out: dict[str, Any] = ctx.res.setdefault("link", {})
    big = (256 << 20) if not a.cpu else (1 << 20)
    x = torch.empty(big, dtype=torch.uint8, device=ctx.dev)

    def build_big(_s: int) -> Callable[[], None]:
        return lambda: ctx.gather(x)

    t = time_impl(ctx, build_big, 1, True, False)
    sec = t["median_us"] * 1e-6
    out["big"] = {
        "bytes_per_rank": big,
        **t,
        "per_rank_GBps": big / sec / 1e9,
        "bus_GBps": big * (ctx.world - 1) / sec / 1e9,
    }
    ctx.log(f"link big: {json.dumps(out['big'])}")
    small = []
    for size in (256, 512, 1024, 2048, 4096, 8192):
        y = torch.zeros(size // 8, dtype=torch.int64, device=ctx.dev)
        for calls in (1, a.depth):

            def build(_s: int, calls: int = calls, y: Any = y) -> Callable[[], None]:
                def step() -> None:
                    for _ in range(calls):
                        ctx.gather(y)

                return step

            for graph in (False, True):
                if graph and not ctx.cuda:
                    continue
                if not graph and calls != 1:
                    continue
                tt = time_impl(ctx, build, 1, True, graph)
                small.append({"bytes_per_rank": size, "calls": calls, **tt, "per_call_us": tt["median_us"] / calls})
        ctx.log(
            f"link small {size} B: "
            + ", ".join(
                f"{r['mode']}x{r['calls']} {r['per_call_us']:.1f} us" for r in small if r["bytes_per_rank"] == size
            )
        )
    out["small"] = small


# ---------------------------------------------------------------------------------------------------- report


def render(merged: dict[str, Any]) -> str:
    stamp = {k: merged.get(k) for k in ("environment", "world", "nccl", "env")}
    lines = [f"stamp: {json.dumps(stamp)}"]
    par = merged.get("parity")
    if par:
        lines.append(f"\nparity: V={par['V']}, tile={par['tile']}, splits {par['splits']} (rank 0; every rank below)")
        head = f"{'rank':<5}{'impl':<34}{'rows':>7}" + "".join(f"{f:>9}" for f in FIELDS)
        lines += [head, "-" * len(head)]
        for r, rp in enumerate(merged["parity_by_rank"]):
            for name, acc in (rp or {}).get("table", {}).items():
                lines.append(f"{r:<5}{name:<34}{acc['rows']:>7}" + "".join(f"{acc[f]:>9}" for f in FIELDS))
    speed = merged.get("speed", [])
    if speed:
        lines.append("\nspeed: depth-D proposal, µs per replay (median, p10-p90), slowest rank; ratio to single GPU")
        head = (f"{'impl':<18}{'dtype':<10}{'B':>3}{'D':>3}{'mode':>12}{'median':>10}{'p10-p90':>18}{'ratio':>7}"
                f"{'msg B':>9}")
        lines += [head, "-" * len(head)]
        single = {(r["dtype"], r["B"], r["mode"]): r["median_us"] for r in speed if r["impl"] == "single GPU"}
        for r in speed:
            base = single.get((r["dtype"], r["B"], r["mode"]))
            ratio = f"{r['median_us'] / base:.2f}" if base else "-"
            lines.append(
                f"{r['impl']:<18}{r['dtype']:<10}{r['B']:>3}{r['depth']:>3}{r['mode']:>12}{r['median_us']:>10.1f}"
                f"{r['p10_us']:>9.1f}-{r['p90_us']:<8.1f}{ratio:>7}{r['message_bytes_per_rank']:>9}"
            )
        notes = sorted({f"{r['impl']}: {r.get('capture')}" for r in speed if r["mode"] != "graph" and r.get("capture")})
        lines += [f"  eager because: {n}" for n in notes if "not requested" not in n]
    link = merged.get("link")
    if link:
        big = link.get("big", {})
        if big:
            lines.append(
                f"\nlink: all_gather {big['bytes_per_rank'] >> 20} MiB/rank: {big['median_us']:.0f} µs, "
                f"{big['per_rank_GBps']:.0f} GB/s per rank, bus {big['bus_GBps']:.0f} GB/s"
            )
        for r in link.get("small", []):
            lines.append(
                f"  {r['bytes_per_rank']:>5} B/rank  {r['mode']:<6} x{r['calls']}: {r['per_call_us']:7.1f} µs/call"
            )
    for r, errs in enumerate(merged.get("errors_by_rank", [])):
        for e in errs:
            lines.append(f"\nrank {r} step {e['step']} FAILED:\n{e['traceback']}")
    return "\n".join(lines)


def merge(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """One document of every rank's results: rank 0's stamp, parity and link; per speed row, the slowest rank."""
    speed = []
    for row in ranks[0].get("speed", []):  # the pair is as fast as its slower half
        peers = [
            q
            for rk in ranks
            for q in rk.get("speed", [])
            if all(q[k] == row[k] for k in ("impl", "dtype", "B", "depth", "mode"))
        ]
        worst = max(peers, key=lambda q: q["median_us"])
        speed.append(worst | {"median_us_by_rank": [q["median_us"] for q in peers]})
    return {
        **{k: ranks[0].get(k) for k in ("environment", "world", "nccl", "env")},
        "environment_by_rank": [rk.get("environment") for rk in ranks],
        "parity": ranks[0].get("parity"),
        "parity_by_rank": [rk.get("parity") for rk in ranks],
        "speed": speed,
        "link": ranks[0].get("link"),
        "link_by_rank": [rk.get("link") for rk in ranks],
        "errors_by_rank": [rk.get("errors", []) for rk in ranks],
    }


STEPS = (("parity", step_parity), ("speed", step_speed), ("link", step_link))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pair", description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=163840)
    ap.add_argument("--tile", type=int, default=None, help="default: pp3.kernels.config.MAX_TILE")
    ap.add_argument("--parity-rows", type=int, default=1000)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--steps", nargs="+", default=["parity", "speed", "link"])
    ap.add_argument("--capture-mode", default="thread_local", choices=["thread_local", "global", "relaxed"])
    ap.add_argument("--timeout", type=float, default=480.0, help="seconds before the parent kills the ranks")
    ap.add_argument("--quick", action="store_true", help="100 parity rows, B=1, fp32, 50 replays")
    ap.add_argument("--cpu", action="store_true", help="plumbing check: gloo on CPU, tiny sizes (TRITON_INTERPRET=1)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    import torch

    if args.quick:
        args.parity_rows, args.batch, args.dtype, args.replays = 100, [1], ["float32"], 50
    if args.cpu:
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("bench.pair --cpu: set TRITON_INTERPRET=1 (the kernels run in Triton's interpreter)")
            return 2
        args.vocab, args.tile = 1200, args.tile or 64
        args.parity_rows, args.batch, args.dtype, args.replays, args.depth = 4, [1, 2], ["float32"], 2, 2
    elif not torch.cuda.is_available() or torch.cuda.device_count() < args.world:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        print(f"bench.pair: needs {args.world} CUDA GPUs, found {n}; nothing run (--cpu checks the plumbing)")
        return 0
    if args.tile is None:
        from pp3.kernels.config import MAX_TILE

        args.tile = MAX_TILE
    outdir = Path(args.out or os.environ.get("OUT") or "results")
    outdir.mkdir(parents=True, exist_ok=True)
    print(
        f"bench.pair: {args.world} ranks, V={args.vocab}, tile={args.tile}, steps {args.steps}, out {outdir}",
        flush=True,
    )
    status = spawn("pair", [(n, step) for n, step in STEPS if n in args.steps], args, outdir)
    merged = merge(load("pair", outdir, args.world)) | {"status": status, "args": vars(args)}
    (outdir / "pair.json").write_text(json.dumps(merged, indent=1, default=str))
    print(render(merged))
    print(f"\nstatus: {status}; wrote {outdir / 'pair.json'}", flush=True)
    bad_parity = any(acc[f] for rp in merged["parity_by_rank"] if rp for acc in rp["table"].values() for f in FIELDS)
    return 0 if status == "ok" and not bad_parity and not any(merged["errors_by_rank"]) else 1


if __name__ == "__main__":
    sys.exit(main())
