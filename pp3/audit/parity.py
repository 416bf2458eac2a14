"""``pp3 verify`` (``make verify``): bitwise parity of an implementation of pp3's semantic IDs with the NumPy
reference, and the conformance files: pp3's own Triton kernels by default, any other through the seam
(``--impl ROLE=NAME``, ``pp3.harness``), pp3's kernels going through the same seam as everyone's.

Three parts, one verdict (PASS only if every part passes; FAIL, exit status 1, otherwise). A part passes only if
every check it was asked for (each selector implementation's suites, the bulk rows, each verifier implementation's
calls, each conformance file on each implementation whose declaration admits it) checked at least one row and no
failure was unexpected: its verdict is computed from those row counts, so a part that checked 0 rows of anything it
was asked for is a FAIL, never a PASS.

1. the selector (SPEC.md §2-§8): the suites of ``pp3.audit.suites`` (edges, bounds, random, tiles, shards, and the
   invariance calls: a permuted batch, a row alone), compared field by field (status, token, ids, tickets), through
   each selector implementation of the run (pp3's kernels: ``propose``, the segment selector, sharded calls through
   ``tile_candidates`` and ``finalize``; launch C's gather; the tile selector; the greedy selector both ways of
   ``LaunchConfig.greedy``, with every temperature 0: ``pp3.harness.builtin``; on request, ``--selectors``, the
   one-launch and row selectors, not yet shipped: ``LaunchConfig(selector="onelaunch")``, ``"rows"``); and on a
   CUDA GPU the bulk rows at V = 163840 (``--bulk-rows``), the greedy selector on their T0 rows (on every row with
   ``--bulk-greedy``);
2. the verifier (§11): the named calls (``accept-edges``, with their invariance calls) and the request rows of
   ``pp3.audit.accept_bulk`` (``accept-plans``), compared field by field (status, accepted, tokens);
3. the conformance files (``pp3.audit.conformance``: golden vectors of both roles, the Philox known answers, the
   exponential's worst cases, the expf sweep) on the reference and on the implementations, and the draft trees'
   golden vectors (SPEC.md §12) on the reference alone.

Every call goes through ``pp3.harness.guard`` (a time limit, the result's fields checked, the inputs unchanged, a
replay of the first call of each suite and of every failing one), so an implementation that raises, hangs or
returns the wrong thing fails its case by name and the run goes on. An implementation's declaration
(``pp3.harness.Capabilities``) decides which calls it gets; the others are listed as skipped, with the reason.

Sizes: ``quick`` (``--quick``), ``standard`` (the default without CUDA: the kernels in Triton's interpreter,
TRITON_INTERPRET=1) and ``full`` (``--full``, the default on a CUDA GPU: the SPEC vocabularies up to 262144). The
first failing call of each suite is written to ``--out`` (the first of a part as ``selector_first.npz`` /
``verifier_first.npz``, the first of each later suite as ``selector_first.<suite>.npz``: inputs as raw bits and
both outputs, and a ``.json`` of its first mismatching rows); ``pp3 verify --replay FILE`` re-runs it (with the
``--impl`` it names, and its ``--call-timeout``; ``load_replay`` refuses any other file, or a damaged one, with a
``DamagedRecord``). Progress goes to stderr; ``--json`` prints one JSON document on stdout (``schema_version`` 1,
``verdict``, the environment stamp, every table and each part's rows per check, the implementations' declarations,
the skipped calls, the expected failures met, and the two verdicts: bit-exact and, where asked or where an
implementation does not claim bit-exactness, lossless in law, ``pp3.audit.law``). Arguments: ``pp3.cli``, which
refuses every option that cannot apply and builds the run's ``Plan``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pp3.audit._pipeline import pipeline, read_rows
from pp3.audit.suites import accept_invariance, accept_suites, hashed_rows, hashed_rows_torch, invariance, suites
from pp3.harness import builtin
from pp3.harness.guard import DEFAULT_TIME_LIMIT, Guard, Outcome
from pp3.harness.protocol import ROLES, Implementation, Role, load
from pp3.harness.xfail import ExpectedFailures
from pp3.reference import DEFAULT_TAU, Proposal, Verdict
from pp3.testing import adapt
from pp3.testing.call import (
    FORMATS,
    AcceptCall,
    Call,
    DamagedRecord,
    Members,
    member,
    read_accept_call,
    read_call,
    read_record,
    recorded_reference,
)
from pp3.testing.compare import row_mismatch, rows_per_field
from pp3.testing.stamp import environment

SCHEMA_VERSION = 1
SELECTOR_FIELDS = ("status", "token", "ids", "tickets")
VERIFIER_FIELDS = ("status", "accepted", "tokens")
FIELDS = SELECTOR_FIELDS  # the selector's (the bulk rows' table)
PARTS = ("selector", "verifier", "conformance")
# The selector part's suites, one per variant of pp3's kernels a call runs through (``Call.kernel``), in order: the
# shipped kernels' (the default) and the one-launch and row selectors, not yet shipped (on request: --selectors).
SELECTOR_KERNELS = builtin.SELECTOR_KERNELS + builtin.NEXT_SELECTOR_KERNELS
SIZES = ("quick", "standard", "full")


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def replay_command(path: Path | str, impl: Implementation | None = None) -> str:
    """The line that replays a written case (with the ``--impl`` it ran through, unless pp3's default kernels)."""
    line = f"pp3 verify --replay {path}"
    return f"{line} --impl {impl.role}={impl.spec}" if impl is not None and impl.spec else line


# ------------------------------------------------------------------------------------------------------ failures


def _rows_report(call: Call | AcceptCall, ref: Any, got: Any, fields: tuple[str, ...], path: Path,
                 impl: Implementation | None, failure: str, detail: str) -> dict[str, Any]:
    bad = np.arange(call.b) if got is None else np.flatnonzero(row_mismatch(got, ref))
    small = isinstance(call, Call) and call.v <= 4096
    return {
        "case": call.name,
        "failure": failure,
        "detail": detail,
        "implementation": "pp3 kernels" if impl is None else impl.label,
        "replay": replay_command(path, impl),
        "mismatching_rows": bad.tolist(),
        "rows": [
            {
                "row": int(r),
                "inputs": call.row_inputs(int(r)),
                **({"call": repr(call.take([int(r)]))} if small else {}),
                "reference": {f: np.asarray(getattr(ref, f)[r]).tolist() for f in fields},
                "kernel": None if got is None else {f: np.asarray(getattr(got, f)[r]).tolist() for f in fields},
            }
            for r in bad[:4]
        ],
    }


def _outputs(fields: tuple[str, ...], ref: Any, got: Any) -> dict[str, Any]:
    return {**{f"reference_{f}": getattr(ref, f) for f in fields},
            **({} if got is None else {f"kernel_{f}": getattr(got, f) for f in fields})}


def _meta(failure: str, detail: str, impl: Implementation | None) -> dict[str, Any]:
    return {"failure": failure, "detail": detail, "impl": "" if impl is None else impl.spec,
            "variant": "" if impl is None else impl.variant}


def dump_failure(out: Path, call: Call, ref: Proposal, got: Proposal | None, *, name: str = "selector_first",
                 failure: str = "mismatch", detail: str = "", impl: Implementation | None = None) -> Path:
    """Write a selector call (inputs and both outputs; floats as bits) for ``--replay``; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.npz"
    np.savez(
        path,
        kernel="selector",
        name=call.name,
        fmt=call.fmt.name,
        bits=call.bits,
        temperature=call.temperature,
        seed=np.array(call.seed, dtype=np.uint64),
        round=np.array(call.round, dtype=np.uint64),
        position=np.array(call.position, dtype=np.uint64),
        tau=np.float32(call.tau),
        tile=-1 if call.tile is None else call.tile,
        cuts=np.array(call.cuts, dtype=np.int64),
        selector_kernel=call.kernel,
        **_meta(failure, detail, impl),
        **_outputs(SELECTOR_FIELDS, ref, got),
    )
    report = _rows_report(call, ref, got, SELECTOR_FIELDS, path, impl, failure, detail)
    path.with_suffix(".json").write_text(json.dumps(report, indent=1))
    return path


def dump_accept_failure(out: Path, call: AcceptCall, ref: Verdict, got: Verdict | None, *,
                        name: str = "verifier_first", failure: str = "mismatch", detail: str = "",
                        impl: Implementation | None = None) -> Path:
    """Write a verifier call (raw target bits, drafts, keys, both outputs) for ``--replay``; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.npz"
    given = {} if call.given_temperature is None else {"given_dtype": call.given_temperature[0],
                                                       "given_bits": call.given_temperature[1]}
    arrays: dict[str, Any] = {
        "kernel": "verifier", "name": call.name, "fmt": call.fmt.name, "bits": call.bits,
        "temperature": call.temperature, **call.draft(), "seed": call.seed, "round": call.round,
        "position": call.position, "tile": -1 if call.tile is None else call.tile, **given,
        **_meta(failure, detail, impl), **_outputs(VERIFIER_FIELDS, ref, got),
    }
    np.savez(path, **arrays)
    report = _rows_report(call, ref, got, VERIFIER_FIELDS, path, impl, failure, detail)
    path.with_suffix(".json").write_text(json.dumps(report, indent=1))
    return path


def dump_primitive(out: Path, stem: str, name: str, case: str, inputs: tuple[np.ndarray[Any, Any], ...],
                   ref: np.ndarray[Any, Any], got: np.ndarray[Any, Any] | None, failure: str, detail: str,
                   impl: Implementation | None) -> Path:
    """Write the items of a primitive's check (``philox``: ctr, key; ``expf``: z) where it failed, with both
    outputs, for ``--replay``; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}.npz"
    args = dict(zip(adapt.PRIMITIVE_ARGS[name], inputs, strict=True))
    arrays: dict[str, Any] = {"kernel": name, "name": case, **args, "reference": ref,
                              **({} if got is None else {"got": got}), **_meta(failure, detail, impl)}
    np.savez(path, **arrays)
    report = {"case": case, "failure": failure, "detail": detail, "replay": replay_command(path, impl),
              "items": [{**{k: np.asarray(a[i]).tolist() for k, a in args.items()},
                         "reference": np.asarray(ref[i]).tolist(),
                         "got": None if got is None else np.asarray(got[i]).tolist()} for i in range(min(4, len(ref)))]}
    path.with_suffix(".json").write_text(json.dumps(report, indent=1, default=str))
    return path


def _slug(suite: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", suite).strip("-") or "suite"


class Failures:
    """Where one role's failing calls go: the first call of each suite is written to ``out`` with the command that
    replays it, the first of them all as ``<stem>.npz`` (``first``), the first of each later suite as
    ``<stem>.<suite>.npz``."""

    def __init__(self, out: Path, role: Role = "selector", stem: str | None = None) -> None:
        self.out = out
        self.role = role
        self.stem = stem or f"{role}_first"
        self.first: Path | None = None
        self.suites: dict[str, dict[str, Any]] = {}

    def add(self, call: Call | AcceptCall, ref: Any, got: Any, suite: str = "", failure: str = "mismatch",
            detail: str = "", impl: Implementation | None = None) -> None:
        if suite in self.suites:
            return
        name = self.stem if self.first is None else f"{self.stem}.{_slug(suite)}"
        kw: dict[str, Any] = {"name": name, "failure": failure, "detail": detail, "impl": impl}
        path = (dump_accept_failure(self.out, call, ref, got, **kw) if isinstance(call, AcceptCall)
                else dump_failure(self.out, call, ref, got, **kw))
        self.first = self.first or path
        self.suites[suite] = {"case": call.name, "failure": failure, "detail": detail, "file": str(path),
                              "replay": replay_command(path, impl)}


@dataclasses.dataclass(frozen=True)
class Primitive:
    """A primitive's failing items as ``dump_primitive`` writes them: ``name`` "philox" (``inputs`` ctr [N, 4] and
    key [N, 2], uint64) or "expf" (z [N], fp32), and the conformance case they came from."""

    name: str
    case: str
    inputs: tuple[np.ndarray[Any, Any], ...]


@dataclasses.dataclass(frozen=True)
class Replay:
    """A failing case for ``--replay``: its file, its kernel ("selector", "verifier", or a primitive: "philox",
    "expf"), its call, and the variant of the implementation it failed on ("" for none)."""

    path: str
    kernel: str
    call: Call | AcceptCall | Primitive
    variant: str = ""


# Each primitive's members (``pp3.testing.adapt.PRIMITIVE_ARGS``): dtype and shape (None: the items).
PRIMITIVE_MEMBERS: dict[str, tuple[tuple[Any, tuple[int | None, ...]], ...]] = {
    "philox": ((np.uint64, (None, 4)), (np.uint64, (None, 2))),
    "expf": ((np.float32, (None,)),),
}


def _read_primitive(z: Members, kind: str) -> Primitive:
    inputs = tuple(member(z, k, dtype, shape)
                   for k, (dtype, shape) in zip(adapt.PRIMITIVE_ARGS[kind], PRIMITIVE_MEMBERS[kind], strict=True))
    if len({a.shape[0] for a in inputs}) != 1 or inputs[0].shape[0] < 1:
        raise DamagedRecord(f"{', '.join(adapt.PRIMITIVE_ARGS[kind])}: expected the same number (>= 1) of items, got "
                            f"shapes {[a.shape for a in inputs]}")
    return Primitive(kind, str(member(z, "name", str, ())), inputs)


def load_replay(path: str) -> Replay:
    """The case of a file that ``dump_failure``, ``dump_accept_failure`` or ``dump_primitive`` wrote. Any other
    file, or a damaged one, raises ``DamagedRecord`` saying what is wrong (files without a ``kernel`` member are the
    selector's)."""

    def read(z: Members) -> Replay:
        kernel = str(member(z, "kernel", str, ())) if "kernel" in z else "selector"
        variant = str(member(z, "variant", str, ())) if "variant" in z else ""
        if kernel == "selector":
            return Replay(path, kernel, read_call(z), variant)
        if kernel == "verifier":
            return Replay(path, kernel, read_accept_call(z), variant)
        if kernel in PRIMITIVE_MEMBERS:
            return Replay(path, kernel, _read_primitive(z, kernel), variant)
        kinds = ", ".join(repr(k) for k in ("selector", "verifier", *PRIMITIVE_MEMBERS))
        raise DamagedRecord(f"kernel: {kernel!r} is none of {kinds}")

    return read_record(path, read)


def replay_implementation(case: Replay, impls: dict[Role, list[Implementation]] | None) -> Implementation:
    """The implementation a written case replays on: the given one of its role (the variant it ran through, if
    several; for a primitive, the first that exports it), else pp3's kernels (for a selector case the variant
    ``Call.kernel`` names)."""
    if isinstance(case.call, Primitive):
        name = case.call.name
        given = [i for r in ROLES for i in (impls or {}).get(r, []) if name in i.primitives]
        return given[0] if given else builtin.kernel("propose")
    role: Role = "verifier" if isinstance(case.call, AcceptCall) else "selector"
    mine = (impls or {}).get(role, [])
    if mine:
        return next((i for i in mine if case.variant and i.variant == case.variant), mine[0])
    return builtin.kernel(case.call.kernel if isinstance(case.call, Call) else "verifier")


def _replay_primitive(case: Replay, prim: Primitive, impl: Implementation, as_json: bool,
                      time_limit: float) -> int:
    """A written primitive check on ``impl`` against the reference's primitive on the same inputs: exit status 1 if
    any item differs or the call fails by name."""
    from pp3.reference import expf, philox4x64_10

    ref = philox4x64_10(*prim.inputs) if prim.name == "philox" else expf(*prim.inputs)
    got, failure, detail = Guard(impl, None, time_limit).run(adapt.primitive(impl, prim.name, prim.inputs))
    n = len(ref)
    bits = {4: np.uint32, 8: np.uint64}[ref.dtype.itemsize]
    bad = np.ones(n, dtype=bool) if got is None else (got.view(bits) != ref.view(bits)).reshape(n, -1).any(axis=1)
    if failure is None and bad.any():
        failure, detail = "mismatch", f"{int(bad.sum())} of {n} differ"
    verdict = "FAIL" if failure else "PASS"
    if as_json:
        print(json.dumps({"schema_version": SCHEMA_VERSION, "tool": "pp3 verify --replay", "verdict": verdict,
                          "file": case.path, "kernel": prim.name, "case": prim.case, "implementation": impl.label,
                          "failure": failure, "detail": detail, "mismatching_items": int(bad.sum()),
                          "environment": environment()}, indent=1))
    else:
        print(f"{prim.case} ({prim.name}) on {impl.label}: {int(bad.sum())} of {n} items differ"
              + (f"; failure: {failure}: {detail}" if failure and failure != "mismatch" else ""))
        print(f"replay: {verdict}")
    return 1 if failure else 0


def replay(case: Replay, device: Any, as_json: bool = False, impls: dict[Role, list[Implementation]] | None = None,
           time_limit: float = DEFAULT_TIME_LIMIT) -> int:
    """Re-run a written call on the implementation (``replay_implementation``) and the reference (both outputs
    printed, or one JSON document), through the guard (its time limit, its field checks, a replay of the call):
    exit status 1 if they differ or the call fails by name. A call the reference refuses raises ``DamagedRecord``
    (no dump holds one)."""
    impl = replay_implementation(case, impls)
    if isinstance(case.call, Primitive):
        return _replay_primitive(case, case.call, impl, as_json, time_limit)
    call = case.call
    if isinstance(call, Call) and impl.t0_only:
        call = call.replace(temperature=np.zeros_like(call.temperature))
    ref = recorded_reference(call)
    dev = device if impl.caps.api == "torch" and impl.caps.device is None else impl.device
    outcome = Guard(impl, dev, time_limit).check(call, replay=True, want=ref)
    got, mism = outcome.got, outcome.mismatches
    verdict = "FAIL" if outcome.failed else "PASS"
    if as_json:
        doc = {"schema_version": SCHEMA_VERSION, "tool": "pp3 verify --replay", "verdict": verdict,
               "file": case.path, "kernel": case.kernel, "case": call.name, "implementation": impl.label,
               "failure": outcome.failure, "detail": outcome.detail, "mismatching_rows_per_field": mism,
               "reference": {f: np.asarray(getattr(ref, f)).tolist() for f in mism},
               "kernel_output": None if got is None else {f: np.asarray(getattr(got, f)).tolist() for f in mism},
               "environment": environment()}
        print(json.dumps(doc, indent=1))
    else:
        print(f"{call.name} on {impl.label}: mismatching rows per field {mism}")
        if outcome.failed and outcome.failure != "mismatch":
            print(f"failure: {outcome.failure}: {outcome.detail}")
        for f in mism:
            print(f"reference {f}: {np.asarray(getattr(ref, f)).tolist()}")
            print(f"kernel    {f}: {None if got is None else np.asarray(getattr(got, f)).tolist()}")
        print(f"replay: {verdict}")
    return 1 if verdict == "FAIL" else 0


# ------------------------------------------------------------------------------------------------------ tables


class Table:
    """Per suite: calls, rows, mismatching rows per output field, seconds."""

    def __init__(self, fields: tuple[str, ...] = SELECTOR_FIELDS) -> None:
        self.fields = fields
        self.rows: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"cases": 0, "rows": 0, "time_s": 0.0} | dict.fromkeys(fields, 0)
        )

    def add(self, suite: str, rows: int, mism: dict[str, int], seconds: float) -> None:
        r = self.rows[suite]
        r["cases"] += 1
        r["rows"] += rows
        r["time_s"] += seconds
        for f in self.fields:
            r[f] += mism[f]

    def mismatches(self) -> int:
        return sum(r[f] for r in self.rows.values() for f in self.fields)

    def checked_rows(self) -> int:
        return sum(r["rows"] for r in self.rows.values())

    def render(self) -> str:
        head = f"{'suite':<14}{'cases':>7}{'rows':>10}" + "".join(f"{f:>10}" for f in self.fields) + f"{'time':>9}"
        lines = [head, "-" * len(head)]
        for s, r in self.rows.items():
            lines.append(
                f"{s:<14}{r['cases']:>7}{r['rows']:>10}"
                + "".join(f"{r[f]:>10}" for f in self.fields)
                + f"{r['time_s']:>8.1f}s"
            )
        return "\n".join(lines)

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {s: r | {"time_s": round(r["time_s"], 2)} for s, r in self.rows.items()}


class Part:
    """One role's part of a run: its table, the first failing call of each suite (``failures``), every failing call
    (with the expected-failures entry that covers it, if any), and the calls each declaration excluded."""

    def __init__(self, role: Role, out: Path, xfail: ExpectedFailures | None = None) -> None:
        self.role = role
        self.table = Table(SELECTOR_FIELDS if role == "selector" else VERIFIER_FIELDS)
        self.failures = Failures(out, role)
        self.xfail = xfail or ExpectedFailures([])
        self.failing: list[dict[str, Any]] = []
        self.skipped: dict[tuple[str, str, str], int] = defaultdict(int)
        self.checked: dict[str, int] = {}  # the rows of each check the part was asked for (``check_calls``, bulk)

    def add(self, suite: str, case: str, rows: int, outcome: Outcome, impl: Implementation | None, seconds: float,
            call: Callable[[], Call | AcceptCall]) -> None:
        """One checked call of ``rows`` rows into the table; a failing one into ``failing`` and, the first of its
        suite, written for ``--replay`` (``call`` makes its record: only then)."""
        self.table.add(suite, rows, outcome.mismatches, seconds)
        entry = self.xfail.seen(suite, case, outcome.failure)
        if outcome.failure is not None:
            self.failing.append({"suite": suite, "case": case, "failure": outcome.failure,
                                 "detail": outcome.detail, "expected": None if entry is None else entry.reason})
            if suite not in self.failures.suites:
                self.failures.add(call(), outcome.want, outcome.got, suite, outcome.failure, outcome.detail, impl)

    def skip(self, impl: Implementation, suite: str, reason: str) -> None:
        self.skipped[(impl.label, suite, reason)] += 1

    def unexpected(self) -> int:
        return sum(f["expected"] is None for f in self.failing)

    def as_dict(self, ran: bool) -> dict[str, Any]:
        """The part's entry of the report. Its verdict comes from the rows each of its checks ran (``checked``):
        PASS only if every one of them checked at least one row and no failure was unexpected, so a part that
        checked 0 rows of anything it was asked for is never a PASS."""
        t = self.table
        verdict = "PASS" if self.checked and min(self.checked.values()) > 0 and self.unexpected() == 0 else "FAIL"
        return {"verdict": verdict if ran else "SKIPPED", "checked_rows": self.checked,
                "suites": t.as_dict(), "rows": t.checked_rows(), "mismatches": t.mismatches(),
                "first_failure": None if self.failures.first is None else str(self.failures.first),
                "first_failures": self.failures.suites, "failing_calls": len(self.failing),
                "unexpected_failures": self.unexpected(), "failing": self.failing[:100],
                "skipped": [{"implementation": i, "suite": s, "reason": r, "calls": n}
                            for (i, s, r), n in self.skipped.items()]}


def check_calls(what: str, calls: Iterable[tuple[str, Any]], guard: Guard, part: Part, verbose: bool) -> None:
    """Every (suite, call) that ``guard``'s implementation declares it takes, through the guard into ``part``
    (a suite's name ends with the implementation's variant), its rows counted as the part's check ``what``; the
    others counted as skipped."""
    impl = guard.impl
    t_start = time.perf_counter()
    i = rows = 0
    seen: set[str] = set()
    it: Iterator[tuple[str, Any]] = iter(calls)
    while True:
        t0 = time.perf_counter()
        try:
            suite, call = next(it)  # the verifier's request rows are built (on the device) here
        except StopIteration:
            break
        name = f"{suite} {impl.variant}" if impl.variant else suite
        why = adapt.admits(impl, call)
        if why is not None:
            part.skip(impl, name, why)
            continue
        if isinstance(call, Call):
            call = adapt.prepare(impl, call)
        outcome = guard.check(call, replay=name not in seen)
        seen.add(name)
        part.add(name, call.name, call.b, outcome, impl, time.perf_counter() - t0, _const(call))
        i += 1
        rows += call.b
        if verbose or i % 10 == 0:
            progress(f"  {what} {i} {call.name}: {time.perf_counter() - t0:.1f} s, {part.table.mismatches()} "
                     f"mismatches ({time.perf_counter() - t_start:.0f} s)")
    part.checked[what] = part.checked.get(what, 0) + rows
    progress(f"  {what}: {i} calls, {rows} rows, {part.table.mismatches()} mismatches "
             f"({time.perf_counter() - t_start:.0f} s)")


# The suites of each part, in the order they run.
SUITES: dict[Role, tuple[str, ...]] = {
    "selector": ("edges", "bounds", "random", "tiles", "shards", "order", "alone"),
    "verifier": ("accept-edges", "accept-plans", "accept-order", "accept-alone"),
}


def suite_calls(role: Role, suite: str, size: str, device: Any) -> Iterator[tuple[str, Call | AcceptCall]]:
    """The calls of one suite (``SUITES``) of a size: what the part runs, one suite at a time (the pytest plugin)."""
    if role == "selector":
        return ((s, c) for s, c in selector_calls(size) if s == suite)
    if suite == "accept-edges":  # the named calls come first: stop before the request rows are built
        return itertools.takewhile(lambda sc: sc[0] == suite, accept_suites(size, device))
    if suite == "accept-plans":
        return itertools.dropwhile(lambda sc: sc[0] != suite, accept_suites(size, device))
    return ((s, c) for s, c in accept_invariance(size) if s == suite)


def _const(call: Call | AcceptCall) -> Callable[[], Call | AcceptCall]:
    return lambda: call


def selector_calls(size: str) -> Iterator[tuple[str, Call]]:
    """The selector part's calls of a size: the parity suites, then the invariance calls."""
    yield from suites(size)
    yield from invariance(size)


def verifier_calls(size: str, device: Any) -> Iterator[tuple[str, AcceptCall]]:
    """The verifier part's calls of a size: the named calls and the request rows, then the invariance calls."""
    yield from accept_suites(size, device)
    yield from accept_invariance(size)


# ------------------------------------------------------------------------------------------------------ bulk rows


def _bulk_reference(args: tuple[Any, ...]) -> Proposal:
    """Worker: the reference on rows [lo, hi) of a batch that the parent copied from the GPU into shared memory."""
    from pp3.reference import propose

    name, shape, lo, hi, temp, seed, rnd, pos = args
    return propose(read_rows(name, shape, np.float32, lo, hi), temp, seed, rnd, pos)


def bulk(
    part: Part, n_rows: int, v: int, batch: int, device: Any, bulk_seed: int = 0, greedy_only: bool = False,
    impls: Sequence[Implementation] | None = None, time_limit: float = DEFAULT_TIME_LIMIT,
) -> int:
    """The >= 10^6-row GPU suite; returns the rows checked (0 if no implementation takes them). Rows are defined by
    integer hashing of a per-row seed (``hashed_rows_torch``), built on the GPU, run through the implementations,
    copied once into shared memory, and checked by a process pool running the reference on slices of it. The first
    batch's rows are also compared bit for bit with the CPU's ``hashed_rows``, so a failure can be replayed from the
    row seeds alone. Each batch runs through every selector implementation of ``impls`` that takes the bulk rows
    (default pp3's kernels: ``propose``, the segment selector, its launch C gathering at these batch sizes; the tile
    selector; the greedy selector both ways), each call through the guard (the first batch's replayed); a selector
    of T0 rows only is checked on the rows whose reference outputs are a T0 row's (target temperature ±0, or failed
    by the logits); ``greedy_only``: every row's temperature is ±0, so every implementation is checked on every
    row."""
    from multiprocessing import shared_memory

    import torch

    chosen = builtin.kernels() if impls is None else impls
    guards = [Guard(i, device, time_limit) for i in chosen if i.role == "selector" and i.bulk]
    batch = min(batch, n_rows)
    workers = max(1, (os.cpu_count() or 2) - 1)
    chunk = max(1, -(-batch // workers))
    rng = np.random.default_rng(20261130 + bulk_seed)  # distinct --bulk-seed values give disjoint-in-practice rows
    temp_pool = np.array([0.0, -0.0] if greedy_only else [1.0, 1.0, 1.0, 0.5, 2.0, 0.0, -0.0, np.inf, np.nan, -1.0],
                         dtype=np.float32)
    Ran = list[tuple[Proposal | None, str | None, str]]  # per guard: its record, failure, detail
    Pending = tuple[Ran, tuple[np.ndarray[Any, Any], ...], shared_memory.SharedMemory]
    t0 = time.perf_counter()
    done = 0
    last_print = 0

    def settle(item: Pending, parts: list[Proposal]) -> None:
        nonlocal done, last_print
        ran, keys, shm = item
        ref = Proposal(*(np.concatenate([getattr(p, f) for p in parts]) for f in SELECTOR_FIELDS))
        row_seed, temp, seed, rnd, pos = keys
        n = row_seed.size
        t0_rows = np.flatnonzero((temp == 0) | np.isin(ref.status, (1, 2, 3)))  # a T0 row's outputs (§3, §7)
        for g, (got, failure, detail) in zip(guards, ran, strict=True):
            rows = t0_rows if g.impl.t0_only else np.arange(n)
            want = Proposal(*(getattr(ref, f)[rows] for f in SELECTOR_FIELDS))
            mine = None if got is None else Proposal(*(getattr(got, f)[rows] for f in SELECTOR_FIELDS))
            mism = dict.fromkeys(SELECTOR_FIELDS, rows.size) if mine is None else rows_per_field(mine, want)
            if failure is None and any(mism.values()):
                failure, detail = "mismatch", f"mismatching rows per field { {f: m for f, m in mism.items() if m} }"
            suite = f"bulk {g.impl.variant}" if g.impl.variant else "bulk"

            def case(impl: Implementation = g.impl, rows: np.ndarray[Any, Any] = rows) -> Call:
                x = np.ndarray((n, v), dtype=np.float32, buffer=shm.buf).copy()
                s, r, p = (tuple(int(k) for k in a) for a in (seed, rnd, pos))
                whole = Call(FORMATS["fp32"], x.view(np.uint32), temp, s, r, p, DEFAULT_TAU, None, True,
                             name=f"bulk[seed={bulk_seed}]")
                return adapt.prepare(impl, whole.take(rows.tolist()) if impl.t0_only else whole)

            part.add(suite, f"bulk[seed={bulk_seed}]", rows.size, Outcome(want, mine, failure, detail, mism, 0.0),
                     g.impl, 0.0, case)
        done += n
        if done - last_print >= 50_000 or done >= n_rows:
            last_print = done
            el = time.perf_counter() - t0
            progress(f"  bulk: {done}/{n_rows} rows, {part.table.mismatches()} mismatches, {el:.0f} s")

    # 3 batches in flight; the buffers are touched once first (fresh pages are slow)
    with pipeline(workers, batch * v * 4, settle, zero=True) as pipe:
        for it in range((n_rows + batch - 1) // batch):
            n = min(batch, n_rows - it * batch)
            row_seed = rng.integers(0, 1 << 63, size=n, dtype=np.uint64)
            temp = temp_pool[rng.integers(0, temp_pool.size, size=n)]
            seed, rnd, pos = (rng.integers(0, 1 << 64, size=n, dtype=np.uint64) for _ in range(3))
            keys = (row_seed, temp, seed, rnd, pos)
            dev = [torch.from_numpy(a.view(np.int64) if a.dtype == np.uint64 else a).to(device) for a in keys]
            x = hashed_rows_torch(dev[0], v)
            if it == 0:
                cpu_rows = hashed_rows(row_seed[:8], v).view(np.uint32)
                if not np.array_equal(x[:8].cpu().numpy().view(np.uint32), cpu_rows):
                    raise RuntimeError("hashed_rows: the GPU rows differ from the CPU rows; replays would be void")
            ran: Ran = []
            for g in guards:
                t = torch.zeros_like(dev[1]) if g.impl.t0_only else dev[1]
                got, failure, detail = g.run(adapt.selector_rows(g.impl, x, t, dev[2], dev[3], dev[4], DEFAULT_TAU))
                if it == 0 and got is not None and failure is None:  # the first batch once more: the same bits?
                    again, fail2, detail2 = g.run(adapt.selector_rows(g.impl, x, t, dev[2], dev[3], dev[4],
                                                                      DEFAULT_TAU))
                    if again is None or fail2 is not None:
                        failure, detail = fail2, f"on a replay of the same call: {detail2}"
                    elif any(not np.array_equal(getattr(again, f), getattr(got, f)) for f in SELECTOR_FIELDS):
                        failure, detail = "nondeterministic", "a replay of the same batch returned other outputs"
                ran.append((got, failure, detail))
            shm = pipe.buffer()  # settles the batch that last used it
            torch.from_numpy(np.ndarray((n, v), dtype=np.float32, buffer=shm.buf)).copy_(x)
            tasks = [
                (_bulk_reference, ((shm.name, (n, v), r, min(n, r + chunk), *(k[r : r + chunk] for k in keys[1:])),))
                for r in range(0, n, chunk)
            ]
            pipe.submit((ran, keys, shm), tasks)
    part.table.rows["bulk"]["time_s"] = time.perf_counter() - t0
    return done if guards else 0  # no implementation took the bulk rows: none was checked


# ------------------------------------------------------------------------------------------------------ the run


def implementations(specs: Sequence[tuple[Role, str]], selectors: Sequence[str] | None
                    ) -> dict[Role, list[Implementation]]:
    """The implementations of a run, by role: those ``--impl`` names (``ImplementationError`` if one cannot be
    loaded), else pp3's kernels; ``selectors``: only the selector variants it names ("propose": the main one; the
    one-launch and row selectors, not yet shipped, run only where it names them)."""
    found: dict[Role, list[Implementation]] = {r: [] for r in ROLES}
    if specs:
        for role, spec in specs:
            found[role] += load(spec, role)
    else:
        for impl in builtin.kernels():
            found[impl.role].append(impl)
        found["selector"] += [i for i in builtin.next_selectors() if i.variant in (selectors or ())]
    if selectors:
        found["selector"] = [i for i in found["selector"] if (i.variant or "propose") in selectors]
    return found


def check_name(impl: Implementation) -> str:
    """The name of an implementation's check in its part's checked rows and in the progress lines: pp3's kernels by
    their suites' names (propose, gather, tiles, greedy, rescan; verifier), any other implementation by its label."""
    if impl.name == builtin.KERNELS:
        return impl.variant or ("propose" if impl.role == "selector" else "verifier")
    return impl.label


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one ``pp3 verify`` run checks (``pp3.cli`` builds it from the options, refusing any that cannot apply)."""

    size: str  # one of SIZES
    parts: tuple[str, ...]  # of PARTS, in their order (with ``plugged``: those of the roles given that claim exactness)
    suites: bool  # the selector's and the verifier's suites run (not with --bulk-only)
    bulk_rows: int  # the selector part's bulk rows (0: none)
    bulk_seed: int
    bulk_vocab: int
    bulk_greedy: bool
    out: Path  # where the first failing case of each suite is written
    json: bool
    impls: dict[Role, list[Implementation]]  # by role: those --impl names, else pp3's kernels (``implementations``)
    plugged: bool  # the implementations were given (--impl): the report names them and carries both verdicts
    xfail: ExpectedFailures  # the implementer's expected failures (--expected-failures)
    call_timeout: float  # seconds one call may take (``pp3.harness.guard``)
    law: bool  # the law verdict for implementations that claim bit-exactness too (--law)
    law_n: int
    alpha: float

    def exact(self, role: Role) -> list[Implementation]:
        """The implementations of ``role`` that claim bit-exactness (the others are judged in law only)."""
        return [i for i in self.impls[role] if i.caps.exact]

    def law_asked(self) -> bool:
        """Whether the run gives a lossless-in-law verdict: with --law, or for an implementation that does not claim
        bit-exactness."""
        return self.law or any(not i.caps.exact for r in ROLES for i in self.impls[r])


def _law(plan: Plan) -> dict[str, Any]:
    """The lossless-in-law verdict (``pp3.audit.law``) of every implementation that does not claim bit-exactness,
    or of every one with ``--law``."""
    from pp3.audit import law

    judged = [i for r in ROLES for i in plan.impls[r] if plan.law or not i.caps.exact]
    if not judged:
        return {"verdict": "SKIPPED", "alpha": plan.alpha,
                "reason": "every implementation claims bit-exactness, which the bit-exact verdict checks (a "
                "bit-exact selector and verifier are lossless by SPEC.md §11.9); --law runs it anyway"}
    runs = []
    for impl in judged:
        progress(f"  law: {impl.label} ({impl.role})")
        if impl.role == "verifier":  # the drafter on the GPU where there is one; the planted bugs at <= 10^5
            import torch

            runs.append(law.verifier_law(impl, plan.out, n=plan.law_n, mutant_n=min(plan.law_n, 100_000),
                                         alpha=plan.alpha, device="cuda" if torch.cuda.is_available() else "cpu",
                                         time_limit=plan.call_timeout))
        else:
            runs.append(law.selector_law(impl))
        progress(f"  law: {impl.label}: {runs[-1]['verdict']}")
    done = [r["verdict"] for r in runs if r["verdict"] != "SKIPPED"]
    verdict = "PASS" if done and all(v == "PASS" for v in done) and len(done) == len(runs) else (
        "SKIPPED" if not done else "FAIL")
    return {"verdict": verdict, "alpha": plan.alpha, "correction": "Holm", "audits": runs}


def _conformance_part(report: dict[str, Any] | None) -> dict[str, Any]:
    """The conformance part's entry of the report: every row that ran (a file or a generated check on an
    implementation; a row its declaration excludes is listed as skipped, and asked for nothing), with the same rule
    as the other parts: PASS only if each checked at least one item and none mismatched."""
    if report is None:
        return {"verdict": "SKIPPED", "checked_rows": {}, "rows": 0, "mismatches": 0}
    ran = [r for r in (*report["results"], *report["sweeps"]) if r["skipped"] is None]
    checked = {f"{r.get('file') or r['check']} ({r['implementation']})": int(r["checked"]) for r in ran}
    bad = sum(int(r["mismatches"]) for r in ran)
    verdict = "PASS" if checked and min(checked.values()) > 0 and bad == 0 else "FAIL"
    return {"verdict": verdict, "checked_rows": checked, "rows": sum(checked.values()), "mismatches": bad,
            **{k: report[k] for k in ("implementations", "results", "sweeps", "failures")}}


def run(plan: Plan, device: Any) -> int:
    """``pp3 verify`` on a checked plan (``pp3.cli``): 0 PASS, 1 FAIL."""
    import warnings

    # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    size, parts, impls, xfail = plan.size, plan.parts, plan.impls, plan.xfail
    stamp = environment()
    named = (f", implementations={','.join(sorted({i.label for r in ROLES for i in impls[r]}))}" if plan.plugged
             else "")
    progress(f"pp3 verify: device={stamp['gpu'] or 'cpu (interpreter)'}, sizes={size}, parts={','.join(parts)}"
             f"{named}, commit={stamp['commit']}{' (dirty)' if stamp['dirty'] else ''}")
    t_start = time.perf_counter()
    select, accept = Part("selector", plan.out, xfail), Part("verifier", plan.out, xfail)
    skipped_parts = [{"part": r, "implementation": i.label, "reason": "declares exact=False: judged in law only"}
                     for r in ROLES for i in impls[r] if not i.caps.exact]
    if "selector" in parts:
        if plan.suites:
            for impl in plan.exact("selector"):
                check_calls(check_name(impl), selector_calls(size), Guard(impl, None, plan.call_timeout), select,
                            size == "full")
        if plan.bulk_rows:
            select.checked["bulk"] = bulk(select, plan.bulk_rows, plan.bulk_vocab, 1024, device, plan.bulk_seed,
                                          plan.bulk_greedy, plan.exact("selector"), plan.call_timeout)
    if "verifier" in parts:
        for impl in plan.exact("verifier"):
            check_calls(check_name(impl), verifier_calls(size, device), Guard(impl, None, plan.call_timeout), accept,
                        size == "full")
    conformance_report: dict[str, Any] | None = None
    if "conformance" in parts:
        from pp3.audit import conformance

        t0 = time.perf_counter()
        by_name: dict[str, list[Implementation]] = defaultdict(list)
        for i in (*plan.exact("selector"), *plan.exact("verifier")):
            by_name[i.name].append(i)
        subjects = list(by_name.items()) if plan.plugged else [("kernels", builtin.kernels())]
        conformance_report = conformance.run(subjects=subjects, out=plan.out, xfail=xfail,
                                             time_limit=plan.call_timeout)
        progress(f"  conformance: {conformance_report['verdict']} ({time.perf_counter() - t0:.0f} s)")
    law_doc = _law(plan)

    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": "pp3 verify",
        "verdict": "FAIL",
        "sizes": size,
        "parts": list(parts),
        "selector": select.as_dict("selector" in parts),
        "verifier": accept.as_dict("verifier" in parts),
        "conformance": _conformance_part(conformance_report),
        "time_s": 0.0,
        "environment": stamp,
        "implementations": [i.declaration() for r in ROLES for i in impls[r]],
        "skipped": skipped_parts,
        "expected_failures": xfail.as_dict(),
    }
    verdicts = [doc[p]["verdict"] for p in parts]
    bit_exact = "PASS" if verdicts and all(v == "PASS" for v in verdicts) else "FAIL" if verdicts else (
        "NOT CLAIMED" if skipped_parts else "SKIPPED")
    doc["verdicts"] = {
        "bit_exact": {"verdict": bit_exact, "parts": list(parts),
                      "ran": [s for p in ("selector", "verifier") if p in parts for s in doc[p]["suites"]]
                      + (["conformance"] if conformance_report is not None else []),
                      "rows": sum(doc[p]["rows"] for p in ("selector", "verifier") if p in parts),
                      "unexpected_failures": sum(doc[p]["unexpected_failures"] for p in ("selector", "verifier")
                                                 if p in parts)},
        "law": law_doc,
    }
    judged = [v for v in (bit_exact, law_doc["verdict"]) if v in ("PASS", "FAIL")]
    law_asked = plan.law_asked()
    doc["verdict"] = "PASS" if judged and all(v == "PASS" for v in judged) and (
        law_doc["verdict"] != "SKIPPED" or not law_asked) else "FAIL"
    doc["time_s"] = round(time.perf_counter() - t_start, 1)
    if plan.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"environment: {json.dumps(stamp)}")
        if plan.plugged:
            for i in doc["implementations"]:
                print(f"implementation: {i['role']} {i['name']}{':' + i['variant'] if i['variant'] else ''} "
                      f"({i['api']} API on {i['device']}, formats {','.join(i['formats'])}, V <= {i['max_vocab']}, "
                      f"{'sharded, ' if i['sharded'] else ''}{'exact' if i['exact'] else 'law only'})")
        if "selector" in parts:
            print(f"\nselector (SPEC.md §2-§8): mismatching rows per field\n{select.table.render()}")
        if "verifier" in parts:
            print(f"\nverifier (SPEC.md §11): mismatching rows per field\n{accept.table.render()}")
        if conformance_report is not None:
            from pp3.audit import conformance

            print(f"\n{conformance.render(conformance_report)}")
        for p in ("selector", "verifier"):
            for s in doc[p]["skipped"]:
                print(f"skipped: {p} {s['implementation']} {s['suite']}: {s['calls']} calls ({s['reason']})")
        for f in (*select.failing, *accept.failing):
            if f["expected"] is not None:
                print(f"expected failure: {f['suite']} {f['case']}: {f['failure']} ({f['expected']})")
        for entry in xfail.entries:
            if entry.status() != "failed as expected":
                print(f"expected-failures entry {entry.suite!r} {entry.case!r}: {entry.status()}")
        if law_doc["verdict"] != "SKIPPED" or law_asked:
            print(f"\nlossless in law: {law_doc['verdict']}"
                  + "".join(f"\n  {a['implementation']} ({a['audit']}): {a['verdict']}"
                            + (f": {a['reason']}" if "reason" in a else "") for a in law_doc.get("audits", [])))
        each = ", ".join(f"{p} {doc[p]['verdict']} ({_rows_line(doc[p]['checked_rows'])})" for p in parts)
        print(f"\nverify: {doc['verdict']} ({each}{'; ' if each else ''}bit-exact {bit_exact}, law "
              f"{law_doc['verdict']}; {doc['time_s']:.0f} s)")
    for part in (select, accept):
        for suite, f in part.failures.suites.items():
            kind = "MISMATCH" if f["failure"] == "mismatch" else f"FAILURE ({f['failure']})"
            progress(f"{kind}: first case of {part.role} suite {suite!r} written to {f['file']}; replay: "
                     f"{f['replay']}")
    return 0 if doc["verdict"] == "PASS" else 1


def _rows_line(checked: dict[str, int]) -> str:
    """A part's rows, and the checks of it that checked none."""
    none = [what for what, n in checked.items() if n == 0]
    return f"{sum(checked.values()):,} rows" + (f"; 0 rows: {', '.join(none)}" if none or not checked else "")
