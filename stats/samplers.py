"""The samplers under audit: the reference, planted-bug mutants of it, and the GPU kernels.

A sampler maps a logits row and a batch of keys (seed, round, position) to drawn slots. Every sampler offers

* ``propose(logits, temperature, seed, round, position, tau)`` -> ``Proposal`` (NumPy arrays): the selector;
* ``slots(row, tau)`` -> (ids, tickets): what ``propose`` returns for one sampled row;
* ``case_draws(row, tau, keys)`` -> ``Draws``: one draw per key for copies of that row;
* ``uniform_bits(keys)`` -> (values, bits): the most of the uniform the sampler lets us see.

``Composed`` samplers are the reference selector with at most one planted bug of the catalogue
(``pp3.testing.mutants``: the §5 allocation, the §8 stream or draw rule, the greedy branch, the acceptance domain);
they also expose ``draw_slot`` (so the draw rule can be enumerated over all 2^24 uniforms) and ``accept_uniform``.
The reference itself is ``Composed()`` with nothing swapped: its ``propose`` *is* ``pp3.reference.propose``.
``KernelSampler`` wraps ``pp3.kernels.propose`` (torch, CUDA); it only shows drawn tokens, so it sees 5 bits of the
uniform (the slot drawn from 32 equal slots, u >> 19).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pp3.reference import DOMAIN_ACCEPT, DOMAIN_PROPOSAL, Proposal, philox, tickets
from pp3.reference import select as _PROPOSE
from pp3.reference._constants import TICKET_BITS
from pp3.testing.mutants import Mutant, mutant, patched

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

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


# --- the composed (reference / mutant) sampler ---------------------------------------------------------------------


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
    """The reference selector with at most one planted bug of ``pp3.testing.mutants`` (``None``: the reference)."""

    mutant: Mutant | None = None
    _slots: dict[tuple[bytes, str, float], tuple[I64, I64]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )

    nbits = TICKET_BITS

    @property
    def name(self) -> str:
        return "reference" if self.mutant is None else self.mutant.name

    @property
    def bug(self) -> str:
        return "" if self.mutant is None else self.mutant.what

    @property
    def is_mutant(self) -> bool:
        return self.mutant is not None

    def _replaced(self, target: str) -> Any:
        """The mutant's replacement if it replaces ``target``, else None."""
        return self.mutant.replacement if self.mutant is not None and self.mutant.target == target else None

    @property
    def draw_slot(self) -> Callable[[I64, U64], I64]:
        fn: Callable[[I64, U64], I64] = self._replaced("pp3.reference.tickets:draw_slot") or tickets.draw_slot
        return fn

    def propose(self, logits: Any, temperature: Any, seed: Any, round_: Any, position: Any, tau: float) -> Proposal:
        with patched(None if self.mutant is None else self.mutant.name):  # the reference runs unpatched
            out: Proposal = _PROPOSE.propose(logits, temperature, seed, round_, position, tau=tau)
            return out

    def uniform(self, keys: Keys) -> U64:
        """§8's u for each key: the mutant's stream if it replaces it, else the reference's (memoised)."""
        fn = self._replaced("pp3.reference.philox:proposal_uniform")
        if fn is not None:
            u: U64 = fn(keys.seed, keys.round, keys.position)
            return u
        return stream_uniform(keys.seed, keys.round, keys.position, DOMAIN_PROPOSAL)

    def accept_uniform(self, keys: Keys) -> U64:
        """The 24-bit uniform of the acceptance domain (the mutant's domain if it replaces it)."""
        domain = self._replaced("pp3.reference.accept:DOMAIN_ACCEPT")
        return stream_uniform(keys.seed, keys.round, keys.position, DOMAIN_ACCEPT if domain is None else domain)

    def uniform_bits(self, keys: Keys) -> tuple[U64, int]:
        return self.uniform(keys), self.nbits

    def case_draws(self, row: npt.NDArray[np.floating], tau: float, keys: Keys) -> Draws:
        _, tix = self.slots(row, tau)
        return Draws(np.asarray(self.draw_slot(tix[None, :], self.uniform(keys)), dtype=np.int64))


# --- the planted bugs ----------------------------------------------------------------------------------------------

# The planted bugs of this tier (pp3.testing.mutants): each one is a target of some audit (test_stats.py says which).
MUTANTS = ("draw-off-by-one", "largest-remainder", "remainder-lowest-id", "uniform-23-bits", "counter-reuse",
           "position-lsb", "seed-lsb", "domain-collision", "t0-sampled")


def mutants() -> list[Composed]:
    """The reference with each planted bug of MUTANTS."""
    return [Composed(mutant(name)) for name in MUTANTS]


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
