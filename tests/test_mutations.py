"""The golden and clause tests catch planted bugs: each mutant of the reference (monkeypatched) must make the golden
comparison report mismatching rows, and must fail at least one clause test."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from pp3.reference import TICKETS
from tests import test_clauses
from tools.golden_io import GOLDEN_FILE, count_mismatching_rows, load_golden

tickets_mod = importlib.import_module("pp3.reference.tickets")
philox_mod = importlib.import_module("pp3.reference.philox")
CASES = load_golden(GOLDEN_FILE)
I64 = npt.NDArray[np.int64]


def largest_remainder(w: npt.NDArray[np.float64], rank0_slot: I64) -> I64:
    """Hamilton: floor counts, then one ticket each to the R slots with the largest fractional parts of
    w * 2^24 / S (ties to the lower slot) — the alternative SPEC.md §5.2 rejects."""
    s = tickets_mod.pairwise_sum(w)
    q = (w * float(TICKETS)) / s[:, None]
    c = np.floor(q).astype(np.int64)
    frac = q - np.floor(q)
    rem = TICKETS - c.sum(axis=1)
    for r in range(c.shape[0]):
        order = np.argsort(-frac[r], kind="stable")  # largest fraction first, lower slot first among equals
        c[r, order[: rem[r]]] += 1
    return c


def remainder_to_slot0(w: npt.NDArray[np.float64], rank0_slot: I64) -> I64:
    """Floor-first, but the remainder goes to the lowest-ID slot (slot 0) instead of the rank-0 slot."""
    c = tickets_mod.floor_counts(w)
    c[:, 0] += TICKETS - c.sum(axis=1)
    return c


def uniform_low_bits(seed: Any, round_: Any, position: Any) -> Any:
    """u from the low 24 bits of word 0 instead of the top 24."""
    return philox_mod.block(seed, round_, position, philox_mod.DOMAIN_PROPOSAL)[:, 0] & np.uint64(0xFFFFFF)


def draw_with_le(tickets: I64, u: npt.NDArray[np.uint64]) -> I64:
    """Off by one: the first slot with u <= C_j (instead of u < C_j)."""
    cum = np.cumsum(tickets, axis=-1)
    return np.asarray((cum < u.astype(np.int64)[:, None]).sum(axis=-1), dtype=np.int64)


def left_fold_sum(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """S as a left-to-right sum over the slots instead of the pairwise tree."""
    s = np.zeros(w.shape[:-1], dtype=np.float64)
    for j in range(w.shape[-1]):
        s = s + w[..., j]
    return s


def strided8_sum(w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """S in numpy.sum's order for 32 values: 8 strided accumulators, then a tree over them."""
    r = [left_fold_sum(w[..., k::8]) for k in range(8)]
    return ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))


MUTANTS: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "largest_remainder": (tickets_mod, "allocate", largest_remainder),
    "remainder_to_lowest_id_slot": (tickets_mod, "allocate", remainder_to_slot0),
    "u_from_low_24_bits": (philox_mod, "proposal_uniform", uniform_low_bits),
    "draw_le_off_by_one": (tickets_mod, "draw_slot", draw_with_le),
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
