"""pp3's suites as pytest tests, for the implementations given to the plugin (``pp3.harness.pytest_plugin``:
``pytest --pp3-impl ROLE=NAME``; this module is collected only then). Each test runs what ``pp3 verify --impl``
runs, through the same seam and guard, and fails on the first failing call that the expected-failures file does not
cover, with the command that replays it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pp3.harness.protocol import Implementation, Role
from pp3.harness.pytest_plugin import Session

pytestmark = [pytest.mark.pp3, pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")]


def _device() -> Any:
    from pp3.testing.call import default_device

    return default_device()


def _unexpected(part: Any) -> str:
    """The part's first unexpected failures, each with its replay line."""
    lines = []
    for f in part.failing:
        if f["expected"] is None:
            first = part.failures.suites.get(f["suite"], {})
            lines.append(f"{f['suite']} {f['case']}: {f['failure']}: {f['detail']}"
                         + (f"\n  replay: {first['replay']}" if first.get("case") == f["case"] else ""))
    return "\n".join(lines[:8])


def test_suite(pp3_session: Session, pp3_suite: tuple[Role, Implementation, str]) -> None:
    """One suite of ``pp3 verify`` on one implementation: every call bit-exact with the reference."""
    from pp3.audit import parity
    from pp3.harness.guard import Guard

    role, impl, suite = pp3_suite
    part = parity.Part(role, pp3_session.out / role / impl.label.replace(":", "-"), pp3_session.xfail)
    calls = parity.suite_calls(role, suite, pp3_session.size, _device())
    parity.check_calls(impl.variant or role, calls, Guard(impl, None, pp3_session.time_limit), part, False)
    if part.table.checked_rows() == 0:
        pytest.skip(f"{impl.label} declares none of this suite's calls: "
                    + "; ".join(sorted({r for (_, _, r) in part.skipped})))
    assert part.unexpected() == 0, f"{part.unexpected()} failing calls:\n{_unexpected(part)}"


def test_conformance(pp3_session: Session, pp3_subject: tuple[str, list[Implementation]]) -> None:
    """The conformance files (and the expf sweep) on one implementation."""
    from pp3.audit import conformance

    name, impls = pp3_subject
    report = conformance.run(subjects=[(name, impls)], out=pp3_session.out / "conformance", xfail=pp3_session.xfail,
                             time_limit=pp3_session.time_limit)
    mine = [r for r in (*report["results"], *report["sweeps"]) if r["implementation"] == name]
    bad = [r for r in mine if r["skipped"] is None and r["mismatches"]]
    replays = [f["replay"] for f in report["failures"].get(name, {}).values()]
    assert not bad and any(r["skipped"] is None for r in mine), f"{bad}\nreplay: {replays}"


def test_property(pp3_session: Session, pp3_property: tuple[Role, Implementation]) -> None:
    """Hypothesis: random calls of every declared format (hostile selector rows, verifier rows with sampled drafts;
    derandomized), each bit-exact with the reference; a failure is shrunk and written for ``--replay``."""
    pytest.importorskip("hypothesis")
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pp3.audit import parity
    from pp3.audit.suites import random_case
    from pp3.harness.guard import Guard
    from pp3.testing.call import AcceptCall
    from pp3.testing.drafts import random_case as random_accept_case

    role, impl = pp3_property
    guard = Guard(impl, None, pp3_session.time_limit)
    out = pp3_session.out / "property" / impl.label.replace(":", "-")
    formats = impl.caps.formats

    @settings(max_examples=pp3_session.examples, deadline=None, derandomize=True, database=None)
    @given(seed=st.integers(0, 2**32 - 1), v=st.sampled_from((1, 2, 31, 32, 33, 64, 65, 300)),
           b=st.integers(1, 4), fmt=st.sampled_from(formats), d=st.integers(1, 3))
    def prop(seed: int, v: int, b: int, fmt: str, d: int) -> None:
        rng = np.random.default_rng(seed)
        if role == "selector":
            call: Any = random_case(min(v, impl.caps.max_vocab), b, fmt, rng, 32)
        else:
            call = AcceptCall.of(**random_accept_case(rng, b, d, max(2, min(v, 97, impl.caps.max_vocab)), 1.0))
        outcome = guard.check(call)
        if outcome.failed:
            failures = parity.Failures(out, role)
            failures.add(call, outcome.want, outcome.got, "property", outcome.failure or "", outcome.detail, impl)
            pytest.fail(f"{call.name or role}: {outcome.failure}: {outcome.detail}; replay: "
                        f"{failures.suites['property']['replay']}")

    prop()


def test_law(pp3_session: Session, pp3_law: tuple[Role, Implementation]) -> None:
    """The lossless-in-law verdict (``pp3.audit.law``) of an implementation that does not claim bit-exactness."""
    from pp3.audit import law

    role, impl = pp3_law
    if role == "verifier":
        res = law.verifier_law(impl, pp3_session.out / "law", n=pp3_session.law_n,
                               device="cuda" if impl.device == "cuda" else "cpu", time_limit=pp3_session.time_limit)
    else:
        res = law.selector_law(impl)
    if res["verdict"] == "SKIPPED":
        pytest.skip(res["reason"])
    assert res["verdict"] == "PASS", {k: res[k] for k in res if k != "cases"}
