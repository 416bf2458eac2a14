"""Rank processes of the multi-GPU benchmarks, without torchrun: ``spawn`` starts ``args.world`` ranks
(``torch.multiprocessing``, spawn) that meet over TCP on 127.0.0.1 and talk NCCL, one GPU each (gloo on the CPU with
``args.cpu``), runs the given steps in every rank, and kills the ranks still alive after ``args.timeout`` seconds.

NVLink multicast stays off: ``NO_MULTICAST`` is set in the parent's environment (every rank inherits it) and again in
each rank before NCCL starts. Each rank saves its results (``Rank.res``, stamped) to ``OUTDIR/NAME_rankR.json`` after
every step, stops at the first failing step (its peers may be waiting in a collective of that step), and leaves
through ``os._exit``, with a watchdog in case ``destroy_process_group`` hangs (it has, on the H200 pair).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pp3.testing.stamp import environment

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PG_TIMEOUT_S = 120  # a rank left alone in a collective fails after this instead of hanging
EXIT_WATCHDOG_S = 20.0


def no_multicast() -> None:
    os.environ.update(NO_MULTICAST)


class Rank:
    """One rank: its device, its results (saved after every step) and a log with its rank in front."""

    def __init__(self, name: str, rank: int, world: int, args: argparse.Namespace, outdir: Path) -> None:
        import torch

        self.rank, self.world, self.args = rank, world, args
        self.path = outdir / f"{name}_rank{rank}.json"
        self.cuda = not args.cpu
        self.dev = torch.device("cuda", rank) if self.cuda else torch.device("cpu")
        self.res: dict[str, Any] = {"rank": rank, "errors": []}

    def log(self, msg: str) -> None:
        print(f"[rank {self.rank} {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def save(self) -> None:
        self.path.write_text(json.dumps(self.res, indent=1, default=str))

    def stamp(self) -> dict[str, Any]:
        """The environment stamp, and next to it the world size, NCCL's version and the communication settings."""
        import torch

        nccl = torch.cuda.nccl.version() if self.cuda else None  # type: ignore[no-untyped-call]
        return {
            "environment": environment(),
            "world": self.world,
            "nccl": None if nccl is None else ".".join(str(p) for p in nccl),
            "env": {k: os.environ.get(k) for k in (*NO_MULTICAST, "NCCL_DEBUG", "NCCL_PROTO", "NCCL_ALGO")},
        }

    def sync(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.synchronize(self.dev)

    def barrier(self) -> None:
        import torch.distributed as dist

        self.sync()
        if self.cuda:
            dist.barrier(device_ids=[self.rank])
        else:
            dist.barrier()

    def gather(self, inp: Any) -> Any:
        """all_gather of a 1-D tensor into [W, n] (the form NCCL and gloo both take)."""
        import torch
        import torch.distributed as dist

        out = torch.empty(self.world * inp.numel(), dtype=inp.dtype, device=inp.device)
        (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(out, inp)
        return out.view(self.world, inp.numel())


Step = Callable[[Rank], None]


def _worker(rank: int, name: str, world: int, port: int, args: argparse.Namespace, outdir: str,
            steps: Sequence[tuple[str, Step]]) -> None:
    no_multicast()
    code = 0
    ctx = Rank(name, rank, world, args, Path(outdir))
    try:
        import torch
        import torch.distributed as dist

        if ctx.cuda:
            torch.cuda.set_device(ctx.dev)
        device_kw: dict[str, Any] = {"device_id": ctx.dev} if ctx.cuda else {}
        dist.init_process_group(
            "nccl" if ctx.cuda else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=PG_TIMEOUT_S),
            **device_kw,
        )
        ctx.res |= ctx.stamp()
        ctx.save()
        for step_name, step in steps:
            t0 = time.perf_counter()
            ctx.log(f"{step_name} ...")
            try:
                step(ctx)
            except Exception:
                ctx.res["errors"].append({"step": step_name, "traceback": traceback.format_exc()})
                ctx.log(f"{step_name} FAILED:\n{traceback.format_exc()}")
                code = 1
                break
            ctx.res.setdefault("seconds", {})[step_name] = time.perf_counter() - t0
            ctx.save()
        if code == 0:
            ctx.barrier()
            threading.Timer(EXIT_WATCHDOG_S, os._exit, (code,)).start()
            dist.destroy_process_group()
    except BaseException:
        ctx.res["errors"].append({"step": "setup", "traceback": traceback.format_exc()})
        ctx.log(f"FAILED:\n{traceback.format_exc()}")
        code = 1
    finally:
        ctx.save()
        ctx.log(f"exit {code}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(name: str, steps: Sequence[tuple[str, Step]], args: argparse.Namespace, outdir: Path) -> str:
    """Run ``steps`` in ``args.world`` ranks; "ok", or why not. Each rank's results: ``load(name, outdir, world)``.

    ``steps`` are module-level functions (the spawned ranks import them by name)."""
    import torch.multiprocessing as tmp

    no_multicast()
    for r in range(args.world):
        (outdir / f"{name}_rank{r}.json").unlink(missing_ok=True)
    ctx = tmp.start_processes(  # type: ignore[attr-defined, no-untyped-call]
        _worker,
        args=(name, args.world, _free_port(), args, str(outdir), tuple(steps)),
        nprocs=args.world,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + args.timeout
    status = "ok"
    try:
        while not ctx.join(timeout=max(0.1, deadline - time.monotonic()), grace_period=10.0):
            if time.monotonic() >= deadline:
                status = f"timeout: ranks still alive after {args.timeout:.0f} s were killed"
                break
    except Exception as e:  # a rank exited non-zero; its traceback is in its JSON
        status = f"a rank failed: {e}"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
    return status


def load(name: str, outdir: Path, world: int) -> list[dict[str, Any]]:
    """Every rank's saved results, in rank order (a rank that wrote nothing: one error saying so)."""
    ranks = []
    for r in range(world):
        p = outdir / f"{name}_rank{r}.json"
        missing = {"errors": [{"step": "start", "traceback": f"{p} was not written"}]}
        ranks.append(json.loads(p.read_text()) if p.exists() else missing)
    return ranks
