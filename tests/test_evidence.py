"""The evidence ledger (tools/evidence.py, records/): a kernel change turns exactly the claims resting on it stale,
the ledger and every archive's manifest are what the runs say, a device folder's outputs become the right rows, and
the generated tables replace only their own blocks."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tools import evidence


@pytest.fixture(scope="module")
def claims() -> evidence.Claims:
    return evidence.load_claims()


def _audit(groups: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """A PTX audit document with two variants of every grouped kernel."""
    kernels = [k for ks in groups.values() for k in ks]
    return {"kernels": [f"pp3.kernels._x.{k}" for k in kernels],
            "digests": {f"{k}[V={i}][*fp32][num_warps=4]": f"{hash((k, i)) & (2**64 - 1):016x}"
                        for k in kernels for i in (1, 2)}}


def test_the_claims_name_known_groups_and_every_group_names_a_kernel_of_the_package(claims: evidence.Claims) -> None:
    jit = {node.name for path in (evidence.ROOT / "pp3" / "kernels").glob("*.py")
           for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)
           and any("jit" in ast.unparse(d) for d in node.decorator_list)}
    assert {k for ks in claims.groups.values() for k in ks} <= jit
    assert all(len(c.text) <= 100 for c in claims.claims)


def _rows(claims: evidence.Claims, code: str) -> list[dict[str, str]]:
    return [{"claim": c.id, "date": "2026-12-07", "kernels": code} for c in claims.claims]


def test_a_planted_kernel_change_turns_exactly_the_claims_resting_on_it_stale(claims: evidence.Claims) -> None:
    today = _audit(claims.groups)["digests"]
    codes = {"run": dict(today)}
    assert {s.state for s in evidence.standing(claims, _rows(claims, "run"), today, codes)} <= {"shipped", "reference"}
    for group, kernels in claims.groups.items():
        planted = dict(today)
        variant = next(v for v in planted if v.split("[")[0] == kernels[0])
        planted[variant] = "0" * 16  # one variant of one kernel compiles to other code
        after = evidence.standing(claims, _rows(claims, "run"), planted, codes)
        stale = {s.claim.id for s in after if s.state == "stale"}
        assert stale == {c.id for c in claims.claims if group in c.groups}, group
        assert all(s.changed == [group] for s in after if s.state == "stale")


def test_a_variant_added_or_renamed_since_leaves_the_claims_alone(claims: evidence.Claims) -> None:
    """Binaries are compared, not names: a new variant, or the same code under a new name, changes no claim."""
    today = _audit(claims.groups)["digests"]
    codes = {"run": dict(today)}
    kernel = claims.groups["verifier"][0]
    grown = {**today, f"{kernel}[NEW=1][*fp32][num_warps=4]": "f" * 16}  # a new launch option's variant
    assert {s.state for s in evidence.standing(claims, _rows(claims, "run"), grown, codes)} <= {"shipped", "reference"}
    renamed = {(v.replace("[", "[SCREEN=0,", 1) if v.split("[")[0] == kernel else v): d for v, d in today.items()}
    assert {s.state for s in evidence.standing(claims, _rows(claims, "run"), renamed, codes)} <= {"shipped",
                                                                                                  "reference"}
    gone = {v: d for v, d in today.items() if v.split("[")[0] != kernel}  # every binary that ran is gone
    stale = {s.claim.id for s in evidence.standing(claims, _rows(claims, "run"), gone, codes) if s.state == "stale"}
    assert stale == {c.id for c in claims.claims if "verifier" in c.groups}


def test_a_claim_never_run_or_run_without_its_code_is_not_shipped(claims: evidence.Claims) -> None:
    today = _audit(claims.groups)["digests"]
    c = next(c for c in claims.claims if c.groups)
    states = {s.claim.id: s.state for s in evidence.standing(claims, [{"claim": c.id, "date": "2026-12-07",
                                                                       "kernels": "?"}], today, {})}
    assert states[c.id] == "stale" and set(states.values()) <= {"stale", "never run", "reference"}


def test_a_summary_says_what_ran() -> None:
    """README's Status: a summary none of whose claims ran says so; one with some says how many did not run."""
    a, b = (evidence.Claim(i, "verify", "gpu", i, "make x", ()) for i in ("a", "b"))
    ran = {"claim": "a", "date": "2026-12-07", "card": "H100", "verdict": "PASS"}
    doc = evidence.Claims({}, (a, b), (evidence.Summary("both", ("a", "b"), "x"), evidence.Summary("b", ("b",), "x")),
                          ())
    rows = evidence.status_block(doc, [evidence.Standing(a, ran, "shipped"), evidence.Standing(b, None, "never run")])
    assert rows[2:4] == ["| [both][x] | pass, 1 not run | 2026-12-07, H100 |", "| [b][x] | not run yet | — |"]


def test_the_last_run_of_a_day_is_the_latest_by_its_time() -> None:
    rows = [{"claim": "c", "date": "2026-12-07", "record": f"2026-12-07/{n}.tar.xz:x.log", "result": n}
            for n in ("cpu-1945", "cpu-a", "h100-0930")]
    assert evidence.latest(rows)["c"]["result"] == "cpu-1945"
    assert [r["result"] for r in sorted(rows, key=evidence._when)] == ["cpu-a", "h100-0930", "cpu-1945"]


def test_a_kernel_in_no_group_is_named(claims: evidence.Claims) -> None:
    audit = _audit(claims.groups)
    audit["kernels"].append("pp3.kernels._new._new_kernel")
    assert evidence.ungrouped(audit, claims.groups) == ["pp3.kernels._new._new_kernel"]


def test_the_code_of_a_tree_is_kept_once_by_its_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evidence, "KERNELS", tmp_path / "kernels")
    digests = {"_a_kernel[x]": "1" * 16, "_b_kernel[y]": "2" * 16}
    cid = evidence.keep_code(digests)
    assert cid == evidence.keep_code(dict(reversed(digests.items()))) and evidence.load_codes() == {cid: digests}


def test_the_ledger_and_every_archive_are_what_the_runs_say() -> None:
    assert (evidence.RECORDS / "ledger.csv").read_text() == evidence.ledger_text()
    assert (evidence.RECORDS / "bench.csv").read_text() == evidence.bench_text()
    assert evidence.check_manifests() == []
    assert len(list(evidence.RECORDS.rglob("*"))) < 100


def test_a_damaged_archive_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = next(evidence.RECORDS.glob("20??-??-??/*.tar.xz"))
    day = tmp_path / src.parent.name
    day.mkdir()
    shutil.copy(src, day)
    manifest = src.with_suffix("").with_suffix(".sha256")
    lines = manifest.read_text().splitlines()
    (day / manifest.name).write_text("\n".join(["0" * 64 + lines[0][64:], *lines[1:]]) + "\n")
    monkeypatch.setattr(evidence, "RECORDS", tmp_path)
    monkeypatch.setattr(evidence, "ROOT", tmp_path)
    assert evidence.check_manifests() == [f"{src.parent.name}/{src.name}: its files differ from {manifest.name}"]


STAMP = {"commit": "0123456789abcdef", "python": "3.12.3", "packages": {"torch": "2.11.0+cu130", "triton": "3.6.0"},
         "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04", "date": "2026-12-07T15:00:00Z"}


def _folder(tmp_path: Path, triton: str = "3.6.0", verdict: str = "PASS") -> Path:
    out = tmp_path / "out" / "step"
    out.mkdir(parents=True)
    (out / "env.json").write_text(json.dumps(STAMP | {"packages": {"torch": "2.11.0", "triton": triton}}))
    (out / "verify.log").write_text("pp3 verify: device=H100, sizes=full, parts=selector verifier\n"
                                    "  tiles: 101 calls, 2033 rows, 0 mismatches (46 s)\n"
                                    "  verifier: 120 calls, 2266 rows, 0 mismatches (331 s)\n"
                                    f"verify: {verdict} (selector {verdict}, verifier PASS; 400 s)\n")
    (out / "bulk_10_nopdl.log").write_text("  bulk: 1000000/1000000 rows, 0 mismatches, 121 s\n"
                                           "verify: PASS (selector PASS; 121 s)\n")
    (out / "sanitize_all_racecheck.log").write_text("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors)\n")
    (out / "ptx_audit.json").write_text(json.dumps({"mode": "launched", "verdict": "PASS", "variants": 193,
                                                    "forbidden": {}}))
    (out / "bench.json").write_text(json.dumps({"results": [{"impl": "pp3 sampled", "V": 163840, "B": 1, "depth": 5,
                                                             "dtype": "float32", "median_us": 36.41, "p10_us": 36.0,
                                                             "p90_us": 37.0}]}))
    return tmp_path / "out"


def test_a_device_folder_becomes_ledger_and_timing_rows(tmp_path: Path, claims: evidence.Claims) -> None:
    rows, bench = evidence.record_rows(_folder(tmp_path), "2026-12-07", "h100-1500", "c0de", claims)
    got = {r["claim"]: r for r in rows}
    assert set(got) == {"sel-suites", "ver-suites", "sel-bulk-nopdl", "sanitize-sel", "sanitize-ver", "ptx-launched"}
    assert all(r["verdict"] == "PASS" and r["card"] == "H100" and r["torch"] == "2.11.0" for r in rows)
    assert got["ver-suites"]["kernels"] == "c0de"
    assert got["sel-bulk-nopdl"]["record"] == "2026-12-07/h100-1500.tar.xz:step/bulk_10_nopdl.log"
    assert [(b["impl"], b["median_us"], b["process"]) for b in bench] == [("pp3 sampled", "36.41",
                                                                           "2026-12-07/h100-1500:step/bench.json")]


def test_a_failed_step_is_a_failed_row_and_another_triton_its_own_claim(tmp_path: Path,
                                                                         claims: evidence.Claims) -> None:
    rows, _ = evidence.record_rows(_folder(tmp_path, verdict="FAIL"), "2026-12-07", "x", "?", claims)
    assert {r["claim"]: r["verdict"] for r in rows}["sel-suites"] == "FAIL"
    rows, _ = evidence.record_rows(_folder(tmp_path / "k", triton="3.9.0"), "2026-12-07", "x", "?", claims)
    assert {r["claim"] for r in rows} == {"triton-3.9.0-gpu"} and rows[0]["result"].count(";") >= 4


CI_LOG = """python: python3.11 -> Python 3.11.7
1531 passed, 19 skipped, 43 warnings in 540.10s (0:09:00)
12 passed in 30.00s
=== make test done: 600 s
verify: PASS (3 parts, 0 mismatches; 280 s)
=== verify, reference, wheel and install checks done: 900 s
=== Triton 3.7.1
triton 3.7.1 numpy 2.3.5
ptx audit: PASS 261 variants of 19 kernels
verify: PASS (3 parts; 200 s)
=== Triton 3.9.0 numpy==2.4.0
triton 3.9.0 numpy 2.4.0
ptx audit: PASS 261 variants of 19 kernels
verify: {last} (3 parts; 210 s)
=== Triton matrix done: 1500 s
"""


@pytest.mark.parametrize("last", ["PASS", "FAIL"])
def test_a_ci_log_becomes_the_cpu_claims(tmp_path: Path, claims: evidence.Claims, last: str) -> None:
    out = tmp_path / "out" / "ci"
    out.mkdir(parents=True)
    (out / "env.json").write_text(json.dumps(STAMP | {"gpu": None, "driver": None}))
    log = CI_LOG.format(last=last)  # .ci/run stops at a failed step (set -e): no "Triton matrix done" then
    (out / "ci.log").write_text(log if last == "PASS" else log[: log.index("=== Triton matrix done")])
    rows, _ = evidence.record_rows(tmp_path / "out", "2026-12-07", "cpu-1900", "c0de", claims)
    got = {r["claim"]: (r["verdict"], r["result"]) for r in rows}
    ci = {"ci": ("PASS", "25 min on a fresh clone")} if last == "PASS" else {}
    assert got == {"cpu-test": ("PASS", "1,531 passed, 19 skipped; 10 min"),
                   "cpu-verify": ("PASS", "PASS, 3 parts, 0 mismatches; 280 s"),
                   "triton-matrix": (last, f"{last} on 3.7.1, 3.9.0"), **ci}
    # A run stopped in make test by a failing test: a failed row, nothing after it.
    (out / "ci.log").write_text(CI_LOG.split("=== make test done")[0].replace("1531 passed", "3 failed, 1528 passed"))
    rows, _ = evidence.record_rows(tmp_path / "out", "2026-12-07", "cpu-1900", "c0de", claims)
    assert [(r["claim"], r["verdict"], r["result"]) for r in rows] == [
        ("cpu-test", "FAIL", "3 failed, 1,528 passed, 19 skipped")]


def test_render_replaces_only_its_blocks_and_refuses_a_long_line() -> None:
    text = "head\n<!-- evidence:a -->\nold\n<!-- /evidence:a -->\n<!-- evidence:b -->\nkept\n<!-- /evidence:b -->\n"
    assert evidence.rendered(text, {"a": ["| x |", "new"]}) == text.replace("old", "| x |\nnew")
    with pytest.raises(ValueError, match="over 120 characters"):
        evidence.rendered(text, {"a": ["x" * 121]})
