"""``make verify``: bitwise parity of the Triton kernels with the NumPy reference.

Without a GPU the kernels run through Triton's interpreter (TRITON_INTERPRET=1, set by the Makefile) at sizes
that finish in minutes; with a CUDA GPU they run natively at full size, plus a bulk suite of random rows at
V = 163840. Prints a table (suite, cases, rows, mismatches per field, time); any mismatch exits 1 and writes
the first mismatching case to ``verify-failures/`` with a one-line replay command.

    python -m pp3.verify [--full | --quick] [--bulk-rows N] [--json] [--replay FILE]
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

from pp3.cases import Case, suites
from pp3.reference.propose import Proposal

FIELDS = ("status", "token", "ids", "tickets")
FAIL_DIR = Path("verify-failures")


def compare(ref: Proposal, got: Proposal) -> dict[str, int]:
    """Mismatching rows per field (exact equality)."""
    out: dict[str, int] = {}
    for f in FIELDS:
        a, b = getattr(ref, f), getattr(got, f)
        if a.shape != b.shape:
            out[f] = a.shape[0]
            continue
        diff = a != b
        out[f] = int(diff.reshape(diff.shape[0], -1).any(axis=1).sum())
    return out


def _hex32(a: np.ndarray[Any, Any]) -> list[str]:
    return [f"{int(v):08x}" for v in np.asarray(a, np.float32).view(np.uint32).ravel()]


def dump_failure(case: Case, ref: Proposal, got: Proposal) -> Path:
    """Write the case (inputs and both outputs; floats in hex) for ``--replay``; returns the .npz path."""
    FAIL_DIR.mkdir(exist_ok=True)
    path = FAIL_DIR / "first.npz"
    np.savez(
        path,
        name=case.name,
        dtype=case.dtype,
        logits=case.logits,
        temperature=case.temperature,
        seed=case.seed,
        round=case.round,
        position=case.position,
        tau=np.float32(case.tau),
        tile=case.tile,
        shards=np.array(case.shards, dtype=np.int64),
    )
    bad = np.flatnonzero(
        np.any([(getattr(ref, f) != getattr(got, f)).reshape(case.rows, -1).any(axis=1) for f in FIELDS], axis=0)
    )
    report = {
        "case": case.name,
        "replay": f"python -m pp3.verify --replay {path}",
        "tau_bits": _hex32(np.array([case.tau]))[0],
        "tile": case.tile,
        "shards": list(case.shards),
        "rows": [
            {
                "row": int(r),
                "temperature_bits": _hex32(case.temperature[r : r + 1])[0],
                "seed": str(int(case.seed[r])),
                "round": str(int(case.round[r])),
                "position": str(int(case.position[r])),
                "logits_bits": case.logits[r].view(np.uint16 if case.logits.itemsize == 2 else np.uint32).tolist()
                if case.logits.shape[1] <= 4096
                else "see first.npz",
                "reference": {f: np.asarray(getattr(ref, f)[r]).tolist() for f in FIELDS},
                "kernel": {f: np.asarray(getattr(got, f)[r]).tolist() for f in FIELDS},
            }
            for r in bad[:4]
        ],
    }
    (FAIL_DIR / "first.json").write_text(json.dumps(report, indent=1))
    return path


def load_case(path: str) -> Case:
    z = np.load(path)
    return Case(
        name=str(z["name"]),
        dtype=str(z["dtype"]),
        logits=z["logits"],
        temperature=z["temperature"],
        seed=z["seed"],
        round=z["round"],
        position=z["position"],
        tau=float(z["tau"]),
        tile=int(z["tile"]),
        shards=tuple(int(s) for s in z["shards"]),
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


def run_case(case: Case, device: Any) -> tuple[Proposal, Proposal, dict[str, int]]:
    ref = case.reference()
    got = case.kernel(device)
    return ref, got, compare(ref, got)


def _bulk_reference(args: tuple[Any, ...]) -> Proposal:
    """Worker: the reference on rows [lo, hi) of a batch that the parent copied from the GPU into shared memory."""
    from multiprocessing import shared_memory

    from pp3.reference import propose

    name, shape, lo, hi, temp, seed, rnd, pos = args
    try:
        shm = shared_memory.SharedMemory(name=name, track=False)  # type: ignore[call-arg]  # Python >= 3.13
    except TypeError:  # older Pythons register the attach with the parent's tracker: a no-op (a set), kept as is
        shm = shared_memory.SharedMemory(name=name)
    try:
        x = np.ndarray(shape, dtype=np.float32, buffer=shm.buf)[lo:hi].copy()  # no view may outlive close()
    finally:
        shm.close()
    return propose(x, temp, seed, rnd, pos)


def bulk(
    table: Table, n_rows: int, v: int, batch: int, first_failure: list[Path], device: Any, bulk_seed: int = 0
) -> None:
    """The >= 10^6-row GPU suite. Rows are defined by integer hashing of a per-row seed (``hashed_rows_torch``),
    built on the GPU, run through the kernels, copied once into shared memory, and checked by a process pool
    running the reference on slices of it. The first batch's rows are also compared bit for bit with the CPU's
    ``hashed_rows``, so a failure can be replayed from the row seeds alone."""
    import concurrent.futures
    import multiprocessing
    from multiprocessing import shared_memory

    import torch

    from pp3.cases import hashed_rows, hashed_rows_torch
    from pp3.kernels import propose as k_propose

    batch = min(batch, n_rows)
    workers = max(1, (os.cpu_count() or 2) - 1)
    chunk = max(1, -(-batch // workers))
    rng = np.random.default_rng(20261130 + bulk_seed)  # distinct --bulk-seed values give disjoint-in-practice rows
    temp_pool = np.array([1.0, 1.0, 1.0, 0.5, 2.0, 0.0, -0.0, np.inf, np.nan, -1.0], dtype=np.float32)
    Pending = tuple[list[Any], Proposal, tuple[np.ndarray[Any, Any], ...], Any]
    pending: list[Pending] = []
    depth = 3  # batches in flight; a ring of depth + 1 shared buffers, each touched once (fresh pages are slow)
    ring = [shared_memory.SharedMemory(create=True, size=batch * v * 4) for _ in range(depth + 1)]
    for buf in ring:
        np.ndarray((batch * v,), dtype=np.float32, buffer=buf.buf).fill(0.0)
    t0 = time.perf_counter()
    done = 0
    last_print = 0

    def settle() -> None:
        nonlocal done, last_print
        futs, got, keys, shm = pending.pop(0)
        parts = [f.result() for f in futs]
        ref = Proposal(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))
        mism = compare(ref, got)
        table.add("bulk", got.status.shape[0], mism, 0.0)
        if any(mism.values()) and not first_failure:
            row_seed, temp, seed, rnd, pos = keys
            x = np.ndarray((row_seed.size, v), dtype=np.float32, buffer=shm.buf).copy()
            first_failure.append(dump_failure(Case("bulk", "float32", x, temp, seed, rnd, pos), ref, got))
        done += got.status.shape[0]
        if done - last_print >= 50_000 or done >= n_rows:
            last_print = done
            el = time.perf_counter() - t0
            print(f"  bulk: {done}/{n_rows} rows, {table.mismatches()} mismatches, {el:.0f} s", flush=True)

    try:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
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
                out = k_propose(x, dev[1], dev[2], dev[3], dev[4])
                got = Proposal(*(getattr(out, f).cpu().numpy() for f in FIELDS))
                if len(pending) >= depth:
                    settle()  # frees the buffer this batch reuses
                shm = ring[it % len(ring)]
                torch.from_numpy(np.ndarray((n, v), dtype=np.float32, buffer=shm.buf)).copy_(x)
                futs = [
                    pool.submit(
                        _bulk_reference, (shm.name, (n, v), r, min(n, r + chunk), *(k[r : r + chunk] for k in keys[1:]))
                    )
                    for r in range(0, n, chunk)
                ]
                pending.append((futs, got, keys, shm))
            while pending:
                settle()
    finally:
        for buf in ring:
            buf.close()
            buf.unlink()
    table.rows["bulk"]["time_s"] = time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pp3.verify", description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="GPU sizes (default when CUDA is available)")
    size.add_argument("--quick", action="store_true", help="interpreter sizes (default without CUDA)")
    ap.add_argument("--bulk-rows", type=int, default=None, help="random rows at V=163840 (GPU default 10^6)")
    ap.add_argument("--bulk-seed", type=int, default=0, help="seed of the bulk rows (split 10^6 rows over calls)")
    ap.add_argument("--bulk-only", action="store_true", help="skip the suites, run only the bulk rows")
    ap.add_argument("--bulk-vocab", type=int, default=163840, help="vocabulary of the bulk rows")
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    ap.add_argument("--replay", metavar="FILE", help="re-run one dumped case and show both outputs")
    args = ap.parse_args(argv)

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
        case = load_case(args.replay)
        ref, got, mism = run_case(case, device)
        print(f"{case.name}: mismatching rows per field {mism}")
        for f in FIELDS:
            print(f"reference {f}: {getattr(ref, f).tolist()}\nkernel    {f}: {getattr(got, f).tolist()}")
        return 1 if any(mism.values()) else 0

    full = args.full or (device.type == "cuda" and not args.quick)
    print(
        f"pp3 verify: device={torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu (interpreter)'}, "
        f"sizes={'full' if full else 'quick'}",
        flush=True,
    )
    table = Table()
    first_failure: list[Path] = []
    all_cases = [] if args.bulk_only else list(suites(full))
    for i, (suite, case) in enumerate(all_cases):
        t0 = time.perf_counter()
        ref, got, mism = run_case(case, device)
        table.add(suite, case.rows, mism, time.perf_counter() - t0)
        if any(mism.values()) and not first_failure:
            first_failure.append(dump_failure(case, ref, got))
        if full or (i + 1) % 10 == 0 or i + 1 == len(all_cases):
            el = time.perf_counter() - t0
            print(f"  {i + 1}/{len(all_cases)} {case.name}: {el:.1f} s, {table.mismatches()} mismatches", flush=True)
    bulk_rows = args.bulk_rows if args.bulk_rows is not None else (1_000_000 if device.type == "cuda" else 0)
    if bulk_rows:
        bulk(table, bulk_rows, args.bulk_vocab, 1024, first_failure, device, args.bulk_seed)

    if args.json:
        print(json.dumps(table.rows, indent=1))
    print(table.render())
    if first_failure:
        print(
            f"MISMATCH: first case written to {first_failure[0]}; replay: python -m pp3.verify --replay "
            f"{first_failure[0]}"
        )
        return 1
    print("bitwise parity: 0 mismatches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
