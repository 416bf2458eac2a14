"""``python -m pp3`` (pp3.cli): dispatch, the sampled-drafting gate, and the --json outputs of demo and audit-e2e."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from pp3 import cli
from pp3.drafter import SAMPLED_ENV


def test_help_and_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "audit-e2e" in capsys.readouterr().out
    assert cli.main([]) == 2
    assert cli.main(["nope"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_audit_needs_the_sampled_gate(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(SAMPLED_ENV, raising=False)
    assert cli.main(["audit-e2e", "--n", "10"]) == 2
    assert SAMPLED_ENV in capsys.readouterr().err


def test_demo_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    args = ["demo", "--vocab", "300", "--rank", "8", "--rounds", "2", "--device", "cpu", "--json", "--quiet"]
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["modes"]) == {"greedy", "sampled"}
    for r in out["modes"].values():
        assert 1.0 <= r["tokens_per_step"] <= 6.0


def test_audit_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    args = ["audit-e2e", "--n", "3000", "--temperatures", "1.0", "--no-mutants", "--json", "--quiet"]
    assert cli.main(args) == 0
    log = json.loads(capsys.readouterr().out)
    assert log["passed"] and [c["mode"] for c in log["real"]["cases"]] == ["sampled", "greedy"]
