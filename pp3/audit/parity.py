"""``make verify``: bitwise parity of the Triton kernels with the NumPy reference.

Without a GPU the kernels run through Triton's interpreter (TRITON_INTERPRET=1, set by the Makefile) at sizes
that finish in minutes; with a CUDA GPU they run natively at full size, plus a bulk suite of random rows at
V = 163840. Prints a table (suite, cases, rows, mismatches per field, time) and the environment stamp; ``--json``
prints one JSON document (the stamp and the table) on stdout instead, progress always going to stderr. Any
mismatch exits 1 and writes the first mismatching case to ``--out`` (default ``verify-failures/``) with a
one-line replay command.

    python -m pp3.audit.parity [--full | --quick] [--bulk-rows N] [--json] [--out DIR] [--replay FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from pp3.audit._pipeline import pipeline, read_rows
from pp3.audit.suites import hashed_rows, hashed_rows_torch, suites
from pp3.reference import DEFAULT_TAU, Proposal
from pp3.testing.call import FORMATS, Call
from pp3.testing.compare import row_mismatch, rows_per_field
from pp3.testing.stamp import environment

FIELDS = ("status", "token", "ids", "tickets")


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Failures:
    """Where mismatching cases go: the first one is written to ``out`` (inputs and both outputs, floats as bits)
    with the command that replays it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.first: Path | None = None

    def add(self, call: Call, ref: Proposal, got: Proposal) -> None:
        if self.first is None:
            self.first = dump_failure(self.out, call, ref, got)


def dump_failure(out: Path, call: Call, ref: Proposal, got: Proposal) -> Path:
    """Write the call (inputs and both outputs; floats as bits) for ``--replay``; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "first.npz"
    np.savez(
        path,
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
    )
    bad = np.flatnonzero(row_mismatch(got, ref))
    report = {
        "case": call.name,
        "replay": f"python -m pp3.audit.parity --replay {path}",
        "rows": [
            {
                "row": int(r),
                "inputs": call.row_inputs(int(r)),
                "call": repr(call.take([int(r)])) if call.v <= 4096 else "see first.npz",
                "reference": {f: np.asarray(getattr(ref, f)[r]).tolist() for f in FIELDS},
                "kernel": {f: np.asarray(getattr(got, f)[r]).tolist() for f in FIELDS},
            }
            for r in bad[:4]
        ],
    }
    (out / "first.json").write_text(json.dumps(report, indent=1))
    return path


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
    )


class Table:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"cases": 0, "rows": 0, "time_s": 0.0} | dict.fromkeys(FIELDS, 0)
        )

    def add(self, suite: str, rows: int, mism: dict[str, int], seconds: float) -> None:
        r = self.rows[suite]
        r["cases"] += 1
        r["rows"] += rows
        r["time_s"] += seconds
        for f in FIELDS:
            r[f] += mism[f]

    def mismatches(self) -> int:
        return sum(r[f] for r in self.rows.values() for f in FIELDS)

    def checked_rows(self) -> int:
        return sum(r["rows"] for r in self.rows.values())

    def render(self) -> str:
        head = f"{'suite':<10}{'cases':>7}{'rows':>10}" + "".join(f"{f:>9}" for f in FIELDS) + f"{'time':>9}"
        lines = [head, "-" * len(head)]
        for s, r in self.rows.items():
            lines.append(
                f"{s:<10}{r['cases']:>7}{r['rows']:>10}"
                + "".join(f"{r[f]:>9}" for f in FIELDS)
                + f"{r['time_s']:>8.1f}s"
            )
        return "\n".join(lines)


def run_case(call: Call, device: Any) -> tuple[Proposal, Proposal, dict[str, int]]:
    ref = call.run_reference()
    got = call.run_kernel(device)
    return ref, got, rows_per_field(got, ref)


def _bulk_reference(args: tuple[Any, ...]) -> Proposal:
    """Worker: the reference on rows [lo, hi) of a batch that the parent copied from the GPU into shared memory."""
    from pp3.reference import propose

    name, shape, lo, hi, temp, seed, rnd, pos = args
    return propose(read_rows(name, shape, np.float32, lo, hi), temp, seed, rnd, pos)


def bulk(
    table: Table, n_rows: int, v: int, batch: int, failures: Failures, device: Any, bulk_seed: int = 0
) -> None:
    """The >= 10^6-row GPU suite. Rows are defined by integer hashing of a per-row seed (``hashed_rows_torch``),
    built on the GPU, run through the kernels, copied once into shared memory, and checked by a process pool
    running the reference on slices of it. The first batch's rows are also compared bit for bit with the CPU's
    ``hashed_rows``, so a failure can be replayed from the row seeds alone."""
    from multiprocessing import shared_memory

    import torch

    from pp3 import kernels

    batch = min(batch, n_rows)
    workers = max(1, (os.cpu_count() or 2) - 1)
    chunk = max(1, -(-batch // workers))
    rng = np.random.default_rng(20261130 + bulk_seed)  # distinct --bulk-seed values give disjoint-in-practice rows
    temp_pool = np.array([1.0, 1.0, 1.0, 0.5, 2.0, 0.0, -0.0, np.inf, np.nan, -1.0], dtype=np.float32)
    Pending = tuple[Proposal, tuple[np.ndarray[Any, Any], ...], shared_memory.SharedMemory]
    t0 = time.perf_counter()
    done = 0
    last_print = 0

    def settle(item: Pending, parts: list[Proposal]) -> None:
        nonlocal done, last_print
        got, keys, shm = item
        ref = Proposal(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))
        mism = rows_per_field(got, ref)
        table.add("bulk", got.status.shape[0], mism, 0.0)
        if any(mism.values()):
            row_seed, temp, seed, rnd, pos = keys
            x = np.ndarray((row_seed.size, v), dtype=np.float32, buffer=shm.buf).copy()
            s, r, p = (tuple(int(k) for k in a) for a in (seed, rnd, pos))
            failures.add(Call(FORMATS["fp32"], x.view(np.uint32), temp, s, r, p, DEFAULT_TAU, None, True,
                              name=f"bulk[seed={bulk_seed}]"), ref, got)
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
            got = Proposal(*(getattr(out, f).cpu().numpy() for f in FIELDS))
            shm = pipe.buffer()  # settles the batch that last used it
            torch.from_numpy(np.ndarray((n, v), dtype=np.float32, buffer=shm.buf)).copy_(x)
            tasks = [
                (_bulk_reference, ((shm.name, (n, v), r, min(n, r + chunk), *(k[r : r + chunk] for k in keys[1:])),))
                for r in range(0, n, chunk)
            ]
            pipe.submit((got, keys, shm), tasks)
    table.rows["bulk"]["time_s"] = time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pp3.audit.parity", description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="GPU sizes (default when CUDA is available)")
    size.add_argument("--quick", action="store_true", help="interpreter sizes (default without CUDA)")
    ap.add_argument("--bulk-rows", type=int, default=None, help="random rows at V=163840 (GPU default 10^6)")
    ap.add_argument("--bulk-seed", type=int, default=0, help="seed of the bulk rows (split 10^6 rows over calls)")
    ap.add_argument("--bulk-only", action="store_true", help="skip the suites, run only the bulk rows")
    ap.add_argument("--bulk-vocab", type=int, default=163840, help="vocabulary of the bulk rows")
    ap.add_argument("--json", action="store_true", help="print one JSON document (stamp and table) on stdout")
    ap.add_argument("--out", type=Path, default=Path("verify-failures"), help="where a failing case is written")
    ap.add_argument("--replay", metavar="FILE", help="re-run one dumped case and show both outputs")
    args = ap.parse_args(argv)
    if args.bulk_rows is not None and args.bulk_rows < 0:
        ap.error(f"--bulk-rows: expected >= 0, got {args.bulk_rows}")
    if args.bulk_vocab < 1:
        ap.error(f"--bulk-vocab: expected >= 1, got {args.bulk_vocab}")

    import warnings

    import torch

    # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    if device.type == "cpu" and not interp:
        print("no CUDA GPU: set TRITON_INTERPRET=1 to run the kernels through Triton's interpreter", file=sys.stderr)
        return 2

    if args.replay:
        call = load_case(args.replay)
        ref, got, mism = run_case(call, device)
        print(f"{call.name}: mismatching rows per field {mism}")
        for f in FIELDS:
            print(f"reference {f}: {getattr(ref, f).tolist()}\nkernel    {f}: {getattr(got, f).tolist()}")
        return 1 if any(mism.values()) else 0

    full = args.full or (device.type == "cuda" and not args.quick)
    bulk_rows = args.bulk_rows if args.bulk_rows is not None else (1_000_000 if device.type == "cuda" else 0)
    if args.bulk_only and bulk_rows == 0:
        print("pp3 verify: --bulk-only with 0 bulk rows would check nothing; give --bulk-rows N (N >= 1)",
              file=sys.stderr)
        return 2
    stamp = environment()
    progress(f"pp3 verify: device={stamp['gpu'] or 'cpu (interpreter)'}, sizes={'full' if full else 'quick'}, "
             f"commit={stamp['commit']}{' (dirty)' if stamp['dirty'] else ''}")
    table = Table()
    failures = Failures(args.out)
    all_cases = [] if args.bulk_only else list(suites("full" if full else "standard"))
    for i, (suite, call) in enumerate(all_cases):
        t0 = time.perf_counter()
        ref, got, mism = run_case(call, device)
        table.add(suite, call.b, mism, time.perf_counter() - t0)
        if any(mism.values()):
            failures.add(call, ref, got)
        if full or (i + 1) % 10 == 0 or i + 1 == len(all_cases):
            el = time.perf_counter() - t0
            progress(f"  {i + 1}/{len(all_cases)} {call.name}: {el:.1f} s, {table.mismatches()} mismatches")
    if bulk_rows:
        bulk(table, bulk_rows, args.bulk_vocab, 1024, failures, device, args.bulk_seed)
    if table.checked_rows() == 0:
        print("pp3 verify: no row was checked", file=sys.stderr)
        return 2

    verdict = "MISMATCH" if failures.first else "PASS"
    if args.json:
        doc = {"environment": stamp, "sizes": "full" if full else "quick", "suites": table.rows,
               "mismatches": table.mismatches(), "verdict": verdict,
               "first_failure": None if failures.first is None else str(failures.first)}
        print(json.dumps(doc, indent=1))
    else:
        print(f"environment: {json.dumps(stamp)}")
        print(table.render())
    if failures.first:
        progress(f"MISMATCH: first case written to {failures.first}; replay: python -m pp3.audit.parity --replay "
                 f"{failures.first}")
        return 1
    if not args.json:
        print("bitwise parity: 0 mismatches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
