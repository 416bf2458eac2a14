"""The lossless-in-law verdict (``pp3 verify``'s second verdict): for an implementation that does not claim
bit-exactness (FlashInfer's chain fed pp3's exact q, an engine's own sampler), or for any one where it is asked
for, whether its outputs follow the law that
pp3's semantic ID proves (SPEC.md §11.9): statistical audits at a stated family-wise alpha, Holm-corrected, whose
power is shown in the same run on planted bugs.

- A verifier: the end-to-end audit (``pp3.audit.e2e``): speculative generation with a Markov drafter and target,
  Pearson chi-square of the first three tokens' joint law and of the first round's accepted count against their
  exact laws, at every temperature, sampled and greedy drafting, Holm over the family; its power: each planted bug
  of ``pp3.audit.e2e.MUTANTS`` (planted in the reference) run at ``mutant_n`` sequences per case must be rejected by
  its own family at the same alpha. PASS iff the implementation's family rejects nothing and every planted bug is
  rejected. A call of the implementation that fails by name (``pp3.harness.guard``) fails the verdict, with its
  replay file.
- A selector: not judged here. Its chi-square audits (``stats/``, ``python -m stats``: the draws against the
  tickets, with the catalogue's planted bugs as their power) are a repository tool, outside the package; a selector
  that does not claim bit-exactness gets a law verdict ``SKIPPED`` that says so.

What a PASS means: no departure from the law was seen at this alpha with this many draws, where the planted bugs
(departures of the stated sizes) were seen. It does not mean bit-exactness, and it says nothing of inputs the audits
do not draw (failed rows, other vocabularies): the bit-exact verdict covers those.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pp3.harness.guard import Guard
from pp3.harness.protocol import Implementation
from pp3.reference import Verdict
from pp3.testing.call import AcceptCall

ALPHA = 0.01
LAW_N = 100_000  # sequences per case of the end-to-end audit


class CallFailed(Exception):
    """A call of the implementation under a law audit failed by name: the audit cannot go on."""

    def __init__(self, call: AcceptCall, failure: str, detail: str) -> None:
        super().__init__(f"{failure}: {detail}")
        self.call, self.failure, self.detail = call, failure, detail


def reference_convention(guard: Guard) -> Callable[..., Verdict]:
    """A verifier implementation as the end-to-end audit calls one (``pp3.reference.verify``'s keyword arguments, a
    Verdict of NumPy arrays), every call through ``guard``; a call that fails by name raises ``CallFailed``."""

    def verify(**kw: Any) -> Verdict:
        call = AcceptCall.of(**kw)
        got, failure, detail = guard.run(guard.invocation(call))
        if failure is not None or got is None:
            raise CallFailed(call, failure or "wrong-output", detail)
        assert isinstance(got, Verdict)
        return got

    return verify


def verifier_law(impl: Implementation, out: Path, *, n: int = LAW_N, mutant_n: int | None = None,
                 alpha: float = ALPHA, seed: int = 0, device: str = "cpu", time_limit: float = 300.0,
                 temperatures: Sequence[float] | None = None, mutant_temperatures: Sequence[float] | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
    """The end-to-end audit of ``impl`` (see the module docstring), as a JSON-ready verdict; ``temperatures`` and
    ``mutant_temperatures``: the audit's own by default."""
    from pp3.audit import e2e
    from pp3.drafter import SAMPLED_ENV, sampled_enabled

    what = {"audit": "pp3.audit.e2e", "implementation": impl.label, "alpha": alpha, "correction": "Holm",
            "n": n, "mutant_n": mutant_n or n}
    if not sampled_enabled():
        return what | {"verdict": "SKIPPED", "reason": f"the end-to-end audit drafts with draft_sampled: set "
                       f"{SAMPLED_ENV}=1"}
    t0 = time.perf_counter()
    setup = e2e.make_setup(device=device)
    try:
        audit = e2e.run_audit(setup, n, temperatures=temperatures or e2e.TEMPERATURES,
                              mutant_temperatures=mutant_temperatures or e2e.MUTANT_TEMPERATURES, mutant_n=mutant_n,
                              alpha=alpha, seed=seed, verifier=reference_convention(Guard(impl, None, time_limit)),
                              progress=progress)
    except CallFailed as e:
        from pp3.audit.parity import Failures

        failures = Failures(out, "verifier", stem="law_verifier_first")
        failures.add(e.call, e.call.run_reference(), None, "e2e", e.failure, e.detail, impl)
        return what | {"verdict": "FAIL", "failure": failures.suites["e2e"], "ran": [],
                       "time_s": round(time.perf_counter() - t0, 1)}
    doc = audit.to_json()
    real = doc["real"]
    ran = [f"T={c['temperature']:g} {c['mode']}: joint3 p={c['joint_p']:.3g} (Holm {c['joint_p_holm']:.3g}), "
           f"accepted p={c['accept_p']:.3g} (Holm {c['accept_p_holm']:.3g})" for c in real["cases"]]
    power = {f["name"]: {"rejected": f["rejected"],
                         "min_p_holm": min(min(c["joint_p_holm"], c["accept_p_holm"]) for c in f["cases"])}
             for f in doc["mutants"]}
    return what | {"verdict": "PASS" if audit.passed else "FAIL", "ran": ran, "rejected": real["rejected"],
                   "power": power, "power_shown": all(p["rejected"] for p in power.values()),
                   "cases": real["cases"], "time_s": round(time.perf_counter() - t0, 1)}


def selector_law(impl: Implementation) -> dict[str, Any]:
    """A selector's law verdict: skipped, saying where its audits are (see the module docstring)."""
    return {"audit": "stats (python -m stats, a repository tool)", "implementation": impl.label,
            "verdict": "SKIPPED", "reason": "a selector's law audits are the repository tool stats/ (make stats in a "
            "checkout), outside the package; the package judges a selector bit-exact only"}
