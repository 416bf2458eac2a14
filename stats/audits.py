"""The audit suite: every audit runs on every sampler over the same keys, then Holm per sampler.

Chi-square audits (one family per sampler, Holm at ALPHA family-wise):
  fidelity/<case>   Pearson on the 32 slots against spec tickets / 2^24, with the support check (chisq.py)
  uniform/high12    Pearson on 2^12 bins of u >> 12            uniform/low12   on 2^12 bins of u & 0xfff
  pair/<kind>/<b>   independence of (6 bits of u_a, 6 bits of u_b) for consecutive positions, consecutive rounds,
                    seeds one bit apart, and the proposal vs acceptance domain on one key (b = high or low bits)
Ideal audits (their own Holm family; informational: the null is false by construction, tv-bound is the criterion):
  ideal/<case>      Pearson on the same draws against the real softmax at tau over the top 32, with its power
Exact audits (deterministic, pass/fail):
  tickets-exact     the sampler's ids/tickets equal the independent oracle's on every case (§5)
  draw-map          its draw rule, run on every u in 0 .. 2^24-1, gives each slot exactly its tickets (§8)
  t0                greedy rows give the §4.2 token for every seed, round and position
  tv-bound          TV(tickets / 2^24, softmax top 32) < 32 * 2^-24 on every case (§5.2)
  consistency       the sampler's batch draws equal its own selector's tokens on a subsample of the keys
  parity            (kernel only) kernel tokens, ids and tickets equal the reference's on a subsample
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.reference import DEFAULT_TAU, TICKETS, K, Proposal
from stats import cases as cases_mod
from stats import chisq, oracle
from stats.keys import Family, pair
from stats.samplers import Composed, KernelSampler, Keys, Sampler, clear_memo

ALPHA = 0.01  # family-wise, per sampler
TV_BOUND = 32 / TICKETS
CHUNK = 1 << 20  # keys per chunk: bounds memory (a [chunk, 32] comparison per draw batch)


@dataclasses.dataclass(frozen=True)
class Config:
    """Draw counts for one run."""

    name: str
    case_n: int  # draws per ticket / end-to-end case
    heavy_n: int  # draws per heavy case
    uniform_n: int  # uniforms for the bit-bin tests
    pair_n: int  # pairs per pair test
    t0_keys: int  # keys per greedy row
    consistency_rows: int  # selector calls per case checked against the batch draws
    enumerate_all: bool  # draw-map on every ticket case (else the enumerate_quick ones)


QUICK = Config("quick", 100_000, 1 << 22, 1 << 20, 1 << 18, 4096, 256, False)
FULL = Config("full", 1_000_000, 1 << 24, 1 << 23, 1 << 21, 65_536, 2048, True)
GPU = Config("gpu", 10_000_000, 1 << 25, 1 << 24, 1 << 23, 1 << 20, 4096, False)


@dataclasses.dataclass
class Result:
    """One audit of one sampler.

    ``kind``: "chi2" (the sampler's family: Holm, pass/fail), "ideal" (against the softmax the tickets quantise: a
    null that is false by construction, so it is logged and Holm-corrected as its own family but never fails a
    run; ``tv-bound`` is the criterion) or "exact" (``p`` is None; ``passed`` says how it went).
    """

    audit: str
    n: int
    statistic: float
    df: int | None = None
    p: float | None = None
    passed: bool | None = None
    detail: str = ""
    kind: str = "chi2"
    p_holm: float | None = None

    @property
    def exact(self) -> bool:
        return self.kind == "exact"

    @property
    def rejects(self) -> bool:
        """Counts against the sampler: a failed exact audit or a Holm rejection in the chi-square family."""
        if self.exact:
            return not self.passed
        return self.kind == "chi2" and self.p_holm is not None and self.p_holm <= ALPHA


@dataclasses.dataclass
class SamplerReport:
    name: str
    bug: str
    results: list[Result] = dataclasses.field(default_factory=list)

    @property
    def rejected(self) -> list[Result]:
        return [r for r in self.results if r.rejects]

    def apply_holm(self) -> None:
        for kind in ("chi2", "ideal"):
            family = [r for r in self.results if r.kind == kind]
            pvalues: list[float] = []
            for r in family:
                assert r.p is not None, f"{r.audit}: a {kind} result without a p-value"
                pvalues.append(r.p)
            for r, adj in zip(family, chisq.holm(pvalues), strict=True):
                r.p_holm = float(adj)


Progress = Callable[[str], None]


def replay(keys: Keys, i: int) -> str:
    """The key of row ``i``, in hex, to replay a failure."""
    return f"seed=0x{int(keys.seed[i]):016x} round={int(keys.round[i])} position={int(keys.position[i])}"


@dataclasses.dataclass
class Tally:
    """Rows checked by an exact audit, how many differed, and the first one (replayable)."""

    checked: int = 0
    bad: int = 0
    first: str = ""

    def add(self, wrong: npt.NDArray[np.bool_], keys: Keys, what: Callable[[int], str]) -> None:
        self.checked += int(wrong.size)
        self.bad += int(wrong.sum())
        if wrong.any() and not self.first:
            i = int(np.flatnonzero(wrong)[0])
            self.first = f"first: {what(i)} at {replay(keys, i)}"

    def result(self, audit: str) -> Result:
        detail = f"{self.bad} of {self.checked} rows differ" + (f"; {self.first}" if self.first else "")
        return Result(audit, self.checked, self.bad, passed=self.bad == 0, detail=detail, kind="exact")


def _fidelity_result(name: str, counts: npt.NDArray[np.int64], probs: npt.NDArray[np.float64], **kw: Any) -> Result:
    t = chisq.pearson(counts, probs)
    detail = f"{t.groups} bins" + (f"; {t.support_violations} impossible draws" if t.support_violations else "")
    return Result(name, int(counts.sum()), t.statistic, t.df, t.p, detail=detail, **kw)


class Suite:
    """Runs the audits for a list of samplers; ``reports[name]`` collects each sampler's results."""

    def __init__(
        self,
        samplers: Sequence[Sampler],
        config: Config,
        progress: Progress | None = None,
        reference: Composed | None = None,
    ) -> None:
        self.samplers = list(samplers)
        self.config = config
        self.reports = {s.name: SamplerReport(s.name, s.bug) for s in self.samplers}
        self._progress = progress or (lambda _msg: None)
        self._reference = reference or Composed()
        self._drawmap_memo: dict[tuple[int, bytes], npt.NDArray[np.int64]] = {}
        self.observed: dict[str, dict[str, npt.NDArray[np.int64]]] = {s.name: {} for s in self.samplers}
        self.expected: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
        self.quantization: dict[str, dict[str, float]] = {}
        self._tally = {s.name: {"consistency": Tally(), "parity": Tally()} for s in self.samplers}

    def _add(self, sampler: Sampler, result: Result) -> None:
        self.reports[sampler.name].results.append(result)

    def _note(self, audit: str, n: int, t0: float) -> None:
        self._progress(f"{audit:<28} N={n:>12,}  {time.perf_counter() - t0:6.1f}s")

    # --- fidelity and end-to-end -------------------------------------------------------------------------------

    def run_case(self, case: cases_mod.Case) -> None:
        t0 = time.perf_counter()
        spec = oracle.spec_tickets(case.row, case.tau)
        probs = spec.tickets / TICKETS
        ideal_p = oracle.softmax_top_k(case.row, case.tau)
        self.expected[case.name] = (probs, ideal_p)
        n = self.config.heavy_n if case.heavy else self.config.case_n
        family = Family(f"case/{case.name}", n)
        counts = {s.name: np.zeros(K, dtype=np.int64) for s in self.samplers}
        head = max(1, min(self.config.consistency_rows, (1 << 20) // case.row.size))
        for i, keys in enumerate(family.chunks(CHUNK)):
            for s in self.samplers:
                draws = s.case_draws(case.row, case.tau, keys)
                counts[s.name] += np.bincount(draws.slots, minlength=K)
                if draws.inconsistent_rows:
                    self._tally[s.name]["consistency"].bad += draws.inconsistent_rows
                    self._tally[s.name]["consistency"].first = self._tally[s.name]["consistency"].first or (
                        f"first: {case.name}: {draws.inconsistent_rows} batch rows returned other ids/tickets/status"
                    )
                if i == 0:
                    self._consistency(s, case, keys.head(head), draws.slots[:head])
            clear_memo()
            if family.n > 8 * CHUNK:
                self._progress(f"  {case.name}: {min(family.n, (i + 1) * CHUNK):,}/{family.n:,}")
        power, n50 = chisq.power_at(probs, ideal_p, n, ALPHA), chisq.power_n50(probs, ideal_p, ALPHA)
        self.quantization[case.name] = {
            "tv": oracle.total_variation(spec.tickets, case.row, case.tau),
            "remainder": spec.remainder,
            "power_at_n": power,
            "n50": n50,
        }
        for s in self.samplers:
            self.observed[s.name][case.name] = counts[s.name]
            self._add(s, _fidelity_result(f"fidelity/{case.name}", counts[s.name], probs))
            res = _fidelity_result(f"ideal/{case.name}", counts[s.name], ideal_p, kind="ideal")
            res.detail += f"; power {power:.3g} at this N, 50% at N = {n50:.2g}"
            self._add(s, res)
        self._note(f"fidelity+ideal/{case.name}", n, t0)

    def _consistency(self, s: Sampler, case: cases_mod.Case, keys: Keys, slots: npt.NDArray[np.int64]) -> None:
        """The selector's tokens vs the batch draws (and, for a kernel, the selector vs the reference)."""
        m = len(keys)
        rows = np.repeat(case.row[None, :], m, axis=0)
        out = s.propose(rows, np.ones(m, dtype=np.float32), keys.seed, keys.round, keys.position, case.tau)
        drawn = s.slots(case.row, case.tau)[0][slots]
        self._tally[s.name]["consistency"].add(
            out.token.astype(np.int64) != drawn, keys, lambda i: f"{case.name}: token {out.token[i]} vs {drawn[i]}"
        )
        if isinstance(s, KernelSampler):
            ref = self._reference.propose(
                rows, np.ones(m, dtype=np.float32), keys.seed, keys.round, keys.position, case.tau
            )
            wrong = (ref.token != out.token) | (ref.status != out.status)
            wrong |= (ref.ids != out.ids).any(axis=1) | (ref.tickets != out.tickets).any(axis=1)
            self._tally[s.name]["parity"].add(
                wrong, keys, lambda i: f"{case.name}: token {out.token[i]} vs reference {ref.token[i]}"
            )

    def run_cases(self) -> None:
        for case in cases_mod.ticket_cases() + cases_mod.e2e_cases():
            self.run_case(case)
        for s in self.samplers:
            self._add(s, self._tally[s.name]["consistency"].result("consistency"))
            if isinstance(s, KernelSampler):
                self._add(s, self._tally[s.name]["parity"].result("parity"))

    # --- exact: tickets, draw map, TV bound --------------------------------------------------------------------

    def run_tickets_exact(self) -> None:
        t0 = time.perf_counter()
        all_cases = cases_mod.ticket_cases() + cases_mod.e2e_cases()
        specs = {c.name: oracle.spec_tickets(c.row, c.tau) for c in all_cases}
        for s in self.samplers:
            wrong, worst_tv = [], 0.0
            for c in all_cases:
                ids, tix = s.slots(c.row, c.tau)
                if not (np.array_equal(ids, specs[c.name].ids) and np.array_equal(tix, specs[c.name].tickets)):
                    wrong.append(f"{c.name} (sum |delta| = {int(np.abs(tix - specs[c.name].tickets).sum())} tickets)")
                worst_tv = max(worst_tv, oracle.total_variation(tix, c.row, c.tau))
            self._add(
                s,
                Result(
                    "tickets-exact",
                    len(all_cases),
                    len(wrong),
                    passed=not wrong,
                    kind="exact",
                    detail="differ: " + ", ".join(wrong) if wrong else "all cases equal the oracle",
                ),
            )
            self._add(
                s,
                Result(
                    "tv-bound",
                    len(all_cases),
                    worst_tv * TICKETS,
                    passed=worst_tv < TV_BOUND,
                    kind="exact",
                    detail=f"max TV = {worst_tv * TICKETS:.2f} * 2^-24 (bound 32 * 2^-24)",
                ),
            )
        self._note("tickets-exact, tv-bound", len(all_cases), t0)

    def draw_map(self, s: Composed, tix: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """How many of the 2^24 uniforms the sampler's draw rule sends to each slot, given tickets ``tix``."""
        k = (id(s.draw_slot), tix.tobytes())
        if k not in self._drawmap_memo:
            counts = np.zeros(K, dtype=np.int64)
            for start in range(0, TICKETS, CHUNK):
                u = np.arange(start, start + CHUNK, dtype=np.uint64)
                counts += np.bincount(s.draw_slot(tix[None, :], u), minlength=K)
            self._drawmap_memo[k] = counts
        return self._drawmap_memo[k]

    def run_draw_map(self) -> None:
        t0 = time.perf_counter()
        chosen = [c for c in cases_mod.ticket_cases() if self.config.enumerate_all or c.enumerate_quick]
        for s in self.samplers:
            if not isinstance(s, Composed):
                continue  # the kernel's draw rule is not separable; parity pins it to the reference
            wrong = []
            for c in chosen:
                tix = oracle.spec_tickets(c.row, c.tau).tickets
                diff = self.draw_map(s, tix) - tix
                if diff.any():
                    moved = ", ".join(f"slot {j} {d:+d}" for j, d in enumerate(diff) if d)
                    wrong.append(f"{c.name}: {moved}")
            self._add(
                s,
                Result(
                    "draw-map",
                    len(chosen) * TICKETS,
                    len(wrong),
                    passed=not wrong,
                    kind="exact",
                    detail="; ".join(wrong) if wrong else f"{len(chosen)} cases x 2^24 uniforms exact",
                ),
            )
        self._note("draw-map", len(chosen) * TICKETS, t0)

    # --- the uniform -------------------------------------------------------------------------------------------

    def run_uniform_bins(self) -> None:
        t0 = time.perf_counter()
        n = self.config.uniform_n
        hi = {s.name: np.zeros(1 << 12, dtype=np.int64) for s in self.samplers}
        lo = {s.name: np.zeros(1 << 12, dtype=np.int64) for s in self.samplers}
        bits = {}
        for keys in Family("uniform/bins", n).chunks(CHUNK):
            for s in self.samplers:
                u, nb = s.uniform_bits(keys)
                bits[s.name] = nb
                hi[s.name] += np.bincount((u >> np.uint64(max(nb - 12, 0))).astype(np.int64), minlength=1 << 12)
                if nb == 24:
                    lo[s.name] += np.bincount((u & np.uint64(0xFFF)).astype(np.int64), minlength=1 << 12)
            clear_memo()
        for s in self.samplers:
            nb = bits[s.name]
            hb = min(12, nb)
            counts = hi[s.name][: 1 << hb]
            self._add(s, _fidelity_result(f"uniform/high{hb}", counts, np.full(1 << hb, 1.0 / (1 << hb))))
            if nb == 24:
                self._add(s, _fidelity_result("uniform/low12", lo[s.name], np.full(1 << 12, 1.0 / (1 << 12))))
        self._note("uniform/high12, low12", n, t0)

    def run_pairs(self) -> None:
        n = self.config.pair_n
        for kind in ("position", "round", "seed", "domain"):
            t0 = time.perf_counter()
            tables: dict[str, dict[str, npt.NDArray[np.int64]]] = {s.name: {} for s in self.samplers}
            for base in Family(f"pair/{kind}", n).chunks(CHUNK):
                for s in self.samplers:
                    if kind == "domain":
                        if not isinstance(s, Composed):
                            continue  # the kernels draw no acceptance uniforms
                        a, b, nb = s.uniform(base), s.accept_uniform(base), s.nbits
                    else:
                        ka, kb = pair(kind, base)
                        (a, nb), (b, _) = s.uniform_bits(ka), s.uniform_bits(kb)
                    views = {"high": (np.uint64(nb - min(6, nb)), np.uint64((1 << min(6, nb)) - 1))}
                    if nb == 24:
                        views["low"] = (np.uint64(0), np.uint64(63))
                    for view, (shift, mask) in views.items():
                        width = int(mask) + 1
                        ia = ((a >> shift) & mask).astype(np.int64)
                        ib = ((b >> shift) & mask).astype(np.int64)
                        t = np.bincount(ia * width + ib, minlength=width * width).reshape(width, width)
                        tables[s.name][view] = tables[s.name].get(view, 0) + t
                clear_memo()
            for s in self.samplers:
                for view, table in tables[s.name].items():
                    test = chisq.independence(table)
                    self._add(
                        s,
                        Result(
                            f"pair/{kind}/{view}",
                            int(table.sum()),
                            test.statistic,
                            test.df,
                            test.p,
                            detail=f"{table.shape[0]}x{table.shape[1]} table",
                        ),
                    )
            self._note(f"pair/{kind}", n, t0)

    # --- greedy rows -------------------------------------------------------------------------------------------

    def run_t0(self) -> None:
        t0 = time.perf_counter()
        m = self.config.t0_keys
        rows = cases_mod.t0_rows()
        for s in self.samplers:
            wrong = []
            for name, row in rows:
                keys = Family(f"t0/{name}", m).keys(0, m)
                # extreme keys too: all-zero and all-ones words
                seed = np.concatenate([keys.seed, np.array([0, 2**64 - 1], dtype=np.uint64)])
                rnd = np.concatenate([keys.round, np.array([0, 2**64 - 1], dtype=np.uint64)])
                pos = np.concatenate([keys.position, np.array([0, 2**64 - 1], dtype=np.uint64)])
                temp = np.where(np.arange(seed.size) % 2 == 0, np.float32(0.0), np.float32(-0.0))
                batch = max(1, (1 << 22) // row.size)
                g = cases_mod.greedy_token(row)
                tally = Tally()
                for i in range(0, seed.size, batch):
                    sub = Keys(seed[i : i + batch], rnd[i : i + batch], pos[i : i + batch])
                    rr = np.repeat(row[None, :], len(sub), axis=0)
                    out = s.propose(rr, temp[i : i + batch], sub.seed, sub.round, sub.position, DEFAULT_TAU)
                    ok = (out.status == 0) & (out.token == g) & (out.ids[:, 0] == g) & (out.tickets[:, 0] == TICKETS)

                    def what(j: int, o: Proposal = out, g: int = g) -> str:
                        return (
                            f"token {o.token[j]}, slot 0 = ({o.ids[j, 0]}, "
                            f"{o.tickets[j, 0]} tickets), status {o.status[j]}; expected ({g}, 2^24), status 0"
                        )

                    tally.add(~ok, sub, what)
                if tally.bad:
                    wrong.append(f"{name}: {tally.bad} keys, {tally.first}")
            self._add(
                s,
                Result(
                    "t0",
                    len(rows) * (m + 2),
                    len(wrong),
                    passed=not wrong,
                    kind="exact",
                    detail="; ".join(wrong) if wrong else "one token per row for every key",
                ),
            )
        self._note("t0", len(rows) * (m + 2), t0)

    def run_all(self) -> dict[str, SamplerReport]:
        self.run_tickets_exact()
        self.run_draw_map()
        self.run_t0()
        self.run_uniform_bins()
        self.run_pairs()
        self.run_cases()
        for rep in self.reports.values():
            rep.apply_holm()
        return self.reports
