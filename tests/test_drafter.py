"""pp3.drafter (TPDrafter: the greedy path, the gated sampled path) and pp3.testing.markov (the Markov drafter)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from torch import Tensor, dtype

torch = pytest.importorskip("torch")

from pp3.drafter import SAMPLED_ENV, SampledDraftingDisabled, TPDrafter, greedy_select  # noqa: E402
from pp3.reference import propose  # noqa: E402
from pp3.testing.compare import assert_equal  # noqa: E402
from pp3.testing.markov import MarkovDrafter, split_sizes  # noqa: E402


class TableDrafter:
    """A drafter whose logits are rows of a fixed [V, V] table (any values, NaN included), optionally sharded."""

    def __init__(self, table: np.ndarray, sizes: list[int] | None = None) -> None:
        self.table = torch.from_numpy(table)
        self.sizes = sizes or [table.shape[1]]

    @property
    def vocab_size(self) -> int:
        return int(self.table.shape[1])

    def __call__(self, tokens: Tensor) -> list[Tensor]:
        return list(torch.split(self.table[tokens[:, -1]], self.sizes, dim=1))


# ------------------------------------------------------------------------------------------------ greedy path


@pytest.mark.parametrize(
    "sizes",
    [None, [3, 5], [1, 1, 6], [4, 4]],  # one shard; ragged shards; a 1-wide shard; a tie across a shard boundary
)
def test_greedy_select_is_the_selector_t0_output(sizes: list[int] | None) -> None:
    inf, nan = np.inf, np.nan
    rows = np.array(
        [
            [0, 3, 3, 1, 3, 0, 0, 0],  # tie: lowest ID
            [-0.0, 0.0, -1, -1, -1, -1, -1, -1],  # signed zeros are equal: ID 0
            [-inf] * 8,  # ZERO_MASS
            [1, nan, inf, 0, 0, 0, 0, 0],  # NaN beats +inf
            [1, 2, inf, 0, 0, 0, 0, 0],  # POS_INF
            [-inf, -inf, -inf, -inf, -3.0e38, -inf, -inf, -inf],  # the only finite entry sits in a later shard
            [0, 0, 0, 0, 7, 0, 0, 7],
            [-1, -1, -1, -1, 2, 2, 2, 2],  # tie across shards at the boundary of [4, 4]
        ],
        dtype=np.float32,
    )
    shards = list(torch.split(torch.from_numpy(rows), sizes or [8], dim=1))
    token, status = greedy_select(shards)
    want = propose(rows, 0.0, 0, 0, 0)
    assert_equal(token.numpy(), want.token, "token")
    assert_equal(status.numpy(), want.status, "status")


def test_greedy_ties_go_to_the_lowest_id_at_v_163840() -> None:
    # torch.max(dim) returns the first maximal index; check it where vectorised CPU reductions could differ.
    v = 163840
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 4, size=(16, v)).astype(np.float32)  # many ties at the maximum 3
    x[:, rng.integers(0, v, 16)] = 3.0
    x[3] = -0.0
    x[3, 77777] = 0.0
    for sizes in ([v], [81920, 81920], [1000, 162840]):
        token, _ = greedy_select(list(torch.split(torch.from_numpy(x), sizes, dim=1)))
        assert_equal(token.numpy(), propose(x, 0.0, 0, 0, 0).token, f"token, shards {sizes}")


def test_draft_is_depth_steps_of_the_t0_selector() -> None:
    rng = np.random.default_rng(1)
    v = 12
    table = rng.normal(size=(v, v)).astype(np.float32)
    table[5] = np.nan  # after token 5 the drafter fails
    drafter = TPDrafter(TableDrafter(table, [5, 7]), depth=4)
    ctx = torch.tensor([[0], [5], [3], [11]])
    d = drafter.draft(ctx)
    assert d.tokens.shape == (4, 4) and d.ids.shape == (4, 4, 32) and d.tickets.shape == (4, 4, 32)
    prev = ctx[:, 0].numpy().copy()
    for j in range(4):
        want = propose(table[prev], 0.0, 0, 0, 0)
        for f in ("token", "status", "ids", "tickets"):
            got = {"token": d.tokens, "status": d.status, "ids": d.ids, "tickets": d.tickets}[f][:, j].numpy()
            assert_equal(got, getattr(want, f), f"{f} at depth {j}")
        prev = np.maximum(want.token, 0)  # a failed position feeds token 0


def test_depth_is_fixed_and_validated() -> None:
    m = MarkovDrafter.random(8, 2)
    for bad, error in ((0, ValueError), (-1, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="depth"):
            TPDrafter(m, bad)  # type: ignore[arg-type]
    assert TPDrafter(m, 3).draft(torch.zeros((2, 1), dtype=torch.int64)).tokens.shape == (2, 3)


@pytest.mark.parametrize("backend", ["auto", "reference", "triton"])
@pytest.mark.parametrize(("tile", "error"), [(48, ValueError), (16, ValueError), (1 << 17, ValueError),
                                              (64.0, TypeError), (True, TypeError)])
def test_tile_is_checked_on_every_backend(backend: str, tile: object, error: type[Exception]) -> None:
    """The selector's tile rules (a power of two in 32 .. 2^16), when the drafter is built, whatever the backend."""
    with pytest.raises(error, match="tile"):
        TPDrafter(MarkovDrafter.random(8, 2), 2, backend=backend, tile=tile)  # type: ignore[arg-type]
    assert TPDrafter(MarkovDrafter.random(8, 2), 2, backend=backend, tile=64).tile == 64  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------- sampled path


def test_sampled_path_needs_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    drafter = TPDrafter(MarkovDrafter.random(8, 2), depth=2)
    ctx = torch.zeros((1, 1), dtype=torch.int64)
    for value in (None, "0", "true", ""):
        if value is None:
            monkeypatch.delenv(SAMPLED_ENV, raising=False)
        else:
            monkeypatch.setenv(SAMPLED_ENV, value)
        with pytest.raises(SampledDraftingDisabled, match=SAMPLED_ENV):
            drafter.draft_sampled(ctx, 1.0, 0, 0, 0)
    monkeypatch.setenv(SAMPLED_ENV, "1")
    assert drafter.draft_sampled(ctx, 1.0, 0, 0, 0).tokens.shape == (1, 2)


def test_sampled_draft_is_keyed_by_seed_round_and_absolute_position(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    v, depth = 40, 3  # V > 32: the top-32 support is a strict subset
    markov = MarkovDrafter.random(v, 8, seed=3, shards=3)
    table = markov.table()
    seed = np.array([1, 2, 2**64 - 1], dtype=np.uint64)
    pos = np.array([10, 0, 2**64 - 2], dtype=np.uint64)  # the last row's positions wrap mod 2^64
    temp = np.array([1.0, 0.0, 2.5], dtype=np.float32)
    d = TPDrafter(markov, depth, tau=0.7).draft_sampled(torch.tensor([[4], [5], [6]]), temp, seed, 7, pos)
    prev = np.array([4, 5, 6])
    for j in range(depth):
        with np.errstate(over="ignore"):
            want = propose(table[prev], temp, seed, 7, pos + np.uint64(j), 0.7)
        assert_equal(d.tokens[:, j].numpy(), want.token, f"token at depth {j}")
        assert_equal(d.tickets[:, j].numpy(), want.tickets, f"tickets at depth {j}")
        assert_equal(d.ids[:, j].numpy(), want.ids, f"ids at depth {j}")
        prev = want.token


@pytest.mark.interpreter
def test_sampled_triton_backend_equals_the_reference_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    monkeypatch.setenv(SAMPLED_ENV, "1")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    markov = MarkovDrafter.random(48, 4, seed=9, shards=2, device=dev)
    ctx = torch.tensor([[1], [2]], device=dev)
    args = (ctx, 1.0, np.array([3, 4], dtype=np.uint64), 1, 5)
    got = TPDrafter(markov, 2, backend="triton", tile=32).draft_sampled(*args)
    want = TPDrafter(markov, 2, backend="reference").draft_sampled(*args)
    for f in ("tokens", "status", "ids", "tickets"):
        assert_equal(getattr(got, f).cpu().numpy(), getattr(want, f).cpu().numpy(), f)


def _backends() -> list[Any]:
    kernels_run = os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available()
    return ["reference", pytest.param("triton", marks=[pytest.mark.interpreter, pytest.mark.skipif(
        not kernels_run, reason="needs TRITON_INTERPRET=1 or a CUDA GPU")])]


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize(
    ("at", "value", "name"),
    [
        (2, torch.tensor([3, 4], dtype=torch.int32), "seed"),  # the reproducer
        (3, torch.tensor([1, 1], dtype=torch.int16), "round"),
        (4, torch.tensor([5, 6], dtype=torch.uint8), "position"),
        (1, torch.tensor([1, 2], dtype=torch.int32), "target_temperature"),
        (1, torch.tensor(True), "target_temperature"),
    ],
)
def test_both_backends_refuse_the_same_key_dtypes(backend: str, at: int, value: Any, name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule on both backends, the kernels' (pp3.kernels.checks.row_keys): key tensors int64 or uint64, a
    temperature tensor floating-point; the reference backend took int32/int16/uint8 keys and integer temperatures."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    args: list[Any] = [torch.tensor([[1], [2]]), 1.0, np.array([3, 4], dtype=np.uint64), 1, 5]
    args[at] = value
    with pytest.raises(TypeError, match=f"^{name}: "):
        TPDrafter(MarkovDrafter.random(48, 4, seed=9), 1, backend=backend).draft_sampled(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", _backends())
def test_both_backends_take_the_same_key_forms(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """int64 and uint64 key tensors, float64 and float16 temperature tensors, scalars and NumPy arrays: the same
    drafts as the plain forms, on either backend."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    drafter = TPDrafter(MarkovDrafter.random(48, 4, seed=9), 1, backend=backend)  # type: ignore[arg-type]
    ctx = torch.tensor([[1], [2]])
    want = drafter.draft_sampled(ctx, 1.0, [3, 4], 1, 5)
    for keys in (
        (torch.tensor([1.0, 1.0], dtype=torch.float64), torch.tensor([3, 4]), torch.tensor(1), torch.tensor([5, 5])),
        (torch.tensor(1.0, dtype=torch.float16), torch.tensor([3, 4], dtype=torch.uint64), np.int32(1),
         np.array([5, 5], dtype=np.int32)),
    ):
        got = drafter.draft_sampled(ctx, *keys)
        for f in ("tokens", "status", "ids", "tickets"):
            assert_equal(getattr(got, f).numpy(), getattr(want, f).numpy(), f"{backend}: {f}")


# ----------------------------------------------------------------------------------------------------- imports


def test_importing_pp3_and_the_greedy_path_import_no_sampled_kernel_code() -> None:
    code = textwrap.dedent(
        """
        import sys
        import pp3
        import torch
        from pp3.drafter import TPDrafter
        from pp3.testing.markov import MarkovDrafter
        d = TPDrafter(MarkovDrafter.random(64, 4, shards=2), depth=5).draft(torch.zeros((3, 1), dtype=torch.int64))
        assert d.tokens.shape == (3, 5)
        banned = [m for m in sys.modules if m.startswith("pp3.kernels")]
        print("BANNED", banned)
        print("TRITON", "triton" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "BANNED []" in out, out
    assert "TRITON False" in out, out  # nor triton itself


# ------------------------------------------------------------------------------------------------------ markov


def test_markov_shards_tile_the_vocabulary_and_match_the_exact_table() -> None:
    for shards in (1, 2, 3, 7):
        m = MarkovDrafter.random(50, 16, seed=1, shards=shards)
        assert m.shard_sizes == split_sizes(50, shards) and sum(m.shard_sizes) == 50
        out = torch.cat(m(torch.arange(50)[:, None]), dim=1).numpy()
        assert_equal(out, m.table(), f"logits with {shards} shards")
    one = MarkovDrafter.random(50, 16, seed=1).table()
    assert_equal(MarkovDrafter.random(50, 16, seed=1, shards=5).table(), one, "table independent of shards")


def test_markov_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        MarkovDrafter(torch.zeros(4, 2), torch.zeros(3, 4))
    with pytest.raises(ValueError):
        MarkovDrafter(torch.zeros(4, 2), torch.zeros(2, 4), [2, 1])
    with pytest.raises(ValueError):
        split_sizes(4, 5)


# ------------------------------------------------------------------------------------------ the model's output


class _Fixed:
    """A model that returns the given output whatever the context."""

    def __init__(self, out: list[Tensor], vocab: int) -> None:
        self.out, self._vocab = out, vocab

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def __call__(self, tokens: Tensor) -> list[Tensor]:
        return self.out


@pytest.mark.parametrize("dt", [torch.float64, torch.int32, torch.int64])
def test_greedy_select_refuses_what_the_selector_does_not_read(dt: dtype) -> None:
    """SPEC's order is fp32's: an fp64 row whose two values round to one fp32 value is a tie (token 0), which an
    argmax in fp64 would give to 1; so greedy_select refuses every dtype but the selector's three, naming the shard."""
    x = torch.tensor([[1.0, 1.0 + 1e-12]], dtype=torch.float64).to(dt)
    with pytest.raises(TypeError, match=rf"shards\[1\]: expected a float32, float16 or bfloat16 .*{str(dt)[6:]}"):
        greedy_select([torch.zeros(1, 3), x])


@pytest.mark.parametrize(
    ("out", "error", "text"),
    [
        ([torch.zeros(2, 8, dtype=torch.float64)], TypeError, "float64"),  # greedy's argmax would differ from T0's
        ([torch.zeros(2, 8, dtype=torch.int32)], TypeError, "int32"),
        ([torch.zeros(3, 8)], ValueError, r"\[2, V_r >= 1\]"),  # the wrong batch size: named, not blamed on seed
        ([torch.zeros(2, 8), torch.zeros(2, 0)], ValueError, "shard 1"),  # a zero-width shard, both paths alike
    ],
)
def test_both_paths_check_the_model_output_alike(out: list[Tensor], error: type[Exception], text: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    drafter = TPDrafter(_Fixed(out, 8), depth=2, backend="reference")
    ctx = torch.zeros((2, 1), dtype=torch.int64)
    with pytest.raises(error, match=text):
        drafter.draft(ctx)
    with pytest.raises(error, match=text):
        drafter.draft_sampled(ctx, 1.0, 0, 0, 0)
