"""End-to-end audit: speculative generation with a Markov drafter and a Markov target must be lossless.

Setup: over a small vocabulary, a target chain (next-token logits ``target[prev]``, a [V, V] table) and a drafter
chain (``pp3.testing.markov.MarkovDrafter``, exact dyadic logits). Every sequence starts from the prompt token
``start`` at position 0; rounds of ``pp3.speculate`` (depth-D drafting with ``pp3.drafter.TPDrafter``, sampled or
greedy, and verification by ``pp3.reference.verify`` or the Triton verifier, SPEC.md §11) run until it has three
tokens. Everything the target and the drafter do is a function of exactly known tickets, so the exact laws are
computable (``theory``):

- the joint law of the first three tokens is ``p(y1|y0) p(y2|y1) p(y3|y2)`` with ``p = P / 2^40`` (§11.4);
- the number A of drafts accepted in the first round has ``Pr[A >= a] = e_{y0} M^a 1`` with
  ``M = min(p, q)`` elementwise (§11.9), ``q = Q / 2^24`` the drafter's tickets (or the greedy point mass);
  the per-position acceptance rate is ``Pr[A >= d+1] / Pr[A >= d]`` (``Σ_y min(p, q)`` at the first position)
  and the tokens per verification step ``E[A] + 1``.

Tests (``pp3.audit.chisq``): Pearson's chi-square of the observed first-three-token counts against the exact joint
law, and of the first round's A against its exact law; bins merged to expected counts >= 5, impossible draws
reject outright; Holm's correction over the family of every test of the run, at a stated alpha (default 0.01).
Power: each planted bug (``MUTANTS``, from ``pp3.testing.mutants``) must be rejected by its own family.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.audit.chisq import ChiSquare, holm, merge_groups, pearson
from pp3.drafter import TPDrafter
from pp3.reference import accept, order
from pp3.reference._constants import P_TICKETS, TICKETS
from pp3.speculate import MODES, Mode, Verifier, speculation_round
from pp3.testing.markov import MarkovDrafter
from pp3.testing.mutants import patched

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]  # (rows done, rows total)

DEPTH = 5
ALPHA = 0.01
TEMPERATURES = (0.0, 0.5, 1.0, 2.0)
MUTANT_TEMPERATURES = (0.5, 1.0, 2.0)  # the planted bugs' cases (sampled drafting)
PREFIX = 3  # tokens per sequence whose joint law is tested


# --------------------------------------------------------------------------------------------------------- setup


@dataclasses.dataclass(frozen=True)
class Setup:
    """The two chains: a drafter (logits from the previous token) and the target's [V, V] logits table."""

    drafter: MarkovDrafter
    target: npt.NDArray[np.float32]  # [V, V]: row x = target logits after token x
    start: int  # the prompt token at position 0
    tau: float  # the drafter temperature of the selector
    depth: int

    @property
    def vocab(self) -> int:
        return int(self.target.shape[0])


def make_setup(
    vocab: int = 8,
    rank: int = 4,
    *,
    seed: int = 2,
    depth: int = DEPTH,
    tau: float = 1.0,
    noise: float = 0.5,
    shards: int = 2,
    device: str = "cpu",
) -> Setup:
    """A drafter with dyadic random parameters (split over ``shards`` vocabulary shards) and a target whose logits
    are the drafter's plus Gaussian noise, with one masked (-inf) token per row so that the drafter proposes
    tokens the target forbids."""
    drafter = MarkovDrafter.random(vocab, rank, seed=seed, shards=shards, device=device)
    rng = np.random.default_rng(seed + 1)
    target = (drafter.table() + rng.normal(scale=noise, size=(vocab, vocab))).astype(np.float32)
    target[np.arange(vocab), rng.integers(vocab, size=vocab)] = -np.inf
    return Setup(drafter=drafter, target=target, start=0, tau=tau, depth=depth)


# -------------------------------------------------------------------------------------------------------- theory


@dataclasses.dataclass(frozen=True)
class Theory:
    """Exact laws of one (temperature, drafting mode) case."""

    p: F64  # [V, V] target p(y | x)
    q: F64  # [V, V] drafter q(y | x) as the verifier sees it
    joint: F64  # [V, V, V] law of the first three tokens
    accept_hist: F64  # [D+1] law of A, the drafts accepted in the first round
    rate: F64  # [D] Pr[accept draft d | drafts 0 .. d-1 accepted], first round

    @property
    def tokens_per_step(self) -> float:
        return float((np.arange(self.accept_hist.size) + 1) @ self.accept_hist)

    @property
    def acceptance(self) -> float:
        """Expected accepted drafts per draft, E[A] / D."""
        return float(np.arange(self.accept_hist.size) @ self.accept_hist) / (self.accept_hist.size - 1)


def _point_mass(rows: npt.NDArray[np.float32]) -> F64:
    g = order.first_k(rows, 1)[:, 0]
    out = np.zeros(rows.shape, dtype=np.float64)
    out[np.arange(rows.shape[0]), g] = 1.0
    return out


def target_law(setup: Setup, temperature: float) -> F64:
    """[V, V] exact target p(y | x): the point mass on the argmax at T0, else P / 2^40 (SPEC.md §11.4)."""
    if temperature == 0:
        return _point_mass(setup.target)
    _, tix = accept.target_tickets(setup.target, np.full(setup.vocab, temperature, dtype=np.float32))
    return np.asarray(tix / float(P_TICKETS), dtype=np.float64)


def drafter_law(setup: Setup, temperature: float, mode: str) -> F64:
    """[V, V] exact drafter q(y | x): the selector's tickets / 2^24 (SPEC.md §5), or the greedy point mass."""
    logits = setup.drafter.table()
    if mode == "greedy" or temperature == 0:
        return _point_mass(logits)
    from pp3.reference import propose

    v = setup.vocab
    prop = propose(logits, temperature, 0, 0, 0, setup.tau)  # the tickets do not depend on the keys
    q = np.zeros((v, v), dtype=np.float64)
    rows, slots = np.nonzero(prop.ids >= 0)
    q[rows, prop.ids[rows, slots]] = prop.tickets[rows, slots] / float(TICKETS)
    return q


def theory(setup: Setup, temperature: float, mode: str) -> Theory:
    p = target_law(setup, temperature)
    q = drafter_law(setup, temperature, mode)
    y0 = setup.start
    joint = p[y0][:, None, None] * p[:, :, None] * p[None, :, :]  # [y1, y2, y3] = p(y1|y0) p(y2|y1) p(y3|y2)
    m = np.minimum(p, q)
    mass = np.zeros(setup.vocab)
    mass[y0] = 1.0
    reach = [1.0]
    for _ in range(setup.depth):
        mass = mass @ m
        reach.append(float(mass.sum()))
    r = np.array(reach)
    hist = np.append(r[:-1] - r[1:], r[-1])
    rate = np.divide(r[1:], r[:-1], out=np.zeros(setup.depth), where=r[:-1] > 0)
    return Theory(p=p, q=q, joint=joint, accept_hist=hist, rate=rate)


def _laws(th: Theory) -> tuple[F64, F64]:
    """The laws a case tests: the first three tokens', the first round's A."""
    return th.joint.ravel(), th.accept_hist


def _groups(n: int, law: F64) -> int:
    """The chi-square groups of ``n`` draws from ``law`` (``chisq.merge_groups`` over its possible outcomes)."""
    p = law[law > 0]
    return int(merge_groups(n * p / p.sum()).max()) + 1


def least_n(setup: Setup, temperatures: Sequence[float], modes: Sequence[Mode]) -> int:
    """The fewest sequences per case at which every test of these cases can reject: each law with two or more
    possible outcomes (the first three tokens', A's) gives at least two groups of expected count >= 5. Below it a test
    has one group, df 0 and p = 1 whatever it sees: a run with no power, which ``run_audit`` refuses. The group count
    grows with n (the first group closes no later, the rest holds more), so a bisection finds it."""
    laws = [law for t in temperatures for m in modes for law in _laws(theory(setup, t, m))]
    need = 1
    for law in laws:
        if np.count_nonzero(law) < 2:  # one possible outcome (a greedy case's A, say): df 0 is all it can have
            continue
        hi = 1
        while _groups(hi, law) < 2:
            hi *= 2
        lo = hi // 2  # too few (or 0)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if _groups(mid, law) >= 2 else (mid, hi)
        need = max(need, hi)
    return need


# ------------------------------------------------------------------------------------------------------- mutants

# The planted bugs of this audit (pp3.testing.mutants), each caught by its own family.
MUTANTS = ("q-from-greedy", "domain-collision", "residual-unnormalized")


# ---------------------------------------------------------------------------------------------------- simulation


@dataclasses.dataclass
class Sample:
    """Counts from n simulated sequences."""

    n: int
    first3: I64  # [V^3] counts of (y1, y2, y3)
    accept_hist: I64  # [D+1] counts of A (first round)
    tokens: int = 0  # tokens emitted by first rounds, Σ (A + 1)
    seconds: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.n

    @property
    def acceptance(self) -> float:
        return float(np.arange(self.accept_hist.size) @ self.accept_hist) / (self.n * (self.accept_hist.size - 1))

    @property
    def rate(self) -> F64:
        """[D] measured Pr[accept draft d | drafts 0 .. d-1 accepted] in the first round."""
        at_least = self.accept_hist[::-1].cumsum()[::-1]  # at_least[a] = #(A >= a)
        out = np.zeros(self.accept_hist.size - 1, dtype=np.float64)
        np.divide(at_least[1:], at_least[:-1], out=out, where=at_least[:-1] > 0)
        return out


def reference_verifier(**kw: Any) -> Any:
    """``pp3.reference.accept.verify``, looked up at each call (so that a planted bug is seen)."""
    return accept.verify(**kw)


def simulate(
    setup: Setup,
    temperature: float,
    mode: Mode,
    n: int,
    *,
    seed: int = 0,
    mutant: str | None = None,
    batch: int = 1 << 16,
    verifier: Verifier | None = None,
    progress: Progress | None = None,
) -> Sample:
    """Generate ``n`` sequences of three tokens by speculative decoding and count what the tests need.

    Request ``i`` has seed ``seed * 2^32 + i``; its rounds are 0, 1, 2 and its first token is at position 1.
    ``mode`` is ``"sampled"`` (``TPDrafter.draft_sampled``; needs DSPARK_SAMPLED_TOP32=1) or ``"greedy"``.
    """
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"mutant: expected one of {list(MUTANTS)}, got {mutant!r}")
    verify = verifier or reference_verifier
    drafter = TPDrafter(setup.drafter, setup.depth, tau=setup.tau)
    v, d = setup.vocab, setup.depth
    out = Sample(n=n, first3=np.zeros(v**PREFIX, dtype=np.int64), accept_hist=np.zeros(d + 1, dtype=np.int64))
    start = time.perf_counter()
    with patched(mutant):
        for lo in range(0, n, batch):
            hi = min(n, lo + batch)
            seeds = (np.uint64(seed) << np.uint64(32)) + np.arange(lo, hi, dtype=np.uint64)
            _run_batch(setup, drafter, temperature, mode, seeds, verify, out)
            if progress is not None:
                progress(hi, n)
    out.seconds = time.perf_counter() - start
    return out


def _run_batch(
    setup: Setup,
    drafter: TPDrafter,
    temperature: float,
    mode: Mode,
    seeds: npt.NDArray[np.uint64],
    verify: Verifier,
    out: Sample,
) -> None:
    b, d, v = seeds.size, setup.depth, setup.vocab
    prev = np.full(b, setup.start, dtype=np.int64)
    pos = np.ones(b, dtype=np.uint64)
    seq = np.full((b, PREFIX), -1, dtype=np.int64)
    count = np.zeros(b, dtype=np.int64)
    for rnd in range(PREFIX):  # every round emits >= 1 token
        act = np.flatnonzero(count < PREFIX)
        if not act.size:
            break
        res = speculation_round(
            drafter, lambda before: setup.target[before], verify, mode=mode, prev=prev[act],
            temperature=temperature, seed=seeds[act], round=rnd, position=pos[act],
        )
        accepted, tokens = res.accepted, res.tokens
        if rnd == 0:
            out.accept_hist += np.bincount(accepted, minlength=d + 1)
            out.tokens += int((accepted + 1).sum())
        emit = accepted + 1
        c = count[act]
        for k in range(d + 1):
            put = (k < emit) & (c + k < PREFIX)
            seq[act[put], c[put] + k] = tokens[put, k]
        count[act] = np.minimum(c + emit, PREFIX)
        prev[act] = res.last()
        pos[act] += emit.astype(np.uint64)
    flat = (seq[:, 0] * v + seq[:, 1]) * v + seq[:, 2]
    out.first3 += np.bincount(flat, minlength=v**PREFIX)


# --------------------------------------------------------------------------------------------------------- audit


@dataclasses.dataclass(frozen=True)
class CaseResult:
    temperature: float
    mode: Mode
    mutant: str | None
    theory: Theory
    sample: Sample
    joint: ChiSquare
    accept: ChiSquare

    def row(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "mode": self.mode,
            "mutant": self.mutant,
            "n": self.sample.n,
            "seconds": round(self.sample.seconds, 2),
            "acceptance_theory": self.theory.acceptance,
            "acceptance_measured": self.sample.acceptance,
            "tokens_per_step_theory": self.theory.tokens_per_step,
            "tokens_per_step_measured": self.sample.tokens_per_step,
            "rate_theory": self.theory.rate.tolist(),
            "rate_measured": self.sample.rate.tolist(),
            "joint_chi2": self.joint.statistic,
            "joint_df": self.joint.df,
            "joint_p": self.joint.p,
            "joint_support_violations": self.joint.support_violations,
            "accept_chi2": self.accept.statistic,
            "accept_df": self.accept.df,
            "accept_p": self.accept.p,
        }


def run_case(
    setup: Setup,
    temperature: float,
    mode: Mode,
    n: int,
    *,
    seed: int = 0,
    mutant: str | None = None,
    batch: int = 1 << 16,
    verifier: Verifier | None = None,
    progress: Progress | None = None,
) -> CaseResult:
    th = theory(setup, temperature, mode)
    smp = simulate(setup, temperature, mode, n, seed=seed, mutant=mutant, batch=batch, verifier=verifier,
                   progress=progress)
    return CaseResult(
        temperature=temperature,
        mode=mode,
        mutant=mutant,
        theory=th,
        sample=smp,
        joint=pearson(smp.first3, th.joint.ravel()),
        accept=pearson(smp.accept_hist, th.accept_hist),
    )


@dataclasses.dataclass(frozen=True)
class Family:
    """A family of tests under Holm's correction: the real run, or one planted bug."""

    name: str
    cases: list[CaseResult]
    alpha: float

    @property
    def pvalues(self) -> F64:
        return np.array([p for c in self.cases for p in (c.joint.p, c.accept.p)], dtype=np.float64)

    @property
    def adjusted(self) -> F64:
        return holm(self.pvalues)

    @property
    def rejected(self) -> bool:
        return bool((self.adjusted <= self.alpha).any())


@dataclasses.dataclass(frozen=True)
class Audit:
    real: Family
    mutants: list[Family]

    @property
    def passed(self) -> bool:
        """The real run passes every test and every planted bug is caught."""
        return not self.real.rejected and all(f.rejected for f in self.mutants)

    def to_json(self) -> dict[str, Any]:
        def fam(f: Family) -> dict[str, Any]:
            adj = f.adjusted
            rows = []
            for i, c in enumerate(f.cases):
                rows.append(c.row() | {"joint_p_holm": float(adj[2 * i]), "accept_p_holm": float(adj[2 * i + 1])})
            return {"name": f.name, "alpha": f.alpha, "rejected": f.rejected, "cases": rows}

        return {"schema_version": 1, "tool": "pp3 audit-e2e", "verdict": "PASS" if self.passed else "FAIL",
                "real": fam(self.real), "mutants": [fam(f) for f in self.mutants]}

    def table(self) -> str:
        """Markdown: acceptance and tokens per step, sampled vs greedy, by target temperature (the real run), with
        each test's raw p-value; the family's verdict under Holm is stated below the table."""
        head = (
            "| T | drafting | acceptance (theory) | acceptance (measured) | tokens/step (theory) "
            "| tokens/step (measured) | p joint3 (df) | p A (df) | n |"
        )
        lines = [head, "|" + "---|" * 9]
        for c in self.real.cases:
            lines.append(
                f"| {c.temperature:g} | {c.mode} | {c.theory.acceptance:.4f} | {c.sample.acceptance:.4f} "
                f"| {c.theory.tokens_per_step:.4f} | {c.sample.tokens_per_step:.4f} "
                f"| {c.joint.p:.3g} ({c.joint.df}) | {c.accept.p:.3g} ({c.accept.df}) | {c.sample.n:,} |"
            )
        adj = self.real.adjusted
        lines.append(
            f"\nHolm over the {adj.size} tests at alpha = {self.real.alpha}: smallest adjusted p {adj.min():.3g}, "
            f"{'REJECTED' if self.real.rejected else 'none rejected'}. (df 0: a deterministic case, one bin.)"
        )
        return "\n".join(lines)

    def mutant_table(self) -> str:
        lines = ["| planted bug | cases | min p joint3 (Holm) | min p A (Holm) | caught |", "|---|---|---|---|---|"]
        for f in self.mutants:
            adj = f.adjusted
            lines.append(
                f"| {f.name} | {len(f.cases)} | {adj[0::2].min():.3g} | {adj[1::2].min():.3g} "
                f"| {'yes' if f.rejected else 'NO'} |"
            )
        return "\n".join(lines)


def run_audit(
    setup: Setup,
    n: int,
    *,
    temperatures: Sequence[float] = TEMPERATURES,
    modes: Sequence[Mode] = MODES,
    mutants: Sequence[str] = tuple(MUTANTS),
    mutant_temperatures: Sequence[float] = MUTANT_TEMPERATURES,
    mutant_n: int | None = None,
    alpha: float = ALPHA,
    seed: int = 0,
    batch: int = 1 << 16,
    verifier: Verifier | None = None,
    verifier_mutants: Mapping[str, Verifier] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> Audit:
    """The real run over temperatures x modes, then each planted bug (sampled drafting) at mutant_temperatures.

    ``verifier`` replaces the reference verifier in the real run (e.g. the Triton kernel); the planted bugs of
    ``mutants`` are planted in the reference. ``verifier_mutants``: more planted bugs, each a wrong verifier by name
    (e.g. FlashInfer fed the greedy path's q), run as the real run's verifier is. ``n`` (and ``mutant_n`` where
    planted bugs run) below ``least_n`` is refused (``ValueError``): some test could reject nothing."""
    mutant_temps = mutant_temperatures if mutants or verifier_mutants else ()
    checks: tuple[tuple[str, int, Sequence[float], Sequence[Mode]], ...] = (
        ("n", n, temperatures, modes), ("mutant_n", mutant_n or n, mutant_temps, ("sampled",)))
    for name, size, temps, ms in checks:
        least = least_n(setup, temps, ms)
        if size < least:
            raise ValueError(f"{name}: {size} sequences per case leave a test with one group (df 0), which rejects "
                             f"nothing; {least} or more give every test a degree of freedom")

    def prog(tag: str) -> Progress | None:
        return None if progress is None else (lambda done, total: progress(tag, done, total))

    real = [
        run_case(setup, t, m, n, seed=seed, batch=batch, verifier=verifier, progress=prog(f"T={t:g} {m}"))
        for t in temperatures
        for m in modes
    ]
    # each planted bug: (name, a bug planted in the reference, or a wrong verifier)
    planted: list[tuple[str, str | None, Verifier | None]] = [(mu, mu, None) for mu in mutants]
    planted += [(name, None, wrong) for name, wrong in (verifier_mutants or {}).items()]
    fams = [
        Family(
            name=name,
            cases=[
                run_case(setup, t, "sampled", mutant_n or n, seed=seed + 1, mutant=mu, batch=batch, verifier=wrong,
                         progress=prog(f"{name} T={t:g}"))
                for t in mutant_temperatures
            ],
            alpha=alpha,
        )
        for name, mu, wrong in planted
    ]
    return Audit(real=Family("real", real, alpha), mutants=fams)


def plot(audit: Audit, path: str) -> None:
    """Acceptance rate and tokens per step versus target temperature, sampled vs greedy (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for mode, color in (("sampled", "tab:blue"), ("greedy", "tab:orange")):
        cs = sorted((c for c in audit.real.cases if c.mode == mode), key=lambda c: c.temperature)
        ts = [c.temperature for c in cs]
        for ax, th, ms in (
            (axes[0], [c.theory.acceptance for c in cs], [c.sample.acceptance for c in cs]),
            (axes[1], [c.theory.tokens_per_step for c in cs], [c.sample.tokens_per_step for c in cs]),
        ):
            ax.plot(ts, th, "-", color=color, label=f"{mode} (theory)")
            ax.plot(ts, ms, "o", color=color, label=f"{mode} (measured)")
    axes[0].set_ylabel("accepted drafts / depth (first round)")
    axes[1].set_ylabel("tokens per verification step")
    for ax in axes:
        ax.set_xlabel("target temperature")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    n = audit.real.cases[0].sample.n if audit.real.cases else 0
    depth = audit.real.cases[0].theory.accept_hist.size - 1 if audit.real.cases else 0
    fig.suptitle(f"Markov audit: depth {depth}, {n:,} sequences per point")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


__all__ = [
    "ALPHA",
    "DEPTH",
    "MODES",
    "MUTANTS",
    "TEMPERATURES",
    "Audit",
    "CaseResult",
    "Family",
    "Sample",
    "Setup",
    "Theory",
    "make_setup",
    "plot",
    "run_audit",
    "run_case",
    "simulate",
    "theory",
]
