"""The evidence ledger: what pp3 claims (records/claims.toml), the runs behind each claim (one CSV of rows per run,
beside the run's compressed logs in records/<date>/), and which claims ran on today's kernel binaries.

    python -m tools.evidence digests [--digests F]           today's compiled code: its id and variant count
    python -m tools.evidence record DIR --date D --name N    a run's output folder into records/D/N.{tar.xz,sha256,csv}
    python -m tools.evidence ledger                          records/ledger.csv and records/bench.csv from the runs
    python -m tools.evidence render [--digests F]            the generated tables of the front documents
    python -m tools.evidence check [--digests F]             shipped or stale per claim; fails on anything out of date

A claim is **shipped** when every binary of the kernels it rests on that its last run compiled (a variant's PTX,
by its code digest) is still among those kernels' binaries today, and **stale** otherwise. The code of each tree
that ran (every kernel variant the PTX audit compiles, ``python -m pp3.audit.ptx --digests``, with its PTX code
digest) is kept once in records/kernels/<id>.json, and a ledger row names it by that id; so a kernel change of any
kind (source, launch options, Triton) turns exactly the claims resting on that kernel stale, while a variant added
since (a new launch option) leaves the claims of the binaries that ran alone. Written by hand because no library
keeps evidence keyed by compiled-code digests; the tables are plain CSV (the Liger-Kernel habit: provenance as
columns).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "records"
LEDGER_COLUMNS = ("claim", "date", "card", "driver", "python", "torch", "triton", "commit", "kernels", "verdict",
                  "result", "record")
BENCH_COLUMNS = ("date", "card", "torch", "triton", "commit", "kernels", "process", "op", "impl", "dtype", "depth",
                 "B", "V", "median_us", "p10_us", "p90_us")
DOCS = ("README.md", "VERIFY.md", "STATS.md", "BENCHMARKS.md")


# ------------------------------------------------------------------------------------------------------ the claims


@dataclass(frozen=True)
class Claim:
    id: str
    doc: str
    where: str
    text: str
    command: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    text: str
    claims: tuple[str, ...]
    anchor: str


@dataclass(frozen=True)
class Goal:
    op: str
    text: str
    num: str
    den: str | None  # None: an absolute bound on ``num`` in µs
    max: float
    dtype: str | None = None
    batches: tuple[int, ...] = ()  # empty: every batch measured


@dataclass(frozen=True)
class Claims:
    groups: dict[str, tuple[str, ...]]
    claims: tuple[Claim, ...]
    summaries: tuple[Summary, ...]
    goals: tuple[Goal, ...]

    def claim(self, cid: str) -> Claim:
        for c in self.claims:
            if c.id == cid:
                return c
        raise KeyError(f"no claim {cid!r} in records/claims.toml")


def load_claims(path: Path = RECORDS / "claims.toml") -> Claims:
    """records/claims.toml, checked: unique ids, known groups and documents, texts of at most 100 characters."""
    doc = tomllib.loads(path.read_text())
    groups = {g: tuple(ks) for g, ks in doc["groups"].items()}
    claims = tuple(Claim(c["id"], c["doc"], c["where"], c["text"], c["command"], tuple(c["groups"]))
                   for c in doc["claim"])
    summaries = tuple(Summary(s["text"], tuple(s["claims"]), s["anchor"]) for s in doc.get("summary", []))
    goals = tuple(Goal(g["op"], g["text"], g["num"], g.get("den"), float(g["max"]), g.get("dtype"),
                       tuple(g.get("batches", ()))) for g in doc.get("goal", []))
    ids = [c.id for c in claims]
    problems = [f"claim {i!r} twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for c in claims:
        problems += [f"claim {c.id}: unknown group {g!r}" for g in c.groups if g not in groups]
        if len(c.text) > 100 or c.doc not in ("verify", "stats") or c.where not in ("gpu", "cpu"):
            problems.append(f"claim {c.id}: text over 100 characters, or doc/where not one of the known")
    problems += [f"summary {s.text!r}: unknown claim {i!r}" for s in summaries for i in s.claims if i not in ids]
    if problems:
        raise ValueError("records/claims.toml: " + "; ".join(problems))
    return Claims(groups, claims, summaries, goals)


# ------------------------------------------------------------------------------------------------------ digests


KERNELS = RECORDS / "kernels"


def code_id(digests: dict[str, str]) -> str:
    """The id of a tree's compiled code: a hash of its ``variant=digest`` lines (12 hex digits)."""
    return hashlib.sha256("\n".join(f"{v}={d}" for v, d in sorted(digests.items())).encode()).hexdigest()[:12]


def keep_code(digests: dict[str, str]) -> str:
    """``digests`` kept as records/kernels/<id>.json (once per tree); its id."""
    cid = code_id(digests)
    path = KERNELS / f"{cid}.json"
    if not path.exists():
        KERNELS.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(sorted(digests.items())), indent=0) + "\n")
    return cid


def load_codes() -> dict[str, dict[str, str]]:
    """Every kept tree's code, by id."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(KERNELS.glob("*.json"))}


def ungrouped(audit: dict[str, Any], groups: dict[str, tuple[str, ...]]) -> list[str]:
    """Launched kernels (qualified names in the audit) that no group names, or that two groups name."""
    owners: dict[str, list[str]] = {}
    for g, kernels in groups.items():
        for k in kernels:
            owners.setdefault(k, []).append(g)
    return [k for k in audit["kernels"] if len(owners.get(k.rsplit(".", 1)[-1], [])) != 1]


def changed_groups(groups: Iterable[str], members: dict[str, tuple[str, ...]], then: dict[str, str] | None,
                   today: dict[str, str]) -> list[str]:
    """The groups whose code differs between a run (``then``) and today, kernel by kernel: a binary the run compiled
    (a PTX code digest) is no longer among the kernel's binaries today, or the kernel did not exist then. Binaries
    are compared, not names: a variant added since, or a launch parameter renamed around the same code, changes
    nothing."""
    def binaries(code: dict[str, str], kernel: str) -> set[str]:
        return {d for v, d in code.items() if v.split("[", 1)[0] == kernel}

    out = []
    for g in groups:
        for k in members[g]:
            old, new = binaries(then or {}, k), binaries(today, k)
            if (old or new) and not (old and old <= new):
                out.append(g)
                break
    return out


def run_audit() -> dict[str, Any]:
    """``python -m pp3.audit.ptx --digests`` on this tree (its cache, PP3_PTX_CACHE, spares a second compilation)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-m", "pp3.audit.ptx", "--digests"], capture_output=True, text=True,
                          cwd=ROOT, env=env, check=False)
    if not proc.stdout.strip():
        raise RuntimeError(f"the PTX audit printed nothing: {proc.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


# ------------------------------------------------------------------------------------------------------ the ledger


def run_files(kind: str) -> list[Path]:
    """Every run's rows (``kind`` "csv": claim rows; "bench.csv": timing rows) under records/<date>/."""
    pattern = "*.bench.csv" if kind == "bench.csv" else "*.csv"
    return sorted(p for p in RECORDS.glob(f"20??-??-??/{pattern}")
                  if kind == "bench.csv" or not p.name.endswith(".bench.csv"))


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def to_csv(rows: Iterable[dict[str, str]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: r.get(c, "") for c in columns})
    return buf.getvalue()


def _when(r: dict[str, str]) -> tuple[str, str, str]:
    """When a run was, for ordering: its date, then its time of day where its name ends in one (records/<date>/
    <card>-HHMM; the older names, cpu-a, h100-b, ..., come first on their day), then the claim."""
    name = r.get("record", "").split(":", 1)[0].rsplit("/", 1)[-1].split(".", 1)[0]
    m = re.search(r"-(\d{4})$", name)
    return r["date"], m.group(1) if m else f"0000{name}", r["claim"]


def ledger_text() -> str:
    rows = [r for p in run_files("csv") for r in read_rows(p)]
    return to_csv(sorted(rows, key=_when), LEDGER_COLUMNS)


def bench_text() -> str:
    rows = [r for p in run_files("bench.csv") for r in read_rows(p)]
    key = ("process", "op", "impl", "dtype", "depth", "B", "V")
    return to_csv(sorted(rows, key=lambda r: (r["date"], *(r[k].zfill(8) if k in ("depth", "B", "V") else r[k]
                                                              for k in key))), BENCH_COLUMNS)


def latest(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    """The last run of each claim (by date, then time of day: ``_when``)."""
    out: dict[str, dict[str, str]] = {}
    for r in sorted(rows, key=_when):
        out[r["claim"]] = r
    return out


@dataclass
class Standing:
    claim: Claim
    row: dict[str, str] | None
    state: str  # "shipped", "stale", "reference" (rests on no kernel), "never run"
    changed: list[str] = field(default_factory=list)


def standing(claims: Claims, rows: list[dict[str, str]], today: dict[str, str],
             codes: dict[str, dict[str, str]]) -> list[Standing]:
    """Each claim's last run and whether its kernels are today's (``today``: variant -> digest; ``codes``: the kept
    trees' code by id)."""
    last = latest(rows)
    out = []
    for c in claims.claims:
        row = last.get(c.id)
        if row is None:
            out.append(Standing(c, None, "never run"))
            continue
        if not c.groups:
            out.append(Standing(c, row, "reference"))
            continue
        changed = changed_groups(c.groups, claims.groups, codes.get(row["kernels"]), today)
        out.append(Standing(c, row, "stale" if changed else "shipped", changed))
    return out


# ------------------------------------------------------------------------------------------------------ records


def manifest_of(archive: Path) -> str:
    """``sha256  member`` for every file in ``archive`` (the sha256sum format), in the archive's order."""
    lines = []
    with tarfile.open(archive, "r:xz") as tar:
        for m in tar.getmembers():
            if m.isfile():
                f = tar.extractfile(m)
                assert f is not None
                lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {m.name}")
    return "\n".join(lines) + "\n"


def archive(folder: Path, dest: Path) -> None:
    """Every file under ``folder`` into ``dest`` (.tar.xz, paths relative to the folder, sorted, no owner or time:
    the same files give the same bytes), and its manifest beside it (.sha256)."""
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(dest, "w:xz", preset=9) as tar:
        for p in sorted(q for q in folder.rglob("*") if q.is_file()):
            tar.add(p, arcname=str(p.relative_to(folder)), filter=clean)
    dest.with_suffix("").with_suffix(".sha256").write_text(manifest_of(dest))


def check_manifests() -> list[str]:
    """Every archive under records/ has a manifest, and its files are exactly the manifest's."""
    problems = []
    for a in sorted(RECORDS.glob("20??-??-??/*.tar.xz")):
        m = a.with_suffix("").with_suffix(".sha256")
        if not m.exists():
            problems.append(f"{a.relative_to(ROOT)}: no manifest")
        elif manifest_of(a) != m.read_text():
            problems.append(f"{a.relative_to(ROOT)}: its files differ from {m.name}")
    return problems


# ------------------------------------------------------------------------------------------------------ rendering

MAX_LINE = 120


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    align = align or "l" * len(header)
    rule = ["---:" if a == "r" else "---" for a in align]
    return [f"| {' | '.join(r)} |" for r in (header, rule, *rows)]


def _run(row: dict[str, str]) -> str:
    return f"{row['date']}, {row['card']}"


def _kernels(s: Standing) -> str:
    if s.state == "stale":  # the first group that changed, and how many more
        return f"stale: {s.changed[0]}" + (f" +{len(s.changed) - 1}" if len(s.changed) > 1 else "")
    return {"shipped": "shipped", "reference": "—", "never run": "never run"}[s.state]


def _archive(record: str) -> str:
    """The archive part of a row's ``record`` (``<date>/<name>.tar.xz:<member>``), as a shortcut link."""
    return f"[{record.split(':', 1)[0].removesuffix('.tar.xz')}]"


def _links(records: Iterable[str]) -> list[str]:
    refs = sorted({r.split(":", 1)[0] for r in records if r})
    return [f"[{r.removesuffix('.tar.xz')}]: records/{r}" for r in refs]


def claims_block(standings: list[Standing], doc: str, where: str) -> list[str]:
    """The table of one section: claim, result, last run, kernels (shipped/stale)."""
    mine = [s for s in standings if s.claim.doc == doc and s.claim.where == where]
    rows = [(s.claim.text, s.row["result"] if s.row else "—", _run(s.row) if s.row else "—", _kernels(s))
            for s in mine]
    return _table(("claim", "result", "last run", "kernels"), rows)


def commands_block(standings: list[Standing], doc: str) -> list[str]:
    """How each claim of ``doc`` is re-run, then the record of its last run (two tables: a line stays short)."""
    mine = [s for s in standings if s.claim.doc == doc]
    commands = _table(("claim", "command"), [(f"`{s.claim.id}`", f"`{s.claim.command}`") for s in mine])
    records = _table(("claim", "last run's record", "file"), [
        (f"`{s.claim.id}`", _archive(s.row["record"]) if s.row else "—",
         f"`{s.row['record'].split(':', 1)[-1]}`" if s.row else "—") for s in mine])
    return [*commands, "", *records, "", *_links(s.row["record"] for s in mine if s.row)]


def status_block(claims: Claims, standings: list[Standing]) -> list[str]:
    """README's Status: each summary's verdict over its claims (pass only if every last run passed; the oldest of
    their last runs; how many rest on kernels that changed since), its text linking to the claims' section."""
    by_id = {s.claim.id: s for s in standings}
    rows = []
    for sm in claims.summaries:
        ss = [by_id[i] for i in sm.claims]
        ran = [s.row for s in ss if s.row]
        if any(r["verdict"] != "PASS" for r in ran):
            verdict = "FAIL"
        elif not ran:
            verdict = "not run yet"
        else:
            verdict = "pass" if len(ran) == len(ss) else f"pass, {len(ss) - len(ran)} not run"
        stale = sum(s.state == "stale" for s in ss)
        if stale:
            verdict += f", {stale}/{len(ss)} stale"
        oldest = min(ran, key=lambda r: r["date"]) if ran else None
        rows.append((f"[{sm.text}][{sm.anchor}]", verdict, _run(oldest) if oldest else "—"))
    anchors = sorted({sm.anchor for sm in claims.summaries})
    return [*_table(("claim", "verdict", "oldest last run"), rows), "",
            *(f"[{a}]: VERIFY.md#{a}" for a in anchors)]


def _short(impl: str) -> str:
    """An implementation's name as a table row (the ledger keeps the benchmark's own name)."""
    if impl == "trivial 2-launch row max":
        return "floor"
    if impl == "pp3 greedy (T0)":
        return "pp3 propose, all rows T0"
    named = re.sub(r"^flashinfer [\d.]+ (?:cake )?", "FlashInfer ", impl)
    return named.replace("top_k_probs_to_slab (p given)", "slab on p")


def _fmt(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def bench_process(rows: list[dict[str, str]], op: str, key: str) -> list[dict[str, str]]:
    """The rows of ``op`` from the newest process that timed the implementation ``key`` (ratios are taken within
    one process only)."""
    mine = [r for r in rows if r["op"] == op and r["impl"] == key and r["triton"] == PINNED_TRITON]
    if not mine:
        return []
    newest = max(mine, key=lambda r: (r["date"], r["process"]))["process"]
    return [r for r in rows if r["process"] == newest and r["op"] == op]


def bench_block(claims: Claims, rows: list[dict[str, str]], op: str, key: str) -> list[str]:
    """One operation of BENCHMARKS.md: conditions, µs per implementation and batch, goals."""
    mine = bench_process(rows, op, key)
    if not mine:
        return ["No run has timed this operation yet."]
    r0 = mine[0]
    depths = sorted({int(r["depth"]) for r in mine})
    out = [f"Median µs per call replayed in one CUDA graph; V = {r0['V']}, depth {'/'.join(map(str, depths))}; "
           f"{r0['card']}, {r0['date']}, torch {r0['torch']}, Triton {r0['triton']}; one process "
           f"([{r0['process'].split(':')[0]}]).", ""]
    impls = list(dict.fromkeys(r["impl"] for r in mine))
    for dtype in dict.fromkeys(r["dtype"] for r in mine):
        for depth in depths:
            cells = {(r["impl"], int(r["B"])): float(r["median_us"]) for r in mine
                     if r["dtype"] == dtype and int(r["depth"]) == depth}
            batches = sorted({b for _, b in cells})
            out += [f"{dtype}, depth {depth}:", ""]
            out += _table(("µs", *(f"B={b}" for b in batches)),
                          [(_short(i), *(_fmt(cells[i, b]) if (i, b) in cells else "—" for b in batches))
                           for i in impls if any((i, b) in cells for b in batches)], "l" + "r" * len(batches))
            out.append("")
    goals = [g for g in claims.goals if g.op == op and g.num in impls]
    if goals:
        out += goals_block(goals, mine)
    out.append(f"[{r0['process'].split(':')[0]}]: records/{r0['process'].split(':')[0]}.tar.xz")
    return out


def goals_block(goals: Sequence[Goal], mine: list[dict[str, str]]) -> list[str]:
    """Each goal against the process's rows, per format and depth: the batches where it is met and where not."""
    cells = {(r["impl"], r["dtype"], int(r["depth"]), int(r["B"])): float(r["median_us"]) for r in mine}
    rows = []
    for g in goals:
        met: dict[str, list[int]] = {}
        unmet: dict[str, list[int]] = {}
        measured: dict[str, list[int]] = {}
        for (impl, dtype, depth, b), us in sorted(cells.items()):
            if impl != g.num or (g.dtype and dtype != g.dtype) or (g.batches and b not in g.batches):
                continue
            den = cells.get((g.den, dtype, depth, b)) if g.den else 1.0
            if den is None:
                continue
            head = f"{'bf16' if dtype == 'bfloat16' else 'fp16' if dtype == 'float16' else 'fp32'} d{depth}"
            measured.setdefault(head, []).append(b)
            (met if us / den <= g.max else unmet).setdefault(head, []).append(b)
        target = f"{g.max:g}x {_short(g.den)}" if g.den else f"{g.max:g} µs"
        said = "—" if not met else "all" if not unmet else "the rest"  # the cells that miss are the news
        rows.append((g.text, target, said, _span(unmet, measured)))
    return [*_table(("goal", "at most", "met at", "unmet at"), rows), ""]


def _span(where: dict[str, list[int]], measured: dict[str, list[int]]) -> str:
    """Batches as few words as say them: "fp32 d5 B=1-16, 256; bf16 d5 all" (runs of the measured batches)."""
    said: dict[tuple[str, str], list[str]] = {}  # (depth, batches) -> the formats that say it
    for head, bs in where.items():
        fmt, depth = head.split()
        order = measured[head]
        if bs == order:
            said.setdefault((depth, "all"), []).append(fmt)
            continue
        runs: list[list[int]] = []
        for b in bs:
            if runs and order.index(b) == order.index(runs[-1][-1]) + 1:
                runs[-1].append(b)
            else:
                runs.append([b])
        text = "B=" + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)
        said.setdefault((depth, text), []).append(fmt)
    one_depth = len({h.split()[1] for h in measured}) == 1  # then the conditions line names it
    return "; ".join(f"{'/'.join(fmts)}{'' if one_depth else ' ' + depth} {text}"
                     for (depth, text), fmts in said.items()) or "—"


def tritons_block(rows: list[dict[str, str]]) -> list[str]:
    """Each run that timed another Triton beside the pinned one: both processes' µs, same card, no ratio across
    them (fp32, depth 5)."""
    out: list[str] = []
    for record in sorted({r["process"].split(":")[0] for r in rows if r["triton"] != PINNED_TRITON}):
        mine = [r for r in rows if r["process"].startswith(record + ":") and r["dtype"] == "float32"
                and r["depth"] == "5" and r["impl"] in ("pp3 sampled", "pp3 verify", "trivial 2-launch row max",
                                                        "torch argmax", "read-only pass")]
        batches = sorted({int(r["B"]) for r in mine})
        cells = {(r["op"], r["impl"], r["triton"], int(r["B"])): float(r["median_us"]) for r in mine}
        keys = sorted({(r["op"], r["impl"], r["triton"]) for r in mine}, key=lambda k: (k[0] != "propose", k))
        r0 = mine[0] if mine else None
        if r0 is None:
            continue
        out += [f"{r0['card']}, {r0['date']}: one process per Triton, same card ([{record}]); fp32, depth 5, µs.", ""]
        out += _table(("operation", "row", "Triton", *(f"B={b}" for b in batches)),
                      [(op, _short(impl), tri, *(_fmt(cells[op, impl, tri, b]) if (op, impl, tri, b) in cells
                                                  else "—" for b in batches)) for op, impl, tri in keys],
                      "lll" + "r" * len(batches))
        out += ["", f"[{record}]: records/{record}.tar.xz", ""]
    return out[:-1] if out else ["No run has timed another Triton yet."]


# Generated block -> (operation, the implementation whose newest process the block shows).
def speed_block(rows: list[dict[str, str]]) -> list[str]:
    """README's Speed: fp32, depth 5, a few batch sizes; the proposal's and the verifier's newest processes, each
    with the peers timed beside it (a table per process: no ratio crosses processes)."""
    out: list[str] = []
    for title, op, key in (("Proposal", "propose", "pp3 sampled"), ("Verification", "verify", "pp3 verify")):
        mine = [r for r in bench_process(rows, op, key) if r["dtype"] == "float32" and r["depth"] == "5"]
        if not mine:
            continue
        r0 = mine[0]
        cells = {(r["impl"], int(r["B"])): float(r["median_us"]) for r in mine}
        batches = [b for b in (1, 4, 16, 64, 256) if (key, b) in cells]
        impls = [i for i in dict.fromkeys(r["impl"] for r in mine)
                 if not i.startswith(("pp3 baseline", "pp3 launch", "pp3 tiles", "pp3 segments"))]
        out += [f"{title}: µs per call (median, one CUDA graph), fp32, depth 5, V = {r0['V']}; {r0['card']}, "
                f"{r0['date']}, one process.", ""]
        out += _table(("µs", *(f"B={b}" for b in batches)),
                      [(_short(i), *(_fmt(cells[i, b]) if (i, b) in cells else "—" for b in batches))
                       for i in impls],
                      "l" + "r" * len(batches))
        out.append("")
    return out[:-1] if out else ["No run has timed the kernels yet."]


BENCH_SECTIONS = {"bench-propose": ("propose", "pp3 sampled"), "bench-greedy": ("propose", "pp3 greedy kernel"),
                  "bench-verify": ("verify", "pp3 verify"), "bench-step": ("step", "draft_sampled+verify")}


def render_blocks(claims: Claims, ledger: list[dict[str, str]], bench: list[dict[str, str]],
                  today: dict[str, str], codes: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """Every generated block of the front documents, by marker name."""
    st = standing(claims, ledger, today, codes)
    blocks = {
        "status": status_block(claims, st),
        "speed": speed_block(bench),
        "verify-gpu": claims_block(st, "verify", "gpu"),
        "verify-cpu": claims_block(st, "verify", "cpu"),
        "verify-commands": commands_block(st, "verify"),
        "stats": [*claims_block(st, "stats", "gpu"), "", *claims_block(st, "stats", "cpu"), "",
                  *commands_block(st, "stats")],
    }
    for name, (op, key) in BENCH_SECTIONS.items():
        blocks[name] = bench_block(claims, bench, op, key)
    blocks["bench-tritons"] = tritons_block(bench)
    return blocks


_MARK = re.compile(r"(<!-- evidence:(?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- /evidence:(?P=name) -->)", re.S)


def rendered(text: str, blocks: dict[str, list[str]]) -> str:
    """``text`` with every marked block replaced by its generated lines (a block with no generator stays)."""
    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in blocks:
            return m.group(0)
        lines = [w for ln in blocks[name] for w in (
            [ln] if ln.startswith("|") or len(ln) <= MAX_LINE else textwrap.wrap(ln, MAX_LINE, break_long_words=False))]
        long = [ln for ln in lines if len(ln) > MAX_LINE]
        if long:
            raise ValueError(f"block {name}: a generated line is over {MAX_LINE} characters "
                             f"(shorten its claim or cell): {long[0]}")
        return m.group(1) + "\n".join(lines) + "\n" + m.group(4)
    return _MARK.sub(sub, text)


# ------------------------------------------------------------------------------------------------------ recording

PINNED_TRITON = "3.6.0"  # the GPU machine's own Triton; a run under another (make triton-kit) is its own claim
_CARDS = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200"}


def _env_of(doc: dict[str, Any]) -> dict[str, str]:
    """A ledger row's run columns from an environment stamp (pp3.testing.stamp.environment)."""
    pk = doc.get("packages", {})
    gpu = doc.get("gpu")
    return {"date": str(doc.get("date", ""))[:10], "card": _CARDS.get(gpu, gpu) if gpu else "CPU",
            "driver": doc.get("driver") or "", "python": doc.get("python", ""),
            "torch": (pk.get("torch") or "").split("+")[0], "triton": pk.get("triton") or "",
            "commit": (doc.get("commit") or "")[:7]}


def _count(text: str, pattern: str) -> list[Any]:
    return re.findall(pattern, text, re.M)


def rows_of_file(path: Path, rel: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The claim rows and the timing rows one output file of a GPU step says (its environment stamped later)."""
    name, text = path.name, path.read_text(errors="replace")
    rows: list[dict[str, str]] = []
    bench: list[dict[str, str]] = []

    def row(claim: str, ok: bool | str, result: str) -> None:
        verdict = ok if isinstance(ok, str) else "PASS" if ok else "FAIL"
        rows.append({"claim": claim, "verdict": verdict, "result": result, "record": rel})

    if name == "verify.log" or re.fullmatch(r"bulk_\d+(_nopdl)?\.log", name):
        final = _count(text, r"^verify: (PASS|FAIL) \((.*)\)$")
        suites = _count(text, r"^  (\w+): (\d+) calls, (\d+) rows, (\d+) mismatches")
        if not final:  # stopped (a timeout): what finished is stated, and the claim is not passed
            if suites:
                bad = sum(int(x[3]) for x in suites)
                row("sel-suites" if suites[0][0] != "verifier" else "ver-suites", "PARTIAL",
                    f"{', '.join(x[0] for x in suites)}: {bad} mismatches (stopped)")
            return rows, []
        ok = final[-1][0] == "PASS"
        bulk = _count(text, r"^  bulk: (\d+)/\d+ rows, (\d+) mismatches")
        size = (_count(text, r"sizes=(\w+)") or ["?"])[0]
        size = "" if size == "full" else f" ({size} size)"  # the claims name the full suites
        if bulk:
            row("sel-bulk-nopdl" if name.endswith("_nopdl.log") else "sel-bulk", ok,
                f"{bulk[-1][1]} mismatches, {int(bulk[-1][0]) / 1e6:g}M rows")
        sel = [s for s in suites if s[0] not in ("verifier",)]
        if sel:
            bad, calls = sum(int(x[3]) for x in sel), sum(int(x[1]) for x in sel)
            row("sel-suites", ok, f"{bad} mismatches, {calls} calls{size}")
        ver = [s for s in suites if s[0] == "verifier"]
        if ver:
            row("ver-suites", ok, f"{ver[0][3]} mismatches, {int(ver[0][2]):,} requests{size}")
    elif re.fullmatch(r"bulk_verify_\d+_\d+\.json", name):
        doc = json.loads(text)
        a, b = doc["rows_checked"]
        bad = doc["counts"]["mismatching_rows"]
        row("ver-bulk", doc["verdict"] == "PASS", f"{bad} mismatches, rows {a:,}-{b - 1:,}")
    elif name == "props.log":
        passed = _count(text, r"(\d+) passed")
        failed = _count(text, r"(\d+) failed")
        claim = "ver-props" if "test_accept_vs_reference" in text else "sel-props"
        n_ok, n_bad = (passed[-1] if passed else "0"), (failed[-1] if failed else "0")
        row(claim, bool(passed) and not failed, f"{n_ok} passed, {n_bad} failed")
    elif name == "ptx_audit.json":
        doc = json.loads(text[text.index("{"):])
        claim = "ptx-launched" if doc.get("mode") == "launched" else "ptx-compiled"
        row(claim, doc["verdict"] == "PASS", f"{doc['variants']} variants, {len(doc['forbidden'])} forbidden")
    elif m := re.fullmatch(r"sanitize_(selector|verifier|all)_(\w+)\.log", name):
        errors = _count(text, r"(?:ERROR SUMMARY|RACECHECK SUMMARY): (\d+) (?:errors|hazards)")
        ok = bool(errors) and all(e == "0" for e in errors)
        for cases in (("selector", "verifier") if m.group(1) == "all" else (m.group(1),)):
            row(f"sanitize-{cases[:3]}", ok, f"{m.group(2)}: {errors[-1] if errors else '?'} errors")
    elif name == "expf_audit.log":
        inputs = _count(text, r"^inputs: ([\d,]+)$")
        differ = _count(text, r"^device expf differs from the reference: (\d+)$")
        ok = bool(inputs and differ) and differ[-1] == "0"
        row("expf-gpu", ok, f"{differ[-1] if differ else '?'} of {inputs[-1] if inputs else '?'} differ")
    elif name == "screen_audit.log":
        worst = _count(text, r"largest relative difference .*= (2\^-[\d.]+) at .*\(bound SCREEN_REL = (2\^-\d+)\)")
        ok = "audit-screen: PASS" in text
        row("screen-gpu", ok, f"largest error {worst[-1][0]} (bound {worst[-1][1]})" if worst else "no figure")
    elif name == "stats.log":
        verdict = _count(text, r"^(?:stats|verdict)\W+(PASS|FAIL)")
        row("stats-gpu", verdict[-1] == "PASS" if verdict else False, verdict[-1] if verdict else "no verdict")
    elif m := re.fullmatch(r"e2e_gpu_(triton|flashinfer)\.log|e2e_(trees)\.log", name):
        ok = bool(_count(text, r"^audit-e2e(?: --trees)?: PASS"))
        row(f"e2e-{m.group(1) or m.group(2)}", ok, "PASS, planted bugs caught" if ok else "FAIL")
    elif name == "ci.log":  # the output of .ci/run: its steps end with "=== <step>: <seconds> s"
        ends = {m.group(1): (m.end(), int(m.group(2))) for m in re.finditer(r"^=== (.+): (\d+) s$", text, re.M)}
        test, checks, matrix = (ends.get(s) for s in ("make test done", "verify, reference, wheel and install checks "
                                                      "done", "Triton matrix done"))
        summary = _count(text[: test[0] if test else len(text)],
                         r"^=*\s*(?:(\d+) failed, )?(\d+) passed(?:, (\d+) skipped)?")
        if summary:
            failed, n, skipped = summary[0]
            row("cpu-test", test is not None, (f"{failed} failed, " if failed else "")
                + f"{int(n):,} passed, {skipped or 0} skipped" + (f"; {test[1] / 60:.0f} min" if test else ""))
        if test:
            verify = _count(text[test[0]: checks[0] if checks else len(text)], r"^verify: (PASS|FAIL) \((.*)\)$")
            if verify:
                row("cpu-verify", checks is not None and verify[0][0] == "PASS", f"{verify[0][0]}, {verify[0][1]}")
        if checks:
            tail = text[checks[0]: matrix[0] if matrix else len(text)]
            tritons = _count(tail, r"^triton (\S+) numpy")
            audits, verdicts = _count(tail, r"^ptx audit: (\w+)"), _count(tail, r"^verify: (PASS|FAIL)")
            ok = matrix is not None and len(audits) == len(verdicts) == len(tritons) > 0 \
                and {*audits, *verdicts} == {"PASS"}
            row("triton-matrix", ok, f"{'PASS' if ok else 'FAIL'} on {', '.join(tritons) or 'no Triton'}")
        if matrix:
            row("ci", True, f"{matrix[1] / 60:.0f} min on a fresh clone")
    elif name == "bench.json":
        doc = json.loads(text)
        for r in doc["results"]:
            bench.append({"op": "propose", "impl": r["impl"], "dtype": r["dtype"], "depth": str(r["depth"]),
                          "B": str(r["B"]), "V": str(r["V"]), **_times(r)})
    elif name == "bench_drafter.json":
        doc = json.loads(text)
        peers = {"pp3": "pp3 verify", "read_only_pass": "read-only pass",
                 "flashinfer_softmax_chain": "FlashInfer softmax+chain", "flashinfer_chain_only":
                 "FlashInfer chain alone (p given)", "pp3_baseline": "pp3 baseline"}
        for r in doc.get("verify", []):
            for key, impl in peers.items():
                if isinstance(r.get(key), dict):
                    bench.append({"op": "verify", "impl": impl, "dtype": r["dtype"], "depth": str(r["depth"]),
                                  "B": str(r["B"]), "V": str(r["V"]), **_times(r[key])})
        for r in doc.get("step", []):
            for key, val in r.items():
                if isinstance(val, dict) and "median_us" in val:
                    bench.append({"op": "step", "impl": key, "dtype": str(r.get("dtype", "float32")),
                                  "depth": str(r["depth"]), "B": str(r["B"]), "V": str(r["V"]), **_times(val)})
    return rows, bench


def _times(r: dict[str, Any]) -> dict[str, str]:
    return {k: f"{float(r[k]):.2f}" for k in ("median_us", "p10_us", "p90_us")}


def _stamp_of(folder: Path) -> dict[str, Any] | None:
    """The environment stamp of a step's folder: env.json, else the first stamp found in a JSON output."""
    env = folder / "env.json"
    if env.exists():
        doc: dict[str, Any] = json.loads(env.read_text())
        return doc
    for p in sorted(folder.glob("*.json")):
        try:
            d = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        for key in ("environment", "env"):
            if isinstance(d, dict) and isinstance(d.get(key), dict):
                stamp: dict[str, Any] = d[key]
                return stamp
    return None


def record_rows(out: Path, date: str, name: str, code: str, claims: Claims
                ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The ledger and timing rows of a run's output folder ``out`` (each subfolder a process with its own stamp):
    one row per claim (rows of the same claim merged: PASS only if all passed), each stamped with its folder's
    environment and the id of the compiled code of the tree that ran (``code``, records/kernels/); a run under
    another Triton than the pinned one is recorded as that Triton's claim (``triton-<version>-gpu``)."""
    rows: dict[str, dict[str, str]] = {}
    bench: list[dict[str, str]] = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        stamp = _stamp_of(path.parent)
        if stamp is None:
            continue
        env = _env_of(stamp)
        rel = f"{date}/{name}.tar.xz:{path.relative_to(out)}"
        found, timed = rows_of_file(path, rel)
        process = f"{date}/{name}:{path.relative_to(out)}"  # one benchmark file is one process
        bench += [{**env, "kernels": code, "process": process, **t} for t in timed]
        for r in found:
            cid = r["claim"] if env["triton"] == PINNED_TRITON or env["card"] == "CPU" \
                else f"triton-{env['triton']}-gpu"
            claims.claim(cid)  # a claim of records/claims.toml, or KeyError
            new = {**env, **r, "claim": cid, "kernels": code}
            if cid in rows:
                old = rows[cid]
                old["verdict"] = "PASS" if old["verdict"] == new["verdict"] == "PASS" else \
                    next(v for v in (old["verdict"], new["verdict"]) if v != "PASS")
                old["result"] = f"{old['result']}; {new['result']}"
            else:
                rows[cid] = new
    return list(rows.values()), bench


def record(out: Path, date: str, name: str, code: str, claims: Claims) -> list[Path]:
    """A run's output folder into records/<date>/<name>.tar.xz + .sha256 (every file), .csv (its ledger rows) and
    .bench.csv (its timings, if any). Returns the files written."""
    rows, bench = record_rows(out, date, name, code, claims)
    base = RECORDS / date / name
    archive(out, base.with_suffix(".tar.xz"))
    written = [base.with_suffix(".tar.xz"), base.with_suffix(".sha256")]
    if rows:
        base.with_suffix(".csv").write_text(to_csv(rows, LEDGER_COLUMNS))
        written.append(base.with_suffix(".csv"))
    if bench:
        Path(f"{base}.bench.csv").write_text(to_csv(bench, BENCH_COLUMNS))
        written.append(Path(f"{base}.bench.csv"))
    return written


# ------------------------------------------------------------------------------------------------------ the command


def today_code(args: argparse.Namespace, claims: Claims) -> tuple[dict[str, str], list[str]]:
    """Today's compiled code (variant -> PTX digest) and the launched kernels no group names, from ``--digests FILE``
    (a PTX audit document) or a run of the audit."""
    audit = json.loads(Path(args.digests).read_text()) if args.digests else run_audit()
    return dict(audit["digests"]), ungrouped(audit, claims.groups)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.evidence", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in ("digests", "render", "check", "record"):
        sub.add_parser(cmd).add_argument("--digests", metavar="AUDIT_JSON",
                                         help="a PTX audit document made with --digests (default: run the audit)")
    sub.add_parser("ledger")
    rec = sub.choices["record"]
    rec.add_argument("folder", type=Path)
    rec.add_argument("--date", required=True, help="the run's date (UTC), YYYY-MM-DD")
    rec.add_argument("--name", required=True, help="the run's name in records/<date>/, e.g. h100-1452")
    args = ap.parse_args(argv)
    claims = load_claims()
    if args.cmd == "ledger":
        (RECORDS / "ledger.csv").write_text(ledger_text())
        (RECORDS / "bench.csv").write_text(bench_text())
        return 0
    today, loose = today_code(args, claims)
    if args.cmd == "digests":
        print(json.dumps({"code": code_id(today), "variants": len(today)}))
        return 0
    if args.cmd == "record":
        if not re.fullmatch(r"\d{4}-\d\d-\d\d", args.date) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", args.name):
            ap.error("--date YYYY-MM-DD and --name of lowercase letters, digits and '-'")
        for written in record(args.folder, args.date, args.name, keep_code(today), claims):
            print(written.relative_to(ROOT))
        return 0
    ledger = [r for f in run_files("csv") for r in read_rows(f)]
    bench = [r for f in run_files("bench.csv") for r in read_rows(f)]
    codes = load_codes()
    blocks = render_blocks(claims, ledger, bench, today, codes)
    if args.cmd == "render":
        for doc in DOCS:
            path = ROOT / doc
            path.write_text(rendered(path.read_text(), blocks))
        return 0
    problems = [f"kernel {k}: in no group of records/claims.toml, or in two" for k in loose]
    problems += [f"{r['record']}: its code {r['kernels']} is not in records/kernels/" for r in [*ledger, *bench]
                 if r["kernels"] != "?" and r["kernels"] not in codes]
    problems += check_manifests()
    for path, text in ((RECORDS / "ledger.csv", ledger_text()), (RECORDS / "bench.csv", bench_text())):
        if not path.exists() or path.read_text() != text:
            problems.append(f"{path.relative_to(ROOT)}: not what the runs' rows give (python -m tools.evidence ledger)")
    for doc in DOCS:
        path = ROOT / doc
        if path.read_text() != rendered(path.read_text(), blocks):
            problems.append(f"{doc}: its generated tables are out of date (make evidence)")
    for s in standing(claims, ledger, today, codes):
        when = _run(s.row) if s.row else "never run"
        print(f"{s.state:9}  {s.claim.id:16} {when:18} {', '.join(s.changed)}")
    for problem in problems:
        print(f"evidence-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
