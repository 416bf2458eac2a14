"""golden/dyadic24-floor-first-v1.jsonl: the reference reproduces every row, and the file is exactly what
tools/gen_golden.py builds (no hand edits)."""

from __future__ import annotations

import json

import pytest

from pp3.reference import SEMANTIC_ID, TICKETS, K, Status
from tests._diag import first_lines
from tools import gen_golden
from tools.golden_io import GOLDEN_FILE, case_from_json, case_to_json, count_mismatching_rows, load_golden

CASES = load_golden(GOLDEN_FILE)


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
