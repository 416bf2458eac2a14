"""``python -m stats``: run the statistical audits, print the tables, write results/ (JSON, PNG, text).

CPU: the reference and every planted-bug mutant at the same N (``--quick``: the CI-sized suite). GPU (when torch
sees CUDA and ``pp3.kernels`` imports, or ``--device cuda``): the kernels at >= 10^7 draws per case, with parity
against the reference on a subsample. Exit status 1 if a real sampler fails an audit or a planted bug is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from stats import audits, report
from stats.samplers import Composed, kernel_sampler, mutants


def _progress(tag: str) -> audits.Progress:
    start = time.perf_counter()

    def emit(msg: str) -> None:
        print(f"[{tag} {time.perf_counter() - start:6.1f}s] {msg}", file=sys.stderr, flush=True)

    return emit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stats", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="the CI-sized suite (what `pytest -m stats` runs)")
    ap.add_argument("--n", type=int, help="draws per case (default: 10^5 quick, 10^6 full, 10^7 GPU)")
    ap.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: the CPU suite, plus the kernels when a GPU and pp3.kernels are present",
    )
    ap.add_argument("--no-mutants", action="store_true", help="skip the planted-bug power demonstration")
    ap.add_argument("--out", type=Path, default=Path("results"), help="folder for stats.json/.png/.txt")
    ap.add_argument("--json", type=Path, help="where to write the JSON log (default: OUT/stats.json)")
    args = ap.parse_args(argv)
    if args.n is not None and args.n < 1:
        ap.error(f"--n: expected draws per case >= 1, got {args.n}")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        ap.error(f"--out: cannot create {args.out}: {e.strerror}")

    kernel = kernel_sampler() if args.device in ("auto", "cuda") else None
    if args.device == "cuda" and kernel is None:
        print("--device cuda: no CUDA device visible to torch, or pp3.kernels does not import", file=sys.stderr)
        return 2

    t_start = time.perf_counter()
    cpu_cfg = audits.QUICK if args.quick else audits.FULL
    if args.n is not None:
        cpu_cfg = dataclasses.replace(cpu_cfg, case_n=args.n)
    reference = Composed()
    planted = [] if args.no_mutants else mutants()
    print(
        f"CPU suite '{cpu_cfg.name}': reference + {len(planted)} planted bugs, {cpu_cfg.case_n:,} draws per case",
        file=sys.stderr,
    )
    cpu = audits.Suite([reference, *planted], cpu_cfg, _progress("cpu"), reference=reference)
    reports = cpu.run_all()
    real = [reference.name]
    suites = [(cpu, cpu_cfg, "cpu")]
    if kernel is not None:
        gpu_cfg = dataclasses.replace(audits.GPU, case_n=max(audits.GPU.case_n, args.n or 0))
        print(f"GPU suite: {kernel.name}, {gpu_cfg.case_n:,} draws per case", file=sys.stderr)
        gpu = audits.Suite([kernel], gpu_cfg, _progress("gpu"), reference=reference)
        reports.update(gpu.run_all())
        real.append(kernel.name)
        suites.append((gpu, gpu_cfg, "cuda"))
    seconds = time.perf_counter() - t_start

    text = []
    for name in real:
        text += [
            f"== {name}: alpha = {audits.ALPHA} family-wise, Holm over the chi-square family ==",
            report.results_table(reports[name]),
            "",
        ]
    mutant_reports = [reports[m.name] for m in planted]
    if mutant_reports:
        family = sum(r.kind == "chi2" for r in reports[reference.name].results)
        text += [
            "== planted bugs (same audits, same N, same keys) ==",
            report.power_table(mutant_reports),
            "",
            "== the bugs that change the draw distribution: size, and the N a frequency audit needs ==",
            report.effect_table(cpu, planted, family),
            "",
        ]
    text += [
        "== what the 2^24 quantization costs (tickets vs the ideal softmax over the top 32) ==",
        report.quantization_table(suites[-1][0]),
        "",
    ]
    failing = [n for n in real if reports[n].rejected]
    missed = [r.name for r in mutant_reports if not r.rejected]
    verdict = "PASS" if not failing and not missed else "FAIL"
    text.append(
        f"{verdict}: real samplers failing: {failing or 'none'}; planted bugs missed: {missed or 'none'} "
        f"({seconds:.0f}s)"
    )
    print("\n".join(text))

    args.out.mkdir(parents=True, exist_ok=True)
    for suite, cfg, device in suites:
        suffix = "" if device == "cpu" else "-gpu"
        subset = {n: r for n, r in reports.items() if n in suite.reports}
        report.to_json(
            args.json if (args.json and device == "cpu") else args.out / f"stats{suffix}.json",
            cfg,
            report.environment(device if device == "cpu" else real[-1]),
            subset,
            suite,
            seconds,
        )
    (args.out / "stats.txt").write_text("\n".join(text) + "\n")
    report.plot(args.out / "stats.png", suites[-1][0], [real[-1]] if len(suites) > 1 else real, mutant_reports)
    print(f"wrote {args.out}/stats.json, stats.png, stats.txt", file=sys.stderr)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
