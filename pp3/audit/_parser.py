"""argparse with one-line refusals, for pp3's command line and the audits run as modules."""

from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "PROG: MESSAGE (see PROG --help)" on stderr, exit status 2. ``commands``: the
    subcommands' parsers by name (``pp3``'s own parser)."""

    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        line = " ".join(message.split())
        self.exit(2, f"{self.prog}: {line} (see {self.prog} --help)\n")
