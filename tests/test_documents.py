"""The front documents stay short enough to read: no line over 120 characters (tables included), README at most 150
lines with no commit hash, at most one commit hash in a row of VERIFY.md, STATS.md and BENCHMARKS.md (provenance
lives in the ledger, records/, not in prose). A planted violation of each rule is caught."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRONT = ("README.md", "VERIFY.md", "BENCHMARKS.md", "STATS.md", "CONTRIBUTING.md", "records/README.md")
# A commit hash as the documents write one: 7 to 40 hexadecimal digits, at least one letter and one digit.
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def lint(name: str, text: str) -> list[str]:
    """What breaks the rules in the document ``name`` (path relative to the repository) with contents ``text``."""
    lines = text.splitlines()
    problems = [f"{name}:{i}: {len(ln)} characters" for i, ln in enumerate(lines, 1) if len(ln) > 120]
    if name == "README.md":
        problems += [f"{name}: {len(lines)} lines"] if len(lines) > 150 else []
        problems += [f"{name}:{i}: commit hash {m}" for i, ln in enumerate(lines, 1) for m in HASH.findall(ln)]
    elif name in ("VERIFY.md", "BENCHMARKS.md", "STATS.md"):
        problems += [f"{name}:{i}: {len(HASH.findall(ln))} commit hashes" for i, ln in enumerate(lines, 1)
                     if len(HASH.findall(ln)) > 1]
    return problems


@pytest.mark.parametrize("name", FRONT)
def test_front_document_follows_the_rules(name: str) -> None:
    assert lint(name, (ROOT / name).read_text()) == []


@pytest.mark.parametrize(("name", "text", "found"), [
    ("VERIFY.md", "| a |" + " x" * 60 + " |\n", "VERIFY.md:1: 127 characters"),  # a table row too
    ("README.md", "ran at 4a2121c\n", "README.md:1: commit hash 4a2121c"),
    ("README.md", "x\n" * 151, "README.md: 151 lines"),
    ("BENCHMARKS.md", "| 36.4 | 7fc6b77 and 59d2000 |\n", "BENCHMARKS.md:1: 2 commit hashes"),
])
def test_a_planted_violation_is_caught(name: str, text: str, found: str) -> None:
    assert found in lint(name, text)


def test_figures_and_dates_are_not_hashes() -> None:
    assert lint("README.md", "| 163840 | 2026-12-07, H100 | 1.12e9 | 0x3F333333 | deadbeef |\n") == []
