"""The end-to-end audit of draft trees (pp3.audit.e2e_tree), CI-sized: speculative generation with sampled trees
(SPEC.md §12.4, verified by §12.6) and top-k trees (verified by the walk, §12.9) on the chain audit's Markov pair is
lossless (the joint law of the first three tokens), and the audit catches every planted tree bug. Family-wise alpha
0.01 with Holm's correction; the full run is ``make audit-e2e-trees`` (every shape, mode and temperature)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from pp3 import cli
from pp3.audit import e2e, e2e_tree
from pp3.reference import as_tree

ALPHA = 0.01
N_CI = 10_000  # sequences per case: each planted bug is caught at p < 1e-60 on the 2x2 tree at this size


@pytest.fixture(scope="module")
def setup() -> e2e.Setup:
    return e2e.make_setup()


def test_shapes() -> None:
    assert e2e_tree.parents_of((2, 2)) == [-1, 0, 0, 1, 1, 2, 2]
    assert e2e_tree.parents_of((1, 1, 1, 1)) == [-1, 0, 1, 2, 3]
    sizes = {name: as_tree("parents", e2e_tree.parents_of(b)).size for name, b in e2e_tree.SHAPES.items()}
    assert sizes == {"2x2": 7, "4-2-1": 21, "8x1": 9, "chain": 5}


@pytest.mark.stats
def test_real_run_passes_and_every_planted_bug_is_caught(setup: e2e.Setup) -> None:
    real = [e2e_tree.run_case(setup, shape, "sampled", 1.0, N_CI, seed=1) for shape in e2e_tree.SHAPES]
    real += [e2e_tree.run_case(setup, "2x2", "top-k", 1.0, N_CI, seed=1),
             e2e_tree.run_case(setup, "2x2", "sampled", 0.0, N_CI, seed=1)]
    audit = e2e_tree.Audit(
        real=e2e_tree.Family("real", real, ALPHA),
        mutants=[e2e_tree.Family(mu, [e2e_tree.run_case(setup, "2x2", "sampled", 1.0, N_CI, seed=2, mutant=mu)],
                                 ALPHA) for mu in e2e_tree.MUTANTS],
    )
    print(audit.table())
    print(audit.mutant_table())
    assert not audit.real.rejected, audit.to_json()["real"]
    assert all(c.sample.failed == 0 for c in real)
    for fam in audit.mutants:
        assert fam.rejected and fam.cases[0].joint.p < 1e-30, (fam.name, fam.cases[0].row())
    # drawing with replacement repeats children: the verifier refuses those drafts (BAD_DRAFT) rather than lose
    by = {f.name: f for f in audit.mutants}
    assert by["tree-draw-with-replacement"].cases[0].sample.failed > 0
    assert all(by[m].cases[0].sample.failed == 0 for m in e2e_tree.MUTANTS if m != "tree-draw-with-replacement")


def test_cli_runs_the_tree_audit(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["audit-e2e", "--trees", "--n", "200", "--no-mutants", "--shapes", "2x2", "--temperatures", "1",
                   "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["verdict"] == "PASS" and doc["tool"] == "pp3 audit-e2e --trees"
    assert [(c["shape"], c["mode"]) for c in doc["real"]["cases"]] == [("2x2", "sampled"), ("2x2", "top-k")]


def test_cli_runs_the_planted_bugs_at_their_default_temperatures(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --mutant-temperatures each planted bug runs at e2e_tree.MUTANT_TEMPERATURES (the option's default is
    None, so that --no-mutants can tell it was given)."""
    cli.main(["audit-e2e", "--trees", "--n", "200", "--mutant-n", "200", "--shapes", "2x2", "--temperatures", "1",
              "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert [len(f["cases"]) for f in doc["mutants"]] == [2 * len(e2e_tree.MUTANT_TEMPERATURES)] * len(e2e_tree.MUTANTS)


@pytest.mark.parametrize(("args", "words"), [
    (["--trees", "--verifier", "triton"], "--verifier does not apply"),
    (["--trees", "--shapes", "3x3"], "unknown ['3x3']"),
    (["--shapes", "2x2"], "--shapes needs --trees"),
])
def test_cli_refusals(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit-e2e", "--n", "10", *args]) == 2
    assert words in capsys.readouterr().err
