"""The peer-verifier adapter (pp3.testing.peers) on the CPU, through its plain-torch twin of FlashInfer's
``chain_speculative_sampling`` (``torch_chain``, the rule of Leviathan et al. as FlashInfer documents it): the audit
passes with it and rejects the planted bug (the greedy path's q); the exact target law it is fed. The audit of
FlashInfer itself runs on the H200 (``pp3 audit-e2e --device cuda --verifier flashinfer``, VERIFY.md)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pp3.audit import e2e  # noqa: E402
from pp3.drafter import SAMPLED_ENV  # noqa: E402
from pp3.reference import accept  # noqa: E402
from pp3.testing.peers import chain_verifier, target_probs, torch_chain  # noqa: E402


def test_the_audit_passes_with_the_chain_and_catches_the_greedy_q(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fed pp3's exact q, the chain is lossless with the predicted acceptance (no test of the real family rejects at
    Holm alpha 0.01, fixed seeds); fed the greedy path's point mass on each sampled draft, it stays lossless in law
    but accepts less, and the acceptance test rejects it (as the reference's own q-from-greedy bug, tests/test_e2e)."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    audit = e2e.run_audit(
        e2e.make_setup(),
        20_000,
        temperatures=(0.0, 1.0),
        mutants=(),
        mutant_temperatures=(1.0,),
        seed=2,
        verifier=chain_verifier(torch_chain, device="cpu", seed=0),
        verifier_mutants={"chain-q-from-greedy": chain_verifier(torch_chain, q="greedy", device="cpu", seed=1)},
    )
    print(audit.table())
    print(audit.mutant_table())
    assert not audit.real.rejected, audit.to_json()["real"]
    (wrong,) = audit.mutants
    assert wrong.rejected and wrong.cases[0].accept.p < 1e-30, audit.to_json()["mutants"]


def test_target_probs_is_the_exact_target_law() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 11)).astype(np.float32)
    x[1, 2, 4] = -np.inf
    p = target_probs(x, np.array([0.0, 0.7], dtype=np.float32))
    assert (p[0] == np.eye(11)[x[0].argmax(axis=1)]).all()  # T0: the point mass on the argmax
    _, tix = accept.target_tickets(x[1], np.full(3, 0.7, dtype=np.float32))
    assert (p[1] * 2.0**40 == tix).all() and p[1, 2, 4] == 0.0  # P / 2^40, exactly


def test_chain_verifier_refuses_failed_drafts_and_unknown_q() -> None:
    with pytest.raises(ValueError, match="q"):
        chain_verifier(torch_chain, q="dense", device="cpu")  # type: ignore[arg-type]
    verify = chain_verifier(torch_chain, device="cpu")
    with pytest.raises(ValueError, match="draft_status"):
        verify(target_logits=np.zeros((1, 2, 4), np.float32), target_temperature=1.0,
               draft_tokens=np.zeros((1, 1), np.int32), draft_status=np.ones((1, 1), np.int8),
               draft_ids=np.zeros((1, 1, 32), np.int32), draft_tickets=np.zeros((1, 1, 32), np.int32))
