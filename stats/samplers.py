"""The samplers under audit: the reference, planted-bug mutants of it, and the GPU kernels.

A sampler maps a logits row and a batch of keys (seed, round, position) to drawn slots. Every sampler offers

* ``propose(logits, temperature, seed, round, position, tau)`` -> ``Proposal`` (NumPy arrays): the selector;
* ``slots(row, tau)`` -> (ids, tickets): what ``propose`` returns for one sampled row;
* ``case_draws(row, tau, keys)`` -> ``Draws``: one draw per key for copies of that row;
* ``uniform_bits(keys)`` -> (values, bits): the most of the uniform the sampler lets us see.

``Composed`` samplers are the reference selector with at most one stage swapped (§5 allocation, the §8 stream,
the §8 draw rule, the greedy branch); they also expose ``draw_slot`` (so the draw rule can be enumerated over all
2^24 uniforms) and ``accept_uniform``. The reference itself is ``Composed()`` with nothing swapped: its
``propose`` *is* ``pp3.reference.propose``. ``KernelSampler`` wraps ``pp3.kernels.propose`` (torch, CUDA); it only
shows drawn tokens, so it sees 5 bits of the uniform (the slot drawn from 32 equal slots, u >> 19).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Protocol
from unittest import mock

import numpy as np
import numpy.typing as npt

from pp3.reference import DOMAIN_ACCEPT, DOMAIN_PROPOSAL, Proposal, philox, tickets
from pp3.reference._constants import TICKET_BITS
from tools.mutants import draw_off_by_one, largest_remainder, remainder_to_lowest_id

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
CounterMap = Callable[[U64, U64, U64], tuple[U64, U64, U64]]

_PROPOSE = importlib.import_module("pp3.reference.propose")  # the module (``pp3.reference.propose`` is the function)
UNIFORM32_ROW = np.zeros(32, dtype=np.float32)  # 32 equal logits: 2^19 tickets per slot, slot = u >> 19


@dataclasses.dataclass(frozen=True)
class Keys:
    """A batch of draw keys, uint64 each."""

    seed: U64
    round: U64
    position: U64

    def __len__(self) -> int:
        return int(self.seed.size)

    def head(self, n: int) -> Keys:
        return Keys(self.seed[:n], self.round[:n], self.position[:n])


@dataclasses.dataclass(frozen=True)
class Draws:
    """Drawn slots for copies of one row, and how many rows came back with other ids/tickets/status."""

    slots: I64
    inconsistent_rows: int = 0


# --- the §8 stream, memoised per batch of keys --------------------------------------------------------------------

_MEMO: dict[tuple[int, int, int, int], tuple[U64, U64, U64, U64]] = {}


def clear_memo() -> None:
    """Forget memoised uniforms (the audit runner calls this after each chunk of keys)."""
    _MEMO.clear()


def stream_uniform(seed: U64, round_: U64, position: U64, domain: int) -> U64:
    """§8: the top 24 bits of word 0 of Philox4x64-10(counter=(round, position, 0, 0), key=(seed, domain)).

    The proposal domain goes through the reference's own ``philox.proposal_uniform``. Memoised on the identity of
    the three arrays (held, so an id cannot be reused), since several samplers share one stream.
    """
    k = (id(seed), id(round_), id(position), domain)
    hit = _MEMO.get(k)
    if hit is not None and hit[0] is seed and hit[1] is round_ and hit[2] is position:
        return hit[3]
    if domain == DOMAIN_PROPOSAL:
        u = philox.proposal_uniform(seed, round_, position)
    else:
        u = philox.block(seed, round_, position, domain)[:, 0] >> np.uint64(64 - TICKET_BITS)
    _MEMO[k] = (seed, round_, position, u)
    return u


@dataclasses.dataclass(frozen=True)
class Stream:
    """How a sampler keys its uniforms: a domain, optionally a counter/key map and a transform of u."""

    domain: int = DOMAIN_PROPOSAL
    counter_map: CounterMap | None = None
    post: Callable[[U64], U64] | None = None

    def __call__(self, seed: U64, round_: U64, position: U64) -> U64:
        if self.counter_map is not None:
            seed, round_, position = self.counter_map(seed, round_, position)
        u = stream_uniform(seed, round_, position, self.domain)
        return u if self.post is None else self.post(u)


# --- the composed (reference / mutant) sampler ---------------------------------------------------------------------


class _Override:
    """A stand-in for a module with some attributes replaced; everything else is the module's."""

    def __init__(self, module: ModuleType, **overrides: Any) -> None:
        self._module = module
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class _SlotCache:
    """``slots(row, tau)``: the (ids, tickets) a sampler gives one row, computed once per row and tau."""

    _slots: dict[tuple[bytes, str, float], tuple[I64, I64]]

    def propose(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def slots(self, row: npt.NDArray[np.floating], tau: float) -> tuple[I64, I64]:
        k = (row.tobytes(), row.dtype.str, tau)
        if k not in self._slots:
            out = self.propose(row[None], np.float32(1.0), 0, 0, 0, tau)
            self._slots[k] = (out.ids[0].astype(np.int64), out.tickets[0].astype(np.int64))
        return self._slots[k]


@dataclasses.dataclass(frozen=True)
class Composed(_SlotCache):
    """The reference selector with at most one planted bug (``bug`` says which; empty for the reference)."""

    name: str = "reference"
    bug: str = ""
    allocate: Callable[[npt.NDArray[np.float64], I64], I64] = tickets.allocate
    draw_slot: Callable[[I64, U64], I64] = tickets.draw_slot
    stream: Stream = Stream()
    accept: Stream = Stream(domain=DOMAIN_ACCEPT)
    greedy_as_sampled: bool = False
    _slots: dict[tuple[bytes, str, float], tuple[I64, I64]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )

    nbits = TICKET_BITS

    @property
    def is_mutant(self) -> bool:
        return bool(self.bug)

    @contextlib.contextmanager
    def _patched(self) -> Iterator[None]:
        if not self.is_mutant:  # the reference runs unpatched
            yield
            return
        t = _Override(tickets, allocate=self.allocate, draw_slot=self.draw_slot)
        p = _Override(philox, proposal_uniform=self.stream)
        with mock.patch.object(_PROPOSE, "tickets", t), mock.patch.object(_PROPOSE, "philox", p):
            yield

    def propose(self, logits: Any, temperature: Any, seed: Any, round_: Any, position: Any, tau: float) -> Proposal:
        temp = np.asarray(temperature, dtype=np.float32)
        if self.greedy_as_sampled:
            temp = np.where(temp == 0, np.float32(1.0), temp)
        with self._patched():
            out: Proposal = _PROPOSE.propose(logits, temp, seed, round_, position, tau=tau)
            return out

    def uniform(self, keys: Keys) -> U64:
        return self.stream(keys.seed, keys.round, keys.position)

    def accept_uniform(self, keys: Keys) -> U64:
        return self.accept(keys.seed, keys.round, keys.position)

    def uniform_bits(self, keys: Keys) -> tuple[U64, int]:
        return self.uniform(keys), self.nbits

    def case_draws(self, row: npt.NDArray[np.floating], tau: float, keys: Keys) -> Draws:
        _, tix = self.slots(row, tau)
        return Draws(np.asarray(self.draw_slot(tix[None, :], self.uniform(keys)), dtype=np.int64))


# --- the planted bugs ----------------------------------------------------------------------------------------------


def _drop_lowest_bit(u: U64) -> U64:
    """A 23-bit uniform: u = (w0 >> 41) << 1."""
    return (u >> np.uint64(1)) << np.uint64(1)


def _round_ignored(seed: U64, round_: U64, position: U64) -> tuple[U64, U64, U64]:
    return seed, np.zeros_like(round_), position


def _position_lsb_ignored(seed: U64, round_: U64, position: U64) -> tuple[U64, U64, U64]:
    return seed, round_, position & ~np.uint64(1)


def _seed_lsb_ignored(seed: U64, round_: U64, position: U64) -> tuple[U64, U64, U64]:
    return seed & ~np.uint64(1), round_, position


def mutants() -> list[Composed]:
    """The planted bugs. The first five are the issue's; the last four give the remaining audits a target."""
    return [
        Composed("off-by-one", "draw takes the first slot with u <= C_j (not u < C_j)", draw_slot=draw_off_by_one),
        Composed("largest-remainder", "remainder by largest fractional part", allocate=largest_remainder),
        Composed("remainder-lowest-id", "remainder to slot 0 (lowest ID), not rank 0", allocate=remainder_to_lowest_id),
        Composed("uniform-23bit", "u = (w0 >> 41) << 1: a 23-bit uniform", stream=Stream(post=_drop_lowest_bit)),
        Composed("counter-reuse", "counter (0, position): rounds reuse it", stream=Stream(counter_map=_round_ignored)),
        Composed("position-lsb", "counter (round, position & ~1)", stream=Stream(counter_map=_position_lsb_ignored)),
        Composed("seed-lsb", "key (seed & ~1, domain)", stream=Stream(counter_map=_seed_lsb_ignored)),
        Composed("domain-collision", "acceptance draws keyed with the proposal domain", accept=Stream()),
        Composed("t0-sampled", "greedy (T0) rows are sampled like T > 0 rows", greedy_as_sampled=True),
    ]


# --- the GPU kernels -----------------------------------------------------------------------------------------------


class KernelOutput(Protocol):
    """What the sampler reads of a kernel's result (read-only, so a frozen dataclass such as
    ``pp3.kernels.select.Proposal`` conforms)."""

    @property
    def status(self) -> Any: ...
    @property
    def token(self) -> Any: ...
    @property
    def ids(self) -> Any: ...
    @property
    def tickets(self) -> Any: ...


class KernelSampler(_SlotCache):
    """``pp3.kernels.propose`` (torch tensors in and out) behind the sampler interface."""

    nbits = 5  # the kernel shows tokens only: the slot drawn from UNIFORM32_ROW is u >> 19
    bug = ""
    is_mutant = False

    def __init__(self, propose_fn: Callable[..., KernelOutput], device: str, name: str = "kernel") -> None:
        import torch  # only here: the rest of stats/ runs without torch

        self._torch = torch
        self._propose = propose_fn
        self.device = device
        self.name = name
        self._slots: dict[tuple[bytes, str, float], tuple[I64, I64]] = {}

    def _tensor(self, a: npt.NDArray[Any]) -> Any:
        arr = np.array(a, order="C", copy=True)  # writable and contiguous, as torch.from_numpy wants
        if arr.dtype == np.uint64:
            arr = arr.view(np.int64)  # the kernels take uint64 bit patterns in int64 tensors
        return self._torch.from_numpy(arr).to(self.device)

    def _run(self, logits: Any, temperature: Any, keys: Keys, tau: float) -> KernelOutput:
        return self._propose(
            logits,
            self._tensor(np.asarray(temperature, dtype=np.float32)),
            self._tensor(keys.seed),
            self._tensor(keys.round),
            self._tensor(keys.position),
            tau=tau,
        )

    def propose(self, logits: Any, temperature: Any, seed: Any, round_: Any, position: Any, tau: float) -> Proposal:
        x = np.asarray(logits)
        b = x.shape[0]
        keys = Keys(*(np.broadcast_to(np.asarray(v, dtype=np.uint64), (b,)) for v in (seed, round_, position)))
        temp = np.broadcast_to(np.asarray(temperature, dtype=np.float32), (b,))
        out = self._run(self._tensor(x), temp, keys, tau)
        return Proposal(
            status=out.status.cpu().numpy().astype(np.int8),
            token=out.token.cpu().numpy().astype(np.int32),
            ids=out.ids.cpu().numpy().astype(np.int32),
            tickets=out.tickets.cpu().numpy().astype(np.int32),
        )

    def case_draws(self, row: npt.NDArray[np.floating], tau: float, keys: Keys) -> Draws:
        torch = self._torch
        ids, tix = self.slots(row, tau)
        ids_t = torch.from_numpy(ids).to(self.device)
        tix_t = torch.from_numpy(tix).to(self.device)
        present = ids_t[: int((ids >= 0).sum())]
        x = self._tensor(row[None, :])
        batch = max(1, min(1 << 22, (1 << 28) // row.size))  # <= 1 GiB of fp32 logits per launch
        slots, bad = [], 0
        for start in range(0, len(keys), batch):
            sub = Keys(*(a[start : start + batch] for a in (keys.seed, keys.round, keys.position)))
            n = len(sub)
            out = self._run(x.expand(n, row.size).contiguous(), np.ones(n, dtype=np.float32), sub, tau)
            tok = out.token.to(torch.int64)
            slot = torch.searchsorted(present, tok).clamp_(max=present.numel() - 1)
            wrong = (out.status != 0) | (present[slot] != tok)
            wrong |= (out.ids.to(torch.int64) != ids_t).any(dim=1) | (out.tickets.to(torch.int64) != tix_t).any(dim=1)
            bad += int(wrong.sum())
            slots.append(slot.cpu().numpy())
        return Draws(np.concatenate(slots).astype(np.int64), bad)

    def uniform_bits(self, keys: Keys) -> tuple[U64, int]:
        draws = self.case_draws(UNIFORM32_ROW, 1.0, keys)
        return draws.slots.astype(np.uint64), self.nbits


Sampler = Composed | KernelSampler


def kernel_sampler() -> KernelSampler | None:
    """The GPU sampler when torch sees a CUDA device and ``pp3.kernels`` imports; otherwise None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    try:
        from pp3 import kernels
    except ImportError:
        return None
    return KernelSampler(kernels.propose, "cuda", name=f"kernel ({torch.cuda.get_device_name()})")
