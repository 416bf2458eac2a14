"""The house's rules, read from the code's own imports: one stack with no upward arrow (nothing in pp3/ imports the
repository's bench/, stats/, tools/ or tests/), no test module imports another, neither jit module of an operation
imports the other's, and the NumPy-only parts import neither torch nor triton."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    """Every module a file imports (absolute names; relative imports resolved against the package)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "pp3").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_package_imports_no_repository_tool(path: Path) -> None:
    bad = {m for m in _imports(path) if m.split(".")[0] in ("bench", "stats", "tools", "tests", "proptests")}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize(
    "path",
    sorted([*(ROOT / "tests").rglob("test_*.py"), *(ROOT / "proptests").glob("test_*.py"),
            ROOT / "stats" / "test_stats.py"]),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_test_module_imports_another(path: Path) -> None:
    bad = {m for m in _imports(path) if any(part.startswith("test_") for part in m.split("."))}
    assert not bad, f"{path.relative_to(ROOT)} imports the test module(s) {sorted(bad)}"


@pytest.mark.parametrize(("mine", "other"), [("_select", "_accept"), ("_accept", "_select")])
def test_no_jit_module_imports_the_other_operations(mine: str, other: str) -> None:
    imported = _imports(ROOT / "pp3" / "kernels" / f"{mine}.py")
    assert not {m for m in imported if m.startswith(f"pp3.kernels.{other}")}, imported
    shared = ("pp3.kernels.config", "pp3.kernels._common")  # the only kernel modules both operations import
    assert all(m in shared or m.rsplit(".", 1)[0] in shared for m in imported if m.startswith("pp3.kernels.")), imported


def test_numpy_only_parts_import_neither_torch_nor_triton() -> None:
    code = (
        "import sys, pp3, pp3.reference, pp3.kernels, pp3.kernels.config, pp3.testing.call, pp3.testing.golden, "
        "pp3.testing.mutants, pp3.testing.drafts, pp3.testing.stamp, pp3.audit.conformance, pp3.cli\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out


def test_the_stamp_names_this_checkouts_commit() -> None:
    from pp3.testing.stamp import environment

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    env = environment()
    assert env["commit"] == head.strip() and isinstance(env["dirty"], bool) and env["source"] == str(ROOT), env
