"""``python -m pp3`` (pp3.cli): dispatch, the sampled-drafting gate, and the --json outputs of demo and audit-e2e."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

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


def test_repository_tools_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("stats", "bench"):
        assert cli.main([name, "--help"]) == 2
        err = capsys.readouterr().err
        assert "repository tool" in err and f"make {name}" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--temperature", "nan"],
        ["demo", "--temperature", "-1"],
        ["demo", "--tau", "0"],
        ["demo", "--depth", "0"],
        ["audit-e2e", "--n", "-1"],
        ["audit-e2e", "--alpha", "-1"],
        ["audit-e2e", "--alpha", "1"],
        ["audit-e2e", "--temperatures", "nan"],
        ["audit-e2e", "--mutant-temperatures", "0"],
    ],
)
def test_bad_arguments_are_refused(args: list[str], monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    assert exc.value.code == 2
    assert args[1] in capsys.readouterr().err


def test_missing_optional_package_is_named_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--plot without matplotlib: one line naming the extra, before the audit runs (it would take minutes)."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "matplotlib" else real(name))
    assert cli.main(["audit-e2e", "--plot", "x.png"]) == 2
    err = capsys.readouterr().err.strip()
    assert "matplotlib" in err and "pip install" in err and len(err.splitlines()) == 1


def test_verify_refuses_a_run_that_checks_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["verify", "--bulk-only"]) == 2  # no GPU: 0 bulk rows by default
    assert "check nothing" in capsys.readouterr().err


def test_verify_json_is_one_document_with_the_stamp(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["verify", "--bulk-only", "--bulk-rows", "8", "--bulk-vocab", "40", "--json", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["verdict"] == "PASS" and doc["suites"]["bulk"]["rows"] == 8
    assert {"commit", "dirty", "python", "packages", "gpu"} <= set(doc["environment"])
    assert "bulk" in captured.err  # progress on stderr


def test_conformance_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["conformance", "--kernels", "no", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] and {r["file"] for r in doc["results"]} == {
        "dyadic24-floor-first-v1.jsonl", "accept-dyadic24-v1.jsonl", "philox4x64_10.kat", "expf.wc"}


def test_unwritable_output_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    missing = str(tmp_path / "no" / "such" / "folder" / "tables.md")
    assert cli.main(["audit-e2e", "--markdown", missing]) == 2  # before the audit's minutes of work
    err = capsys.readouterr().err
    assert "--markdown" in err and len(err.strip().splitlines()) == 1
