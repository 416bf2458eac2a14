"""The PTX audit (``python -m pp3.audit.ptx``) finds every kernel by itself and fails when it should: on the shipped
package it passes with every kernel launched and classified; compiled with Triton's default options it finds FMA in
the verifier and in the selector's launch 2; a kernel planted in a copy of the package is caught, whether an entry
point launches it (its forbidden instruction) or nothing does (it cannot be classified). The verifier's hardware
screen (SPEC.md §11.12) is the one place its ``ex2.approx.f32`` may be: counted per variant, and the same
instruction planted in the exact path of the same kernel is caught.

The audit compiles for sm_90 with the ptxas of Triton's wheel: no GPU needed. It runs in a fresh interpreter without
TRITON_INTERPRET (the compiler needs real JIT objects).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parent.parent
# The shipped kernels (pp3/kernels/_select.py, _accept.py, _common.py, _rows.py) and the selectors not yet shipped
# (the one-launch and row selectors): what the audit must find launched.
KERNELS = {
    "pp3.kernels._select._tile_candidates_kernel", "pp3.kernels._select._finalize_kernel",
    "pp3.kernels._select._check_candidates_kernel", "pp3.kernels._accept._verify_tiles_kernel",
    "pp3.kernels._accept._verify_sums_kernel", "pp3.kernels._accept._verify_rows_kernel",
    "pp3.kernels._accept._verify_counts_kernel", "pp3.kernels._accept._verify_residual_kernel",
    "pp3.kernels._accept._verify_draw_kernel", "pp3.kernels._accept._uniform_below_kernel",
    "pp3.kernels._common._expf_kernel", "pp3.kernels._common._philox_kernel", "pp3.kernels._rows._gather_rows_kernel",
    "pp3.kernels._greedy._tiles_kernel", "pp3.kernels._greedy._rows_kernel", "pp3.kernels._select._segment_max_kernel",
    "pp3.kernels._select._segment_filter_kernel", "pp3.kernels._select._segment_merge_kernel",
    "pp3.kernels._common._expf_screen_kernel", "pp3.kernels._select._onelaunch_kernel",
    "pp3.kernels._select._row_select_kernel",
    # the draft trees (SPEC.md §12)
    "pp3.kernels._tree._tree_draw_kernel", "pp3.kernels._tree._tree_peaks_kernel",
    "pp3.kernels._tree._tree_rows_kernel", "pp3.kernels._tree._tree_sums_kernel",
    "pp3.kernels._tree._tree_counts_kernel", "pp3.kernels._tree._tree_node_kernel",
    "pp3.kernels._tree._tree_walk_kernel",
}

PLANTED = '''
import triton
import triton.language as tl


@triton.jit
def _planted_kernel(z_ptr, out_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.exp(tl.load(z_ptr + offs, mask=mask, other=0.0)), mask=mask)  # ex2.approx
'''


def _audit(*flags: str, root: Path = ROOT) -> tuple[int, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-m", "pp3.audit.ptx", *flags], capture_output=True, text=True, env=env,
                          cwd=root, timeout=900)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    assert doc["schema_version"] == 1 and doc["verdict"] in ("PASS", "FAIL"), doc
    return proc.returncode, doc


def _copy(tmp: Path) -> Path:
    """A copy of the package to plant a kernel in (the audit discovers the modules on disk)."""
    shutil.copytree(ROOT / "pp3", tmp / "pp3", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def test_every_shipped_kernel_is_found_launched_and_clean() -> None:
    rc, doc = _audit("--digests")  # as make evidence-check asks for it: PP3_PTX_CACHE then compiles it once
    assert rc == 0 and doc["verdict"] == "PASS", doc
    assert set(doc["kernels"]) == KERNELS and doc["unclassified"] == [] and not doc["failed"], doc
    assert doc["functions"] > len(KERNELS) and doc["variants"] >= 2 * len(KERNELS), doc  # helpers; PDL both ways
    # The screen's instructions: only in the variants of the hardware screen (SCREEN=1), ex2 alone, in every one.
    screened = set(doc["screen"])
    assert screened and all(("SCREEN=1" in n) and n.split("[")[0] in ("_verify_tiles_kernel", "_expf_screen_kernel")
                            for n in screened), sorted(screened)
    assert all(set(c) == {"ex2.approx.f32"} and c["ex2.approx.f32"] > 0 for c in doc["screen"].values()), doc["screen"]
    assert doc["screen_function"] == "pp3.kernels._common._expf_screen_ex2"


def test_default_options_are_caught() -> None:
    """Compiled with Triton's defaults (FMA contraction on), the audit objects, in the verifier and the selector (two
    kernels' variants compiled: each of the others compiles the same way, test_every_shipped_kernel_...)."""
    rc, doc = _audit("--default-options", "--only", "_finalize_kernel", "_verify_sums_kernel")
    fma = {name.split("[")[0] for name, found in doc["forbidden"].items() if "fused multiply-add" in found}
    assert rc == 1 and doc["verdict"] == "FAIL", doc
    assert fma == {"_finalize_kernel", "_verify_sums_kernel"} and doc["only"] == sorted(fma), doc
    assert 2 <= doc["variants"] < 40, doc["variants"]


def test_only_refuses_a_kernel_nothing_launches() -> None:
    proc = subprocess.run([sys.executable, "-m", "pp3.audit.ptx", "--only", "_no_such_kernel"], capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 2 and "--only: no launched kernel is named _no_such_kernel" in proc.stderr, proc.stderr


def test_a_planted_kernel_that_an_entry_point_launches_is_audited(tmp_path: Path) -> None:
    """The copy's ``launchers.expf`` launches a kernel no list names, with ``tl.exp`` (approximate): caught."""
    root = _copy(tmp_path)
    (root / "pp3" / "kernels" / "_planted.py").write_text(PLANTED)
    launchers = root / "pp3" / "kernels" / "launchers.py"
    text = launchers.read_text()
    assert "_common._expf_kernel[" in text
    text = text.replace("_common._expf_kernel[", "_planted._planted_kernel[").replace(
        "from pp3.kernels import _accept,", "from pp3.kernels import _planted\nfrom pp3.kernels import _accept,"
    )
    launchers.write_text(text)
    rc, doc = _audit(root=root)
    assert rc == 1 and "pp3.kernels._planted._planted_kernel" in doc["kernels"], doc
    found = {name.split("[")[0]: what for name, what in doc["forbidden"].items()}
    assert "approximate op" in found["_planted_kernel"], doc


def test_an_approximate_instruction_in_the_screened_kernels_exact_path_is_caught(tmp_path: Path) -> None:
    """In a copy, launch 1's tile peak (an exact-path value: the argmax and the class) goes through the hardware's
    exponential too, in the kernel whose screen uses it: every variant of that kernel fails, the screen's own
    instructions are still counted, and nothing else of it is taken for the screen's."""
    root = _copy(tmp_path)
    accept = root / "pp3" / "kernels" / "_accept.py"
    text = accept.read_text()
    peak = "    mt = tl.reduce(x, 0, _max_nan)  # NaN for a tile that holds a NaN\n"
    assert text.count(peak) == 1
    accept.write_text(text.replace(peak, "    mt = tl.reduce(tl.math.exp2(x), 0, _max_nan)  # planted\n"))
    rc, doc = _audit("--only", "_verify_tiles_kernel", root=root)
    assert rc == 1 and doc["verdict"] == "FAIL", doc
    assert doc["forbidden"] and all(n.startswith("_verify_tiles_kernel[") for n in doc["forbidden"]), doc
    assert len(doc["forbidden"]) == doc["variants"], doc  # every variant, pinned screen or hardware screen
    assert all(set(found) == {"approximate op"} for found in doc["forbidden"].values()), doc["forbidden"]
    assert doc["screen"] and all("SCREEN=1" in n for n in doc["screen"]), doc["screen"]


def test_the_screens_allowance_is_its_lines_and_its_instructions_alone() -> None:
    """``find_forbidden`` on PTX written by hand: ``ex2.approx.f32`` and ``fma.rn.f32`` under a ``.loc`` of the
    screen's lines (guarded or not; its file wherever the package lies) are counted; the same instructions under
    another line or another file, an ``.ftz`` or other approximate form under the screen's lines, and any
    instruction before the first ``.loc`` are findings."""
    from pp3.audit.ptx import find_forbidden

    screen = ("pp3/kernels/_common.py", range(10, 14))
    ptx = "\n".join([
        "\tex2.approx.f32 \t%r0, %r1;",  # no .loc yet: a finding
        "\t.loc\t2 12 24                 // _common.py:12:24",
        "\tex2.approx.f32 \t%r1, %r2;",
        "\t@%p3 ex2.approx.f32 \t%r2, %r3;",
        "\t.loc\t4 13 2",  # the same file through another path (a cached binary compiled elsewhere)
        "\tfma.rn.f32 \t%r3, %r4, %r5, %r6;",
        "\tex2.approx.ftz.f32 \t%r4, %r5;",  # not the allowed form
        "\trcp.approx.f32 \t%r5, %r6;",
        "\t.loc\t1 12 3",  # line 12 of another file
        "\tex2.approx.f32 \t%r6, %r7;",
        "\t.loc\t3 12 3",  # a file whose name only ends like the screen's
        "\tex2.approx.f32 \t%r7, %r8;",
        "\t.loc\t2 14 1",  # past the screen's last line
        "\tfma.rn.f32 \t%r8, %r9, %r10, %r11;",
        '\t.file\t1 "/src/pp3/kernels/_accept.py"',
        '\t.file\t2 "/src/pp3/kernels/_common.py"',
        '\t.file\t3 "/src/notpp3/kernels/_common.py"',
        '\t.file\t4 "/tmp/copy" "pp3/kernels/_common.py"',
    ])
    found, counted = find_forbidden(ptx, screen)
    assert counted == {"ex2.approx.f32": 2, "fma.rn.f32": 1}, counted
    assert sorted(found) == ["approximate op", "flush to zero", "fused multiply-add"], found
    assert found["approximate op"] == ["ex2.approx.f32 \t%r0, %r1;", "ex2.approx.ftz.f32 \t%r4, %r5;",
                                       "rcp.approx.f32 \t%r5, %r6;"], found
    assert find_forbidden(ptx)[1] == {}  # without the screen's lines nothing is the screen's


def test_a_planted_kernel_that_nothing_launches_cannot_pass(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "pp3" / "kernels" / "_planted.py").write_text(PLANTED)
    rc, doc = _audit(root=root)
    assert rc == 1 and doc["unclassified"] == ["pp3.kernels._planted._planted_kernel"], doc


def test_the_digests_ignore_debug_lines() -> None:
    from pp3.audit.ptx import code_digest

    ptx = "\t.loc\t1 149 0 // _common.py:149:0\n\tmov.u32 \t%r1, %r2; // note\n\t.section\t.debug_info {\n}\n"
    moved = ptx.replace("149", "150")
    assert code_digest(ptx) == code_digest(moved)
    assert code_digest(ptx) != code_digest(ptx.replace("%r2", "%r3"))

