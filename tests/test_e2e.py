"""The end-to-end audit (pp3.audit.e2e), CI-sized: speculative generation with a Markov drafter and a Markov target is
lossless (joint law of the first three tokens) with the predicted acceptance (first-round accepted count), and the
audit catches every planted bug. Family-wise alpha 0.01 with Holm's correction; the full run is
``python -m pp3 audit-e2e`` (10^5 sequences per case on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from pp3.audit import chisq as _chisq
from pp3.audit import e2e
from pp3.drafter import SAMPLED_ENV

ALPHA = 0.01
N_CI = 20_000  # sequences per case: every planted bug is caught at p < 1e-30 at this size (see the p-values)


@pytest.fixture(autouse=True)
def _sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")


@pytest.fixture(scope="module")
def setup() -> e2e.Setup:
    return e2e.make_setup()


def test_chi2_sf_matches_scipy() -> None:
    sps = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 37, 186, 511, 5000):
        for x in (0.0, 0.1, df * 0.5, float(df), df + 3 * np.sqrt(2 * df), 4.0 * df + 50):
            want = float(sps.chi2.sf(x, df))
            got = _chisq.chi2_sf(x, df)
            assert abs(got - want) <= 1e-12 + 1e-9 * want, (df, x, got, want)


def test_pearson_support_violation_and_holm() -> None:
    res = _chisq.pearson([5, 0, 1], [0.5, 0.5, 0.0])
    assert res.p == 0.0 and res.support_violations == 1
    assert _chisq.holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])


def test_theory_is_a_law(setup: e2e.Setup) -> None:
    for t in e2e.TEMPERATURES:
        for mode in e2e.MODES:
            th = e2e.theory(setup, t, mode)
            assert th.joint.sum() == pytest.approx(1.0, abs=1e-12)
            assert th.accept_hist.sum() == pytest.approx(1.0, abs=1e-12)
            assert (th.accept_hist >= 0).all()
    # acceptance at the first position is sum_y min(p, q) from the prompt token
    th = e2e.theory(setup, 1.0, "sampled")
    assert th.rate[0] == pytest.approx(np.minimum(th.p, th.q)[setup.start].sum(), abs=1e-15)


@pytest.mark.stats
def test_a_run_with_a_test_that_cannot_reject_is_refused(setup: e2e.Setup) -> None:
    """Below ``least_n`` sequences per case some test merges into one group (df 0, p = 1 whatever it sees): such a
    run has no power and is refused, naming n (or mutant_n); at ``least_n`` every test of a law with two or more
    outcomes has a degree of freedom."""
    least = e2e.least_n(setup, (1.0,), e2e.MODES)
    assert least > 1
    with pytest.raises(ValueError, match=r"^n: 1 sequences per case leave a test with one group"):
        e2e.run_audit(setup, 1, temperatures=(1.0,), mutants=())
    with pytest.raises(ValueError, match=rf"^n: {least - 1} "):
        e2e.run_audit(setup, least - 1, temperatures=(1.0,), mutants=())
    with pytest.raises(ValueError, match=r"^mutant_n: 2 "):
        e2e.run_audit(setup, least, temperatures=(1.0,), mutant_temperatures=(1.0,), mutant_n=2)
    audit = e2e.run_audit(setup, least, temperatures=(1.0,), mutants=())
    for case in audit.real.cases:
        for test, law in ((case.joint, case.theory.joint), (case.accept, case.theory.accept_hist)):
            assert test.df >= 1 or np.count_nonzero(law) < 2, (case.mode, test)


def test_real_run_passes_and_every_planted_bug_is_caught(setup: e2e.Setup) -> None:
    audit = e2e.run_audit(
        setup,
        N_CI,
        temperatures=(0.0, 1.0),
        modes=e2e.MODES,
        mutant_temperatures=(1.0,),
        alpha=ALPHA,
        seed=1,
    )
    log = audit.to_json()
    print(audit.table())
    print(audit.mutant_table())
    assert not audit.real.rejected, log["real"]
    for fam in audit.mutants:
        assert fam.rejected, (fam.name, log)
    # the q-from-greedy bug is lossless in law (a point-mass q is a valid proposal for the token it names) but
    # accepts less: only the acceptance test sees it. The other two bias the tokens themselves.
    by = {f.name: f for f in audit.mutants}
    assert by["q-from-greedy"].cases[0].joint.p > 1e-4
    assert by["q-from-greedy"].cases[0].accept.p < 1e-30
    assert by["domain-collision"].cases[0].joint.p < 1e-30
    assert by["residual-unnormalized"].cases[0].joint.p < 1e-30


@pytest.mark.stats
def test_measured_acceptance_is_within_4_sigma_of_theory(setup: e2e.Setup) -> None:
    case = e2e.run_case(setup, 2.0, "sampled", N_CI, seed=3)
    sd = np.sqrt(case.theory.accept_hist @ (np.arange(6) / 5.0) ** 2 - case.theory.acceptance**2) / np.sqrt(N_CI)
    assert abs(case.sample.acceptance - case.theory.acceptance) < 4 * sd
