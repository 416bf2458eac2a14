"""The suites of ``pp3 verify`` (``make verify``): the selector's bulk rows (the GPU's >= 10^6 random rows) must see a
wrong kernel output, and the verifier's calls cover what SPEC.md §11 distinguishes.

For the bulk rows the kernels are replaced by the reference plus a planted bug, so this runs in a second on the CPU;
the real kernels go through the same code on the GPU. The coverage checks run the reference only.
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
from pp3.audit import accept_bulk, parity, suites  # noqa: E402


def _reference_kernel(flip_row: int | None) -> Any:
    def propose(x: Tensor, temp: Tensor, seed: Any, rnd: Any, pos: Any, tau: float = ref.DEFAULT_TAU,
                tile: int | None = None, launch: Any = None) -> Any:
        u64 = [t.numpy().view(np.uint64) for t in (seed, rnd, pos)]
        out = ref.propose(x.numpy(), temp.numpy(), u64[0], u64[1], u64[2], tau)
        token = out.token.copy()
        if flip_row is not None and (launch is None or launch.selector == "segments"):
            token[flip_row] ^= 1  # the planted bug: one row's token is off (propose's segment selector only)
        return types.SimpleNamespace(
            status=torch.from_numpy(out.status),
            token=torch.from_numpy(token),
            ids=torch.from_numpy(out.ids),
            tickets=torch.from_numpy(out.tickets),
        )

    return propose


def _reference_greedy(shards: list[Tensor], **_: Any) -> Any:
    """The greedy selector (either way of ``LaunchConfig.greedy``) as the reference's T0 rows."""
    x = torch.cat(shards, dim=1)
    keys = torch.zeros(x.shape[0], dtype=torch.int64)
    return _reference_kernel(None)(x, torch.zeros(x.shape[0]), keys, keys, keys)


@pytest.mark.parametrize("flip_row", [None, 5])
def test_bulk_counts_rows_and_catches_a_wrong_token(
    flip_row: int | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bulk rows through pp3's kernels as the seam calls them (``pp3.harness.builtin``), here the reference
    with a planted bug in propose's segment selector: its suite alone fails, and its first batch is written."""
    monkeypatch.setattr(pp3.kernels, "propose", _reference_kernel(flip_row))
    monkeypatch.setattr(pp3.kernels, "greedy_sharded", _reference_greedy)
    part = parity.Part("selector", tmp_path)
    parity.bulk(part, 24, 300, 16, torch.device("cpu"), bulk_seed=3)
    table = part.table
    assert table.rows["bulk"]["rows"] == 24
    if flip_row is None:
        assert table.mismatches() == 0 and part.failures.first is None
    else:
        assert table.rows["bulk"]["token"] == 2 and table.mismatches() == 2  # row 5 of each of the 2 batches
        assert table.rows["bulk tiles"]["token"] == 0 and table.rows["bulk greedy"]["token"] == 0
        assert table.rows["bulk rescan"]["token"] == 0
        assert part.failures.first is not None and part.failures.first.exists()
        dumped = np.load(part.failures.first)
        assert dumped["bits"].shape == (16, 300) and str(dumped["failure"]) == "mismatch"


@pytest.mark.parametrize("size", ["quick", "standard", "full"])
def test_the_verifier_calls_of_every_size_cover_each_clause(size: str) -> None:
    """The named calls alone (reference outputs): every status 0-5, OK rows at T0 and sampled, depths 1-8, every
    format, tiles, accepted counts from 0 to D, keys at the uint64 edges; the request rows cover depths 1-8 in every
    format at the standard and full sizes."""
    edge_sizes, plan_sizes = suites.ACCEPT_SIZES[size]
    calls = list(suites.accept_fixed()) + [c for v, tiles in edge_sizes for c in suites.accept_edges(v, tiles)]
    statuses: set[int] = set()
    ok_classes: set[str] = set()
    full_accepts = zero_accepts = 0
    for c in calls:
        out = c.run_reference()
        statuses |= set(out.status.tolist())
        ok = out.status == 0
        ok_classes |= {"t0" if t == 0 else "sampled" for t in c.temperature[ok]}
        full_accepts += int((ok & (out.accepted == c.depth)).sum())
        zero_accepts += int((ok & (out.accepted == 0)).sum())
    assert statuses == set(range(6)) and ok_classes == {"t0", "sampled"}
    assert full_accepts > 0 and zero_accepts > 0
    assert {c.depth for c in calls} == set(range(1, 9)) and {c.fmt.name for c in calls} == {"fp32", "fp16", "bf16"}
    assert len({c.tile for c in calls}) >= 2
    keys = np.concatenate([np.concatenate([c.seed, c.round, c.position]) for c in calls])
    assert {0, 2**63, 2**64 - 1} <= set(keys.tolist())
    layouts = {accept_bulk.batch_layout(k) for _, batches, _ in plan_sizes for k in range(batches)}
    if size != "quick":
        assert layouts == {(d, f) for d in range(1, 9) for f in ("fp32", "fp16", "bf16")}


def test_the_boundary_case_draws_exactly_on_a_slot_boundary() -> None:
    """suites.boundary_case: u equals an odd cumulative ticket count, so the catalogue's off-by-one draw and its
    23-bit uniform (which the random suites miss: each changes a row with probability ~2^-19) change its token."""
    from pp3.reference.philox import proposal_uniform
    from pp3.testing import mutants
    from pp3.testing.compare import row_mismatch

    call = suites.boundary_case(32)
    want = call.run_reference()
    u = proposal_uniform(*call.seeds())
    cum = np.cumsum(want.tickets[0].astype(np.int64))
    assert int(u[0]) == suites.BOUNDARY_U and suites.BOUNDARY_U in cum.tolist() and suites.BOUNDARY_U % 2 == 1
    for name in ("draw-off-by-one", "uniform-23-bits"):
        with mutants.patched(name):
            assert row_mismatch(call.run_reference(), want).all(), name
