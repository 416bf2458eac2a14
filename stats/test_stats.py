"""The CI-sized statistical audits (``pytest stats -m stats``): the quick suite on the reference and on every
planted bug, plus unit checks of the statistics and of the GPU sampler's plumbing (through a torch-CPU stand-in).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pp3.reference import propose
from stats import audits, chisq, report
from stats.audits import Config, SamplerReport, Suite
from stats.samplers import Composed, KernelSampler, mutants

pytestmark = pytest.mark.stats

# The audits each planted bug must fail (it may fail more). STATS.md "Power" explains each line.
EXPECTED_CATCH = {
    "draw-off-by-one": {"draw-map"},
    "largest-remainder": {"tickets-exact", "fidelity/flood"},
    "remainder-lowest-id": {"tickets-exact", "fidelity/flood"},
    "uniform-23-bits": {"uniform/low12"},
    "counter-reuse": {"pair/round/high", "pair/round/low"},
    "position-lsb": {"pair/position/high", "pair/position/low"},
    "seed-lsb": {"pair/seed/high", "pair/seed/low"},
    "domain-collision": {"pair/domain/high", "pair/domain/low"},
    "t0-sampled": {"t0"},
}


@pytest.fixture(scope="module")
def quick() -> tuple[Suite, dict[str, SamplerReport]]:
    """The quick suite, run once: the reference and the planted bugs on the same keys."""
    suite = Suite([Composed(), *mutants()], audits.QUICK)
    return suite, suite.run_all()


def test_reference_passes_every_audit(quick: tuple[Suite, dict[str, SamplerReport]]) -> None:
    rep = quick[1]["reference"]
    assert not rep.rejected, "reference rejected:\n" + report.results_table(rep)
    chi2 = [r for r in rep.results if r.kind == "chi2"]
    assert len(chi2) == 27 and all(r.p is not None and r.p_holm is not None for r in chi2)


@pytest.mark.parametrize("name", sorted(EXPECTED_CATCH))
def test_planted_bug_is_caught(quick: tuple[Suite, dict[str, SamplerReport]], name: str) -> None:
    rep = quick[1][name]
    caught = {r.audit for r in rep.rejected}
    missing = EXPECTED_CATCH[name] - caught
    assert not missing, f"{name}: {sorted(missing)} did not reject; caught by {sorted(caught)}"


def test_every_mutant_has_an_expectation() -> None:
    assert {m.name for m in mutants()} == set(EXPECTED_CATCH)


def test_report_files(quick: tuple[Suite, dict[str, SamplerReport]], tmp_path: Path) -> None:
    suite, reports = quick
    env = report.environment("cpu")
    report.to_json(tmp_path / "stats.json", audits.QUICK, env, reports, suite, 0.0)
    data = json.loads((tmp_path / "stats.json").read_text())
    logged = data["samplers"]["reference"]["results"]
    assert len(logged) == len(reports["reference"].results)
    assert all(r["p"] is not None for r in logged if r["kind"] != "exact")
    assert data["samplers"]["reference"]["verdict"] == "PASS"
    assert all(data["samplers"][m]["verdict"] == "CAUGHT" for m in EXPECTED_CATCH)
    report.plot(tmp_path / "stats.png", suite, ["reference"], [reports[m] for m in EXPECTED_CATCH])
    assert (tmp_path / "stats.png").read_bytes()[:4] == b"\x89PNG"


# --- the statistics ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "groups"),
    [
        ([10.0, 10.0, 10.0], [0, 1, 2]),  # nothing to merge
        ([1.0, 2.0, 3.0, 100.0], [0, 0, 0, 1]),  # 1 + 2 + 3 = 6 >= 5 closes the first group
        ([1.0, 100.0, 2.0, 3.0], [0, 1, 0, 0]),  # merged in order of size, not of position
        ([1.0, 100.0, 2.0], [0, 0, 0]),  # 1 + 2 < 5, so the next bin (100) joins them
        ([2.0, 2.0, 2.0, 2.0, 2.0], [0, 0, 0, 0, 0]),  # 6 closes a group; the short tail (4) joins it
        ([0.5, 0.5], [0, 0]),  # never reaches 5: one group, nothing to test
    ],
)
def test_merge_rule(expected: list[float], groups: list[int]) -> None:
    labels = chisq.merge_groups(np.array(expected))
    # compare partitions, not label names
    canon = {int(g): i for i, g in enumerate(dict.fromkeys(labels.tolist()))}
    got = [canon[int(g)] for g in labels]
    want_canon = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    assert got == [want_canon[g] for g in groups]
    sums = np.bincount(labels, weights=np.array(expected))
    assert sums.min() >= 5.0 or labels.max() == 0


def test_pearson_support_check_rejects_impossible_draws() -> None:
    probs = np.array([0.5, 0.0, 0.5])
    assert chisq.pearson([50, 0, 50], probs).p == 1.0
    res = chisq.pearson([50, 1, 49], probs)
    assert res.p == 0.0 and res.support_violations == 1


def test_pearson_matches_scipy_when_no_merging() -> None:
    from scipy import stats as sps

    obs = np.array([30, 20, 25, 25])
    probs = np.full(4, 0.25)
    assert chisq.pearson(obs, probs).p == pytest.approx(sps.chisquare(obs, np.full(4, 25.0)).pvalue, rel=1e-12)


def test_holm_adjustment() -> None:
    adj = chisq.holm([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 -> max(0.06, 0.04) = 0.06
    np.testing.assert_allclose(adj, [0.03, 0.06, 0.06, 0.02])


# --- the GPU sampler's plumbing ------------------------------------------------------------------------------------


def _torch_reference(broken: bool = False) -> Any:
    """A stand-in for ``pp3.kernels.propose`` with its interface (torch in, torch out), computed by the reference."""
    torch = pytest.importorskip("torch")

    def fake(logits: Any, temperature: Any, seed: Any, round_: Any, position: Any, tau: float) -> Any:
        seed64, round64, position64 = (t.cpu().numpy().view(np.uint64) for t in (seed, round_, position))
        out = propose(logits.cpu().numpy(), temperature.cpu().numpy(), seed64, round64, position64, tau=tau)
        token = out.token.copy()
        if broken:
            token[::97] = out.ids[::97, 0]  # a kernel that sometimes returns slot 0's token
        return SimpleNamespace(
            status=torch.from_numpy(out.status),
            token=torch.from_numpy(token),
            ids=torch.from_numpy(out.ids),
            tickets=torch.from_numpy(out.tickets),
        )

    return fake


TINY = Config("tiny", case_n=512, heavy_n=4096, uniform_n=1 << 14, pair_n=1 << 13, t0_keys=64,
              consistency_rows=64, enumerate_all=False)  # fmt: skip


def test_kernel_sampler_plumbing_with_a_reference_stand_in() -> None:
    kernel = KernelSampler(_torch_reference(), "cpu", name="stand-in")
    rep = Suite([kernel], TINY).run_all()["stand-in"]
    assert not rep.rejected, report.results_table(rep)
    audited = {r.audit for r in rep.results}
    assert {"parity", "consistency", "t0", "tickets-exact", "uniform/high5", "pair/round/high"} <= audited
    assert not any(a.startswith(("draw-map", "uniform/low", "pair/domain")) for a in audited)  # tokens only


def test_kernel_parity_catches_a_wrong_token() -> None:
    kernel = KernelSampler(_torch_reference(broken=True), "cpu", name="broken")
    suite = Suite([kernel], TINY)
    suite.run_cases()
    failed = {r.audit for r in suite.reports["broken"].results if r.exact and not r.passed}
    assert failed == {"parity"}  # consistently wrong: only the comparison with the reference sees it


@pytest.mark.parametrize("args", [["--n", "0"], ["--n", "-5"]])
def test_a_run_that_draws_nothing_is_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from stats.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["--quick", "--device", "cpu", *args])
    assert exc.value.code == 2 and "--n" in capsys.readouterr().err
