"""Render bench.json files (written by ``python -m bench``) as Markdown tables and a latency plot.

python -m bench.report RESULTS.json [MORE.json ...] [--md OUT.md] [--png OUT.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def load(paths: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for p in paths:
        d = json.loads(Path(p).read_text())
        runs.append({"file": p, **d["env"], "floor": d.get("floor", {}), "flashinfer": d.get("flashinfer", "")})
        rows += [dict(r, run=len(runs) - 1) for r in d["results"]]
    return rows, runs


def markdown(rows: list[dict[str, Any]], runs: list[dict[str, Any]]) -> str:
    out: list[str] = []
    for i, r in enumerate(runs):
        floor = ", ".join(f"{n} kernels {v['median_us']:.1f} µs" for n, v in r["floor"].items())
        # The stamp (pp3.testing.stamp) nests the versions under "packages"; the bench.json files of
        # records/ carry them at the top level.
        versions = r.get("packages") or r
        commit = f"commit {r.get('commit')}{' (dirty)' if r.get('dirty') else ''}"
        out.append(
            f"Run {i} (`{r['file']}`): {r['gpu']}, driver {r['driver']}, CUDA {r['cuda']}, "
            f"torch {versions.get('torch')}, Triton {versions.get('triton')}, Python {r['python']}, {commit}, "
            f"{r['date']}. Empty-kernel graph floor: {floor}. FlashInfer: {r['flashinfer']}."
        )
        out.append("")
    table: dict[tuple[int, str, int, int], dict[str, float]] = defaultdict(dict)
    for r in rows:
        table[(r["run"], r["dtype"], r["depth"], r["V"])][f"{r['impl']}|{r['B']}"] = r["median_us"]
    for (run, dtype, depth, v), cells in sorted(table.items()):
        impls = list(dict.fromkeys(k.split("|")[0] for k in cells))
        bs = sorted({int(k.split("|")[1]) for k in cells})
        out.append(f"**Run {run}, V={v}, {dtype}, depth {depth}** — median µs per replay of the whole depth loop")
        out.append("")
        out.append("| implementation | " + " | ".join(f"B={b}" for b in bs) + " |")
        out.append("|---|" + "---:|" * len(bs))
        for impl in impls:
            vals = [cells.get(f"{impl}|{b}") for b in bs]
            out.append(f"| {impl} | " + " | ".join("" if x is None else f"{x:.1f}" for x in vals) + " |")
        fi = next((i for i in impls if i.startswith("flashinfer")), None)
        for num, den, label in (
            ("pp3 sampled", "trivial 2-launch row max", "pp3 sampled / trivial 2-launch"),
            ("pp3 sampled", "torch argmax", "pp3 sampled / torch argmax"),
            (fi, "pp3 sampled", "FlashInfer / pp3 sampled"),
            *((n, d, f"{n} / {d}") for n in ("pp3 onelaunch", "pp3 onelaunch rank", "pp3 rows")
              for d in ("trivial 2-launch row max", "pp3 sampled", "torch argmax")),
        ):
            ratios = [_ratio(cells, num, den, b) for b in bs]
            if any(ratios):
                out.append(f"| *{label}* | " + " | ".join(ratios) + " |")
        out.append("")
    marg: list[str] = []
    by: dict[tuple[int, str, str, int, int], dict[int, float]] = defaultdict(dict)
    for r in rows:
        by[(r["run"], r["impl"], r["dtype"], r["V"], r["B"])][r["depth"]] = r["median_us"]
    for (run, impl, dtype, v, b), d in sorted(by.items()):
        lo, hi = min(d), max(d)
        if hi > lo and (impl.startswith("pp3") or impl.startswith("trivial") or impl == "torch argmax"):
            marg.append(f"| {run} | {impl} | {dtype} | {v} | {b} | {lo} → {hi} | {(d[hi] - d[lo]) / (hi - lo):.2f} |")
    if marg:
        out.append("Marginal cost per position, (T(deepest) - T(shallowest)) / (depth difference), µs:")
        out.append("")
        out.append("| run | implementation | dtype | V | B | depths | µs / position |")
        out.append("|---|---|---|---:|---:|---|---:|")
        out += marg
        out.append("")
    return "\n".join(out)


def _ratio(cells: dict[str, float], num: str | None, den: str, b: int) -> str:
    a, c = cells.get(f"{num}|{b}"), cells.get(f"{den}|{b}")
    return "" if a is None or c is None else f"{a / c:.2f}"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sel = [r for r in rows if r["depth"] == 5 and r["dtype"] == "float32" and r["run"] == 0]
    for impl in dict.fromkeys(r["impl"] for r in sel):
        pts = sorted((r["B"], r["median_us"]) for r in sel if r["impl"] == impl)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch B")
    ax.set_ylabel("µs per depth-5 replay (median)")
    ax.set_title("Depth-5 proposal, V=163840, fp32, H200 (CUDA graph, events)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--md", default=None)
    ap.add_argument("--png", default=None)
    args = ap.parse_args(argv)
    rows, runs = load(args.files)
    text = markdown(rows, runs)
    if args.md:
        Path(args.md).write_text(text + "\n")
    else:
        print(text)
    if args.png:
        plot(rows, Path(args.png))
    return 0


if __name__ == "__main__":
    sys.exit(main())
