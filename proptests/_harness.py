"""Running a Case through the kernels and the reference, and comparing the results with self-diagnosing equality."""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch

import pp3.kernels
import pp3.reference
from proptests.strategies import Case, runs_hex

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
ON_GPU = DEVICE.type == "cuda" and not INTERPRETED
# Every module sets ``pytestmark = MARKS``: without a GPU its tests carry the ``interpreter`` marker, and the
# interpreter's NumPy warnings on IEEE overflow / invalid operations (expected: d = -inf, z = -inf) are silenced.
MARKS = [] if ON_GPU else [
    pytest.mark.interpreter,
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
]

FIELDS = ("status", "token", "ids", "tickets")
DTYPES = {"status": np.int8, "token": np.int32, "ids": np.int32, "tickets": np.int32}
_TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class Out:
    """A selector result as NumPy arrays (SPEC.md §7)."""

    status: npt.NDArray[np.int8]  # [B]
    token: npt.NDArray[np.int32]  # [B]
    ids: npt.NDArray[np.int32]  # [B, 32]
    tickets: npt.NDArray[np.int32]  # [B, 32]

    @classmethod
    def of(cls, res: Any) -> Out:
        """From a pp3.reference.Proposal (NumPy) or a pp3.kernels.Proposal (torch, any device)."""
        conv = (lambda t: t.detach().cpu().numpy()) if isinstance(res.status, torch.Tensor) else np.asarray
        return cls(*(conv(getattr(res, f)) for f in FIELDS))

    def take(self, rows: Sequence[int]) -> Out:
        idx = list(rows)
        return Out(*(getattr(self, f)[idx] for f in FIELDS))


# ---------------------------------------------------------------------------------------------------- inputs


def logits_tensor(case: Case, device: torch.device = DEVICE) -> torch.Tensor:
    """The [B, V] logits as a torch tensor of the case's format, built from the same bits (no rounding)."""
    dtype = _TORCH[case.fmt.name]
    signed = case.bits.view(np.int32 if case.fmt.width == 32 else np.int16).copy()
    return torch.from_numpy(signed).view(dtype).to(device)


def reference_logits(case: Case) -> npt.NDArray[Any]:
    """What the reference takes: fp32 or fp16 arrays; bf16 widened from its bits (bf16_bits_to_float32)."""
    if case.fmt.name == "fp32":
        return case.bits.view(np.float32)
    if case.fmt.name == "fp16":
        return case.bits.view(np.float16)
    return pp3.reference.bf16_bits_to_float32(case.bits)


def _u64_tensor(vals: Sequence[int], device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.array(vals, dtype=np.uint64).view(np.int64)).to(device)


def kernel_row_args(case: Case, device: torch.device = DEVICE) -> tuple[Any, Any, Any, Any]:
    """(target_temperature, seed, round, position) in the form the case asks for: tensors or Python lists."""
    if case.tensor_args:
        temp = torch.from_numpy(case.temperature.copy()).to(device)
        return temp, _u64_tensor(case.seed, device), _u64_tensor(case.round, device), _u64_tensor(case.position, device)
    return case.temperature.tolist(), list(case.seed), list(case.round), list(case.position)


# ---------------------------------------------------------------------------------------------------- runs


def run_kernel(case: Case, *, device: torch.device = DEVICE) -> Out:
    res = pp3.kernels.propose(logits_tensor(case, device), *kernel_row_args(case, device), case.tau, tile=case.tile)
    return Out.of(res)


def run_kernel_sharded(case: Case, cuts: Sequence[int], *, device: torch.device = DEVICE) -> Out:
    """propose_sharded over contiguous shards [0, c_1), [c_1, c_2), ... [c_n, V) (column views, not copies)."""
    x = logits_tensor(case, device)
    edges = [0, *cuts, case.v]
    shards = [x[:, a:b] for a, b in itertools.pairwise(edges)]
    return Out.of(pp3.kernels.propose_sharded(shards, *kernel_row_args(case, device), case.tau, tile=case.tile))


def run_reference(case: Case) -> Out:
    res = pp3.reference.propose(
        reference_logits(case), case.temperature.copy(), np.array(case.seed, dtype=np.uint64),
        np.array(case.round, dtype=np.uint64), np.array(case.position, dtype=np.uint64), case.tau,
    )
    return Out.of(res)


# ---------------------------------------------------------------------------------------------------- comparison


def mismatched_rows(got: Out, want: Out) -> npt.NDArray[np.intp]:
    """Rows on which any of the four fields differs."""
    bad = (got.status != want.status) | (got.token != want.token)
    bad |= (got.ids != want.ids).any(axis=1) | (got.tickets != want.tickets).any(axis=1)
    return np.flatnonzero(bad)


def count_mismatches(got: Out, want: Out) -> int:
    """Differing elements over all four fields (0 iff the results are identical)."""
    return sum(int((getattr(got, f) != getattr(want, f)).sum()) for f in FIELDS)


def _slots(ids: npt.NDArray[np.int32], tickets: npt.NDArray[np.int32]) -> str:
    used = ids != -1
    pairs = " ".join(f"{int(i)}:{int(t)}" for i, t in zip(ids[used], tickets[used], strict=True))
    return f"[{pairs}]" + (f" +{int((~used).sum())} empty" if (~used).any() else "")


def report(case: Case, got: Out, want: Out, rows: Sequence[int], what: str = "kernel vs reference",
           limit: int = 4) -> str:
    """Mismatching rows with the inputs' hex bits and the seed/round/position to replay each one."""
    hexw = case.fmt.width // 4
    lines = [
        f"{what}: {len(rows)} of {case.b} rows differ ({case.fmt.name}, B={case.b}, V={case.v}, tile={case.tile}, "
        f"tau={case.tau!r} = 0x{int(np.float32(case.tau).view(np.uint32)):08x})"
    ]
    for r in list(rows)[:limit]:
        diff = [f for f in FIELDS if (getattr(got, f)[r] != getattr(want, f)[r]).any()]
        lines += [
            f"row {r}: {case.row_inputs(r)}; differing: {', '.join(diff)}",
            f"  logits ({case.fmt.name} bits, run-length): {runs_hex(case.bits[r], hexw)}",
            f"  got : status {int(got.status[r])} token {int(got.token[r])} slots id:tickets "
            f"{_slots(got.ids[r], got.tickets[r])}",
            f"  want: status {int(want.status[r])} token {int(want.token[r])} slots id:tickets "
            f"{_slots(want.ids[r], want.tickets[r])}",
            f"  replay: {case.take([r])!r}",
        ]
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more rows")
    return "\n".join(lines)


def assert_same(case: Case, got: Out, want: Out, what: str = "kernel vs reference") -> None:
    """Exact equality of all four fields (shapes and dtypes too); the failure message diagnoses the rows."""
    for f in FIELDS:
        g, w = getattr(got, f), getattr(want, f)
        assert g.shape == w.shape, f"{what}: {f} has shape {g.shape}, want {w.shape}"
        assert g.dtype == w.dtype == DTYPES[f], f"{what}: {f} has dtypes {g.dtype} / {w.dtype}, want {DTYPES[f]}"
    rows = mismatched_rows(got, want)
    if rows.size == 0:
        return
    msg = report(case, got, want, rows.tolist(), what)
    for f in FIELDS:
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f), err_msg=f"{f} differs\n{msg}")
