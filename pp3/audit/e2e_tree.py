"""End-to-end audit of draft trees (SPEC.md §12): speculative generation with sampled trees (§12.4, verified by §12.6)
and deterministic top-k trees (verified by the walk, §12.9) must be lossless.

Setup: the chain audit's Markov pair (``pp3.audit.e2e.make_setup``: V = 8, a dyadic drafter table and a target table
with one masked token per row). Every sequence starts from the prompt token ``start``; rounds of tree speculation run
until it has three tokens. A round drafts its tree level by level (``propose_tree`` on the nodes of each depth, the
drafter's logits at a node being its table row at the node's token, leaves included so that their slots exist),
scores every node with the target's table row at the node's token, and verifies (``verify_tree`` or
``verify_walk``). The law of the first three tokens is exactly ``p(y1|y0) p(y2|y1) p(y3|y2)`` with ``p = P / 2^40``
(§12.8; the point mass on the argmax at T0), whatever the tree.

Tests (``pp3.audit.chisq``): Pearson's chi-square of the observed first-three-token counts against that law, bins
merged to expected counts >= 5; an impossible draw, or a round whose verification fails a row (a planted bug can make
a draft invalid), rejects outright; Holm's correction over the family of every case of the run, at a stated alpha
(default 0.01). Power: each planted tree bug (``MUTANTS``, from ``pp3.testing.mutants``) must be rejected by its own
family. NumPy and the reference only (the Markov pair is built with torch, as the chain audit's).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pp3.audit.chisq import ChiSquare, holm, pearson
from pp3.audit.e2e import PREFIX, Setup, target_law
from pp3.reference import tree
from pp3.reference._constants import AcceptStatus, K
from pp3.testing.mutants import patched

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Mode = Literal["sampled", "top-k"]  # sampled children and verify_tree, or top-k children and the walk
MODES: tuple[Mode, ...] = ("sampled", "top-k")
Progress = Callable[[int, int], None]

ALPHA = 0.01
TEMPERATURES = (0.0, 0.5, 1.0, 2.0)
MUTANT_TEMPERATURES = (0.5, 1.0, 2.0)  # the planted bugs' runs: T = 0 draws nothing they could change
# Tree shapes by branching per level (each node of depth d has branching[d] children).
SHAPES: dict[str, tuple[int, ...]] = {"2x2": (2, 2), "4-2-1": (4, 2, 1), "8x1": (8,), "chain": (1, 1, 1, 1)}
# The planted bugs of this audit (pp3.testing.mutants), each caught by its own family.
MUTANTS = ("tree-residual-unnormalized", "tree-q-not-reduced", "tree-sibling-parent-p", "tree-draw-with-replacement",
           "tree-bonus-from-residual")


def parents_of(branching: Sequence[int]) -> list[int]:
    """The canonical parent array (SPEC.md §12.2) of the tree whose nodes of depth d have ``branching[d]`` children."""
    parents, level = [-1], [0]
    for k in branching:
        nxt = []
        for u in level:
            for _ in range(k):
                parents.append(u)
                nxt.append(len(parents) - 1)
        level = nxt
    return parents


# ---------------------------------------------------------------------------------------------------- simulation


@dataclasses.dataclass
class Sample:
    """Counts from n simulated sequences."""

    n: int
    first3: I64  # [V^3] counts of (y1, y2, y3)
    tokens: int = 0  # tokens emitted by first rounds, Σ (accepted + 1)
    failed: int = 0  # sequences whose verification failed a row (never, unless a bug makes a draft invalid)
    seconds: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / max(self.n - self.failed, 1)


Logits = Callable[[I64], npt.NDArray[np.float32]]  # tokens [...] -> the logits [..., V] that follow each token


def tree_round(
    drafter: Logits, target: Logits, parents: list[int], mode: Mode, temperature: float, tau: float, prev: I64,
    seeds: npt.NDArray[np.uint64], rnd: int, pos: npt.NDArray[np.uint64], draft_leaves: bool = True,
) -> tree.TreeVerdict:
    """One round of tree speculation after the tokens ``prev`` [B] with a Markov drafter and target (the logits at
    a node depend on its token only): draft level by level with the drafter temperature ``tau`` (the last level's
    leaves too if ``draft_leaves``, so that their slots exist), score every node, verify (``verify_tree`` for
    sampled children, the walk for top-k children)."""
    t = tree.as_tree("parents", parents)
    b = prev.size
    tokens = np.full((b, t.size), -1, dtype=np.int32)
    tokens[:, 0] = prev
    status = np.zeros((b, t.size), dtype=np.int8)
    ids = np.full((b, t.size, K), -1, dtype=np.int32)
    tix = np.zeros((b, t.size, K), dtype=np.int32)
    for d in range(t.height + int(draft_leaves)):  # the last level's leaves: slots a correct verifier never reads
        nodes = t.level(d)
        logits = drafter(np.maximum(tokens[:, nodes], 0).astype(np.int64))  # a node without a token: any row
        prop = tree.propose_tree(logits, temperature, seeds, rnd, pos, parents, nodes, tau, mode)
        status[:, nodes], ids[:, nodes], tix[:, nodes] = prop.status, prop.ids, prop.tickets
        tokens = np.where(prop.tokens >= 0, prop.tokens, tokens)
    scores = target(np.maximum(tokens, 0).astype(np.int64))  # node u's row: the target after the path to u
    if mode == "sampled":
        return tree.verify_tree(scores, temperature, parents, tokens, status, ids, tix, seeds, rnd, pos)
    return tree.verify_walk(scores, temperature, parents, tokens, status, seeds, rnd, pos)


def simulate(
    setup: Setup, parents: list[int], mode: Mode, temperature: float, n: int, *, seed: int = 0,
    mutant: str | None = None, batch: int = 1 << 14, progress: Progress | None = None,
) -> Sample:
    """Generate ``n`` sequences of three tokens by tree speculation and count what the test needs. Request ``i`` has
    seed ``seed * 2^32 + i``; its rounds are 0, 1, 2 and its first token is at position 1."""
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"mutant: expected one of {list(MUTANTS)}, got {mutant!r}")
    v = setup.vocab
    out = Sample(n=n, first3=np.zeros(v**PREFIX, dtype=np.int64))
    start = time.perf_counter()
    with patched(mutant):
        for lo in range(0, n, batch):
            hi = min(n, lo + batch)
            seeds = (np.uint64(seed) << np.uint64(32)) + np.arange(lo, hi, dtype=np.uint64)
            _run_batch(setup, parents, mode, temperature, seeds, out)
            if progress is not None:
                progress(hi, n)
    out.seconds = time.perf_counter() - start
    return out


def _run_batch(setup: Setup, parents: list[int], mode: Mode, temperature: float, seeds: npt.NDArray[np.uint64],
               out: Sample) -> None:
    b, v = seeds.size, setup.vocab
    table = setup.drafter.table()
    prev = np.full(b, setup.start, dtype=np.int64)
    pos = np.ones(b, dtype=np.uint64)
    seq = np.full((b, PREFIX), -1, dtype=np.int64)
    count = np.zeros(b, dtype=np.int64)
    alive = np.ones(b, dtype=bool)
    for rnd in range(PREFIX):  # every round emits >= 1 token
        act = np.flatnonzero(alive & (count < PREFIX))
        if not act.size:
            break
        res = tree_round(lambda x: table[x], lambda x: setup.target[x], parents, mode, temperature, setup.tau,
                         prev[act], seeds[act], rnd, pos[act])
        ok = res.status == AcceptStatus.OK
        alive[act[~ok]] = False
        act, accepted, tokens = act[ok], res.accepted[ok].astype(np.int64), res.tokens[ok]
        if rnd == 0:
            out.tokens += int((accepted + 1).sum())
        emit = accepted + 1
        c = count[act]
        for k in range(tokens.shape[1]):
            put = (k < emit) & (c + k < PREFIX)
            seq[act[put], c[put] + k] = tokens[put, k]
        count[act] = np.minimum(c + emit, PREFIX)
        prev[act] = tokens[np.arange(act.size), accepted]
        pos[act] += emit.astype(np.uint64)
    out.failed += int((~alive).sum())
    done = alive & (count == PREFIX)
    flat = (seq[done, 0] * v + seq[done, 1]) * v + seq[done, 2]
    out.first3 += np.bincount(flat, minlength=v**PREFIX)


# --------------------------------------------------------------------------------------------------------- audit


@dataclasses.dataclass(frozen=True)
class CaseResult:
    shape: str
    mode: Mode
    temperature: float
    mutant: str | None
    sample: Sample
    joint: ChiSquare  # p = 0 if a row failed verification (a support violation of the round's law)

    def row(self) -> dict[str, Any]:
        return {"shape": self.shape, "mode": self.mode, "temperature": self.temperature, "mutant": self.mutant,
                "n": self.sample.n, "failed_sequences": self.sample.failed, "seconds": round(self.sample.seconds, 2),
                "tokens_per_step_measured": self.sample.tokens_per_step, "joint_chi2": self.joint.statistic,
                "joint_df": self.joint.df, "joint_p": self.joint.p,
                "joint_support_violations": self.joint.support_violations}


def run_case(setup: Setup, shape: str, mode: Mode, temperature: float, n: int, *, seed: int = 0,
             mutant: str | None = None, batch: int = 1 << 14, progress: Progress | None = None) -> CaseResult:
    p = target_law(setup, temperature)
    y0 = setup.start
    joint = p[y0][:, None, None] * p[:, :, None] * p[None, :, :]
    smp = simulate(setup, parents_of(SHAPES[shape]), mode, temperature, n, seed=seed, mutant=mutant, batch=batch,
                   progress=progress)
    test = pearson(smp.first3, joint.ravel())
    if smp.failed:
        test = ChiSquare(np.inf, test.df, 0.0, test.groups, test.support_violations + smp.failed)
    return CaseResult(shape, mode, temperature, mutant, smp, test)


@dataclasses.dataclass(frozen=True)
class Family:
    """A family of tests under Holm's correction: the real run, or one planted bug."""

    name: str
    cases: list[CaseResult]
    alpha: float

    @property
    def adjusted(self) -> F64:
        return holm(np.array([c.joint.p for c in self.cases], dtype=np.float64))

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
            return {"name": f.name, "alpha": f.alpha, "rejected": f.rejected,
                    "cases": [c.row() | {"joint_p_holm": float(a)} for c, a in zip(f.cases, adj, strict=True)]}

        return {"schema_version": 1, "tool": "pp3 audit-e2e --trees", "verdict": "PASS" if self.passed else "FAIL",
                "real": fam(self.real), "mutants": [fam(f) for f in self.mutants]}

    def table(self) -> str:
        """Markdown: each real case's tokens per step and raw p-value; the family's verdict under Holm below."""
        lines = ["| tree | children (verifier) | T | tokens/step (first round) | p joint3 (df) | n |",
                 "|---|---|---|---|---|---|"]
        for c in self.real.cases:
            verifier = "sampled (accept-tree)" if c.mode == "sampled" else "top-k (walk)"
            lines.append(f"| {c.shape} | {verifier} | {c.temperature:g} | {c.sample.tokens_per_step:.4f} "
                         f"| {c.joint.p:.3g} ({c.joint.df}) | {c.sample.n:,} |")
        adj = self.real.adjusted
        lines.append(f"\nHolm over the {adj.size} tests at alpha = {self.real.alpha}: smallest adjusted p "
                     f"{adj.min():.3g}, {'REJECTED' if self.real.rejected else 'none rejected'}. (df 0: a "
                     "deterministic case, one bin.)")
        return "\n".join(lines)

    def mutant_table(self) -> str:
        lines = ["| planted bug | cases | failed sequences | min p joint3 (Holm) | caught |", "|---|---|---|---|---|"]
        for f in self.mutants:
            failed = sum(c.sample.failed for c in f.cases)
            lines.append(f"| {f.name} | {len(f.cases)} | {failed:,} | {f.adjusted.min():.3g} "
                         f"| {'yes' if f.rejected else 'NO'} |")
        return "\n".join(lines)


def run_audit(
    setup: Setup,
    n: int,
    *,
    shapes: Sequence[str] = tuple(SHAPES),
    modes: Sequence[Mode] = MODES,
    temperatures: Sequence[float] = TEMPERATURES,
    mutants: Sequence[str] = MUTANTS,
    mutant_shapes: Sequence[str] = ("2x2", "8x1"),
    mutant_temperatures: Sequence[float] = MUTANT_TEMPERATURES,
    mutant_n: int | None = None,
    alpha: float = ALPHA,
    seed: int = 0,
    batch: int = 1 << 14,
    progress: Callable[[str, int, int], None] | None = None,
) -> Audit:
    """The real run over shapes x modes x temperatures, then each planted bug (sampled trees) over mutant_shapes x
    mutant_temperatures."""

    def prog(tag: str) -> Progress | None:
        return None if progress is None else (lambda done, total: progress(tag, done, total))

    real = [run_case(setup, s, m, t, n, seed=seed, batch=batch, progress=prog(f"{s} {m} T={t:g}"))
            for s in shapes for m in modes for t in temperatures]
    fams = [Family(mu, [run_case(setup, s, "sampled", t, mutant_n or n, seed=seed + 1, mutant=mu, batch=batch,
                                 progress=prog(f"{mu} {s} T={t:g}"))
                        for s in mutant_shapes for t in mutant_temperatures], alpha)
            for mu in mutants]
    return Audit(real=Family("real", real, alpha), mutants=fams)


__all__ = [
    "ALPHA",
    "MODES",
    "MUTANTS",
    "MUTANT_TEMPERATURES",
    "SHAPES",
    "TEMPERATURES",
    "Audit",
    "CaseResult",
    "Family",
    "Sample",
    "parents_of",
    "run_audit",
    "run_case",
    "simulate",
    "tree_round",
]
