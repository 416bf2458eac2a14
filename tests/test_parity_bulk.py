"""The bulk suite of ``make verify`` (the GPU's >= 10^6 random rows) must see a wrong kernel output.

The kernels are replaced by the reference plus a planted bug, so this runs in a second on the CPU; the real
kernels go through the same code on the GPU.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from torch import Tensor

torch = pytest.importorskip("torch")  # the reference-only runs (Python 3.12, 3.13) have no torch

import pp3.kernels  # noqa: E402
import pp3.reference as ref  # noqa: E402
from pp3.audit import parity  # noqa: E402


def _reference_kernel(flip_row: int | None) -> Any:
    def propose(x: Tensor, temp: Tensor, seed: Any, rnd: Any, pos: Any) -> Any:
        u64 = [t.numpy().view(np.uint64) for t in (seed, rnd, pos)]
        out = ref.propose(x.numpy(), temp.numpy(), *u64)
        token = out.token.copy()
        if flip_row is not None:
            token[flip_row] ^= 1  # the planted bug: one row's token is off
        return types.SimpleNamespace(
            status=torch.from_numpy(out.status),
            token=torch.from_numpy(token),
            ids=torch.from_numpy(out.ids),
            tickets=torch.from_numpy(out.tickets),
        )

    return propose


@pytest.mark.parametrize("flip_row", [None, 5])
def test_bulk_counts_rows_and_catches_a_wrong_token(
    flip_row: int | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(pp3.kernels, "propose", _reference_kernel(flip_row))
    table = parity.Table()
    failures = parity.Failures(tmp_path)
    parity.bulk(table, 24, 300, 16, failures, torch.device("cpu"), bulk_seed=3)
    assert table.rows["bulk"]["rows"] == 24
    if flip_row is None:
        assert table.mismatches() == 0 and failures.first is None
    else:
        assert table.rows["bulk"]["token"] == 2 and table.mismatches() == 2  # row 5 of each of the 2 batches
        assert failures.first is not None and failures.first.exists()
        dumped = np.load(failures.first)
        assert dumped["bits"].shape == (16, 300)
