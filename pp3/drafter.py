"""Drafter integration: ``TPDrafter`` runs a fixed-depth proposal loop over a (possibly vocabulary-sharded) drafter.

``draft`` is the ordinary greedy path: per position the argmax of the drafter logits (ties to the lower ID), in
plain torch, with no host synchronisation, so it can be captured in a CUDA graph. It is exactly the selector's T0
output (SPEC.md §4.2, §7: slot 0 = (g, 2^24)), and it imports no sampled-kernel code.

``draft_sampled`` proposes with the selector (SPEC.md §2-§8: top-32 tickets and a keyed Philox draw). It is admitted
only when the environment variable ``DSPARK_SAMPLED_TOP32=1`` is set; otherwise it raises
``SampledDraftingDisabled`` naming the variable. Draft ``d`` of a row is keyed by the row's seed, the round, and its
absolute position ``position + d``. On CUDA tensors it runs the Triton selector (imported on first use); on the CPU
the NumPy reference (``backend="triton"`` forces the kernels, e.g. under ``TRITON_INTERPRET=1``).

The depth is fixed when the drafter is built, before anything is drawn. Both paths return a ``Draft`` whose fields
are the inputs of ``pp3.accept`` (SPEC.md §11.2). A failed position (NaN, +inf or all -inf logits) has token
-1; the next position is fed token 0 in its place, and the verifier ignores every draft from the first failed one
on (§11.3).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import torch

from pp3.reference._constants import DEFAULT_TAU, EMPTY_ID, TICKETS, K, Status

SAMPLED_ENV = "DSPARK_SAMPLED_TOP32"
Backend = Literal["auto", "triton", "reference"]
T = TypeVar("T")


class SampledDraftingDisabled(RuntimeError):
    """``draft_sampled`` was called without ``DSPARK_SAMPLED_TOP32=1`` in the environment."""


class DraftModel(Protocol):
    """A drafter: maps the context so far to the next position's logits, whole or as vocabulary shards."""

    @property
    def vocab_size(self) -> int: ...

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor | Sequence[torch.Tensor]:
        """``tokens`` [B, t] int64 (its last column is the previous token) -> [B, V] logits, or contiguous
        vocabulary shards [B, V_r] in ID order that tile 0 .. V-1."""
        ...


@dataclasses.dataclass(frozen=True)
class Draft:
    """A depth-D proposal for B rows: the draft half of SPEC.md §11.2."""

    tokens: torch.Tensor  # [B, D] int32, -1 at failed positions
    status: torch.Tensor  # [B, D] int8, SPEC.md §3
    ids: torch.Tensor  # [B, D, K] int32 slot IDs (-1 empty)
    tickets: torch.Tensor  # [B, D, K] int32 slot tickets (each OK position sums to 2^24)

    def numpy(self) -> dict[str, np.ndarray[Any, Any]]:
        """The fields as NumPy arrays, keyed like the arguments of ``pp3.accept.reference.verify``."""
        return {
            "draft_tokens": self.tokens.cpu().numpy(),
            "draft_status": self.status.cpu().numpy(),
            "draft_ids": self.ids.cpu().numpy(),
            "draft_tickets": self.tickets.cpu().numpy(),
        }


def sampled_enabled() -> bool:
    """Whether ``DSPARK_SAMPLED_TOP32=1`` is set (read at every call, not cached)."""
    return os.environ.get(SAMPLED_ENV) == "1"


def _as_shards(out: torch.Tensor | Sequence[torch.Tensor], vocab: int) -> list[torch.Tensor]:
    shards = [out] if isinstance(out, torch.Tensor) else list(out)
    if not shards or any(s.dim() != 2 for s in shards):
        raise ValueError("drafter: expected [B, V] logits or a non-empty list of [B, V_r] shards")
    if sum(s.shape[1] for s in shards) != vocab:
        raise ValueError(f"drafter: shards cover {sum(s.shape[1] for s in shards)} IDs, vocab_size is {vocab}")
    return shards


def greedy_select(shards: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC.md §3 and §4.2 for the greedy path: (token int32 [B], status int8 [B]) over vocabulary shards.

    ``torch.max(x, dim=1)`` returns the index of the *first* maximal value (documented for CPU and CUDA; -0.0 and
    +0.0 compare equal), so ties go to the lower ID within a shard; across shards the first shard holding the
    maximum wins (``torch.max`` over the stacked shard maxima), i.e. the lower ID again. No host synchronisation.
    """
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


class TPDrafter:
    """A fixed-depth drafting loop around a ``DraftModel`` (whole or vocabulary-sharded logits)."""

    def __init__(
        self,
        model: DraftModel,
        depth: int,
        *,
        tau: float = DEFAULT_TAU,
        backend: Backend = "auto",
        tile: int | None = None,
    ) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth: expected an int >= 1, got {depth!r}")
        if backend not in ("auto", "triton", "reference"):
            raise ValueError(f"backend: expected 'auto', 'triton' or 'reference', got {backend!r}")
        from pp3.reference._args import as_tau

        self.model = model
        self.depth = depth
        self.tau = float(as_tau(tau))
        self.backend: Backend = backend
        self.tile = tile

    # -------------------------------------------------------------------------------------------- greedy path
    def draft(self, context: torch.Tensor) -> Draft:
        """The greedy path: ``depth`` argmax steps from ``context`` [B, t] (int64 token IDs, t >= 1)."""
        ctx = self._check_context(context)
        b = ctx.shape[0]
        toks, stats = [], []
        for _ in range(self.depth):
            token, status = greedy_select(_as_shards(self.model(ctx), self.model.vocab_size))
            toks.append(token)
            stats.append(status)
            ctx = torch.cat([ctx, token.clamp_min(0).to(ctx.dtype)[:, None]], dim=1)
        tokens = torch.stack(toks, dim=1)
        status = torch.stack(stats, dim=1)
        ids = torch.full((b, self.depth, K), EMPTY_ID, dtype=torch.int32, device=ctx.device)
        tickets = torch.zeros((b, self.depth, K), dtype=torch.int32, device=ctx.device)
        ids[:, :, 0] = tokens  # §7 T0: slot 0 = (g, 2^24); failed rows: every slot empty
        tickets[:, :, 0] = torch.where(status == 0, TICKETS, 0).to(torch.int32)
        return Draft(tokens=tokens, status=status, ids=ids, tickets=tickets)

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
        by (seed[b], round[b], position[b] + d) with the proposal domain (SPEC.md §8)."""
        if not sampled_enabled():
            raise SampledDraftingDisabled(
                f"draft_sampled is disabled: set the environment variable {SAMPLED_ENV}=1 to admit sampled "
                "top-32 drafting (the greedy path is draft())"
            )
        ctx = self._check_context(context)
        b = ctx.shape[0]
        first = _as_shards(self.model(ctx), self.model.vocab_size)
        use_triton = self.backend == "triton" or (self.backend == "auto" and first[0].is_cuda)
        step = self._triton_step if use_triton else self._reference_step
        pos = self._positions(position, b, ctx.device, use_triton)
        toks, stats, idss, tixs = [], [], [], []
        shards = first
        for d in range(self.depth):
            if d:
                shards = _as_shards(self.model(ctx), self.model.vocab_size)
            token, status, ids, tickets = step(shards, target_temperature, seed, round, pos, d)
            toks.append(token)
            stats.append(status)
            idss.append(ids)
            tixs.append(tickets)
            ctx = torch.cat([ctx, token.clamp_min(0).to(ctx.dtype)[:, None]], dim=1)
        return Draft(
            tokens=torch.stack(toks, 1),
            status=torch.stack(stats, 1),
            ids=torch.stack(idss, 1),
            tickets=torch.stack(tixs, 1),
        )

    def _positions(self, position: Any, b: int, device: torch.device, on_device: bool) -> Any:
        """Row positions: an int64 tensor of uint64 bits (device path) or a uint64 array (reference path)."""
        from pp3.reference._args import as_uint64_rows

        if isinstance(position, torch.Tensor):
            if position.dtype not in (torch.int64, torch.uint64):
                raise TypeError(f"position: expected an int64 or uint64 tensor (uint64 bits), got {position.dtype}")
            bits = position.view(torch.int64).reshape(-1)
            if bits.numel() == 1:
                bits = bits.expand(b)
            if tuple(bits.shape) != (b,):
                raise ValueError(f"position: expected shape ({b},), got {tuple(position.shape)}")
            return bits.to(device) if on_device else bits.cpu().numpy().view(np.uint64)
        arr = as_uint64_rows("position", position, b)
        return torch.from_numpy(arr.view(np.int64).copy()).to(device) if on_device else arr

    def _triton_step(
        self, shards: list[torch.Tensor], temp: Any, seed: Any, round_: Any, pos: torch.Tensor, d: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        from pp3.kernels.select import DEFAULT_TILE, propose_sharded  # the sampled kernels, imported on first use

        # int64 addition wraps like the uint64 position arithmetic (mod 2^64) on every torch device.
        p = propose_sharded(shards, temp, seed, round_, pos + d, self.tau, tile=self.tile or DEFAULT_TILE)
        return p.token, p.status, p.ids, p.tickets

    def _reference_step(
        self, shards: list[torch.Tensor], temp: Any, seed: Any, round_: Any, pos: np.ndarray[Any, Any], d: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        from pp3.reference import bf16_bits_to_float32, propose

        x = torch.cat(list(shards), dim=1)
        dev = x.device
        if x.dtype == torch.bfloat16:
            logits = bf16_bits_to_float32(x.cpu().view(torch.int16).numpy().view(np.uint16))
        else:
            logits = x.cpu().numpy()

        def host(v: Any) -> Any:
            return v.cpu().numpy() if isinstance(v, torch.Tensor) else v

        s, r = host(seed), host(round_)
        if isinstance(s, np.ndarray) and s.dtype == np.int64:
            s = s.view(np.uint64)
        if isinstance(r, np.ndarray) and r.dtype == np.int64:
            r = r.view(np.uint64)
        with np.errstate(over="ignore"):
            p = propose(logits, host(temp), s, r, pos + np.uint64(d), self.tau)
        return (
            torch.from_numpy(p.token).to(dev),
            torch.from_numpy(p.status).to(dev),
            torch.from_numpy(p.ids).to(dev),
            torch.from_numpy(p.tickets).to(dev),
        )

    @staticmethod
    def _check_context(context: Any) -> torch.Tensor:
        if not isinstance(context, torch.Tensor) or context.dtype not in (torch.int32, torch.int64):
            raise TypeError("context: expected an int32 or int64 torch.Tensor of token IDs")
        if context.dim() != 2 or context.shape[0] < 1 or context.shape[1] < 1:
            raise ValueError(f"context: expected shape [B, t] with B, t >= 1, got {tuple(context.shape)}")
        return context.long()


def cuda_graph(fn: Callable[[], T], warmup: int = 2) -> tuple[Callable[[], None], T]:
    """Capture ``fn`` (e.g. a whole depth-D ``draft`` or ``draft_sampled`` call on device tensors) in one CUDA graph.

    Returns (replay, outputs): ``replay()`` re-runs every kernel of the loop (projection and selector) on the same
    buffers, and ``outputs`` are the static tensors it refreshes. Inputs (context, seeds, round, positions) must be
    device tensors that the caller updates in place between replays. Warm-up runs on a side stream first, so that
    one-time work (Triton compilation, constant tables) happens outside the capture.
    """
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph.replay, out
