"""``python -m bench.fast_accept`` (the bulk reference's CPU time per request row): it times rows that pass,
and refuses to report a time for rows where ``fast_accept`` and the plain reference differ."""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt
import pytest

pytest.importorskip("torch")

from bench import fast_accept as bench_fast_accept
from pp3.audit import fast_accept


def test_it_times_every_layout(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_fast_accept.main(["--layouts", "3", "--rows", "4", "--vocab", "40", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(p["depth"], p["format"]) for p in doc["layouts"]] == [(1, "fp32"), (2, "fp16"), (3, "bf16")]
    assert doc["mean_ms_per_row"] > 0


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # the NaN rows it verifies
def test_a_fast_accept_that_differs_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted bug: every target row classed OK, so NaN, +inf and all -inf rows are verified as if they were."""

    def all_ok(x: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
        return np.zeros(x.shape[:-1], dtype=np.int8)

    monkeypatch.setattr(fast_accept, "target_class", all_ok)
    assert bench_fast_accept.main(["--layouts", "3", "--rows", "16", "--vocab", "40"]) == 1


def test_a_bad_argument_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_fast_accept.main(["--rows", "65"])
