"""The house's rules, read from the code's own imports: one stack with no upward arrow (nothing in pp3/ imports the
repository's bench/, stats/, tools/ or tests/, and inside pp3/ every import goes down the layers of ``LAYERS``), no
test module imports another, neither jit module of an operation imports the other's, and the NumPy-only parts import
neither torch nor triton."""

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


# The package's layers, lowest first. A module imports modules of lower layers only, or of its own layer inside its
# own folder (the reference's parts, the test kit's, the audits'); a new module must be placed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pp3.reference", "pp3.kernels.screen"),  # NumPy only: the definition; the verifier's screen (never a result)
    ("pp3", "pp3.kernels.config", "pp3.kernels.buffers", "pp3.kernels._common", "pp3.kernels._workspace"),
    ("pp3.kernels.checks", "pp3.kernels._select", "pp3.kernels._accept", "pp3.kernels._rows",  # checks; jit bodies
     "pp3.kernels._greedy"),
    ("pp3.kernels.launchers",),  # the launchers that trust their arguments
    ("pp3.kernels.select", "pp3.kernels.accept"),  # the public entry points: check once, then launch
    ("pp3.kernels.__init__",),
    ("pp3.drafter", "pp3.pair", "pp3.ops"),
    ("pp3.adapters", "pp3.speculate"),
    ("pp3.harness.protocol",),  # the seam's contract
    ("pp3.harness.builtin",),  # pp3's own implementations
    ("pp3.testing",),
    ("pp3.harness",),  # the guard around every call of an implementation, the expected failures
    ("pp3.audit",),
    ("pp3.harness.pytest_plugin",),  # pytest --pp3-impl: the audits as pytest tests
    ("pp3.harness.suite_tests",),
    ("pp3.cli",),
    ("pp3.__main__",),
)


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and parts[:-1] != ("pp3", "kernels") else parts)


def _layer(module: str) -> tuple[int, str]:
    """The layer of a module of pp3 and the entry of LAYERS that holds it (the longest that is a prefix)."""
    hits = [(len(e), i, e) for i, layer in enumerate(LAYERS) for e in layer
            if module == e or (module.startswith(e + ".") and e != "pp3")]
    if not hits:
        raise AssertionError(f"{module} is in no layer of tests/test_layout.py LAYERS: place it there")
    _, i, entry = max(hits)
    return i, entry


def _names(path: Path) -> set[str]:
    """What a file of pp3 imports from pp3: each imported module, or for ``from M import n`` the submodule ``M.n``
    where there is one (a package's face, ``__init__.py``, is then not what the file uses)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "pp3"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pp3":
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def _target(name: str) -> str | None:
    """The module of pp3 that an imported name refers to (a module, or the module that defines the name)."""
    parts = name.split(".")
    while parts:
        path = ROOT.joinpath(*parts)
        if path.with_suffix(".py").exists():
            return ".".join(parts)
        if (path / "__init__.py").exists():
            return "pp3.kernels.__init__" if parts == ["pp3", "kernels"] else ".".join(parts)
        parts.pop()
    return None


@pytest.mark.parametrize("path", sorted((ROOT / "pp3").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_import_inside_the_package_goes_down_its_layers(path: Path) -> None:
    mine, entry = _layer(_module(path))
    folder = _module(path) if path.name == "__init__.py" else _module(path).rsplit(".", 1)[0]
    bad = []
    for name in sorted(_names(path)):
        target = _target(name)
        if target is None or target == _module(path):
            continue
        theirs, their_entry = _layer(target)
        same_folder = theirs == mine and their_entry == entry and target.rsplit(".", 1)[0] == folder
        if theirs > mine or (theirs == mine and not same_folder):
            bad.append(f"{name} (layer {theirs} {their_entry})")
    assert not bad, f"{_module(path)} (layer {mine} {entry}) imports up or sideways: {bad}"


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
        "pp3.testing.mutants, pp3.testing.drafts, pp3.testing.stamp, pp3.audit.conformance, pp3.cli, pp3.harness, "
        "pp3.harness.builtin, pp3.harness.guard, pp3.testing.planted, pp3.audit.parity, pp3.audit.law\n"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", out


def test_the_checks_and_buffers_import_no_triton() -> None:
    """The greedy drafter checks its arguments without importing any kernel code."""
    pytest.importorskip("torch")  # the checks are torch code (the reference-only venvs have no torch)
    code = "import sys, pp3.kernels.checks, pp3.kernels.buffers, pp3.drafter; print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "False", out


def test_the_stamp_names_this_checkouts_commit() -> None:
    from pp3.testing.stamp import environment

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    env = environment()
    assert env["commit"] == head.strip() and isinstance(env["dirty"], bool) and env["source"] == str(ROOT), env
