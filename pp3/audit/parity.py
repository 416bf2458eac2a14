"""``pp3 verify`` (``make verify``): bitwise parity of both Triton kernels with the NumPy reference, and the
conformance files.

Three parts, one verdict (PASS only if every part passes; FAIL, exit status 1, otherwise):

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

import argparse
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
from pp3.testing.call import FORMATS, AcceptCall, Call
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
DRAFT_FIELDS = ("draft_tokens", "draft_status", "draft_ids", "draft_tickets")


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


REPLAY_KEYS = {
    "selector": ("name", "fmt", "bits", "temperature", "seed", "round", "position", "tau", "tile", "cuts"),
    "verifier": ("name", "fmt", "bits", "temperature", *DRAFT_FIELDS, "seed", "round", "position", "tile"),
}


def replay_kind(path: str) -> str | None:
    """The kernel of a file ``--replay`` can run ("selector" or "verifier"), or None if it is not one."""
    try:
        with np.load(path) as z:
            kind = str(z["kernel"]) if "kernel" in z.files else "selector"
            return kind if kind in REPLAY_KEYS and set(REPLAY_KEYS[kind]) <= set(z.files) else None
    except (OSError, ValueError, KeyError, EOFError):
        return None


def load_case(path: str) -> Call:
    z = np.load(path)
    tile = int(z["tile"])
    seed, rnd, pos = (tuple(int(v) for v in z[k]) for k in ("seed", "round", "position"))
    return Call(
        FORMATS[str(z["fmt"])],
        z["bits"],
        z["temperature"],
        seed,
        rnd,
        pos,
        float(z["tau"]),
        None if tile < 0 else tile,
        True,
        tuple(int(c) for c in z["cuts"]),
        name=str(z["name"]),
        kernel=str(z["selector_kernel"]) if "selector_kernel" in z.files else "propose",
    )


def load_accept_case(path: str) -> AcceptCall:
    z = np.load(path)
    tile = int(z["tile"])
    keys = ("temperature", *DRAFT_FIELDS, "seed", "round", "position")
    return AcceptCall(FORMATS[str(z["fmt"])], z["bits"], **{k: z[k] for k in keys}, tile=None if tile < 0 else tile,
                      name=str(z["name"]))


def replay(path: str, device: Any, as_json: bool = False) -> int:
    """Re-run a dumped call on the kernel and the reference (both outputs printed, or one JSON document): exit
    status 1 if they differ."""
    kind = replay_kind(path)
    call: Call | AcceptCall = load_accept_case(path) if kind == "verifier" else load_case(path)
    ref, got = call.run_reference(), call.run_kernel(device)
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
) -> None:
    """Every (suite, call) through ``run`` into ``table``; a mismatching call to ``add_failure``."""
    t_start = time.perf_counter()
    i = 0
    it: Iterator[tuple[str, Any]] = iter(calls)
    while True:
        t0 = time.perf_counter()
        try:
            suite, call = next(it)  # the verifier's request rows are built (on the device) here
        except StopIteration:
            break
        ref, got, mism = run(call, device)
        table.add(suite, call.b, mism, time.perf_counter() - t0)
        if any(mism.values()):
            add_failure(call, ref, got)
        i += 1
        if verbose or i % 10 == 0:
            progress(f"  {what} {i} {call.name}: {time.perf_counter() - t0:.1f} s, {table.mismatches()} mismatches "
                     f"({time.perf_counter() - t_start:.0f} s)")
    progress(f"  {what}: {i} calls, {table.checked_rows()} rows, {table.mismatches()} mismatches "
             f"({time.perf_counter() - t_start:.0f} s)")


# ------------------------------------------------------------------------------------------------------ bulk rows


def _bulk_reference(args: tuple[Any, ...]) -> Proposal:
    """Worker: the reference on rows [lo, hi) of a batch that the parent copied from the GPU into shared memory."""
    from pp3.reference import propose

    name, shape, lo, hi, temp, seed, rnd, pos = args
    return propose(read_rows(name, shape, np.float32, lo, hi), temp, seed, rnd, pos)


def bulk(
    table: Table, n_rows: int, v: int, batch: int, failures: Failures, device: Any, bulk_seed: int = 0,
    greedy_only: bool = False,
) -> None:
    """The >= 10^6-row GPU suite. Rows are defined by integer hashing of a per-row seed (``hashed_rows_torch``),
    built on the GPU, run through the kernels, copied once into shared memory, and checked by a process pool
    running the reference on slices of it. The first batch's rows are also compared bit for bit with the CPU's
    ``hashed_rows``, so a failure can be replayed from the row seeds alone. Each batch runs through ``propose`` (the
    segment selector at these batch sizes), the tile selector and the greedy selector (both ways); the greedy
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


# ------------------------------------------------------------------------------------------------------ the run


def _part(table: Table, failures: Failures, ran: bool) -> dict[str, Any]:
    verdict = "PASS" if ran and table.mismatches() == 0 and table.checked_rows() > 0 else "FAIL"
    return {"verdict": verdict if ran else "SKIPPED", "suites": table.as_dict(), "rows": table.checked_rows(),
            "mismatches": table.mismatches(), "first_failure": None if failures.first is None else str(failures.first)}


def run(args: argparse.Namespace) -> int:
    """``pp3 verify`` on parsed arguments (``pp3.cli`` checks them): 0 PASS, 1 FAIL, 2 a run that cannot start."""
    import warnings

    import torch

    # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("pp3 verify: no CUDA GPU: set TRITON_INTERPRET=1 to run the kernels through Triton's interpreter",
              file=sys.stderr)
        return 2
    if args.replay:
        return replay(args.replay, device, args.json)
    size = "quick" if args.quick else "full" if args.full or device.type == "cuda" else "standard"
    if size == "full" and device.type != "cuda":
        print("pp3 verify: --full runs the SPEC vocabularies (V up to 262144), for a CUDA GPU; in the interpreter "
              "use the default sizes or --quick", file=sys.stderr)
        return 2
    bulk_rows = args.bulk_rows if args.bulk_rows is not None else (1_000_000 if device.type == "cuda" else 0)
    parts = ("selector",) if args.bulk_only else tuple(p for p in PARTS if p in args.parts)
    kinds = tuple(args.selectors or DEFAULT_SELECTOR_KERNELS)
    if args.selectors and (args.bulk_only or "selector" not in parts):
        print("pp3 verify: --selectors picks the selector part's suites; with --bulk-only or without the selector "
              "part it would check nothing it names", file=sys.stderr)
        return 2
    if args.bulk_only and bulk_rows == 0:
        print("pp3 verify: --bulk-only with 0 bulk rows would check nothing; give --bulk-rows N (N >= 1)",
              file=sys.stderr)
        return 2

    stamp = environment()
    progress(f"pp3 verify: device={stamp['gpu'] or 'cpu (interpreter)'}, sizes={size}, parts={','.join(parts)}, "
             f"commit={stamp['commit']}{' (dirty)' if stamp['dirty'] else ''}")
    t_start = time.perf_counter()
    select_table, accept_table = Table(SELECTOR_FIELDS), Table(VERIFIER_FIELDS)
    select_fail, accept_fail = Failures(args.out), Failures(args.out)
    if "selector" in parts:
        if not args.bulk_only:
            calls: dict[str, Iterable[tuple[str, Call]]] = {
                "propose": suites(size),
                "gather": ((f"{suite} gather", call.as_gather()) for suite, call in suites(size) if not call.cuts),
                "tiles": ((f"{suite} tiles", call.as_tiles()) for suite, call in suites(size) if not call.cuts),
                "greedy": ((f"{suite} greedy", call.as_greedy()) for suite, call in suites(size)),
                "rescan": ((f"{suite} rescan", call.as_rescan()) for suite, call in suites(size) if not call.cuts),
                "onelaunch": ((f"{suite} onelaunch", call.as_onelaunch()) for suite, call in suites(size)
                              if not call.cuts),
                "rows": ((f"{suite} rows", call.as_rows()) for suite, call in suites(size) if not call.cuts),
            }
            for kind in SELECTOR_KERNELS:
                if kind in kinds:
                    _check_calls("selector" if kind == "propose" else kind, calls[kind], run_case, select_table,
                                 select_fail.add, device, size == "full")
        if bulk_rows:
            bulk(select_table, bulk_rows, args.bulk_vocab, 1024, select_fail, device, args.bulk_seed,
                 args.bulk_greedy)
    if "verifier" in parts:
        _check_calls("verifier", accept_suites(size, device), run_accept_case, accept_table, accept_fail.add_accept,
                     device, size == "full")
    conformance_report: dict[str, Any] | None = None
    if "conformance" in parts:
        from pp3.audit import conformance

        t0 = time.perf_counter()
        conformance_report = conformance.run(kernels=True)
        progress(f"  conformance: {conformance_report['verdict']} ({time.perf_counter() - t0:.0f} s)")

    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": "pp3 verify",
        "verdict": "FAIL",
        "sizes": size,
        "parts": list(parts),
        "selector": _part(select_table, select_fail, "selector" in parts),
        "verifier": _part(accept_table, accept_fail, "verifier" in parts),
        "conformance": None if conformance_report is None else {
            k: conformance_report[k] for k in ("verdict", "implementations", "results")},
        "time_s": round(time.perf_counter() - t_start, 1),
        "environment": stamp,
    }
    verdicts = [doc[p]["verdict"] for p in parts]
    doc["verdict"] = "PASS" if verdicts and all(v == "PASS" for v in verdicts) else "FAIL"
    if args.json:
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
        each = ", ".join(f"{p} {doc[p]['verdict']}" for p in parts)
        print(f"\nverify: {doc['verdict']} ({each}; {doc['time_s']:.0f} s)")
    for fail in (select_fail, accept_fail):
        if fail.first is not None:
            progress(f"MISMATCH: first case written to {fail.first}; replay: {replay_command(fail.first)}")
    return 0 if doc["verdict"] == "PASS" else 1
