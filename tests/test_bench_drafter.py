"""``bench.drafter``'s verifier table (``markdown``, what ``make verifier-next-gpu`` writes into bench_verify.md): one
row per variant and B, FlashInfer's time and the read-only pass as multiples of each variant's, and a variant that
differed from the reference on a row marked so that the table cannot pass it off as timed output."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

from bench.drafter import VARIANTS, markdown


def _rows() -> list[dict[str, Any]]:
    rows = []
    for b in (1, 64):
        row: dict[str, Any] = {"dtype": "float32", "depth": 5, "B": b, "read_only_pass": {"median_us": 10.0 * b},
                               "parity_by_variant": dict.fromkeys(VARIANTS, True)}
        row |= {name: {"median_us": 30.0 * b - i} for i, name in enumerate(VARIANTS)}
        if b == 1:
            row["flashinfer_softmax_chain"] = {"median_us": 90.0}
        rows.append(row)
    return rows


def test_the_table_has_every_variant_and_the_ratios() -> None:
    lines = markdown(_rows(), list(VARIANTS)).splitlines()
    assert lines[0] == "### float32, depth 5 (V = 163840, T = 1, one CUDA graph per call)"
    assert "| pp3 | 30.0 | 1920.0 |" in lines and "| pp3 ex2+handover | 27.0 | 1917.0 |" in lines
    assert "| FlashInfer / pp3 screen ex2 | 3.10 | — |" in lines  # 90 / 29; no FlashInfer row at B = 64
    assert "| pp3 handover / read-only | 2.80 | 3.00 |" in lines


def test_a_variant_that_differed_is_marked() -> None:
    rows = _rows()
    rows[1]["parity_by_variant"]["pp3 handover"] = False
    table = markdown(rows, list(VARIANTS))
    assert "| pp3 handover (PARITY FAILED) | 28.0 | 1918.0 |" in table and table.count("PARITY FAILED") == 1
