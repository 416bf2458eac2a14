"""The golden and clause tests catch planted bugs: each mutant of the reference (monkeypatched) must make the golden
comparison report mismatching rows, and must fail at least one clause test."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tests import test_clauses
from tools.golden_io import GOLDEN_FILE, count_mismatching_rows, load_golden
from tools.mutants import draw_off_by_one, largest_remainder, left_fold_sum, remainder_to_lowest_id, uniform_low_bits

tickets_mod = importlib.import_module("pp3.reference.tickets")
philox_mod = importlib.import_module("pp3.reference.philox")
CASES = load_golden(GOLDEN_FILE)
I64 = npt.NDArray[np.int64]


def strided8_sum(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """S in numpy.sum's order for 32 values: 8 strided accumulators, then a tree over them."""
    r = [left_fold_sum(w[..., k::8]) for k in range(8)]
    return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))


MUTANTS: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "largest_remainder": (tickets_mod, "allocate", largest_remainder),
    "remainder_to_lowest_id_slot": (tickets_mod, "allocate", remainder_to_lowest_id),
    "u_from_low_24_bits": (philox_mod, "proposal_uniform", uniform_low_bits),
    "draw_le_off_by_one": (tickets_mod, "draw_slot", draw_off_by_one),
    "left_fold_sum": (tickets_mod, "pairwise_sum", left_fold_sum),
    "strided8_sum": (tickets_mod, "pairwise_sum", strided8_sum),
}

# The clause tests each mutant must fail (plain calls of test functions of the clause module).
CLAUSE_TESTS: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
    "largest_remainder": [("test_remainder_goes_to_rank0_slot", ()),
                          ("test_propose_tickets_are_floor_counts_plus_remainder_at_rank0", ()),
                          ("test_against_independent_reading_of_the_spec", ())],
    "remainder_to_lowest_id_slot": [("test_remainder_goes_to_rank0_slot", ()),
                                    ("test_against_independent_reading_of_the_spec", ())],
    "u_from_low_24_bits": [("test_token_is_the_slot_whose_interval_contains_u", ()),
                           ("test_against_independent_reading_of_the_spec", ())],
    "draw_le_off_by_one": [("test_u_on_an_interval_boundary_belongs_to_the_next_slot", ())],
    "left_fold_sum": [("test_sum_is_the_pairwise_tree", ("vs_left_fold",)),
                      ("test_sum_is_the_pairwise_tree", ("vs_numpy_sum",))],
    "strided8_sum": [("test_sum_is_the_pairwise_tree", ("vs_numpy_sum",))],
}


def test_unmutated_reference_passes_golden() -> None:
    assert count_mismatching_rows(CASES) == 0


@pytest.mark.parametrize("name", list(MUTANTS))
def test_golden_detects_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, attr, fake = MUTANTS[name]
    monkeypatch.setattr(module, attr, fake)
    report: list[str] = []
    bad = count_mismatching_rows(CASES, report=report)
    rows = sum(c.B for c in CASES)
    print(f"mutant {name}: {bad} of {rows} golden rows mismatch")
    assert bad > 0, f"the golden vectors do not detect the mutant {name}"
    assert report[0].startswith("case "), report[0]


@pytest.mark.parametrize("name", list(MUTANTS))
def test_clause_tests_detect_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, attr, fake = MUTANTS[name]
    monkeypatch.setattr(module, attr, fake)
    caught = []
    for test_name, args in CLAUSE_TESTS[name]:
        try:
            getattr(test_clauses, test_name)(*args)
        except AssertionError:
            caught.append(f"{test_name}{list(args) or ''}")
    print(f"mutant {name}: caught by {caught}")
    assert caught, f"no clause test in {CLAUSE_TESTS[name]} detects the mutant {name}"
