"""Drafter integration: ``TPDrafter`` runs a fixed-depth proposal loop over a (possibly vocabulary-sharded) drafter.

A drafter is either a ``DraftModel`` (token-only: the whole context in, the next position's logits out) or a
``StatefulDraftModel`` (``start(context) -> state``, then ``step(tokens, state) -> (logits, state)`` per position:
a drafter with hidden states or a KV cache, EAGLE- or MTP-style). Both run through one loop: a ``DraftModel`` is
driven through an internal adapter whose state is the context fed so far.

``draft`` is the ordinary greedy path: per position the argmax of the drafter logits (ties to the lower ID), exactly
the selector's T0 output (SPEC.md §3, §4.2, §7: slot 0 = (g, 2^24)), with no host synchronisation, so it can be
captured in a CUDA graph. On CUDA tensors (or with ``backend="triton"``) it runs the greedy selector kernel
(``pp3.kernels.greedy``: one pass, two launches per position); on the CPU plain torch (``greedy_select``), importing
no kernel code.

``draft_sampled`` proposes with the selector (SPEC.md §2-§8: top-32 tickets and a keyed Philox draw). It is admitted
only when the environment variable ``DSPARK_SAMPLED_TOP32=1`` is set; otherwise it raises
``SampledDraftingDisabled`` naming the variable. Draft ``d`` of a row is keyed by the row's seed, the round, and its
absolute position ``position + d``. On CUDA tensors it runs the Triton selector (imported on first use); on the CPU
the NumPy reference (``backend="triton"`` forces the kernels, e.g. under ``TRITON_INTERPRET=1``).

``draft_with_state`` and ``draft_sampled_with_state`` are the same two paths returning ``(Draft, state)``: the
drafter's state after its last step, for a caller that keeps it (e.g. a KV cache to roll back to the accepted
tokens).

The depth is fixed when the drafter is built, before anything is drawn. Both paths return a ``Draft`` whose fields
are the draft inputs of the verifier (``pp3.reference.verify``, ``pp3.kernels.verify``; SPEC.md §11.2). A failed
position (NaN, +inf or all -inf logits) has token -1; the next position is fed token 0 in its place, and the
verifier ignores every draft from the first failed one on (§11.3).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import torch

from pp3.reference._constants import DEFAULT_TAU, EMPTY_ID, TICKETS, K, Status

SAMPLED_ENV = "DSPARK_SAMPLED_TOP32"
Backend = Literal["auto", "triton", "reference"]


class SampledDraftingDisabled(RuntimeError):
    """``draft_sampled`` was called without ``DSPARK_SAMPLED_TOP32=1`` in the environment."""


Logits = torch.Tensor | Sequence[torch.Tensor]  # [B, V] logits, or contiguous vocabulary shards [B, V_r] in ID order
S = TypeVar("S")


class DraftModel(Protocol):
    """A token-only drafter: maps the context so far to the next position's logits, whole or as vocabulary shards."""

    @property
    def vocab_size(self) -> int: ...

    def __call__(self, tokens: torch.Tensor) -> Logits:
        """``tokens`` [B, t] int64 (its last column is the previous token) -> [B, V] logits, or contiguous
        vocabulary shards [B, V_r] in ID order that tile 0 .. V-1."""
        ...


@runtime_checkable
class StatefulDraftModel(Protocol[S]):
    """A drafter that carries its own state between positions (hidden states, a KV cache), one token per step.

    ``TPDrafter`` calls ``start`` once per draft and then ``step`` exactly ``depth`` times; each step consumes one
    token per row and gives the logits of the next position, so ``step`` is the only call that yields logits.
    The state is opaque to pp3: it is passed back as it was returned. A model with a ``step`` attribute is driven
    through this protocol (``TPDrafter`` checks that it has ``start`` too).
    """

    @property
    def vocab_size(self) -> int: ...

    def start(self, context: torch.Tensor) -> S:
        """``context`` [B, t] int64, t >= 1 -> the state before drafting: the context consumed except its last
        column ``context[:, -1]``, which is the first step's input (for t = 1, nothing consumed)."""
        ...

    def step(self, tokens: torch.Tensor, state: S) -> tuple[Logits, S]:
        """``tokens`` [B] int64, one per row (the context's last token, then each draft in turn; a failed draft is
        fed as token 0) -> (the next position's [B, V] logits or vocabulary shards, the state with ``tokens``
        consumed)."""
        ...


class _TokenOnly:
    """A ``DraftModel`` as a ``StatefulDraftModel``: the state is the context fed so far, [B, n] int64, so the model
    sees exactly the contexts it would see fed with ``torch.cat`` position by position."""

    def __init__(self, model: DraftModel) -> None:
        self.model = model

    @property
    def vocab_size(self) -> int:
        return self.model.vocab_size

    def start(self, context: torch.Tensor) -> torch.Tensor:
        return context[:, :-1]

    def step(self, tokens: torch.Tensor, state: torch.Tensor) -> tuple[Logits, torch.Tensor]:
        ctx = torch.cat([state, tokens[:, None]], dim=1)
        return self.model(ctx), ctx


def _as_stateful(model: Any) -> StatefulDraftModel[Any]:
    """The model as the loop drives it: a stateful model as it is, a token-only one through ``_TokenOnly``."""
    if hasattr(model, "step"):
        if not isinstance(model, StatefulDraftModel) or not (callable(model.start) and callable(model.step)):
            raise TypeError("model: a stateful drafter needs a vocab_size, start(context) and step(tokens, state)")
        return model
    if not callable(model) or not hasattr(model, "vocab_size"):
        raise TypeError(
            "model: expected a DraftModel (vocab_size, __call__(tokens)) or a StatefulDraftModel "
            "(vocab_size, start(context), step(tokens, state))"
        )
    return _TokenOnly(model)


@dataclasses.dataclass(frozen=True)
class Draft:
    """A depth-D proposal for B rows: the draft half of SPEC.md §11.2."""

    tokens: torch.Tensor  # [B, D] int32, -1 at failed positions
    status: torch.Tensor  # [B, D] int8, SPEC.md §3
    ids: torch.Tensor  # [B, D, K] int32 slot IDs (-1 empty)
    tickets: torch.Tensor  # [B, D, K] int32 slot tickets (each OK position sums to 2^24)

    def numpy(self) -> dict[str, np.ndarray[Any, Any]]:
        """The fields as NumPy arrays, keyed like the arguments of ``pp3.reference.verify``."""
        return {
            "draft_tokens": self.tokens.cpu().numpy(),
            "draft_status": self.status.cpu().numpy(),
            "draft_ids": self.ids.cpu().numpy(),
            "draft_tickets": self.tickets.cpu().numpy(),
        }


def sampled_enabled() -> bool:
    """Whether ``DSPARK_SAMPLED_TOP32=1`` is set (read at every call, not cached)."""
    return os.environ.get(SAMPLED_ENV) == "1"


_LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # the selector's formats (SPEC.md §2.1)


def _as_shards(out: torch.Tensor | Sequence[torch.Tensor], vocab: int, b: int) -> list[torch.Tensor]:
    """The model's output for ``b`` rows, checked the same way for both paths and both backends: [B, V] logits or
    contiguous non-empty shards [B, V_r] that cover ``vocab`` IDs, in the selector's formats."""
    shards = [out] if isinstance(out, torch.Tensor) else list(out)
    if not shards or not all(isinstance(s, torch.Tensor) for s in shards):
        raise TypeError("model output: expected [B, V] logits or a non-empty list of [B, V_r] tensors")
    for i, s in enumerate(shards):
        if s.dtype not in _LOGIT_DTYPES:
            raise TypeError(f"model output (shard {i}): expected float32, float16 or bfloat16, got {s.dtype}")
        if s.dim() != 2 or s.shape[0] != b or s.shape[1] < 1:
            raise ValueError(f"model output (shard {i}): expected shape [{b}, V_r >= 1] for the context's {b} rows, "
                             f"got {tuple(s.shape)}")
    if sum(s.shape[1] for s in shards) != vocab:
        raise ValueError(f"model output: shards cover {sum(s.shape[1] for s in shards)} IDs, vocab_size is {vocab}")
    return shards


def greedy_select(shards: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC.md §3 and §4.2 for the greedy path: (token int32 [B], status int8 [B]) over vocabulary shards.

    ``torch.max(x, dim=1)`` returns the index of the *first* maximal value (documented for CPU and CUDA; -0.0 and
    +0.0 compare equal), so ties go to the lower ID within a shard; across shards the first shard holding the
    maximum wins (``torch.max`` over the stacked shard maxima), i.e. the lower ID again. No host synchronisation.
    The shards are fp32, fp16 or bf16 (the selector's formats: SPEC.md §2.1), whose values compare as fp32.
    """
    if not shards:
        raise ValueError("shards: need at least one [B, V_r] tensor")
    for n, shard in enumerate(shards):
        if not isinstance(shard, torch.Tensor) or shard.dtype not in _LOGIT_DTYPES:
            what = shard.dtype if isinstance(shard, torch.Tensor) else type(shard).__name__
            raise TypeError(f"shards[{n}]: expected a float32, float16 or bfloat16 torch.Tensor, got {what}")
        if shard.dim() != 2 or shard.shape[0] != shards[0].shape[0] or shard.shape[1] < 1:
            raise ValueError(
                f"shards[{n}]: expected [B, V_r >= 1] with the rows of shards[0], got {tuple(shard.shape)}"
            )
    maxima, index = [], []
    offset = 0
    for s in shards:
        v, i = torch.max(s, dim=1)  # one pass per shard, in the logits' own dtype (comparisons are exact)
        maxima.append(v.float())  # fp16 / bf16 -> fp32 is exact
        index.append(i + offset)
        offset += s.shape[1]
    vals = torch.stack(maxima, dim=1)
    # torch.max propagates NaN, so a shard's maximum alone tells the row's class (§3, in precedence order): NaN if
    # the shard holds a NaN, else +inf if it holds a +inf, else -inf iff every entry is -inf (zero mass).
    any_nan = torch.isnan(vals).any(1)
    any_pinf = (vals == float("inf")).any(1)
    any_fin = torch.isfinite(vals).any(1)
    # NaN rows fail below; zero their maxima so the shard choice stays defined (infinities are kept as they are).
    which = torch.max(torch.where(torch.isnan(vals), 0.0, vals), dim=1).indices
    token = torch.gather(torch.stack(index, dim=1), 1, which[:, None])[:, 0]
    status = torch.where(
        any_nan,
        int(Status.NAN_LOGIT),
        torch.where(any_pinf, int(Status.POS_INF_LOGIT), torch.where(any_fin, int(Status.OK), int(Status.ZERO_MASS))),
    ).to(torch.int8)
    token = torch.where(status == 0, token, EMPTY_ID).to(torch.int32)
    return token, status


def _checked_tile(tile: Any, vocab: int) -> int:
    """The selector's tile rules on every backend (the reference ignores the tile, but a bad one is refused alike).
    Imported here: the greedy path (``tile=None``) imports no kernel code."""
    from pp3.kernels import checks

    return checks.tile(tile, vocab)


class TPDrafter:
    """A fixed-depth drafting loop around a ``DraftModel`` or a ``StatefulDraftModel`` (whole or vocabulary-sharded
    logits). ``model`` is kept as given; a model with a ``step`` attribute is stateful, any other is token-only.
    ``tile`` (None: automatic) is the kernels' tile where they have one: the greedy selector's, and on sharded logits
    the tile selector's that sampled drafting runs; sampled drafting on one [B, V] tensor runs the segment selector,
    which has none (the reference backend has none either; the tile is checked on every backend alike)."""

    def __init__(
        self,
        model: DraftModel | StatefulDraftModel[Any],
        depth: int,
        *,
        tau: float = DEFAULT_TAU,
        backend: Backend = "auto",
        tile: int | None = None,
    ) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int):
            raise TypeError(f"depth: expected an int >= 1, got {type(depth).__name__}")
        if depth < 1:
            raise ValueError(f"depth: expected an int >= 1, got {depth!r}")
        if backend not in ("auto", "triton", "reference"):
            raise ValueError(f"backend: expected 'auto', 'triton' or 'reference', got {backend!r}")
        from pp3.reference._args import as_tau

        self.model = model
        self._stateful = _as_stateful(model)
        self.depth = depth
        self.tau = float(as_tau(tau))
        self.backend: Backend = backend
        self.tile = None if tile is None else _checked_tile(tile, model.vocab_size)

    # -------------------------------------------------------------------------------------------- greedy path
    def draft(self, context: torch.Tensor) -> Draft:
        """The greedy path: ``depth`` argmax steps from ``context`` [B, t] (int64 token IDs, t >= 1)."""
        return self.draft_with_state(context)[0]

    def draft_with_state(self, context: torch.Tensor) -> tuple[Draft, Any]:
        """``draft``, and the drafter's state after its ``depth`` steps (the context and every draft but the last
        consumed; for a token-only model the context it was last fed, [B, t + depth - 1] int64)."""
        (tokens, status, ids, tickets), state = self._run(context, _GreedySteps(self.backend, self.tile))
        return Draft(tokens=tokens, status=status, ids=ids, tickets=tickets), state

    # ------------------------------------------------------------------------------------------- sampled path
    def draft_sampled(
        self,
        context: torch.Tensor,
        target_temperature: Any,
        seed: Any,
        round: Any,
        position: Any,
    ) -> Draft:
        """The sampled path (needs ``DSPARK_SAMPLED_TOP32=1``): ``depth`` selector steps; draft d of row b is keyed
        by (seed[b], round[b], position[b] + d) with the proposal domain (SPEC.md §8). The keys are checked as
        ``pp3.kernels.propose`` checks them, on either backend: tensors of seed, round and position int64 (uint64
        bits) or uint64, a temperature tensor floating-point, each of shape [] or [B] on the logits' device; or
        ints, floats, sequences and NumPy arrays."""
        return self.draft_sampled_with_state(context, target_temperature, seed, round, position)[0]

    def draft_sampled_with_state(
        self,
        context: torch.Tensor,
        target_temperature: Any,
        seed: Any,
        round: Any,
        position: Any,
    ) -> tuple[Draft, Any]:
        """``draft_sampled``, and the drafter's state after its ``depth`` steps (as ``draft_with_state``)."""
        if not sampled_enabled():
            raise SampledDraftingDisabled(
                f"draft_sampled is disabled: set the environment variable {SAMPLED_ENV}=1 to admit sampled "
                "top-32 drafting (the greedy path is draft())"
            )
        select = _SampledSteps(target_temperature, seed, round, position, self.tau, self.tile, self.backend)
        (tokens, status, ids, tickets), state = self._run(context, select)
        return Draft(tokens=tokens, status=status, ids=ids, tickets=tickets), state

    # ------------------------------------------------------------------------------------------- the one loop
    def _run(self, context: Any, select: Select) -> tuple[list[torch.Tensor], Any]:
        """``depth`` steps of the model from ``context``, each position's shards through ``select``: its fields
        stacked over the depth ([B, D, ...]), and the model's last state. The first field is the token; a failed
        position (token -1) is fed as token 0."""
        ctx = self._check_context(context)
        b = ctx.shape[0]
        state = self._stateful.start(ctx)
        prev = ctx[:, -1]
        per_depth: list[tuple[torch.Tensor, ...]] = []
        for d in range(self.depth):
            out = self._stateful.step(prev, state)
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError(f"model.step: expected a pair (logits or shards, state), got {type(out).__name__}")
            logits, state = out
            fields = select(_as_shards(logits, self._stateful.vocab_size, b), d)
            per_depth.append(fields)
            prev = fields[0].clamp_min(0).to(torch.int64)
        return [torch.stack(f, dim=1) for f in zip(*per_depth, strict=True)], state

    @staticmethod
    def _check_context(context: Any) -> torch.Tensor:
        if not isinstance(context, torch.Tensor) or context.dtype not in (torch.int32, torch.int64):
            raise TypeError("context: expected an int32 or int64 torch.Tensor of token IDs")
        if context.dim() != 2 or context.shape[0] < 1 or context.shape[1] < 1:
            raise ValueError(f"context: expected shape [B, t] with B, t >= 1, got {tuple(context.shape)}")
        return context.long()


Step = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # token, status, ids, tickets of one depth
Select = Callable[[list[torch.Tensor], int], tuple[torch.Tensor, ...]]  # one depth's shards -> its fields, token first


class _GreedySteps:
    """The greedy path's selection, one call per depth (unkeyed: the depth is not used): the greedy selector kernel
    on CUDA tensors (or with backend "triton"), plain torch otherwise."""

    def __init__(self, backend: Backend, tile: int | None) -> None:
        self.backend, self.tile = backend, tile

    def __call__(self, shards: list[torch.Tensor], d: int) -> Step:
        if self.backend == "triton" or (self.backend == "auto" and shards[0].is_cuda):
            from pp3.kernels import buffers, checks, launchers  # the kernels, imported on first use
            from pp3.kernels.config import DEFAULT_LAUNCH

            xs, tile = checks.shards(shards, self.tile)  # the model's outputs of this depth
            p = launchers.greedy(xs, tile, DEFAULT_LAUNCH, buffers.new_proposal(xs[0].shape[0], xs[0].device))
            return p.token, p.status, p.ids, p.tickets
        token, status = greedy_select(shards)
        b = token.shape[0]
        ids = torch.full((b, K), EMPTY_ID, dtype=torch.int32, device=token.device)
        ids[:, 0] = token  # §7 T0: slot 0 = (g, 2^24); failed rows: every slot empty
        tickets = torch.zeros((b, K), dtype=torch.int32, device=token.device)
        tickets[:, 0] = torch.where(status == 0, TICKETS, 0).to(torch.int32)
        return token, status, ids, tickets


class _SampledSteps:
    """The sampled path's selection: the backend and the keys are settled at depth 0, from the model's first output
    (its rows and device), then one selector call per depth."""

    def __init__(
        self, temp: Any, seed: Any, round_: Any, position: Any, tau: float, tile: int | None, backend: Backend
    ) -> None:
        self.keys = (temp, seed, round_, position)
        self.tau, self.tile, self.backend = tau, tile, backend
        self.steps: _TritonSteps | _ReferenceSteps | None = None

    def __call__(self, shards: list[torch.Tensor], d: int) -> Step:
        if self.steps is None:
            use_triton = self.backend == "triton" or (self.backend == "auto" and shards[0].is_cuda)
            self.steps = (_TritonSteps if use_triton else _ReferenceSteps)(
                *self.keys, self.tau, self.tile, shards[0].shape[0], shards[0].device
            )
        return self.steps(shards, d)


class _TritonSteps:
    """The selector kernels, one call per depth; the keys are checked and moved to the device once."""

    def __init__(
        self, temp: Any, seed: Any, round_: Any, position: Any, tau: float, tile: int | None, b: int,
        device: torch.device,
    ) -> None:
        from pp3.kernels import checks  # the sampled kernels' code, imported on first use

        self.keys = checks.row_keys(temp, seed, round_, position, b, device)
        self.tau = tau
        self.tile = tile

    def __call__(self, shards: list[torch.Tensor], d: int) -> Step:
        from pp3.kernels import buffers, checks, launchers
        from pp3.kernels.config import DEFAULT_LAUNCH

        xs, tile = checks.shards(shards, self.tile)  # the model's outputs of this depth
        out = buffers.new_proposal(xs[0].shape[0], xs[0].device)
        p = launchers.propose(xs, tile, self.keys.at(d), self.tau, DEFAULT_LAUNCH, out)
        return p.token, p.status, p.ids, p.tickets


class _ReferenceSteps:
    """The NumPy reference, one call per depth; the keys are checked once, by the kernels' own checks (one rule for
    both backends: key tensors int64 or uint64, temperature tensors floating-point, on the logits' device; ints,
    floats, sequences and NumPy arrays by the reference's rules), and brought to the host once."""

    def __init__(
        self, temp: Any, seed: Any, round_: Any, position: Any, tau: float, tile: int | None, b: int,
        device: torch.device,
    ) -> None:
        from pp3.kernels import checks  # torch-side checks only (no triton)

        keys = checks.row_keys(temp, seed, round_, position, b, device)
        self.temp = keys.temperature.cpu().numpy()
        self.seed, self.round, self.position = (k.cpu().numpy().view(np.uint64)
                                                for k in (keys.seed, keys.round, keys.position))
        self.tau = tau

    def __call__(self, shards: list[torch.Tensor], d: int) -> Step:
        from pp3.reference import bf16_bits_to_float32, propose

        x = torch.cat(list(shards), dim=1)
        if x.dtype == torch.bfloat16:
            logits = bf16_bits_to_float32(x.cpu().view(torch.int16).numpy().view(np.uint16))
        else:
            logits = x.cpu().numpy()
        with np.errstate(over="ignore"):
            p = propose(logits, self.temp, self.seed, self.round, self.position + np.uint64(d), self.tau)
        dev = x.device
        return (
            torch.from_numpy(p.token).to(dev),
            torch.from_numpy(p.status).to(dev),
            torch.from_numpy(p.ids).to(dev),
            torch.from_numpy(p.tickets).to(dev),
        )
