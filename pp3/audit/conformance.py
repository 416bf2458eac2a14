"""``pp3 conformance``: every file of ``pp3/conformance`` against implementations of pp3's semantic IDs, through the
seam every implementation goes through (``pp3.harness``): the NumPy reference always, pp3's Triton kernels where they
run (torch and triton import, and a CUDA GPU or TRITON_INTERPRET=1), and under ``pp3 verify --impl`` the
implementation given.

Each file drives every implementation (SPEC.md §10, §11.11, §12.12): the selector's and the verifier's golden
vectors (each case a guarded call, ``pp3.harness.guard``: a call that fails by name counts all its rows and is
written for ``--replay``), the Random123 known answers for Philox4x64-10, and the exponential's worst cases, these
two through the primitives an implementation exports (pp3's kernels: ``pp3.kernels.philox`` / ``pp3.kernels.expf``),
and beside the files one generated check, the exponential on a sweep of its domain (``SWEEPS``: the rounding of
subnormal results, which no output of either role shows), each primitive call guarded the same way; where an
implementation has no entry for a file (no implementation of that role, no such primitive, or a declaration that
admits none of its cases), its row says so (``skipped``) and counts in no verdict. The draft trees' golden vectors
(SPEC.md §12: ``propose_tree``, ``verify_tree``, ``verify_walk``) are checked on the reference only: no
implementation of them goes through the seam yet and pp3's kernels have none, so their rows on any other
implementation are skipped (``_reference_only``). ``run`` returns one JSON-ready document (``schema_version`` 1,
``verdict`` "PASS" or "FAIL").
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pp3.harness import builtin
from pp3.harness.guard import DEFAULT_TIME_LIMIT, Guard, Outcome
from pp3.harness.protocol import Implementation, NotExported, Role
from pp3.harness.xfail import ExpectedFailures
from pp3.testing import adapt, golden
from pp3.testing.call import AcceptCall, Call
from pp3.testing.compare import row_mismatch
from pp3.testing.stamp import environment

SCHEMA_VERSION = 1
SUITE = "conformance"  # the suite name of its failing cases, in reports and expected-failures files


@dataclasses.dataclass
class Subject:
    """One implementation under the files (a name and its implementations of either role), and where its failing
    cases go."""

    name: str
    impls: Sequence[Implementation]
    out: Path | None = None
    xfail: ExpectedFailures = dataclasses.field(default_factory=lambda: ExpectedFailures([]))
    time_limit: float = DEFAULT_TIME_LIMIT
    failures: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    @property
    def is_reference(self) -> bool:
        """Whether the subject is pp3's NumPy reference (the definition)."""
        return bool(self.impls) and all(i.name == builtin.REFERENCE for i in self.impls)

    def impl(self, role: Role) -> Implementation:
        """Its implementation of ``role`` that takes every row (a selector of T0 rows only does not)."""
        for i in self.impls:
            if i.role == role and not i.t0_only:
                return i
        raise NotExported(f"{self.name} has no {role}")

    def primitive(self, name: str) -> tuple[Implementation, Callable[..., Any]]:
        for i in self.impls:
            if name in i.primitives:
                return i, i.primitives[name]
        raise NotExported(f"{self.name} exports no {name}")

    def check(self, impl: Implementation, call: Call | AcceptCall, case: str, expected: Any) -> int | None:
        """Rows of one golden case that differ from the file's (every row for a call that fails by name), or None
        if the declaration does not admit the case; an unexpected failing case is written for ``--replay``."""
        if adapt.admits(impl, call) is not None:
            return None
        outcome: Outcome = Guard(impl, None, self.time_limit).check(call, want=expected)
        entry = self.xfail.seen(SUITE, case, outcome.failure)
        if outcome.failure is not None and entry is None and self.out is not None and impl.role not in self.failures:
            from pp3.audit.parity import Failures

            f = Failures(self.out, impl.role, stem=f"conformance_{impl.role}_first")
            f.add(call.replace(name=case), expected, outcome.got, SUITE, outcome.failure, outcome.detail, impl)
            self.failures[impl.role] = f.suites[SUITE]
        if entry is not None:
            return 0
        if outcome.got is None or outcome.failure not in (None, "mismatch"):
            return call.b
        return int(row_mismatch(outcome.got, expected).sum())


Check = Callable[[Subject], tuple[int, int]]  # a subject -> (items checked, items that differ)


def kernels_available() -> bool:
    if any(importlib.util.find_spec(m) is None for m in ("torch", "triton")):
        return False
    import torch

    return bool(torch.cuda.is_available()) or os.environ.get("TRITON_INTERPRET") == "1"


def _golden(role: Role, cases: Sequence[tuple[str, Call | AcceptCall, Any]], s: Subject) -> tuple[int, int]:
    impl = s.impl(role)
    checked = bad = 0
    for name, call, expected in cases:
        n = s.check(impl, call, name, expected)
        if n is not None:
            checked += call.b
            bad += n
    if not checked:
        raise NotExported(f"{impl.label}'s declaration admits none of its cases")
    return checked, bad


def _select_golden(s: Subject) -> tuple[int, int]:
    return _golden("selector", [(c.name, c.call(), c.expected) for c in golden.load_golden()], s)


def _accept_golden(s: Subject) -> tuple[int, int]:
    return _golden("verifier", [(c.name, c.call, c.expected) for c in golden.load_accept_golden()], s)


def _primitive(s: Subject, name: str, case: str, inputs: tuple[np.ndarray[Any, Any], ...],
               want: np.ndarray[Any, Any]) -> tuple[int, int]:
    """Items (rows of ``want``) where the subject's primitive ``name`` differs from ``want`` bit for bit (every
    item for a call that fails by name); an unexpected failure is written for ``--replay`` (its differing items)."""
    impl, _ = s.primitive(name)
    got, failure, detail = Guard(impl, None, s.time_limit).run(adapt.primitive(impl, name, inputs))
    n = want.shape[0]
    bits = {4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
    bad = np.ones(n, dtype=bool) if got is None else (
        got.view(bits) != want.view(bits)).reshape(n, -1).any(axis=1)
    if failure is None and bad.any():
        failure, detail = "mismatch", f"{int(bad.sum())} of {n} differ"
    entry = s.xfail.seen(SUITE, case, failure)
    if failure is not None and entry is None and s.out is not None and name not in s.failures:
        from pp3.audit.parity import dump_primitive

        rows = np.flatnonzero(bad)[:4096]
        path = dump_primitive(s.out, f"conformance_{name}_first", name, case, tuple(a[rows] for a in inputs),
                              want[rows], None if got is None else got[rows], failure, detail, impl)
        from pp3.audit.parity import replay_command

        s.failures[name] = {"case": case, "failure": failure, "detail": detail, "file": str(path),
                            "replay": replay_command(path, impl)}
    if entry is not None:
        return n, 0
    return n, n if failure not in (None, "mismatch") else int(bad.sum())


def _kat(s: Subject) -> tuple[int, int]:
    vectors = golden.load_kat()
    ctr = np.array([v[0] for v in vectors], dtype=np.uint64)
    key = np.array([v[1] for v in vectors], dtype=np.uint64)
    want = np.array([v[2] for v in vectors], dtype=np.uint64)
    return _primitive(s, "philox", golden.KAT_FILE.name, (ctr, key), want)


def _expf_wc(s: Subject) -> tuple[int, int]:
    z, want = golden.load_expf_wc()
    return _primitive(s, "expf", golden.EXPF_WC_FILE.name, (z,), want)


def sweep_inputs() -> np.ndarray[Any, Any]:
    """The expf sweep's inputs: every 2^14-th fp32 from -0 down to -104 (the domain's end, SPEC.md §6), and every
    256th of [-104, -87], where e^z is subnormal: 77,120 values."""
    sparse = np.arange(0x80000000, 0xC2D00000, 1 << 14, dtype=np.uint32)
    dense = np.arange(np.float32(-87.0).view(np.uint32), np.float32(-104.0).view(np.uint32), 256, dtype=np.uint32)
    return np.concatenate([sparse, dense]).view(np.float32)


def _expf_sweep(s: Subject) -> tuple[int, int]:
    """The exponential on a sweep of its domain against the reference's: the final rounding of a subnormal result
    (SPEC.md §6 E8-E9), which no selector or verifier output can show (a subnormal weight gets no tickets)."""
    from pp3.reference.exponential import expf

    z = sweep_inputs()
    return _primitive(s, "expf", "expf-sweep", (z,), expf(z))


def _tree_draw_golden() -> tuple[int, int]:
    """SPEC.md §12.4's golden vectors (``propose_tree``); rows are requests."""
    cases = golden.load_tree_draw_golden()
    bad = sum(int(row_mismatch(c.run(), c.expected).sum()) for c in cases)
    return sum(c.logits_bits.shape[0] for c in cases), bad


def _tree_verify_golden(path: Path) -> Callable[[], tuple[int, int]]:
    """SPEC.md §12.6's or §12.9's golden vectors (``verify_tree``, ``verify_walk``); rows are requests."""

    def check() -> tuple[int, int]:
        cases = golden.load_tree_verify_golden(path)
        bad = sum(int(row_mismatch(c.run(), c.expected).sum()) for c in cases)
        return sum(c.target_bits.shape[0] for c in cases), bad

    return check


def _reference_only(check: Callable[[], tuple[int, int]]) -> Check:
    """A file checked on the reference alone; skipped on any other subject."""

    def run(s: Subject) -> tuple[int, int]:
        if not s.is_reference:
            raise NotExported("the draft trees (SPEC.md §12) are checked on the reference only: no implementation "
                              "of them goes through the seam")
        return check()

    return run


FILES: dict[str, Check] = {
    golden.GOLDEN_FILE.name: _select_golden,
    golden.ACCEPT_GOLDEN_FILE.name: _accept_golden,
    golden.KAT_FILE.name: _kat,
    golden.EXPF_WC_FILE.name: _expf_wc,
    # the draft trees' (SPEC.md §12), on the reference only
    golden.TREE_DRAW_GOLDEN_FILE.name: _reference_only(_tree_draw_golden),
    golden.ACCEPT_TREE_GOLDEN_FILE.name: _reference_only(_tree_verify_golden(golden.ACCEPT_TREE_GOLDEN_FILE)),
    golden.WALK_TREE_GOLDEN_FILE.name: _reference_only(_tree_verify_golden(golden.WALK_TREE_GOLDEN_FILE)),
}
# Checks generated here rather than read from a file, reported beside the files' rows (``sweeps``).
SWEEPS: dict[str, Check] = {"expf-sweep": _expf_sweep}


def run(kernels: bool | None = None, *, subjects: Sequence[tuple[str, Sequence[Implementation]]] | None = None,
        out: Path | None = None, xfail: ExpectedFailures | None = None,
        time_limit: float = DEFAULT_TIME_LIMIT) -> dict[str, Any]:
    """Every conformance file on the reference, and on pp3's kernels (``kernels`` None: where they run) or on
    ``subjects`` ((name, implementations) pairs). PASS iff some row checked something and every row that ran found
    no mismatch that ``xfail`` does not expect (the reference skips none). A primitive that raises counts every
    item of its file."""
    if subjects is None:
        use = kernels_available() if kernels is None else kernels
        subjects = [("kernels", builtin.kernels())] if use else []
    runs = [Subject("reference", builtin.reference(), None, ExpectedFailures([]), time_limit)]
    runs += [Subject(name, impls, out, xfail or ExpectedFailures([]), time_limit) for name, impls in subjects]
    if len(runs) > 1:
        import warnings

        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    rows: list[dict[str, Any]] = []
    sweeps: list[dict[str, Any]] = []
    for subject in runs:
        for checks, into, key in ((FILES, rows, "file"), (SWEEPS, sweeps, "check")):
            for name, check in checks.items():
                row: dict[str, Any] = {key: name, "implementation": subject.name, "checked": 0, "mismatches": 0,
                                       "skipped": None}
                try:
                    row["checked"], row["mismatches"] = check(subject)
                except NotExported as e:
                    row["skipped"] = str(e)
                into.append(row)
    ran = [r for r in (*rows, *sweeps) if r["skipped"] is None]
    ok = bool(ran) and all(int(r["mismatches"]) == 0 and int(r["checked"]) > 0 for r in ran)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "pp3 conformance",
        "verdict": "PASS" if ok else "FAIL",
        "implementations": [s.name for s in runs],
        "results": rows,
        "sweeps": sweeps,
        "failures": {s.name: s.failures for s in runs if s.failures},
        "environment": environment(),
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"{'file':<36}{'implementation':<16}{'checked':>9}{'mismatches':>12}"]
    for r in (*report["results"], *report["sweeps"]):
        tail = f"  skipped: {r['skipped']}" if r.get("skipped") else ""
        what = r.get("file") or f"{r['check']} (generated)"
        lines.append(f"{what:<36}{r['implementation']:<16}{r['checked']:>9}{r['mismatches']:>12}{tail}")
    for name, by_kind in report["failures"].items():
        for kind, f in by_kind.items():
            lines.append(f"{name} {kind}: first failing case {f['case']} ({f['failure']}): {f['replay']}")
    lines.append(f"conformance: {report['verdict']}")
    return "\n".join(lines)
