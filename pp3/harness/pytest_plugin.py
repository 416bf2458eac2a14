"""The pytest plugin shipped in the wheel (entry point ``pytest11``: ``pp3``): pp3's suites inside an engine's own CI.

    pytest --pp3-impl selector=mypkg.kernels:propose --pp3-impl verifier=mypkg.kernels:verify \\
           [--pp3-size quick|standard|full] [--pp3-expected-failures pp3-xfail.toml] [--pp3-call-timeout S] \\
           [--pp3-out DIR] [--pp3-law] [--pp3-law-n N] [--pp3-examples N]

With ``--pp3-impl`` the plugin loads the implementations (``pp3.harness.load``: a name that does not load, or a
callable that does not match its role's protocol, stops the session with one line) and adds pp3's test module
(``pp3/harness/suite_tests.py``) to the collection: one test per implementation and suite of ``pp3 verify``
(``pp3.audit.parity.SUITES``), the conformance files, a Hypothesis property per implementation (random calls of
every format; needs ``hypothesis``) and, for an implementation that does not claim bit-exactness (or with
``--pp3-law``), its lossless-in-law verdict. A test fails on the first failing call that the expected-failures file
does not cover, naming the failure and the command that replays it (written under ``--pp3-out``); the terminal
summary lists every expected-failures entry that no longer fails. Without ``--pp3-impl`` the plugin does nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pp3.audit.law import LAW_N
from pp3.harness.guard import DEFAULT_TIME_LIMIT
from pp3.harness.protocol import ROLES, Implementation, ImplementationError, Role, load
from pp3.harness.xfail import ExpectedFailures, ExpectedFailuresError

SUITE_TESTS = Path(__file__).resolve().parent / "suite_tests.py"


@dataclasses.dataclass
class Session:
    """What the plugin loaded for a session: the implementations by role, the expected failures and the options."""

    impls: dict[Role, list[Implementation]]
    xfail: ExpectedFailures
    size: str
    out: Path
    time_limit: float
    law: bool
    law_n: int
    examples: int

    def each(self) -> list[tuple[Role, Implementation]]:
        return [(r, i) for r in ROLES for i in self.impls[r]]


SESSION = pytest.StashKey[Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pp3", "pp3 conformance of an implementation (docs/CONFORMANCE.md)")
    group.addoption("--pp3-impl", action="append", default=[], metavar="ROLE=NAME",
                    help="an implementation to check: ROLE selector or verifier, NAME PKG.MOD:CALLABLE or an entry "
                    "point of the group pp3.implementations; repeatable")
    group.addoption("--pp3-size", choices=("quick", "standard", "full"), default="quick",
                    help="the suites' sizes, as pp3 verify's (default: quick)")
    group.addoption("--pp3-expected-failures", metavar="FILE", default=None,
                    help="the implementation's expected-failures file (TOML: suite, case, reason)")
    group.addoption("--pp3-call-timeout", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                    help="seconds one call may take before it is named a timeout")
    group.addoption("--pp3-out", default="pp3-failures", metavar="DIR",
                    help="where the first failing call of each suite is written for pp3 verify --replay")
    group.addoption("--pp3-law", action="store_true",
                    help="also the lossless-in-law verdict of implementations that claim bit-exactness")
    group.addoption("--pp3-law-n", type=int, default=LAW_N, metavar="N", help="sequences per case of the law audit")
    group.addoption("--pp3-examples", type=int, default=25, metavar="N", help="Hypothesis examples per property")


def pytest_configure(config: pytest.Config) -> None:
    specs: list[str] = config.getoption("--pp3-impl")
    if not specs:
        return
    impls: dict[Role, list[Implementation]] = {r: [] for r in ROLES}
    try:
        for text in specs:
            role, sep, name = text.partition("=")
            if not sep or role not in ROLES or not name:
                raise ImplementationError(f"--pp3-impl: expected selector=NAME or verifier=NAME, got {text!r}")
            impls[role] += load(name, role)
        xfail = ExpectedFailures.load(config.getoption("--pp3-expected-failures"))
    except (ImplementationError, ExpectedFailuresError) as e:
        raise pytest.UsageError(f"pp3: {e}") from None
    config.stash[SESSION] = Session(impls, xfail, config.getoption("--pp3-size"), Path(config.getoption("--pp3-out")),
                                    config.getoption("--pp3-call-timeout"), config.getoption("--pp3-law"),
                                    config.getoption("--pp3-law-n"), config.getoption("--pp3-examples"))
    config.addinivalue_line("markers", "pp3: a test of pp3's conformance suites (pp3.harness.pytest_plugin)")
    config.args.append(str(SUITE_TESTS))  # collected with the session's own tests


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if SESSION not in metafunc.config.stash:
        return
    from pp3.audit.parity import SUITES

    s = metafunc.config.stash[SESSION]
    exact = [(r, i) for r, i in s.each() if i.caps.exact]
    if "pp3_suite" in metafunc.fixturenames:
        cases = [(r, i, suite) for r, i in exact for suite in SUITES[r]]
        metafunc.parametrize("pp3_suite", cases, ids=[f"{r}-{i.label}-{suite}" for r, i, suite in cases])
    if "pp3_subject" in metafunc.fixturenames:
        names = sorted({i.name for _, i in exact})
        subjects = [(n, [i for _, i in exact if i.name == n]) for n in names]
        metafunc.parametrize("pp3_subject", subjects, ids=names)
    if "pp3_property" in metafunc.fixturenames:
        mains = [(r, i) for r, i in exact if not i.t0_only]
        metafunc.parametrize("pp3_property", mains, ids=[f"{r}-{i.label}" for r, i in mains])
    if "pp3_law" in metafunc.fixturenames:
        judged = [(r, i) for r, i in s.each() if s.law or not i.caps.exact]
        metafunc.parametrize("pp3_law", judged, ids=[f"{r}-{i.label}" for r, i in judged])


@pytest.fixture(scope="session")
def pp3_session(request: pytest.FixtureRequest) -> Session:
    """The implementations and options of this session (``--pp3-impl``)."""
    return request.config.stash[SESSION]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if SESSION not in config.stash:
        return
    s = config.stash[SESSION]
    for e in s.xfail.entries:
        terminalreporter.write_line(f"pp3 expected failure {e.suite!r} {e.case!r} ({e.reason}): {e.status()}")
