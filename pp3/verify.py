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


_SHM: dict[str, Any] = {}


def _bulk_attach(name: str, shape: tuple[int, int, int]) -> None:
    from multiprocessing import shared_memory

    shm = shared_memory.SharedMemory(name=name)
    _SHM["shm"] = shm
    _SHM["x"] = np.ndarray(shape, dtype=np.float32, buffer=shm.buf)


def _bulk_reference(args: tuple[Any, ...]) -> Proposal:
    slot, r0, r1, temp, seed, rnd, pos = args
    from pp3.reference import propose

    return propose(_SHM["x"][slot, r0:r1], temp, seed, rnd, pos)


def _gpu_batch(gen: Any, b: int, v: int) -> tuple[Any, ...]:
    """Random rows on the GPU: mostly Gaussian, with ties, masks, NaN, +inf and all-masked rows mixed in."""
    import torch

    dev = "cuda"
    x = torch.randn((b, v), generator=gen, device=dev) * 4.0
    kind = torch.randint(0, 16, (b, 1), generator=gen, device=dev)
    x = torch.where(kind == 0, torch.round(x), x)  # ties
    mask = torch.rand((b, v), generator=gen, device=dev) < 0.999
    x = torch.where((kind == 1) & mask, float("-inf"), x)  # few finite entries
    x = torch.where(kind == 2, float("-inf"), x)  # zero mass
    col = torch.randint(0, v, (b, 1), generator=gen, device=dev)
    hit = torch.arange(v, device=dev)[None, :] == col
    x = torch.where((kind == 3) & hit, float("nan"), x)
    x = torch.where((kind == 4) & hit, float("inf"), x)
    pool = torch.tensor([1.0, 1.0, 0.5, 2.0, 0.0, -0.0, float("inf"), float("nan"), -1.0], device=dev)
    temp = pool[torch.randint(0, pool.numel(), (b,), generator=gen, device=dev)]
    keys = [
        torch.randint(-(1 << 63), (1 << 63) - 1, (b,), generator=gen, device=dev, dtype=torch.int64) for _ in range(3)
    ]
    return (x.contiguous(), temp, *keys)


def bulk(table: Table, n_rows: int, v: int, batch: int, first_failure: list[Path]) -> None:
    """The ≥ 10^6-row GPU suite: rows generated on the GPU, the reference in a process pool over shared memory."""
    import concurrent.futures
    import multiprocessing
    from multiprocessing import shared_memory

    import torch

    from pp3.kernels import propose as k_propose

    slots = 3
    shape = (slots, batch, v)
    shm = shared_memory.SharedMemory(create=True, size=int(np.prod(shape)) * 4)
    views = [np.ndarray(shape, dtype=np.float32, buffer=shm.buf)]  # dropped before the segment closes
    workers = max(1, (os.cpu_count() or 2) - 1)
    chunk = max(1, batch // workers)
    gen = torch.Generator(device="cuda").manual_seed(20261130)
    pending: list[tuple[int, list[Any], Proposal, tuple[np.ndarray[Any, Any], ...]]] = []
    t0 = time.perf_counter()
    done = 0

    def settle() -> None:
        nonlocal done
        slot, futs, got, keys = pending.pop(0)
        parts = [f.result() for f in futs]
        ref = Proposal(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))
        mism = compare(ref, got)
        table.add("bulk", batch, mism, 0.0)
        if any(mism.values()) and not first_failure:
            temp, seed, rnd, pos = keys
            case = Case("bulk", "float32", views[0][slot].copy(), temp, seed, rnd, pos)
            first_failure.append(dump_failure(case, ref, got))
        done += batch
        if done % (batch * 200) == 0 or done >= n_rows:
            el = time.perf_counter() - t0
            print(f"  bulk: {done}/{n_rows} rows, {table.mismatches()} mismatches, {el:.0f} s", flush=True)

    ctx = multiprocessing.get_context("spawn")
    try:
        with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_bulk_attach, initargs=(shm.name, shape)
        ) as pool:
            for it in range((n_rows + batch - 1) // batch):
                slot = it % slots
                x, temp, seed, rnd, pos = _gpu_batch(gen, batch, v)
                out = k_propose(x, temp, seed, rnd, pos)
                got = Proposal(*(getattr(out, f).cpu().numpy() for f in FIELDS))
                views[0][slot] = x.cpu().numpy()
                keys = (
                    temp.cpu().numpy(),
                    seed.cpu().numpy().view(np.uint64),
                    rnd.cpu().numpy().view(np.uint64),
                    pos.cpu().numpy().view(np.uint64),
                )
                futs = [
                    pool.submit(
                        _bulk_reference, (slot, r0, min(batch, r0 + chunk), *(k[r0 : r0 + chunk] for k in keys))
                    )
                    for r0 in range(0, batch, chunk)
                ]
                pending.append((slot, futs, got, keys))
                if len(pending) >= slots - 1:
                    settle()
            while pending:
                settle()
    finally:
        views.clear()
        shm.close()
        shm.unlink()
    table.rows["bulk"]["time_s"] = time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pp3.verify", description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="GPU sizes (default when CUDA is available)")
    size.add_argument("--quick", action="store_true", help="interpreter sizes (default without CUDA)")
    ap.add_argument("--bulk-rows", type=int, default=None, help="random rows at V=163840 (GPU default 10^6)")
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
    all_cases = list(suites(full))
    for i, (suite, case) in enumerate(all_cases):
        t0 = time.perf_counter()
        ref, got, mism = run_case(case, device)
        table.add(suite, case.rows, mism, time.perf_counter() - t0)
        if any(mism.values()) and not first_failure:
            first_failure.append(dump_failure(case, ref, got))
        if (i + 1) % 10 == 0 or i + 1 == len(all_cases):
            print(f"  {i + 1}/{len(all_cases)} cases, {table.mismatches()} mismatches", flush=True)
    bulk_rows = args.bulk_rows if args.bulk_rows is not None else (1_000_000 if device.type == "cuda" else 0)
    if bulk_rows:
        bulk(table, bulk_rows, 163840, 256, first_failure)

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
