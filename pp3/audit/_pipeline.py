"""The bulk parity runs' pipeline (``pp3.audit.parity``'s selector rows, ``pp3.audit.accept_bulk``'s verifier rows):
the kernels run a batch in this process, its inputs go once into a shared-memory buffer, and a spawned process pool
runs the NumPy reference on slices of it while the next batches run on the device.

``Pipeline`` keeps up to ``in_flight`` batches pending over a ring of ``in_flight + 1`` buffers, so a buffer is reused
only after its batch settled; ``settle(item, results)`` sees each batch's task results in submission order.
``read_rows`` is the workers' side. NumPy only at import.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing import shared_memory
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

WORKER_NICENESS = 5  # added to the workers' niceness (os.nice)
T = TypeVar("T")  # what the caller keeps of a pending batch
R = TypeVar("R")  # one task's result


class Pipeline(Generic[T, R]):
    """A process pool and a ring of shared buffers with batches in flight (``pipeline`` makes one)."""

    def __init__(self, pool: concurrent.futures.Executor, ring: list[shared_memory.SharedMemory], in_flight: int,
                 settle: Callable[[T, list[R]], None]) -> None:
        self.pool = pool
        self._ring = ring
        self._in_flight = in_flight
        self._settle = settle
        self._pending: list[tuple[T, list[concurrent.futures.Future[R]]]] = []
        self._next = 0

    @property
    def ring(self) -> tuple[shared_memory.SharedMemory, ...]:
        """The shared buffers, every one that ``buffer`` hands out."""
        return tuple(self._ring)

    def buffer(self) -> shared_memory.SharedMemory:
        """The buffer of the next batch, after settling the oldest pending one if ``in_flight`` are pending (it
        held this buffer)."""
        if len(self._pending) >= self._in_flight:
            self._settle_one()
        shm = self._ring[self._next % len(self._ring)]
        self._next += 1
        return shm

    def submit(self, item: T, tasks: Sequence[tuple[Callable[..., R], tuple[Any, ...]]]) -> None:
        """Submit a batch's reference tasks ``(fn, args)``, in order; ``item`` goes to ``settle`` with their results."""
        self._pending.append((item, [self.pool.submit(fn, *args) for fn, args in tasks]))

    def drain(self) -> None:
        """Settle every pending batch, oldest first."""
        while self._pending:
            self._settle_one()

    def _settle_one(self) -> None:
        item, futs = self._pending.pop(0)
        self._settle(item, [f.result() for f in futs])


@contextmanager
def pipeline(workers: int, size: int, settle: Callable[[T, list[R]], None], *, in_flight: int = 3,
             zero: bool = False) -> Iterator[Pipeline[T, R]]:
    """A ``Pipeline`` over ``workers`` spawned processes and ``in_flight + 1`` buffers of ``size`` bytes (``zero``:
    each written once at the start, so that no fresh page is first touched in a timed batch). On a normal exit the
    pending batches are settled; the buffers are unlinked however it ends."""
    ring = [shared_memory.SharedMemory(create=True, size=size) for _ in range(in_flight + 1)]
    try:
        if zero:
            for buf in ring:
                np.ndarray((size,), dtype=np.uint8, buffer=buf.buf).fill(0)
        ctx = multiprocessing.get_context("spawn")
        # The workers yield to this process, which keeps the device fed: where they outnumber the cores, a batch
        # waiting on this process for its inputs would idle them all.
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx, initializer=os.nice,
                                                    initargs=(WORKER_NICENESS,)) as pool:
            pipe: Pipeline[T, R] = Pipeline(pool, ring, in_flight, settle)
            yield pipe
            pipe.drain()
    finally:
        for buf in ring:
            buf.close()
            buf.unlink()


def read_rows(name: str, shape: tuple[int, ...], dtype: npt.DTypeLike, lo: int, hi: int) -> npt.NDArray[Any]:
    """Workers: a copy of rows [lo, hi) of the array ``shape``/``dtype`` in the shared buffer ``name`` (no view may
    outlive the buffer's close)."""
    try:
        shm = shared_memory.SharedMemory(name=name, track=False)  # type: ignore[call-arg]  # Python >= 3.13
    except TypeError:  # older Pythons register the attach with the parent's tracker: a no-op (a set), kept as is
        shm = shared_memory.SharedMemory(name=name)
    try:
        return np.ndarray(shape, dtype=dtype, buffer=shm.buf)[lo:hi].copy()
    finally:
        shm.close()
