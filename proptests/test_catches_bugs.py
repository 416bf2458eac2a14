"""The comparison catches planted bugs: each mutant of the reference (a plausible misreading of SPEC.md, from
``pp3.testing.mutants``) must disagree with the kernels on a fixed small batch, and the unmutated reference must agree
with them exactly: the selector's and the verifier's.

The kernels run once (module fixture); each mutant only re-runs the NumPy reference, so this file is quick.
"""

from __future__ import annotations

import numpy as np
import pytest

from pp3.reference import Proposal, Verdict
from pp3.testing import mutants
from pp3.testing.call import U64_MAX, Call, make_case
from pp3.testing.compare import count_mismatches
from pp3.testing.golden import load_accept_golden

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


# The planted bugs this comparison must catch (pp3.testing.mutants).
MUTANTS = ("largest-remainder", "uniform-low-24-bits", "remainder-lowest-id", "signed-zeros-unequal",
           "ties-to-higher-id", "counter-swapped")


@pytest.fixture(scope="module")
def kernel() -> Proposal:
    return FIXED.run_kernel()


def test_unmutated_reference_agrees(kernel: Proposal) -> None:
    assert mismatches(kernel) == 0


@pytest.mark.parametrize("mutant", MUTANTS)
def test_mutant_is_caught(kernel: Proposal, mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(*mutants.mutant(mutant).target_and_replacement())
    assert mismatches(kernel) > 0, f"the comparison missed the planted bug {mutant}"


# ---------------------------------------------------------------------------------------------------- the verifier

# Golden calls of the verifier with sampled rows, rejections, the bonus and both Lemire rejection paths.
ACCEPT_FIXED = [c.call for c in load_accept_golden() if c.name in (
    "sampled_rounds", "greedy_drafts_sampled_target", "acceptance_word_rejected", "residual_word_rejected")]
ACCEPT_MUTANTS = ("domain-collision", "residual-unnormalized", "q-from-greedy")


@pytest.fixture(scope="module")
def verdicts() -> list[Verdict]:
    return [c.run_kernel() for c in ACCEPT_FIXED]


def test_unmutated_verifier_reference_agrees(verdicts: list[Verdict]) -> None:
    assert sum(count_mismatches(v, c.run_reference()) for v, c in zip(verdicts, ACCEPT_FIXED, strict=True)) == 0


@pytest.mark.parametrize("mutant", ACCEPT_MUTANTS)
def test_verifier_mutant_is_caught(verdicts: list[Verdict], mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(*mutants.mutant(mutant).target_and_replacement())
    bad = sum(count_mismatches(v, c.run_reference()) for v, c in zip(verdicts, ACCEPT_FIXED, strict=True))
    assert bad > 0, f"the comparison missed the planted bug {mutant}"
