"""examples/: each script runs on the CPU (the NumPy reference for drafting and verification) in a subprocess from the
repository root, exits 0 and prints the line that its own exact checks stand behind; a planted bug in an adapter
(padded drafts marked OK after a ragged round trip) makes the ragged example fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def run(code: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSPARK_SAMPLED_TOP32": "1", "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, *code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("flashinfer_dense.py", ["dense q exact: tickets * 2^-24 at the slot IDs", "round 2 (plain-torch stand-in)"]),
        ("vllm_ragged.py", ["round trip exact: drafts, target logits and verdicts",
                            "cu_num_draft_tokens [3, 3, 5, 5, 6]"]),  # vLLM V1's documented num_draft_tokens
        ("pp3_verifier.py", ["replay of round 0 from its keys: identical tokens", "inside the target's top-50"]),
    ],
)
def test_example_runs(script: str, expected: list[str]) -> None:
    res = run([f"examples/{script}"])
    assert res.returncode == 0, res.stderr[-2000:]
    for line in expected:
        assert line in res.stdout, res.stdout


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
