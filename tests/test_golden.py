"""The golden vectors (pp3/conformance): the reference and the kernels reproduce every row, the comparison catches
every planted bug of the selector's ticket, sum and draw clauses, and each file is exactly what tools/gen_golden.py
builds (no hand edits)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pp3.reference import (
    ACCEPT_SEMANTIC_ID,
    ACCEPT_TREE_SEMANTIC_ID,
    DOMAIN_ACCEPT,
    SEMANTIC_ID,
    TICKETS,
    TREE_DRAW_SEMANTIC_ID,
    WALK_TREE_SEMANTIC_ID,
    AcceptStatus,
    K,
    Status,
    TreeStatus,
    as_tree,
)
from pp3.testing import mutants
from pp3.testing.compare import first_lines, row_mismatch
from pp3.testing.golden import (
    ACCEPT_GOLDEN_FILE,
    ACCEPT_TREE_GOLDEN_FILE,
    GOLDEN_FILE,
    TREE_DRAW_GOLDEN_FILE,
    WALK_TREE_GOLDEN_FILE,
    TreeDrawCase,
    accept_case_from_json,
    accept_case_to_json,
    case_from_json,
    case_to_json,
    count_mismatching_rows,
    load_accept_golden,
    load_golden,
    load_tree_draw_golden,
    load_tree_verify_golden,
    tree_draw_case_from_json,
    tree_draw_case_to_json,
    tree_verify_case_from_json,
    tree_verify_case_to_json,
)
from tools import gen_golden

CASES = load_golden(GOLDEN_FILE)
# The planted bugs the selector's golden vectors must catch (pp3.testing.mutants).
GOLDEN_CATCHES = ("largest-remainder", "remainder-lowest-id", "uniform-low-24-bits", "draw-off-by-one",
                  "left-fold-sum", "strided8-sum")


def test_file_is_named_for_the_semantic_id() -> None:
    assert GOLDEN_FILE.name == f"{SEMANTIC_ID}.jsonl"


def test_reference_reproduces_every_golden_row() -> None:
    report: list[str] = []
    bad = count_mismatching_rows(CASES, report=report)
    rows = sum(c.B for c in CASES)
    assert bad == 0, f"{bad} of {rows} golden rows differ:\n" + first_lines(report, 8)


def test_regenerating_reproduces_the_file_byte_for_byte() -> None:
    built = gen_golden.build()
    on_disk = GOLDEN_FILE.read_text()
    if built != on_disk:
        old, new = on_disk.splitlines(), built.splitlines()
        changed = [json.loads(n)["name"] for o, n in zip(old, new, strict=False) if o != n]
        at = next(i for i, (a, b) in enumerate(zip(on_disk, built, strict=False)) if a != b) if changed else -1
        pytest.fail(f"golden file ({len(old)} lines) differs from tools/gen_golden.py's output ({len(new)} lines): "
                    f"changed cases {changed[:8]}, first differing character {at}. Never edit it by hand; "
                    "regenerate (make golden) only together with a new semantic ID.")


def test_file_is_well_formed_and_covers_the_clauses() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    assert 30 <= len(CASES) <= 60 and GOLDEN_FILE.stat().st_size < 2 * 1024 * 1024
    statuses = {int(s) for c in CASES for s in c.expected.status}
    assert statuses == {int(s) for s in Status}, f"statuses covered: {sorted(statuses)}"
    assert {c.dtype for c in CASES} == {"float32", "float16", "bfloat16"}
    assert {1, 31, 32, 33, 1000, 4097, 32000} <= {c.V for c in CASES}
    for c in CASES:
        assert c.reason and "\n" not in c.reason
        for r in range(c.B):
            t, ids = c.expected.tickets[r], c.expected.ids[r]
            assert ids.shape == (K,) and t.shape == (K,)
            if c.expected.status[r] == Status.OK:
                assert int(t.sum()) == TICKETS, f"{c.name} row {r}: tickets sum to {int(t.sum())}"
            else:
                assert int(c.expected.token[r]) == -1 and (ids == -1).all() and (t == 0).all()


def test_json_round_trip_is_exact() -> None:
    for line in GOLDEN_FILE.read_text().splitlines():
        assert case_to_json(case_from_json(line)) == line


def test_unmutated_reference_passes_golden() -> None:
    assert count_mismatching_rows(CASES) == 0


@pytest.mark.parametrize("name", GOLDEN_CATCHES)
def test_golden_detects_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(*mutants.mutant(name).target_and_replacement())
    report: list[str] = []
    bad = count_mismatching_rows(CASES, report=report)
    rows = sum(c.B for c in CASES)
    print(f"mutant {name}: {bad} of {rows} golden rows mismatch")
    assert bad > 0, f"the golden vectors do not detect the mutant {name}"
    assert report[0].startswith("case "), report[0]


# --- the verifier's golden vectors (§11) ---------------------------------------------------------------------------

ACCEPT_CASES = load_accept_golden()


def test_accept_file_is_named_for_the_semantic_id() -> None:
    assert ACCEPT_GOLDEN_FILE.name == f"{ACCEPT_SEMANTIC_ID}.jsonl"


def test_reference_reproduces_every_accept_golden_row() -> None:
    bad = [f"{c.name} rows {np.flatnonzero(row_mismatch(c.call.run_reference(), c.expected)).tolist()}"
           for c in ACCEPT_CASES if row_mismatch(c.call.run_reference(), c.expected).any()]
    assert not bad, "accept golden rows differ: " + "; ".join(bad)


def test_accept_regenerating_reproduces_the_file_byte_for_byte() -> None:
    assert gen_golden.build_accept() == ACCEPT_GOLDEN_FILE.read_text(), (
        "accept golden file differs from tools/gen_golden.py's output: never edit it by hand; regenerate (make golden) "
        "only together with a new semantic ID")


def test_accept_file_covers_the_clauses() -> None:
    names = [c.name for c in ACCEPT_CASES]
    assert len(names) == len(set(names)) and all(c.reason and "\n" not in c.reason for c in ACCEPT_CASES)
    status = np.concatenate([c.expected.status for c in ACCEPT_CASES])
    assert {int(s) for s in status} == {int(s) for s in AcceptStatus}, f"statuses covered: {sorted(set(status))}"
    assert {c.call.fmt.name for c in ACCEPT_CASES} == {"fp32", "fp16", "bf16"}
    ok = [(c, r) for c in ACCEPT_CASES for r in range(c.call.bits.shape[0]) if c.expected.status[r] == 0]
    t0 = [(c, r) for c, r in ok if c.call.temperature[r] == 0]
    sampled = [(c, r) for c, r in ok if c.call.temperature[r] != 0]
    assert t0 and sampled
    depth = {id(c): c.call.draft_tokens.shape[1] for c in ACCEPT_CASES}
    n = {(id(c), r): int(np.argmax(c.call.draft_status[r] != 0)) if (c.call.draft_status[r] != 0).any()
         else depth[id(c)] for c in ACCEPT_CASES for r in range(c.call.bits.shape[0])}
    for group in (t0, sampled):
        assert any(c.expected.accepted[r] < n[(id(c), r)] for c, r in group), "no rejection (correction)"
        assert any(c.expected.accepted[r] == n[(id(c), r)] for c, r in group), "no bonus"
    assert any(n[(id(c), r)] < depth[id(c)] for c, r in ok), "no truncated draft"
    for c in ACCEPT_CASES:  # §11.8: drafts 0 .. a-1, then the correction or bonus, then -1; failed rows all -1
        for r in range(c.call.bits.shape[0]):
            a, toks = int(c.expected.accepted[r]), c.expected.tokens[r]
            if c.expected.status[r] != 0:
                assert a == -1 and (toks == -1).all(), c.name
            else:
                assert (toks[:a] == c.call.draft_tokens[r, :a]).all() and toks[a] >= 0 and (toks[a + 1:] == -1).all()


def test_accept_json_round_trip_is_exact() -> None:
    for line in ACCEPT_GOLDEN_FILE.read_text().splitlines():
        assert accept_case_to_json(accept_case_from_json(line)) == line


@pytest.mark.parametrize("name", ["domain-collision", "residual-unnormalized", "q-from-greedy"])
def test_accept_golden_detects_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The verifier's planted bugs change golden rows (q-from-greedy through the verify call it wraps)."""
    mutant = mutants.mutant(name)
    monkeypatch.setattr(*mutant.target_and_replacement())
    from pp3.reference import accept

    def run(c: Any) -> Any:
        x = c.call.fmt.widen(c.call.bits) if c.call.fmt.name != "fp16" else c.call.bits.view(np.float16)
        return accept.verify(target_logits=x, target_temperature=c.call.temperature, **c.call.draft(),
                             seed=c.call.seed, round=c.call.round, position=c.call.position)

    bad = sum(int(row_mismatch(run(c), c.expected).sum()) for c in ACCEPT_CASES)
    assert bad > 0, f"the accept golden vectors do not detect the mutant {name}"


# --- the draft trees' golden vectors (§12) -------------------------------------------------------------------------

TREE_FILES = {
    TREE_DRAW_GOLDEN_FILE: (TREE_DRAW_SEMANTIC_ID, gen_golden.build_tree_draw),
    ACCEPT_TREE_GOLDEN_FILE: (ACCEPT_TREE_SEMANTIC_ID, gen_golden.build_accept_tree),
    WALK_TREE_GOLDEN_FILE: (WALK_TREE_SEMANTIC_ID, gen_golden.build_walk_tree),
}
TREE_DRAW_CASES = load_tree_draw_golden()
ACCEPT_TREE_CASES = load_tree_verify_golden(ACCEPT_TREE_GOLDEN_FILE)
WALK_TREE_CASES = load_tree_verify_golden(WALK_TREE_GOLDEN_FILE)
TREE_MUTANTS = ("tree-residual-unnormalized", "tree-q-not-reduced", "tree-sibling-parent-p",
                "tree-draw-with-replacement", "tree-bonus-from-residual")


def _tree_mismatches() -> int:
    cases: list[Any] = [*TREE_DRAW_CASES, *ACCEPT_TREE_CASES, *WALK_TREE_CASES]
    return sum(int(row_mismatch(c.run(), c.expected).sum()) for c in cases)


@pytest.mark.parametrize("path", list(TREE_FILES), ids=lambda p: p.stem)
def test_tree_file_is_named_for_its_semantic_id_and_regenerates_byte_for_byte(path: Path) -> None:
    semantic_id, build = TREE_FILES[path]
    assert path.name == f"{semantic_id}.jsonl"
    assert build() == path.read_text(), (
        f"{path.name} differs from tools/gen_golden.py's output: never edit it by hand; regenerate (make golden) "
        "only together with a new semantic ID")


@pytest.mark.parametrize("path", list(TREE_FILES), ids=lambda p: p.stem)
def test_tree_json_round_trip_is_exact(path: Path) -> None:
    for line in path.read_text().splitlines():
        case = tree_draw_case_from_json(line) if path == TREE_DRAW_GOLDEN_FILE else tree_verify_case_from_json(line)
        again = tree_draw_case_to_json(case) if isinstance(case, TreeDrawCase) else tree_verify_case_to_json(case)
        assert again == line


def test_reference_reproduces_every_tree_golden_row() -> None:
    assert _tree_mismatches() == 0


def test_tree_draw_file_covers_the_clauses() -> None:
    names = [c.name for c in TREE_DRAW_CASES]
    assert len(names) == len(set(names)) and all(c.reason and "\n" not in c.reason for c in TREE_DRAW_CASES)
    status = {int(s) for c in TREE_DRAW_CASES for s in c.expected.status.ravel()}
    assert status == {int(s) for s in TreeStatus}, f"statuses covered: {sorted(status)}"
    assert {c.children for c in TREE_DRAW_CASES} == {"sampled", "top-k"}
    assert {c.dtype for c in TREE_DRAW_CASES} == {"float32", "float16", "bfloat16"}
    temps = {float(t) for c in TREE_DRAW_CASES for t in c.target_temperature}
    assert {0.0, 0.5, 1.0, 2.0, float("inf")} <= temps
    equal_support = 0
    for c in TREE_DRAW_CASES:
        tree = as_tree("parents", c.parents)
        k = tree.branching[c.nodes]
        drawable = ((c.expected.ids >= 0) & (c.expected.tickets >= 1)).sum(axis=-1)  # [B, M]
        equal_support += int(((c.expected.status == 0) & (drawable == k[None, :]) & (k[None, :] > 1)).sum())
    assert equal_support, "no node drew k children from exactly k drawable slots"
    assert any((as_tree("parents", c.parents).branching[c.nodes] == 0).any() for c in TREE_DRAW_CASES), "no leaf"


@pytest.mark.parametrize("walk", [False, True], ids=["accept-tree", "walk-tree"])
def test_tree_verify_files_cover_the_clauses(walk: bool) -> None:
    cases = WALK_TREE_CASES if walk else ACCEPT_TREE_CASES
    names = [c.name for c in cases]
    assert len(names) == len(set(names)) and all(c.reason and "\n" not in c.reason for c in cases)
    status = {int(s) for c in cases for s in c.expected.status}
    want = {0, 1, 2, 4, 5} if walk else {int(s) for s in AcceptStatus}
    assert want <= status, f"statuses covered: {sorted(status)}"
    outcomes: set[Any] = set()
    for c in cases:
        tree = as_tree("parents", c.parents)
        for r in np.flatnonzero(c.expected.status == 0):
            a = int(c.expected.accepted[r])
            last = int(c.expected.path[r, a - 1]) if a else 0
            kind = "T0" if c.target_temperature[r] == 0 else "sampled"
            expands = tree.branching[last] > 0 and c.draft_status[r, last] == 0
            outcomes.add((kind, "correction" if expands else "bonus"))
            outcomes.add(("depth", a))
            truncated = tree.branching > 0
            if (truncated & (c.draft_status[r] != 0)).any():
                outcomes.add("truncated")
            toks = c.expected.tokens[r]
            assert toks[:a].tolist() == c.draft_tokens[r, c.expected.path[r, :a]].tolist() and toks[a] >= 0
            assert (toks[a + 1:] == -1).all() and (c.expected.path[r, a:] == -1).all()
    for kind in ("T0", "sampled"):
        assert {(kind, "correction"), (kind, "bonus")} <= outcomes, (kind, outcomes)
    assert "truncated" in outcomes and {("depth", d) for d in range(4)} <= outcomes


def test_accept_tree_file_takes_both_tests_and_lemire_rejections(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file holds tests of both cases of §12.6 N3 (bounds <= 2^40 and up to 2^64) and uses of a stream that
    rejected a word (§12.3)."""
    from pp3.reference import tree as tree_module

    seen: list[tuple[int, int, int]] = []  # (domain, bound, words taken)
    original = tree_module.uniform_below_at

    def spy(keys: Any, domain: int, s: Any, offset: Any) -> Any:
        u, nxt = original(keys, domain, s, offset)
        seen.extend((domain, int(b), int(n - o)) for b, o, n in zip(s, offset, nxt, strict=True))
        return u, nxt

    monkeypatch.setattr(tree_module, "uniform_below_at", spy)
    assert _tree_mismatches() == 0
    tests = [(b, n) for d, b, n in seen if d == DOMAIN_ACCEPT]
    assert any(b <= 1 << 40 for b, _ in tests) and any(b > 1 << 40 for b, _ in tests)
    assert any(n > 1 for b, n in tests if b > 1 << 40), "no Lemire rejection in N3's second case"


@pytest.mark.parametrize("name", TREE_MUTANTS)
def test_tree_golden_detects_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(*mutants.mutant(name).target_and_replacement())
    assert _tree_mismatches() > 0, f"the tree golden vectors do not detect the planted bug {name}"
