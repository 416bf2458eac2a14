"""The expected-failures file an implementer keeps beside their implementation (TOML, read with ``tomllib``)::

    # pp3 verify --impl selector=mykernels:propose --expected-failures pp3-xfail.toml
    [[expected]]
    suite = "random"                            # a suite of the report ("edges", "random tiles", "conformance", ...)
    case = "random[V=300,B=3,bf16,tile=64]"    # a case of that suite, exactly; "*" for every case of the suite
    reason = "bf16 widening: tracked in our issue 123"
    failure = "mismatch"                        # optional: only this kind of failure (pp3.harness.guard.FAILURES)

A failing case that an entry names does not fail the verdict; it is reported as expected. An entry that names no
failing case is reported too: ``no longer fails`` where its cases ran and passed (remove it), ``not run`` where none
of them ran at this size or under this declaration.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from pp3.harness.guard import FAILURES

KEYS = {"suite", "case", "reason", "failure"}


class ExpectedFailuresError(ValueError):
    """An expected-failures file that cannot be read (the message names the file and the entry)."""


@dataclasses.dataclass
class Entry:
    suite: str
    case: str
    reason: str
    failure: str | None = None
    failed: int = 0  # failing calls it covered
    passed: int = 0  # calls it names that ran and passed

    def matches(self, suite: str, case: str, failure: str | None = None) -> bool:
        return (self.suite == suite and self.case in ("*", case)
                and (failure is None or self.failure is None or self.failure == failure))

    def status(self) -> str:
        return "failed as expected" if self.failed else "no longer fails" if self.passed else "not run"

    def as_dict(self) -> dict[str, Any]:
        return {"suite": self.suite, "case": self.case, "reason": self.reason, "failure": self.failure,
                "status": self.status(), "failing_calls": self.failed, "passing_calls": self.passed}


class ExpectedFailures:
    """The entries of one file (none without a file), and what each covered in a run."""

    def __init__(self, entries: list[Entry], path: str | None = None) -> None:
        self.entries = entries
        self.path = path

    @classmethod
    def load(cls, path: str | Path | None) -> ExpectedFailures:
        if path is None:
            return cls([])
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except OSError as e:
            raise ExpectedFailuresError(f"{path}: cannot read it ({e.strerror})") from None
        except tomllib.TOMLDecodeError as e:
            raise ExpectedFailuresError(f"{path}: not TOML ({e})") from None
        unknown = set(doc) - {"expected"}
        if unknown or not isinstance(doc.get("expected", []), list):
            raise ExpectedFailuresError(f"{path}: expected only [[expected]] tables, got {sorted(doc)}")
        entries = []
        for i, item in enumerate(doc.get("expected", [])):
            where = f"{path}: [[expected]] #{i + 1}"
            if not isinstance(item, dict) or set(item) - KEYS or not {"suite", "case", "reason"} <= set(item):
                raise ExpectedFailuresError(f"{where}: needs suite, case and reason (and optionally failure), got "
                                            f"{sorted(item) if isinstance(item, dict) else item!r}")
            if not all(isinstance(item[k], str) and item[k] for k in item):
                raise ExpectedFailuresError(f"{where}: every value must be a non-empty string")
            if item.get("failure") not in (None, *FAILURES):
                raise ExpectedFailuresError(f"{where}: failure must be one of {', '.join(FAILURES)}, got "
                                            f"{item['failure']!r}")
            entries.append(Entry(item["suite"], item["case"], item["reason"], item.get("failure")))
        return cls(entries, str(path))

    def seen(self, suite: str, case: str, failure: str | None) -> Entry | None:
        """Record one call's outcome (``failure`` None: it passed); the entry that expects this failure, if any."""
        hit = None
        for e in self.entries:
            if e.matches(suite, case, failure):
                if failure is None:
                    e.passed += 1
                elif hit is None:
                    e.failed += 1
                    hit = e
        return hit

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.path, "entries": [e.as_dict() for e in self.entries],
                "no_longer_failing": [e.as_dict() for e in self.entries if e.status() == "no longer fails"]}
