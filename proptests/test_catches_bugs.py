"""The comparison catches planted bugs: each mutant of the reference (a plausible misreading of SPEC.md) must
disagree with the kernels on a fixed small batch, and the unmutated reference must agree with them exactly.

The kernels run once (module fixture); each mutant only re-runs the NumPy reference, so this file is quick.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pp3.reference import Proposal, order, philox, tickets
from pp3.testing.call import U64_MAX, Call, make_case
from pp3.testing.compare import count_mismatches
from pp3.testing.mutants import largest_remainder, remainder_to_lowest_id, uniform_low_bits

pytestmark = [
    pytest.mark.interpreter,  # without a GPU, the kernels run through TRITON_INTERPRET=1
    # the interpreter's NumPy warnings on IEEE overflow / invalid operations (expected: d = -inf, z = -inf)
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
]

_RNG = np.random.default_rng(20241130)
_RANDOM_ROWS = [(_RNG.standard_normal(50) * 2).astype(np.float32).tolist() for _ in range(4)]
# Four random sampled rows (32-member supports, max anywhere), a T0 row whose maximum is -0.0 tied with +0.0 at
# ID 1, and a sampled row of 40 equal values (ties across the K boundary).
FIXED: Call = make_case(
    "fp32",
    [*_RANDOM_ROWS, [-0.0, 0.0, *([-1.0] * 48)], [1.0] * 40 + [0.0] * 10],
    temperature=[1.0, 0.7, 2.0, 1.0, 0.0, 1.0],
    seed=[1, 2, U64_MAX, 1 << 63, 5, 6],
    round=[10, 0, 7, U64_MAX, 3, 2],
    position=[20, 1, 9, 0, 4, 8],
    tile=64,
)


def mismatches(kernel: Proposal) -> int:
    """Differing elements between the kernels' result and the (possibly mutated) reference's on FIXED."""
    return count_mismatches(kernel, FIXED.run_reference())


# ---------------------------------------------------------------------------------------------------- mutants

_ALLOCATE = tickets.allocate
_BLOCK = philox.block


def _signed_zeros_unequal(x: npt.NDArray[np.float32]) -> npt.NDArray[np.uint32]:
    """okey without replacing -0.0 by +0.0, so +0.0 outranks -0.0 (§4.1)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return np.where(bits & np.uint32(0x80000000), bits ^ np.uint32(0xFFFFFFFF), bits | np.uint32(0x80000000))


def _ties_to_higher_id(x: npt.NDArray[np.float32], ids: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.uint64]:
    """Equal values ordered by ID descending instead of ascending (§4.1)."""
    return (order.order_value_key(x).astype(np.uint64) << np.uint64(32)) | np.asarray(ids).astype(np.uint64)


def _counter_swapped(seed: Any, round_: Any, position: Any, domain: int) -> npt.NDArray[np.uint64]:
    """Philox counter (position, round, 0, 0) instead of (round, position, 0, 0) (§8 keying)."""
    return _BLOCK(seed, position, round_, domain)


MUTANTS: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "largest_remainder_allocation": (tickets, "allocate", largest_remainder),
    "uniform_from_low_24_bits": (philox, "proposal_uniform", uniform_low_bits),
    "remainder_to_lowest_id_slot": (tickets, "allocate", remainder_to_lowest_id),
    "signed_zeros_unequal": (order, "order_value_key", _signed_zeros_unequal),
    "ties_to_higher_id": (order, "order_key", _ties_to_higher_id),
    "philox_counter_swapped": (philox, "block", _counter_swapped),
}


@pytest.fixture(scope="module")
def kernel() -> Proposal:
    return FIXED.run_kernel()


def test_unmutated_reference_agrees(kernel: Proposal) -> None:
    assert mismatches(kernel) == 0


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutant_is_caught(kernel: Proposal, mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, name, replacement = MUTANTS[mutant]
    monkeypatch.setattr(module, name, replacement)
    assert mismatches(kernel) > 0, f"the comparison missed the planted bug {mutant}"
