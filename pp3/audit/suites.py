"""The cases of the parity suite (``make verify``): seeded generators of selector calls (``pp3.testing.call.Call``,
raw bits of each format), so every case can be rebuilt from its name and seed, and the hashed rows of the bulk suite.

Which kernel path each vocabulary hits (launch 1's ``_top_k``, launch 2's merge; pp3/kernels/_select.py): V = 1, 31,
32, 33 one tile of N <= 4K entries (all-pairs rank) and V < K; 65, 300 several tiles of 32 / 64 in the interpreter;
4097 a ragged last tile; 32000, 128256, 163840, 262144 full tiles of the automatic size (launch 2: up to 45 tiles by
second candidates, more by tile maxima); 151936 a partial last tile with fewer than 32 nonempty groups (launch 1's
column-maxima threshold).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import DEFAULT_TAU
from pp3.testing.call import FORMATS, Call

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal
F32_SUB = float(np.float32(1.4e-45))  # smallest subnormal
U64_EDGES = (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1)
DTYPES = ("fp32", "fp16", "bf16")


def _to_bits(x32: npt.NDArray[np.float32], fmt: str) -> npt.NDArray[Any]:
    """Round fp32 values to the format (RNE) and return its raw bits."""
    if fmt == "fp32":
        return x32.astype(np.float32).view(np.uint32)
    if fmt == "fp16":
        with np.errstate(all="ignore"):
            return x32.astype(np.float16).view(np.uint16)
    bits = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    is_nan = np.isnan(x32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even on the upper 16 bits
    out = np.where(is_nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)
    return out


def _call(name: str, fmt: str, x: npt.NDArray[np.float32], temp: npt.NDArray[np.float32],
          keys: tuple[npt.NDArray[np.uint64], ...], tau: float, tile: int) -> Call:
    seed, rnd, pos = (tuple(int(v) for v in k) for k in keys)
    return Call(FORMATS[fmt], _to_bits(x, fmt), temp, seed, rnd, pos, tau, tile, True, name=name)


def keys_for(rng: np.random.Generator, b: int) -> tuple[npt.NDArray[np.uint64], ...]:
    """seed, round, position per row: random uint64 with the extremes mixed in."""
    out = []
    for _ in range(3):
        v = rng.integers(0, 1 << 64, size=b, dtype=np.uint64)
        edge = rng.random(b) < 0.25
        v[edge] = np.array(U64_EDGES, dtype=np.uint64)[rng.integers(0, len(U64_EDGES), size=int(edge.sum()))]
        out.append(v)
    return tuple(out)


def temperatures(rng: np.random.Generator, b: int, mix: bool) -> npt.NDArray[np.float32]:
    """Sampled rows (1.0), or with ``mix`` every row class: T0 (+0/-0), sampled, +inf, and bad (NaN, < 0)."""
    if not mix:
        return np.ones(b, dtype=np.float32)
    pool = np.array([1.0, 0.5, 2.0, 0.0, -0.0, np.inf, 1.0, 1.0, 0.0, np.nan, -1.0], dtype=np.float32)
    out: npt.NDArray[np.float32] = pool[rng.integers(0, len(pool), size=b)]
    return out


def random_rows(rng: np.random.Generator, b: int, v: int, *, hostile: bool) -> npt.NDArray[np.float32]:
    """Random fp32 logit rows; ``hostile`` mixes in ties, masks, signed zeros, extremes, NaN and +inf."""
    x: npt.NDArray[np.float32] = (rng.standard_normal((b, v)) * rng.choice([1.0, 4.0, 30.0])).astype(np.float32)
    if not hostile:
        return x
    for r in range(b):
        kind = int(rng.integers(0, 10))
        if kind == 0:  # ties: few distinct values
            x[r] = rng.choice(np.array([0.0, -0.0, 1.0, 2.5, -3.0], dtype=np.float32), v)
        elif kind == 1:  # dense mask, few finite entries
            keep = rng.random(v) < min(1.0, 40.0 / v)
            x[r, ~keep] = -np.inf
        elif kind == 2:  # all masked
            x[r] = -np.inf
        elif kind == 3:  # NaN somewhere
            x[r, rng.integers(0, v)] = np.nan
        elif kind == 4:  # +inf somewhere
            x[r, rng.integers(0, v)] = np.inf
        elif kind == 5:  # extremes: gaps that overflow the difference, subnormal and zero exponentials
            pool = np.array([F32_MAX, -F32_MAX, 0.0, -60.0, -72.0, -100.0, F32_SUB, -F32_SUB], dtype=np.float32)
            x[r] = rng.choice(pool, v)
        elif kind == 6:  # equal maxima at both ends
            x[r, 0] = x[r, -1] = np.float32(x[r].max() + 1.0)
    return x


def edge_rows(v: int) -> list[tuple[str, npt.NDArray[np.float32]]]:
    """Named single rows that hit each SPEC clause at vocabulary size ``v``."""
    rows: list[tuple[str, npt.NDArray[np.float32]]] = []
    base = np.linspace(-5.0, 5.0, v, dtype=np.float32)[::-1].copy()  # distinct, decreasing

    def add(name: str, row: npt.NDArray[np.float32]) -> None:
        rows.append((name, row.astype(np.float32)))

    add("distinct", base)
    add("all_equal", np.zeros(v, np.float32))
    add("signed_zero_ties", np.where(np.arange(v) % 2 == 0, np.float32(-0.0), np.float32(0.0)))
    add("all_masked", np.full(v, -np.inf, np.float32))
    one = np.full(v, -np.inf, np.float32)
    one[v // 2] = -7.5
    add("one_finite", one)
    for name, pos in (("nan_first", 0), ("nan_last", v - 1), ("nan_mid", v // 2)):
        r = base.copy()
        r[pos] = np.nan
        add(name, r)
    r = np.full(v, -np.inf, np.float32)
    r[v - 1] = np.inf
    add("pos_inf_only", r)
    r = base.copy()
    r[0], r[v - 1] = np.inf, np.nan
    add("nan_and_pos_inf", r)
    r = base.copy()
    r[v - 1] = r[0]
    add("tie_max_first_last", r)
    r = np.full(v, -F32_MAX, np.float32)
    r[v // 3] = F32_MAX
    add("overflowing_difference", r)
    r = np.full(v, -np.inf, np.float32)
    r[: min(v, 33)] = np.float32(0.0) - np.arange(min(v, 33), dtype=np.float32) * np.float32(3.25)
    add("subnormal_and_zero_weights", r)
    r = np.full(v, -np.inf, np.float32)
    r[: min(v, 31)] = 1.0
    add("fewer_than_k_finite", r)
    r = np.full(v, F32_SUB, np.float32)
    r[::3] = -F32_SUB
    add("subnormal_logits", r)
    return rows


def edge_case(v: int, dtype: str, rng: np.random.Generator, tile: int, tau: float = DEFAULT_TAU) -> Call:
    named = edge_rows(v)
    x = np.stack([row for _, row in named])
    b = x.shape[0]
    temp = np.ones(b, np.float32)
    temp[1::4] = 0.0
    return _call(f"edges[V={v},{dtype},tile={tile}]", dtype, x, temp, keys_for(rng, b), tau, tile)


def random_case(
    v: int, b: int, dtype: str, rng: np.random.Generator, tile: int, *, hostile: bool = True, mix: bool = True
) -> Call:
    x = random_rows(rng, b, v, hostile=hostile)
    keys = keys_for(rng, b)
    taus = (DEFAULT_TAU, 1.0, 0.05, 3.0, 1e-30, 1e30)
    tau = float(np.float32(taus[int(rng.integers(0, len(taus)))]))
    return _call(f"random[V={v},B={b},{dtype},tile={tile}]", dtype, x, temperatures(rng, b, mix), keys, tau, tile)


def split_sizes(rng: np.random.Generator, v: int, n: int) -> tuple[int, ...]:
    """``n`` uneven contiguous shard sizes (each >= 1) that add up to ``v``."""
    n = max(1, min(n, v))
    cuts = np.sort(rng.choice(np.arange(1, v), size=n - 1, replace=False)) if n > 1 else np.array([], np.int64)
    edges = [0, *cuts.tolist(), v]
    return tuple(int(edges[i + 1] - edges[i]) for i in range(n))


def suites(full: bool, seed: int = 20261130) -> Iterator[tuple[str, Call]]:
    """(suite, case) pairs. ``full`` = GPU sizes (SPEC vocabularies, B up to 64); else interpreter sizes."""
    rng = np.random.default_rng(seed)
    vocab: tuple[int, ...]
    batches: tuple[int, ...]
    tiles: tuple[int, ...]
    if full:
        vocab = (1, 33, 4097, 32000, 128256, 151936, 163840, 262144)
        batches = (1, 4, 64)
        tiles = (1024, 2048, 4096)  # auto_tile picks among these
    else:
        vocab = (1, 31, 32, 33, 65, 300)
        batches = (1, 3)
        tiles = (32, 64)
    for dtype in DTYPES:
        for v in vocab:
            yield "edges", edge_case(v, dtype, rng, tiles[-1] if full else 32)
    for dtype in DTYPES:
        for v in vocab:
            for b in batches:
                yield "random", random_case(v, b, dtype, rng, tiles[int(rng.integers(0, len(tiles)))])
    base_v = 163840 if full else 200
    for tile in tiles + ((512,) if full else (128,)):
        yield "tiles", random_case(base_v, 4, "fp32", np.random.default_rng(seed + 1), tile)
    for n in (2, 3, 4, 8):
        c = random_case(base_v if full else 150, 4, "bf16", rng, tiles[0])
        sizes = split_sizes(rng, c.v, n)
        yield "shards", c.replace(cuts=tuple(np.cumsum(sizes[:-1]).tolist()), name=f"{c.name}[shards={sizes}]")


_M32 = 0xFFFFFFFF


def _mix(h: Any) -> Any:
    """A 32-bit integer mixer written once for NumPy uint64 arrays and torch int64 tensors (no product >= 2^63)."""
    h = h ^ (h >> 16)
    h = (h * 0x045D9F3B) & _M32
    h = h ^ (h >> 16)
    h = (h * 0x045D9F3B) & _M32
    return h ^ (h >> 16)


def hashed_rows(row_seed: npt.NDArray[np.uint64], v: int) -> npt.NDArray[np.float32]:
    """Logit rows defined by integer hashing, so the GPU (``hashed_rows_torch``) builds the same bits without
    moving them: values k·2^-20 for 24-bit k (many ties), with masked, NaN, +inf and all-masked rows by seed."""
    s = (np.asarray(row_seed, dtype=np.uint64) & _M32)[:, None]
    i = np.arange(v, dtype=np.uint64)[None, :]
    h = _mix((i * np.uint64(0x2545F491) + s) & np.uint64(_M32))
    kind = s % np.uint64(16)
    k = np.where(kind == 0, ((h >> np.uint64(28)) << np.uint64(20)), h >> np.uint64(8)).astype(np.int64) - (1 << 23)
    x = k.astype(np.float32) * np.float32(2.0**-20)  # exact: |k| < 2^24, a power-of-two scale
    col = ((s >> np.uint64(4)) % np.uint64(v)).astype(np.int64)
    hit = np.arange(v)[None, :] == col
    x = np.where((kind == 1) & ((h & np.uint64(1023)) != 0), np.float32(-np.inf), x)
    x = np.where(kind == 2, np.float32(-np.inf), x)
    x = np.where((kind == 3) & hit, np.float32(np.nan), x)
    x = np.where((kind == 4) & hit, np.float32(np.inf), x)
    return np.asarray(x, dtype=np.float32)


def hashed_rows_torch(row_seed: Any, v: int) -> Any:
    """``hashed_rows`` on the device of ``row_seed`` (an int64 tensor): the same bits."""
    import torch

    s = (row_seed.to(torch.int64) & _M32)[:, None]
    i = torch.arange(v, dtype=torch.int64, device=row_seed.device)[None, :]
    h = _mix((i * 0x2545F491 + s) & _M32)
    kind = s % 16
    k = torch.where(kind == 0, (h >> 28) << 20, h >> 8) - (1 << 23)
    x = k.to(torch.float32) * (2.0**-20)
    col = (s >> 4) % v
    hit = torch.arange(v, device=row_seed.device)[None, :] == col
    x = torch.where((kind == 1) & ((h & 1023) != 0), float("-inf"), x)
    x = torch.where(kind == 2, float("-inf"), x)
    x = torch.where((kind == 3) & hit, float("nan"), x)
    return torch.where((kind == 4) & hit, float("inf"), x).contiguous()
