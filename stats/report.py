"""Tables, the JSON log of every p-value, and the figure."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pp3.reference import TICKETS
from pp3.reference import tickets as tickets_mod
from pp3.testing import stamp
from stats import cases as cases_mod
from stats import chisq, oracle
from stats.audits import ALPHA, Config, Result, SamplerReport, Suite
from stats.samplers import Composed

_P_FLOOR = 1e-300  # p-values of exactly 0 are drawn at this height on log scales


def _p(r: Result) -> float:
    """The p-value of a chi-square result (every one has a p-value; only exact results have none)."""
    assert r.p is not None, f"{r.audit}: a {r.kind} result without a p-value"
    return r.p


def _fmt_p(p: float | None) -> str:
    return "exact" if p is None else f"{p:.3g}"


def _verdict(r: Result) -> str:
    if r.exact:
        return "pass" if r.passed else "FAIL"
    if r.kind == "ideal":
        return "seen" if r.p_holm is not None and r.p_holm <= ALPHA else "not seen"
    return "REJECT" if r.rejects else "pass"


def results_table(rep: SamplerReport) -> str:
    """The audit table of one sampler: audit, N, statistic, df, p, Holm-adjusted p, verdict."""
    head = f"{'audit':<34} {'N':>13} {'statistic':>12} {'df':>5} {'p':>10} {'p (Holm)':>10}  verdict"
    lines = [head, "-" * len(head)]
    for r in rep.results:
        df = "-" if r.df is None else str(r.df)
        stat = f"{r.statistic:.6g}" if math.isfinite(r.statistic) else "inf"
        holm = "-" if r.p_holm is None else f"{r.p_holm:.3g}"
        lines.append(f"{r.audit:<34} {r.n:>13,} {stat:>12} {df:>5} {_fmt_p(r.p):>10} {holm:>10}  {_verdict(r)}")
    return "\n".join(lines)


def caught_by(rep: SamplerReport) -> list[str]:
    return [f"{r.audit} ({'exact' if r.exact else f'p_holm={r.p_holm:.2g}'})" for r in rep.rejected]


def power_table(reports: list[SamplerReport]) -> str:
    """One line per planted bug: which audits reject it after Holm (or fail exactly), and the verdict."""
    head = f"{'mutant':<20} {'planted bug':<54} {'verdict':<7}  caught by"
    lines = [head, "-" * (len(head) + 40)]
    for rep in reports:
        hits = caught_by(rep)
        shown = ", ".join(hits[:4]) + (f", +{len(hits) - 4} more" if len(hits) > 4 else "")
        lines.append(f"{rep.name:<20} {rep.bug:<54} {'CAUGHT' if hits else 'MISSED':<7}  {shown or '-'}")
    return "\n".join(lines)


def quantization_table(suite: Suite) -> str:
    """Per case: floor-first remainder R, TV(tickets, ideal softmax) and the draws needed to see it at 50% power."""
    head = f"{'case':<22} {'R':>3} {'TV * 2^24':>10} {'power at N':>11} {'N for 50% power':>16}"
    lines = [head, "-" * len(head)]
    for name, q in suite.quantization.items():
        lines.append(
            f"{name:<22} {q['remainder']:>3} {q['tv'] * 2**24:>10.3f} {q['power_at_n']:>11.4g} {q['n50']:>16.3g}"
        )
    return "\n".join(lines)


def effect_table(suite: Suite, planted: list[Composed], family_size: int) -> str:
    """For the bugs that change the per-draw distribution (allocation, draw rule): how far, and what N would show it.

    ``effective`` = the mutant's tickets, pushed through its own draw rule over all 2^24 uniforms. Two ways a
    frequency audit sees it: draws in slots the spec gives no ticket (support check; detected with probability
    1 - exp(-N m / 2^24) for m tickets there, 95% at N = ln(20) 2^24 / m), and Pearson's statistic on the live
    slots (50% power at the level of the first Holm step, alpha / family size).
    """
    head = f"{'mutant':<20} {'cases hit':>9} {'max moved':>9}  {'N: support check, 95%':<32} N: Pearson, 50% power"
    lines = [head, "-" * (len(head) + 12)]
    every = cases_mod.ticket_cases() + cases_mod.e2e_cases()
    for m in planted:
        if m.mutant is None or m.mutant.target not in (
            "pp3.reference.tickets:allocate", "pp3.reference.tickets:draw_slot"
        ):
            continue
        hit, moved_max = 0, 0
        support, pearson = (math.inf, "-"), (math.inf, "-")
        for c in every:
            spec = oracle.spec_tickets(c.row, c.tau).tickets
            eff = m.slots(c.row, c.tau)[1]
            if m.draw_slot is not tickets_mod.draw_slot:
                eff = suite.draw_map(m, eff)
            moved = int(np.abs(eff - spec).sum()) // 2
            if not moved:
                continue
            hit, moved_max = hit + 1, max(moved_max, moved)
            impossible = int(eff[spec == 0].sum())
            if impossible:
                support = min(support, (math.log(20) * TICKETS / impossible, c.name))
            pearson = min(pearson, (chisq.power_n50(eff / TICKETS, spec / TICKETS, ALPHA / family_size), c.name))
        sup = f"{support[0]:.3g} ({support[1]})"
        pea = f"{pearson[0]:.3g} ({pearson[1]})"
        lines.append(f"{m.name:<20} {hit:>9} {moved_max:>9}  {sup:<32} {pea}")
    return "\n".join(lines)


def environment(device: str) -> dict[str, Any]:
    """The environment stamp (``pp3.testing.stamp``) and the audited sampler's device."""
    return stamp.environment() | {"device": device}


def _jsonable(x: float | None) -> float | str | None:
    if x is None or math.isfinite(x):
        return x
    return str(x)


def to_json(
    path: Path, config: Config, env: dict[str, Any], reports: dict[str, SamplerReport], suite: Suite, seconds: float
) -> None:
    data = {
        "semantic_id": "dyadic24-floor-first-v1",
        "alpha_familywise": ALPHA,
        "correction": "Holm, per sampler, over its chi-square family",
        "config": config.__dict__,
        "environment": env,
        "seconds": round(seconds, 1),
        "quantization": suite.quantization,
        "samplers": {
            name: {
                "bug": rep.bug,
                "verdict": ("CAUGHT" if rep.rejected else "MISSED")
                if rep.bug
                else ("FAIL" if rep.rejected else "PASS"),
                "results": [
                    {
                        "audit": r.audit,
                        "kind": r.kind,
                        "n": r.n,
                        "statistic": _jsonable(float(r.statistic)),
                        "df": r.df,
                        "p": r.p,
                        "p_holm": r.p_holm,
                        "passed": r.passed,
                        "verdict": _verdict(r),
                        "detail": r.detail,
                    }
                    for r in rep.results
                ],
            }
            for name, rep in reports.items()
        },
    }
    path.write_text(json.dumps(data, indent=1) + "\n")


def plot(path: Path, suite: Suite, real: list[str], mutants: list[SamplerReport]) -> None:
    """Observed vs expected slot frequencies for four cases, the p-value QQ plot, and the mutants' evidence."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(17, 9.5))
    primary = real[-1]
    for ax, name in zip(axes.flat[:4], ("peaked", "zero-slots", "rand-v1000", "rand-gumbel-tau0.25"), strict=True):
        counts = suite.observed[primary].get(name)
        if counts is None:
            ax.set_visible(False)
            continue
        probs, ideal = suite.expected[name]
        n = counts.sum()
        slots = np.arange(probs.size)
        ax.bar(slots, counts / n, color="#9ecae1", label=f"observed ({primary}, N={n:,})")
        ax.plot(slots, probs, "k_", markersize=14, mew=2, label="expected: tickets / 2^24")
        ax.plot(slots, ideal, "r.", markersize=5, label="ideal softmax (top 32)")
        floor = 0.3 / n
        ax.set_yscale("log")
        ax.set_ylim(floor, 30.0)
        ax.set_title(f"{name}: slot frequencies")
        ax.set_xlabel("slot (ascending token ID)")
        ax.legend(fontsize=7, loc="upper right")
    ax = axes.flat[4]
    for name in real:
        # df = 0: a support check only, p is 1 by construction unless an impossible draw makes it 0
        ps = np.sort([max(_p(r), _P_FLOOR) for r in suite.reports[name].results if r.kind == "chi2" and r.df])
        m = ps.size
        expected = (np.arange(1, m + 1) - 0.5) / m
        ax.plot(-np.log10(expected), -np.log10(ps), "o", ms=4, label=f"{name} ({m} chi-square p-values with df > 0)")
        holm = ALPHA / (m - np.arange(m))
        ax.plot(-np.log10(expected), -np.log10(holm), "r--", lw=1, label="Holm rejection line (alpha=0.01)")
    lim = ax.get_xlim()[1]
    ax.plot([0, lim], [0, lim], "k:", lw=1)
    ax.set_xlabel("-log10 expected p (uniform)")
    ax.set_ylabel("-log10 observed p")
    ax.set_title("p-value QQ plot")
    ax.legend(fontsize=7)
    ax = axes.flat[5]
    names = [rep.name for rep in mutants]
    for y, rep in enumerate(mutants):
        chi = [r.p_holm for r in rep.results if r.kind == "chi2" and r.p_holm is not None]
        height = -math.log10(max(min(chi, default=1.0), _P_FLOOR))
        ax.barh(y, height, color="#3182bd")
        exact = [r.audit for r in rep.results if r.exact and not r.passed]
        if exact:
            ax.text(max(height, 0.0) + 4, y, "exact: " + ", ".join(exact), va="center", fontsize=8, color="#006d2c")
    ax.set_yticks(range(len(names)), names)
    ax.axvline(-math.log10(ALPHA), color="r", ls="--", lw=1, label="alpha = 0.01 (Holm-adjusted)")
    ax.set_xlim(0, 420)
    ax.set_xlabel("-log10 smallest Holm-adjusted chi-square p (300 = p of 0)")
    ax.set_title("planted bugs: chi-square evidence; exact audits failed")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
