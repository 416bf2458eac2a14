"""The environment stamp every report carries (``make verify``, the benchmarks, the statistics, the CLI's --json):
what ran, where, on which commit. Versions come from the installed distributions' metadata, so stamping imports
nothing heavy; the GPU is named only if torch is already imported."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("numpy", "torch", "triton", "scipy", "hypothesis", "flashinfer-python")


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def source_digest() -> str:
    """A digest of the pp3 package's own files as they are on disk (the code that runs, whatever git says)."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.blake2b(digest_size=12)
    for f in sorted(p for p in pkg.rglob("*") if p.is_file() and p.suffix in (".py", ".jsonl", ".kat", ".wc")):
        h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _source() -> dict[str, Any]:
    """The commit of the pp3 source that runs (PP3_COMMIT wins: a copied tree may carry a stale .git), whether its
    tracked files differ from that commit (both None for an installed copy outside a git checkout), and the digest
    of the package's files, which names the code even where the commit cannot."""
    here = Path(__file__).resolve().parents[2]  # the folder that holds the pp3 package
    top = _run(["git", "rev-parse", "--show-toplevel"], here)
    checkout = top is not None and Path(top).resolve() == here  # not, say, a venv inside some other repository
    commit = os.environ.get("PP3_COMMIT") or (_run(["git", "rev-parse", "HEAD"], here) if checkout else None)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], here) if checkout else None
    return {"commit": commit, "dirty": None if status is None else bool(status), "source": str(here),
            "source_digest": source_digest()}


def _device() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    out: dict[str, Any] = {"triton_interpret": os.environ.get("TRITON_INTERPRET") == "1"}
    if torch is not None and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name()
        out["cuda"] = torch.version.cuda
        driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        out["driver"] = driver.splitlines()[0] if driver else None
    else:
        out["gpu"] = None
    return out


def environment() -> dict[str, Any]:
    """The stamp: pp3's version and commit (with a dirty flag), Python and package versions, the machine, the GPU
    and driver where torch sees one, whether Triton interprets, and the UTC time."""
    from pp3 import __version__

    return {
        "pp3": __version__,
        **_source(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in _PACKAGES},
        "machine": platform.platform(),
        **_device(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
