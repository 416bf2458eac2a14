"""pp3.adapters: the sparse q exported dense (exact values, the empty-slot trap, the previous-columns reset), its
logarithm, the ragged layouts of vLLM both ways, keys gathered through an index mapping, argument checks, and no
host reads (every adapter runs on meta tensors). CPU; the CUDA-graph capture test runs only on a GPU.

Drafts are real proposals of the reference selector (``pp3.testing.drafts.drafts``). Everything compares with
equality, floats through their bits (``pp3.testing.compare.assert_equal``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

torch = pytest.importorskip("torch")

from pp3 import adapters  # noqa: E402
from pp3.adapters import RaggedDraft  # noqa: E402
from pp3.drafter import Draft  # noqa: E402
from pp3.reference import TICKETS, K, verify  # noqa: E402
from pp3.testing.compare import assert_equal, mismatch_report  # noqa: E402
from pp3.testing.drafts import drafts  # noqa: E402

V = 40
D = 3
TEMPERATURE = np.array([1.0, 1.0, 0.0, 1.0], dtype=np.float32)  # row 2 is greedy (T0)


def _np(t: Any) -> npt.NDArray[Any]:
    return np.asarray(t.cpu().numpy())


def make_draft(seed: int, v: int = V) -> tuple[Draft, npt.NDArray[np.float32]]:
    """A real depth-D proposal for 4 rows, and the draft logits [4, D, V]. Row 0: every logit finite (32 slots
    full); row 1: 5 finite logits, token 0 among them (27 empty slots); row 2: T0 (one slot); row 3: a NaN at
    depth 1 (a failed draft: draft length 1)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 2.0, size=(4, D, v)).astype(np.float32)
    x[1, :, 5:] = -np.inf
    x[3, 1, 7] = np.nan
    f = drafts(x, TEMPERATURE, seed=np.arange(4, dtype=np.uint64) + np.uint64(seed), rnd=3, position=100)
    draft = Draft(
        tokens=torch.from_numpy(f["draft_tokens"]),
        status=torch.from_numpy(f["draft_status"]),
        ids=torch.from_numpy(f["draft_ids"]),
        tickets=torch.from_numpy(f["draft_tickets"]),
    )
    return draft, x


def expected_dense(ids: npt.NDArray[np.int32], tickets: npt.NDArray[np.int32], v: int) -> npt.NDArray[np.float32]:
    """The dense q by a plain loop: tickets * 2^-24 (np.ldexp in fp64, exact, then fp32: exact too) at each
    non-empty slot's ID."""
    out = np.zeros((*ids.shape[:-1], v), dtype=np.float32)
    for idx in np.ndindex(*ids.shape[:-1]):
        for i, t in zip(ids[idx], tickets[idx], strict=True):
            if i >= 0:
                out[(*idx, int(i))] = np.float32(np.ldexp(np.float64(t), -24))
    return out


def dense_report(dense: Any, ids: Any, tickets: Any) -> str | None:
    """None if ``dense`` is exactly the sparse q (every ID, every bit), else a mismatch report."""
    return mismatch_report(_np(dense), expected_dense(_np(ids), _np(tickets), dense.shape[-1]), "dense q")


def dense_clamp_scatter(ids: Any, tickets: Any, v: int) -> Any:
    """The wrong export: empty slots' -1 clamped to ID 0, then ``scatter_`` (a write, not an addition)."""
    out = torch.zeros((*ids.shape[:-1], v), dtype=torch.float32)
    return out.scatter_(-1, ids.clamp(min=0).long(), tickets.to(torch.float32) * 2.0**-24)


# --------------------------------------------------------------------------------------------------- dense q


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_probs_is_the_sparse_q_exactly(seed: int) -> None:
    draft, _ = make_draft(seed)
    dense = adapters.dense_probs(draft.ids, draft.tickets, V)
    assert dense.dtype == torch.float32 and tuple(dense.shape) == (4, D, V)
    report = dense_report(dense, draft.ids, draft.tickets)
    assert report is None, report
    # Back to tickets: (q * 2^24).to(int) at the IDs is the tickets, bit for bit; the integer sum is 2^24.
    ids, tix = _np(draft.ids), _np(draft.tickets)
    back = _np((dense * 2.0**24).to(torch.int64))
    at_ids = np.take_along_axis(back, np.maximum(ids, 0).astype(np.int64), axis=-1)
    assert_equal(np.where(ids >= 0, at_ids, 0).astype(np.int32), tix, "tickets recovered at the IDs")
    ok = _np(draft.status) == 0
    assert_equal(back.sum(axis=-1)[ok], np.full(int(ok.sum()), TICKETS, dtype=np.int64), "ticket sum of OK drafts")
    assert_equal(back.sum(axis=-1)[~ok], np.zeros(int((~ok).sum()), dtype=np.int64), "failed drafts: no mass")
    assert (~ok).any() and (ids == -1).any(), "the case must hold a failed draft and empty slots"


def test_scatter_trap_is_caught() -> None:
    """The check of the exactness test catches the clamp + scatter_ export: an empty slot's 0.0 lands on ID 0."""
    draft, _ = make_draft(0)
    ids, tix = draft.ids[1], draft.tickets[1]  # row 1: token 0 in the support, then 27 empty slots
    assert bool((ids[:, 0] == 0).all()) and bool((tix[:, 0] > 0).all()) and bool((ids[:, 5:] == -1).all())
    wrong = dense_clamp_scatter(ids, tix, V)
    report = dense_report(wrong, ids, tix)
    assert report is not None and f"{D} of {D * V} differ" in report and ", 0):" in report, report
    right = adapters.dense_probs(ids, tix, V)
    assert dense_report(right, ids, tix) is None


def test_previous_ids_reset_leaves_no_stale_mass() -> None:
    a, _ = make_draft(0)
    b, _ = make_draft(5)
    assert not torch.equal(a.ids, b.ids)
    buf = torch.zeros((4, D, V), dtype=torch.float32)
    first = adapters.dense_probs(a.ids, a.tickets, V, out=buf)
    assert first.data_ptr() == buf.data_ptr()
    second = adapters.dense_probs(b.ids, b.tickets, V, out=buf, previous_ids=a.ids)
    assert second.data_ptr() == buf.data_ptr()
    fresh = adapters.dense_probs(b.ids, b.tickets, V)
    assert_equal(_np(second), _np(fresh), "dense q after the reset of the previous IDs")
    # The check has teeth: resetting the wrong columns leaves step one's mass behind.
    adapters.dense_probs(a.ids, a.tickets, V, out=buf, previous_ids=b.ids)
    stale = adapters.dense_probs(b.ids, b.tickets, V, out=buf, previous_ids=b.ids)
    assert mismatch_report(_np(stale), _np(fresh), "stale") is not None
    # out= without previous_ids zeroes the whole buffer.
    buf.fill_(7.0)
    assert_equal(_np(adapters.dense_probs(b.ids, b.tickets, V, out=buf)), _np(fresh), "dense q into a dirty out=")


def test_log_probs_and_token_log_q() -> None:
    a, _ = make_draft(0)
    b, _ = make_draft(5)
    logq = adapters.log_probs(a.ids, a.tickets, V)
    dense = adapters.dense_probs(a.ids, a.tickets, V)
    assert_equal(_np(logq), _np(torch.log(dense)), "log_probs = torch.log of the exact dense q")
    assert bool((logq[_np(a.status) != 0] == float("-inf")).all())
    # The previous-columns reset, as for dense_probs (reset to -inf).
    buf = torch.full((4, D, V), float("-inf"))
    adapters.log_probs(a.ids, a.tickets, V, out=buf)
    second = adapters.log_probs(b.ids, b.tickets, V, out=buf, previous_ids=a.ids)
    assert_equal(_np(second), _np(adapters.log_probs(b.ids, b.tickets, V)), "log q after the reset")
    # Drafted tokens: q exact, log q the same bits as log_probs there, -inf for failed drafts (token -1).
    q = adapters.token_q(a.ids, a.tickets, a.tokens)
    lq = adapters.token_log_q(a.ids, a.tickets, a.tokens)
    ids, tix, tok = _np(a.ids), _np(a.tickets), _np(a.tokens)
    want_q = np.where(tok >= 0, np.ldexp(np.where(ids == tok[..., None], tix, 0).sum(-1), -24), 0.0).astype(np.float32)
    assert_equal(_np(q), want_q, "token_q")
    at_tok = np.take_along_axis(_np(logq), np.maximum(tok, 0)[..., None].astype(np.int64), axis=-1)[..., 0]
    assert_equal(_np(lq), np.where(tok >= 0, at_tok, np.float32(-np.inf)), "token_log_q")
    assert (tok == -1).any() and bool((lq[tok == -1] == float("-inf")).all())


def test_token_q_ignores_empty_slots_for_token_minus_one() -> None:
    """A token -1 must not match an empty slot's ID -1 (even a malformed one that carries tickets)."""
    ids = torch.full((1, K), -1, dtype=torch.int32)
    tix = torch.zeros((1, K), dtype=torch.int32)
    ids[0, 0], tix[0, 0], tix[0, 1] = 3, TICKETS, 5
    assert _np(adapters.token_q(ids, tix, torch.tensor([-1], dtype=torch.int32))).tolist() == [0.0]
    assert _np(adapters.token_q(ids, tix, torch.tensor([3], dtype=torch.int32))).tolist() == [1.0]


# ---------------------------------------------------------------------------------------------------- ragged


def ragged_by_loop(x: npt.NDArray[Any], lengths: list[int]) -> tuple[npt.NDArray[Any], list[int]]:
    flat = np.concatenate([x[b, :n] for b, n in enumerate(lengths)], axis=0)
    return flat, [0, *np.cumsum(lengths).tolist()]


@pytest.mark.parametrize(
    ("b", "d", "lengths"),
    [
        (1, 1, [1]),  # B = 1, D = 1
        (1, 1, [0]),  # B = 1, an empty draft: N = 0
        (1, 5, [3]),
        (4, 5, [0, 5, 2, 0]),  # zero-length drafts first and last, a full one
        (3, 2, [0, 0, 0]),  # every draft empty: N = 0
        (5, 3, [3, 0, 2, 0, 1]),  # vLLM's own example
    ],
)
@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.float32])
def test_ragged_round_trip(b: int, d: int, lengths: list[int], dtype: Any) -> None:
    rng = np.random.default_rng(b * 100 + d)
    x = torch.from_numpy(rng.integers(-100, 100, size=(b, d, 3))).to(dtype)
    n = sum(lengths)
    lens = torch.tensor(lengths, dtype=torch.int32)
    flat, cu = adapters.to_ragged(x, lens, n, fill=-9)
    want, want_cu = ragged_by_loop(_np(x), lengths)
    assert_equal(_np(flat), want, "flat")
    assert_equal(_np(cu), np.array(want_cu, dtype=np.int32), "cu")
    back = adapters.from_ragged(flat, cu, d, fill=-9)
    keep = np.arange(d)[None, :] < np.array(lengths)[:, None]
    assert_equal(_np(back), np.where(keep[..., None], _np(x), np.array(-9).astype(_np(x).dtype)), "padded")
    # A padded flat buffer (a CUDA graph's fixed size): the tail holds fill, the round trip is unchanged.
    big, cu2 = adapters.to_ragged(x, lens, n + 4, fill=-9)
    assert_equal(_np(big[:n]), want, "flat, padded buffer")
    assert bool((big[n:] == -9).all()) and torch.equal(cu2, cu)
    assert torch.equal(adapters.from_ragged(big, cu2, d, fill=-9), back)


def test_ragged_of_strided_views() -> None:
    """Views whose first two dimensions do not merge (a slice of D, a transpose) flatten as their contiguous copies:
    the merged-row gather (``_gather``) copies such an input first instead of reading wrong rows."""
    rng = np.random.default_rng(3)
    base = torch.from_numpy(rng.normal(size=(4, 7, 5)).astype(np.float32))
    lens = torch.tensor([3, 0, 5, 1], dtype=torch.int32)
    for x in (base[:, 1:6], base.transpose(0, 1)[:4, :4]):
        assert not x.is_contiguous()
        for got, want in zip(adapters.to_ragged(x, lens, 10, fill=-1), adapters.to_ragged(x.contiguous(), lens, 10,
                                                                                           fill=-1), strict=True):
            assert torch.equal(got, want)
    target = base.transpose(1, 2)  # [4, 5, 7]: D + 1 = 5, "V" = 7
    got_t = adapters.target_logits_to_ragged(target, lens, 9)
    want_t = adapters.target_logits_to_ragged(target.contiguous(), lens, 9)
    assert all(torch.equal(g, w) for g, w in zip(got_t, want_t, strict=True))


def test_vllm_layouts() -> None:
    """vLLM's documented example (gpu_model_runner._calc_spec_decode_metadata): num_draft_tokens [3, 0, 2, 0, 1]."""
    lengths = torch.tensor([3, 0, 2, 0, 1], dtype=torch.int64)
    tok = torch.arange(15, dtype=torch.int32).reshape(5, 3)
    flat, cu = adapters.to_ragged(tok, lengths, 6)
    assert _np(flat).tolist() == [0, 1, 2, 6, 7, 12]  # draft_token_ids
    assert _np(cu)[1:].tolist() == [3, 3, 5, 5, 6]  # cu_num_draft_tokens
    cu_logits = adapters.cu_with_bonus(cu)
    assert _np(cu_logits).tolist() == [0, 4, 5, 8, 9, 11]  # cu_num_sampled_tokens with a leading 0
    bonus = _np(cu_logits)[1:] - 1
    assert bonus.tolist() == [3, 4, 7, 8, 10]  # bonus_logits_indices
    rng = np.random.default_rng(7)
    target = torch.from_numpy(rng.normal(size=(5, 4, V)).astype(np.float32))
    logits, cu_l = adapters.target_logits_to_ragged(target, lengths, 6)
    assert tuple(logits.shape) == (11, V) and torch.equal(cu_l, cu_logits)
    target_idx = [0, 1, 2, 5, 6, 9]  # target_logits_indices
    rows = [(b, j) for b, n in enumerate(_np(lengths)) for j in range(n)]
    assert_equal(_np(logits)[target_idx], np.stack([_np(target)[r] for r in rows]), "draft rows")
    assert_equal(_np(logits)[bonus], _np(target)[np.arange(5), _np(lengths)], "bonus rows")
    back = adapters.target_logits_from_ragged(logits, cu, 3)
    keep = np.arange(4)[None, :] <= _np(lengths)[:, None]
    assert_equal(_np(back), np.where(keep[..., None], _np(target), np.float32(0)), "target logits [B, D+1, V]")


def _verdict(draft: Draft, target: npt.NDArray[np.float32]) -> Any:
    return verify(target_logits=target, target_temperature=TEMPERATURE, seed=np.arange(4, dtype=np.uint64),
                  round=3, position=100, **draft.numpy())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_draft_and_target_round_trip_verify_the_same(seed: int) -> None:
    """Drafts and target logits flattened and padded again: the fields equal up to each draft length, padding
    after, and the reference verifier returns the same verdict as on the originals."""
    draft, x = make_draft(seed)
    lengths = adapters.draft_lengths(draft.status)
    assert _np(lengths).tolist() == [3, 3, 3, 1]
    n = int(_np(lengths).sum())
    ragged = adapters.draft_to_ragged(draft, n)
    assert tuple(ragged.ids.shape) == (n, K) and _np(ragged.cu).tolist() == [0, 3, 6, 9, 10]
    back = adapters.draft_from_ragged(ragged, D)
    keep = np.arange(D)[None, :] < _np(lengths)[:, None]
    for name, pad in (("tokens", -1), ("status", adapters.PAD_STATUS), ("ids", -1), ("tickets", 0)):
        orig, got = _np(getattr(draft, name)), _np(getattr(back, name))
        k = keep if orig.ndim == 2 else keep[..., None]
        assert_equal(got, np.where(k, orig, np.array(pad).astype(orig.dtype)), name)
    rng = np.random.default_rng(seed + 10)
    target = np.concatenate([x, rng.normal(size=(4, 1, V)).astype(np.float32)], axis=1)  # [B, D+1, V]
    target[:, 1:] += rng.normal(size=(4, D, V)).astype(np.float32)
    logits, _ = adapters.target_logits_to_ragged(torch.from_numpy(target), lengths, n)
    target_back = _np(adapters.target_logits_from_ragged(logits, ragged.cu, D))
    want, got = _verdict(draft, target), _verdict(back, target_back)
    for field in ("status", "accepted", "tokens"):
        assert_equal(getattr(got, field), getattr(want, field), field)


def test_verdict_round_trip() -> None:
    draft, x = make_draft(0)
    target = np.concatenate([x, x[:, :1]], axis=1)
    target[np.isnan(target)] = 0.0
    target[0, 0, 0] = np.nan  # row 0 fails verification: accepted -1, no tokens
    res = _verdict(draft, target)
    tokens, accepted = torch.from_numpy(res.tokens), torch.from_numpy(res.accepted)
    assert _np(accepted)[0] == -1 and (_np(accepted)[1:] >= 0).all()
    assert _np(adapters.sampled_counts(accepted)).tolist() == (res.accepted + 1).tolist()
    flat, cu = adapters.verdict_to_ragged(tokens, accepted)
    emitted = [res.tokens[b, : res.accepted[b] + 1] for b in range(4)]
    n = sum(len(e) for e in emitted)
    assert_equal(_np(flat)[:n], np.concatenate(emitted).astype(np.int32), "emitted tokens")
    assert bool((flat[n:] == -1).all()) and tuple(flat.shape) == (4 * (D + 1),)
    assert _np(cu).tolist() == [0, *np.cumsum([len(e) for e in emitted]).tolist()]
    tokens_back, accepted_back = adapters.verdict_from_ragged(flat, cu, D)
    assert_equal(_np(tokens_back), res.tokens, "tokens")
    assert_equal(_np(accepted_back), res.accepted, "accepted")


# ------------------------------------------------------------------------------------------------------ keys


@pytest.mark.parametrize("table_dtype", [torch.int64, torch.uint64])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
def test_row_keys_from_table(table_dtype: Any, idx_dtype: Any) -> None:
    seeds = [0, 1, (1 << 64) - 1, 1 << 63, 12345, (1 << 63) - 1]
    rounds = [7, 0, 1 << 40, (1 << 64) - 2, 3, 9]
    positions = [100, 5, 0, (1 << 64) - 1, 77, 1 << 32]
    tables = [torch.from_numpy(np.array(t, dtype=np.uint64).view(np.int64)).view(table_dtype)
              for t in (seeds, rounds, positions)]
    idx = [3, 0, 5, 3, 2]  # a permutation with a repeat, as an engine's request slots
    keys = adapters.row_keys_from_table(tables[0], tables[1], tables[2], torch.tensor(idx, dtype=idx_dtype))
    for got, table in zip(keys, (seeds, rounds, positions), strict=True):
        assert got.dtype == torch.int64
        assert_equal(_np(got).view(np.uint64), np.array([table[i] for i in idx], dtype=np.uint64), "keys")


# --------------------------------------------------------------------------------------------- no host reads


def _meta_calls() -> list[tuple[str, Callable[[], Any]]]:
    m = "meta"
    ids = torch.empty((2, D, K), dtype=torch.int32, device=m)
    tix = torch.empty((2, D, K), dtype=torch.int32, device=m)
    tok = torch.empty((2, D), dtype=torch.int32, device=m)
    st = torch.empty((2, D), dtype=torch.int8, device=m)
    lens = torch.empty(2, dtype=torch.int32, device=m)
    cu = torch.empty(3, dtype=torch.int32, device=m)
    out = torch.empty((2, D, V), device=m)
    draft = Draft(tokens=tok, status=st, ids=ids, tickets=tix)
    ragged = RaggedDraft(tokens=tok[0], status=st[0], ids=ids[0], tickets=tix[0], cu=cu)
    table = torch.empty(9, dtype=torch.int64, device=m)
    return [
        ("dense_probs", lambda: adapters.dense_probs(ids, tix, V, out=out, previous_ids=ids)),
        ("log_probs", lambda: adapters.log_probs(ids, tix, V, out=out, previous_ids=ids)),
        ("token_q", lambda: adapters.token_q(ids, tix, tok)),
        ("token_log_q", lambda: adapters.token_log_q(ids, tix, tok)),
        ("to_ragged", lambda: adapters.to_ragged(ids, lens, 4)),
        ("from_ragged", lambda: adapters.from_ragged(ids[0], cu, D)),
        ("draft_lengths", lambda: adapters.draft_lengths(st)),
        ("cu_with_bonus", lambda: adapters.cu_with_bonus(cu)),
        ("draft_to_ragged", lambda: adapters.draft_to_ragged(draft, 4)),
        ("draft_from_ragged", lambda: adapters.draft_from_ragged(ragged, D)),
        ("target_logits_to_ragged", lambda: adapters.target_logits_to_ragged(out, lens, 4)),
        ("target_logits_from_ragged", lambda: adapters.target_logits_from_ragged(out[0], cu, D)),
        ("sampled_counts", lambda: adapters.sampled_counts(lens)),
        ("verdict_to_ragged", lambda: adapters.verdict_to_ragged(tok, lens)),
        ("verdict_from_ragged", lambda: adapters.verdict_from_ragged(tok[0], cu, D)),
        ("row_keys_from_table", lambda: adapters.row_keys_from_table(table, table, table, lens)),
    ]


@pytest.mark.parametrize(("name", "call"), _meta_calls(), ids=[n for n, _ in _meta_calls()])
def test_runs_on_meta_tensors(name: str, call: Callable[[], Any]) -> None:
    """Meta tensors have shapes but no values: any host read (.item(), .tolist(), a value-dependent shape, a copy
    to the host) raises, so an adapter that runs on them reads nothing on the host."""
    call()


# ------------------------------------------------------------------------------------------------ bad arguments


def _bad_calls() -> list[tuple[Callable[[], Any], type[Exception], str]]:
    draft, _ = make_draft(0)
    ids, tix, tok, st = draft.ids, draft.tickets, draft.tokens, draft.status
    lens = adapters.draft_lengths(st)
    cu = torch.tensor([0, 3, 6, 9, 10], dtype=torch.int32)
    ragged = adapters.draft_to_ragged(draft, 10)
    out = torch.zeros((4, D, V))
    meta = torch.empty((4, D, V), device="meta")
    table = torch.zeros(6, dtype=torch.int64)
    idx = torch.zeros(4, dtype=torch.int32)
    tokens = torch.zeros((4, D + 1), dtype=torch.int32)
    acc = torch.zeros(4, dtype=torch.int32)
    return [
        (lambda: adapters.dense_probs(ids.float(), tix, V), TypeError, "ids"),
        (lambda: adapters.dense_probs(ids.numpy(), tix, V), TypeError, "ids"),  # type: ignore[arg-type]
        (lambda: adapters.dense_probs(ids[..., :31], tix[..., :31], V), ValueError, "ids"),
        (lambda: adapters.dense_probs(ids, tix[:1], V), ValueError, "tickets"),
        (lambda: adapters.dense_probs(ids, tix.to(torch.int16), V), TypeError, "tickets"),
        (lambda: adapters.dense_probs(ids, tix, 0), ValueError, "vocab_size"),
        (lambda: adapters.dense_probs(ids, tix, True), TypeError, "vocab_size"),
        (lambda: adapters.dense_probs(ids, tix, 1 << 31), ValueError, "vocab_size"),
        (lambda: adapters.dense_probs(ids, tix, V, out=out.double()), TypeError, "out"),
        (lambda: adapters.dense_probs(ids, tix, V, out=out[:, :, :-1]), ValueError, "out"),
        (lambda: adapters.dense_probs(ids, tix, V, out=meta), ValueError, "out"),
        (lambda: adapters.dense_probs(ids, tix, V, previous_ids=ids), ValueError, "previous_ids"),
        (lambda: adapters.dense_probs(ids, tix, V, out=out, previous_ids=ids[0]), ValueError, "previous_ids"),
        (lambda: adapters.log_probs(ids, tix, V, out=out.half()), TypeError, "out"),
        (lambda: adapters.log_probs(ids, tix, -1), ValueError, "vocab_size"),
        (lambda: adapters.token_log_q(ids, tix, tok[0]), ValueError, "tokens"),
        (lambda: adapters.token_q(ids, tix, tok.float()), TypeError, "tokens"),
        (lambda: adapters.to_ragged(ids[0, 0], lens, 4), ValueError, "x"),
        (lambda: adapters.to_ragged(ids, lens[:2], 4), ValueError, "lengths"),
        (lambda: adapters.to_ragged(ids, lens.float(), 4), TypeError, "lengths"),
        (lambda: adapters.to_ragged(ids, lens, -1), ValueError, "num_tokens"),
        (lambda: adapters.to_ragged(ids, lens, 4.0), TypeError, "num_tokens"),  # type: ignore[arg-type]
        (lambda: adapters.to_ragged(st, lens, 4, fill=300), ValueError, "fill"),
        (lambda: adapters.to_ragged(st, lens, 4, fill=0.5), ValueError, "fill"),
        (lambda: adapters.to_ragged(st, lens, 4, fill="x"), TypeError, "fill"),  # type: ignore[arg-type]
        (lambda: adapters.from_ragged(ragged.ids, cu[None], D), ValueError, "cu"),
        (lambda: adapters.from_ragged(ragged.ids, cu[:1], D), ValueError, "cu"),
        (lambda: adapters.from_ragged(ragged.ids, cu.float(), D), TypeError, "cu"),
        (lambda: adapters.from_ragged(ragged.ids, cu, 0), ValueError, "depth"),
        (lambda: adapters.from_ragged(torch.tensor(1), cu, D), ValueError, "flat"),
        (lambda: adapters.draft_lengths(st.int()), TypeError, "status"),
        (lambda: adapters.draft_to_ragged(draft.numpy(), 10), TypeError, "draft"),  # type: ignore[arg-type]
        (lambda: adapters.draft_to_ragged(Draft(tok, st.int(), ids, tix), 10), TypeError, "draft.status"),
        (lambda: adapters.draft_to_ragged(Draft(tok, st, ids[..., :4], tix), 10), ValueError, "draft.ids"),
        (lambda: adapters.draft_to_ragged(draft, 10, lengths=lens[:1]), ValueError, "lengths"),
        (lambda: adapters.draft_from_ragged(draft, D), TypeError, "ragged"),  # type: ignore[arg-type]
        (lambda: adapters.draft_from_ragged(RaggedDraft(ragged.tokens, ragged.status, ragged.ids,
                                                        ragged.tickets[:2], cu), D), ValueError, "ragged.tickets"),
        (lambda: adapters.target_logits_from_ragged(tokens, cu, D), TypeError, "logits"),
        (lambda: adapters.target_logits_from_ragged(out[0], cu, 0), ValueError, "depth"),
        (lambda: adapters.target_logits_to_ragged(out[:, :1], lens, 4), ValueError, "target_logits"),
        (lambda: adapters.target_logits_to_ragged(out, lens.to("meta"), 4), ValueError, "lengths"),
        (lambda: adapters.cu_with_bonus(cu.float()), TypeError, "cu"),
        (lambda: adapters.sampled_counts(acc.long()), TypeError, "accepted"),
        (lambda: adapters.verdict_to_ragged(tokens, acc[:2]), ValueError, "accepted"),
        (lambda: adapters.verdict_to_ragged(tokens[:, :1], acc), ValueError, "tokens"),
        (lambda: adapters.verdict_from_ragged(tokens[0].long(), cu, D), TypeError, "flat"),
        (lambda: adapters.row_keys_from_table(table.float(), table, table, idx), TypeError, "seed_table"),
        (lambda: adapters.row_keys_from_table(table, table[None], table, idx), ValueError, "round_table"),
        (lambda: adapters.row_keys_from_table(table, table, table.to("meta"), idx), ValueError, "position_table"),
        (lambda: adapters.row_keys_from_table(table, table, table, idx[None]), ValueError, "idx_mapping"),
        (lambda: adapters.row_keys_from_table(table, table, table, idx.float()), TypeError, "idx_mapping"),
    ]


@pytest.mark.parametrize(("call", "exc", "name"), _bad_calls())
def test_bad_arguments_raise_naming_the_argument(call: Callable[[], Any], exc: type[Exception], name: str) -> None:
    with pytest.raises(exc, match=rf"^{re.escape(name)}\b"):
        call()


def test_checks_come_before_any_work() -> None:
    draft, _ = make_draft(0)
    out = torch.full((4, D, V), 7.0)
    with pytest.raises(ValueError, match=r"^previous_ids"):
        adapters.dense_probs(draft.ids, draft.tickets, V, out=out, previous_ids=draft.ids[:1])
    assert bool((out == 7.0).all()), "out was written before the arguments were checked"


# ---------------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CUDA-graph capture)")
def test_cuda_graph_capture_matches_eager() -> None:
    """The per-step adapters run eagerly under torch's sync debug mode "error" (any synchronisation raises), then
    are captured in one CUDA graph and replayed twice on new inputs copied into the static ones: the same bits as
    eager calls on those inputs (into fresh buffers)."""
    dev = torch.device("cuda")
    a, _ = make_draft(0)
    b, _ = make_draft(5)
    tok, st, ids, tix = (t.to(dev) for t in (a.tokens, a.status, a.ids, a.tickets))
    table = torch.arange(9, dtype=torch.int64, device=dev) * 3
    slots = torch.tensor([4, 0, 8, 4], dtype=torch.int32, device=dev)

    def step(dense: Any, logq: Any, prev: Any) -> dict[str, Any]:
        out = {
            "dense": adapters.dense_probs(ids, tix, V, out=dense, previous_ids=prev),
            "logq": adapters.log_probs(ids, tix, V, out=logq, previous_ids=prev),
            "q": adapters.token_log_q(ids, tix, tok),
            "seed": adapters.row_keys_from_table(table, table + 1, table + 2, slots)[0],
        }
        ragged = adapters.draft_to_ragged(Draft(tok, st, ids, tix), 4 * D)
        out["ids"] = adapters.draft_from_ragged(ragged, D).ids
        short = adapters.draft_lengths(st[:, : D - 1])  # the first D-1 drafts against the D rows of dense q
        logits, _ = adapters.target_logits_to_ragged(out["dense"], short, 4 * (D - 1))
        _, cu = adapters.to_ragged(tok[:, : D - 1], short, 4 * (D - 1))
        out["logits"] = adapters.target_logits_from_ragged(logits, cu, D - 1)
        return out

    def fresh() -> tuple[Any, Any, Any]:
        return torch.zeros((4, D, V), device=dev), torch.full((4, D, V), float("-inf"), device=dev), ids.clone()

    buffers = fresh()  # prev = the IDs that the buffers will hold after the first step
    torch.cuda.set_sync_debug_mode("error")
    try:
        step(*buffers)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step(*buffers)
    for new, old in ((b, a), (a, b)):
        buffers[2].copy_(old.ids.to(dev))
        for dst, src in ((tok, new.tokens), (st, new.status), (ids, new.ids), (tix, new.tickets)):
            dst.copy_(src.to(dev))
        graph.replay()
        got = {k: _np(v) for k, v in static.items()}
        want = {k: _np(v) for k, v in step(*fresh()).items()}
        for k in want:
            assert_equal(got[k], want[k], f"{k}, replayed")
