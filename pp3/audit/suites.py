"""The cases of the parity suite (``pp3 verify``, ``make verify``): seeded generators of selector calls
(``pp3.testing.call.Call``, raw bits of each format) and of verifier calls (``pp3.testing.call.AcceptCall``, see
"the verifier" below), so every case can be rebuilt from its name and seed, and the hashed rows of the selector's
bulk suite. Three sizes: quick, standard (the interpreter's default) and full (a GPU's).

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
from pp3.testing.call import FORMATS, AcceptCall, Call
from pp3.testing.drafts import (
    BROKEN_DRAFTS,
    REJECT_Q,
    REJECT_SEED_ACCEPT,
    break_draft,
    point_drafts,
    two_slot_draft,
)
from pp3.testing.drafts import random_case as random_accept_case

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
          keys: tuple[npt.NDArray[np.uint64], ...], tau: float, tile: int | None) -> Call:
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


def bound_rows(v: int) -> list[tuple[str, npt.NDArray[np.float32]]]:
    """Named single rows at vocabulary size ``v`` built to defeat a selector's bound, above all one published while
    segments read (the one-launch and row selectors): all equal; 31 large entries spread out and the 32nd, 33rd and
    34th values equal in other segments; fewer than K finite entries, spread; early segments holding only small values
    (ascending, and the first K all in the last eighth). ``edge_rows`` holds the other adversaries (NaN and +inf rows,
    all -inf, fewer than K finite in one run, zeros of either sign)."""
    rows: list[tuple[str, npt.NDArray[np.float32]]] = [("all_equal_nonzero", np.full(v, 2.5, np.float32))]
    r = np.full(v, -20.0, np.float32)
    big = np.arange(v)[:: max(1, v // 31)][:31]
    r[big] = 10.0 + np.arange(big.size, dtype=np.float32)
    r[[p for p in (v // 3, (2 * v) // 3, v - 1) if p not in big]] = 5.0
    rows.append(("tie_32_33_across_segments", r))
    r = np.full(v, -np.inf, np.float32)
    at = np.arange(0, v, max(1, v // 20))
    r[at] = np.linspace(-3.0, 3.0, at.size, dtype=np.float32)
    rows.append(("few_finite_spread", r))
    rows.append(("ascending", np.linspace(-5.0, 5.0, v, dtype=np.float32)))
    r = np.linspace(-31.0, -30.0, v, dtype=np.float32)
    r[v - max(1, v // 8):] = np.linspace(10.0, 11.0, max(1, v // 8), dtype=np.float32)
    rows.append(("small_then_large", r))
    return rows


def bound_case(v: int, dtype: str, tile: int, seed: int) -> Call:
    """``bound_rows`` as one call (every second row T0), keyed by its own generator (``seed`` and ``v``)."""
    x = np.stack([row for _, row in bound_rows(v)])
    temp = np.ones(x.shape[0], np.float32)
    temp[1::2] = 0.0
    return _call(f"bounds[V={v},{dtype},tile={tile}]", dtype, x, temp,
                 keys_for(np.random.default_rng([seed, v]), x.shape[0]), DEFAULT_TAU, tile)


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


# A key whose §8 draw lands exactly on a slot boundary: for ``boundary_case``'s row the proposal uniform of seed
# BOUNDARY_SEED (round 0, position 0) is u = 10959365, the cumulative count of an odd number of slots' tickets, so
# a draw that takes u <= C_j for u < C_j, or a uniform whose low bit is lost, picks another slot. Found by search
# over seeds 0 .. 2^21 (tests/test_parity_bulk.py checks that u is a boundary).
BOUNDARY_SEED = 1793018
BOUNDARY_U = 10959365


def boundary_case(tile: int | None) -> Call:
    """One fp32 row of V = 300 distinct, decreasing logits at T = 1, keyed so that u equals a cumulative count."""
    x = np.linspace(-5.0, 5.0, 300, dtype=np.float32)[::-1].copy()[None]
    return _call(f"boundary[V=300,u={BOUNDARY_U},tile={tile}]", "fp32", x, np.ones(1, np.float32),
                 tuple(np.array([k], dtype=np.uint64) for k in (BOUNDARY_SEED, 0, 0)), DEFAULT_TAU, tile)


def split_sizes(rng: np.random.Generator, v: int, n: int) -> tuple[int, ...]:
    """``n`` uneven contiguous shard sizes (each >= 1) that add up to ``v``."""
    n = max(1, min(n, v))
    cuts = np.sort(rng.choice(np.arange(1, v), size=n - 1, replace=False)) if n > 1 else np.array([], np.int64)
    edges = [0, *cuts.tolist(), v]
    return tuple(int(edges[i + 1] - edges[i]) for i in range(n))


def suites(size: str, seed: int = 20261130) -> Iterator[tuple[str, Call]]:
    """(suite, case) pairs of a size: "full" (GPU sizes: the SPEC vocabularies, B up to 64), "standard" (the
    interpreter's: V up to 300) or "quick" (V = 1, 31, 33, 300: every launch-1 path of the standard sizes). The
    suites: edges, bounds (``bound_rows``, at the smallest tile: the most segments), random, tiles, shards."""
    if size not in ("quick", "standard", "full"):
        raise ValueError(f"size: expected 'quick', 'standard' or 'full', got {size!r}")
    full = size == "full"
    rng = np.random.default_rng(seed)
    vocab: tuple[int, ...]
    batches: tuple[int, ...]
    tiles: tuple[int, ...]
    if full:
        vocab = (1, 33, 4097, 32000, 128256, 151936, 163840, 262144)
        batches = (1, 4, 64)
        tiles = (1024, 2048, 4096)  # auto_tile picks among these
    else:
        vocab = (1, 31, 33, 300) if size == "quick" else (1, 31, 32, 33, 65, 300)
        batches = (1, 3)
        tiles = (32, 64)
    yield "edges", boundary_case(None if full else 32)
    for dtype in DTYPES:
        for v in vocab:
            yield "edges", edge_case(v, dtype, rng, tiles[-1] if full else 32)
    for dtype in DTYPES:
        for v in vocab:
            yield "bounds", bound_case(v, dtype, tiles[0] if full else 32, seed)
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


def invariance(size: str, seed: int = 20261130) -> Iterator[tuple[str, Call]]:
    """The invariance calls of a size (SPEC.md §9: a row's outputs depend on that row's inputs only), one random
    batch of 4 hostile rows per format at V = 33 (two tiles of 32 in the interpreter, ragged) and at every size:
    "order", the batch in reverse order, and "alone", its row 1 as a batch of one; each checked against the
    reference like any call, so a row whose outputs move with the batch fails."""
    if size not in ("quick", "standard", "full"):
        raise ValueError(f"size: expected 'quick', 'standard' or 'full', got {size!r}")
    rng = np.random.default_rng(seed + 2)
    for dtype in DTYPES:
        c = random_case(33, 4, dtype, rng, 32)
        yield "order", c.take([3, 2, 1, 0]).replace(name=f"{c.name}[rows 3,2,1,0]")
        yield "alone", c.take([1]).replace(name=f"{c.name}[row 1]")


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


# ------------------------------------------------------------------------------------------ the verifier (§11)
#
# Two kinds of verifier calls (``pp3.testing.call.AcceptCall``), both run on the kernel and the reference by
# ``pp3.audit.parity``:
#
# - ``accept_edges``: named calls that hit each clause of SPEC.md §11, built with ``pp3.testing.drafts`` as
#   tests/test_kernels_accept.py builds them: every temperature class (T0 +-0.0, sampled, +inf, NaN, < 0), masked and
#   flat target rows, NAN_LOGIT / POS_INF_LOGIT / ZERO_MASS target rows, truncated rounds, each invalid draft of
#   ``BROKEN_DRAFTS``, the rejected Lemire word, point-mass drafts on the argmax, uint64-edge keys and wrapping
#   positions, depths 1-8, fp32 / fp16 / bf16 and several tiles.
# - ``accept_plans``: the request rows of ``pp3.audit.accept_bulk`` (its plans, logits, kernel-proposed drafts and
#   corruptions), batch k at depth 1 + k mod 8 in format k mod 3, so 24 batches cover every (depth, format) pair.
#   Batch k of B rows holds rows [k B, (k + 1) B) of the seed, as ``python -m pp3.audit.accept_bulk --batch B`` on
#   the same device numbers them.

ACCEPT_SEED = 20261201


def _accept(case: dict[str, Any], name: str, fmt: str = "fp32", tile: int | None = None) -> AcceptCall:
    """An AcceptCall from a reference-convention case (fp32 target logits), rounded to ``fmt`` (RNE)."""
    call = AcceptCall.of(**case, tile=tile, name=name)
    if fmt != "fp32":
        call = call.replace(fmt=FORMATS[fmt], bits=_to_bits(call.bits.view(np.float32), fmt))
    return call


def accept_edges(v: int, tiles: tuple[int | None, ...] = (None,), seed: int = ACCEPT_SEED) -> Iterator[AcceptCall]:
    """The named verifier calls at vocabulary ``v`` (>= 3; the random rows at each of ``tiles``, None the
    verifier's default)."""
    rng = np.random.default_rng(seed + v)
    for temp, tag in ((1.0, "T=1"), (0.3, "T=0.3"), (np.inf, "T=inf"), (0.0, "T0")):
        for tile in tiles:
            case = random_accept_case(rng, 3, 2, v, temp)
            case["target_logits"][0, :, 1] = -np.inf  # a masked token
            case["target_logits"][1, 1, :] = 0.5  # a flat row: ties everywhere
            case["position"][2] = np.uint64(U64_EDGES[-1])  # positions wrap
            yield _accept(case, f"accept-random[{tag},V={v},D=2,tile={tile}]", tile=tile)
    for d in range(1, 9):  # every depth, every format, mixed temperature classes, uint64-edge keys
        fmt = DTYPES[d % 3]
        case = random_accept_case(rng, 4, d, v, 1.0)
        case["target_temperature"] = np.array([1.0, 0.0, 0.7, -0.0], dtype=np.float32)
        case["round"] = np.array([U64_EDGES[3], 0, U64_EDGES[-1], 1], dtype=np.uint64)
        case["seed"][0] = np.uint64(U64_EDGES[-1])
        case["position"][1] = np.uint64(U64_EDGES[-1] - d // 2)
        yield _accept(case, f"accept-depth[D={d},V={v},{fmt}]", fmt)
    case = random_accept_case(rng, 3, 3, v, 1.0)
    case["target_temperature"] = np.array([np.nan, -0.0, -1.0], dtype=np.float32)
    yield _accept(case, f"accept-bad-temperature[V={v}]")
    case = random_accept_case(rng, 6, 3, v, 1.0)
    yield _accept(case | point_drafts(np.argmax(case["target_logits"][:, :-1], axis=-1)), f"accept-argmax[V={v}]")


def accept_fixed(seed: int = ACCEPT_SEED) -> Iterator[AcceptCall]:
    """The named verifier calls of a fixed vocabulary: the rejected Lemire word (V = 5), failed target rows and a
    truncated round, and each invalid draft of ``BROKEN_DRAFTS`` (V = 40, as ``break_draft`` needs)."""
    yield _accept({"target_logits": np.zeros((1, 2, 5), dtype=np.float32), "target_temperature": 1.0,
                   **two_slot_draft(1, 1, 1, REJECT_Q, 3), "seed": REJECT_SEED_ACCEPT, "round": 0, "position": 0},
                  "accept-rejected-lemire-word[V=5]")
    case = random_accept_case(np.random.default_rng(seed + 4), 6, 2, 40, 1.0)
    case["target_logits"][0, 1, 3] = np.nan  # NAN_LOGIT at row 1
    case["target_logits"][1, 0, :] = -np.inf  # ZERO_MASS at row 0
    case["target_logits"][2, 2, 0] = np.inf  # POS_INF_LOGIT at the bonus row
    case["draft_status"][3, 0] = 1  # n = 0: the bonus from p_0; later rows ignored
    case["target_logits"][3, 1:, 0] = np.nan
    break_draft("token_zero_tickets", case["draft_ids"][4:], case["draft_tickets"][4:], case["draft_tokens"][4:])
    yield _accept(case, "accept-failed-rows-and-truncation[V=40]", tile=16)
    for kind in BROKEN_DRAFTS:
        case = random_accept_case(np.random.default_rng(seed + 21), 2, 2, 40, 1.0)
        break_draft(kind, case["draft_ids"], case["draft_tickets"], case["draft_tokens"])
        yield _accept(case, f"accept-invalid-draft[{kind},V=40]")


def accept_plan(k: int, b: int, v: int, device: Any, seed: int = ACCEPT_SEED) -> AcceptCall:
    """Batch ``k`` of ``pp3.audit.accept_bulk``'s request rows (``b`` rows at vocabulary ``v``), built on ``device``
    (its drafts proposed by ``pp3.kernels.propose`` there), as an AcceptCall on the host."""
    import torch

    from pp3.audit import accept_bulk

    d, fmt = accept_bulk.batch_layout(k)
    plan = accept_bulk.plan_batch(seed, np.arange(k * b, (k + 1) * b, dtype=np.int64), d, v)
    target, draft_logits = accept_bulk.build_logits(plan, d, fmt, v, device)
    draft = accept_bulk.propose_drafts(draft_logits, plan, device)
    del draft_logits
    accept_bulk.corrupt(target, draft, plan, v)
    raw = target.view(torch.int32 if fmt == "fp32" else torch.int16).cpu().numpy().view(FORMATS[fmt].dtype)
    return AcceptCall(FORMATS[fmt], raw, plan.temperature, draft["draft_tokens"], draft["draft_status"],
                      draft["draft_ids"], draft["draft_tickets"], plan.seed, plan.round, plan.position,
                      name=f"accept-plans[seed={seed},batch={k},B={b},V={v},D={d},{fmt}]")


# Per size: the named calls' (vocabulary, tiles), and the request rows' (vocabulary, batches, rows per batch).
# quick: depths 1-3 of the request rows, each format once; standard (the interpreter's default): every (depth,
# format) pair, tiles of 8 and 16 (V = 37: 5 and 3 tiles, ragged); full (a GPU): the vocabularies of the
# selector's full suite, 24 batches each.
AcceptSizes = tuple[tuple[tuple[int, tuple[int | None, ...]], ...], tuple[tuple[int, int, int], ...]]
ACCEPT_SIZES: dict[str, AcceptSizes] = {
    "quick": (((37, (None,)),), ((40, 3, 6),)),
    "standard": (((37, (None, 8, 16)), (97, (None,))), ((40, 24, 4), (97, 3, 4))),
    "full": (((40, (None, 8, 16)), (4097, (None, 256)), (32000, (None,))),
             ((163840, 24, 64), (262144, 24, 16), (151936, 8, 16))),
}


def accept_invariance(size: str, seed: int = ACCEPT_SEED) -> Iterator[tuple[str, AcceptCall]]:
    """The verifier's invariance calls (SPEC.md §11.11), as ``invariance``'s: a batch of 4 rows at depth 3, V = 37,
    mixed temperature classes and uint64-edge keys, in reverse order ("accept-order") and its row 1 alone
    ("accept-alone")."""
    if size not in ACCEPT_SIZES:
        raise ValueError(f"size: expected one of {sorted(ACCEPT_SIZES)}, got {size!r}")
    case = random_accept_case(np.random.default_rng(seed + 3), 4, 3, 37, 1.0)
    case["target_temperature"] = np.array([1.0, 0.0, 0.7, np.inf], dtype=np.float32)
    case["seed"][0] = np.uint64(U64_EDGES[-1])
    c = _accept(case, "accept-invariance[V=37,D=3]")
    yield "accept-order", c.take([3, 2, 1, 0]).replace(name=f"{c.name}[rows 3,2,1,0]")
    yield "accept-alone", c.take([1]).replace(name=f"{c.name}[row 1]")


def accept_suites(size: str, device: Any, seed: int = ACCEPT_SEED) -> Iterator[tuple[str, AcceptCall]]:
    """(suite, verifier call) pairs of a size (``ACCEPT_SIZES``): the named calls, then the request rows."""
    edge_sizes, plan_sizes = ACCEPT_SIZES[size]
    for call in accept_fixed(seed):
        yield "accept-edges", call
    for v, tiles in edge_sizes:
        for call in accept_edges(v, tiles, seed):
            yield "accept-edges", call
    for v, batches, b in plan_sizes:
        for k in range(batches):
            yield "accept-plans", accept_plan(k, b, v, device, seed)
