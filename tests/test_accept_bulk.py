"""``python -m pp3.audit.accept_bulk``, the verifier's bulk parity run, at interpreter sizes: a tiny run equals the
reference and covers every category it counts, a planted kernel bug is caught (and its dump replays), rows do not
depend on the run that checks them, runs that would check nothing refuse to start, and the host buffers are
page-locked and released (or the run stops, naming --pageable).

Runs under TRITON_INTERPRET=1 (V = 40: ~25 s in all) or natively on a CUDA GPU; skipped otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU", allow_module_level=True)

import pp3.kernels  # noqa: E402
from pp3.audit import accept_bulk  # noqa: E402

pytestmark = [
    pytest.mark.interpreter,
    # the interpreter's runtime-bound loops (the tile loops) convert 1-element arrays to ints (NumPy 2.3 warns)
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning"),  # -inf / +inf, masked
]
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
TINY = ["--vocab", "40", "--workers", "1", "--json"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    rc = accept_bulk.main(argv)
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return rc, doc


def test_a_tiny_run_equals_the_reference_and_covers_every_category(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """48 rows in 3 batches (depths 1, 2, 3; fp32, fp16, bf16): every status, T0 and sampled OK rows, every plan."""
    out = tmp_path / "failures"
    rc, doc = run([*TINY, "--rows", "48", "--batch", "16", "--out", str(out)], capsys)
    c = doc["counts"]
    assert rc == 0 and doc["verdict"] == "PASS" and c["mismatching_rows"] == 0, doc
    assert doc["rows_checked"] == [0, 48] and doc["complete"] and doc["resume"] is None
    assert c["rows"] == 48 and sum(c["status"].values()) == 48
    assert all(c["status"][str(s)] >= 1 for s in range(6)), c["status"]
    assert c["ok"]["t0"] >= 1 and c["ok"]["sampled"] >= 1, c["ok"]
    assert c["depth"] == {"1": 16, "2": 16, "3": 16} and c["dtype"] == {"bf16": 16, "fp16": 16, "fp32": 16}
    assert all(n >= 1 for n in c["plan"].values()), c["plan"]
    for flag in ("truncated", "argmax_drafts", "extreme_keys", "position_wraps", "flat_rows", "masked_rows", "bonus"):
        assert c[flag] >= 1, (flag, c)
    assert not out.exists()  # made to check that it can be written, removed again: nothing failed


def test_a_planted_kernel_bug_is_caught_and_its_batch_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pp3.kernels.verify

    def flipped(*args: Any, **kw: Any) -> Any:
        res = real(*args, **kw)
        res.tokens[3, 0] ^= 1  # the planted bug: one token of row 3 is off (a failed row's -1 becomes -2)
        return res

    monkeypatch.setattr(pp3.kernels, "verify", flipped)
    rc, doc = run([*TINY, "--rows", "8", "--batch", "8", "--seed", "5", "--out", str(tmp_path)], capsys)
    c = doc["counts"]
    assert rc == 1 and doc["verdict"] == "MISMATCH" and doc["stopped"] == "mismatch", doc
    assert c["mismatching_rows"] == 1 and c["mismatches_per_field"] == {"status": 0, "accepted": 0, "tokens": 1}
    dump = Path(doc["failure"])
    assert dump.exists() and dump.parent == tmp_path
    report = json.loads(dump.with_suffix(".json").read_text())
    assert report["mismatching_rows"] == [3] and report["rows"][0]["row"] == 3
    z = np.load(dump)
    assert z["bits"].shape == (8, 2, 40) and z["kernel_tokens"][3, 0] != z["reference_tokens"][3, 0]
    assert accept_bulk.main(["--replay", str(dump)]) == 1  # still planted: the replay sees it
    monkeypatch.undo()
    assert accept_bulk.main(["--replay", str(dump)]) == 0  # the real kernels on the dumped inputs


def test_open_requests_pass_with_every_argmax_test_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At V = 40 no test falls in launch 3's open window by chance (it needs V > 2^16); with the bound raised to
    2^40 every test of x_j = g_j with U_j >= c is open, so the argmax and open requests go through launches 4-5."""
    from pp3.kernels import accept

    monkeypatch.setattr(accept, "remainder_bound", lambda v: 1 << 40)
    rc, doc = run([*TINY, "--rows", "16", "--batch", "16", "--seed", "1", "--out", str(tmp_path)], capsys)
    assert rc == 0 and doc["counts"]["mismatching_rows"] == 0, doc
    assert doc["counts"]["plan"]["argmax"] + doc["counts"]["plan"]["open"] >= 3, doc["counts"]["plan"]


def test_open_q_puts_the_tests_in_the_open_window() -> None:
    """V = 163840: c = 6710886, R = 65536, Q = 104 (s = 6815744): U >= c is open (s <= c + V - 1) and U >= c + R
    rejects; no such Q where 2^16 >> V."""
    v = 163840
    c, r, q = (1 << 40) // v, (1 << 40) % v, accept_bulk.open_q(v)
    assert (c, r, q) == (6710886, 65536, 104)
    assert q is not None and c + r < q << 16 < c + v
    assert accept_bulk.open_q(40) is None and accept_bulk.open_q(1) is None


def test_a_row_is_the_same_whichever_run_checks_it() -> None:
    """Rows 4-7 built in a batch of rows 0-7 and in one of rows 4-7 (a resumed run): the same plan and logit bits."""
    d, fmt = accept_bulk.batch_layout(2)
    whole = accept_bulk.plan_batch(3, np.arange(8), d, 40)
    tail = accept_bulk.plan_batch(3, np.arange(4, 8), d, 40)
    for f in ("temperature", "plan", "j", "aux", "seed", "round", "position", "flat_value", "torch_seed"):
        np.testing.assert_array_equal(getattr(whole, f)[4:].view(np.uint8), getattr(tail, f).view(np.uint8), f)
    for a, b in zip(accept_bulk.build_logits(whole, d, fmt, 40, DEV), accept_bulk.build_logits(tail, d, fmt, 40, DEV),
                    strict=True):
        assert torch.equal(a[4:].view(torch.int16), b.view(torch.int16))


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--rows", "0"], "--rows"),  # would check nothing
        (["--rows", "-3"], "--rows"),
        ([], "--rows"),
        (["--rows", "8", "--batch", "0"], "--batch"),
        (["--rows", "8", "--workers", "0"], "--workers"),
        (["--rows", "8", "--vocab", "0"], "--vocab"),
        (["--rows", "8", "--vocab", str(1 << 31)], "--vocab"),
        (["--rows", "8", "--seed", "-1"], "--seed"),
        (["--rows", "8", "--batch", "8", "--start", "4"], "--start"),
        (["--rows", "8", "--max-seconds", "0"], "--max-seconds"),
        (["--rows", "8", "--max-seconds", "nan"], "--max-seconds"),
    ],
)
def test_bad_numbers_are_refused_naming_the_flag(argv: list[str], flag: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        accept_bulk.main([*argv, "--out", str(tmp_path)])
    assert e.value.code == 2 and flag in capsys.readouterr().err


def test_an_unwritable_out_is_refused_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as e:
        accept_bulk.main(["--rows", "8", "--out", str(blocker / "failures")])
    assert e.value.code == 2 and "--out" in capsys.readouterr().err


class _Cudart:
    """A stand-in for ``torch.cuda.cudart()``: records registrations, fails the ``fail_at``-th."""

    def __init__(self, fail_at: int | None) -> None:
        self.fail_at = fail_at
        self.held: list[tuple[int, int]] = []
        self.released: list[int] = []

    def cudaHostRegister(self, ptr: int, size: int, flags: int) -> int:
        if len(self.held) == self.fail_at:
            return 1
        self.held.append((ptr, size))
        return 0

    def cudaHostUnregister(self, ptr: int) -> int:
        self.released.append(ptr)
        return 0


@pytest.mark.parametrize("fail_at", [None, 1])
def test_the_host_buffers_are_registered_and_released(fail_at: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ring buffer is page-locked once and unregistered on exit, or the run stops naming --pageable (the
    buffers registered before the failure released too); the buffers still close afterwards (no export is left)."""
    from multiprocessing import shared_memory

    fake = _Cudart(fail_at)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "cudart", lambda: fake)
    ring = tuple(shared_memory.SharedMemory(create=True, size=4096) for _ in range(3))
    try:
        if fail_at is None:
            with accept_bulk.pinned(ring, pageable=False) as how:
                assert how.startswith("page-locked (3 x") and len(fake.held) == 3 and fake.released == []
            assert fake.released == [p for p, _ in fake.held] and all(n == 4096 for _, n in fake.held)
        else:
            with pytest.raises(accept_bulk.PinError, match="--pageable"), accept_bulk.pinned(ring, pageable=False):
                pass
            assert fake.released == [p for p, _ in fake.held] and len(fake.held) == fail_at
        with accept_bulk.pinned(ring, pageable=True) as how:
            assert how == "pageable"
    finally:
        for shm in ring:
            shm.close()
            shm.unlink()


def test_the_warm_up_meets_every_layout_and_the_last_batch() -> None:
    run = accept_bulk.Run(seed=3, start=128, rows=64 * 30 + 5, vocab=40, batch=64, workers=1, max_seconds=None,
                          out=Path("unused"))
    got = accept_bulk.warm_batches(run)
    ks = [k for k, _ in got]
    assert ks == [*range(2, 2 + accept_bulk.WARM_LAYOUTS), 2 + 30]  # batches 2 .. 25, and the last (5 rows)
    assert {accept_bulk.batch_layout(k) for k in ks[:-1]} == {(d, f) for d in range(1, 9) for f in ("fp32", "fp16",
                                                                                                      "bf16")}
    assert [r.size for _, r in got] == [64] * accept_bulk.WARM_LAYOUTS + [5] and got[0][1][0] == 128
    whole = accept_bulk.Run(seed=3, start=0, rows=64 * 5, vocab=40, batch=64, workers=1, max_seconds=None,
                            out=Path("unused"))
    assert [k for k, _ in accept_bulk.warm_batches(whole)] == [0, 1, 2, 3, 4]  # fewer batches than layouts


def test_a_warm_up_that_fails_only_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a GPU the spawned warm-up processes fail (they run on CUDA): the run is told, nothing raises."""
    if torch.cuda.is_available():
        pytest.skip("the warm-up succeeds on a GPU")
    run = accept_bulk.Run(seed=0, start=0, rows=16, vocab=40, batch=16, workers=1, max_seconds=None,
                          out=Path("unused"))
    what = accept_bulk.warm(run)
    assert what.startswith("failed after") and "compiling as it goes" in what, what


def _not_a_batch(folder: Path, what: str) -> Path:
    path = folder / f"{what}.npz"
    if what == "junk":
        path.write_bytes(b"PK\003\004junk")
    elif what == "foreign":
        np.savez(path, x=np.zeros(3))
    return path


@pytest.mark.parametrize(
    ("what", "needle"),
    [("missing", "no such file"), ("junk", "BadZipFile"), ("foreign", "no member 'fmt'")],  # missing: the issue's
)
def test_a_replay_of_a_file_that_is_no_batch_is_refused(what: str, needle: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``--replay`` of a missing, damaged or foreign file: one line naming it, exit status 2, no traceback."""
    with pytest.raises(SystemExit) as e:
        accept_bulk.main(["--replay", str(_not_a_batch(tmp_path, what))])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and "--replay" in err and needle in err, err
