"""How pip installs pp3, checked by resolving without installing (``pip install --dry-run --report``; no torch wheel is
downloaded):

1. **The kernels extra on the public index.** ``pp3-exact[kernels]`` from the given wheel, with a plain pip (no
   configuration file, no environment, PyPI only), resolves the newest torch on the index and the Triton that torch
   requires, without backtracking; and an engine's pinned torch (each minor release of ``ENGINE_TORCH``) stays as
   pinned, with its own Triton.
2. **The CPU torch of ``make``.** ``make``'s first install step takes ``requirements/cpu.txt``'s torch pin from an
   extra index (``TORCH_INDEX``, the PyTorch CPU wheel index by default). Here that index is replaced by a local
   folder laid out as one (PEP 503) holding the wheel pip finds through this machine's own configuration, and pip
   runs with no other source: the pin resolves from the index. (The other way, with the index unreachable and the
   wheel from pip's own configuration, is every ``make`` on these machines.)

    python tools/install_check.py WHEEL     (make install-check; needs PyPI)

The resolutions run with the newest pip, in a venv of their own, reading each wheel's metadata through HTTP range
requests (``--use-feature=fast-deps``: the index these machines reach serves no separate metadata files, and a plain
resolution downloads torch and triton whole, 825 MB); a resolution that downloads a torch or triton wheel fails.

Prints one JSON document (``schema_version``, ``verdict``, what resolved); exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENGINE_TORCH = ("2.12.1", "2.13.0", "2.14.1", "2.15.0")  # torch pins an engine may hold (torch 2.11 is the floor)
# The Triton each torch requires (its wheel's Requires-Dist on Linux).
TRITON_OF = {"2.11": "3.6", "2.12": "3.7", "2.13": "3.7", "2.14": "3.8", "2.15": "3.9"}


# What a plain pip keeps of this machine's environment: how it reaches the network (proxies, the certificates to
# trust), never where it looks for packages (indexes, find-links, constraints).
_NETWORK = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
            "https_proxy", "no_proxy")


def _plain_env(home: Path) -> dict[str, str]:
    """A pip with no configuration: no config files, no PIP_* variables but the network's, its own empty HOME."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PIP_CONFIG_FILE": os.devnull,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", **{k: os.environ[k] for k in _NETWORK if k in os.environ}}


def _resolve(pip: list[str], args: list[str], env: dict[str, str], work: Path) -> tuple[dict[str, str], str, str]:
    """``pip install --dry-run`` of ``args``: {name: version}, the URL of torch's file, and pip's log."""
    report = work / "report.json"
    proc = subprocess.run([*pip, "install", "--dry-run", "--use-feature=fast-deps", "--ignore-installed", "--report",
                           str(report), *args],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"pip failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    doc = json.loads(report.read_text())
    got = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in doc["install"]}
    urls = [i["download_info"]["url"] for i in doc["install"] if i["metadata"]["name"].lower() == "torch"]
    return got, (urls[0] if urls else ""), proc.stdout + proc.stderr


def _newest(pip: list[str], name: str, env: dict[str, str]) -> str:
    out = subprocess.run([*pip, "index", "versions", name], capture_output=True, text=True, env=env, timeout=300)
    m = re.search(rf"^{name} \(([^)]+)\)", out.stdout, re.M)
    if not m:
        raise RuntimeError(f"pip index versions {name}: {out.stdout.strip()} {out.stderr.strip()}")
    return m.group(1)


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def check_extra(pip: list[str], wheel: Path, work: Path) -> dict[str, Any]:
    env = _plain_env(work)
    newest = _newest(pip, "torch", env)
    rows: dict[str, Any] = {}
    problems: list[str] = []
    for pin in (None, *ENGINE_TORCH):
        got, _, log = _resolve(pip, [f"{wheel}[kernels]", *([f"torch=={pin}"] if pin else [])], env, work)
        torch_v, triton_v = got.get("torch", "?"), got.get("triton", "?")
        want = pin or newest
        rows[pin or "newest"] = {"torch": torch_v, "triton": triton_v, "numpy": got.get("numpy", "?")}
        if torch_v != want:
            problems.append(f"torch {pin or 'unpinned'}: resolved {torch_v}, expected {want}")
        if _minor(triton_v) != TRITON_OF.get(_minor(torch_v)):
            problems.append(f"torch {torch_v}: resolved triton {triton_v}, expected {TRITON_OF.get(_minor(torch_v))}")
        if "looking at multiple versions" in log:
            problems.append(f"torch {pin or 'unpinned'}: pip backtracked")
        if re.search(r"Downloading (?:torch|triton)-", log):
            problems.append(f"torch {pin or 'unpinned'}: pip downloaded a torch or triton wheel to resolve")
    return {"newest_torch": newest, "resolved": rows, "problems": problems}


def check_cpu_torch(pip: list[str], work: Path) -> dict[str, Any]:
    pin = next(ln.split("#")[0].strip() for ln in (ROOT / "requirements" / "cpu.txt").read_text().splitlines()
               if ln.startswith("torch=="))
    files = work / "files"
    got = subprocess.run([*pip, "download", "-q", "--no-deps", "-d", str(files), pin], capture_output=True, text=True,
                         timeout=900)  # through this machine's own pip configuration
    if got.returncode:
        return {"pin": pin, "problems": [f"pip download {pin} through this machine's configuration failed: "
                                         f"{got.stderr.strip()[-500:]}"]}
    index = work / "index"
    (index / "torch").mkdir(parents=True)
    links = "".join(f'<a href="{f.as_uri()}">{f.name}</a>\n' for f in sorted(files.glob("torch-*.whl")))
    (index / "torch" / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")
    empty = work / "empty"
    empty.mkdir()
    resolved, url, _ = _resolve(pip, ["--no-deps", "--index-url", empty.as_uri(), "--extra-index-url", index.as_uri(),
                                      pin], _plain_env(work), work)
    problems = [] if url.startswith(index.as_uri()) or url.startswith(files.as_uri()) else [
        f"{pin} resolved from {url or 'nowhere'}, not from the extra index"]
    return {"pin": pin, "resolved": resolved.get("torch"), "from": url, "problems": problems}


def _newest_pip(venv: Path) -> list[str]:
    """A venv of this Python with the newest pip from the public index (plain configuration)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, timeout=600,
                   env=_plain_env(venv))
    return [python, "-m", "pip"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/install_check.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel", type=Path, help="the pp3-exact wheel to resolve with the kernels extra")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        pip = _newest_pip(work / "venv")
        (work / "a").mkdir()
        (work / "b").mkdir()
        extra, cpu = check_extra(pip, args.wheel.resolve(), work / "a"), check_cpu_torch(pip, work / "b")
    doc: dict[str, Any] = {"schema_version": 1, "kernels_extra": extra, "cpu_torch": cpu}
    problems = extra["problems"] + cpu["problems"]
    doc["verdict"] = "FAIL" if problems else "PASS"
    print(json.dumps(doc, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
