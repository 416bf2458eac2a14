"""Engine adapters: pp3's sparse proposal ``q`` and its fixed-depth drafts in the layouts that serving engines use
(FlashInfer's dense chains, vLLM's flattened ragged batches and per-request state tables). Plain torch, CPU or CUDA,
but for one Triton kernel: on CUDA the ragged conversions copy their rows in one launch
(``pp3.kernels.launchers.gather_rows``).

pp3's ``q`` is sparse (SPEC.md §7): per draft, K = 32 slots of (``id``, ``tickets``), the non-empty slots first in
ascending ID order, empty slots ``id = -1`` with 0 tickets, the tickets of an OK draft summing to 2^24. This module
maps that, exactly, to

* ``dense_probs`` / ``log_probs``: dense fp32 ``q`` [..., V] (FlashInfer ``chain_speculative_sampling``'s
  ``draft_probs``, vLLM V1's ``draft_probs``) and its logarithm with -inf elsewhere (vLLM MRV2's draft-logits
  cache); ``token_q`` / ``token_log_q``: q of each drafted token.
* ``to_ragged`` / ``from_ragged`` and the wrappers for drafts (``draft_to_ragged``, ``draft_from_ragged``), target
  logits (``target_logits_to_ragged``, ``target_logits_from_ragged``) and verdicts (``verdict_to_ragged``,
  ``verdict_from_ragged``): pp3's padded [B, D, ...] against vLLM's flattened [num_tokens, ...] with offsets.
* ``row_keys_from_table``: the seed / round / position keys of a batch gathered from per-request state tables.

**No host synchronisation.** Every function checks its arguments from types, dtypes, shapes and devices only (a
``TypeError`` or ``ValueError`` naming the argument, before any work), then queues device work: no ``.item()`` of a
device tensor, no ``.tolist()``, no host-to-device copy, no output shape that depends on tensor values. So each call
can be captured in a CUDA graph, and it runs on ``meta`` tensors (which have no values to read;
``tests/test_adapters.py``). The price is that tensor *values* are not checked; what each function does with values
it cannot check is stated in its docstring (lengths are clamped, offsets are trusted, an ID >= V fails in torch's
own bounds check: at once on the CPU, as a device-side assertion on CUDA).

**Ragged layout** (vLLM's). A batch of B requests with draft lengths ``n_b`` flattens to ``N = sum(n_b)`` rows,
request b at rows ``cu[b] .. cu[b+1]-1``. ``cu`` [B+1] int32 starts at 0 (the convention of vLLM MRV2's
``cu_num_logits``); vLLM V1's ``SpecDecodeMetadata.cu_num_draft_tokens`` [B] is ``cu[1:]`` (its inclusive
cumulative sum; get ``cu`` back with ``torch.nn.functional.pad(cu_num_draft_tokens, (1, 0))``). The target's
logits of a request are its ``n_b`` draft rows then its bonus row, so they flatten to ``N + B`` rows at offsets
``cu_with_bonus(cu) = cu + arange(B+1)`` (vLLM V1's ``cu_num_sampled_tokens`` with a leading 0, MRV2's
``cu_num_logits``). ``N`` is data-dependent, and vLLM knows it on the host (its scheduler holds
``num_draft_tokens`` as a list), so the flattening functions take ``num_tokens`` from the caller: the output has
exactly that many rows, rows past ``sum(n_b)`` hold ``fill`` (a CUDA graph's padded size, or the maximum
``B * D``), entries past ``num_tokens`` are dropped.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import torch

from pp3.drafter import Draft
from pp3.kernels import checks
from pp3.kernels.buffers import GATHER_BITS
from pp3.reference._constants import EMPTY_ID, MAX_VOCAB, TICKET_BITS, K

PAD_STATUS = -1
"""The draft status of a padded position (past a request's draft length): not a SPEC.md §3 status; any non-zero
status ends a draft for the verifier (§11.3 step 1), so padded drafts and their target rows are ignored."""

# 2^-24, exact in fp32: a ticket count T (an integer 0 .. 2^24, exact in fp32's 24-bit significand) times 2^-24 is
# T * 2^-24 exactly (scaling by a power of two; the smallest non-zero result, 2^-24, is far above fp32's subnormals).
_TICKET_UNIT = 2.0**-TICKET_BITS
_INT_DTYPES = (torch.int32, torch.int64)
_LOGIT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_I32_MAX = (1 << 31) - 1


# ------------------------------------------------------------------------------------------------ argument checks


@torch.compiler.assume_constant_result  # type: ignore[untyped-decorator]  # torch leaves it untyped
def _holds(v: float, dtype: torch.dtype) -> bool:
    """Whether float ``dtype`` holds ``v`` exactly (torch's own conversion on the host; a constant to torch.compile)."""
    return float(torch.tensor(v, dtype=dtype)) == v


@torch.compiler.assume_constant_result  # type: ignore[untyped-decorator]
def _fill_bits(value: int | float | bool, dtype: torch.dtype) -> int:
    """A checked ``fill`` (``_fill``) as the row gather's ``fill_bits``: torch's own conversion to ``dtype`` (what
    ``masked_fill_`` writes), its bits as the signed integer of the width. On the host from the Python scalar, so no
    device read, and a constant to torch.compile."""
    bits = GATHER_BITS.get(dtype)
    if bits is None:
        raise ValueError(f"fill: the row gather does not take {dtype}")
    return int(torch.tensor(value, dtype=dtype).view(bits).item())


def _fill(value: Any, dtype: torch.dtype) -> int | float | bool:
    """A Python scalar that ``dtype`` holds exactly (``fill`` of the ragged functions)."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"fill: expected an int, float or bool, got {type(value).__name__}")
    if dtype == torch.bool:
        if not isinstance(value, bool | int) or value not in (0, 1):
            raise ValueError(f"fill: {value!r} is not a bool, the data's dtype")
        return bool(value)
    if dtype.is_floating_point:
        v = float(value)
        if v == v and not _holds(v, dtype):  # any NaN is a NaN of every format
            raise ValueError(f"fill: {value!r} is not a value of the data's dtype {dtype}")
        return v
    info = torch.iinfo(dtype)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not info.min <= int(value) <= info.max:
        raise ValueError(f"fill: {value!r} is not a value of the data's dtype {dtype}")
    return int(value)


def _slots(ids: Any, tickets: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """§7 slots: ``ids`` and ``tickets`` int32/int64 of one shape [..., K] on one device."""
    ids = checks.dense("ids", ids, _INT_DTYPES)
    tickets = checks.dense("tickets", tickets, _INT_DTYPES)
    if ids.dim() < 1 or ids.shape[-1] != K:
        raise ValueError(f"ids: expected shape [..., {K}] (SPEC.md §7 slots), got {tuple(ids.shape)}")
    checks.shaped("tickets", tickets, tuple(ids.shape), "ids' shape [..., K]")
    checks.on("tickets", tickets, ids.device, "ids is")
    return ids, tickets


def _dense_args(ids: Any, tickets: Any, vocab_size: Any, out: Any, previous_ids: Any) -> tuple[
        torch.Tensor, torch.Tensor, tuple[int, ...], torch.Tensor | None, torch.Tensor | None]:
    """The checks of ``dense_probs`` and ``log_probs``."""
    ids, tickets = _slots(ids, tickets)
    v = checks.integer("vocab_size", vocab_size, 1, MAX_VOCAB)
    shape = (*ids.shape[:-1], v)
    if out is not None:
        out = checks.dense("out", out, (torch.float32,))
        checks.shaped("out", out, shape, "[..., vocab_size] (ids' leading dimensions)")
        checks.on("out", out, ids.device, "ids is")
    if previous_ids is not None:
        if out is None:
            raise ValueError("previous_ids: needs out= (the buffer that the previous call wrote at those IDs)")
        previous_ids = checks.dense("previous_ids", previous_ids, _INT_DTYPES)
        checks.shaped("previous_ids", previous_ids, tuple(ids.shape), "ids' shape [..., K]")
        checks.on("previous_ids", previous_ids, ids.device, "ids is")
    return ids, tickets, shape, out, previous_ids


def _lengths(name: str, lengths: Any, b: int, ref_name: str, ref: torch.Tensor) -> torch.Tensor:
    t = checks.dense(name, lengths, _INT_DTYPES)
    checks.shaped(name, t, (b,), "[B]")
    checks.on(name, t, ref.device, ref_name + " is")
    return t


def _offsets(name: str, cu: Any, ref_name: str | None = None, ref: torch.Tensor | None = None) -> torch.Tensor:
    t = checks.dense(name, cu, _INT_DTYPES)
    if t.dim() != 1 or t.shape[0] < 2:
        raise ValueError(f"{name}: expected shape [B+1] with B >= 1 (offsets starting at 0), got {tuple(t.shape)}")
    if ref_name is not None and ref is not None:
        checks.on(name, t, ref.device, ref_name + " is")
    return t


def _padded(name: str, x: Any, dtypes: tuple[torch.dtype, ...] | None = None, *, extra: int = 0) -> torch.Tensor:
    """A padded [B, D, ...] tensor with B >= 1 and D >= 1 (``extra`` more trailing dimensions at least)."""
    t = checks.dense(name, x, dtypes)
    if t.dim() < 2 + extra or t.shape[0] < 1 or t.shape[1] < 1:
        dims = "[B, D, ...]" if not extra else "[B, D+1, V]"
        raise ValueError(f"{name}: expected shape {dims} with B, D >= 1, got {tuple(t.shape)}")
    return t


def _num_tokens(value: Any) -> int:
    return checks.integer("num_tokens", value, 0, _I32_MAX)


# -------------------------------------------------------------------------------------------------- dense q


def _scatter_operands(ids: torch.Tensor, tickets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(column, probability) per slot: an empty slot (any negative ID; SPEC.md §7 writes -1) goes to column 0 with
    probability +0.0, so it adds nothing; a non-empty slot's probability is tickets * 2^-24, exact in fp32."""
    empty = ids < 0
    column = torch.where(empty, 0, ids).long()
    prob = torch.where(empty, 0, tickets).to(torch.float32) * _TICKET_UNIT
    return column, prob


def _reset(out: torch.Tensor, previous_ids: torch.Tensor | None, value: float) -> None:
    if previous_ids is None:
        out.fill_(value)
    else:  # duplicates all write the same value; an empty slot's column 0 is rewritten after this anyway
        out.scatter_(-1, torch.where(previous_ids < 0, 0, previous_ids).long(), value)


def dense_probs(
    ids: torch.Tensor,
    tickets: torch.Tensor,
    vocab_size: int,
    *,
    out: torch.Tensor | None = None,
    previous_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """The sparse ``q`` as dense fp32 probabilities [..., vocab_size]: ``tickets * 2^-24`` at each slot's ID, +0.0
    at every other ID (FlashInfer ``chain_speculative_sampling``'s ``draft_probs`` [B, D, V]; vLLM V1's
    ``draft_probs`` [num_tokens, V] from ragged slots).

    ``ids``, ``tickets``: [..., K] int32 (or int64), SPEC.md §7 slots. Every value is **exact**: a ticket count is an
    integer 0 .. 2^24, which fp32's 24-bit significand holds exactly, and multiplying by 2^-24 only changes the
    exponent (the smallest non-zero value, 2^-24, is a normal number), so ``(q * 2^24).to(int)`` at the IDs gives
    back the tickets. The fp32 *sum* of a row need not be exactly 1.0 (it depends on the summation order); the
    integer ticket sum is 2^24. A failed draft (every slot empty) gives a row of zeros.

    Empty slots are the trap of a dense export: clamping their ID -1 to 0 and writing with ``scatter_`` lets an
    empty slot's 0.0 overwrite token 0's mass. Here every slot is *added* (``scatter_add_``) onto zeros: an empty
    slot adds +0.0 at column 0, and each non-empty ID is distinct (§7), so every column receives at most one non-zero
    addend and its value is exact in any accumulation order (x + 0.0 = x).

    ``out``: a caller's fp32 buffer of the output's shape, written in place and returned. Alone, it is zeroed first
    (the full 4 * V bytes per row). With ``previous_ids`` (the ``ids`` of the call that last wrote ``out``), only
    those columns are zeroed, then the new ones written: per step an engine touches 2 * K columns per row instead
    of V. This relies on ``out`` being zero everywhere else (a ``torch.zeros`` buffer, then only written by this
    function with ``previous_ids`` passed every time), which is not checked. An ID >= ``vocab_size`` fails in
    torch's index check (CPU: at the call; CUDA: a device-side assertion).
    """
    ids, tickets, shape, out, previous_ids = _dense_args(ids, tickets, vocab_size, out, previous_ids)
    column, prob = _scatter_operands(ids, tickets)
    if out is None:
        out = torch.zeros(shape, dtype=torch.float32, device=ids.device)
    else:
        _reset(out, previous_ids, 0.0)
    return out.scatter_add_(-1, column, prob)


def log_probs(
    ids: torch.Tensor,
    tickets: torch.Tensor,
    vocab_size: int,
    *,
    out: torch.Tensor | None = None,
    previous_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log q`` as fp32 [..., vocab_size]: ``torch.log`` of ``dense_probs``'s exact fp32 probability at each
    slot's ID, -inf at every other ID and at a slot with 0 tickets (vLLM MRV2's draft-logits cache holds [...,
    V] logits per draft step; this is such a row, normalised: its log-sum-exp is 0 up to rounding).

    What is exact is the probability; its logarithm is ``torch.log``'s fp32 log, which is **not** correctly
    rounded: on the CPU build this was written with (torch 2.13) it differs from the fp64 log rounded to fp32 for
    15 372 of the 2^24 ticket counts, and CUDA's ``logf`` has its own error bound (at most 1 ulp). It is an
    elementwise function of the fp32 input, so on one device and torch build the same slot gives the same bits
    (no dependence on position or batch was found on the CPU); across devices it can differ in the last bit.
    ``token_log_q`` returns the same values for the drafted tokens.

    Written with ``scatter_reduce_(amax)`` onto -inf: an empty slot contributes log(0) = -inf at column 0, which
    leaves the column unchanged, and max is exact in any order. ``out`` and ``previous_ids`` as in
    ``dense_probs`` (``out`` reset to -inf; with ``previous_ids`` only at those columns, relying on -inf elsewhere).
    """
    ids, tickets, shape, out, previous_ids = _dense_args(ids, tickets, vocab_size, out, previous_ids)
    column, prob = _scatter_operands(ids, tickets)
    if out is None:
        out = torch.full(shape, float("-inf"), dtype=torch.float32, device=ids.device)
    else:
        _reset(out, previous_ids, float("-inf"))
    return out.scatter_reduce_(-1, column, torch.log(prob), reduce="amax", include_self=True)


def token_q(ids: torch.Tensor, tickets: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """q of each drafted token, fp32 [...], exact: ``Q * 2^-24`` with Q the tickets of the slot whose ID is the
    token (§11.2's ``Q_j(x_j)``), 0 if no slot has it. ``tokens``: [...] int32/int64, ``ids``' leading shape; a
    failed draft's token -1 gives 0 (empty slots never match, whatever their tickets)."""
    ids, tickets = _slots(ids, tickets)
    tokens = checks.dense("tokens", tokens, _INT_DTYPES)
    checks.shaped("tokens", tokens, tuple(ids.shape[:-1]), "ids' leading dimensions [...]")
    checks.on("tokens", tokens, ids.device, "ids is")
    match = (ids == tokens.unsqueeze(-1)) & (ids >= 0)
    q_tickets = torch.where(match, tickets, 0).sum(dim=-1)  # integer sum: at most one slot matches (§7)
    return q_tickets.to(torch.float32) * _TICKET_UNIT


def token_log_q(ids: torch.Tensor, tickets: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``torch.log(token_q(ids, tickets, tokens))``, fp32 [...]: the log q of each drafted token, -inf where q = 0.
    The same bits as ``log_probs`` at that token on the same device; not correctly rounded (see ``log_probs``)."""
    return torch.log(token_q(ids, tickets, tokens))


# ------------------------------------------------------------------------------------------------- ragged


def cu_with_bonus(cu: torch.Tensor) -> torch.Tensor:
    """Offsets of the target's logits rows, ``cu + arange(B+1)`` [B+1] int32: request b's ``n_b`` draft rows and
    its bonus row (vLLM V1's ``cu_num_sampled_tokens`` with a leading 0; vLLM MRV2's ``cu_num_logits``)."""
    cu = _offsets("cu", cu)
    return (cu + torch.arange(cu.shape[0], device=cu.device, dtype=cu.dtype)).to(torch.int32)


def draft_lengths(status: torch.Tensor) -> torch.Tensor:
    """The draft length ``n`` of each row, [B] int32: its leading drafts with status OK (SPEC.md §11.3 step 1), the
    drafts a verifier reads (vLLM's ``num_draft_tokens``). ``status``: [B, D] int8."""
    status = _padded("status", status, (torch.int8,))
    if status.dim() != 2:
        raise ValueError(f"status: expected shape [B, D], got {tuple(status.shape)}")
    return (status == 0).to(torch.int32).cumprod(dim=1).sum(dim=1, dtype=torch.int32)


def _flat_index(lengths: torch.Tensor, d: int, num_tokens: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src, valid, cu) of each flattened position t < num_tokens: ``src = row * d + col``, request ``row``'s entry
    ``col`` (an index into the padded [B, d, ...] tensor's first two dimensions merged, for ``_take_rows``), valid while
    t < sum(n). Lengths are clamped to 0 .. d."""
    n = lengths.clamp(0, d).long()
    cu = torch.nn.functional.pad(torch.cumsum(n, dim=0), (1, 0))  # [B+1] int64, cu[0] = 0
    t = torch.arange(num_tokens, device=lengths.device, dtype=torch.int64)
    row = torch.searchsorted(cu[1:], t, right=True).clamp(max=lengths.shape[0] - 1)  # skips empty requests
    col = (t - cu[row]).clamp(0, d - 1)
    return row * d + col, t < cu[-1], cu


def _padded_index(cu: torch.Tensor, depth: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(flat row, valid) of each padded position [B, depth]: rows clamped into 0 .. n-1 (offsets are trusted)."""
    cu = cu.long()
    start = cu[:-1]
    j = torch.arange(depth, device=cu.device, dtype=torch.int64)
    valid = j < (cu[1:] - start).clamp(0, depth).unsqueeze(1)
    return (start.unsqueeze(1) + j).clamp(0, n - 1), valid


def _take_rows(source: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, fill: int | float | bool) -> (
        torch.Tensor):
    """Rows ``index`` [n] int64 of ``source`` [R, ...] where ``valid`` [n], ``fill`` elsewhere: a fresh [n, ...]
    tensor. Every caller clamps ``index`` into 0 .. R-1. On a CUDA device one launch that reads only the valid rows
    (``pp3.kernels.launchers.gather_rows``: 1.7-2.3x faster than the two torch passes at B = 64, bench/NOTES.md);
    elsewhere (the CPU, meta tensors for torch.compile's fake mode) ``index_select`` then ``masked_fill_``, the same
    result. A padded
    [B, D, ...] source is passed as ``x.flatten(0, 1)``: a view for any contiguous ``x``, else one copy."""
    if source.is_cuda:
        from pp3.kernels import launchers

        if source.dtype in GATHER_BITS:
            return launchers.gather_rows(source, index, valid, _fill_bits(fill, source.dtype))
    out = torch.index_select(source, 0, index)
    return out.masked_fill_(~valid.reshape(-1, *([1] * (out.dim() - 1))), fill)


def to_ragged(x: torch.Tensor, lengths: torch.Tensor, num_tokens: int, *, fill: int | float | bool = 0) -> tuple[
        torch.Tensor, torch.Tensor]:
    """Padded [B, D, ...] -> (flat [num_tokens, ...], cu [B+1] int32): request b's first ``lengths[b]`` entries
    at rows ``cu[b] .. cu[b+1]-1`` (the module's ragged layout; vLLM V1's ``cu_num_draft_tokens`` is ``cu[1:]``).

    ``lengths``: [B] int32/int64, clamped to 0 .. D on the device. ``num_tokens``: the output's row count, from the
    caller (vLLM's host-side ``sum(num_draft_tokens)``, or a fixed maximum such as B * D): rows from ``sum(lengths)``
    on hold ``fill``; entries past ``num_tokens`` are dropped. Every output row is gathered once (no scatter)."""
    x = _padded("x", x)
    b, d = x.shape[:2]
    lengths = _lengths("lengths", lengths, b, "x", x)
    n_out = _num_tokens(num_tokens)
    value = _fill(fill, x.dtype)
    src, valid, cu = _flat_index(lengths, d, n_out)
    return _take_rows(x.flatten(0, 1), src, valid, value), cu.to(torch.int32)


def from_ragged(flat: torch.Tensor, cu: torch.Tensor, depth: int, *, fill: int | float | bool = 0) -> torch.Tensor:
    """Flat [N, ...] with offsets ``cu`` [B+1] (int32/int64, cu[0] = 0) -> padded [B, depth, ...]: entry (b, j)
    is ``flat[cu[b] + j]`` for ``j < cu[b+1] - cu[b]`` (clamped to ``depth``), ``fill`` after.

    The offsets are trusted (not checked: that needs their values on the host); a malformed ``cu`` gives wrong
    rows but never reads outside ``flat`` (row indices are clamped into 0 .. N-1)."""
    flat = checks.dense("flat", flat)
    if flat.dim() < 1:
        raise ValueError("flat: expected shape [N, ...], got a 0-d tensor")
    cu = _offsets("cu", cu, "flat", flat)
    d = checks.integer("depth", depth, 1, _I32_MAX)
    value = _fill(fill, flat.dtype)
    b = cu.shape[0] - 1
    if flat.shape[0] == 0:  # every request has length 0 (a host-side shape, so no sync)
        return torch.full((b, d, *flat.shape[1:]), value, dtype=flat.dtype, device=flat.device)
    idx, valid = _padded_index(cu, d, flat.shape[0])
    return _take_rows(flat, idx.flatten(), valid.flatten(), value).view(b, d, *flat.shape[1:])


# -------------------------------------------------------------------------------------------- draft fields


@dataclasses.dataclass(frozen=True)
class RaggedDraft:
    """A ``pp3.drafter.Draft`` flattened: request b's ``n_b`` drafts at rows ``cu[b] .. cu[b+1]-1``."""

    tokens: torch.Tensor  # [N] int32 (vLLM's draft_token_ids)
    status: torch.Tensor  # [N] int8
    ids: torch.Tensor  # [N, K] int32
    tickets: torch.Tensor  # [N, K] int32
    cu: torch.Tensor  # [B+1] int32 offsets from 0; vLLM V1's cu_num_draft_tokens is cu[1:]


def _draft_fields(owner: str, tokens: torch.Tensor, status: Any, ids: Any, tickets: Any, lead: str) -> None:
    """SPEC.md §11.2's draft dtypes, shapes [*lead] and [*lead, K] alike, on one device (``owner.field``)."""
    checks.dense(f"{owner}.status", status, (torch.int8,))
    checks.dense(f"{owner}.ids", ids, (torch.int32,))
    checks.dense(f"{owner}.tickets", tickets, (torch.int32,))
    shape = tuple(tokens.shape)
    for field, t, want, dims in (
        ("status", status, shape, lead),
        ("ids", ids, (*shape, K), f"{lead[:-1]}, K]"),
        ("tickets", tickets, (*shape, K), f"{lead[:-1]}, K]"),
    ):
        checks.shaped(f"{owner}.{field}", t, want, dims)
        checks.on(f"{owner}.{field}", t, tokens.device, f"{owner}.tokens is")


def draft_to_ragged(draft: Draft, num_tokens: int, lengths: torch.Tensor | None = None) -> RaggedDraft:
    """A padded ``Draft`` ([B, D] fields) -> ``RaggedDraft`` of ``num_tokens`` rows (see ``to_ragged``).

    ``lengths`` [B] defaults to ``draft_lengths(draft.status)``: each row's drafts up to its first failed one, the
    drafts the verifier reads. Rows past the drafts hold token -1, status ``PAD_STATUS``, empty slots."""
    if not isinstance(draft, Draft):
        raise TypeError(f"draft: expected a pp3.drafter.Draft, got {type(draft).__name__}")
    tokens = _padded("draft.tokens", draft.tokens, (torch.int32,))
    if tokens.dim() != 2:
        raise ValueError(f"draft.tokens: expected shape [B, D], got {tuple(tokens.shape)}")
    _draft_fields("draft", tokens, draft.status, draft.ids, draft.tickets, "[B, D]")
    b, d = tokens.shape
    n_out = _num_tokens(num_tokens)
    n = draft_lengths(draft.status) if lengths is None else _lengths("lengths", lengths, b, "draft.tokens", tokens)
    src, valid, cu = _flat_index(n, d, n_out)
    return RaggedDraft(
        tokens=_take_rows(draft.tokens.flatten(0, 1), src, valid, EMPTY_ID),
        status=_take_rows(draft.status.flatten(0, 1), src, valid, PAD_STATUS),
        ids=_take_rows(draft.ids.flatten(0, 1), src, valid, EMPTY_ID),
        tickets=_take_rows(draft.tickets.flatten(0, 1), src, valid, 0),
        cu=cu.to(torch.int32),
    )


def draft_from_ragged(ragged: RaggedDraft, depth: int) -> Draft:
    """``RaggedDraft`` -> a padded ``Draft`` of depth ``depth`` (the verifier's §11.2 draft inputs). Positions past
    a request's drafts get token -1, status ``PAD_STATUS`` and empty slots, so the verifier ignores them."""
    if not isinstance(ragged, RaggedDraft):
        raise TypeError(f"ragged: expected a pp3.adapters.RaggedDraft, got {type(ragged).__name__}")
    tokens = checks.dense("ragged.tokens", ragged.tokens, (torch.int32,))
    if tokens.dim() != 1:
        raise ValueError(f"ragged.tokens: expected shape [N], got {tuple(tokens.shape)}")
    _draft_fields("ragged", tokens, ragged.status, ragged.ids, ragged.tickets, "[N]")
    cu = _offsets("ragged.cu", ragged.cu, "ragged.tokens", tokens)
    d = checks.integer("depth", depth, 1, _I32_MAX)
    b, n = cu.shape[0] - 1, tokens.shape[0]
    if n == 0:
        dev = tokens.device
        return Draft(
            tokens=torch.full((b, d), EMPTY_ID, dtype=torch.int32, device=dev),
            status=torch.full((b, d), PAD_STATUS, dtype=torch.int8, device=dev),
            ids=torch.full((b, d, K), EMPTY_ID, dtype=torch.int32, device=dev),
            tickets=torch.zeros((b, d, K), dtype=torch.int32, device=dev),
        )
    idx, valid = _padded_index(cu, d, n)
    idx, valid = idx.flatten(), valid.flatten()
    return Draft(
        tokens=_take_rows(ragged.tokens, idx, valid, EMPTY_ID).view(b, d),
        status=_take_rows(ragged.status, idx, valid, PAD_STATUS).view(b, d),
        ids=_take_rows(ragged.ids, idx, valid, EMPTY_ID).view(b, d, K),
        tickets=_take_rows(ragged.tickets, idx, valid, 0).view(b, d, K),
    )


# ------------------------------------------------------------------------------------ the verifier's layouts


def target_logits_from_ragged(logits: torch.Tensor, cu: torch.Tensor, depth: int) -> torch.Tensor:
    """The target's flattened logits [num_tokens + B, V] (vLLM: each request's draft rows, then its bonus row) ->
    pp3's ``target_logits`` [B, depth+1, V]. ``cu`` [B+1]: the *draft* offsets (``cu_with_bonus(cu)`` are the
    logits' own). Row j of request b is its logits row j for j <= n_b; rows after hold 0, which the verifier
    ignores when the drafts past n_b are padded (``draft_from_ragged``)."""
    logits = checks.dense("logits", logits, _LOGIT_DTYPES)
    if logits.dim() != 2 or logits.shape[1] < 1:
        raise ValueError(f"logits: expected shape [num_tokens + B, V] with V >= 1, got {tuple(logits.shape)}")
    cu = _offsets("cu", cu, "logits", logits)
    d = checks.integer("depth", depth, 1, _I32_MAX - 1)
    return from_ragged(logits, cu_with_bonus(cu), d + 1, fill=0)


def target_logits_to_ragged(target_logits: torch.Tensor, lengths: torch.Tensor, num_tokens: int) -> tuple[
        torch.Tensor, torch.Tensor]:
    """pp3's ``target_logits`` [B, D+1, V] -> (flat [num_tokens + B, V], logits offsets [B+1] int32): rows 0 ..
    n_b of request b (its drafts' rows and its bonus row), ``n_b = lengths[b]`` clamped to 0 .. D, the layout of
    ``target_logits_from_ragged``. ``num_tokens``: the draft row count as in ``to_ragged``."""
    x = _padded("target_logits", target_logits, _LOGIT_DTYPES, extra=1)
    if x.dim() != 3 or x.shape[1] < 2:
        raise ValueError(f"target_logits: expected shape [B, D+1, V] with D >= 1, got {tuple(x.shape)}")
    b, d1 = x.shape[:2]
    lengths = _lengths("lengths", lengths, b, "target_logits", x)
    n_out = _num_tokens(num_tokens)
    checks.integer("num_tokens + B", n_out + b, 0, _I32_MAX)
    src, valid, cu = _flat_index(lengths.clamp(0, d1 - 1) + 1, d1, n_out + b)
    return _take_rows(x.flatten(0, 1), src, valid, 0), cu.to(torch.int32)


def sampled_counts(accepted: torch.Tensor) -> torch.Tensor:
    """The tokens each row emitted, [B] int32: ``accepted + 1`` (SPEC.md §11.8; a failed row's -1 gives 0). vLLM
    MRV2's ``num_sampled``."""
    accepted = checks.dense("accepted", accepted, (torch.int32,))
    if accepted.dim() != 1 or accepted.shape[0] < 1:
        raise ValueError(f"accepted: expected shape [B] with B >= 1, got {tuple(accepted.shape)}")
    return accepted + 1


def verdict_to_ragged(tokens: torch.Tensor, accepted: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A verdict's ``tokens`` [B, D+1] and ``accepted`` [B] -> (the emitted tokens packed, [B * (D+1)] int32, -1
    after the last; offsets [B+1] int32): row b's ``accepted[b] + 1`` tokens at ``cu[b] .. cu[b+1]-1``. The
    output has the fixed maximum size, so no count is needed on the host.

    ``tokens`` itself is already vLLM V1's ``output_token_ids`` [B, max_spec_len + 1] (``PLACEHOLDER_TOKEN_ID`` =
    -1 after the emitted tokens) when D = max_spec_len, and, with ``sampled_counts(accepted)``, MRV2's
    (``sampled``, ``num_sampled``). A failed row (status != 0) emits nothing: vLLM has no such state."""
    tokens = _padded("tokens", tokens, (torch.int32,))
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens: expected shape [B, D+1] with D >= 1, got {tuple(tokens.shape)}")
    b, d1 = tokens.shape
    accepted = checks.dense("accepted", accepted, (torch.int32,))
    checks.shaped("accepted", accepted, (b,), "[B]")
    checks.on("accepted", accepted, tokens.device, "tokens is")
    checks.integer("B * (D+1)", b * d1, 0, _I32_MAX)
    src, valid, cu = _flat_index(sampled_counts(accepted), d1, b * d1)
    return _take_rows(tokens.flatten(0, 1), src, valid, EMPTY_ID), cu.to(torch.int32)


def verdict_from_ragged(flat: torch.Tensor, cu: torch.Tensor, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed emitted tokens [N] int32 with offsets [B+1] -> (``tokens`` [B, depth+1] int32, -1 after the emitted
    ones; ``accepted`` [B] int32 = emitted - 1, so a request with none is -1, a failed row): the inverse of
    ``verdict_to_ragged``."""
    flat = checks.dense("flat", flat, (torch.int32,))
    if flat.dim() != 1:
        raise ValueError(f"flat: expected shape [N], got {tuple(flat.shape)}")
    cu = _offsets("cu", cu, "flat", flat)
    d = checks.integer("depth", depth, 1, _I32_MAX - 1)
    tokens = from_ragged(flat, cu, d + 1, fill=EMPTY_ID)
    emitted = (cu[1:] - cu[:-1]).clamp(0, d + 1)
    return tokens, (emitted - 1).to(torch.int32)


# ---------------------------------------------------------------------------------------------------- keys


def row_keys_from_table(
    seed_table: torch.Tensor,
    round_table: torch.Tensor,
    position_table: torch.Tensor,
    idx_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The keys of a batch, gathered from per-request state tables on the device (vLLM MRV2's persistent request
    slots): ``(seed, round, position)``, each [B] int64 holding uint64 bits, the form pp3's launchers
    (``pp3.kernels.propose``, ``pp3.kernels.verify``, ``TPDrafter.draft_sampled``) take.

    Tables: [R] int64 or uint64 (uint64 bits either way: 2^64 - 1 is stored as int64 -1), one entry per request
    slot: the request's seed, its speculation round, and the absolute position of its next draft token 0 (SPEC.md
    §2; the verifier's ``position``, §11.2). ``idx_mapping``: [B] int32/int64, the slot of each batch row. A slot
    index outside 0 .. R-1 fails in torch's index check (CPU: at the call; CUDA: a device-side assertion)."""
    idx = checks.dense("idx_mapping", idx_mapping, _INT_DTYPES)
    if idx.dim() != 1 or idx.shape[0] < 1:
        raise ValueError(f"idx_mapping: expected shape [B] with B >= 1, got {tuple(idx.shape)}")
    tables = []
    for name, table in (("seed_table", seed_table), ("round_table", round_table),
                        ("position_table", position_table)):
        t = checks.dense(name, table, (torch.int64, torch.uint64))
        if t.dim() != 1 or t.shape[0] < 1:
            raise ValueError(f"{name}: expected shape [R] with R >= 1 request slots, got {tuple(t.shape)}")
        checks.on(name, t, idx.device, "idx_mapping is")
        tables.append(t.view(torch.int64))
    seed, rnd, pos = (t.index_select(0, idx) for t in tables)  # after every check
    return seed, rnd, pos
