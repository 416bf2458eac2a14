"""examples/: each script runs the Triton kernels (on a CUDA GPU, else on the CPU under TRITON_INTERPRET=1 at its
small sizes) in a subprocess from the repository root, exits 0 and prints the lines that its own exact checks stand
behind (the kernels' drafts and verdicts equal to the reference's, bit for bit). Planted bugs fail them: an adapter
that marks padded drafts OK after a ragged round trip, and a verifier kernel keyed one position late. Without a GPU
and without the interpreter an example refuses in one line (exit status 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))
pytestmark = pytest.mark.interpreter


def run(code: list[str], interpreter: bool = not CUDA) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    if interpreter:
        env |= {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, *code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("flashinfer_dense.py", ["every draft equals the reference's, bit for bit",
                                 "dense q exact: tickets * 2^-24 at the slot IDs", "round 2 (plain-torch stand-in)"]),
        ("vllm_ragged.py", ["drafts and verdicts equal the reference's, bit for bit",
                            "round trip exact: drafts, target logits and verdicts",
                            "cu_num_draft_tokens [3, 3, 5, 5, 6]"]),  # vLLM V1's documented num_draft_tokens
        ("pp3_verifier.py", ["every draft and verdict equal the reference's, bit for bit",
                             "replay of round 0 from its keys: identical tokens", "inside the target's top-50"]),
    ],
)
def test_example_runs_the_kernels_and_checks_them(script: str, expected: list[str]) -> None:
    res = run([f"examples/{script}"])
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"kernels on {'cuda' if CUDA else 'cpu'}" in res.stdout, res.stdout
    for line in expected:
        assert line in res.stdout, res.stdout


def test_every_example_is_tested() -> None:
    assert EXAMPLES == ["flashinfer_dense.py", "pp3_verifier.py", "vllm_ragged.py"]


def test_a_broken_adapter_fails_the_ragged_example() -> None:
    """draft_from_ragged with every padded position's status 0: the verifier would read empty slots as drafts. The
    example's own round-trip check must catch it (an AssertionError, exit status 1)."""
    plant = (
        "import dataclasses, runpy, torch; from pp3 import adapters; orig = adapters.draft_from_ragged; "
        "adapters.draft_from_ragged = lambda r, d: dataclasses.replace(orig(r, d), "
        "status=torch.zeros_like(orig(r, d).status)); "
        "runpy.run_path('examples/vllm_ragged.py', run_name='__main__')"
    )
    res = run(["-c", plant])
    assert res.returncode == 1 and "AssertionError" in res.stderr, (res.returncode, res.stderr[-2000:])
    assert "round trip exact" not in res.stdout


def test_a_broken_verifier_kernel_fails_the_verifier_example() -> None:
    """``pp3.kernels.verify`` keyed one position late: the example's bit-for-bit check against the reference must
    catch it in the first round (an AssertionError naming the verifier kernel, exit status 1)."""
    plant = (
        "import runpy, pp3.kernels as k; real = k.verify; "
        "k.verify = lambda *a, **kw: real(*a[:8], a[8] + 1, **kw); "
        "runpy.run_path('examples/pp3_verifier.py', run_name='__main__')"
    )
    res = run(["-c", plant])
    assert res.returncode == 1 and "verifier kernel's verdict differs" in res.stderr, (res.returncode,
                                                                                       res.stderr[-2000:])
    assert "round 0" not in res.stdout


@pytest.mark.skipif(CUDA, reason="a CUDA GPU is there: the kernels run")
@pytest.mark.parametrize("script", EXAMPLES)
def test_an_example_without_gpu_or_interpreter_refuses_in_one_line(script: str) -> None:
    res = run([f"examples/{script}"], interpreter=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "TRITON_INTERPRET=1" in lines[0], res
