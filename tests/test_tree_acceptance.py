"""bench.tree_acceptance (docs/TREES.md): the acceptance study runs end to end (JSON, CSV, plot), its Zipfian pair is
what its docstring says, and its figures mean what the table says (the same contexts for both ways of drafting)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")  # the V = 8 pair is the end-to-end audit's (pp3.audit.e2e)

from bench import tree_acceptance as bench


def test_quick_run_writes_every_output(tmp_path: Path) -> None:
    out = {k: tmp_path / f"acceptance.{k}" for k in ("json", "csv", "png", "md")}
    assert bench.main(["--quick", "--pairs", "v8", "--budgets", "2", "6", "--json", str(out["json"]), "--csv",
                       str(out["csv"]), "--plot", str(out["png"]), "--markdown", str(out["md"])]) == 0
    rows = json.loads(out["json"].read_text())["rows"]
    assert len(rows) == 5 * 7  # 5 shapes; sampled at 4 temperatures, top-k at the 3 sampled ones (T0: ranked)
    assert {r["children"] for r in rows if r["temperature"] == 0} == {"ranked"}
    assert all(1.0 <= r["tokens_per_step"] <= 7.0 and r["n"] == 64 for r in rows)
    with open(out["csv"]) as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert out["png"].stat().st_size > 10_000 and "| v8 | 6 | 1 | 2x2 |" in out["md"].read_text()


def test_the_zipf_pair() -> None:
    pair = bench.zipf_pair(vocab=1 << 12)
    x = np.array([[3, 3], [5, 4095]], dtype=np.int64)
    t, d = pair.target(x), pair.drafter(x)
    assert t.shape == (2, 2, 1 << 12) and t.dtype == np.float32
    assert np.array_equal(t[0, 0], t[0, 1]) and not np.array_equal(t[0, 0], t[1, 0])  # a function of the context
    assert np.corrcoef(t[1, 0], d[1, 0])[0, 1] > 0.8  # the same ranking of the vocabulary, other noise
    assert np.corrcoef(t[1, 0], t[1, 1])[0, 1] < 0.2  # another context, another ranking
    with pytest.raises(ValueError, match="power of two"):
        bench.zipf_pair(vocab=3000)


def test_both_ways_of_drafting_see_the_same_contexts() -> None:
    pair = bench.PAIRS["v8"]()
    a = bench.measure(pair, (1,), "sampled", 0.0, 256, seed=5)  # T0: ranked children either way
    b = bench.measure(pair, (1,), "top-k", 0.0, 256, seed=5)
    assert a["tokens_per_step"] == b["tokens_per_step"]
