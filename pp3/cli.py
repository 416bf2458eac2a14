"""``python -m pp3`` / ``pp3``: one command line for the project.

    pp3 verify [ARGS]      bitwise parity of the Triton selector with the reference (python -m pp3.verify ARGS)
    pp3 stats [ARGS]       the selector's statistical audits (python -m stats ARGS; run from the repository root)
    pp3 bench [ARGS]       the selector benchmarks (python -m bench ARGS; run from the repository root)
    pp3 demo [--json]      the drafter loop: Markov drafter + Markov target, greedy and sampled drafting
    pp3 audit-e2e [--json] the end-to-end losslessness audit (pp3.e2e)

Sampled drafting is admitted only with DSPARK_SAMPLED_TOP32=1 in the environment (pp3.drafter).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class ProgressBar:
    """A one-line progress indicator on stderr (redrawn in place on a terminal, a line per task otherwise)."""

    def __init__(self, enabled: bool = True, width: int = 28) -> None:
        self.enabled = enabled
        self.width = width
        self.tty = sys.stderr.isatty()
        self.start = time.perf_counter()
        self.last = ""

    def __call__(self, tag: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        frac = done / total if total else 1.0
        fill = int(frac * self.width)
        bar = "#" * fill + "." * (self.width - fill)
        line = f"[{time.perf_counter() - self.start:7.1f}s] {tag:<32} {bar} {frac:4.0%}"
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if done >= total else ""))
            sys.stderr.flush()
        elif done >= total and tag != self.last:
            print(line, file=sys.stderr, flush=True)
            self.last = tag


def _delegate_module(module: str, argv: Sequence[str]) -> int:
    """Run ``python -m module argv`` in this process (the repository root must be importable)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    saved = sys.argv
    sys.argv = [f"python -m {module}", *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else 1)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        print(f"pp3: cannot import '{module}': run pp3 from the repository root", file=sys.stderr)
        return 2
    finally:
        sys.argv = saved
    return 0


def cmd_verify(argv: Sequence[str]) -> int:
    from pp3.verify import main as verify_main

    return verify_main(list(argv))


def cmd_bench(argv: Sequence[str]) -> int:
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        bench_main = importlib.import_module("bench.__main__").main  # not part of the pp3 package
    except ModuleNotFoundError as e:
        if e.name not in ("bench", "bench.__main__"):
            raise
        print("pp3: cannot import 'bench': run pp3 from the repository root", file=sys.stderr)
        return 2
    return int(bench_main(list(argv)))


# ------------------------------------------------------------------------------------------------------- audit


def cmd_audit(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="pp3 audit-e2e", description="End-to-end losslessness audit (pp3.e2e).")
    ap.add_argument("--n", type=int, default=100_000, help="sequences per case (default 10^5)")
    ap.add_argument("--mutant-n", type=int, default=None, help="sequences per planted-bug case (default: --n)")
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0])
    ap.add_argument("--mutant-temperatures", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--no-mutants", action="store_true", help="skip the planted-bug power demonstration")
    ap.add_argument("--alpha", type=float, default=0.01, help="family-wise alpha (Holm)")
    ap.add_argument("--vocab", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the drafter runs")
    ap.add_argument("--verifier", choices=("reference", "triton"), default="reference")
    ap.add_argument("--batch", type=int, default=1 << 16, help="sequences per simulated batch")
    ap.add_argument("--plot", metavar="PNG", help="write the acceptance / tokens-per-step plot here")
    ap.add_argument("--markdown", metavar="MD", help="write the tables here")
    ap.add_argument("--json", action="store_true", help="print the full log as JSON on stdout")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)

    from pp3.drafter import SAMPLED_ENV, sampled_enabled

    if not sampled_enabled():
        print(f"pp3 audit-e2e: the audit drafts with draft_sampled; set {SAMPLED_ENV}=1", file=sys.stderr)
        return 2
    from pp3 import e2e

    setup = e2e.make_setup(vocab=args.vocab, device=args.device)
    verifier = _verifier(args.verifier)
    bar = ProgressBar(not args.quiet)
    t0 = time.perf_counter()
    audit = e2e.run_audit(
        setup,
        args.n,
        temperatures=args.temperatures,
        mutants=() if args.no_mutants else tuple(e2e.MUTANTS),
        mutant_temperatures=args.mutant_temperatures,
        mutant_n=args.mutant_n,
        alpha=args.alpha,
        seed=args.seed,
        batch=args.batch,
        verifier=verifier,
        progress=bar,
    )
    seconds = time.perf_counter() - t0
    log = audit.to_json() | {"seconds": round(seconds, 1), "environment": _environment(args.device)}
    text = (
        f"end-to-end audit: V={setup.vocab}, depth {setup.depth}, drafter tau {setup.tau}, alpha {args.alpha} "
        f"(Holm over each family), {args.n:,} sequences per case\n\n{audit.table()}\n"
    )
    if audit.mutants:
        text += f"\n{audit.mutant_table()}\n"
    text += f"\n{'PASS' if audit.passed else 'FAIL'} ({seconds:.0f}s)\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.plot:
        e2e.plot(audit, args.plot)
    if args.json:
        print(json.dumps(log, indent=1))
    else:
        print(text)
    return 0 if audit.passed else 1


def _verifier(name: str) -> Callable[..., Any] | None:
    if name == "reference":
        return None
    kernel = importlib.import_module("pp3.accept.kernel")  # the Triton verifier, imported only when asked for
    fn: Callable[..., Any] = kernel.verify_numpy
    return fn


def _environment(device: str) -> dict[str, Any]:
    import platform
    import subprocess

    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "device": device,
    }
    if device == "cuda" and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    try:
        env["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       check=False).stdout.strip()
    except OSError:
        env["commit"] = None
    return env


# -------------------------------------------------------------------------------------------------------- demo


def cmd_demo(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="pp3 demo", description="The drafter loop on a Markov drafter and target.")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--shards", type=int, default=2, help="vocabulary shards of the drafter's projection")
    ap.add_argument("--gain", type=int, default=2, help="drafter logits scaled by 2^gain (peakedness)")
    ap.add_argument("--temperature", type=float, default=1.0, help="the target temperature")
    ap.add_argument("--tau", type=float, default=1.0, help="the drafter temperature (selector)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if _cuda() else "cpu")
    ap.add_argument("--verifier", choices=("reference", "triton"), default="reference")
    ap.add_argument("--latency", action="store_true", help="also time the draft loop (CUDA graph on a GPU)")
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    import torch

    from pp3.drafter import SAMPLED_ENV, TPDrafter, sampled_enabled
    from pp3.markov import MarkovDrafter

    drafter_model = MarkovDrafter.random(args.vocab, args.rank, seed=1, shards=args.shards, gain=args.gain,
                                         device=args.device)
    # The target: the drafter's embedding plus a small dyadic perturbation (logits exact on every device).
    delta = torch.from_numpy(np.random.default_rng(2).integers(-1, 2, size=tuple(drafter_model.embedding.shape)) / 32)
    target_model = MarkovDrafter(drafter_model.embedding + delta.to(drafter_model.embedding), torch.cat(
        drafter_model.shards, dim=1))
    drafter = TPDrafter(drafter_model, args.depth, tau=args.tau)
    verify = _verifier(args.verifier)
    modes = ["greedy"] + (["sampled"] if sampled_enabled() else [])
    if "sampled" not in modes and not args.quiet:
        print(f"pp3 demo: sampled drafting skipped (set {SAMPLED_ENV}=1 to admit it)", file=sys.stderr)
    bar = ProgressBar(not args.quiet)
    report: dict[str, Any] = {"vocab": args.vocab, "depth": args.depth, "batch": args.batch,
                              "temperature": args.temperature, "device": args.device, "modes": {}}
    for mode in modes:
        report["modes"][mode] = _demo_loop(args, mode, drafter, target_model, verify, bar)
        if args.latency:
            report["modes"][mode]["draft_latency_us"] = _draft_latency(args, mode, drafter)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"drafter loop: V={args.vocab}, depth {args.depth}, batch {args.batch}, target T={args.temperature}, "
              f"{args.device}")
        for mode, r in report["modes"].items():
            lat = r.get("draft_latency_us")
            extra = f", draft latency {lat['median']:.1f} us (median, {lat['how']})" if lat else ""
            print(f"  {mode:>7}: {r['tokens_per_step']:.3f} tokens/step, acceptance {r['acceptance']:.3f}{extra}")
            print(f"           first sequence: {r['first_sequence'][:24]}")
    return 0


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def _demo_loop(args: argparse.Namespace, mode: str, drafter: Any, target: Any, verify: Any,
               bar: ProgressBar) -> dict[str, Any]:
    import torch

    from pp3.accept import verify as verify_ref

    verify = verify or verify_ref
    b, d = args.batch, args.depth
    dev = torch.device(args.device)
    seqs = [[0] for _ in range(b)]
    prev = torch.zeros(b, dtype=torch.int64, device=dev)
    pos = np.ones(b, dtype=np.uint64)
    seeds = np.arange(b, dtype=np.uint64) + np.uint64(1000)
    emitted = accepted_total = 0
    for rnd in range(args.rounds):
        ctx = prev[:, None]
        if mode == "sampled":
            draft = drafter.draft_sampled(ctx, args.temperature, seeds, rnd, pos)
        else:
            draft = drafter.draft(ctx)
        before = torch.cat([prev[:, None], draft.tokens.clamp_min(0).long()], dim=1)  # [B, D+1]
        logits = torch.stack([torch.cat(target(before[:, j : j + 1]), dim=1) for j in range(d + 1)], dim=1)
        res = verify(
            target_logits=logits.float().cpu().numpy(),
            target_temperature=np.float32(args.temperature),
            seed=seeds,
            round=rnd,
            position=pos,
            **draft.numpy(),
        )
        acc = np.asarray(res.accepted)
        toks = np.asarray(res.tokens)
        for i in range(b):
            seqs[i].extend(int(t) for t in toks[i, : acc[i] + 1])
        emitted += int((acc + 1).sum())
        accepted_total += int(acc.sum())
        prev = torch.from_numpy(toks[np.arange(b), acc].astype(np.int64)).to(dev)
        pos += (acc + 1).astype(np.uint64)
        bar(f"demo {mode}", rnd + 1, args.rounds)
    steps = args.rounds * b
    return {
        "tokens_per_step": emitted / steps,
        "acceptance": accepted_total / (steps * d),
        "first_sequence": seqs[0],
    }


def _draft_latency(args: argparse.Namespace, mode: str, drafter: Any) -> dict[str, Any]:
    """Median time of one whole depth-D draft call: a CUDA graph replay (event-timed) on a GPU, wall time on CPU."""
    import torch

    b = args.batch
    dev = torch.device(args.device)
    ctx = torch.zeros((b, 1), dtype=torch.int64, device=dev)
    if mode == "sampled":
        seed = torch.arange(b, dtype=torch.int64, device=dev)
        rnd = torch.zeros(b, dtype=torch.int64, device=dev)
        pos = torch.ones(b, dtype=torch.int64, device=dev)
        temp = torch.full((b,), args.temperature, dtype=torch.float32, device=dev)

        def fn() -> Any:
            return drafter.draft_sampled(ctx, temp, seed, rnd, pos)
    else:

        def fn() -> Any:
            return drafter.draft(ctx)

    times: list[float] = []
    if dev.type == "cuda":
        from pp3.drafter import cuda_graph

        replay, _ = cuda_graph(fn)
        for _ in range(10):
            replay()
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        for _ in range(args.replays):
            start.record()
            replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        how = "CUDA graph replay, CUDA events"
    else:
        fn()
        for _ in range(max(3, args.replays // 20)):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e6)
        how = "CPU wall time"
    q = np.percentile(times, [10, 50, 90])
    return {"median": float(q[1]), "p10": float(q[0]), "p90": float(q[2]), "n": len(times), "how": how}


# -------------------------------------------------------------------------------------------------------- main


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "verify": (cmd_verify, "bitwise parity of the Triton selector with the reference (pp3.verify)"),
    "stats": (lambda argv: _delegate_module("stats", argv), "the selector's statistical audits (python -m stats)"),
    "bench": (cmd_bench, "the selector benchmarks (python -m bench)"),
    "demo": (cmd_demo, "the drafter loop with a Markov drafter and target"),
    "audit-e2e": (cmd_audit, "the end-to-end losslessness audit (pp3.e2e)"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"pp3: unknown command {name!r}; one of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return COMMANDS[name][0](rest)
