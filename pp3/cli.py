"""``pp3`` / ``python -m pp3``: the command line of the installed package.

    pp3 verify [ARGS]        bitwise parity of the Triton kernels with the reference (pp3.audit.parity; --json)
    pp3 conformance [--json] the conformance files (pp3/conformance) against the installed implementation
    pp3 demo [--json]        the speculation loop: Markov drafter + Markov target, greedy and sampled drafting
    pp3 audit-e2e [--json]   the end-to-end losslessness audit (pp3.audit.e2e)

``stats`` and ``bench`` are repository tools (``make stats``, ``make bench``), not part of the package. Every
``--json`` output is one JSON document on stdout, with the environment stamp; progress goes to stderr. Sampled
drafting is admitted only with DSPARK_SAMPLED_TOP32=1 in the environment (pp3.drafter).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

DIST = "pp3-exact"  # the distribution's name (the import package is pp3)


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


def _missing(command: str, modules: Sequence[str], extra: str) -> bool:
    """Print one line naming what ``command`` lacks (and the extra that brings it); True if anything is missing."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if absent:
        print(f"pp3 {command}: needs {', '.join(absent)}: pip install '{DIST}[{extra}]'", file=sys.stderr)
    return bool(absent)


def _finite(name: str, lo: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float >= lo (> lo with ``low_open``)."""

    def parse(text: str) -> float:
        v = float(text)
        if not math.isfinite(v) or v < lo or (low_open and v == lo):
            raise argparse.ArgumentTypeError(f"{name}: expected a finite number {'>' if low_open else '>='} {lo}")
        return v

    return parse


def _at_least(name: str, lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        v = int(text)
        if v < lo:
            raise argparse.ArgumentTypeError(f"{name}: expected an integer >= {lo}, got {v}")
        return v

    return parse


def _writable(flag: str, path: str | None) -> bool:
    """Whether an output file can be written (checked before the work, not after): prints one line if not."""
    if path is None:
        return True
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(folder) and os.access(folder, os.W_OK) and not os.path.isdir(path):
        return True
    print(f"pp3: {flag}: cannot write {path!r} (no writable folder {folder!r})", file=sys.stderr)
    return False


def _verifier(name: str) -> Callable[..., Any] | None:
    """None (the reference verifier), the Triton verifier or FlashInfer's chain with the reference's convention."""
    if name == "reference":
        return None
    if name == "flashinfer":
        from pp3.testing.peers import flashinfer_verifier

        return flashinfer_verifier()
    from pp3.testing.call import kernel_verifier

    return kernel_verifier


def _verifier_mutants(name: str, none: bool) -> dict[str, Callable[..., Any]]:
    """The planted bugs of a peer verifier (FlashInfer fed the greedy path's q), by name."""
    if name != "flashinfer" or none:
        return {}
    from pp3.testing.peers import flashinfer_verifier

    return {"flashinfer-q-from-greedy": flashinfer_verifier(q="greedy", seed=1)}


# ---------------------------------------------------------------------------------------------------- commands


def cmd_verify(argv: Sequence[str]) -> int:
    if _missing("verify", ("torch", "triton"), "kernels"):
        return 2
    from pp3.audit.parity import main as parity_main

    return parity_main(list(argv))


def cmd_conformance(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="pp3 conformance", description="The conformance files (pp3/conformance) "
                                 "against the installed reference, and against the kernels where they run.")
    ap.add_argument("--kernels", choices=("auto", "yes", "no"), default="auto",
                    help="also run the kernels: auto (if torch and triton import and there is a GPU or "
                         "TRITON_INTERPRET=1), yes, no")
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = ap.parse_args(argv)
    from pp3.audit import conformance

    if args.kernels == "yes" and _missing("conformance --kernels yes", ("torch", "triton"), "kernels"):
        return 2
    report = conformance.run(kernels={"auto": None, "yes": True, "no": False}[args.kernels])
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(conformance.render(report))
    return 0 if report["passed"] else 1


def cmd_audit(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="pp3 audit-e2e", description="End-to-end losslessness audit (pp3.audit.e2e).")
    ap.add_argument("--n", type=_at_least("--n", 1), default=100_000, help="sequences per case (default 10^5)")
    ap.add_argument("--mutant-n", type=_at_least("--mutant-n", 1), default=None,
                    help="sequences per planted-bug case (default: --n)")
    ap.add_argument("--temperatures", type=_finite("--temperatures", 0.0), nargs="+", default=[0.0, 0.5, 1.0, 2.0])
    ap.add_argument("--mutant-temperatures", type=_finite("--mutant-temperatures", 0.0, low_open=True), nargs="+",
                    default=[0.5, 1.0, 2.0])
    ap.add_argument("--no-mutants", action="store_true", help="skip the planted-bug power demonstration")
    ap.add_argument("--alpha", type=_finite("--alpha", 0.0, low_open=True), default=0.01,
                    help="family-wise alpha (Holm), in (0, 1)")
    ap.add_argument("--vocab", type=_at_least("--vocab", 2), default=8)
    ap.add_argument("--seed", type=_at_least("--seed", 0), default=0)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the drafter runs")
    ap.add_argument("--verifier", choices=("reference", "triton", "flashinfer"), default="reference",
                    help="flashinfer: FlashInfer's chain_speculative_sampling fed pp3's exact q (needs --device cuda); "
                    "its planted bug feeds it the greedy path's q")
    ap.add_argument("--batch", type=_at_least("--batch", 1), default=1 << 16, help="sequences per simulated batch")
    ap.add_argument("--plot", metavar="PNG", help="write the acceptance / tokens-per-step plot here (matplotlib)")
    ap.add_argument("--markdown", metavar="MD", help="write the tables here")
    ap.add_argument("--json", action="store_true", help="print the full log as one JSON document on stdout")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.alpha >= 1.0:
        ap.error("--alpha: expected a number in (0, 1)")

    from pp3.drafter import SAMPLED_ENV, sampled_enabled

    if not sampled_enabled():
        print(f"pp3 audit-e2e: the audit drafts with draft_sampled; set {SAMPLED_ENV}=1", file=sys.stderr)
        return 2
    if _missing("audit-e2e", ("torch",), "kernels") or (
        args.verifier == "triton" and _missing("audit-e2e --verifier triton", ("triton",), "kernels")
    ):
        return 2
    if args.verifier == "flashinfer" and args.device != "cuda":
        print("pp3 audit-e2e: --verifier flashinfer runs on the GPU; give --device cuda", file=sys.stderr)
        return 2
    if args.plot and _missing("audit-e2e --plot", ("matplotlib",), "plot"):
        return 2
    if not (_writable("--plot", args.plot) and _writable("--markdown", args.markdown)):
        return 2
    from pp3.audit import e2e
    from pp3.testing.stamp import environment

    setup = e2e.make_setup(vocab=args.vocab, device=args.device)
    bar = ProgressBar(not args.quiet)
    t0 = time.perf_counter()
    audit = e2e.run_audit(
        setup,
        args.n,
        temperatures=args.temperatures,
        mutants=() if args.no_mutants else e2e.MUTANTS,
        mutant_temperatures=args.mutant_temperatures,
        mutant_n=args.mutant_n,
        alpha=args.alpha,
        seed=args.seed,
        batch=args.batch,
        verifier=_verifier(args.verifier),
        verifier_mutants=_verifier_mutants(args.verifier, args.no_mutants),
        progress=bar,
    )
    seconds = time.perf_counter() - t0
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
        log = audit.to_json() | {"seconds": round(seconds, 1), "environment": environment()}
        print(json.dumps(log, indent=1))
    else:
        print(text)
    return 0 if audit.passed else 1


def cmd_demo(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="pp3 demo", description="The speculation loop on a Markov drafter and target.")
    ap.add_argument("--vocab", type=_at_least("--vocab", 2), default=4096)
    ap.add_argument("--rank", type=_at_least("--rank", 1), default=64)
    ap.add_argument("--depth", type=_at_least("--depth", 1), default=5)
    ap.add_argument("--batch", type=_at_least("--batch", 1), default=4)
    ap.add_argument("--rounds", type=_at_least("--rounds", 1), default=8)
    ap.add_argument("--shards", type=_at_least("--shards", 1), default=2,
                    help="vocabulary shards of the drafter's projection")
    ap.add_argument("--gain", type=int, default=2, help="drafter logits scaled by 2^gain (peakedness)")
    ap.add_argument("--temperature", type=_finite("--temperature", 0.0), default=1.0, help="the target temperature")
    ap.add_argument("--tau", type=_finite("--tau", 0.0, low_open=True), default=1.0,
                    help="the drafter temperature (selector)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if available")
    ap.add_argument("--verifier", choices=("reference", "triton"), default="reference")
    ap.add_argument("--latency", action="store_true", help="also time the draft loop (CUDA graph on a GPU)")
    ap.add_argument("--replays", type=_at_least("--replays", 1), default=200)
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if _missing("demo", ("torch",), "kernels") or (
        args.verifier == "triton" and _missing("demo --verifier triton", ("triton",), "kernels")
    ):
        return 2

    import torch

    from pp3.drafter import SAMPLED_ENV, TPDrafter, sampled_enabled
    from pp3.speculate import MODES, speculation_round
    from pp3.testing.markov import MarkovDrafter
    from pp3.testing.stamp import environment

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.shards > args.vocab:
        ap.error(f"--shards: at most --vocab = {args.vocab}")
    drafter_model = MarkovDrafter.random(args.vocab, args.rank, seed=1, shards=args.shards, gain=args.gain,
                                         device=device)
    # The target: the drafter's embedding plus a small dyadic perturbation (logits exact on every device).
    delta = torch.from_numpy(np.random.default_rng(2).integers(-1, 2, size=tuple(drafter_model.embedding.shape)) / 32)
    target_model = MarkovDrafter(drafter_model.embedding + delta.to(drafter_model.embedding),
                                 torch.cat(drafter_model.shards, dim=1))

    def target(before: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        rows = [torch.cat(target_model(torch.from_numpy(before[:, j : j + 1]).to(device)), dim=1)
                for j in range(before.shape[1])]
        return torch.stack(rows, dim=1).float().cpu().numpy()

    drafter = TPDrafter(drafter_model, args.depth, tau=args.tau)
    verify = _verifier(args.verifier) or _reference_verify
    modes = [m for m in MODES if m == "greedy" or sampled_enabled()][::-1]
    if "sampled" not in modes and not args.quiet:
        print(f"pp3 demo: sampled drafting skipped (set {SAMPLED_ENV}=1 to admit it)", file=sys.stderr)
    bar = ProgressBar(not args.quiet)
    report: dict[str, Any] = {"vocab": args.vocab, "depth": args.depth, "batch": args.batch,
                              "temperature": args.temperature, "device": device, "modes": {}}
    b = args.batch
    for mode in modes:
        seqs: list[list[int]] = [[0] for _ in range(b)]
        prev = np.zeros(b, dtype=np.int64)
        pos = np.ones(b, dtype=np.uint64)
        seeds = np.arange(b, dtype=np.uint64) + np.uint64(1000)
        emitted = accepted = 0
        for rnd in range(args.rounds):
            res = speculation_round(drafter, target, verify, mode=mode, prev=prev, temperature=args.temperature,
                                    seed=seeds, round=rnd, position=pos)
            for i in range(b):
                seqs[i].extend(int(t) for t in res.tokens[i, : res.accepted[i] + 1])
            emitted += int(res.emitted.sum())
            accepted += int(res.accepted.sum())
            prev = res.last()
            pos += res.emitted.astype(np.uint64)
            bar(f"demo {mode}", rnd + 1, args.rounds)
        steps = args.rounds * b
        r: dict[str, Any] = {"tokens_per_step": emitted / steps, "acceptance": accepted / (steps * args.depth),
                             "first_sequence": seqs[0]}
        if args.latency:
            r["draft_latency_us"] = _draft_latency(drafter, mode, b, args.temperature, device, args.replays)
        report["modes"][mode] = r
    if args.json:
        print(json.dumps(report | {"environment": environment()}, indent=1))
    else:
        print(f"speculation loop: V={args.vocab}, depth {args.depth}, batch {args.batch}, target "
              f"T={args.temperature}, {device}")
        for mode, r in report["modes"].items():
            lat = r.get("draft_latency_us")
            extra = f", draft latency {lat['median_us']:.1f} us (median, {lat['how']})" if lat else ""
            print(f"  {mode:>7}: {r['tokens_per_step']:.3f} tokens/step, acceptance {r['acceptance']:.3f}{extra}")
            print(f"           first sequence: {r['first_sequence'][:24]}")
    return 0


def _reference_verify(**kw: Any) -> Any:
    from pp3.reference import verify

    return verify(**kw)


def _draft_latency(drafter: Any, mode: str, b: int, temperature: float, device: str, replays: int) -> dict[str, Any]:
    """One whole depth-D draft call: CUDA-graph replays (event-timed) on a GPU, wall time on the CPU."""
    import torch

    from pp3.testing.timing import time_calls

    dev = torch.device(device)
    ctx = torch.zeros((b, 1), dtype=torch.int64, device=dev)
    seed = torch.arange(b, dtype=torch.int64, device=dev)
    rnd = torch.zeros(b, dtype=torch.int64, device=dev)
    pos = torch.ones(b, dtype=torch.int64, device=dev)
    temp = torch.full((b,), temperature, dtype=torch.float32, device=dev)

    def fn() -> Any:
        return drafter.draft_sampled(ctx, temp, seed, rnd, pos) if mode == "sampled" else drafter.draft(ctx)

    on_gpu = dev.type == "cuda"
    stats = time_calls(fn, replays if on_gpu else max(3, replays // 20), graph=on_gpu)
    return stats | {"how": "CUDA graph replay, CUDA events" if on_gpu else "CPU wall time"}


def _repository_tool(name: str) -> Callable[[Sequence[str]], int]:
    def run(argv: Sequence[str]) -> int:
        print(f"pp3 {name}: this is a repository tool: run `make {name}` in a checkout of the repository",
              file=sys.stderr)
        return 2

    return run


COMMANDS: dict[str, tuple[Callable[[Sequence[str]], int], str]] = {
    "verify": (cmd_verify, "bitwise parity of the Triton kernels with the reference (pp3.audit.parity)"),
    "conformance": (cmd_conformance, "the conformance files against the installed implementation"),
    "demo": (cmd_demo, "the speculation loop with a Markov drafter and target"),
    "audit-e2e": (cmd_audit, "the end-to-end losslessness audit (pp3.audit.e2e)"),
    "stats": (_repository_tool("stats"), "a repository tool: make stats"),
    "bench": (_repository_tool("bench"), "a repository tool: make bench"),
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
