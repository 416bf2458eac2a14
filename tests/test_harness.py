"""The seam (``pp3.harness``): a callable that does not match its role's protocol is refused at load, naming what does
not match; pp3's own kernels and reference go through it; every planted bug of the chain's catalogue, plugged in as an
implementation, is caught with a replay file that reproduces it; implementations that raise, hang, return the wrong
fields, write into their inputs or answer a replay differently each fail by name while the run goes on; the
expected-failures file is honoured and reported; the law verdict passes FlashInfer's rule (in plain torch) fed pp3's
exact q and fails it fed the greedy q; entry points and the pytest plugin find implementations.

Most implementations here use the NumPy API (the reference, with or without a planted bug), so the file runs in
seconds without the interpreter; pp3's kernels appear once, on a tiny call of each variant.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pp3 import cli
from pp3.audit import conformance, law, parity
from pp3.harness import builtin
from pp3.harness.guard import Guard
from pp3.harness.protocol import Capabilities, Implementation, ImplementationError, load
from pp3.harness.xfail import ExpectedFailures, ExpectedFailuresError
from pp3.reference import Proposal, select
from pp3.testing import adapt
from pp3.testing.call import make_case
from pp3.testing.planted import CHAIN

ROOT = Path(__file__).resolve().parents[1]
# ``pp3 verify`` and its suites need torch (their cases are built as tensors, even for a NumPy-API implementation): the
# tests that run them are skipped where only the reference is installed (make test-py312 / test-py313).
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="pp3 verify needs torch")
NUMPY = Capabilities(api="numpy")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = cli.main(args)
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------------------------------ bad implementations
# Each wraps the NumPy reference's selector (pp3.propose's protocol on NumPy arrays) and breaks it in one way.


def _propose(*args: Any) -> Proposal:
    out: Proposal = select.propose(*args)
    return out


def raising(*args: Any) -> Proposal:
    raise RuntimeError("the engine's sampler is not initialised")


def hanging(*args: Any) -> Proposal:
    time.sleep(5)  # past the tests' time limit: abandoned in its thread
    return _propose(*args)


def wrong_shape(*args: Any) -> Proposal:
    out = _propose(*args)
    return dataclasses.replace(out, token=np.append(out.token, 0).astype(np.int32))


def wrong_dtype(*args: Any) -> Proposal:
    return dataclasses.replace(_propose(*args), status=_propose(*args).status.astype(np.int32))


def writes_inputs(*args: Any) -> Proposal:
    out = _propose(*args)
    args[0][..., 0] = 0  # "scratch space": the caller's logits
    return out


_CALLS = [0]


def nondeterministic(*args: Any) -> Proposal:
    out = _propose(*args)
    _CALLS[0] += 1
    if _CALLS[0] % 2 == 0:  # every second call draws another token for row 0
        out.token[0] = (out.token[0] + 1) % 7
    return out


BAD = {"raised": raising, "timeout": hanging, "wrong-output": wrong_shape, "wrote-inputs": writes_inputs,
       "nondeterministic": nondeterministic}
raising_selector = Implementation("selector", "raising", raising, NUMPY)
reference_verifier = builtin.reference()[1]


# ------------------------------------------------------------------------------------------ the protocol


def test_a_callable_that_does_not_match_its_protocol_is_refused_naming_what_does_not_match() -> None:
    def three(logits: Any, target_temperature: Any, seed: Any) -> Any: ...

    def keyword(logits: Any, t: Any, s: Any, r: Any, p: Any, tau: Any, *, stream: Any) -> Any: ...

    def no_tile(logits: Any, t: Any, s: Any, r: Any, p: Any, tau: Any) -> Any: ...

    with pytest.raises(ImplementationError, match="no parameter for round, position, tau"):
        Implementation("selector", "three", three)
    with pytest.raises(ImplementationError, match=r"keyword-only parameter\(s\) stream have no default"):
        Implementation("selector", "keyword", keyword)
    with pytest.raises(ImplementationError, match="takes no keyword 'tile'"):
        Implementation("selector", "no_tile", no_tile, Capabilities(tile=True))
    with pytest.raises(ImplementationError, match="protocol passes 9: no parameter for seed, round, position"):
        Implementation("verifier", "a selector as verifier", no_tile)
    with pytest.raises(ImplementationError, match="not callable"):
        Implementation("selector", "a number", 3)  # type: ignore[arg-type]
    with pytest.raises(ImplementationError, match="formats"):
        Capabilities(formats=("fp8",))


@pytest.mark.parametrize(("spec", "role", "needle"), [
    ("no_such_module_here:f", "selector", "cannot import 'no_such_module_here'"),
    ("pp3.harness.builtin:nope", "selector", "has no attribute 'nope'"),
    ("nothing-installed-by-this-name", "selector", "pp3-kernels, pp3-reference"),
    ("tests.test_harness:reference_verifier", "selector", "implements verifier, not the selector"),
    ("tests.test_harness:BAD", "selector", "a dict, not an Implementation"),
])
def test_a_name_that_loads_nothing_usable_is_refused(spec: str, role: Any, needle: str) -> None:
    with pytest.raises(ImplementationError, match=needle):
        load(spec, role)


@needs_torch
def test_the_command_refuses_it_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["verify", "--impl", "selector=pp3.harness.builtin:nope", "--quick"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "nope" in err
    rc, _, err = run(["verify", "--impl", "sampler=pp3-reference"], capsys)
    assert rc == 2 and "selector=NAME or verifier=NAME" in err


def test_names_load_through_the_entry_point_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution that declares an entry point of the group pp3.implementations is found by its name."""
    info = tmp_path / "someengine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: someengine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pp3.implementations]\nsomeengine-sampler = "
                                           "pp3.testing.planted:seed_lsb\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.metadata.entry_points(group="pp3.implementations")["someengine-sampler"]
    (impl,) = load("someengine-sampler", "selector")
    assert impl.name == "planted:seed-lsb" and impl.spec == "someengine-sampler"


# ------------------------------------------------------------------------------------------ pp3's own, through it


def test_pp3s_kernels_and_reference_are_implementations_of_both_roles() -> None:
    kernels, reference = builtin.kernels(), builtin.reference()
    assert [(i.role, i.variant) for i in kernels] == [("selector", ""), ("selector", "gather"), ("selector", "tiles"),
                                                      ("selector", "greedy"), ("selector", "rescan"), ("verifier", "")]
    assert all(i.caps.api == "torch" and i.caps.tile for i in kernels)
    assert [i.role for i in reference] == ["selector", "verifier"] and reference[0].caps.api == "numpy"
    assert [i.name for i in load("pp3-kernels", "verifier")] == [builtin.KERNELS]


@pytest.mark.interpreter
def test_each_variant_of_pp3s_kernels_runs_through_the_guard() -> None:
    pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET") != "1":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU or TRITON_INTERPRET=1")
    call = make_case("bf16", [[1.0, 2.0, 2.0] * 11, [0.5] * 33], temperature=[1.0, 0.0], seed=[3, 4], tile=32)
    for impl in builtin.kernels()[:5]:
        c = adapt.prepare(impl, call)
        outcome = Guard(impl).check(c, replay=True)
        assert outcome.failure is None and outcome.got is not None, (impl.label, outcome.detail)


@needs_torch
def test_the_reference_through_the_seam_runs_what_pp3s_own_run_runs(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``pp3 verify --impl`` with pp3's reference: PASS, the same selector cases as pp3's own quick run (edges 13,
    bounds 12, random 24, tiles 3, shards 4) and the invariance calls, the conformance files, two verdicts in the
    document."""
    rc, out, _ = run(["verify", "--impl", "selector=pp3-reference", "--quick", "--json", "--out", str(tmp_path)],
                     capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["schema_version"] == 1 and doc["verdict"] == "PASS", doc["verdicts"]
    assert doc["parts"] == ["selector", "conformance"] and doc["verifier"]["verdict"] == "SKIPPED"
    cases = {s: r["cases"] for s, r in doc["selector"]["suites"].items()}
    assert cases == {"edges": 13, "bounds": 12, "random": 24, "tiles": 3, "shards": 4, "order": 3, "alone": 3}
    assert doc["verdicts"]["bit_exact"]["verdict"] == "PASS" and doc["verdicts"]["law"]["verdict"] == "SKIPPED"
    assert [i["name"] for i in doc["implementations"]] == ["pp3-reference"]
    assert doc["conformance"]["verdict"] == "PASS" and doc["conformance"]["sweeps"][-1]["checked"] == 77120


# ------------------------------------------------------------------------------------------ planted bugs


def _catch(impls: list[Implementation], out: Path) -> tuple[str, Path]:
    """The first check that fails on a planted implementation, cheapest first: the conformance files (and the expf
    sweep), then the selector's quick edges, then the verifier's named calls. (where, its replay file)"""
    report = conformance.run(subjects=[("planted", impls)], out=out / "conformance")
    for f in report["failures"].get("planted", {}).values():
        return "conformance", Path(f["file"])
    for impl, suite, part in ((impls[0], "edges", parity.Part("selector", out)),
                              (impls[1], "accept-edges", parity.Part("verifier", out))):
        parity.check_calls(suite, parity.suite_calls(impl.role, suite, "quick", None), Guard(impl), part, False)
        if part.failures.first is not None:
            return suite, part.failures.first
    raise AssertionError("not caught")


@needs_torch
@pytest.mark.parametrize("name", sorted(CHAIN))
def test_every_planted_bug_plugged_in_is_caught_and_its_replay_reproduces_it(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = f"pp3.testing.planted:{name.replace('-', '_')}"
    impls = load(spec, "selector") + load(spec, "verifier")
    where, dump = _catch(impls, tmp_path)
    kind = parity.load_replay(str(dump)).kernel
    role = "verifier" if kind == "verifier" else "selector"
    rc, out, _ = run(["verify", "--replay", str(dump), "--impl", f"{role}={spec}", "--json"], capsys)
    assert rc == 1 and json.loads(out)["verdict"] == "FAIL", (where, out[-400:])
    rc, out, _ = run(["verify", "--replay", str(dump), "--impl", f"{role}=pp3-reference", "--json"], capsys)
    assert rc == 0, (where, out[-400:])  # the same inputs on the reference itself: the bug is what fails


# ------------------------------------------------------------------------------------------ bad implementations


@pytest.mark.parametrize("failure", sorted(BAD))
def test_a_bad_implementation_fails_by_name_and_the_run_goes_on(
        failure: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    impl = Implementation("selector", failure, BAD[failure], NUMPY)
    part = parity.Part("selector", tmp_path)
    guard = Guard(impl, time_limit=0.3)
    t0 = time.perf_counter()
    parity.check_calls("selector", parity.suite_calls("selector", "edges", "quick", None), guard, part, False)
    assert time.perf_counter() - t0 < 30  # a hung implementation costs its time limit a few times, then no more
    assert part.table.rows["edges"]["cases"] == 13  # every call was made or named, none lost
    kinds = {f["failure"] for f in part.failing}
    assert failure in kinds and part.failures.first is not None, kinds
    written = np.load(part.failures.first)
    assert str(written["failure"]) == failure
    report = json.loads(part.failures.first.with_suffix(".json").read_text())
    assert report["failure"] == failure and report["replay"].startswith("pp3 verify --replay")
    if failure == "timeout":
        assert guard.abandoned == 3 and any("not called" in f["detail"] for f in part.failing)


@needs_torch
def test_a_raising_implementation_through_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(["verify", "--impl", "selector=tests.test_harness:raising_selector", "--quick", "--json",
                        "--out", str(tmp_path)], capsys)
    doc = json.loads(out)
    assert rc == 1 and doc["verdict"] == "FAIL" and doc["verdicts"]["bit_exact"]["verdict"] == "FAIL"
    firsts = doc["selector"]["first_failures"]
    assert set(firsts) == {"edges", "bounds", "random", "tiles", "order", "alone"}  # every suite ran, each named
    assert doc["selector"]["skipped"] == [{"implementation": "raising", "suite": "shards", "calls": 4,
                                           "reason": "declares no sharded form"}]
    assert all(f["failure"] == "raised" and "not initialised" in f["detail"] for f in firsts.values())
    assert "FAILURE (raised)" in err
    rc, out, _ = run(["verify", "--replay", firsts["random"]["file"], "--impl",
                      "selector=tests.test_harness:raising_selector", "--call-timeout", "60", "--json"], capsys)
    assert rc == 1 and json.loads(out)["failure"] == "raised"


# ------------------------------------------------------------------------------------------ expected failures


@needs_torch
def test_expected_failures_are_honoured_and_stale_entries_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """draw-off-by-one fails the boundary case of the edges suite and two golden rows; with those expected the
    verdict is PASS, and the entries that no longer fail or did not run are named."""
    xfail = tmp_path / "xfail.toml"
    xfail.write_text('[[expected]]\nsuite = "edges"\ncase = "boundary[V=300,u=10959365,tile=32]"\n'
                     'reason = "draws with u <= C_j"\n\n'
                     '[[expected]]\nsuite = "conformance"\ncase = "*"\nreason = "the same"\nfailure = "mismatch"\n\n'
                     '[[expected]]\nsuite = "random"\ncase = "*"\nreason = "fixed long ago"\n\n'
                     '[[expected]]\nsuite = "accept-edges"\ncase = "*"\nreason = "no verifier given"\n')
    spec = "selector=pp3.testing.planted:draw_off_by_one"
    rc, out, _ = run(["verify", "--impl", spec, "--quick", "--json", "--out", str(tmp_path), "--expected-failures",
                      str(xfail)], capsys)
    doc = json.loads(out)
    status = [e["status"] for e in doc["expected_failures"]["entries"]]
    assert rc == 0 and doc["verdict"] == "PASS", doc["selector"]["failing"]
    assert status == ["failed as expected", "failed as expected", "no longer fails", "not run"]
    assert [e["suite"] for e in doc["expected_failures"]["no_longer_failing"]] == ["random"]
    assert doc["selector"]["failing"][0]["expected"] == "draws with u <= C_j"
    rc, _, _ = run(["verify", "--impl", spec, "--quick", "--json", "--out", str(tmp_path)], capsys)
    assert rc == 1  # the same run without the file


@pytest.mark.parametrize(("text", "needle"), [
    ("[[expected]]\nsuite = 'edges'\n", "needs suite, case and reason"),
    ("[[expected]]\nsuite = 'a'\ncase = 'b'\nreason = 'c'\nfailure = 'slow'\n", "failure must be one of"),
    ("expected = 3\n", "only [[expected]] tables"),
    ("[[expected]\n", "not TOML"),
])
def test_a_malformed_expected_failures_file_is_refused(text: str, needle: str, tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text(text)
    with pytest.raises(ExpectedFailuresError, match=re.escape(needle)):
        ExpectedFailures.load(path)


# ------------------------------------------------------------------------------------------ the law verdict


@pytest.mark.stats
@pytest.mark.parametrize("q", ["exact", "greedy"])
def test_the_law_verdict_passes_flashinfers_rule_fed_the_exact_q_and_fails_it_fed_the_greedy_q(
        q: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FlashInfer's chain (its plain-torch twin, on the CPU) is not bit-exact: the end-to-end audit judges it, at
    alpha 0.01 with Holm, the planted bugs caught in the same run (its power). Fed the greedy path's q it accepts
    less than the law says: FAIL."""
    pytest.importorskip("torch")
    from pp3.drafter import SAMPLED_ENV
    from pp3.testing.peers import chain_implementation, torch_chain

    monkeypatch.setenv(SAMPLED_ENV, "1")
    impl = chain_implementation(torch_chain, f"torch_chain q={q}", q=q, device="cpu")
    res = law.verifier_law(impl, tmp_path, n=10_000, seed=1, temperatures=(1.0,), mutant_temperatures=(1.0,))
    assert res["power_shown"] and all(p["rejected"] for p in res["power"].values()), res["power"]
    assert res["verdict"] == ("PASS" if q == "exact" else "FAIL"), res["ran"]


def test_a_verifier_that_fails_a_call_fails_the_law_verdict_with_its_replay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from pp3.drafter import SAMPLED_ENV

    monkeypatch.setenv(SAMPLED_ENV, "1")

    def broken(*args: Any) -> Any:
        raise ValueError("no such kernel")

    res = law.verifier_law(Implementation("verifier", "broken", broken, NUMPY), tmp_path, n=100)
    assert res["verdict"] == "FAIL" and res["failure"]["failure"] == "raised"
    assert Path(res["failure"]["file"]).exists() and "--replay" in res["failure"]["replay"]
    monkeypatch.delenv(SAMPLED_ENV)
    assert law.verifier_law(builtin.reference()[1], tmp_path, n=100)["verdict"] == "SKIPPED"


# ------------------------------------------------------------------------------------------ the pytest plugin


def _plugin_args() -> list[str]:
    """``-p pp3.harness.pytest_plugin`` unless the installed distribution already registers it (pytest11)."""
    plugins = importlib.metadata.entry_points(group="pytest11")
    registered = any(ep.value == "pp3.harness.pytest_plugin" for ep in plugins)
    return [] if registered else ["-p", "pp3.harness.pytest_plugin"]


@needs_torch
@pytest.mark.parametrize(("spec", "rc"), [("pp3-reference", 0), ("pp3.testing.planted:t0_sampled", 1)])
def test_the_pytest_plugin_runs_the_suites_on_an_implementation(spec: str, rc: int, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "HYPOTHESIS_PROFILE": "ci"}
    cmd = [sys.executable, "-m", "pytest", *_plugin_args(), "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
           "-q", "--pp3-impl", f"selector={spec}", "--pp3-examples", "5", "-k", "edges or conformance or property"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == rc, res.stdout[-2000:] + res.stderr[-2000:]
    if rc:
        assert "replay: pp3 verify --replay" in res.stdout and "t0_sampled" in res.stdout
    else:
        assert "3 passed" in res.stdout, res.stdout[-600:]
