"""The argparse parser of pp3's programs (``pp3``, ``python -m pp3.audit.accept_bulk``): every refusal is one line.
Imports nothing of pp3 (the audits sit below ``pp3.cli`` and share it from here)."""

from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "PROG: MESSAGE (see PROG --help)" on stderr, exit status 2."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"{self.prog}: {line} (see {self.prog} --help)\n")
