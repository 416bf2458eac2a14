"""pp3.drafter's stateful protocol (StatefulDraftModel: start, then step per position) and its test drafters
(pp3.testing.stateful): one loop for both kinds of drafter, the state threaded and returned, the checks named."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pytest

if TYPE_CHECKING:
    from torch import Tensor

torch = pytest.importorskip("torch")

from pp3.drafter import SAMPLED_ENV, Draft, SampledDraftingDisabled, TPDrafter  # noqa: E402
from pp3.reference import propose  # noqa: E402
from pp3.testing.compare import assert_equal  # noqa: E402
from pp3.testing.markov import MarkovDrafter  # noqa: E402
from pp3.testing.stateful import RecurrentDrafter, StatefulMarkov  # noqa: E402

FIELDS = ("tokens", "status", "ids", "tickets")
TEMP = np.array([1.0, 0.0, 2.5, 0.5], dtype=np.float32)  # sampled, greedy (T0) and sampled rows in one batch
SEED = np.array([1, 2, 3, 2**64 - 1], dtype=np.uint64)
POS = np.array([0, 9, 2**64 - 2, 5], dtype=np.uint64)  # the third row's positions wrap mod 2^64
ROUND = 7
CTX = [[1, 4, 9], [5, 0, 0], [6, 7, 2], [0, 30, 30]]  # t = 3: start consumes two columns


def _same(got: Draft, want: Draft, what: str) -> None:
    for f in FIELDS:
        assert_equal(getattr(got, f).cpu().numpy(), getattr(want, f).cpu().numpy(), f"{what}: {f}")


def _run(drafter: TPDrafter, path: str, ctx: Tensor) -> tuple[Draft, Any]:
    if path == "greedy":
        return drafter.draft_with_state(ctx)
    return drafter.draft_sampled_with_state(ctx, TEMP, SEED, ROUND, POS)


# ------------------------------------------------------------------------------ the Markov drafter, both kinds


@pytest.mark.parametrize("path", ["greedy", "sampled"])
@pytest.mark.parametrize(
    ("vocab", "shards", "depth"),
    [(40, 3, 3), (33, 1, 1), (64, 2, 5)],  # V > 32 ragged shards; depth 1 (one step, no draft fed back); V = 2^6
)
def test_markov_through_both_protocols_is_bit_identical(
    path: str, vocab: int, shards: int, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token-only Markov drafter (the loop's adapter) and the same drafter as a stateful model give the same
    draft, equal to a hand-rolled loop on its exact table (the old token-only loop), and the same state: the context
    and every draft but the last."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    markov = MarkovDrafter.random(vocab, 8, seed=vocab, shards=shards, gain=1)
    ctx = torch.tensor(CTX)
    plain, plain_state = _run(TPDrafter(markov, depth, backend="reference"), path, ctx)
    steps, steps_state = _run(TPDrafter(StatefulMarkov(markov), depth, backend="reference"), path, ctx)
    _same(steps, plain, "stateful Markov vs token-only Markov")
    table, prev = markov.table(), ctx[:, -1].numpy()
    for d in range(depth):
        temp, pos = (0.0, POS) if path == "greedy" else (TEMP, POS + np.uint64(d))
        with np.errstate(over="ignore"):
            want = propose(table[prev], temp, SEED, ROUND, pos, 0.7)
        assert_equal(plain.tokens[:, d].numpy(), want.token, f"token at depth {d}")
        assert_equal(plain.tickets[:, d].numpy(), want.tickets, f"tickets at depth {d}")
        prev = np.maximum(want.token, 0).astype(np.int64)
    state = torch.cat([ctx, plain.tokens[:, :-1].clamp_min(0).long()], dim=1)
    assert_equal(plain_state.numpy(), state.numpy(), "token-only state: the context fed to the last call")
    assert_equal(steps_state.numpy(), state.numpy(), "stateful Markov's state")


# ------------------------------------------------------------------------------ the recurrent drafter vs a loop


def _oracle(
    model: RecurrentDrafter,
    ctx: Tensor,
    depth: int,
    temp: Any,
    seed: Any,
    rnd: Any,
    pos: Any,
    tau: float = 0.7,
    thread: bool = True,
) -> tuple[list[Any], npt.NDArray[np.float32]]:
    """The recurrence by hand in fp64 NumPy (exact here, so equal to fp32 bit for bit), one reference proposal per
    step keyed at position + d: the proposals and the final h. ``thread=False`` is the planted bug: every step
    starts from the state ``start`` gave instead of the previous step's."""
    e = model.embedding.double().cpu().numpy()
    w = model.projection.double().cpu().numpy()
    c = ctx.cpu().numpy()
    h0 = np.zeros((c.shape[0], e.shape[1]))
    for j in range(c.shape[1] - 1):
        h0 = h0 / 2 + e[c[:, j]]
    h, prev, props = h0, c[:, -1], []
    for d in range(depth):
        h = (h if thread else h0) / 2 + e[prev]
        with np.errstate(over="ignore"):
            p = propose((h @ w).astype(np.float32), temp, seed, rnd, pos + np.uint64(d), tau)
        props.append(p)
        prev = np.maximum(p.token, 0)
    return props, h.astype(np.float32)


def _check_against(d: Draft, props: list[Any]) -> None:
    for j, p in enumerate(props):
        for f, g in zip(FIELDS, ("token", "status", "ids", "tickets"), strict=True):
            assert_equal(getattr(d, f)[:, j].cpu().numpy(), getattr(p, g), f"{f} at depth {j}")


RECURRENT = [  # (vocab, hidden, shards, depth)
    (48, 8, 1, 5),  # one shard
    (40, 16, 3, 4),  # ragged shards, V > 32: a strict top-32 support
    (31, 2, 2, 3),  # V < 32: every ID in the support; H = 2
]


@pytest.mark.parametrize("path", ["greedy", "sampled"])
@pytest.mark.parametrize(("vocab", "hidden", "shards", "depth"), RECURRENT)
def test_recurrent_draft_equals_a_hand_rolled_loop(
    path: str, vocab: int, hidden: int, shards: int, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Greedy: the argmax per step (the T0 proposal); sampled: the reference proposal per step, keyed by (seed,
    round, position + d). The returned state is h after the depth-th step."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    model = RecurrentDrafter.random(vocab, hidden, seed=hidden, shards=shards, gain=1)
    ctx = torch.tensor(CTX)
    d, state = _run(TPDrafter(model, depth, backend="reference"), path, ctx)
    props, h = _oracle(model, ctx, depth, 0.0 if path == "greedy" else TEMP, SEED, ROUND, POS)
    _check_against(d, props)
    assert_equal(state.numpy(), h, "the state after the last step")


@pytest.mark.parametrize("path", ["greedy", "sampled"])
def test_the_oracle_tells_an_unthreaded_state(path: str) -> None:
    """The planted bug (each step from the start state) drafts other tokens in every case above: the comparison
    with the hand-rolled loop can fail."""
    temp = 0.0 if path == "greedy" else TEMP
    for vocab, hidden, shards, depth in RECURRENT:
        model = RecurrentDrafter.random(vocab, hidden, seed=hidden, shards=shards, gain=1)
        good, _ = _oracle(model, torch.tensor(CTX), depth, temp, SEED, ROUND, POS)
        bad, _ = _oracle(model, torch.tensor(CTX), depth, temp, SEED, ROUND, POS, thread=False)
        assert any((g.token != b.token).any() for g, b in zip(good, bad, strict=True)), (vocab, hidden, depth)


@pytest.mark.interpreter
def test_sampled_triton_backend_equals_the_reference_backend_for_a_stateful_drafter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    monkeypatch.setenv(SAMPLED_ENV, "1")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = RecurrentDrafter.random(48, 4, seed=9, shards=2, device=dev)
    args = (torch.tensor([[1, 3], [2, 2]], device=dev), 1.0, np.array([3, 4], dtype=np.uint64), 1, 5)
    got, got_state = TPDrafter(model, 2, backend="triton", tile=32).draft_sampled_with_state(*args)
    want, want_state = TPDrafter(model, 2, backend="reference").draft_sampled_with_state(*args)
    _same(got, want, "triton vs reference")
    assert_equal(got_state.cpu().numpy(), want_state.cpu().numpy(), "state")


# --------------------------------------------------------------------------------- the loop: calls and depth


class _Recorder:
    """A stateful drafter over a fixed [V, V] table (NaN rows fail a position), sharded, that records its calls; its
    state is the number of steps taken, as a tensor."""

    def __init__(self, table: npt.NDArray[np.float32], sizes: list[int]) -> None:
        self.table, self.sizes = torch.from_numpy(table), sizes
        self.contexts: list[Tensor] = []
        self.fed: list[Tensor] = []
        self.states: list[int] = []

    @property
    def vocab_size(self) -> int:
        return int(self.table.shape[1])

    def start(self, context: Tensor) -> Tensor:
        self.contexts.append(context.clone())
        zero: Tensor = torch.tensor(0)
        return zero

    def step(self, tokens: Tensor, state: Tensor) -> tuple[list[Tensor], Tensor]:
        self.fed.append(tokens.clone())
        self.states.append(int(state))
        return list(torch.split(self.table[tokens], self.sizes, dim=1)), state + 1


@pytest.mark.parametrize("path", ["greedy", "sampled"])
def test_start_once_then_depth_steps_fed_the_drafts(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The depth is the one fixed at construction whatever is drawn: a failed position (after token 5) is fed on
    as token 0 and drafting goes on; the state each step gets is the one the previous step returned."""
    monkeypatch.setenv(SAMPLED_ENV, "1")
    rng = np.random.default_rng(1)
    table = rng.normal(size=(12, 12)).astype(np.float32)
    table[5] = np.nan
    table[0, 5] = 9.0  # token 0 (a failed draft's stand-in) proposes 5 again in T0 rows
    model, depth = _Recorder(table, [5, 7]), 4
    ctx = torch.tensor([[3, 0], [7, 5], [1, 11], [2, 3]])
    d, state = _run(TPDrafter(model, depth, backend="reference"), path, ctx)
    assert len(model.contexts) == 1 and torch.equal(model.contexts[0], ctx)
    assert model.states == list(range(depth)) and int(state) == depth
    want_fed = [ctx[:, -1], *(d.tokens[:, j].clamp_min(0).long() for j in range(depth - 1))]
    assert_equal(torch.stack(model.fed).numpy(), torch.stack(want_fed).numpy(), "tokens fed to step")
    # row 1 (a T0 row on both paths): 5 proposes NaN, the failed draft is fed as 0, which proposes 5, and so on
    assert_equal(d.tokens[1].numpy(), np.array([-1, 5, -1, 5], dtype=np.int32), "row 1's tokens")
    assert_equal(d.status[1].numpy(), np.array([1, 0, 1, 0], dtype=np.int8), "row 1's status")


# ------------------------------------------------------------------------------------------------- the checks


class _Fixed:
    """A stateful model whose step returns the given value whatever it is fed."""

    def __init__(self, out: Any, vocab: int = 8) -> None:
        self.out, self._vocab = out, vocab

    @property
    def vocab_size(self) -> int:
        return self._vocab

    def start(self, context: Tensor) -> None:
        return None

    def step(self, tokens: Tensor, state: None) -> Any:
        return self.out


@pytest.mark.parametrize(
    ("out", "error", "text"),
    [
        (([torch.zeros(3, 8)], None), ValueError, r"\[2, V_r >= 1\]"),  # the wrong batch size
        (([torch.zeros(2, 5), torch.zeros(2, 2)], None), ValueError, "shards cover 7 IDs, vocab_size is 8"),
        ((torch.zeros(2, 9), None), ValueError, "cover 9 IDs, vocab_size is 8"),  # one tensor, the wrong vocabulary
        (([torch.zeros(2, 8, dtype=torch.float64)], None), TypeError, "float64"),
        ([torch.zeros(2, 8)], TypeError, r"model.step: expected a pair .* got list"),  # logits without the state
        ((torch.zeros(2, 8), None, None), TypeError, "model.step: expected a pair"),
    ],
)
def test_both_paths_check_the_stateful_output_alike(
    out: Any, error: type[Exception], text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SAMPLED_ENV, "1")
    drafter = TPDrafter(_Fixed(out), depth=2, backend="reference")
    ctx = torch.zeros((2, 1), dtype=torch.int64)
    with pytest.raises(error, match=text):
        drafter.draft(ctx)
    with pytest.raises(error, match=text):
        drafter.draft_sampled(ctx, 1.0, 0, 0, 0)


class _StepOnly:
    vocab_size = 8

    def step(self, tokens: Tensor, state: Any) -> Any:
        raise AssertionError("never called")


def test_the_model_kind_is_checked_when_the_drafter_is_built() -> None:
    with pytest.raises(TypeError, match=r"stateful drafter needs .* start\(context\)"):
        TPDrafter(_StepOnly(), 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model: expected a DraftModel"):
        TPDrafter(object(), 2)  # type: ignore[arg-type]
    model = RecurrentDrafter.random(8, 2)
    for bad, error in ((0, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="depth"):
            TPDrafter(model, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tile"):
        TPDrafter(model, 2, tile=48)
    drafter = TPDrafter(model, 3)
    assert drafter.model is model and drafter.draft(torch.zeros((2, 1), dtype=torch.int64)).tokens.shape == (2, 3)


@pytest.mark.parametrize("kind", ["token-only", "stateful"])
def test_the_sampled_gate_guards_both_kinds(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    markov = MarkovDrafter.random(8, 2)
    drafter = TPDrafter(markov if kind == "token-only" else StatefulMarkov(markov), depth=2)
    ctx = torch.zeros((1, 1), dtype=torch.int64)
    monkeypatch.delenv(SAMPLED_ENV, raising=False)
    for call in (drafter.draft_sampled, drafter.draft_sampled_with_state):
        with pytest.raises(SampledDraftingDisabled, match=SAMPLED_ENV):
            call(ctx, 1.0, 0, 0, 0)
    assert drafter.draft_with_state(ctx)[0].tokens.shape == (1, 2)  # the greedy path needs no gate
    monkeypatch.setenv(SAMPLED_ENV, "1")
    assert drafter.draft_sampled_with_state(ctx, 1.0, 0, 0, 0)[0].tokens.shape == (1, 2)


def test_the_greedy_path_of_a_stateful_drafter_imports_no_kernel_code() -> None:
    code = textwrap.dedent(
        """
        import sys
        import torch
        from pp3.drafter import TPDrafter
        from pp3.testing.markov import MarkovDrafter
        from pp3.testing.stateful import RecurrentDrafter, StatefulMarkov
        ctx = torch.zeros((3, 2), dtype=torch.int64)
        for m in (RecurrentDrafter.random(64, 4, shards=2), StatefulMarkov(MarkovDrafter.random(64, 4))):
            d, state = TPDrafter(m, depth=5).draft_with_state(ctx)
            assert d.tokens.shape == (3, 5)
        print("BANNED", [m for m in sys.modules if m.startswith("pp3.kernels")])
        print("TRITON", "triton" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "BANNED []" in out, out
    assert "TRITON False" in out, out
