"""pp3's kernels as PyTorch custom operators (``torch.ops.pp3.*``), for engines that compile and capture their step.

Each operator is the launcher of the same name in ``pp3.kernels`` (same checks, same kernels, same bits), registered
with ``torch.library.custom_op`` and a fake implementation, so ``torch.compile(fullgraph=True)`` treats it as one opaque
node whose output shapes and dtypes it knows without running it. A fake implementation runs the checks of its launcher
(``pp3.kernels.select.propose_args`` and the like: dtypes, shapes, devices, and which outputs share memory, all read
from the tensors' metadata, so they hold for fake and meta tensors too; a fake tensor has no memory, so the fake
compares storage objects where the operator compares addresses: ``pp3.kernels.checks.disjoint``), then returns what the
launcher would allocate: a call the launcher refuses raises the same exception under tracing, and a call with a tensor
on ``meta`` (which the dispatcher sends to the fake implementation) is refused as the launcher refuses it.
Per-row keys are tensors here (int64 tensors of uint64 bits; fp32 temperatures), so a compiled or captured step
makes no host-to-device copy; the launchers read no device memory on the host, so no operator synchronises.

Operators (``Tensor`` outputs in the order of the ``Proposal`` / ``Candidates`` / ``Verdict`` fields):

* ``pp3::propose(logits, target_temperature, seed, round, position, tau) -> (status, token, ids, tickets)`` (the
  default selector, the segment selector, which has no tile)
* ``pp3::propose_out(..., status!, token!, ids!, tickets!)``: the same into caller-owned buffers
* ``pp3::greedy(logits, tile) -> (status, token, ids, tickets)`` and ``pp3::greedy_out(logits, status!, token!,
  ids!, tickets!, tile)``: the greedy selector, for calls whose every row is greedy
* ``pp3::tile_candidates(logits, id_offset, tile) -> (keys, flags)`` and
  ``pp3::finalize(keys, flags, target_temperature, seed, round, position, vocab_size, tau) -> (status, token, ids,
  tickets)``:
  the two launches on their own (the vocabulary-parallel path)
* ``pp3::verify(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets, seed,
  round, position, tile) -> (status, accepted, tokens)`` and ``pp3::verify_out(..., status!, accepted!, tokens!)``

Importing this module imports the kernels (Triton).
"""

from __future__ import annotations

import torch
from torch import Tensor

from pp3.kernels import accept, buffers, select
from pp3.kernels.config import DEFAULT_LAUNCH
from pp3.reference._constants import DEFAULT_TAU

__all__ = ["finalize", "greedy", "greedy_out", "propose", "propose_out", "tile_candidates", "verify", "verify_out"]


def _fields(p: buffers.Proposal) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return p.status, p.token, p.ids, p.tickets


def _out(status: Tensor, token: Tensor, ids: Tensor, tickets: Tensor) -> buffers.Proposal:
    return buffers.Proposal(status=status, token=token, ids=ids, tickets=tickets)


# ------------------------------------------------------------------------------------------------------ selector


@torch.library.custom_op("pp3::propose", mutates_args=())
def propose(
    logits: Tensor,
    target_temperature: Tensor,
    seed: Tensor,
    round: Tensor,
    position: Tensor,
    tau: float = DEFAULT_TAU,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _fields(select.propose(logits, target_temperature, seed, round, position, tau))


@propose.register_fake
def _(logits: Tensor, target_temperature: Tensor, seed: Tensor, round: Tensor, position: Tensor,
      tau: float = DEFAULT_TAU) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    args = select.propose_args([logits], target_temperature, seed, round, position, tau, None, DEFAULT_LAUNCH, None,
                               "logits")
    return _fields(args[-1])


@torch.library.custom_op("pp3::propose_out", mutates_args=("status", "token", "ids", "tickets"))
def propose_out(
    logits: Tensor,
    target_temperature: Tensor,
    seed: Tensor,
    round: Tensor,
    position: Tensor,
    status: Tensor,
    token: Tensor,
    ids: Tensor,
    tickets: Tensor,
    tau: float = DEFAULT_TAU,
) -> None:
    select.propose(logits, target_temperature, seed, round, position, tau, out=_out(status, token, ids, tickets))


@propose_out.register_fake
def _(logits: Tensor, target_temperature: Tensor, seed: Tensor, round: Tensor, position: Tensor, status: Tensor,
      token: Tensor, ids: Tensor, tickets: Tensor, tau: float = DEFAULT_TAU) -> None:
    select.propose_args([logits], target_temperature, seed, round, position, tau, None, DEFAULT_LAUNCH,
                        _out(status, token, ids, tickets), "logits")


@torch.library.custom_op("pp3::greedy", mutates_args=())
def greedy(logits: Tensor, tile: int | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _fields(select.greedy(logits, tile=tile))


@greedy.register_fake
def _(logits: Tensor, tile: int | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _fields(select.greedy_args([logits], tile, DEFAULT_LAUNCH, None, "logits")[-1])


@torch.library.custom_op("pp3::greedy_out", mutates_args=("status", "token", "ids", "tickets"))
def greedy_out(logits: Tensor, status: Tensor, token: Tensor, ids: Tensor, tickets: Tensor,
               tile: int | None = None) -> None:
    select.greedy(logits, tile=tile, out=_out(status, token, ids, tickets))


@greedy_out.register_fake
def _(logits: Tensor, status: Tensor, token: Tensor, ids: Tensor, tickets: Tensor, tile: int | None = None) -> None:
    select.greedy_args([logits], tile, DEFAULT_LAUNCH, _out(status, token, ids, tickets), "logits")


@torch.library.custom_op("pp3::tile_candidates", mutates_args=())
def tile_candidates(logits: Tensor, id_offset: int = 0, tile: int | None = None) -> tuple[Tensor, Tensor]:
    c = select.tile_candidates(logits, id_offset=id_offset, tile=tile)
    return c.keys, c.flags


@tile_candidates.register_fake
def _(logits: Tensor, id_offset: int = 0, tile: int | None = None) -> tuple[Tensor, Tensor]:
    c = select.tile_candidates_args(logits, id_offset, tile, None, 0, DEFAULT_LAUNCH)[3]
    return c.keys, c.flags


@torch.library.custom_op("pp3::finalize", mutates_args=())
def finalize(
    keys: Tensor,
    flags: Tensor,
    target_temperature: Tensor,
    seed: Tensor,
    round: Tensor,
    position: Tensor,
    vocab_size: int,
    tau: float = DEFAULT_TAU,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    cands = buffers.Candidates(keys=keys, flags=flags)
    return _fields(select.finalize(cands, target_temperature, seed, round, position, tau, vocab_size=vocab_size))


@finalize.register_fake
def _(keys: Tensor, flags: Tensor, target_temperature: Tensor, seed: Tensor, round: Tensor, position: Tensor,
      vocab_size: int, tau: float = DEFAULT_TAU) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    cands = buffers.Candidates(keys=keys, flags=flags)
    args = select.finalize_args(cands, target_temperature, seed, round, position, tau, vocab_size, DEFAULT_LAUNCH,
                                None)
    return _fields(args[4])


# ------------------------------------------------------------------------------------------------------ verifier


@torch.library.custom_op("pp3::verify", mutates_args=())
def verify(
    target_logits: Tensor,
    target_temperature: Tensor,
    draft_tokens: Tensor,
    draft_status: Tensor,
    draft_ids: Tensor,
    draft_tickets: Tensor,
    seed: Tensor,
    round: Tensor,
    position: Tensor,
    tile: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    v = accept.verify(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets, seed,
                      round, position, tile=tile)
    return v.status, v.accepted, v.tokens


@verify.register_fake
def _(target_logits: Tensor, target_temperature: Tensor, draft_tokens: Tensor, draft_status: Tensor,
      draft_ids: Tensor, draft_tickets: Tensor, seed: Tensor, round: Tensor, position: Tensor,
      tile: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    v = accept.verify_args(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets,
                           seed, round, position, tile, None)[-1]
    return v.status, v.accepted, v.tokens


@torch.library.custom_op("pp3::verify_out", mutates_args=("status", "accepted", "tokens"))
def verify_out(
    target_logits: Tensor,
    target_temperature: Tensor,
    draft_tokens: Tensor,
    draft_status: Tensor,
    draft_ids: Tensor,
    draft_tickets: Tensor,
    seed: Tensor,
    round: Tensor,
    position: Tensor,
    status: Tensor,
    accepted: Tensor,
    tokens: Tensor,
    tile: int | None = None,
) -> None:
    out = accept.Verdict(status=status, accepted=accepted, tokens=tokens)
    accept.verify(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets, seed,
                  round, position, tile=tile, out=out)


@verify_out.register_fake
def _(target_logits: Tensor, target_temperature: Tensor, draft_tokens: Tensor, draft_status: Tensor,
      draft_ids: Tensor, draft_tickets: Tensor, seed: Tensor, round: Tensor, position: Tensor, status: Tensor,
      accepted: Tensor, tokens: Tensor, tile: int | None = None) -> None:
    out = accept.Verdict(status=status, accepted=accepted, tokens=tokens)
    accept.verify_args(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets, seed,
                       round, position, tile, out)
