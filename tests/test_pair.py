"""``pp3.pair``: the vocabulary-parallel selector over torch.distributed equals the unsharded reference (SPEC.md §9).

Multi-process tests spawn W = 2, 3, 4 and 8 gloo ranks on 127.0.0.1 (and, marked slow, a sweep of random splits on 2
ranks); each rank runs its kernels through Triton's interpreter, so one spawn per world size runs every case of that
size and the tests below read its results. Every rank's four fields must equal ``pp3.reference.propose`` on the whole
rows bit for bit (even and uneven splits, empty shards, a rank holding NaN or an all -inf shard, fp32, bf16 and mixed
dtypes, per-tile and merged messages). Bad setups (overlaps, gaps, ranks disagreeing on B, V, the tile, merge_local, tau
or the keys, a caller error on one rank: a wrong dtype, a shard on meta, a bad launch=) must raise the same error text
on every rank, naming the rank and the argument; a stale or mismatched plan must raise before any collective. A separate
2-rank spawn plants faults, each in its own process group: a rank that stalls or dies must make the other raise
``CollectiveError`` within pp3's timeout. Single-process tests cover the message packing and padding path (the
all_gather simulated by stacking) for 1, 3 and 8 shards, the neutrality of empty tiles, and the host-side plan checks on
a one-rank group.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pickle
import socket
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pp3.testing.call import FORMATS, Call
from pp3.testing.compare import assert_equal

HAVE_KERNELS = all(importlib.util.find_spec(m) is not None for m in ("torch", "triton"))
pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(not HAVE_KERNELS, reason="needs torch and triton"),
    # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

FIELDS = ("status", "token", "ids", "tickets")
V = 300
JOIN_TIMEOUT_S = 150.0  # a hung worker fails the test instead of hanging CI
PG_TIMEOUT_S = 60.0  # a rank left alone in a collective errors out after this (pp3's own timeout, and gloo's)
FAULT_TIMEOUT_S = 1.0  # pp3's timeout in the planted-fault tests (only the faulted calls use it)
NEG_NAN = np.uint32(0xFFFFFFFF).view(np.float32)  # okey 0: the lowest key a real entry can have


# ---------------------------------------------------------------------------------------------------- cases


def reference(bt: Call) -> dict[str, npt.NDArray[Any]]:
    """The reference's four fields on the whole rows."""
    p = bt.run_reference()
    return {f: getattr(p, f) for f in FIELDS}


def _keys(rng: np.random.Generator, b: int) -> tuple[npt.NDArray[np.uint64], ...]:
    edges = np.array([0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1], dtype=np.uint64)
    out = []
    for _ in range(3):
        k = rng.integers(0, 1 << 64, size=b, dtype=np.uint64)
        k[: min(b, 2)] = rng.choice(edges, size=min(b, 2))
        out.append(k)
    return tuple(out)


def _batch(x: npt.NDArray[Any], temp: list[float], seed: int, tau: float = 0.7, bf16: bool = False) -> Call:
    """One position of a batch: fp32 logits (or bf16 bits) and random per-row keys, the extremes mixed in."""
    rng = np.random.default_rng(seed)
    s, r, p = (tuple(int(v) for v in k) for k in _keys(rng, x.shape[0]))
    bits = x if bf16 else np.asarray(x, dtype=np.float32).view(np.uint32)
    return Call(FORMATS["bf16" if bf16 else "fp32"], bits, np.array(temp, dtype=np.float32), s, r, p,
                float(np.float32(tau)), None, True)


def _normal(rng: np.random.Generator, b: int) -> npt.NDArray[np.float32]:
    return (rng.standard_normal((b, V)) * 3.0).astype(np.float32)


def case_random(seed: int) -> Call:
    """Sampled, T0 (+0, -0), failed-by-temperature rows; one row with fewer finite entries than K."""
    rng = np.random.default_rng(seed)
    x = _normal(rng, 6)
    x[5, rng.permutation(V)[: V - 11]] = -np.inf  # 11 finite entries anywhere: support n = 11 < K
    return _batch(x, [1.0, 0.0, -0.0, 0.5, np.nan, 2.0], seed)


def case_nonfinite(split: int) -> Call:
    """NaN, +inf or all -inf on one side of the shard boundary ``split`` only, and all -inf everywhere."""
    rng = np.random.default_rng(split)
    x = _normal(rng, 8)
    x[0, split + 7] = np.nan  # NaN on the upper shard only -> NAN_LOGIT
    x[1, split - 3] = np.inf  # +inf on the lower shard only -> POS_INF_LOGIT
    x[2, 5], x[2, V - 1] = NEG_NAN, np.inf  # a NaN with key okey 0 below, +inf above: NaN wins (§3 order)
    x[3, :split] = -np.inf  # lower shard all -inf: sampled from the upper shard only
    x[4, :] = -np.inf  # every shard all -inf -> ZERO_MASS
    x[5, :] = -np.inf
    x[5, V - 2] = 1.5  # a single finite entry, on the last shard: n = 1
    x[6, split:] = -np.inf  # upper shard all -inf, greedy
    x[7, split + 1] = np.inf  # +inf beats a bad temperature (§3 precedence)
    return _batch(x, [1.0, 1.0, 1.0, 0.7, 1.0, 1.0, 0.0, -1.0], split + 1)


def case_ties(split: int) -> Call:
    """Equal maximal logits on both sides of the shard boundary ``split``: the lower global ID wins."""
    rng = np.random.default_rng(split + 100)
    x = np.clip(_normal(rng, 6), -30.0, 4.0)
    x[0, split - 1] = x[0, split] = 5.0  # T0: g = split - 1
    x[1, split - 1] = x[1, split] = 5.0  # sampled: both in the support, rank 0 is split - 1
    x[2, :] = -1.0
    x[2, split - 1], x[2, split] = -0.0, 0.0  # -0.0 == +0.0 (§4.1): g = split - 1
    x[3, split - 20 : split + 20] = 5.0  # 40 tied maxima across the boundary: the support is the 32 lowest IDs
    x[4, :] = 1.0  # every entry tied: support 0 .. 31, on the first shard
    x[5, :] = -np.abs(x[5, :]) - 1.0
    x[5, split - 1], x[5, split] = 0.0, -0.0  # sampled: +0.0 (lower ID) and -0.0 tie for rank 0
    return _batch(x, [0.0, 1.0, 0.0, 1.0, 0.25, 1.0], split + 2)


def case_bf16(seed: int) -> Call:
    """bf16 logits, subnormals included (widened by bits on both sides)."""
    rng = np.random.default_rng(seed)
    bits = (rng.standard_normal((3, V)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bits[0, :40] = rng.integers(1, 0x80, size=40, dtype=np.uint16)  # positive subnormals
    bits[1, 100:110] = 0x7F80  # +inf on one shard
    return _batch(bits, [1.0, 1.0, 0.0], seed, bf16=True)


def case_tiny(v: int) -> Call:
    """V < K: every row's first K include key-0 lanes and padding tiles (launch 2 sees many equal keys 0)."""
    rng = np.random.default_rng(v)
    x = (rng.standard_normal((5, v)) * 3.0).astype(np.float32)
    x[1, :] = -np.inf
    x[1, v - 1] = 0.5  # one finite entry
    x[2, :] = np.round(x[2, :])  # ties
    x[3, v // 2] = np.nan
    x[4, :] = 1.0  # all tied
    return _batch(x, [1.0, 1.0, 0.0, 1.0, 0.5], v)


def case_ranks(sizes: list[int], seed: int, bf16: bool = False) -> Call:
    """Rows over many small shards: one rank's shard all -inf in every row, a NaN and a +inf on single ranks,
    tied maxima across a shard boundary, a row whose only finite entry is on the last non-empty rank."""
    rng = np.random.default_rng(seed)
    v = sum(sizes)
    x = (rng.standard_normal((6, v)) * 3.0).astype(np.float32)
    spans = [(o, s) for o, s in splits(sizes) if s > 0]
    (o_inf, s_inf), (o_nan, _), (o_pos, _) = spans[len(spans) // 2], spans[-2], spans[1]
    x[:, o_inf : o_inf + s_inf] = -np.inf  # a rank whose whole shard is -inf
    x[0, o_nan] = np.nan  # NaN on one rank only -> NAN_LOGIT
    x[1, o_pos] = np.inf  # +inf on one rank only -> POS_INF_LOGIT
    b0 = spans[1][0]  # tied maxima on both sides of a boundary: the lower ID wins
    x[2, b0 - 1] = x[2, b0] = 9.0
    x[3, b0 - 1] = x[3, b0] = 9.0
    x[4, :] = -np.inf
    x[4, spans[-1][0]] = 0.5  # one finite entry, on the last non-empty shard
    bits = (x.view(np.uint32) >> 16).astype(np.uint16) if bf16 else x  # bf16 by truncation: ±inf and NaN stay so
    return _batch(bits, [1.0, 1.0, 0.0, 0.7, 1.0, 2.0], seed, bf16=bf16)


def splits(sizes: list[int]) -> list[tuple[int, int]]:
    """(offset, size) per rank for contiguous shards of the given sizes, in rank order."""
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    return [(int(o), int(s)) for o, s in zip(offs, sizes, strict=True)]


@dataclasses.dataclass(frozen=True)
class Job:
    """One collective call on every rank: a proposal (``batch``), a bad setup (no batch) or a stale-plan check.

    Setup jobs call ``check_shards`` (``via`` "propose": ``propose_vocab_parallel(plan=None)``) with per-rank
    settings; every rank must raise."""

    name: str
    shards: list[tuple[int, int]]  # (vocab_offset, size) per rank
    tile: int = 32
    batch: Call | None = None
    trusted: bool = True  # check_shards, then propose with plan=; False: propose with plan=None checks itself
    merge_local: bool = False
    widen: tuple[int, ...] = ()  # these ranks pass their (bf16) shard widened to float32
    stale: list[tuple[int, int]] | None = None  # a later setup's shards: the plan of `shards` goes stale
    via: list[str] | None = None  # per rank, for setup jobs: "check" (the default) or "propose" (plan=None)
    rows: list[int] | None = None  # per rank, for setup jobs (default 2)
    vocab: list[int] | None = None  # per rank, for setup jobs (default V)
    tiles: list[int] | None = None  # per rank, for setup jobs (default `tile`)
    merges: list[bool] | None = None  # per rank, for setup jobs (default False)
    seeds: list[int] | None = None  # per rank, for setup jobs (default 1)
    taus: list[float] | None = None  # per rank, for setup jobs (default DEFAULT_TAU)
    bad_rank: int = -1  # this rank alone makes the caller error ``bad``:
    bad: str = ""  # "dtype" (float64 logits), "meta" (its shard on the meta device) or "launch" (launch="fast")


def sweep_jobs() -> list[Job]:
    """The slow tier (W = 2): random split points, tiles 32 to 128, per-tile and merged messages."""
    rng = np.random.default_rng(2026)
    jobs = []
    for i in range(9):
        split = int(rng.integers(1, V))
        batch = (case_random(10 + i), case_nonfinite(split), case_ties(split))[i % 3]
        jobs.append(Job(f"sweep{i}", splits([split, V - split]), 32 << (i % 3), batch, merge_local=i % 2 == 1))
    return jobs


W8_UNEVEN = [0, 5, 40, 1, 20, 9, 12, 8]  # V = 95: an empty shard, one of 2 tiles (tile 32), a 1-entry shard


def jobs_for(world: int) -> list[Job]:
    if world == 0:
        return sweep_jobs()
    if world == 2:
        half = [(0, 150), (150, 150)]
        return [
            Job("uneven", splits([97, 203]), 32, case_random(1)),  # 4 vs 7 tiles: padding
            Job("uneven_plan_none", splits([203, 97]), 64, case_random(2), trusted=False),  # 4 vs 2 tiles
            Job("nonfinite", splits([200, 100]), 64, case_nonfinite(200)),
            Job("ties", splits([150, 150]), 32, case_ties(150)),
            Job("ties_merged", splits([150, 150]), 64, case_ties(150), merge_local=True),
            # rank 1 holds the low IDs: the rank order does not matter
            Job("swapped", [(120, 180), (0, 120)], 32, case_nonfinite(120)),
            Job("mixed_dtype", splits([64, 236]), 64, case_bf16(8), widen=(1,)),  # bf16 and fp32 shards
            Job("overlap", [(0, 160), (150, 150)]),
            Job("gap", [(0, 140), (150, 150)]),
            Job("past_vocab", [(0, 150), (150, 151)]),  # rank 1's shard ends past V: its own caller error
            Job("batch", half, rows=[2, 3]),
            Job("vocab", half, vocab=[300, 301]),
            Job("tile", half, tiles=[32, 64]),
            Job("merge", half, merges=[False, True]),
            Job("merge_call", half, merges=[True, False], via=["propose"] * 2),  # gloo aborted a rank
            Job("calls", half, via=["check", "propose"]),  # the ranks are in different calls
            Job("seed", half, seeds=[1, 2]),
            Job("tau", half, taus=[0.7, 0.75]),
            Job("dtype", half, bad_rank=1, bad="dtype"),
            Job("meta", half, bad_rank=0, bad="meta"),
            Job("meta_call", half, via=["propose"] * 2, bad_rank=1, bad="meta"),
            Job("launch", half, via=["propose"] * 2, bad_rank=1, bad="launch"),
            # a second setup makes the first plan stale; the check needs no collective
            Job("stale", splits([150, 150]), 256, case_random(3), stale=splits([100, 200])),
        ]
    if world == 3:
        return [
            Job("uneven", splits([31, 236, 33]), 64, case_nonfinite(31)),  # 1, 4, 1 tiles
            Job("ties", splits([100, 50, 150]), 32, case_ties(150)),
            Job("bf16", splits([64, 64, 172]), 64, case_bf16(7)),
            Job("overlap", [(0, 100), (100, 100), (150, 150)]),
            Job("tiny", splits([7, 0, 13]), 32, case_tiny(20)),  # V = 20 < K, an empty shard on rank 1
        ]
    if world == 4:
        return [
            Job("uneven", splits([1, 100, 64, 135]), 32, case_random(4)),
            Job("ties", splits([75, 75, 75, 75]), 32, case_ties(150)),
            Job("gap", [(0, 75), (75, 75), (150, 75), (226, 74)]),
        ]
    v8 = sum(W8_UNEVEN)
    return [  # world 8: tiny V and few rows (8 interpreter processes on CI's 2 cores)
        Job("uneven", splits(W8_UNEVEN), 32, case_ranks(W8_UNEVEN, 81)),
        Job("even_bf16_merged", splits([12] * 8), 32, case_ranks([12] * 8, 82, bf16=True), merge_local=True),
        Job("seed", splits(W8_UNEVEN), vocab=[v8] * 8, seeds=[1] * 7 + [5]),
        Job("overlap", [*splits(W8_UNEVEN)[:7], (v8 - 9, 8)], vocab=[v8] * 8),
    ]


# ---------------------------------------------------------------------------------------------------- workers


def _error(e: Exception) -> dict[str, Any]:
    return {"error": type(e).__name__, "text": str(e)}


def _run_setup(job: Job, rank: int, world: int) -> dict[str, Any]:
    """A setup with per-rank settings that must fail on every rank."""
    import torch

    from pp3 import pair
    from pp3.kernels.config import DEFAULT_LAUNCH
    from pp3.reference._constants import DEFAULT_TAU

    def pick(per_rank: list[Any] | None, default: Any) -> Any:
        return default if per_rank is None else per_rank[rank]

    offset, size = job.shards[rank]
    bad = job.bad if rank == job.bad_rank else ""
    x = torch.zeros((pick(job.rows, 2), size), dtype=torch.float64 if bad == "dtype" else torch.float32,
                    device="meta" if bad == "meta" else "cpu")
    vocab, tile, merge = pick(job.vocab, V), pick(job.tiles, job.tile), pick(job.merges, False)
    keys = (1.0, pick(job.seeds, 1), 2, 3)
    launch: Any = "fast" if bad == "launch" else DEFAULT_LAUNCH
    try:
        if pick(job.via, "check") == "propose":
            pair.propose_vocab_parallel(x, offset, vocab, *keys, pick(job.taus, DEFAULT_TAU), tile=tile,
                                        merge_local=merge, launch=launch)
        else:
            pair.check_shards(x, offset, vocab, *keys, pick(job.taus, DEFAULT_TAU), tile=tile, merge_local=merge)
    except (TypeError, ValueError) as e:
        return _error(e)
    return {"error": None}


def _run_job(job: Job, rank: int, world: int) -> dict[str, Any]:
    import torch

    from pp3 import pair

    if job.batch is None:
        return _run_setup(job, rank, world)
    bt = job.batch
    temp, seed, rnd, pos = bt.kernel_row_args("cpu")

    def args(shards: list[tuple[int, int]]) -> tuple[Any, ...]:
        offset, size = shards[rank]
        x = bt.torch_logits("cpu")[:, offset : offset + size]
        return (x.to(torch.float32) if rank in job.widen else x, offset, bt.v, temp, seed, rnd, pos, bt.tau)

    kw: dict[str, Any] = {"tile": job.tile, "merge_local": job.merge_local}
    if job.stale is not None:  # plan a, then plan b: a is stale, and b does not match a's arguments
        plan_a = pair.check_shards(*args(job.shards), **kw)
        plan_b = pair.check_shards(*args(job.stale), **kw)
        res: dict[str, Any] = {"error": None}
        for what, shards, plan in (("stale", job.shards, plan_a), ("mismatch", job.shards, plan_b)):
            try:
                pair.propose_vocab_parallel(*args(shards), **kw, plan=plan)
                res[what] = {"error": None}
            except (TypeError, ValueError) as e:
                res[what] = _error(e)
        out = pair.propose_vocab_parallel(*args(job.stale), **kw, plan=plan_b)  # the current plan still works
        return res | {f: getattr(out, f).numpy() for f in FIELDS}
    try:
        trusted = pair.check_shards(*args(job.shards), **kw) if job.trusted else None
        out = pair.propose_vocab_parallel(*args(job.shards), **kw, plan=trusted)
    except (TypeError, ValueError) as e:
        return _error(e)
    return {"error": None, **{f: getattr(out, f).numpy() for f in FIELDS}}


FAULTS = ("stall_setup", "stall_call", "mismatch_call", "dead")


def _run_faults(rank: int, results: dict[str, Any], save: Any) -> None:
    """Planted faults on 2 ranks, each in a process group of its own (a timed-out gather stays pending in its group,
    so no group is used after its fault). Rank 1 stalls, calls with a mismatched plan, or dies; rank 0 must raise
    ``CollectiveError`` within ``FAULT_TIMEOUT_S``."""
    import torch.distributed as dist

    from pp3 import pair

    bt = case_tiny(40)
    temp, seed, rnd, pos = bt.kernel_row_args("cpu")
    offset, size = splits([16, 24])[rank]
    args = (bt.torch_logits("cpu")[:, offset : offset + size], offset, bt.v, temp, seed, rnd, pos, bt.tau)

    def timed(fn: Any, **kw: Any) -> dict[str, Any]:
        t0 = time.monotonic()
        try:
            fn(*args, tile=32, **kw)
            res: dict[str, Any] = {"error": None}
        except (pair.CollectiveError, TypeError, ValueError) as e:
            res = _error(e)
        return res | {"seconds": time.monotonic() - t0}

    propose, fast = pair.propose_vocab_parallel, FAULT_TIMEOUT_S
    for name in FAULTS:
        g = dist.new_group([0, 1], timeout=timedelta(seconds=PG_TIMEOUT_S))
        if name == "stall_setup":  # rank 1 never joins the setup check
            if rank == 0:
                results[name] = timed(pair.check_shards, group=g, timeout=fast)
            else:
                time.sleep(fast + 0.5)
            continue
        plan = pair.check_shards(*args, group=g, tile=32, timeout=PG_TIMEOUT_S)
        if name == "stall_call":  # rank 1 never joins the per-position gather
            if rank == 0:
                results[name] = timed(propose, group=g, plan=plan, timeout=fast)
            else:
                time.sleep(fast + 0.5)
        elif name == "mismatch_call":  # rank 1 calls with merge_local=True against a per-tile plan
            results[name] = timed(propose, group=g, merge_local=rank == 1, plan=plan, timeout=fast)
        else:  # rank 1 dies after the setup
            if rank == 1:
                save()
                os._exit(0)
            results[name] = timed(propose, group=g, plan=plan, timeout=fast)


def _worker(rank: int, world: int, port: int, outdir: str, jobs: list[Job] | None) -> None:
    """Run ``jobs`` (``None``: the planted faults) on this rank; its results go to ``outdir/rank{rank}.pkl``."""
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported in this process
    import warnings

    warnings.filterwarnings("ignore")
    import torch.distributed as dist

    results: dict[str, Any] = {}
    path = Path(outdir, f"rank{rank}.pkl")
    code = 0
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=PG_TIMEOUT_S),
        )
        if jobs is None:
            _run_faults(rank, results, lambda: path.write_bytes(pickle.dumps(results)))
        else:
            for job in jobs:
                results[job.name] = _run_job(job, rank, world)
    except BaseException:
        results["__crash__"] = traceback.format_exc()
        code = 1
    finally:
        path.write_bytes(pickle.dumps(results))
        if dist.is_initialized() and jobs is not None:  # after the faults, gathers are pending: just exit
            dist.destroy_process_group()
    os._exit(code)  # exit explicitly: nothing left to run at interpreter shutdown


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(world: int, jobs: list[Job] | None) -> list[dict[str, Any]]:
    """Run ``jobs`` (``None``: the planted faults) on ``world`` gloo ranks; every rank's results, or a test failure
    (crash or timeout)."""
    import torch.multiprocessing as tmp

    outdir = tempfile.mkdtemp(prefix=f"pp3_pair_w{world}_")
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"  # inherited by the spawned workers
    try:
        ctx = tmp.start_processes(  # type: ignore[attr-defined, no-untyped-call]
            _worker, args=(world, _free_port(), outdir, jobs), nprocs=world, join=False, start_method="spawn"
        )
    finally:
        if saved is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = saved
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    failure = None
    try:
        while not ctx.join(timeout=max(0.1, deadline - time.monotonic()), grace_period=5.0):
            if time.monotonic() >= deadline:
                failure = f"{world} ranks still running after {JOIN_TIMEOUT_S:.0f} s (hung collective?)"
                break
    except Exception as e:  # a worker exited non-zero: its own traceback is in its results file
        failure = f"a worker failed: {e}"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
    results = []
    for r in range(world):
        path = Path(outdir, f"rank{r}.pkl")
        res = pickle.loads(path.read_bytes()) if path.exists() else {"__crash__": "no results written"}
        if "__crash__" in res:
            failure = (failure or "") + f"\nrank {r}:\n{res['__crash__']}"
        results.append(res)
    if failure:
        pytest.fail(failure)
    return results


_RUNS: dict[int, list[dict[str, Any]]] = {}


def run_world(world: int) -> list[dict[str, Any]]:
    """Every rank's results for the jobs of ``world`` ranks (world 0: the slow sweep, on 2 ranks; world -1: the
    planted faults, on 2 ranks), spawned once."""
    if world not in _RUNS:
        _RUNS[world] = spawn(2 if world <= 0 else world, None if world < 0 else jobs_for(world))
    return _RUNS[world]


def _job(world: int, name: str) -> Job:
    return next(j for j in jobs_for(world) if j.name == name)


# ---------------------------------------------------------------------------------------------------- tests

PROPOSALS = [
    pytest.param(2, "uneven", id="w2-uneven-97-203-tile32"),
    pytest.param(2, "uneven_plan_none", id="w2-uneven-203-97-tile64-plan=None"),
    pytest.param(2, "nonfinite", id="w2-nan-inf-one-shard"),
    pytest.param(2, "ties", id="w2-ties-across-boundary"),
    pytest.param(2, "ties_merged", id="w2-ties-merge_local"),
    pytest.param(2, "swapped", id="w2-rank1-holds-low-ids"),
    pytest.param(2, "mixed_dtype", id="w2-bf16-and-fp32-shards"),
    pytest.param(2, "stale", id="w2-current-plan-after-a-second-setup"),
    pytest.param(3, "uneven", id="w3-uneven-31-236-33"),
    pytest.param(3, "ties", id="w3-ties-across-boundary"),
    pytest.param(3, "bf16", id="w3-bf16-subnormals"),
    pytest.param(3, "tiny", id="w3-V20-7-0-13-empty-shard"),
    pytest.param(4, "uneven", id="w4-uneven-1-100-64-135"),
    pytest.param(4, "ties", id="w4-ties"),
    pytest.param(8, "uneven", id="w8-uneven-empty-shard-all-inf-shard-nan"),
    pytest.param(8, "even_bf16_merged", id="w8-even-bf16-merge_local"),
    *(pytest.param(0, j.name, id=f"w2-{j.name}", marks=pytest.mark.slow) for j in sweep_jobs()),
]


@pytest.mark.parametrize(("world", "name"), PROPOSALS)
def test_pair_equals_reference(world: int, name: str) -> None:
    job = _job(world, name)
    assert job.batch is not None
    want = reference(job.batch)
    for rank, res in enumerate(run_world(world)):
        got = res[name]
        assert got["error"] is None, f"rank {rank}: {got['error']}: {got.get('text')}"
        for f in FIELDS:
            assert_equal(got[f], want[f], f"rank {rank} of {world}, {name}: {f}")


BAD_SETUPS = [
    pytest.param(2, "overlap", "ShardError", "overlapping shards: rank 0 covers [0, 160) and rank 1 covers [150, 300)",
                 id="w2-overlap"),
    pytest.param(2, "gap", "ShardError", "gap: IDs [140, 150) are on no rank", id="w2-gap"),
    pytest.param(2, "past_vocab", "ShardError",
                 "rank 1: ValueError: vocab_offset: the shard [150, 301) ends past vocab_size = 300", id="w2-past-V"),
    pytest.param(2, "batch", "ShardError", "the batch size differs across ranks: rank 0 has B=2, rank 1 has B=3",
                 id="w2-batch"),
    pytest.param(2, "vocab", "ShardError", "vocab_size differs across ranks", id="w2-vocab"),
    pytest.param(2, "tile", "ShardError", "tile differs across ranks: rank 0 has tile=32, rank 1 has tile=64",
                 id="w2-tile"),
    pytest.param(2, "merge", "ShardError",
                 "merge_local differs across ranks: rank 0 has merge_local=False, rank 1 has merge_local=True",
                 id="w2-merge_local"),
    pytest.param(2, "merge_call", "ShardError",
                 "merge_local differs across ranks: rank 0 has merge_local=True, rank 1 has merge_local=False",
                 id="w2-merge_local-plan=None"),
    pytest.param(2, "calls", "ShardError",
                 "the call differs across ranks: rank 0 has check_shards, rank 1 has propose_vocab_parallel(plan=None)",
                 id="w2-different-calls"),
    pytest.param(2, "seed", "ShardError", "seed (digest) differs across ranks", id="w2-seed"),
    pytest.param(2, "tau", "ShardError", "tau differs across ranks", id="w2-tau"),
    pytest.param(3, "overlap", "ShardError",
                 "overlapping shards: rank 1 covers [100, 200) and rank 2 covers [150, 300)", id="w3-overlap"),
    pytest.param(4, "gap", "ShardError", "gap: IDs [225, 226) are on no rank", id="w4-gap"),
    pytest.param(8, "seed", "ShardError", "seed (digest) differs across ranks", id="w8-seed-on-rank-7"),
    pytest.param(8, "overlap", "ShardError",
                 "overlapping shards: rank 6 covers [75, 87) and rank 7 covers [86, 94); gap: IDs [94, 95) are on "
                 "no rank", id="w8-overlap-and-gap"),
]


@pytest.mark.parametrize(("world", "name", "kind", "text"), BAD_SETUPS)
def test_bad_setup_raises_on_every_rank(world: int, name: str, kind: str, text: str) -> None:
    results = run_world(world)
    for rank, res in enumerate(results):
        got = res[name]
        assert got["error"] == kind, f"rank {rank}: expected {kind}, got {got}"
        assert "pp3.pair.check_shards: inconsistent setup" in got["text"]
        assert text in got["text"], f"rank {rank}: {got['text']!r}"
    assert len({res[name]["text"] for res in results}) == 1, "every rank must report the same text"


CALLER_ERRORS = [
    pytest.param("dtype", 1, "TypeError",
                 "rank 1: TypeError: logits_shard: expected float32, float16 or bfloat16, got torch.float64",
                 id="w2-float64-on-rank-1"),
    pytest.param("meta", 0, "ValueError", "rank 0: ValueError: logits_shard: on meta", id="w2-meta-shard-on-rank-0"),
    pytest.param("meta_call", 1, "ValueError", "rank 1: ValueError: logits_shard: on meta",
                 id="w2-meta-shard-on-rank-1-plan=None"),
    pytest.param("launch", 1, "TypeError",
                 "rank 1: TypeError: launch: expected a pp3.kernels.config.LaunchConfig, got str",
                 id="w2-bad-launch-on-rank-1-plan=None"),
]


@pytest.mark.parametrize(("name", "bad_rank", "kind", "text"), CALLER_ERRORS)
def test_caller_error_on_one_rank_raises_on_every_rank(name: str, bad_rank: int, kind: str, text: str) -> None:
    """A caller error on one rank (a wrong dtype, a shard on meta, a bad launch=) is checked before the setup's
    gather and reported through it: every rank raises at once with the same text, naming the rank and the
    argument; none is left waiting in the collective (a meta shard used to take the gather to meta and a bad launch=
    used to raise before it, on that rank alone)."""
    results = [res[name] for res in run_world(2)]
    for rank, got in enumerate(results):
        want = {"TypeError": "TypeError", "ValueError": "ShardError"}[kind] if rank == bad_rank else "ShardError"
        assert got["error"] == want, f"rank {rank}: {got}"  # a type error keeps its type on the rank that made it
        assert text in got["text"], f"rank {rank}: {got['text']!r}"
    assert len({got["text"] for got in results}) == 1, "every rank must report the same text"


def test_stale_plan_raises_on_every_rank() -> None:
    """After a second setup, the first plan raises on every rank, and so do the first setup's arguments with the
    second plan (before the collective: no rank waits); the second plan with its own arguments gives the reference
    (test_pair_equals_reference, w2-current-plan-after-a-second-setup)."""
    for rank, res in enumerate(run_world(2)):
        stale, mismatch = res["stale"]["stale"], res["stale"]["mismatch"]
        assert stale["error"] == "ValueError", f"rank {rank}: {stale}"
        assert "stale plan: it comes from check_shards #" in stale["text"]
        assert mismatch["error"] == "ValueError", f"rank {rank}: {mismatch}"
        if rank == 1:
            assert "vocab_offset = 150 (the plan has 100)" in mismatch["text"]
        assert f"the shard's size V_r = 150 (the plan has {(100, 200)[rank]})" in mismatch["text"]


def test_faults_make_the_others_raise_within_the_timeout() -> None:
    """A rank that stalls (never joins), calls against the plan, or dies makes the other raise CollectiveError
    within pp3's timeout (FAULT_TIMEOUT_S), far below the process group's own (PG_TIMEOUT_S)."""
    r0, r1 = run_world(-1)
    bound = FAULT_TIMEOUT_S + 8.0  # the timeout, plus launch 1 under the interpreter on a loaded CI machine
    assert bound < PG_TIMEOUT_S
    for name in FAULTS:
        got = r0[name]
        assert got["error"] == "CollectiveError", f"{name}: rank 0 got {got}"
        assert got["seconds"] < bound, f"{name}: rank 0 raised after {got['seconds']:.1f} s"
        assert got["text"].startswith("pp3.pair: rank 0 of 2: the all_gather of"), got["text"]
        if name != "dead":  # a stalled peer: the full timeout
            assert got["seconds"] >= FAULT_TIMEOUT_S * 0.9, f"{name}: raised after {got['seconds']:.2f} s"
            assert f"did not complete within the timeout of {FAULT_TIMEOUT_S:g} s" in got["text"]
    bad = r1["mismatch_call"]
    assert bad["error"] == "ValueError" and bad["seconds"] < bound, bad
    assert "merge_local = True (the plan has False)" in bad["text"]


# ------------------------------------------------------------------------------------ single process: packing


@pytest.fixture(scope="module")
def kernels() -> Any:
    if os.environ.get("TRITON_INTERPRET") != "1":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("no CUDA GPU and TRITON_INTERPRET is not 1")
    from pp3 import pair
    from pp3.kernels import select

    return pair, select


def _torch_batch(bt: Call) -> tuple[Any, ...]:
    return (bt.torch_logits("cpu"), *bt.kernel_row_args("cpu"))


def _outputs(p: Any) -> dict[str, npt.NDArray[Any]]:
    return {f: getattr(p, f).cpu().numpy() for f in FIELDS}


SIMULATED = [
    pytest.param([V], 64, False, id="1-shard"),
    pytest.param([120, 0, 180], 32, False, id="3-shards-one-empty"),
    pytest.param([1, 31, 32, 33, 64, 65, 10, 64], 32, False, id="8-shards-1-31-32-33-64-65-10-64"),
    pytest.param([1, 31, 32, 33, 64, 65, 10, 64], 32, True, id="8-shards-merge_local"),
    pytest.param([100, 100, 100], 64, True, id="3-shards-merge_local"),
    pytest.param([3, 2, 3, 0, 5, 1, 4, 2], 32, False, id="8-shards-V20"),  # V < K: many key-0 lanes and tiles
    pytest.param([3, 2, 3, 0, 5, 1, 4, 2], 32, True, id="8-shards-V20-merge_local"),
    pytest.param([20], 32, False, id="1-shard-V20"),
]


@pytest.mark.parametrize(("sizes", "tile", "merge"), SIMULATED)
def test_packed_path_simulated(kernels: Any, sizes: list[int], tile: int, merge: bool) -> None:
    """The per-position path of propose_vocab_parallel with all_gather simulated by stacking the messages."""
    import torch

    pair, select = kernels
    bt = case_tiny(sum(sizes)) if sum(sizes) < V else case_nonfinite(sizes[0] if 1 < sizes[0] < V else 150)
    x, temp, seed, rnd, pos = _torch_batch(bt)
    b = x.shape[0]
    max_tiles = max(-(-s // tile) for s in sizes)
    msgs = [
        pair.shard_message(x[:, o : o + s], o, max_tiles, tile=tile, merge_local=merge) for o, s in splits(sizes)
    ]
    assert len({m.numel() for m in msgs}) == 1
    tiles = 1 if merge else max_tiles
    cands = pair.merge_messages(torch.stack(msgs), b, tiles)
    assert cands.keys.shape == (b, len(sizes) * tiles, 32) and cands.flags.dtype == torch.int32
    got = _outputs(select.finalize(cands, temp, seed, rnd, pos, bt.tau, vocab_size=sum(sizes)))
    want = reference(bt)
    for f in FIELDS:
        assert_equal(got[f], want[f], f"{len(sizes)} shards {sizes}, tile {tile}, merge_local={merge}: {f}")


def test_ranks_out_of_id_order_are_merged_in_id_order(kernels: Any) -> None:
    """Rank 0 holds the upper IDs: merged in rank order, finalize's candidates check fails every row (tiles out of
    ID order); merged in the plan's ID order, the rows equal the reference."""
    import torch

    pair, select = kernels
    bt = case_nonfinite(150)
    x, temp, seed, rnd, pos = _torch_batch(bt)
    b, v = x.shape
    h, t = v // 2, -(-(v - v // 2) // 64)
    msgs = torch.stack([pair.shard_message(x[:, h:], h, t, tile=64), pair.shard_message(x[:, :h], 0, t, tile=64)])
    rank_order = _outputs(select.finalize(pair.merge_messages(msgs, b, t), temp, seed, rnd, pos, bt.tau, vocab_size=v))
    assert (rank_order["status"] == select.BAD_CANDIDATES).all()
    got = _outputs(select.finalize(pair.merge_messages(msgs, b, t, (1, 0)), temp, seed, rnd, pos, bt.tau, vocab_size=v))
    want = reference(bt)
    for f in FIELDS:
        assert_equal(got[f], want[f], f"ID order: {f}")
    with pytest.raises(ValueError, match="order: expected a permutation"):
        pair.merge_messages(msgs, b, t, (0, 0))


@pytest.mark.parametrize(
    ("v", "tile"),
    [
        pytest.param(40, 32, id="V40-tile32"),  # two tiles, the second partial
        pytest.param(20, 32, id="V20-tile32"),  # V < K: key-0 lanes are among the first K of every row
        pytest.param(300, 64, id="V300-tile64"),
    ],
)
def test_empty_tiles_are_neutral(kernels: Any, v: int, tile: int) -> None:
    """finalize over the tiles plus all-zero tiles (keys 0, flags 0) anywhere == finalize over the tiles alone."""
    import torch

    _pair, select = kernels
    bt = case_tiny(v) if v < V else case_nonfinite(150)
    x, temp, seed, rnd, pos = _torch_batch(bt)
    cands = select.tile_candidates(x, tile=tile)
    base = _outputs(select.finalize(cands, temp, seed, rnd, pos, vocab_size=x.shape[1]))
    b, t, k = cands.keys.shape
    zk = torch.zeros((b, 1, k), dtype=torch.int64)
    zf = torch.zeros((b, 1), dtype=torch.int32)
    for where in (0, 1, t):
        padded = select.Candidates(
            keys=torch.cat([cands.keys[:, :where], zk, zk, cands.keys[:, where:]], dim=1).contiguous(),
            flags=torch.cat([cands.flags[:, :where], zf, zf, cands.flags[:, where:]], dim=1).contiguous(),
        )
        got = _outputs(select.finalize(padded, temp, seed, rnd, pos, vocab_size=x.shape[1]))
        for f in FIELDS:
            assert_equal(got[f], base[f], f"two empty tiles at {where}: {f}")


def test_message_layout(kernels: Any) -> None:
    """Keys first, then flags two per word; an odd B*T leaves a zero half-word; padding tiles are zero."""
    import torch

    pair, select = kernels
    x = torch.randn(3, 40)
    msg = pair.shard_message(x, 7, 3, tile=32)  # 2 tiles of its own, padded to 3
    assert msg.numel() == pair.message_words(3, 3) == 3 * 3 * 32 + 5
    own = select.tile_candidates(x, id_offset=7, tile=32)
    keys = msg[: 3 * 3 * 32].view(3, 3, 32)
    flags = msg[3 * 3 * 32 :].view(torch.int32)
    assert torch.equal(keys[:, :2], own.keys) and not keys[:, 2].any()
    assert torch.equal(flags[:9].view(3, 3)[:, :2], own.flags) and not flags[:9].view(3, 3)[:, 2].any()
    assert flags[9] == 0


def test_shard_message_rejects_too_many_tiles(kernels: Any) -> None:
    import torch

    pair, _select = kernels
    with pytest.raises(ValueError, match="max_tiles"):
        pair.shard_message(torch.zeros(1, 100), 0, 3, tile=32)


@pytest.fixture
def world_of_one(kernels: Any) -> Any:
    """A one-rank gloo group in this process (the real collective path, W = 1), destroyed after the test."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a default process group already exists in this process")
    store = dist.HashStore()  # type: ignore[attr-defined]
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=timedelta(seconds=30))
    try:
        yield kernels[0]
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("merge", [False, True], ids=["per-tile", "merge_local"])
def test_world_of_one(world_of_one: Any, merge: bool) -> None:
    pair = world_of_one
    bt = case_ties(150)
    x, temp, seed, rnd, pos = _torch_batch(bt)
    got = _outputs(pair.propose_vocab_parallel(x, 0, V, temp, seed, rnd, pos, bt.tau, tile=64, merge_local=merge))
    want = reference(bt)
    for f in FIELDS:
        assert_equal(got[f], want[f], f"W = 1, merge_local={merge}: {f}")


def test_too_many_tiles_rejected_at_setup(world_of_one: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """More tiles than launch 2 merges: a ShardError from check_shards (the same on every rank, so nobody waits)."""
    import torch

    pair = world_of_one
    monkeypatch.setattr(pair, "MAX_TILES", 4)
    x = torch.zeros(1, 300)
    with pytest.raises(pair.ShardError, match="that launch 2 merges; use a larger tile or merge_local=True"):
        pair.check_shards(x, 0, V, tile=32)
    with pytest.raises(pair.ShardError, match="that launch 2 merges"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=32)  # plan=None: the same check
    plan = pair.check_shards(x, 0, V, tile=32, merge_local=True)  # 1 tile: fine
    pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=32, merge_local=True, plan=plan)


def test_plan_records_the_setup(world_of_one: Any) -> None:
    import torch

    pair = world_of_one
    plan = pair.check_shards(torch.zeros(2, V), 0, V, tau=0.5, tile=64, merge_local=True)
    assert (plan.rank, plan.offsets, plan.sizes, plan.rows, plan.vocab_size) == (0, (0,), (V,), 2, V)
    assert (plan.tile, plan.merge_local, plan.tiles, plan.max_tiles, plan.tau) == (64, True, 1, 5, 0.5)
    assert plan.timeout_s == pair.DEFAULT_TIMEOUT_S == 300.0
    assert pair.check_shards(torch.zeros(2, V), 0, V, tile=64, timeout=7).timeout_s == 7.0


# Each: the call's arguments against a plan of check_shards(zeros(2, V), 0, V, tau=0.7, tile=64).
MISMATCHES = [
    pytest.param({"x": (2, V - 1), "offset": 1}, "vocab_offset = 1 (the plan has 0); the shard's size V_r = 299",
                 id="offset-and-size"),
    pytest.param({"x": (2, V - 1)}, "the shard's size V_r = 299 (the plan has 300)", id="size"),
    pytest.param({"x": (3, V)}, "the batch size = 3 (the plan has 2)", id="batch"),
    pytest.param({"vocab": V + 1}, "vocab_size = 301 (the plan has 300)", id="vocab"),
    pytest.param({"tile": 32}, "tile = 32 (the plan has 64)", id="tile"),
    pytest.param({"tile": None}, "tile = ", id="tile-None-is-auto-not-the-plan's"),
    pytest.param({"merge_local": True}, "merge_local = True (the plan has False)", id="merge_local"),
    pytest.param({"tau": 0.5}, "tau = 0.5 (the plan has 0.699999988079071)", id="tau"),
]


@pytest.mark.parametrize(("change", "text"), MISMATCHES)
def test_plan_mismatch_raises_before_work(world_of_one: Any, change: dict[str, Any], text: str) -> None:
    """A trusted call whose exchange settings differ from its plan's raises on the host before any collective."""
    import torch

    pair = world_of_one
    plan = pair.check_shards(torch.zeros(2, V), 0, V, tau=0.7, tile=64)
    x = torch.zeros(change.get("x", (2, V)))
    kw = {"tile": change.get("tile", 64), "merge_local": change.get("merge_local", False)}
    if change.get("tile", 64) is None and pair.checks.tile(None, V) == 64:
        pytest.skip("the automatic tile of V is the plan's")
    with pytest.raises(ValueError, match=r"plan: rank 0's call does not match the plan of check_shards #\d+: ") as e:
        pair.propose_vocab_parallel(x, change.get("offset", 0), change.get("vocab", V), 1.0, 1, 2, 3,
                                    change.get("tau", 0.7), **kw, plan=plan)
    assert text in str(e.value)


def test_stale_or_foreign_plan_raises(world_of_one: Any) -> None:
    import torch
    import torch.distributed as dist

    pair = world_of_one
    x = torch.zeros(2, V)
    first = pair.check_shards(x, 0, V, tile=64)
    second = pair.check_shards(x, 0, V, tile=64)  # the same setup again: still a new plan
    assert second.generation == first.generation + 1
    with pytest.raises(ValueError, match=r"stale plan: it comes from check_shards #\d+ .* but check_shards #\d+ "
                                         r"replaced it"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=64, plan=first)
    with pytest.raises(pair.ShardError):
        pair.check_shards(x, 0, V + 1, tile=64)  # a gap: a failed setup leaves no current plan
    with pytest.raises(ValueError, match="failed, so it has no current plan"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=64, plan=second)
    with pytest.raises(TypeError, match="plan: expected the ShardPlan"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=64, plan=True)
    other = dist.new_group([0])
    plan = pair.check_shards(x, 0, V, tile=64, group=other)
    with pytest.raises(ValueError, match="another process group"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=64, plan=plan)  # group=None: the default group
    with pytest.raises(ValueError, match="call does not match"):  # the subgroup's plan is its own
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, 0.5, tile=64, plan=plan, group=other)


def test_a_trusted_call_names_its_rank_and_the_argument(world_of_one: Any) -> None:
    """On the trusted path (no collective to agree through) a caller error raises before any work, naming the rank
    and the argument: a bad launch= and a shard on meta."""
    import torch

    pair = world_of_one
    x = torch.zeros(2, V)
    plan = pair.check_shards(x, 0, V, tile=64)
    with pytest.raises(TypeError, match=r"^pp3\.pair: rank 0: launch: expected a pp3\.kernels\.config\.LaunchConfig"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=64, plan=plan, launch="fast")
    with pytest.raises(ValueError, match=r"^pp3\.pair: rank 0: logits_shard: on meta"):
        pair.propose_vocab_parallel(x.to("meta"), 0, V, 1.0, 1, 2, 3, tile=64, plan=plan)


@pytest.mark.parametrize(("timeout", "kind"), [(0, "ShardError"), (-1.0, "ShardError"), (float("inf"), "ShardError"),
                                               ("5", "TypeError"), (True, "TypeError")])
def test_bad_timeout(world_of_one: Any, timeout: Any, kind: str) -> None:
    """A bad timeout is a caller error: gathered by check_shards, raised before any work on a trusted call."""
    import torch

    pair = world_of_one
    x = torch.zeros(2, V)
    with pytest.raises((pair.ShardError, TypeError), match="timeout: expected") as e:
        pair.check_shards(x, 0, V, tile=64, timeout=timeout)
    assert type(e.value).__name__ == kind
    plan = pair.check_shards(x, 0, V, tile=64)
    with pytest.raises((ValueError, TypeError), match="timeout: expected"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=64, plan=plan, timeout=timeout)
