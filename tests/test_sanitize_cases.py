"""``tools.sanitize_cases`` (what ``make sanitize-gpu`` runs under compute-sanitizer) runs to the end in the
interpreter, so a broken case is found here and not on the device; and it refuses to run where it would check
nothing."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from tools import sanitize_cases

pytestmark = pytest.mark.interpreter


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the CPU run needs the interpreter")
@pytest.mark.parametrize("group", sorted(sanitize_cases.CASES))
def test_every_case_runs_in_the_interpreter(group: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Group by group (the whole run took ~9 minutes of one CPU in the interpreter: apart, they share the workers)."""
    assert sanitize_cases.main(["--device", "cpu", "--cases", group]) == 0
    assert "sanitize cases: done" in capsys.readouterr().out


def test_refuses_without_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sanitize_cases.main([]) == 2
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert sanitize_cases.main(["--device", "cpu"]) == 2
