"""``pp3 verify`` (``make verify``): bitwise parity of both Triton kernels with the NumPy reference, and the
conformance files.

Three parts, one verdict (PASS only if every part passes; FAIL, exit status 1, otherwise). A part passes only if
every check it was asked for (each selector suite, the bulk rows, the verifier's calls, each conformance file on each
implementation) checked at least one row and none mismatched: its verdict is computed from those row counts, so a
part that checked 0 rows of anything it was asked for is a FAIL, never a PASS.

1. the selector (SPEC.md §2-§8): the suites of ``pp3.audit.suites`` (edges, bounds, random, tiles, shards),
   compared field by field (status, token, ids, tickets): each call through ``propose`` (the segment selector;
   sharded calls the tile selector), through the tile selector on one tensor, through the greedy selector
   (``pp3.kernels.greedy``, both ways of ``LaunchConfig.greedy``) with every temperature 0, and on request
   (``--selectors``) through the one-launch and row selectors (not yet shipped: ``LaunchConfig(selector=
   "onelaunch")``, ``"rows"``); and on a CUDA GPU the bulk rows at V = 163840 (``--bulk-rows``), the greedy selector
   on their T0 rows (on every row with ``--bulk-greedy``);
2. the verifier (§11): the named calls (``accept-edges``) and the request rows of ``pp3.audit.accept_bulk``
   (``accept-plans``), compared field by field (status, accepted, tokens);
3. the conformance files (``pp3.audit.conformance``: golden vectors of both kernels, the Philox known answers,
   the exponential's worst cases) on the reference and on the kernels.

Sizes: ``quick`` (``--quick``), ``standard`` (the default without CUDA: the kernels in Triton's interpreter,
TRITON_INTERPRET=1) and ``full`` (``--full``, the default on a CUDA GPU: the SPEC vocabularies up to 262144). The
first mismatching call of each kernel is written to ``--out`` (``selector_first.npz`` / ``verifier_first.npz``:
inputs as raw bits and both outputs, and a ``.json`` of its first mismatching rows); ``pp3 verify --replay FILE``
re-runs it on both implementations. Progress goes to stderr; ``--json`` prints one JSON document on stdout
(``schema_version`` 1, ``verdict``, the environment stamp and every table). Arguments: ``pp3.cli``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pp3.audit._pipeline import pipeline, read_rows
from pp3.audit.suites import accept_suites, hashed_rows, hashed_rows_torch, suites
from pp3.reference import DEFAULT_TAU, Proposal, Verdict
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
# The selector part's suites, one per kernel a call runs through (``Call.kernel``), in the order they run; by default
# the shipped kernels' (the one-launch and row selectors, not yet shipped, on request: --selectors).
SELECTOR_KERNELS = ("propose", "gather", "tiles", "greedy", "rescan", "onelaunch", "rows")
DEFAULT_SELECTOR_KERNELS = SELECTOR_KERNELS[:5]
SIZES = ("quick", "standard", "full")


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def replay_command(path: Path | str) -> str:
    return f"pp3 verify --replay {path}"


# ------------------------------------------------------------------------------------------------------ failures


def _rows_report(call: Call | AcceptCall, ref: Any, got: Any, fields: tuple[str, ...], path: Path) -> dict[str, Any]:
    bad = np.flatnonzero(row_mismatch(got, ref))
    small = isinstance(call, Call) and call.v <= 4096
    return {
        "case": call.name,
        "replay": replay_command(path),
        "mismatching_rows": bad.tolist(),
        "rows": [
            {
                "row": int(r),
                "inputs": call.row_inputs(int(r)),
                **({"call": repr(call.take([int(r)]))} if small else {}),
                "reference": {f: np.asarray(getattr(ref, f)[r]).tolist() for f in fields},
                "kernel": {f: np.asarray(getattr(got, f)[r]).tolist() for f in fields},
            }
            for r in bad[:4]
        ],
    }


def dump_failure(out: Path, call: Call, ref: Proposal, got: Proposal) -> Path:
    """Write a selector call (inputs and both outputs; floats as bits) for ``--replay``; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "selector_first.npz"
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
        **{f"reference_{f}": getattr(ref, f) for f in SELECTOR_FIELDS},
        **{f"kernel_{f}": getattr(got, f) for f in SELECTOR_FIELDS},
    )
    path.with_suffix(".json").write_text(json.dumps(_rows_report(call, ref, got, SELECTOR_FIELDS, path), indent=1))
    return path


def dump_accept_failure(out: Path, call: AcceptCall, ref: Verdict, got: Verdict) -> Path:
    """Write a verifier call (raw target bits, drafts, keys, both outputs) for ``--replay``; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "verifier_first.npz"
    arrays: dict[str, Any] = {
        "kernel": "verifier", "name": call.name, "fmt": call.fmt.name, "bits": call.bits,
        "temperature": call.temperature, **call.draft(), "seed": call.seed, "round": call.round,
        "position": call.position, "tile": -1 if call.tile is None else call.tile,
        **{f"reference_{f}": getattr(ref, f) for f in VERIFIER_FIELDS},
        **{f"kernel_{f}": getattr(got, f) for f in VERIFIER_FIELDS},
    }
    np.savez(path, **arrays)
    path.with_suffix(".json").write_text(json.dumps(_rows_report(call, ref, got, VERIFIER_FIELDS, path), indent=1))
    return path


class Failures:
    """Where one kernel's mismatching calls go: the first one is written to ``out`` with the command that replays
    it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.first: Path | None = None

    def add(self, call: Call, ref: Proposal, got: Proposal) -> None:
        if self.first is None:
            self.first = dump_failure(self.out, call, ref, got)

    def add_accept(self, call: AcceptCall, ref: Verdict, got: Verdict) -> None:
        if self.first is None:
            self.first = dump_accept_failure(self.out, call, ref, got)


@dataclasses.dataclass(frozen=True)
class Replay:
    """A failing case for ``--replay``: its file, its kernel ("selector" or "verifier") and its call."""

    path: str
    kernel: str
    call: Call | AcceptCall


def load_replay(path: str) -> Replay:
    """The case of a file that ``dump_failure`` / ``dump_accept_failure`` wrote. Any other file, or a damaged one,
    raises ``DamagedRecord`` saying what is wrong (files without a ``kernel`` member are the selector's)."""

    def read(z: Members) -> Replay:
        kernel = str(member(z, "kernel", str, ())) if "kernel" in z else "selector"
        if kernel == "selector":
            return Replay(path, kernel, read_call(z))
        if kernel == "verifier":
            return Replay(path, kernel, read_accept_call(z))
        raise DamagedRecord(f"kernel: {kernel!r} is neither 'selector' nor 'verifier'")

    return read_record(path, read)


def replay(case: Replay, device: Any, as_json: bool = False) -> int:
    """Re-run a dumped call on the kernel and the reference (both outputs printed, or one JSON document): exit
    status 1 if they differ. A call the reference refuses raises ``DamagedRecord`` (no dump holds one)."""
    path, kind, call = case.path, case.kernel, case.call
    ref = recorded_reference(call)
    got = call.run_kernel(device)
    mism = rows_per_field(got, ref)
    verdict = "FAIL" if any(mism.values()) else "PASS"
    if as_json:
        doc = {"schema_version": SCHEMA_VERSION, "tool": "pp3 verify --replay", "verdict": verdict, "file": path,
               "kernel": kind, "case": call.name, "mismatching_rows_per_field": mism,
               "reference": {f: np.asarray(getattr(ref, f)).tolist() for f in mism},
               "kernel_output": {f: np.asarray(getattr(got, f)).tolist() for f in mism}, "environment": environment()}
        print(json.dumps(doc, indent=1))
    else:
        print(f"{call.name}: mismatching rows per field {mism}")
        for f in mism:
            print(f"reference {f}: {np.asarray(getattr(ref, f)).tolist()}")
            print(f"kernel    {f}: {np.asarray(getattr(got, f)).tolist()}")
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


def run_case(call: Call, device: Any) -> tuple[Proposal, Proposal, dict[str, int]]:
    ref = call.run_reference()
    got = call.run_kernel(device)
    return ref, got, rows_per_field(got, ref)


def run_accept_case(call: AcceptCall, device: Any) -> tuple[Verdict, Verdict, dict[str, int]]:
    ref = call.run_reference()
    got = call.run_kernel(device)
    return ref, got, rows_per_field(got, ref)


def _check_calls(
    what: str, calls: Iterable[tuple[str, Any]], run: Callable[[Any, Any], tuple[Any, Any, dict[str, int]]],
    table: Table, add_failure: Callable[[Any, Any, Any], None], device: Any, verbose: bool
) -> int:
    """Every (suite, call) through ``run`` into ``table``; a mismatching call to ``add_failure``. Returns the rows
    checked."""
    t_start = time.perf_counter()
    i = rows = 0
    it: Iterator[tuple[str, Any]] = iter(calls)
    while True:
        t0 = time.perf_counter()
        try:
            suite, call = next(it)  # the verifier's request rows are built (on the device) here
        except StopIteration:
            break
        ref, got, mism = run(call, device)
        table.add(suite, call.b, mism, time.perf_counter() - t0)
        rows += call.b
        if any(mism.values()):
            add_failure(call, ref, got)
        i += 1
        if verbose or i % 10 == 0:
            progress(f"  {what} {i} {call.name}: {time.perf_counter() - t0:.1f} s, {table.mismatches()} mismatches "
                     f"({time.perf_counter() - t_start:.0f} s)")
    progress(f"  {what}: {i} calls, {rows} rows, {table.mismatches()} mismatches "
             f"({time.perf_counter() - t_start:.0f} s)")
    return rows


# ------------------------------------------------------------------------------------------------------ bulk rows


def _bulk_reference(args: tuple[Any, ...]) -> Proposal:
    """Worker: the reference on rows [lo, hi) of a batch that the parent copied from the GPU into shared memory."""
    from pp3.reference import propose

    name, shape, lo, hi, temp, seed, rnd, pos = args
    return propose(read_rows(name, shape, np.float32, lo, hi), temp, seed, rnd, pos)


def bulk(
    table: Table, n_rows: int, v: int, batch: int, failures: Failures, device: Any, bulk_seed: int = 0,
    greedy_only: bool = False,
) -> int:
    """The >= 10^6-row GPU suite; returns the rows checked. Rows are defined by integer hashing of a per-row seed
    (``hashed_rows_torch``), built on the GPU, run through the kernels, copied once into shared memory, and checked by a
    process pool running the reference on slices of it. The first batch's rows are also compared bit for bit with the
    CPU's ``hashed_rows``, so a failure can be replayed from the row seeds alone. Each batch runs through ``propose``
    (the segment selector at these batch sizes), the tile selector and the greedy selector (both ways); the greedy
    selector is checked on the rows whose reference outputs are a T0 row's (target temperature ±0, or failed by the
    logits);
    ``greedy_only``: every row's temperature is ±0, so every kernel is checked on every row."""
    from multiprocessing import shared_memory

    import torch

    from pp3 import kernels

    batch = min(batch, n_rows)
    workers = max(1, (os.cpu_count() or 2) - 1)
    chunk = max(1, -(-batch // workers))
    rng = np.random.default_rng(20261130 + bulk_seed)  # distinct --bulk-seed values give disjoint-in-practice rows
    temp_pool = np.array([0.0, -0.0] if greedy_only else [1.0, 1.0, 1.0, 0.5, 2.0, 0.0, -0.0, np.inf, np.nan, -1.0],
                         dtype=np.float32)
    Pending = tuple[tuple[Proposal, Proposal, Proposal, Proposal], tuple[np.ndarray[Any, Any], ...],
                    shared_memory.SharedMemory]
    t0 = time.perf_counter()
    done = 0
    last_print = 0

    def settle(item: Pending, parts: list[Proposal]) -> None:
        nonlocal done, last_print
        (got, got_tiles, got_greedy, got_rescan), keys, shm = item
        ref = Proposal(*(np.concatenate([getattr(p, f) for p in parts]) for f in SELECTOR_FIELDS))
        row_seed, temp, seed, rnd, pos = keys
        t0_rows = np.flatnonzero((temp == 0) | np.isin(ref.status, (1, 2, 3)))  # a T0 row's outputs (§3, §7)
        ref_t0, got_t0, rescan_t0 = (Proposal(*(getattr(p, f)[t0_rows] for f in SELECTOR_FIELDS))
                                     for p in (ref, got_greedy, got_rescan))
        for suite, k, r_out, k_out, as_t0 in (("bulk", got.status.shape[0], ref, got, None),
                                              ("bulk tiles", got.status.shape[0], ref, got_tiles, None),
                                              ("bulk greedy", t0_rows.size, ref_t0, got_t0, Call.as_greedy),
                                              ("bulk rescan", t0_rows.size, ref_t0, rescan_t0, Call.as_rescan)):
            mism = rows_per_field(k_out, r_out)
            table.add(suite, k, mism, 0.0)
            if any(mism.values()):
                x = np.ndarray((row_seed.size, v), dtype=np.float32, buffer=shm.buf).copy()
                s, r, p = (tuple(int(k) for k in a) for a in (seed, rnd, pos))
                call = Call(FORMATS["fp32"], x.view(np.uint32), temp, s, r, p, DEFAULT_TAU, None, True,
                            name=f"bulk[seed={bulk_seed}]")
                if as_t0 is not None:
                    call = as_t0(call.take(t0_rows.tolist()))
                failures.add(call, r_out, k_out)
        done += got.status.shape[0]
        if done - last_print >= 50_000 or done >= n_rows:
            last_print = done
            el = time.perf_counter() - t0
            progress(f"  bulk: {done}/{n_rows} rows, {table.mismatches()} mismatches, {el:.0f} s")

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
            out = kernels.propose(x, dev[1], dev[2], dev[3], dev[4])
            got = Proposal(*(getattr(out, f).cpu().numpy() for f in SELECTOR_FIELDS))
            out = kernels.greedy(x, launch=kernels.LaunchConfig(greedy="keys"))
            got_greedy = Proposal(*(getattr(out, f).cpu().numpy() for f in SELECTOR_FIELDS))
            out = kernels.greedy(x, launch=kernels.LaunchConfig(greedy="rescan"))
            got_rescan = Proposal(*(getattr(out, f).cpu().numpy() for f in SELECTOR_FIELDS))
            out = kernels.propose(x, dev[1], dev[2], dev[3], dev[4], launch=kernels.LaunchConfig(selector="tiles"))
            got_tiles = Proposal(*(getattr(out, f).cpu().numpy() for f in SELECTOR_FIELDS))
            shm = pipe.buffer()  # settles the batch that last used it
            torch.from_numpy(np.ndarray((n, v), dtype=np.float32, buffer=shm.buf)).copy_(x)
            tasks = [
                (_bulk_reference, ((shm.name, (n, v), r, min(n, r + chunk), *(k[r : r + chunk] for k in keys[1:])),))
                for r in range(0, n, chunk)
            ]
            pipe.submit(((got, got_tiles, got_greedy, got_rescan), keys, shm), tasks)
    table.rows["bulk"]["time_s"] = time.perf_counter() - t0
    return done


# ------------------------------------------------------------------------------------------------------ the run


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one ``pp3 verify`` run checks (``pp3.cli`` builds it from the options, refusing any that cannot apply)."""

    size: str  # one of SIZES
    parts: tuple[str, ...]  # of PARTS, in their order
    selectors: tuple[str, ...]  # the selector part's suites (SELECTOR_KERNELS), none with bulk_only
    bulk_rows: int  # the selector part's bulk rows (0: none)
    bulk_seed: int
    bulk_vocab: int
    bulk_greedy: bool
    out: Path  # where the first failing case of each kernel is written
    json: bool


def _part(ran: bool, checked: dict[str, int], mismatches: int, failures: Failures | None = None,
          table: Table | None = None) -> dict[str, Any]:
    """One part's entry of the report. Its verdict comes from the rows each of its requested checks ran
    (``checked``: check -> rows): PASS only if every one of them checked at least one row and nothing mismatched, so
    a part that checked 0 rows of anything it was asked for is never a PASS."""
    verdict = "PASS" if checked and min(checked.values()) > 0 and mismatches == 0 else "FAIL"
    return {"verdict": verdict if ran else "SKIPPED", "checked_rows": checked, "rows": sum(checked.values()),
            "mismatches": mismatches, "suites": None if table is None else table.as_dict(),
            "first_failure": None if failures is None or failures.first is None else str(failures.first)}


def run(plan: Plan, device: Any) -> int:
    """``pp3 verify`` on a checked plan (``pp3.cli``): 0 PASS, 1 FAIL."""
    import warnings

    # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    size, parts = plan.size, plan.parts
    stamp = environment()
    progress(f"pp3 verify: device={stamp['gpu'] or 'cpu (interpreter)'}, sizes={size}, parts={','.join(parts)}, "
             f"commit={stamp['commit']}{' (dirty)' if stamp['dirty'] else ''}")
    t_start = time.perf_counter()
    select_table, accept_table = Table(SELECTOR_FIELDS), Table(VERIFIER_FIELDS)
    select_fail, accept_fail = Failures(plan.out), Failures(plan.out)
    select_rows: dict[str, int] = {}
    if "selector" in parts:
        calls: dict[str, Callable[[], Iterable[tuple[str, Call]]]] = {
            "propose": lambda: suites(size),
            "gather": lambda: ((f"{suite} gather", call.as_gather()) for suite, call in suites(size) if not call.cuts),
            "tiles": lambda: ((f"{suite} tiles", call.as_tiles()) for suite, call in suites(size) if not call.cuts),
            "greedy": lambda: ((f"{suite} greedy", call.as_greedy()) for suite, call in suites(size)),
            "rescan": lambda: ((f"{suite} rescan", call.as_rescan()) for suite, call in suites(size) if not call.cuts),
            "onelaunch": lambda: ((f"{suite} onelaunch", call.as_onelaunch()) for suite, call in suites(size)
                                  if not call.cuts),
            "rows": lambda: ((f"{suite} rows", call.as_rows()) for suite, call in suites(size) if not call.cuts),
        }
        for kind in plan.selectors:
            select_rows[kind] = _check_calls("selector" if kind == "propose" else kind, calls[kind](), run_case,
                                             select_table, select_fail.add, device, size == "full")
        if plan.bulk_rows:
            select_rows["bulk"] = bulk(select_table, plan.bulk_rows, plan.bulk_vocab, 1024, select_fail, device,
                                       plan.bulk_seed, plan.bulk_greedy)
    accept_rows: dict[str, int] = {}
    if "verifier" in parts:
        accept_rows["verifier"] = _check_calls("verifier", accept_suites(size, device), run_accept_case,
                                               accept_table, accept_fail.add_accept, device, size == "full")
    conformance_report: dict[str, Any] | None = None
    results: list[dict[str, Any]] = []
    if "conformance" in parts:
        from pp3.audit import conformance

        t0 = time.perf_counter()
        conformance_report = conformance.run(kernels=True)
        results = conformance_report["results"]
        progress(f"  conformance: {conformance_report['verdict']} ({time.perf_counter() - t0:.0f} s)")
    # Every file on both implementations: one the installed kernels do not export checked 0 rows.
    conformance_part = _part("conformance" in parts, {f"{r['file']} ({r['implementation']})": int(r["checked"])
                                                      for r in results}, sum(int(r["mismatches"]) for r in results))

    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": "pp3 verify",
        "verdict": "FAIL",
        "sizes": size,
        "parts": list(parts),
        "selector": _part("selector" in parts, select_rows, select_table.mismatches(), select_fail, select_table),
        "verifier": _part("verifier" in parts, accept_rows, accept_table.mismatches(), accept_fail, accept_table),
        "conformance": conformance_part | {"implementations": None if conformance_report is None else
                                           conformance_report["implementations"], "results": results},
        "time_s": round(time.perf_counter() - t_start, 1),
        "environment": stamp,
    }
    verdicts = [doc[p]["verdict"] for p in parts]
    doc["verdict"] = "PASS" if verdicts and all(v == "PASS" for v in verdicts) else "FAIL"
    if plan.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"environment: {json.dumps(stamp)}")
        if "selector" in parts:
            print(f"\nselector (SPEC.md §2-§8): mismatching rows per field\n{select_table.render()}")
        if "verifier" in parts:
            print(f"\nverifier (SPEC.md §11): mismatching rows per field\n{accept_table.render()}")
        if conformance_report is not None:
            from pp3.audit import conformance

            print(f"\n{conformance.render(conformance_report)}")
        each = ", ".join(f"{p} {doc[p]['verdict']} ({_rows_line(doc[p]['checked_rows'])})" for p in parts)
        print(f"\nverify: {doc['verdict']} ({each}; {doc['time_s']:.0f} s)")
    for fail in (select_fail, accept_fail):
        if fail.first is not None:
            progress(f"MISMATCH: first case written to {fail.first}; replay: {replay_command(fail.first)}")
    return 0 if doc["verdict"] == "PASS" else 1


def _rows_line(checked: dict[str, int]) -> str:
    """A part's rows, and the checks of it that checked none."""
    none = [what for what, n in checked.items() if n == 0]
    return f"{sum(checked.values()):,} rows" + (f"; 0 rows: {', '.join(none)}" if none or not checked else "")
