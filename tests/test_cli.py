"""``pp3`` / ``python -m pp3`` (pp3.cli): the program's help and version, every refusal (one line on stderr, exit
status 2, no traceback), the JSON documents (``schema_version`` 1 and one ``verdict``), and ``pp3 verify`` failing
on a planted bug in either kernel, its dump replaying the mismatch.

The verify runs go through Triton's interpreter (TRITON_INTERPRET=1, set by conftest.py without a GPU) at the
``--quick`` sizes, one part each: about 10-30 s apiece.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pp3.kernels  # noqa: E402
from pp3 import cli  # noqa: E402
from pp3.drafter import SAMPLED_ENV  # noqa: E402
from pp3.testing import mutants  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
KERNELS_RUN = CUDA or os.environ.get("TRITON_INTERPRET") == "1"
needs_kernels = pytest.mark.skipif(not KERNELS_RUN, reason="needs a CUDA GPU or TRITON_INTERPRET=1")
pytestmark = [
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning"),
]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = cli.main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def document(out: str) -> dict[str, Any]:
    """The one JSON document of a --json run, with its two required keys."""
    doc: dict[str, Any] = json.loads(out)
    assert doc["schema_version"] == 1 and doc["verdict"] in ("PASS", "FAIL"), {k: doc.get(k) for k in doc}
    assert "passed" not in doc
    return doc


def assert_refused(rc: int, err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    for n in needles:
        assert n in err, err


# ---------------------------------------------------------------------------------------------- the program


def test_help_is_plain_text_and_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["--help"], capsys)
    assert rc == 0
    for name in ("verify", "conformance", "demo", "audit-e2e", "stats", "bench", "--version"):
        assert name in out
    assert "``" not in out and ":mod:" not in out  # no reST markup


def test_version_is_the_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    import pp3

    try:
        want = metadata.version("pp3-exact")
    except metadata.PackageNotFoundError:
        want = pp3.__version__
    rc, out, _ = run(["--version"], capsys)
    assert rc == 0 and out.strip() == f"pp3 {want} (pp3-exact)"


def test_no_arguments_prints_the_usage_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run([], capsys)
    assert rc == 2 and out == "" and err.startswith("usage: pp3")


@pytest.mark.parametrize("command", ["verify", "conformance", "demo", "audit-e2e"])
def test_each_commands_help_names_it_and_shows_every_option_with_its_help_and_default(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run([command, "--help"], capsys)
    assert rc == 0 and out.startswith(f"usage: pp3 {command} ")
    flat = " ".join(out.split())
    for action in cli.parser().commands[command]._actions:
        assert action.help and action.option_strings, (command, action.dest)
        text = cli.HelpFormatter.help_text(action)
        assert " ".join(text.split()) in flat, (command, text)
        if action.default is not None and not isinstance(action.default, bool) and action.dest != "help":
            assert "(default" in text, (command, action.option_strings)


def test_repository_tools_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("stats", "bench"):
        rc, _, err = run([name, "--help"], capsys)
        assert_refused(rc, err, "repository tool", f"make {name}")


# ---------------------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["nope"], "invalid choice"),
        (["demo", "--rank", "2000"], "--rank"),
        (["demo", "--gain", "9"], "--gain"),
        (["demo", "--tau", "1e39"], "rounds to inf"),
        (["demo", "--tau", "1e-46"], "rounds to 0"),
        (["demo", "--tau", "0"], "--tau"),
        (["demo", "--temperature", "1e39"], "rounds to inf"),
        (["demo", "--temperature", "1e-46"], "rounds to 0"),
        (["demo", "--temperature", "nan"], "--temperature"),
        (["demo", "--temperature", "-1"], "--temperature"),
        (["demo", "--vocab", "2147483648"], "--vocab"),
        (["demo", "--vocab", "1"], "--vocab"),
        (["demo", "--depth", "0"], "--depth"),
        (["demo", "--batch", "x"], "--batch"),
        (["demo", "--shards", "9", "--vocab", "4"], "--shards"),
        (["audit-e2e", "--vocab", "100000000"], "--vocab"),
        (["audit-e2e", "--n", "-1"], "--n"),
        (["audit-e2e", "--alpha", "-1"], "--alpha"),
        (["audit-e2e", "--alpha", "1"], "--alpha"),
        (["audit-e2e", "--alpha", "nan"], "--alpha"),
        (["audit-e2e", "--temperatures", "nan"], "--temperatures"),
        (["audit-e2e", "--mutant-temperatures", "0"], "--mutant-temperatures"),
        (["verify", "--replay", "no/such/file.npz"], "no such file"),
        (["verify", "--replay", "README.md"], "not a failing case"),
        (["verify", "--bulk-rows", "-1"], "--bulk-rows"),
        (["verify", "--bulk-vocab", "0"], "--bulk-vocab"),
        (["verify", "--parts", "nothing"], "--parts"),
        (["verify", "--selectors", "argmax"], "--selectors"),
        (["verify", "--full", "--quick"], "not allowed"),
        (["conformance", "--kernels", "maybe"], "--kernels"),
    ],
)
def test_bad_arguments_are_refused_when_parsed(args: list[str], needle: str, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    monkeypatch.chdir(ROOT)  # README.md: a file that is not a dump
    rc, out, err = run(args, capsys)
    assert_refused(rc, err, needle)
    assert out == ""


def test_a_replay_file_that_is_not_a_dump_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    rc, _, err = run(["verify", "--replay", str(other)], capsys)
    assert_refused(rc, err, "not a failing case")


@pytest.mark.parametrize(
    "args",
    [["verify", "--quick"], ["audit-e2e", "--n", "10"], ["demo", "--rounds", "1"], ["conformance", "--kernels", "yes"]],
)
def test_a_missing_extra_is_named(args: list[str], monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """torch that does not import (None in sys.modules: `import torch` raises ImportError): one line naming it and
    the extra that brings it, before any work."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    monkeypatch.setitem(sys.modules, "torch", None)
    rc, _, err = run(args, capsys)
    assert_refused(rc, err, "torch", "pip install 'pp3-exact[kernels]'")


def test_a_missing_plot_extra_is_named_before_any_work(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, _, err = run(["audit-e2e", "--plot", "x.png"], capsys)
    assert_refused(rc, err, "matplotlib", "pip install 'pp3-exact[plot]'")


@pytest.mark.skipif(CUDA, reason="a CUDA GPU is there")
@pytest.mark.parametrize("command", [["demo"], ["audit-e2e", "--n", "10"]])
def test_device_cuda_without_cuda_is_refused(command: list[str], monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    rc, _, err = run([*command, "--device", "cuda"], capsys)
    assert_refused(rc, err, "--device cuda", "no CUDA GPU")


@pytest.mark.skipif(CUDA, reason="a CUDA GPU is there: the kernels run")
@pytest.mark.parametrize(
    "args",
    [["demo", "--verifier", "triton"], ["audit-e2e", "--verifier", "triton"], ["verify", "--quick"],
     ["conformance", "--kernels", "yes"]],
)
def test_the_kernels_on_a_cpu_without_the_interpreter_are_refused(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rc, _, err = run(args, capsys)
    assert_refused(rc, err, "TRITON_INTERPRET=1")


def test_audit_needs_the_sampled_gate(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(SAMPLED_ENV, raising=False)
    rc, _, err = run(["audit-e2e", "--n", "10"], capsys)
    assert_refused(rc, err, SAMPLED_ENV)


def test_unwritable_outputs_are_refused_before_any_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    missing = str(tmp_path / "no" / "such" / "folder" / "tables.md")
    rc, _, err = run(["audit-e2e", "--markdown", missing], capsys)  # before the audit's minutes of work
    assert_refused(rc, err, "--markdown")
    if KERNELS_RUN:
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        rc, _, err = run(["verify", "--quick", "--out", str(blocker / "failures")], capsys)
        assert_refused(rc, err, "--out")


@needs_kernels
def test_verify_refuses_a_run_that_checks_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    if CUDA:
        pytest.skip("a GPU runs 10^6 bulk rows by default")
    rc, _, err = run(["verify", "--bulk-only"], capsys)  # no GPU: 0 bulk rows by default
    assert_refused(rc, err, "check nothing")


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command's work fails if it starts: a refusal must come first."""
    from pp3 import speculate
    from pp3.audit import e2e, parity

    def ran(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("the run started")

    for module, name in ((parity, "run"), (parity, "replay"), (e2e, "run_audit"), (speculate, "speculation_round")):
        monkeypatch.setattr(module, name, ran)
    monkeypatch.setenv(SAMPLED_ENV, "1")


def _dump(tmp_path: Path) -> str:
    """A selector case as pp3 verify writes it (kernel and reference outputs both the reference's)."""
    from pp3.audit import parity
    from pp3.testing.call import make_case

    call = make_case("fp32", [[1.0, 2.0, 3.0]])
    ref = call.run_reference()
    return str(parity.dump_failure(tmp_path / "dump", call, ref, ref))


CANNOT_APPLY = [
    (["verify", "--parts", "conformance", "--bulk-rows", "4", "--bulk-vocab", "64"], "--bulk-rows"),  # the issue's
    (["verify", "--bulk-rows", "0", "--bulk-seed", "3"], "--bulk-seed"),
    (["verify", "--bulk-rows", "0", "--bulk-vocab", "64"], "--bulk-vocab"),
    (["verify", "--bulk-rows", "0", "--bulk-greedy"], "--bulk-greedy"),
    (["verify", "--parts", "verifier", "--bulk-greedy"], "--bulk-greedy"),
    (["verify", "--quick", "--parts", "conformance"], "--quick"),
    (["verify", "--bulk-only", "--bulk-rows", "4", "--quick"], "--quick"),
    (["verify", "--bulk-only", "--bulk-rows", "4", "--parts", "selector"], "--parts"),
    (["verify", "--replay", "DUMP", "--parts", "selector"], "--parts"),
    (["verify", "--replay", "DUMP", "--bulk-seed", "1"], "--bulk-seed"),
    (["verify", "--replay", "DUMP", "--out", "somewhere"], "--out"),
    (["verify", "--replay", "DUMP", "--law"], "--law"),
    (["verify", "--replay", "DUMP", "--expected-failures", "x.toml"], "--expected-failures"),
    (["verify", "--law-n", "500"], "--law-n"),  # pp3's kernels claim bit-exactness: no law audit without --law
    (["verify", "--impl", "verifier=pp3-reference", "--parts", "selector"], "--parts"),
    (["demo", "--replays", "10"], "--replays"),
    (["audit-e2e", "--no-mutants", "--mutant-n", "10"], "--mutant-n"),
    (["audit-e2e", "--no-mutants", "--mutant-temperatures", "1.0"], "--mutant-temperatures"),
]


@needs_kernels
@pytest.mark.parametrize(("args", "flag"), CANNOT_APPLY, ids=[" ".join(a) for a, _ in CANNOT_APPLY])
def test_an_option_that_cannot_apply_is_refused(args: list[str], flag: str, tmp_path: Path, nothing_runs: None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An option that would be ignored is refused (argparse's error path: one line naming it, exit status 2) before
    any work, never dropped while the run passes over what it did not check."""
    rc, out, err = run([_dump(tmp_path) if a == "DUMP" else a for a in args], capsys)
    assert_refused(rc, err, flag, f"see pp3 {args[0]} --help")
    assert err.split(": ")[1].startswith(flag) and out == ""


@pytest.mark.parametrize(
    ("args", "refused"),
    [(["--n", "1", "--no-mutants"], "--n 1"), (["--n", "5"], "--n 5"), (["--n", "1000", "--mutant-n", "2"],
                                                                        "--mutant-n 2")],
    ids=["n-1-no-mutants (the issue's)", "n-5", "mutant-n-2"],
)
def test_an_audit_too_small_to_reject_anything_is_refused(args: list[str], refused: str, nothing_runs: None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A run so small that some chi-square test has one group (df 0: p = 1 whatever it sees) has no power: refused
    before it runs, not a PASS."""
    rc, out, err = run(["audit-e2e", *args], capsys)
    assert_refused(rc, err, refused, "give")
    assert out == ""


def test_an_audit_without_planted_bugs_says_its_power_is_not_shown(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from pp3.audit import e2e

    monkeypatch.setenv(SAMPLED_ENV, "1")
    n = e2e.least_n(e2e.make_setup(), [1.0], ("sampled", "greedy"))
    rc, out, _ = run(["audit-e2e", "--n", str(n), "--temperatures", "1.0", "--no-mutants", "--quiet"], capsys)
    assert rc == 0 and "audit-e2e: PASS (" in out and "no planted bug run: the power to catch one is not shown" in out


@needs_kernels
@pytest.mark.skipif(CUDA, reason="a GPU runs 10^6 bulk rows by default: the bulk options apply")
@pytest.mark.parametrize("flag", [["--bulk-seed", "3"], ["--bulk-vocab", "64"], ["--bulk-greedy"]], ids=str)
def test_bulk_options_without_bulk_rows_are_refused(flag: list[str], nothing_runs: None,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run(["verify", *flag], capsys)
    assert_refused(rc, err, flag[0], "without a GPU")


@needs_kernels
@pytest.mark.interpreter
def test_a_selector_part_whose_bulk_rows_checked_nothing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The bulk rows were asked for and checked 0 rows (a bulk run that checks nothing): the selector part fails,
    though its suite checked a row and found no mismatch. Its verdict is computed from each check's rows."""
    from pp3.audit import parity
    from pp3.testing.call import make_case

    monkeypatch.setattr(parity, "suites", lambda size: iter([("edges", make_case("fp32", [[1.0, 2.0, 3.0]]))]))
    monkeypatch.setattr(parity, "invariance", lambda size: iter([]))
    monkeypatch.setattr(parity, "bulk", lambda *args, **kw: 0)
    args = ["verify", "--quick", "--parts", "selector", "--selectors", "propose", "--bulk-rows", "4", "--out",
            str(tmp_path)]
    rc, out, _ = run([*args, "--json"], capsys)
    doc = document(out)
    assert rc == 1 and doc["verdict"] == "FAIL" and doc["selector"]["verdict"] == "FAIL", doc["selector"]
    assert doc["selector"]["checked_rows"] == {"propose": 1, "bulk": 0} and doc["selector"]["mismatches"] == 0
    rc, out, _ = run(args, capsys)
    assert rc == 1 and "verify: FAIL (selector FAIL (1 rows; 0 rows: bulk)" in out, out


@needs_kernels
def test_a_conformance_file_the_kernels_do_not_export_fails_the_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A conformance file whose entry the installed kernels do not export (no expf) fails on them by name (raised,
    every item counted), so pp3 verify's conformance part, asked to check the kernels, fails; the reference passes
    it. (A file an implementation's declaration excludes, as the draft trees' on the kernels, is skipped instead:
    ``test_harness``.)"""
    from pp3.audit import conformance
    from pp3.harness import builtin
    from pp3.harness.protocol import NotExported

    real = builtin._kernel

    def without_expf(name: str) -> Any:
        if name == "expf":
            raise NotExported("pp3.kernels exports no expf")
        return real(name)

    monkeypatch.setattr(builtin, "_kernel", without_expf)
    monkeypatch.setattr(conformance, "FILES", {"expf.wc": conformance.FILES["expf.wc"]})
    monkeypatch.setattr(conformance, "SWEEPS", {})
    rc, out, _ = run(["verify", "--parts", "conformance", "--json", "--out", str(tmp_path)], capsys)
    doc = document(out)["conformance"]
    n = doc["checked_rows"]["expf.wc (reference)"]
    assert rc == 1 and doc["verdict"] == "FAIL" and n > 0, doc
    assert doc["checked_rows"] == {"expf.wc (reference)": n, "expf.wc (kernels)": n} and doc["mismatches"] == n
    assert doc["failures"]["kernels"]["expf"]["failure"] == "raised"


@needs_kernels
def test_verify_full_in_the_interpreter_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    if CUDA:
        pytest.skip("a CUDA GPU runs the full sizes")
    rc, _, err = run(["verify", "--full"], capsys)  # V up to 262144 in the interpreter would take hours
    assert_refused(rc, err, "--full", "CUDA GPU")


@pytest.mark.parametrize(
    "args", [[], ["nope"], ["demo", "--rank", "2000"], ["verify", "--replay", "README.md"]], ids=repr
)
def test_refusals_of_the_real_program_print_no_traceback(args: list[str]) -> None:
    """``python -m pp3`` in a fresh process: exit status 2 and no traceback (the usage alone for no arguments)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "pp3", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stdout == "", res
    assert res.stderr.startswith("usage: pp3") if not args else len(res.stderr.strip().splitlines()) == 1, res


# ---------------------------------------------------------------------------------------------- JSON documents


def test_conformance_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["conformance", "--kernels", "no", "--json"], capsys)
    doc = document(out)
    assert rc == 0 and doc["verdict"] == "PASS" and doc["implementations"] == ["reference"]
    assert {r["file"] for r in doc["results"]} == {
        "dyadic24-floor-first-v1.jsonl", "accept-dyadic24-v1.jsonl", "philox4x64_10.kat", "expf.wc",
        "tree-draw-dyadic24-v1.jsonl", "accept-tree-dyadic24-v1.jsonl", "walk-tree-dyadic24-v1.jsonl"}


def test_conformance_fails_on_a_planted_reference_bug(capsys: pytest.CaptureFixture[str]) -> None:
    with mutants.patched("draw-off-by-one"):
        rc, out, _ = run(["conformance", "--kernels", "no", "--json"], capsys)
    doc = document(out)
    assert rc == 1 and doc["verdict"] == "FAIL"


def test_demo_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    args = ["demo", "--vocab", "300", "--rank", "8", "--rounds", "2", "--device", "cpu", "--json", "--quiet"]
    rc, out, _ = run(args, capsys)
    doc = document(out)
    assert rc == 0 and doc["verdict"] == "PASS" and set(doc["modes"]) == {"greedy", "sampled"}
    for r in doc["modes"].values():
        assert 1.0 <= r["tokens_per_step"] <= 6.0


def _wrong_verdicts(real: Callable[..., Any]) -> Callable[..., Any]:
    """A verifier that returns the real one's verdict with every row's accepted count off by one (mod D + 1)."""
    import dataclasses

    def verify(**kw: Any) -> Any:
        v = real(**kw)
        d = np.asarray(kw["draft_tokens"]).shape[1]
        return dataclasses.replace(v, accepted=((v.accepted + 1) % (d + 1)).astype(np.int32))

    return verify


@needs_kernels
@pytest.mark.interpreter
@pytest.mark.parametrize("planted", [False, True])
def test_demo_with_the_kernel_verifier_checks_every_verdict(
    planted: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--verifier triton: every round's kernel verdict equals the reference's (PASS); a wrong one fails the demo."""
    from pp3.testing import call

    monkeypatch.setenv(SAMPLED_ENV, "1")
    if planted:
        monkeypatch.setattr(call, "kernel_verifier", _wrong_verdicts(call.kernel_verifier))
    args = ["demo", "--vocab", "64", "--rank", "8", "--depth", "2", "--batch", "2", "--rounds", "2", "--device", "cpu",
            "--verifier", "triton", "--json", "--quiet"]
    rc, out, _ = run(args, capsys)
    doc = document(out)
    assert doc["checks"]["verdicts"] == 4  # 2 rounds of each mode
    if planted:
        assert rc == 1 and doc["verdict"] == "FAIL" and doc["checks"]["verdicts_differing_from_reference"] >= 1
    else:
        assert rc == 0 and doc["verdict"] == "PASS" and doc["checks"]["verdicts_differing_from_reference"] == 0


def test_audit_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    args = ["audit-e2e", "--n", "3000", "--temperatures", "1.0", "--no-mutants", "--json", "--quiet"]
    rc, out, _ = run(args, capsys)
    log = document(out)
    assert rc == 0 and log["verdict"] == "PASS" and [c["mode"] for c in log["real"]["cases"]] == ["sampled", "greedy"]


@needs_kernels
def test_verify_json_is_one_document_with_the_stamp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["verify", "--bulk-only", "--bulk-rows", "8", "--bulk-vocab", "40", "--json", "--out", str(tmp_path)]
    rc, out, err = run(args, capsys)
    doc = document(out)
    assert rc == 0 and doc["verdict"] == "PASS" and doc["selector"]["suites"]["bulk"]["rows"] == 8
    assert doc["parts"] == ["selector"] and doc["verifier"]["verdict"] == "SKIPPED"
    assert {"commit", "dirty", "python", "packages", "gpu"} <= set(doc["environment"])
    assert "bulk" in err  # progress on stderr


# ---------------------------------------------------------------------------------------------- planted bugs


def _off_by_one_position(real: Callable[..., Any]) -> Callable[..., Any]:
    """``pp3.kernels.verify`` keyed one position late (draft 0 at position + 1): T0 rows are unaffected."""

    def verify(target_logits: Any, target_temperature: Any, draft_tokens: Any, draft_status: Any, draft_ids: Any,
               draft_tickets: Any, seed: Any, round: Any, position: Any, **kw: Any) -> Any:
        return real(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets, seed,
                    round, position + 1, **kw)

    return verify


def _round_plus_one(real: Callable[..., Any]) -> Callable[..., Any]:
    """A selector launcher (``propose`` / ``finalize``) keyed with the next round: T0 rows are unaffected."""

    def launch(first: Any, target_temperature: Any, seed: Any, round: Any, *rest: Any, **kw: Any) -> Any:
        return real(first, target_temperature, seed, round + 1 if isinstance(round, torch.Tensor) else
                    [r + 1 for r in round], *rest, **kw)

    return launch


def _verify_and_replay(part: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       monkeypatch: pytest.MonkeyPatch, *only: str) -> None:
    """``pp3 verify --quick --parts PART [ONLY]`` fails (exit 1, FAIL, a dump of the first mismatching call); the
    dump replays the mismatch while the bug is there (exit 1) and equals the reference once it is gone (exit 0)."""
    rc, out, err = run(["verify", "--quick", "--parts", part, *only, "--json", "--out", str(tmp_path)], capsys)
    doc = document(out)
    assert rc == 1 and doc["verdict"] == "FAIL" and doc[part]["verdict"] == "FAIL", doc[part]
    assert doc[part]["mismatches"] > 0 and "MISMATCH" in err
    dump = Path(doc[part]["first_failure"])
    kernel = "selector" if part == "selector" else "verifier"
    assert dump.name == f"{kernel}_first.npz" and dump.with_suffix(".json").exists()
    report = json.loads(dump.with_suffix(".json").read_text())
    assert report["replay"] == f"pp3 verify --replay {dump}" and report["rows"]
    rc, out, _ = run(["verify", "--replay", str(dump)], capsys)
    assert rc == 1 and "mismatching rows per field" in out and "replay: FAIL" in out
    rc, out, _ = run(["verify", "--replay", str(dump), "--json"], capsys)
    replayed = document(out)
    assert rc == 1 and replayed["verdict"] == "FAIL" and replayed["kernel"] == kernel
    assert replayed["case"] == report["case"] and any(replayed["mismatching_rows_per_field"].values())
    monkeypatch.undo()
    rc, out, _ = run(["verify", "--replay", str(dump), "--json"], capsys)
    assert rc == 0 and document(out)["verdict"] == "PASS"


@needs_kernels
@pytest.mark.interpreter
@pytest.mark.parametrize("where", ["kernel", "reference"])
def test_verify_fails_on_a_planted_verifier_bug(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The verifier part of the main job sees a verifier that disagrees with the reference: the kernel keyed one
    position late, or the catalogue's residual-unnormalized bug (SPEC.md §11.7) planted in the reference."""
    if where == "kernel":
        monkeypatch.setattr(pp3.kernels, "verify", _off_by_one_position(pp3.kernels.verify))
    else:
        monkeypatch.setattr(*mutants.mutant("residual-unnormalized").target_and_replacement())
    _verify_and_replay("verifier", tmp_path, capsys, monkeypatch)


@needs_kernels
@pytest.mark.interpreter
def test_verify_fails_on_a_planted_selector_bug(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The selector part sees a kernel keyed with the next round (sampled rows draw other tokens), through its
    ``propose`` suite (the part's other suites run the same cases through other selectors: make verify runs them
    all; ``test_verify_runs_the_selector_suites_it_names`` shows each suite failing on its own bug)."""
    monkeypatch.setattr(pp3.kernels, "propose", _round_plus_one(pp3.kernels.propose))
    _verify_and_replay("selector", tmp_path, capsys, monkeypatch, "--selectors", "propose")


def _greedy_token_plus_one(real: Any) -> Any:
    """A planted bug: the greedy selector's token one above the right one on row 0."""

    def greedy(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        out.token[0] += 1
        return out

    return greedy


@needs_kernels
@pytest.mark.interpreter
def test_verify_runs_the_selector_suites_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--selectors`` runs exactly the suites it names: a planted greedy-selector bug fails ``--selectors greedy``
    and ``rescan`` (each through its own calls) and passes ``--selectors tiles``; naming them without the selector
    part, or with the bulk rows alone, is refused before anything runs."""
    monkeypatch.setattr(pp3.kernels, "greedy_sharded", _greedy_token_plus_one(pp3.kernels.greedy_sharded))
    for kind, want in (("greedy", 1), ("rescan", 1), ("tiles", 0)):
        rc, out, err = run(["verify", "--quick", "--parts", "selector", "--selectors", kind, "--json", "--out",
                            str(tmp_path)], capsys)
        doc = document(out)
        assert rc == want and (doc["selector"]["mismatches"] > 0) == bool(want), (kind, doc["selector"])
        assert f"  {kind}:" in err and not any(f"  {k}:" in err for k in ("greedy", "rescan", "tiles") if k != kind)
    for bad in (["--parts", "verifier"], ["--bulk-only", "--bulk-rows", "1"]):
        rc, _, err = run(["verify", "--quick", *bad, "--selectors", "greedy"], capsys)
        assert rc == 2 and "--selectors" in err


@needs_kernels
@pytest.mark.interpreter
def test_verify_fails_on_a_failing_conformance_file(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from pp3.audit import conformance

    monkeypatch.setattr(conformance, "FILES", {"expf.wc": lambda s: (4, 0 if s.is_reference else 1)})
    rc, out, _ = run(["verify", "--parts", "conformance", "--json"], capsys)
    doc = document(out)
    assert rc == 1 and doc["verdict"] == "FAIL" and doc["conformance"]["verdict"] == "FAIL"


def _written_cases(tmp_path: Path) -> dict[str, Path]:
    """A selector and a verifier case as pp3 verify writes them (both outputs the reference's)."""
    from pp3.audit import parity
    from pp3.testing.call import AcceptCall, make_case
    from pp3.testing.drafts import random_case

    sel = make_case("fp32", [[1.0, 2.0, 3.0]])
    acc = AcceptCall.of(**random_case(np.random.default_rng(1), 2, 1, 8, 1.0))
    return {"selector": parity.dump_failure(tmp_path / "s", sel, sel.run_reference(), sel.run_reference()),
            "verifier": parity.dump_accept_failure(tmp_path / "v", acc, acc.run_reference(), acc.run_reference())}


def _rewritten(path: Path, to: Path, **changes: Any) -> Path:
    """The file at ``path`` with some members replaced (None: removed), written to ``to``."""
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    for k, v in changes.items():
        if v is None:
            members.pop(k)
        else:
            members[k] = v
    np.savez(to, **members)
    return to


DAMAGED: list[tuple[str, Callable[[dict[str, Path], Path], Path], str]] = [
    ("a zip header and junk (the issue's)", lambda c, d: _write(d / "bad.npz", b"PK\003\004junk"), "BadZipFile"),
    ("a case cut in half", lambda c, d: _write(d / "cut.npz", c["verifier"].read_bytes()[:300]), "not a .npz"),
    ("an unknown fmt (the issue's KeyError)", lambda c, d: _rewritten(c["selector"], d / "fmt.npz", fmt="fp8"),
     "fmt: 'fp8'"),
    ("an unknown kernel", lambda c, d: _rewritten(c["selector"], d / "k.npz", kernel="sampler"), "kernel: 'sampler'"),
    ("a member missing", lambda c, d: _rewritten(c["verifier"], d / "m.npz", draft_ids=None), "no member 'draft_ids'"),
    ("bits of the wrong dtype", lambda c, d: _rewritten(c["selector"], d / "b.npz", bits=np.zeros((1, 3), np.int64)),
     "bits: expected uint32"),
    ("keys of the wrong length", lambda c, d: _rewritten(c["verifier"], d / "s.npz", seed=np.zeros(3, np.uint64)),
     "seed: expected uint64 of shape (2,)"),
    ("a pickled member", lambda c, d: _rewritten(c["selector"], d / "p.npz", name=np.array([{}], dtype=object)),
     "not a .npz"),
    ("a bad tile", lambda c, d: _rewritten(c["selector"], d / "t.npz", tile=np.int64(48)), "tile: expected -1 or"),
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("what", "make", "needle"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_or_foreign_replay_file_is_refused(what: str, make: Callable[[dict[str, Path], Path], Path],
                                                     needle: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """pp3 verify --replay on a file that is not a case it wrote, or a damaged one: one line saying what is wrong,
    exit status 2, no traceback, before any kernel runs."""
    bad = make(_written_cases(tmp_path), tmp_path)
    rc, out, err = run(["verify", "--replay", str(bad)], capsys)
    assert_refused(rc, err, "--replay", "not a failing case", needle)
    assert out == ""


@needs_kernels
def test_a_replay_the_reference_refuses_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A well-formed case whose call the reference refuses (tau 0: SPEC.md §2) is no case pp3 verify wrote: refused
    in one line, before the kernel runs."""
    bad = _rewritten(_written_cases(tmp_path)["selector"], tmp_path / "tau.npz", tau=np.float32(0.0))
    rc, out, err = run(["verify", "--replay", str(bad)], capsys)
    assert_refused(rc, err, "--replay", "the reference refuses the recorded call", "tau")
    assert out == ""
