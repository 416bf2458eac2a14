"""``pp3`` / ``python -m pp3``: the command line of the installed package (argparse; ``pp3 --help``).

Every subcommand's options are range-checked when they are parsed; every refusal (a bad option, a missing extra, a
device that is not there) is one line on stderr with exit status 2 and no traceback. A run that checks something
exits 0 on PASS and 1 on FAIL; its ``--json`` output is one JSON document on stdout with ``"schema_version": 1``,
``"verdict": "PASS" | "FAIL"`` and the environment stamp; progress goes to stderr. Importing this module imports
neither torch nor triton.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pp3.audit._parser import Parser

DIST = "pp3-exact"  # the distribution's name (the import package is pp3)
SCHEMA_VERSION = 1
MAX_VOCAB = (1 << 31) - 1  # SPEC.md: token IDs are int32
BULK_VOCAB = 163840  # pp3 verify: the bulk rows' default vocabulary
REPLAYS = 200  # pp3 demo --latency: timed draft calls by default

DESCRIPTION = """\
pp3: exact, reproducible sampled draft proposals for speculative decoding and their lossless verification
(SPEC.md: the selector dyadic24-floor-first-v1 and the verifier accept-dyadic24-v1)."""

EPILOG = """\
Run "pp3 COMMAND --help" for a command's options. Exit status: 0 pass, 1 fail, 2 refused (one line on
stderr). Every --json output is one JSON document on stdout with "schema_version": 1, "verdict": "PASS" or
"FAIL" and an environment stamp; progress goes to stderr. verify, demo and audit-e2e need the kernels extra
(pip install 'pp3-exact[kernels]'); without a CUDA GPU the kernels run in Triton's interpreter when
TRITON_INTERPRET=1 is set. Sampled drafting is admitted only with DSPARK_SAMPLED_TOP32=1 in the environment.
stats and bench are repository tools: run "make stats" or "make bench" in a checkout."""


class Refusal(Exception):
    """A run that cannot start: its message is printed as one line on stderr, and the exit status is 2."""


class HelpFormatter(argparse.HelpFormatter):
    """Each option's help with its default ("(default: ...)", unless the help says it or there is none to show:
    a flag, or None)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return self.help_text(action)

    @staticmethod
    def help_text(action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "(default" in text or default is None or default is argparse.SUPPRESS or isinstance(default, bool):
            return text
        if not action.option_strings:
            return text
        shown = " ".join(str(v) for v in default) if isinstance(default, list | tuple) else str(default)
        return f"{text} (default: {shown})"


def version() -> str:
    """The installed distribution's version (importlib.metadata), else the package's own ``__version__``."""
    from importlib import metadata

    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        import pp3

        return pp3.__version__


# ---------------------------------------------------------------------------------------------- option types


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in lo .. hi."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer in {lo} .. {hi}, got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"expected an integer in {lo} .. {hi}, got {v}")
        return v

    parse.__name__ = "integer"
    return parse


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _fp32(*, zero: bool) -> Callable[[str], float]:
    """An argparse type: a number that fp32 holds as a finite value > 0 (or exactly 0 with ``zero``); the value as
    fp32 rounds it (what the kernels and the reference compute with)."""
    what = "0 or a positive number" if zero else "a positive number"

    def parse(text: str) -> float:
        v = _float(text)
        with np.errstate(all="ignore"):
            v32 = float(np.float32(v))
        if zero and v == 0.0:
            return 0.0
        if not (math.isfinite(v) and v > 0.0):
            raise argparse.ArgumentTypeError(f"expected {what} that fp32 holds, got {text!r}")
        if not math.isfinite(v32):
            raise argparse.ArgumentTypeError(f"{text} rounds to inf in fp32 (the largest fp32 is about 3.4e38)")
        if v32 == 0.0:
            raise argparse.ArgumentTypeError(f"{text} rounds to 0 in fp32 (the smallest positive fp32 is 1.4e-45)")
        return v32

    parse.__name__ = "number"
    return parse


def _open_interval(lo: float, hi: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        v = _float(text)
        if not lo < v < hi:  # NaN too
            raise argparse.ArgumentTypeError(f"expected a number in ({lo:g}, {hi:g}), got {text!r}")
        return v

    parse.__name__ = "number"
    return parse


def _replay_file(text: str) -> Any:
    """An argparse type: a failing case that ``pp3 verify`` wrote, loaded for ``--replay`` (``parity.Replay``)."""
    from pp3.audit.parity import load_replay
    from pp3.testing.call import DamagedRecord

    try:
        return load_replay(text)
    except DamagedRecord as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not a failing case written by pp3 verify (selector_first.npz, "
                                         f"verifier_first.npz, ...): {e}") from None


def _writable_file(flag: str, path: str | None) -> None:
    """Refuses (before the work, not after) an output file that cannot be written."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not (os.path.isdir(folder) and os.access(folder, os.W_OK)) or os.path.isdir(path):
        raise Refusal(f"{flag}: cannot write {path!r} (no writable folder {folder!r})")


def _writable_folder(flag: str, path: Path) -> None:
    """Refuses an output folder that could not be made or written (its nearest existing ancestor decides)."""
    p = path.resolve()
    while not p.exists():
        p = p.parent
    if not p.is_dir() or not os.access(p, os.W_OK):
        raise Refusal(f"{flag}: cannot write under {str(path)!r} ({str(p)!r} is not a writable folder)")


# ---------------------------------------------------------------------------------------------- environment


def _need(what: str, modules: Sequence[str], extra: str | None = "kernels") -> None:
    """Refuses, naming what is missing and the extra that brings it, unless every module imports."""
    absent = []
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError:
            absent.append(m)
    if absent:
        hint = f"pip install '{DIST}[{extra}]'" if extra else f"pip install {' '.join(absent)}"
        raise Refusal(f"{what} needs {', '.join(absent)}: {hint}")


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _need_device(what: str, device: str | None) -> None:
    if device == "cuda" and not _cuda():
        raise Refusal(f"{what}: --device cuda, but torch sees no CUDA GPU")


def _need_kernels_run(what: str) -> None:
    """The Triton kernels run on a CUDA GPU, or on the CPU under TRITON_INTERPRET=1; refuses otherwise. triton is
    imported last: its own jit functions (triton.language's) are interpreted only if TRITON_INTERPRET=1 was set
    when it was first imported, for the whole process."""
    _need(what, ("torch",))
    if not _cuda() and os.environ.get("TRITON_INTERPRET") != "1":
        raise Refusal(f"{what}: no CUDA GPU: set TRITON_INTERPRET=1 to run the kernels through Triton's interpreter")
    _need(what, ("triton",))


def _stamp() -> dict[str, Any]:
    from pp3.testing.stamp import environment

    return environment()


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


# ---------------------------------------------------------------------------------------------- verify


def add_verify(sub: Any) -> None:
    from pp3.audit.parity import PARTS, SELECTOR_KERNELS

    ap = sub.add_parser(
        "verify", help="bitwise parity of both Triton kernels with the reference, and the conformance files",
        formatter_class=HelpFormatter,
        description="Bitwise parity of the Triton selector (SPEC.md §2-§8) and verifier (§11) with the NumPy "
        "reference, and the conformance files on both. PASS (exit 0) only if every part passes; FAIL (exit 1) "
        "otherwise, the first mismatching call of each kernel written to --out with the command that replays it. "
        "On a CUDA GPU the kernels run natively at full sizes; without one, under TRITON_INTERPRET=1, in Triton's "
        "interpreter at the standard sizes (a few minutes) or --quick (about a minute). --impl checks any other "
        "implementation of either role through the same seam (docs/CONFORMANCE.md): its declaration decides which "
        "suites run, and the report carries two verdicts, bit-exact and lossless in law.",
    )
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true",
                      help="full sizes: the SPEC vocabularies up to V = 262144 (the default on a CUDA GPU)")
    size.add_argument("--quick", action="store_true", help="the smallest sizes (about a minute in the interpreter)")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=None, metavar="PART",
                    help=f"what to check, any of: {', '.join(PARTS)} (default: all)")
    ap.add_argument("--selectors", nargs="+", choices=SELECTOR_KERNELS, default=None, metavar="KERNEL",
                    help=f"the selector part's suites to run, any of: {', '.join(SELECTOR_KERNELS)} (default: the "
                    "shipped kernels': propose, propose with C gathering the blocks, the tile selector, the greedy "
                    "selector's keys and its rescan; onelaunch and rows, the one-launch and row selectors not yet "
                    "shipped, on request)")
    ap.add_argument("--bulk-rows", type=_int_in(0, 10**9), default=None, metavar="N",
                    help="random selector rows at --bulk-vocab, 0 .. 10^9 (default: 10^6 on a GPU, 0 otherwise)")
    ap.add_argument("--bulk-seed", type=_int_in(0, 2**32 - 1), default=None, metavar="S",
                    help="seed of the bulk rows, 0 .. 2^32-1; calls with distinct seeds check distinct rows "
                    "(default: 0)")
    ap.add_argument("--bulk-only", action="store_true", help="run only the selector's bulk rows")
    ap.add_argument("--bulk-greedy", action="store_true",
                    help="bulk rows with target temperature +-0 only: the greedy selector and propose's T0 rows "
                    "checked on every row (otherwise the greedy selector on the T0 and failed rows alone)")
    ap.add_argument("--bulk-vocab", type=_int_in(1, 262144), default=None, metavar="V",
                    help=f"vocabulary of the bulk rows, 1 .. 262144 (default: {BULK_VOCAB}; four shared buffers of "
                    "1024 rows each)")
    ap.add_argument("--json", action="store_true", help="print one JSON document (stamp and tables) on stdout")
    ap.add_argument("--out", type=Path, default=None, metavar="DIR",
                    help="where the first failing case of each kernel is written (default: verify-failures)")
    ap.add_argument("--replay", type=_replay_file, metavar="FILE",
                    help="re-run one written case (selector_first.npz, verifier_first.npz, a suite's or a conformance "
                    "file's) on the implementation and the reference: on the --impl it names, else on pp3's kernels; "
                    "with --call-timeout and no other option")
    ap.add_argument("--impl", type=_impl, action="append", default=None, metavar="ROLE=NAME",
                    help="check this implementation instead of pp3's kernels: ROLE selector or verifier, NAME "
                    "PKG.MOD:CALLABLE or an entry point of the group pp3.implementations (pp3-kernels, pp3-reference: "
                    "pp3's own); repeatable; only the parts of the roles given run (docs/CONFORMANCE.md)")
    ap.add_argument("--expected-failures", metavar="FILE", default=None,
                    help="a TOML file of the implementation's known failures (suite, case, reason): they do not fail "
                    "the verdict, and an entry that no longer fails is reported")
    ap.add_argument("--call-timeout", type=_open_interval(0.0, 86400.0), default=300.0, metavar="S",
                    help="seconds one call of an implementation may take before it is named a timeout and abandoned")
    ap.add_argument("--law", action="store_true",
                    help="also the lossless-in-law verdict (the end-to-end audit for a verifier, stats/ for a "
                    "selector) for implementations that claim bit-exactness (it always runs for those that do not)")
    ap.add_argument("--law-n", type=_int_in(100, 10**9), default=100_000, metavar="N",
                    help="sequences (draws) per case of the law audits, 100 .. 10^9")
    ap.add_argument("--alpha", type=_open_interval(0.0, 1.0), default=0.01,
                    help="family-wise alpha of the law audits (Holm), in (0, 1)")
    ap.set_defaults(run=cmd_verify)


def _impl(text: str) -> tuple[str, str]:
    """An argparse type: ROLE=NAME (the implementation is loaded when the command has parsed its options)."""
    role, sep, name = text.partition("=")
    if not sep or role not in ("selector", "verifier") or not name:
        raise argparse.ArgumentTypeError(f"expected selector=NAME or verifier=NAME, got {text!r}")
    return role, name


def _given(parser: argparse.ArgumentParser, args: argparse.Namespace, dest: str) -> bool:
    """Whether the command line set option ``dest`` (its value is not the parser's default)."""
    return bool(getattr(args, dest) != parser.get_default(dest))


def _implementations(parser: argparse.ArgumentParser, args: argparse.Namespace, selectors: Any) -> Any:
    """The implementations --impl names (pp3's kernels without it), by role; one that cannot be loaded is refused
    through ``parser.error``."""
    from pp3.audit.parity import implementations
    from pp3.harness.protocol import ImplementationError

    try:
        return implementations(args.impl or (), selectors)
    except ImplementationError as e:
        parser.error(f"--impl: {e}")


def _verify_plan(parser: argparse.ArgumentParser, args: argparse.Namespace, cuda: bool) -> Any:
    """The run that pp3 verify's options ask for (``pp3.audit.parity.Plan``), every option refused through
    ``parser.error`` (one line naming it, exit status 2) where it cannot apply: a run never passes over a check it
    was asked for and did not make."""
    from pp3.audit.parity import PARTS, Plan
    from pp3.harness.protocol import ROLES
    from pp3.harness.xfail import ExpectedFailures, ExpectedFailuresError

    def given(dest: str) -> bool:
        return _given(parser, args, dest)

    sizes = [flag for flag, dest in (("--full", "full"), ("--quick", "quick")) if given(dest)]
    if args.bulk_only and given("parts"):
        parser.error("--parts: --bulk-only runs the selector part's bulk rows alone")
    parts = ("selector",) if args.bulk_only else tuple(p for p in PARTS if p in (args.parts or PARTS))
    if args.selectors and (args.bulk_only or "selector" not in parts):
        parser.error("--selectors: picks the selector part's suites; with --bulk-only or without the selector part "
                     "it would check nothing it names")
    impls = _implementations(parser, args, args.selectors)
    plugged = bool(args.impl)
    if plugged:
        roles = {role for role, _ in args.impl}
        missing = [p for p in parts if p in ROLES and p not in roles]
        if given("parts") and missing:
            parser.error(f"--parts: no --impl of the {missing[0]} is given, and pp3's kernels run only without --impl")
        # The parts of the roles given that claim bit-exactness (and the conformance files of those); an
        # implementation that does not is judged in law only.
        exact = {r: any(i.caps.exact for i in impls[r]) for r in ROLES}
        parts = tuple(p for p in parts if (p in ROLES and exact[p]) or (p == "conformance" and any(exact.values())))
    if args.bulk_rows and "selector" not in parts:
        parser.error(f"--bulk-rows: the bulk rows are the selector part's, and --parts {' '.join(parts)} has none")
    default_rows = 1_000_000 if cuda and "selector" in parts else 0  # a GPU checks 10^6 rows unless told otherwise
    bulk_rows = args.bulk_rows if given("bulk_rows") else default_rows
    if args.bulk_only and bulk_rows == 0:
        parser.error("--bulk-only with 0 bulk rows would check nothing; give --bulk-rows N (N >= 1)")
    if bulk_rows == 0:
        if given("bulk_rows"):
            why = "--bulk-rows 0"
        elif "selector" not in parts:
            why = f"--parts {' '.join(parts)} has no selector part"
        else:
            why = "without a GPU, give --bulk-rows N"
        for dest in ("bulk_seed", "bulk_vocab", "bulk_greedy"):
            if given(dest):
                parser.error(f"--{dest.replace('_', '-')}: applies to the bulk rows, and this run has none ({why})")
    suites = not args.bulk_only and any(p in parts for p in ("selector", "verifier"))
    if sizes and not suites:
        parser.error(f"{sizes[0]}: sizes the selector's and the verifier's suites, and this run has none"
                     + (" (--bulk-only)" if args.bulk_only else f" (--parts {' '.join(parts)})"))
    if args.full and not cuda:
        parser.error("--full runs the SPEC vocabularies (V up to 262144), for a CUDA GPU; in the interpreter use the "
                     "default sizes or --quick")
    law_asked = args.law or any(not i.caps.exact for r in ROLES for i in impls[r])
    for dest in ("law_n", "alpha"):
        if given(dest) and not law_asked:
            parser.error(f"--{dest.replace('_', '-')}: applies to the lossless-in-law audits, and this run has none "
                         "(give --law, or an implementation that does not claim bit-exactness)")
    try:
        xfail = ExpectedFailures.load(args.expected_failures)
    except ExpectedFailuresError as e:
        parser.error(f"--expected-failures: {e}")
    return Plan(
        size="quick" if args.quick else "full" if args.full or cuda else "standard",
        parts=parts,
        suites=suites,
        bulk_rows=bulk_rows,
        bulk_seed=args.bulk_seed or 0,
        bulk_vocab=args.bulk_vocab or BULK_VOCAB,
        bulk_greedy=args.bulk_greedy,
        out=args.out or Path("verify-failures"),
        json=args.json,
        impls=impls,
        plugged=plugged,
        xfail=xfail,
        call_timeout=args.call_timeout,
        law=args.law,
        law_n=args.law_n,
        alpha=args.alpha,
    )


def _kernels_run(plan: Any) -> bool:
    """Whether a run of ``plan`` runs pp3's kernels: without --impl, with pp3-kernels given, or for the verifier's
    request rows (``accept-plans``: drafts proposed by pp3's selector)."""
    from pp3.harness import builtin
    from pp3.harness.protocol import ROLES

    return not plan.plugged or any(i.name == builtin.KERNELS for r in ROLES for i in plan.impls[r]) or (
        "verifier" in plan.parts and plan.suites)


def cmd_verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _need("pp3 verify", ("torch",))
    import warnings

    import torch

    from pp3.audit import parity
    from pp3.harness import builtin
    from pp3.testing.call import DamagedRecord

    cuda = _cuda()
    device = torch.device("cuda" if cuda else "cpu")
    if args.replay is not None:
        for dest in ("full", "quick", "parts", "selectors", "bulk_rows", "bulk_seed", "bulk_only", "bulk_greedy",
                     "bulk_vocab", "out", "expected_failures", "law", "law_n", "alpha"):
            if _given(parser, args, dest):
                parser.error(f"--{dest.replace('_', '-')}: does not apply to --replay, which re-runs the one case "
                             "of its file")
        impls = _implementations(parser, args, None) if args.impl else None
        if parity.replay_implementation(args.replay, impls).name == builtin.KERNELS:
            _need_kernels_run("pp3 verify")
        # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
        try:
            return parity.replay(args.replay, device, args.json, impls, args.call_timeout)
        except DamagedRecord as e:
            parser.error(f"--replay: {args.replay.path!r}: {e}")

    plan = _verify_plan(parser, args, cuda)
    if _kernels_run(plan):
        _need_kernels_run("pp3 verify")
    _writable_folder("--out", plan.out)
    return parity.run(plan, device)


# ---------------------------------------------------------------------------------------------- conformance


def add_conformance(sub: Any) -> None:
    ap = sub.add_parser(
        "conformance", help="the conformance files against the installed implementation",
        formatter_class=HelpFormatter,
        description="The conformance files (pp3/conformance: golden vectors of both kernels, Philox4x64-10 known "
        "answers, the exponential's worst cases) against the installed NumPy reference, and against the Triton "
        "kernels where they run.",
    )
    ap.add_argument("--kernels", choices=("auto", "yes", "no"), default="auto",
                    help="also run the kernels: auto (if torch and triton import and there is a CUDA GPU or "
                         "TRITON_INTERPRET=1), yes (refused where they cannot run), no")
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.set_defaults(run=cmd_conformance)


def cmd_conformance(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.kernels == "yes":
        _need_kernels_run("pp3 conformance --kernels yes")
    from pp3.audit import conformance

    report = conformance.run(kernels={"auto": None, "yes": True, "no": False}[args.kernels])
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(conformance.render(report))
    return 0 if report["verdict"] == "PASS" else 1


# ---------------------------------------------------------------------------------------------- audit-e2e


def add_audit(sub: Any) -> None:
    ap = sub.add_parser(
        "audit-e2e", help="the end-to-end losslessness audit (Markov drafter and target)",
        formatter_class=HelpFormatter,
        description="End-to-end losslessness audit (pp3.audit.e2e): speculative generation with a Markov drafter "
        "and target, chi-square tests of the first three tokens' joint law and of the first round's accepted "
        "count against their exact laws (Holm over each family), and every planted bug caught. Needs "
        "DSPARK_SAMPLED_TOP32=1.",
    )
    ap.add_argument("--n", type=_int_in(1, 10**9), default=100_000,
                    help="sequences per case, 1 .. 10^9; a run too small for every test to be able to reject (a "
                    "test of one group, df 0) is refused")
    ap.add_argument("--mutant-n", type=_int_in(1, 10**9), default=None,
                    help="sequences per planted-bug case, 1 .. 10^9 (default: --n)")
    ap.add_argument("--temperatures", type=_fp32(zero=True), nargs="+", default=[0.0, 0.5, 1.0, 2.0], metavar="T",
                    help="target temperatures: 0 (greedy) or positive numbers that fp32 holds")
    ap.add_argument("--mutant-temperatures", type=_fp32(zero=False), nargs="+", default=None, metavar="T",
                    help="target temperatures of the planted-bug cases: positive numbers that fp32 holds (default: "
                    "0.5 1.0 2.0)")
    ap.add_argument("--no-mutants", action="store_true", help="skip the planted-bug power demonstration")
    ap.add_argument("--alpha", type=_open_interval(0.0, 1.0), default=0.01, help="family-wise alpha (Holm), in (0, 1)")
    ap.add_argument("--vocab", type=_int_in(2, 64), default=8,
                    help="vocabulary V, 2 .. 64 (the joint law of three tokens has V^3 bins)")
    ap.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0, help="seed of the sequences, 0 .. 2^32-1")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the drafter runs")
    ap.add_argument("--verifier", type=_audit_verifier, default="reference", metavar="VERIFIER",
                    help="reference, triton (the kernel: a CUDA GPU or TRITON_INTERPRET=1), flashinfer "
                    "(FlashInfer's chain_speculative_sampling fed pp3's exact q; needs --device cuda; its planted bug "
                    "feeds it the greedy path's q), or any verifier through the seam: PKG.MOD:CALLABLE or an entry "
                    "point of the group pp3.implementations (docs/CONFORMANCE.md)")
    ap.add_argument("--batch", type=_int_in(1, 1 << 20), default=1 << 16,
                    help="sequences per simulated batch, 1 .. 2^20")
    ap.add_argument("--plot", metavar="PNG", default=None,
                    help="write the acceptance / tokens-per-step plot here (needs matplotlib)")
    ap.add_argument("--markdown", metavar="MD", default=None, help="write the tables here")
    ap.add_argument("--json", action="store_true", help="print the full log as one JSON document on stdout")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--trees", action="store_true",
                    help="audit draft trees instead (SPEC.md §12, pp3.audit.e2e_tree): sampled trees verified by "
                    "SPEC.md §12.6 and ranked trees by the walk of §12.9, with the NumPy reference; needs no "
                    "DSPARK_SAMPLED_TOP32; --device, --verifier and --plot do not apply")
    ap.add_argument("--shapes", nargs="+", default=None, metavar="SHAPE",
                    help="with --trees: the tree shapes, named as in pp3.audit.e2e_tree.SHAPES (default: all)")
    ap.set_defaults(run=cmd_audit)


AUDIT_VERIFIERS = ("reference", "triton", "flashinfer")


def _audit_verifier(text: str) -> str:
    """An argparse type: one of AUDIT_VERIFIERS, or the name of an implementation (loaded when the run starts)."""
    if text in AUDIT_VERIFIERS or ":" in text or text.replace("-", "").replace("_", "").replace(".", "").isalnum():
        return text
    raise argparse.ArgumentTypeError(f"expected {', '.join(AUDIT_VERIFIERS)} or PKG.MOD:CALLABLE, got {text!r}")


def _verifier(name: str) -> Callable[..., Any] | None:
    """None (the reference verifier), the Triton verifier, FlashInfer's chain, or a verifier through the seam
    (``pp3.harness``: every call guarded), with the reference's convention."""
    if name == "reference":
        return None
    if name == "flashinfer":
        from pp3.testing.peers import flashinfer_verifier

        return flashinfer_verifier()
    if name == "triton":
        from pp3.testing.call import kernel_verifier

        return kernel_verifier
    from pp3.audit.law import reference_convention
    from pp3.harness.guard import Guard
    from pp3.harness.protocol import ImplementationError, load

    try:
        impl = load(name, "verifier")[0]
    except ImplementationError as e:
        raise Refusal(f"--verifier: {e}") from None
    return reference_convention(Guard(impl))


def _verifier_mutants(name: str, none: bool) -> dict[str, Callable[..., Any]]:
    """The planted bugs of a peer verifier (FlashInfer fed the greedy path's q), by name."""
    if name != "flashinfer" or none:
        return {}
    from pp3.testing.peers import flashinfer_verifier

    return {"flashinfer-q-from-greedy": flashinfer_verifier(q="greedy", seed=1)}


def cmd_audit(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.no_mutants:
        for dest in ("mutant_n", "mutant_temperatures"):
            if _given(parser, args, dest):
                parser.error(f"--{dest.replace('_', '-')}: applies to the planted bugs, and --no-mutants runs none")
    _need("pp3 audit-e2e", ("torch",))  # before pp3.drafter, which imports it
    if args.trees:
        return _cmd_audit_trees(args)
    if args.shapes is not None:
        raise Refusal("pp3 audit-e2e: --shapes needs --trees")
    from pp3.drafter import SAMPLED_ENV, sampled_enabled

    if not sampled_enabled():
        raise Refusal(f"pp3 audit-e2e: the audit drafts with draft_sampled; set {SAMPLED_ENV}=1")
    _need_device("pp3 audit-e2e", args.device)
    if args.verifier == "triton":
        _need_kernels_run("pp3 audit-e2e --verifier triton")
    if args.verifier == "flashinfer":
        if args.device != "cuda":
            raise Refusal("pp3 audit-e2e: --verifier flashinfer runs on the GPU; give --device cuda")
        _need("pp3 audit-e2e --verifier flashinfer", ("flashinfer",), extra=None)
    if args.plot:
        _need("pp3 audit-e2e --plot", ("matplotlib",), "plot")
    _writable_file("--plot", args.plot)
    _writable_file("--markdown", args.markdown)
    from pp3.audit import e2e
    from pp3.audit.law import CallFailed
    from pp3.speculate import MODES

    verifier = _verifier(args.verifier)
    setup = e2e.make_setup(vocab=args.vocab, device=args.device)
    # A run so small that some test has one group (df 0, p = 1 whatever it sees) has no power: refused, not passed.
    sizes = [("--n", args.n, args.temperatures, MODES)]
    if not args.no_mutants:
        flag = "--mutant-n" if args.mutant_n is not None else "--n"
        sizes.append((flag, args.mutant_n or args.n, args.mutant_temperatures or e2e.MUTANT_TEMPERATURES, ("sampled",)))
    for flag, n, temps, modes in sizes:
        least = e2e.least_n(setup, temps, modes)
        if n < least:
            parser.error(f"{flag} {n}: too few sequences per case for every chi-square test to be able to reject (a "
                         f"test of one group has df 0 and p = 1 whatever it sees); give {flag} {least} or more")
    bar = ProgressBar(not args.quiet)
    t0 = time.perf_counter()
    try:
        audit = e2e.run_audit(
            setup,
            args.n,
            temperatures=args.temperatures,
            mutants=() if args.no_mutants else e2e.MUTANTS,
            mutant_temperatures=args.mutant_temperatures or e2e.MUTANT_TEMPERATURES,
            mutant_n=args.mutant_n,
            alpha=args.alpha,
            seed=args.seed,
            batch=args.batch,
            verifier=verifier,
            verifier_mutants=_verifier_mutants(args.verifier, args.no_mutants),
            progress=bar,
        )
    except CallFailed as e:  # a verifier through the seam that raised, hung or returned the wrong fields
        print(f"pp3 audit-e2e: FAIL: a call of the verifier failed: {e}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - t0
    text = (
        f"end-to-end audit: V={setup.vocab}, depth {setup.depth}, drafter tau {setup.tau}, alpha {args.alpha} "
        f"(Holm over each family), {args.n:,} sequences per case\n\n{audit.table()}\n"
    )
    if audit.mutants:
        text += f"\n{audit.mutant_table()}\n"
    power = "" if audit.mutants else "; no planted bug run: the power to catch one is not shown"
    text += f"\naudit-e2e: {'PASS' if audit.passed else 'FAIL'} ({seconds:.0f}s{power})\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.plot:
        e2e.plot(audit, args.plot)
    if args.json:
        log = audit.to_json() | {"verifier": args.verifier, "seconds": round(seconds, 1), "environment": _stamp()}
        print(json.dumps(log, indent=1))
    else:
        print(text)
    return 0 if audit.passed else 1


def _cmd_audit_trees(args: argparse.Namespace) -> int:
    """``pp3 audit-e2e --trees``: pp3.audit.e2e_tree on the chain audit's Markov pair, with the reference."""
    for flag, value, default in (("--device", args.device, "cpu"), ("--verifier", args.verifier, "reference"),
                                 ("--plot", args.plot, None)):
        if value != default:
            raise Refusal(f"pp3 audit-e2e: {flag} does not apply to --trees (the tree audit runs the reference)")
    from pp3.audit import e2e, e2e_tree

    shapes = args.shapes or list(e2e_tree.SHAPES)
    unknown = [x for x in shapes if x not in e2e_tree.SHAPES]
    if unknown:
        raise Refusal(f"pp3 audit-e2e: --shapes: unknown {unknown}; expected some of {list(e2e_tree.SHAPES)}")
    _writable_file("--markdown", args.markdown)
    setup = e2e.make_setup(vocab=args.vocab)
    bar = ProgressBar(not args.quiet)
    t0 = time.perf_counter()
    audit = e2e_tree.run_audit(
        setup, args.n, shapes=shapes, temperatures=args.temperatures,
        mutants=() if args.no_mutants else e2e_tree.MUTANTS,
        mutant_temperatures=args.mutant_temperatures or e2e_tree.MUTANT_TEMPERATURES,
        mutant_n=args.mutant_n, alpha=args.alpha, seed=args.seed, batch=args.batch, progress=bar,
    )
    seconds = time.perf_counter() - t0
    text = (f"end-to-end audit of draft trees: V={setup.vocab}, drafter tau {setup.tau}, alpha {args.alpha} (Holm over "
            f"each family), {args.n:,} sequences per case\n\n{audit.table()}\n")
    if audit.mutants:
        text += f"\n{audit.mutant_table()}\n"
    text += f"\naudit-e2e --trees: {'PASS' if audit.passed else 'FAIL'} ({seconds:.0f}s)\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        print(json.dumps(audit.to_json() | {"seconds": round(seconds, 1), "environment": _stamp()}, indent=1))
    else:
        print(text)
    return 0 if audit.passed else 1


# ---------------------------------------------------------------------------------------------- demo


def add_demo(sub: Any) -> None:
    ap = sub.add_parser(
        "demo", help="the speculation loop with a Markov drafter and target", formatter_class=HelpFormatter,
        description="The speculation loop (draft, score, verify, advance) on a Markov drafter and a perturbed copy "
        "of it as the target, greedy drafting and (with DSPARK_SAMPLED_TOP32=1) sampled drafting. With --verifier "
        "triton every round's verdict is also compared with the reference's, bit for bit: the verdict is FAIL if "
        "any differs.",
    )
    ap.add_argument("--vocab", type=_int_in(2, 262144), default=4096, help="vocabulary V, 2 .. 262144")
    ap.add_argument("--rank", type=_int_in(1, 1024), default=64,
                    help="rank of the drafter's factorised logits, 1 .. 1024 (exact dyadic logits)")
    ap.add_argument("--depth", type=_int_in(1, 32), default=5, help="drafts per round, 1 .. 32")
    ap.add_argument("--batch", type=_int_in(1, 4096), default=4, help="sequences, 1 .. 4096")
    ap.add_argument("--rounds", type=_int_in(1, 10_000), default=8, help="speculation rounds, 1 .. 10000")
    ap.add_argument("--shards", type=_int_in(1, 64), default=2,
                    help="vocabulary shards of the drafter's projection, 1 .. 64 (at most --vocab)")
    ap.add_argument("--gain", type=_int_in(-8, 8), default=2,
                    help="drafter logits scaled by 2^gain (peakedness), -8 .. 8 (exact dyadic logits)")
    ap.add_argument("--temperature", type=_fp32(zero=True), default=1.0,
                    help="the target temperature: 0 (greedy) or a positive number that fp32 holds")
    ap.add_argument("--tau", type=_fp32(zero=False), default=1.0,
                    help="the drafter temperature of the selector: a positive number that fp32 holds")
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None,
                    help="where the drafter and target run (default: cuda if torch sees a GPU, else cpu)")
    ap.add_argument("--verifier", choices=("reference", "triton"), default="reference",
                    help="reference, or triton (the kernel, on a CUDA GPU or under TRITON_INTERPRET=1)")
    ap.add_argument("--latency", action="store_true", help="also time the draft loop (CUDA graph on a GPU)")
    ap.add_argument("--replays", type=_int_in(1, 100_000), default=None,
                    help=f"timed draft calls with --latency, 1 .. 100000 (default: {REPLAYS})")
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.set_defaults(run=cmd_demo)


def _reference_verify(**kw: Any) -> Any:
    from pp3.reference import verify

    return verify(**kw)


def cmd_demo(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.shards > args.vocab:
        parser.error(f"--shards {args.shards}: at most --vocab = {args.vocab}")
    if _given(parser, args, "replays") and not args.latency:
        parser.error("--replays: counts the timed draft calls of --latency, and this run times none")
    _need("pp3 demo", ("torch",))
    _need_device("pp3 demo", args.device)
    if args.verifier == "triton":
        _need_kernels_run("pp3 demo --verifier triton")

    import torch

    from pp3.drafter import SAMPLED_ENV, TPDrafter, sampled_enabled
    from pp3.speculate import MODES, speculation_round
    from pp3.testing.compare import row_mismatch
    from pp3.testing.markov import MarkovDrafter

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
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

    checks = {"verdicts": 0, "verdicts_differing_from_reference": 0}
    kernel = _verifier(args.verifier)

    def verify(**kw: Any) -> Any:
        if kernel is None:
            return _reference_verify(**kw)
        got = kernel(**kw)
        checks["verdicts"] += 1
        checks["verdicts_differing_from_reference"] += int(row_mismatch(got, _reference_verify(**kw)).any())
        return got

    drafter = TPDrafter(drafter_model, args.depth, tau=args.tau)
    modes = [m for m in MODES if m == "greedy" or sampled_enabled()][::-1]
    if "sampled" not in modes and not args.quiet:
        print(f"pp3 demo: sampled drafting skipped (set {SAMPLED_ENV}=1 to admit it)", file=sys.stderr)
    bar = ProgressBar(not args.quiet)
    report: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "tool": "pp3 demo", "verdict": "FAIL",
                              "vocab": args.vocab, "depth": args.depth, "batch": args.batch,
                              "temperature": args.temperature, "tau": args.tau, "device": device,
                              "verifier": args.verifier, "modes": {}, "checks": checks}
    b = args.batch
    failure: str | None = None
    for mode in modes:
        seqs: list[list[int]] = [[0] for _ in range(b)]
        prev = np.zeros(b, dtype=np.int64)
        pos = np.ones(b, dtype=np.uint64)
        seeds = np.arange(b, dtype=np.uint64) + np.uint64(1000)
        emitted = accepted = 0
        for rnd in range(args.rounds):
            try:
                res = speculation_round(drafter, target, verify, mode=mode, prev=prev, temperature=args.temperature,
                                        seed=seeds, round=rnd, position=pos)
            except AssertionError as e:  # a row failed verification: the demo's rows never should
                failure = f"{mode} round {rnd}: {e}"
                break
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
            r["draft_latency_us"] = _draft_latency(drafter, mode, b, args.temperature, device,
                                                   args.replays or REPLAYS)
        report["modes"][mode] = r
        if failure:
            break
    ok = failure is None and checks["verdicts_differing_from_reference"] == 0
    report["verdict"] = "PASS" if ok else "FAIL"
    report["failure"] = failure
    if args.json:
        print(json.dumps(report | {"environment": _stamp()}, indent=1))
    else:
        print(f"speculation loop: V={args.vocab}, depth {args.depth}, batch {args.batch}, target "
              f"T={args.temperature}, {device}, verifier {args.verifier}")
        for mode, r in report["modes"].items():
            lat = r.get("draft_latency_us")
            extra = f", draft latency {lat['median_us']:.1f} us (median, {lat['how']})" if lat else ""
            print(f"  {mode:>7}: {r['tokens_per_step']:.3f} tokens/step, acceptance {r['acceptance']:.3f}{extra}")
            print(f"           first sequence: {r['first_sequence'][:24]}")
        if kernel is not None:
            print(f"  {checks['verdicts']} kernel verdicts, {checks['verdicts_differing_from_reference']} differing "
                  "from the reference")
        print(f"demo: {report['verdict']}" + (f" ({failure})" if failure else ""))
    return 0 if ok else 1


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


# ---------------------------------------------------------------------------------------------- the program

REPOSITORY_TOOLS = {"stats": "the statistical audits of the samplers", "bench": "the benchmarks"}


def parser() -> Parser:
    ap = Parser(prog="pp3", description=DESCRIPTION, epilog=EPILOG, formatter_class=HelpFormatter)
    ap.add_argument("--version", action="version", version=f"pp3 {version()} ({DIST})",
                    help="print the installed version and exit")
    sub = ap.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    add_verify(sub)
    add_conformance(sub)
    add_demo(sub)
    add_audit(sub)
    for name, what in REPOSITORY_TOOLS.items():
        sub.add_parser(name, help=f"a repository tool ({what}): make {name} in a checkout", add_help=False)
    ap.commands = dict(sub.choices)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """The ``pp3`` program: 0 PASS, 1 FAIL, 2 refused (one line on stderr)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    if not args_list:
        ap.print_usage(sys.stderr)
        return 2
    if args_list[0] in REPOSITORY_TOOLS:
        name = args_list[0]
        print(f"pp3 {name}: this is a repository tool: run `make {name}` in a checkout of the repository",
              file=sys.stderr)
        return 2
    try:
        args = ap.parse_args(args_list)
        if args.command is None:  # options only, e.g. "pp3 --"
            ap.print_usage(sys.stderr)
            return 2
        code: int = args.run(ap.commands[args.command], args)
    except SystemExit as e:  # --help, --version (0) and refused arguments (parser.error: 2, one line printed)
        return e.code if isinstance(e.code, int) else 2
    except Refusal as e:
        print(str(e) if str(e).startswith("pp3") else f"pp3 {args.command}: {e}", file=sys.stderr)
        return 2
    return code
