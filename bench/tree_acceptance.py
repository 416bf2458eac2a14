"""Acceptance of draft trees, measured (SPEC.md §12; docs/TREES.md): accepted tokens per verification step of sampled
trees (``tree-draw-dyadic24-v1`` children verified by ``accept-tree-dyadic24-v1``), deterministic top-k trees (verified
by the walk, ``walk-tree-dyadic24-v1``) and chains, at equal numbers of verified target positions, at T = 0, 0.5, 1,
2, on two Markov drafter/target pairs, with the NumPy reference.

    python -m bench.tree_acceptance [--quick] [--pairs v8 zipf32k] [--json PATH] [--csv PATH] [--plot PNG]

Each measurement is one speculation round from each of n independent contexts (the last emitted token): tokens per
step = E[accepted + 1], the tokens one target forward over the N + 1 nodes yields, with its standard error. Budgets
are numbers N of draft nodes (the target scores N + 1 positions); budgets 6, 8 and 20 have a chain and three tree
shapes, budgets 2 and 3 a chain as deep as those trees; each is drafted two ways: "sampled" (children without
replacement from q, §12.6) and "top-k" (the first k, the walk; for a chain, greedy drafting). Every shape and way of
drafting is measured on the same contexts (per pair and temperature). The drafter samples at tau = T (any tau at T0,
where drafts are ranked). The pairs:

- ``v8``: the end-to-end audit's pair (``pp3.audit.e2e.make_setup``: V = 8, a dyadic drafter table, the target =
  drafter + N(0, 0.5^2) noise with one masked token per row); contexts uniform.
- ``zipf32k``: V = 32768 Zipfian Markov rows. Context x ranks the vocabulary by an affine permutation
  r_x(y) = (a_x y + b_x) mod V; the target's logits are -s_x ln(1 + r_x(y)) + 0.5 n_x(y) with a per-context exponent
  s_x uniform in [1.2, 3) (sharp and flat contexts), the drafter's -0.85 s_x ln(1 + r_x(y)) + 1.0 n'_x(y) (flatter
  and noisier, as a small model), n and n' independent standard normals (gathered from fixed tables through other
  affine permutations). At T = 1 a chain accepts about 0.64 of its drafts and the target's top token has about 0.6 of
  the mass; contexts uniform.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.audit.e2e_tree import Mode, parents_of, tree_round
from pp3.reference import AcceptStatus
from pp3.testing.stamp import environment

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]

TEMPERATURES = (0.0, 0.5, 1.0, 2.0)
# Budgets N (draft nodes) -> shapes by branching per level; every shape of a budget has exactly N draft nodes.
BUDGETS: dict[int, dict[str, tuple[int, ...]]] = {
    2: {"chain": (1, 1)},  # chains as deep as the trees below (2x2, 3-1, 4-1, 2-3: depth 2; 4-2-1, 2-3-2: 3)
    3: {"chain": (1, 1, 1)},
    6: {"chain": (1,) * 6, "2x2": (2, 2), "3-1": (3, 1), "6x1": (6,)},
    8: {"chain": (1,) * 8, "8x1": (8,), "4-1": (4, 1), "2-3": (2, 3)},
    20: {"chain": (1,) * 20, "4-2-1": (4, 2, 1), "5-3": (5, 3), "2-3-2": (2, 3, 2)},
}
MODES: tuple[Mode, ...] = ("sampled", "top-k")


@dataclasses.dataclass(frozen=True)
class Pair:
    """A Markov drafter/target pair: the logits after each token, and a law of contexts."""

    name: str
    vocab: int
    drafter: Callable[[I64], F32]
    target: Callable[[I64], F32]
    batch: int  # rows per simulated batch (memory: batch x nodes x V logits)


def v8_pair() -> Pair:
    from pp3.audit.e2e import make_setup

    setup = make_setup()
    table = setup.drafter.table()
    return Pair("v8", setup.vocab, lambda x: table[x], lambda x: setup.target[x], batch=4096)


_M64 = (1 << 64) - 1


def _mix(x: U64) -> U64:
    """SplitMix64's finaliser, elementwise (a fixed hash of the context)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


def zipf_pair(vocab: int = 1 << 15, seed: int = 7) -> Pair:
    if vocab & (vocab - 1) or vocab > 1 << 15:
        raise ValueError(f"vocab: expected a power of two <= 2^15 (affine permutations mod V in int32), got {vocab}")
    noise = np.random.default_rng(seed).standard_normal((2, vocab)).astype(np.float32)
    log_rank = np.log1p(np.arange(vocab, dtype=np.float64)).astype(np.float32)  # ln(1 + r), r = 0 .. V-1
    y = np.arange(vocab, dtype=np.int32)
    mask = np.int32(vocab - 1)  # V <= 2^15: (2h + 1) y + h < 2^31 fits int32

    def rows(x: I64, which: int) -> F32:
        flat = x.ravel().astype(np.uint64)
        h = [(_mix(flat * np.uint64(8) + np.uint64(i)) & np.uint64(mask)).astype(np.int32) for i in range(6)]
        s = 1.2 + 1.8 * (_mix(flat * np.uint64(8) + np.uint64(7)) % np.uint64(1000)).astype(np.float32) / 1000.0
        rank = ((2 * h[0][:, None] + 1) * y[None, :] + h[1][:, None]) & mask  # r_x(y), a bijection of 0 .. V-1
        nz = ((2 * h[2 + which][:, None] + 1) * y[None, :] + h[4 + which][:, None]) & mask
        scale, sigma = (s, np.float32(0.5)) if which == 0 else (np.float32(0.85) * s, np.float32(1.0))
        out = -scale[:, None].astype(np.float32) * log_rank[rank] + sigma * noise[which][nz]
        return np.asarray(out, dtype=np.float32).reshape(*x.shape, vocab)

    return Pair("zipf32k", vocab, lambda x: rows(x, 1), lambda x: rows(x, 0), batch=16)


PAIRS: dict[str, Callable[[], Pair]] = {"v8": v8_pair, "zipf32k": zipf_pair}


def measure(pair: Pair, branching: Sequence[int], mode: Mode, temperature: float, n: int, seed: int) -> dict[str, Any]:
    """Tokens per verification step of one round from each of n contexts drawn uniformly (mean, standard error)."""
    parents = parents_of(branching)
    rng = np.random.default_rng(seed)
    emitted: list[I64] = []
    start = time.perf_counter()
    for lo in range(0, n, pair.batch):
        b = min(pair.batch, n - lo)
        prev = rng.integers(0, pair.vocab, size=b).astype(np.int64)
        seeds = rng.integers(0, 1 << 63, size=b, dtype=np.uint64)
        pos = rng.integers(0, 1 << 40, size=b, dtype=np.uint64)
        res = tree_round(pair.drafter, pair.target, parents, mode, temperature, temperature or 1.0, prev, seeds, 0,
                         pos, draft_leaves=False)
        if (res.status != AcceptStatus.OK).any():
            raise AssertionError(f"{pair.name} {branching} {mode} T={temperature}: rows failed verification")
        emitted.append(res.accepted.astype(np.int64) + 1)
    tokens = np.concatenate(emitted)
    return {"tokens_per_step": float(tokens.mean()), "stderr": float(tokens.std(ddof=1) / np.sqrt(tokens.size)),
            "n": int(tokens.size), "seconds": round(time.perf_counter() - start, 2)}


def run(pairs: Sequence[str], n: dict[str, int], temperatures: Sequence[float], budgets: Sequence[int],
        progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    rows = []
    for name in pairs:
        pair = PAIRS[name]()
        for budget in budgets:
            for shape, branching in BUDGETS[budget].items():
                for mode in MODES:
                    for t in temperatures:
                        if t == 0 and mode == "top-k":
                            continue  # at T0 both draft the first k (ranked children) and verify alike
                        seed = zlib.crc32(f"{name} {t}".encode())  # every shape and mode: the same contexts
                        m = measure(pair, branching, mode, t, n[name], seed)
                        method = ("chain" if shape == "chain" else "tree") + " " + (
                            "greedy (T0)" if t == 0 else ("sampled" if mode == "sampled" else "top-k, walk"))
                        rows.append({"pair": name, "vocab": pair.vocab, "budget": budget, "shape": shape,
                                     "children": "ranked" if t == 0 else mode, "method": method, "temperature": t,
                                     **m})
                        if progress is not None:
                            progress(f"{name} N={budget} {shape:>6} {rows[-1]['children']:>7} T={t:g}: "
                                     f"{m['tokens_per_step']:.3f} +- {m['stderr']:.3f} ({m['seconds']}s)")
    return rows


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """Tokens per step against the target temperature, with standard errors: one panel per pair (rows) and budget
    (columns), one line per shape and way of drafting (solid: sampled, dashed: top-k by the walk) (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = list(dict.fromkeys(r["pair"] for r in rows))
    budgets = sorted({r["budget"] for r in rows if len(BUDGETS[r["budget"]]) > 1})
    fig, axes = plt.subplots(len(pairs), len(budgets), figsize=(4.6 * len(budgets), 3.9 * len(pairs)),
                             squeeze=False)
    for (i, pair), (j, budget) in ((a, c) for a in enumerate(pairs) for c in enumerate(budgets)):
        ax = axes[i][j]
        for color, shape in enumerate(BUDGETS[budget]):
            for mode, style in (("sampled", "-"), ("top-k", "--")):
                pts = sorted((r["temperature"], r["tokens_per_step"], r["stderr"]) for r in rows if
                             (r["pair"], r["budget"], r["shape"]) == (pair, budget, shape) and
                             r["children"] in (mode, "ranked"))
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], fmt=style,
                            marker="o", ms=3, capsize=2, color=f"C{color}",
                            label=f"{shape}, {'sampled' if mode == 'sampled' else 'top-k (walk)'}")
        ax.set_title(f"{pair}: N = {budget} draft nodes", fontsize=10)
        ax.set_xlabel("target temperature T")
        ax.set_ylabel("tokens per verification step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.suptitle("Sampled trees (accept-tree, solid) vs top-k trees (the walk, dashed) vs chains, at equal verified "
                 "positions")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per pair, budget and temperature, tokens per step of every shape, sampled and top-k."""
    lines = ["| pair | N | T | shape | sampled | top-k (walk) |", "|---|---|---|---|---|---|"]
    key = {(r["pair"], r["budget"], r["temperature"], r["shape"], r["children"]): r for r in rows}
    for pair in dict.fromkeys(r["pair"] for r in rows):
        for budget in dict.fromkeys(r["budget"] for r in rows if r["pair"] == pair):
            for t in dict.fromkeys(r["temperature"] for r in rows):
                for shape in BUDGETS[budget]:
                    cells = []
                    for mode in ("sampled", "top-k"):
                        r = key.get((pair, budget, t, shape, "ranked" if t == 0 else mode))
                        cells.append("—" if r is None else f"{r['tokens_per_step']:.3f} ± {r['stderr']:.3f}")
                    lines.append(f"| {pair} | {budget} | {t:g} | {shape} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tree_acceptance", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few contexts per point (a smoke run)")
    ap.add_argument("--pairs", nargs="+", choices=list(PAIRS), default=list(PAIRS))
    ap.add_argument("--budgets", nargs="+", type=int, choices=sorted(BUDGETS), default=sorted(BUDGETS))
    ap.add_argument("--n-v8", type=int, default=10000, help="contexts per point on the V = 8 pair")
    ap.add_argument("--n-zipf", type=int, default=300, help="contexts per point on the V = 32768 pair")
    ap.add_argument("--json", default=None, help="write every figure here (JSON)")
    ap.add_argument("--csv", default=None, help="write every figure here (CSV)")
    ap.add_argument("--plot", default=None, help="write the plot here (PNG, needs matplotlib)")
    ap.add_argument("--markdown", default=None, help="write the table here")
    args = ap.parse_args(argv)
    n = {"v8": 64 if args.quick else args.n_v8, "zipf32k": 8 if args.quick else args.n_zipf}
    t0 = time.perf_counter()
    rows = run(args.pairs, n, TEMPERATURES, args.budgets, progress=print)
    doc = {"schema_version": 1, "tool": "bench.tree_acceptance", "seconds": round(time.perf_counter() - t0, 1),
           "environment": environment(), "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if args.plot:
        plot(rows, args.plot)
    text = table(rows)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
