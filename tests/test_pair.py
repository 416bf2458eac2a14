"""``pp3.pair``: the vocabulary-parallel selector over torch.distributed equals the unsharded reference (SPEC.md §9).

Multi-process tests spawn W = 2, 3 and 4 gloo ranks on 127.0.0.1 (and, marked slow, a sweep of random splits on
2 ranks); each rank runs its kernels through Triton's interpreter, so one spawn per world size runs every case
of that size and the tests below read its results. Every rank's four fields must equal ``pp3.reference.propose``
on the whole rows bit for bit. Bad setups must raise the same error text on every rank. Single-process tests
cover the message packing and padding path (the all_gather simulated by stacking) for 1, 3 and 8 shards, and the
neutrality of empty tiles.
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
PG_TIMEOUT_S = 60.0  # a rank left alone in a collective errors out after this
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


def splits(sizes: list[int]) -> list[tuple[int, int]]:
    """(offset, size) per rank for contiguous shards of the given sizes, in rank order."""
    offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
    return [(int(o), int(s)) for o, s in zip(offs, sizes, strict=True)]


@dataclasses.dataclass(frozen=True)
class Job:
    """One collective call on every rank: a proposal (``batch``) or a bad setup check (``setup``)."""

    name: str
    shards: list[tuple[int, int]]  # (vocab_offset, size) per rank
    tile: int = 32
    batch: Call | None = None
    checked: bool = True  # check_shards first, then propose with checked=True; False: propose checks itself
    merge_local: bool = False
    rows: list[int] | None = None  # per rank, for setup jobs (default 2)
    vocab: list[int] | None = None  # per rank, for setup jobs (default V)
    bad_dtype_rank: int = -1  # this rank passes float64 logits (a caller error on one rank only)


def sweep_jobs() -> list[Job]:
    """The slow tier (W = 2): random split points, tiles 32 to 128, per-tile and merged messages."""
    rng = np.random.default_rng(2026)
    jobs = []
    for i in range(9):
        split = int(rng.integers(1, V))
        batch = (case_random(10 + i), case_nonfinite(split), case_ties(split))[i % 3]
        jobs.append(Job(f"sweep{i}", splits([split, V - split]), 32 << (i % 3), batch, merge_local=i % 2 == 1))
    return jobs


def jobs_for(world: int) -> list[Job]:
    if world == 0:
        return sweep_jobs()
    if world == 2:
        return [
            Job("uneven", splits([97, 203]), 32, case_random(1)),  # 4 vs 7 tiles: padding
            Job("uneven_unchecked", splits([203, 97]), 64, case_random(2), checked=False),  # 4 vs 2 tiles
            Job("nonfinite", splits([200, 100]), 64, case_nonfinite(200)),
            Job("ties", splits([150, 150]), 32, case_ties(150)),
            Job("ties_merged", splits([150, 150]), 64, case_ties(150), merge_local=True),
            # rank 1 holds the low IDs: the rank order does not matter
            Job("swapped", [(120, 180), (0, 120)], 32, case_nonfinite(120)),
            Job("overlap", [(0, 160), (150, 150)]),
            Job("gap", [(0, 140), (150, 150)]),
            Job("batch", [(0, 150), (150, 150)], rows=[2, 3]),
            Job("vocab", [(0, 150), (150, 150)], vocab=[300, 301]),
            Job("dtype", [(0, 150), (150, 150)], bad_dtype_rank=1),
            Job("no_plan", splits([150, 150]), 128, case_random(3)),  # checked=True without check_shards
        ]
    if world == 3:
        return [
            Job("uneven", splits([31, 236, 33]), 64, case_nonfinite(31)),  # 1, 4, 1 tiles
            Job("ties", splits([100, 50, 150]), 32, case_ties(150)),
            Job("bf16", splits([64, 64, 172]), 64, case_bf16(7)),
            Job("overlap", [(0, 100), (100, 100), (150, 150)]),
            Job("tiny", splits([7, 0, 13]), 32, case_tiny(20)),  # V = 20 < K, an empty shard on rank 1
        ]
    return [
        Job("uneven", splits([1, 100, 64, 135]), 32, case_random(4)),
        Job("ties", splits([75, 75, 75, 75]), 32, case_ties(150)),
        Job("gap", [(0, 75), (75, 75), (150, 75), (226, 74)]),
    ]


# ---------------------------------------------------------------------------------------------------- workers


def _run_job(job: Job, rank: int, world: int) -> dict[str, Any]:
    import torch

    from pp3 import pair

    offset, size = job.shards[rank]
    if job.batch is None:  # a setup check that must fail on every rank
        rows = (job.rows or [2] * world)[rank]
        vocab = (job.vocab or [V] * world)[rank]
        dtype = torch.float64 if rank == job.bad_dtype_rank else torch.float32
        x = torch.zeros((rows, size), dtype=dtype)
        try:
            pair.check_shards(x, offset, vocab, 1.0, 1, 2, 3, group=None, tile=job.tile)
        except (TypeError, ValueError) as e:
            return {"error": type(e).__name__, "text": str(e)}
        return {"error": None}
    bt = job.batch
    temp, seed, rnd, pos = bt.kernel_row_args("cpu")
    args = (bt.torch_logits("cpu")[:, offset : offset + size], offset, bt.v, temp, seed, rnd, pos, bt.tau)
    try:
        if job.checked and job.name != "no_plan":
            pair.check_shards(*args, tile=job.tile)
        out = pair.propose_vocab_parallel(
            *args, tile=job.tile, checked=job.checked, merge_local=job.merge_local
        )
    except (TypeError, ValueError) as e:
        return {"error": type(e).__name__, "text": str(e)}
    return {"error": None, **{f: getattr(out, f).numpy() for f in FIELDS}}


def _worker(rank: int, world: int, port: int, outdir: str, jobs: list[Job]) -> None:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported in this process
    import warnings

    warnings.filterwarnings("ignore")
    import torch.distributed as dist

    results: dict[str, Any] = {}
    code = 0
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=PG_TIMEOUT_S),
        )
        for job in jobs:
            results[job.name] = _run_job(job, rank, world)
    except BaseException:
        results["__crash__"] = traceback.format_exc()
        code = 1
    finally:
        Path(outdir, f"rank{rank}.pkl").write_bytes(pickle.dumps(results))
        if dist.is_initialized():
            dist.destroy_process_group()
    os._exit(code)  # exit explicitly: nothing left to run at interpreter shutdown


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(world: int, jobs: list[Job]) -> list[dict[str, Any]]:
    """Run ``jobs`` on ``world`` gloo ranks; every rank's results, or a test failure (crash or timeout)."""
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
    """Every rank's results for the jobs of ``world`` ranks (world 0: the slow sweep, on 2 ranks), spawned once."""
    if world not in _RUNS:
        _RUNS[world] = spawn(world or 2, jobs_for(world))
    return _RUNS[world]


def _job(world: int, name: str) -> Job:
    return next(j for j in jobs_for(world) if j.name == name)


# ---------------------------------------------------------------------------------------------------- tests

PROPOSALS = [
    pytest.param(2, "uneven", id="w2-uneven-97-203-tile32"),
    pytest.param(2, "uneven_unchecked", id="w2-uneven-203-97-tile64-checked=False"),
    pytest.param(2, "nonfinite", id="w2-nan-inf-one-shard"),
    pytest.param(2, "ties", id="w2-ties-across-boundary"),
    pytest.param(2, "ties_merged", id="w2-ties-merge_local"),
    pytest.param(2, "swapped", id="w2-rank1-holds-low-ids"),
    pytest.param(3, "uneven", id="w3-uneven-31-236-33"),
    pytest.param(3, "ties", id="w3-ties-across-boundary"),
    pytest.param(3, "bf16", id="w3-bf16-subnormals"),
    pytest.param(3, "tiny", id="w3-V20-7-0-13-empty-shard"),
    pytest.param(4, "uneven", id="w4-uneven-1-100-64-135"),
    pytest.param(4, "ties", id="w4-ties"),
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
    pytest.param(2, "batch", "ShardError", "the batch size differs across ranks: rank 0 has B=2, rank 1 has B=3",
                 id="w2-batch"),
    pytest.param(2, "vocab", "ShardError", "vocab_size differs across ranks", id="w2-vocab"),
    pytest.param(3, "overlap", "ShardError",
                 "overlapping shards: rank 1 covers [100, 200) and rank 2 covers [150, 300)", id="w3-overlap"),
    pytest.param(4, "gap", "ShardError", "gap: IDs [225, 226) are on no rank", id="w4-gap"),
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


def test_caller_error_on_one_rank_raises_on_every_rank() -> None:
    a, b = (res["dtype"] for res in run_world(2))
    assert (a["error"], b["error"]) == ("ShardError", "TypeError")  # its own type on the offending rank
    assert a["text"] == b["text"]
    assert "rank 1: TypeError: logits_shard: expected float32, float16 or bfloat16, got torch.float64" in a["text"]


def test_checked_needs_check_shards() -> None:
    for res in run_world(2):
        assert res["no_plan"]["error"] == "ValueError"
        assert "call check_shards(...) on every rank first" in res["no_plan"]["text"]


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
    got = _outputs(select.finalize(cands, temp, seed, rnd, pos, bt.tau))
    want = reference(bt)
    for f in FIELDS:
        assert_equal(got[f], want[f], f"{len(sizes)} shards {sizes}, tile {tile}, merge_local={merge}: {f}")


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
    base = _outputs(select.finalize(cands, temp, seed, rnd, pos))
    b, t, k = cands.keys.shape
    zk = torch.zeros((b, 1, k), dtype=torch.int64)
    zf = torch.zeros((b, 1), dtype=torch.int32)
    for where in (0, 1, t):
        padded = select.Candidates(
            keys=torch.cat([cands.keys[:, :where], zk, zk, cands.keys[:, where:]], dim=1).contiguous(),
            flags=torch.cat([cands.flags[:, :where], zf, zf, cands.flags[:, where:]], dim=1).contiguous(),
        )
        got = _outputs(select.finalize(padded, temp, seed, rnd, pos))
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


def test_too_many_tiles_rejected_before_work(world_of_one: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """More tiles than launch 2 merges: a ValueError before launch 1 (the same on every rank, so nobody waits)."""
    import torch

    pair = world_of_one
    monkeypatch.setattr(pair, "MAX_TILES", 4)
    x = torch.zeros(1, 300)
    pair.check_shards(x, 0, V, tile=32)
    with pytest.raises(ValueError, match="that launch 2 merges; use a larger tile or merge_local=True"):
        pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=32, checked=True)
    pair.propose_vocab_parallel(x, 0, V, 1.0, 1, 2, 3, tile=32, checked=True, merge_local=True)  # 1 tile: fine
