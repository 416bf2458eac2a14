"""``make bench``: depth-D sampled proposals captured in CUDA graphs, event-timed, against PyTorch baselines.

Every timed implementation runs the whole depth-D loop (D positions, each on its own logits buffer) inside one
CUDA graph; input sets rotate between replays so that the 60 MB L2 does not hold them. Before timing, the pp3
kernels are checked bit for bit against the NumPy reference on the same inputs: the kernels timed are the
kernels verified. Results: results/bench.json, BENCHMARKS.md tables (with device, driver, versions, commit).

    python -m bench [--quick] [--vocab 163840 ...] [--batch 1 2 4 ...] [--depth 5 10] [--replays 300]
    python -m bench --warm-flashinfer     (make flashinfer-gpu: FlashInfer's first call, which builds its JIT)
    python -m bench --compile-only ...    (each implementation's step once per vocabulary, format and batch: Triton's
                                           cache filled, nothing checked or timed)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pp3.testing.call import host_logits, to_numpy
from pp3.testing.compare import row_mismatch
from pp3.testing.stamp import environment
from pp3.testing.timing import time_graph


def make_inputs(n_sets: int, depth: int, b: int, v: int, dtype: Any, seed: int) -> list[list[Any]]:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [
        [(torch.randn((b, v), generator=gen, device="cuda") * 4.0).to(dtype) for _ in range(depth)]
        for _ in range(n_sets)
    ]


def next_name(cfg: Any) -> str:
    """The row name of a one-launch or row selector setting (``--onelaunch``, ``--rows``)."""
    w = cfg.onelaunch_warps or 0
    polls = f" polls={cfg.polls or 0}" if cfg.selector == "onelaunch" else ""
    regs = f" regs={cfg.max_registers}" if cfg.max_registers else ""
    return f"pp3 {cfg.selector} warps={w} L={cfg.segment or 0}{polls} rank={int(cfg.top_rank)}{regs}"


def next_settings(selector: str, fields: list[str]) -> Any:
    """A ``LaunchConfig`` of the one-launch (``WARPS,L,POLLS[,RANK[,REGS]]``) or row (``WARPS,L[,RANK[,REGS]]``)
    selector from its command-line fields; 0 is the automatic choice."""
    from pp3.kernels import LaunchConfig

    n = [int(f) for f in fields]
    polls, rest = (n[2], n[3:]) if selector == "onelaunch" else (0, n[2:])
    return LaunchConfig(selector=selector, onelaunch_warps=n[0] or None, segment=n[1] or None, polls=polls or None,
                        top_rank=bool(rest[0]) if rest else False, max_registers=rest[1] if len(rest) > 1 else None)


def _next_defaults() -> tuple[Any, ...]:
    from pp3.kernels import LaunchConfig

    return (LaunchConfig(selector="onelaunch"), LaunchConfig(selector="onelaunch", top_rank=True),
            LaunchConfig(selector="rows"))


def check_parity(xs: list[list[Any]], keys: dict[str, Any], tile: int | None) -> int:
    """pp3 kernels vs the NumPy reference on the benchmark's own inputs (every selector, every timed segment, one-launch
    and row setting, every greedy selector setting against the T0 rows; the first two positions); returns mismatching
    rows."""
    import pp3.reference as ref
    from pp3.kernels import LaunchConfig, greedy, propose

    bad = 0
    for d, x in enumerate(xs[0][:2]):  # the first two positions of the first input set
        seeds = (keys["seed"], keys["round"], keys["pos"][d])
        host = [k.cpu().numpy().view(np.uint64) for k in seeds]
        want = ref.propose(host_logits(x), keys["temp"].cpu().numpy(), *host)
        for launch in (LaunchConfig(), LaunchConfig(selector="tiles"), *_next_defaults(), *keys["launches"]):
            bad += int(row_mismatch(to_numpy(propose(x, keys["temp"], *seeds, tile=tile, launch=launch)), want).sum())
        want0 = ref.propose(host_logits(x), keys["temp0"].cpu().numpy(), *host)
        greedy_runs = [(None, 8, how) for how in ("auto", "keys", "rescan")] + keys["greedy"]
        for t, w, how in greedy_runs:
            got = greedy(x, tile=t, launch=LaunchConfig(warps=(w, 8), greedy=how))
            bad += int(row_mismatch(to_numpy(got), want0).sum())
    return bad


def implementations(
    tiles: list[int | None], warps: list[tuple[int, int]], segments: list[Any], greedy_cfg: list[tuple[int, int, str]],
    nexts: Sequence[Any] = (),
) -> dict[str, Callable[[list[Any], dict[str, Any]], Callable[[], Any]]]:
    """name -> factory(depth buffers, keys) -> the step that runs the depth loop once; ``tiles`` and ``warps``
    (the tile selector's launch 1, launch 2) add a row per fixed tile size and per warp pair, ``segments`` a row per
    segment-selector ``LaunchConfig``, ``greedy_cfg`` a row per (tile, warps, how) of the greedy selector, ``nexts``
    a row per one-launch or row selector ``LaunchConfig`` (``next_name``)."""
    import torch

    from bench._floor import RowMax
    from pp3.kernels import LaunchConfig, buffers, checks, greedy, launchers, propose, tile_candidates
    from pp3.kernels.config import DEFAULT_LAUNCH
    from pp3.reference._constants import DEFAULT_TAU

    def pp3_sampled(tile: int | None) -> Callable[[list[Any], dict[str, Any]], Callable[[], Any]]:
        """propose as shipped (tile None), or the tile selector at a fixed tile (the only selector with one)."""
        launch = DEFAULT_LAUNCH if tile is None else LaunchConfig(selector="tiles")

        def make(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            def step() -> None:
                for d, x in enumerate(xs):
                    propose(x, k["temp"], k["seed"], k["round"], k["pos"][d], tile=tile, launch=launch)

            return step

        return make

    def pp3_launch(launch: Any, temp: str = "temp") -> Callable[[list[Any], dict[str, Any]], Callable[[], Any]]:
        def make(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            def step() -> None:
                for d, x in enumerate(xs):
                    propose(x, k[temp], k["seed"], k["round"], k["pos"][d], launch=launch)

            return step

        return make

    def pp3_greedy_kernel(
        tile: int | None, w: int, how: str = "auto"
    ) -> Callable[[list[Any], dict[str, Any]], Callable[[], Any]]:
        launch = LaunchConfig(warps=(w, 8), greedy=how)

        def make(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            def step() -> None:
                for x in xs:
                    greedy(x, tile=tile, launch=launch)

            return step

        return make

    def pp3_warps(w1: int, w2: int) -> Callable[[list[Any], dict[str, Any]], Callable[[], Any]]:
        launch = LaunchConfig(warps=(w1, w2), selector="tiles")

        def make(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            def step() -> None:
                for d, x in enumerate(xs):
                    propose(x, k["temp"], k["seed"], k["round"], k["pos"][d], launch=launch)

            return step

        return make

    def pp3_no_pdl(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:  # the launch attribute is fixed when the graph is captured
            for d, x in enumerate(xs):
                propose(x, k["temp"], k["seed"], k["round"], k["pos"][d], launch=LaunchConfig(pdl=False))

        return step

    def pp3_greedy(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:
            for d, x in enumerate(xs):
                propose(x, k["temp0"], k["seed"], k["round"], k["pos"][d])

        return step

    def trivial(mode: str) -> Callable[[list[Any], dict[str, Any]], Callable[[], Any]]:
        def make(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            row_max = RowMax(mode, xs[0].shape[0], xs[0].shape[1], xs[0].device)

            def step() -> None:
                for x in xs:
                    row_max(x)

            return step

        return make

    def pp3_launch1(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:
            for x in xs:
                tile_candidates(x)

        return step

    def pp3_launch2(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        # Launch 2 as propose runs it: on candidates launch 1 wrote (the public finalize adds its candidates check).
        cands = [tile_candidates(x) for x in xs]  # computed once, outside the graph
        b, dev = xs[0].shape[0], xs[0].device
        keys = [checks.row_keys(k["temp"], k["seed"], k["round"], k["pos"][d], b, dev) for d in range(len(xs))]
        outs = [buffers.new_proposal(b, dev) for _ in xs]

        def step() -> None:
            for c, rk, o in zip(cands, keys, outs, strict=True):
                launchers.finalize(c, rk, DEFAULT_TAU, DEFAULT_LAUNCH, o)

        return step

    def torch_argmax(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:
            for x in xs:
                torch.argmax(x, dim=-1)

        return step

    def torch_topk(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:
            for x in xs:
                torch.topk(x, 32, dim=-1)

        return step

    def torch_topk_softmax_sample(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:
            for x in xs:
                vals, idx = torch.topk(x.float(), 32, dim=-1)
                p = torch.softmax(vals / 0.7, dim=-1)
                torch.gather(idx, 1, torch.multinomial(p, 1))

        return step

    out: dict[str, Callable[[list[Any], dict[str, Any]], Callable[[], Any]]] = {}
    for t in tiles:
        out["pp3 sampled" if t is None else f"pp3 tiles tile={t}"] = pp3_sampled(t)
    for w1, w2 in warps:
        out[f"pp3 tiles warps={w1},{w2}"] = pp3_warps(w1, w2)
    for cfg in segments:
        ws = ",".join(str(n) for n in cfg.segment_warps or ())
        g = "" if cfg.segment_gather is None else f" gather={int(cfg.segment_gather)}"
        out[f"pp3 segments warps={ws} L={cfg.segment}{g}"] = pp3_launch(cfg)
    for cfg in nexts:
        out[next_name(cfg)] = pp3_launch(cfg)
    out["pp3 greedy kernel"] = pp3_greedy_kernel(None, 8)
    out["pp3 greedy kernel, keys"] = pp3_greedy_kernel(None, 8, "keys")
    out["pp3 greedy kernel, rescan"] = pp3_greedy_kernel(None, 8, "rescan")
    for t, w, how in greedy_cfg:
        out[f"pp3 greedy kernel {how} tile={t} warps={w}"] = pp3_greedy_kernel(t, w, how)
    out.update(
        {
            "pp3 tiles": pp3_launch(LaunchConfig(selector="tiles")),
            "pp3 onelaunch": pp3_launch(LaunchConfig(selector="onelaunch")),
            "pp3 onelaunch rank": pp3_launch(LaunchConfig(selector="onelaunch", top_rank=True)),
            "pp3 rows": pp3_launch(LaunchConfig(selector="rows")),
            "pp3 tiles greedy (T0)": pp3_launch(LaunchConfig(selector="tiles"), "temp0"),
            "pp3 sampled, no PDL": pp3_no_pdl,
            "pp3 greedy (T0)": pp3_greedy,
            "trivial 2-launch row max": trivial("2-launch"),
            "trivial 1-launch row max": trivial("1-launch"),
            "read-only pass": trivial("read-only"),
            "pp3 launch 1 only": pp3_launch1,
            "pp3 launch 2 only": pp3_launch2,
            "torch argmax": torch_argmax,
            "torch topk32": torch_topk,
            "torch topk+softmax+sample": torch_topk_softmax_sample,
        }
    )
    baseline = os.environ.get("PP3_BENCH_BASELINE")  # a folder holding an older copy as package pp3_baseline
    if baseline:
        sys.path.insert(0, baseline)
        from pp3_baseline.kernels import select as base  # type: ignore[import-not-found]

        def pp3_baseline(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            def step() -> None:
                for d, x in enumerate(xs):
                    base.propose(x, k["temp"], k["seed"], k["round"], k["pos"][d])

            return step

        out[f"pp3 baseline {os.environ.get('PP3_BENCH_BASELINE_NAME', '')}".strip()] = pp3_baseline
    return out


def flashinfer_impl() -> tuple[Callable[[list[Any], dict[str, Any]], Callable[[], Any]] | None, str]:
    if os.environ.get("PP3_BENCH_NO_FLASHINFER") == "1":
        return None, os.environ.get("PP3_BENCH_FLASHINFER_NOTE", "flashinfer skipped (PP3_BENCH_NO_FLASHINFER=1)")
    try:
        import flashinfer  # type: ignore[import-not-found]
    except Exception as e:
        return None, f"flashinfer not importable on the device machine: {e.__class__.__name__}: {e}"

    sampling = flashinfer.sampling

    def fi(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
        def step() -> None:
            for x in xs:  # top-k first, then sampling from the top 32 (PERF_FACTS.md: the peer's fastest such path)
                sampling.top_k_top_p_sampling_from_logits(
                    x, 32, 1.0, filter_apply_order="top_k_first", deterministic=True
                )

        return step

    return fi, "ok"


def flashinfer_extra(version: str) -> dict[str, Callable[[list[Any], dict[str, Any]], Callable[[], Any]]]:
    """FlashInfer's top-k paths beside its sampler, where the installed version has them: ``top_k(x, 32)`` (0.7.4:
    CUB's cluster top-k on sm_90), the same with lower-ID ties, and 0.7.4's exact cluster top-k on probabilities
    given (``cake_sampling.top_k_probs_to_slab(p, 32)``; the softmax is made outside the graph)."""
    import flashinfer
    import torch

    out: dict[str, Callable[[list[Any], dict[str, Any]], Callable[[], Any]]] = {}
    if hasattr(flashinfer, "top_k"):
        def topk(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            return lambda: [flashinfer.top_k(x, 32) for x in xs]

        def topk_ties(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            return lambda: [flashinfer.top_k(x, 32, deterministic=True, tie_break=1) for x in xs]

        out[f"flashinfer {version} top_k"] = topk
        out[f"flashinfer {version} top_k lower-ID ties"] = topk_ties
    cake = getattr(getattr(flashinfer, "cake_sampling", None), "top_k_probs_to_slab", None)
    if cake is not None:
        def slab(xs: list[Any], k: dict[str, Any]) -> Callable[[], Any]:
            ps = [torch.softmax(x.float(), dim=-1) for x in xs]  # given probabilities: outside the graph
            return lambda: [cake(p, 32) for p in ps]

        out[f"flashinfer {version} cake top_k_probs_to_slab (p given)"] = slab
    return out


def warm_flashinfer() -> int:
    """The FlashInfer row's step once at V = 163840, B = 4 (its first call builds the JIT kernels): 0 if it ran."""
    import torch

    fi, note = flashinfer_impl()
    if fi is None:
        print(note)
        return 1
    fi([torch.randn(4, 163840, device="cuda")], {})()
    torch.cuda.synchronize()
    print(f"flashinfer {getattr(__import__('flashinfer'), '__version__', '?')} ok")
    return 0


def empty_floor(n_kernels: int, replays: int) -> dict[str, float]:
    import torch

    from bench._floor import empty_kernel

    buf = torch.empty(1, device="cuda")

    def build(_s: int) -> Callable[[], None]:
        def step() -> None:
            for _ in range(n_kernels):
                empty_kernel[(1,)](buf)

        return step

    return time_graph(build, 1, replays)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--vocab", type=int, nargs="+", default=[163840])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    ap.add_argument("--depth", type=int, nargs="+", default=[5, 40])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument(
        "--impl", nargs="+", default=None,
        help="implementations: full names, or the first words of a family (flashinfer, pp3 segments, torch)"
    )
    ap.add_argument("--replays", type=int, default=300)
    ap.add_argument("--tiles", type=int, nargs="*", default=[],
                    help="fixed tile sizes to time the tile selector at (default: none)")
    ap.add_argument("--out", default="results")
    ap.add_argument("--warps", nargs="*", default=[], help="the tile selector's launch-1,launch-2 warp pairs to sweep")
    ap.add_argument("--segments", nargs="*", default=[],
                    help="segment-selector settings warpsA,warpsB,warpsC,L[,G] (L 0: automatic; G 1: C gathers, "
                    "0: launch B, absent: automatic), e.g. 4,1,8,1024,1")
    ap.add_argument("--onelaunch", nargs="*", default=[],
                    help="one-launch selector settings warps,L,polls[,rank[,regs]] (0: automatic), e.g. 4,1024,3,1")
    ap.add_argument("--rows", nargs="*", default=[],
                    help="row selector settings warps,L[,rank[,regs]] (0: automatic), e.g. 8,2048,0,128")
    ap.add_argument("--compile-only", action="store_true",
                    help="run each implementation's step once per vocabulary, format and batch (Triton's cache "
                    "filled), check and time nothing")
    ap.add_argument("--greedy", nargs="*", default=[],
                    help="greedy-selector tile,warps,how (LaunchConfig.greedy) to sweep, e.g. 2048,4,keys")
    ap.add_argument("--warm-flashinfer", action="store_true",
                    help="run the FlashInfer row's call once (builds its JIT kernels) and exit: 0 if it ran")
    args = ap.parse_args(argv)
    warps = [(int(a), int(b)) for a, b in (w.split(",") for w in args.warps)]
    greedy_cfg = [(int(a), int(b), c) for a, b, c in (w.split(",") for w in args.greedy)]

    import torch

    if not torch.cuda.is_available():
        print("bench: no CUDA GPU here; benchmarks run only on a GPU (see BENCHMARKS.md for recorded results)")
        return 0
    if args.warm_flashinfer:
        return warm_flashinfer()
    env = environment()
    print(json.dumps(env), flush=True)
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    poisoned = False
    floor = {n: empty_floor(n, args.replays) for n in (5, 10, 20)}
    print(f"empty-kernel graph floor: {json.dumps(floor)}", flush=True)
    from pp3.kernels import LaunchConfig

    segments = [
        LaunchConfig(selector="segments", segment_warps=(int(f[0]), int(f[1]), int(f[2])), segment=int(f[3]) or None,
                     segment_gather=bool(int(f[4])) if len(f) > 4 else None)
        for f in (s.split(",") for s in args.segments)
    ]
    nexts = [next_settings("onelaunch", s.split(",")) for s in args.onelaunch]
    nexts += [next_settings("rows", s.split(",")) for s in args.rows]
    impls = implementations([None, *args.tiles], warps, segments, greedy_cfg, nexts)
    fi, fi_note = flashinfer_impl()
    if fi is not None:
        version = getattr(__import__("flashinfer"), "__version__", "?")
        impls[f"flashinfer {version} top-k sampling"] = fi
        impls.update(flashinfer_extra(version))
    if args.impl:
        # a full name, or the first words of a family ("flashinfer", whose names carry its version; "pp3 segments")
        impls = {k: v for k, v in impls.items() if any(k == i or k.startswith(i + " ") for i in args.impl)}
    for v in args.vocab:
        for dtype_name in args.dtype:
            dtype = getattr(torch, dtype_name)
            for b in args.batch:
                for depth in args.depth:
                    if poisoned:
                        break
                    n_sets = max(2, min(16, (64 << 20) // (b * v * dtype.itemsize * depth) + 1))
                    xs_sets = make_inputs(n_sets, depth, b, v, dtype, seed=1000 * b + depth)
                    keys = {
                        "temp": torch.ones(b, device="cuda"),
                        "temp0": torch.zeros(b, device="cuda"),
                        "seed": torch.arange(b, device="cuda", dtype=torch.int64) * 7919 + 1,
                        "round": torch.full((b,), 3, device="cuda", dtype=torch.int64),
                        "pos": [torch.full((b,), 100 + d, device="cuda", dtype=torch.int64) for d in range(depth)],
                        "launches": [*segments, *nexts],
                        "greedy": greedy_cfg,
                    }
                    if args.compile_only:
                        for factory in impls.values():
                            factory(xs_sets[0][:1], keys)()
                        torch.cuda.synchronize()
                        print(f"compiled: V={v}, B={b}, depth {depth}, {dtype_name}", flush=True)
                        continue
                    bad = check_parity(xs_sets, keys, None)
                    if bad:
                        print(f"PARITY FAILURE before timing: {bad} rows differ (V={v}, B={b}, {dtype_name})")
                        return 1
                    for name, factory in impls.items():

                        def build(
                            s: int,
                            f: Callable[[list[Any], dict[str, Any]], Callable[[], Any]] = factory,
                            xs: list[list[Any]] = xs_sets,
                            k: dict[str, Any] = keys,
                        ) -> Callable[[], Any]:
                            return f(xs[s], k)

                        try:
                            t = time_graph(build, n_sets, args.replays)
                        except Exception as e:  # report it; a CUDA fault poisons the context, so stop timing there
                            errors.append(f"{name} (V={v}, B={b}, depth {depth}, {dtype_name}): {e.__class__.__name__}")
                            print(f"{name}: {e.__class__.__name__}: {e}", flush=True)
                            if "CUDA" in str(e):
                                poisoned = True  # the context is unusable: keep what was measured, write it out
                                break
                            continue
                        row = {"impl": name, "V": v, "B": b, "depth": depth, "dtype": dtype_name, **t}
                        results.append(row)
                        print(json.dumps(row), flush=True)
                    if poisoned:
                        break
                    torch.cuda.empty_cache()
    if args.compile_only:
        return 0
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    (out / "bench.json").write_text(
        json.dumps({"env": env, "floor": floor, "flashinfer": fi_note, "errors": errors, "results": results}, indent=1)
    )
    from bench import report

    report.main([str(out / "bench.json"), "--md", str(out / "bench.md"), "--png", str(out / "bench.png")])
    print(f"wrote {out / 'bench.json'}, bench.md, bench.png; flashinfer: {fi_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
