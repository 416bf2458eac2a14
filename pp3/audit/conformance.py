"""``pp3 conformance``: every file of ``pp3/conformance`` against the installed implementation — the NumPy reference
always, the Triton kernels where they run (torch and triton import, and a CUDA GPU or TRITON_INTERPRET=1).

Each file drives every implementation (SPEC.md §10, §11.11, §12.12): the selector's and the verifier's golden vectors,
the Random123 known answers for Philox4x64-10, the exponential's worst cases, and the draft trees' golden vectors
(whose kernels do not exist yet: their kernel rows are skipped). The kernels' Philox and ``expf`` are
reached through ``pp3.kernels.philox`` / ``pp3.kernels.expf``; where the installed kernels do not export one, its row
says so (``skipped``) and counts in no verdict. ``run`` returns one JSON-ready document (``schema_version`` 1,
``verdict`` "PASS" or "FAIL").
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pp3.reference import expf, philox4x64_10, propose
from pp3.testing import golden
from pp3.testing.compare import row_mismatch
from pp3.testing.stamp import environment

SCHEMA_VERSION = 1
Check = Callable[[bool], tuple[int, int]]  # kernels? -> (items checked, items that differ)


class NotExported(Exception):
    """The installed kernels have no device entry for this file (its row is skipped)."""


def _device_entry(name: str) -> Any:
    from pp3 import kernels

    try:
        return getattr(kernels, name)
    except (AttributeError, ImportError) as e:
        raise NotExported(f"pp3.kernels exports no {name}") from e


def kernels_available() -> bool:
    if any(importlib.util.find_spec(m) is None for m in ("torch", "triton")):
        return False
    import torch

    return bool(torch.cuda.is_available()) or os.environ.get("TRITON_INTERPRET") == "1"


def _select_golden(kernels: bool) -> tuple[int, int]:
    cases = golden.load_golden()
    bad = 0
    for case in cases:
        got = case.call().run_kernel() if kernels else propose(**case.args())
        bad += int(row_mismatch(got, case.expected).sum())
    return sum(c.B for c in cases), bad


def _accept_golden(kernels: bool) -> tuple[int, int]:
    cases = golden.load_accept_golden()
    bad = 0
    for case in cases:
        got = case.call.run_kernel() if kernels else case.call.run_reference()
        bad += int(row_mismatch(got, case.expected).sum())
    return sum(c.call.bits.shape[0] for c in cases), bad


def _kat(kernels: bool) -> tuple[int, int]:
    vectors = golden.load_kat()
    ctr = np.array([v[0] for v in vectors], dtype=np.uint64)
    key = np.array([v[1] for v in vectors], dtype=np.uint64)
    want = np.array([v[2] for v in vectors], dtype=np.uint64)
    if kernels:
        import torch

        from pp3.testing.call import default_device

        philox = _device_entry("philox")

        dev = default_device()
        got = philox(torch.from_numpy(ctr.view(np.int64)).to(dev), torch.from_numpy(key.view(np.int64)).to(dev))
        out = got.cpu().numpy().view(np.uint64)
    else:
        out = philox4x64_10(ctr, key)
    return len(vectors), int((out != want).any(axis=1).sum())


def _expf_wc(kernels: bool) -> tuple[int, int]:
    z, want = golden.load_expf_wc()
    if kernels:
        import torch

        from pp3.testing.call import default_device

        device_expf = _device_entry("expf")

        got = device_expf(torch.from_numpy(z.copy()).to(default_device())).cpu().numpy()
    else:
        got = expf(z)
    return z.size, int((got.view(np.uint32) != want.view(np.uint32)).sum())


def _tree_draw_golden(kernels: bool) -> tuple[int, int]:
    """SPEC.md §12.4's golden vectors (propose_tree); rows are requests."""
    cases = golden.load_tree_draw_golden()
    impl = _device_entry("propose_tree") if kernels else None
    bad = sum(int(row_mismatch(c.run(impl), c.expected).sum()) for c in cases)
    return sum(c.logits_bits.shape[0] for c in cases), bad


def _tree_verify_golden(path: Path, entry: str) -> Check:
    """SPEC.md §12.6's or §12.9's golden vectors (verify_tree, verify_walk); rows are requests."""

    def check(kernels: bool) -> tuple[int, int]:
        cases = golden.load_tree_verify_golden(path)
        impl = _device_entry(entry) if kernels else None
        bad = sum(int(row_mismatch(c.run(impl), c.expected).sum()) for c in cases)
        return sum(c.target_bits.shape[0] for c in cases), bad

    return check


FILES: dict[str, Check] = {
    golden.GOLDEN_FILE.name: _select_golden,
    golden.ACCEPT_GOLDEN_FILE.name: _accept_golden,
    golden.KAT_FILE.name: _kat,
    golden.EXPF_WC_FILE.name: _expf_wc,
    golden.TREE_DRAW_GOLDEN_FILE.name: _tree_draw_golden,
    golden.ACCEPT_TREE_GOLDEN_FILE.name: _tree_verify_golden(golden.ACCEPT_TREE_GOLDEN_FILE, "verify_tree"),
    golden.WALK_TREE_GOLDEN_FILE.name: _tree_verify_golden(golden.WALK_TREE_GOLDEN_FILE, "verify_walk"),
}


def run(kernels: bool | None = None) -> dict[str, Any]:
    """Every conformance file on the reference, and on the kernels (``None``: where they run). PASS iff every row
    that ran checked something and found no mismatch (the reference skips none)."""
    impls = ["reference"] + (["kernels"] if (kernels_available() if kernels is None else kernels) else [])
    if "kernels" in impls:
        import warnings

        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    rows: list[dict[str, Any]] = []
    for impl in impls:
        for name, check in FILES.items():
            try:
                n, bad = check(impl == "kernels")
            except NotExported as e:
                rows.append({"file": name, "implementation": impl, "checked": 0, "mismatches": 0, "skipped": str(e)})
                continue
            rows.append({"file": name, "implementation": impl, "checked": n, "mismatches": bad, "skipped": None})
    ran = [r for r in rows if r["skipped"] is None]
    ok = all(int(r["mismatches"]) == 0 and int(r["checked"]) > 0 for r in ran)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "pp3 conformance",
        "verdict": "PASS" if ok else "FAIL",
        "implementations": impls,
        "results": rows,
        "environment": environment(),
    }


def render(report: dict[str, Any]) -> str:
    lines = [f"{'file':<36}{'implementation':<16}{'checked':>9}{'mismatches':>12}"]
    for r in report["results"]:
        tail = f"  skipped: {r['skipped']}" if r.get("skipped") else ""
        lines.append(f"{r['file']:<36}{r['implementation']:<16}{r['checked']:>9}{r['mismatches']:>12}{tail}")
    lines.append(f"conformance: {report['verdict']}")
    return "\n".join(lines)
