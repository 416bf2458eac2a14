"""Bad calls are refused alike by the custom operators (``torch.ops.pp3.*``), by their fake implementations under
``FakeTensorMode`` and by the launchers (``pp3.kernels``): outputs that share memory with each other or with an input
(the same tensor twice, overlapping views, a view of an input's storage; two storages over one memory, from
``torch.from_numpy`` or DLPack, by the op and the launcher), outputs of the wrong dtype, shape or
device, inputs on mixed devices (a ``meta`` tensor among CPU or CUDA ones), V = 0. Each case raises the same
exception class on all three paths, before any launch (the kernels are replaced by ones that fail if launched),
and the launcher's message names the argument.

Runs under TRITON_INTERPRET=1 on the CPU or on a CUDA GPU; skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU", allow_module_level=True)

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

import pp3.ops  # noqa: E402, F401  (registers torch.ops.pp3.*)
from pp3.kernels import Candidates, Proposal, Verdict, accept, select  # noqa: E402
from pp3.testing.drafts import random_case  # noqa: E402

pytestmark = pytest.mark.interpreter
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
OPS = torch.ops.pp3
B, V, D = 3, 100, 2


def _keys() -> list[Any]:
    return [torch.ones(B, device=DEV), *(torch.arange(B, dtype=torch.int64, device=DEV) + i for i in range(3))]


def _proposal() -> list[Any]:
    return [torch.empty(B, dtype=torch.int8, device=DEV), torch.empty(B, dtype=torch.int32, device=DEV),
            torch.empty(B, 32, dtype=torch.int32, device=DEV), torch.empty(B, 32, dtype=torch.int32, device=DEV)]


def _verdict() -> list[Any]:
    return [torch.empty(B, dtype=torch.int8, device=DEV), torch.empty(B, dtype=torch.int32, device=DEV),
            torch.empty(B, D + 1, dtype=torch.int32, device=DEV)]


def _logits() -> Any:
    return torch.randn(B, V, device=DEV)


def _verify_inputs() -> list[Any]:
    case = random_case(np.random.default_rng(5), B, D, V, 1.0)

    def t(a: Any) -> Any:
        return torch.as_tensor(np.ascontiguousarray(a)).to(DEV)

    keys = _keys()
    return [t(case["target_logits"]), keys[0], t(case["draft_tokens"]), t(case["draft_status"]), t(case["draft_ids"]),
            t(case["draft_tickets"]), *keys[1:]]


def _candidates() -> list[Any]:
    c = select.tile_candidates(_logits(), tile=32)
    return [c.keys, c.flags]


def _overlapping(n: int, shift: int, *shape: int) -> tuple[Any, Any]:
    """Two contiguous int32 views of one storage, the second ``shift`` elements after the first."""
    buf = torch.empty(n + shift, dtype=torch.int32, device=DEV)
    return buf[:n].view(shape), buf[shift : shift + n].view(shape)


def _with(args: list[Any], at: int, value: Any) -> list[Any]:
    return [value if i == at else a for i, a in enumerate(args)]


def _propose_out(change: Callable[[list[Any], list[Any]], list[Any]]) -> Callable[[], list[Any]]:
    """propose_out's arguments, its outputs (positions 5 .. 8) changed by ``change(inputs, outputs)``."""
    def make() -> list[Any]:
        inputs = [_logits(), *_keys()]
        return [*inputs, *change(inputs, _proposal())]
    return make


def _ids_tickets_overlap(inputs: list[Any], out: list[Any]) -> list[Any]:
    ids, tickets = _overlapping(B * 32, 40, B, 32)
    return [out[0], out[1], ids, tickets]


def _accepted_tokens_overlap(inputs: list[Any], out: list[Any]) -> list[Any]:
    buf = torch.empty(B + B * (D + 1), dtype=torch.int32, device=DEV)
    return [out[0], buf[:B], buf[B - 1 : B - 1 + B * (D + 1)].view(B, D + 1)]


def _verify_out(change: Callable[[list[Any], list[Any]], list[Any]]) -> Callable[[], list[Any]]:
    def make() -> list[Any]:
        inputs = _verify_inputs()
        return [*inputs, *change(inputs, _verdict())]
    return make


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    op: str  # the custom operator
    args: Callable[[], list[Any]]  # its arguments (fresh tensors)
    error: type[Exception]
    match: str  # what the launcher's message names


CASES = [
    Case("propose_out: tickets is ids", "propose_out",
         _propose_out(lambda i, o: [o[0], o[1], o[2], o[2]]), ValueError, "out.tickets: shares memory with out.ids"),
    Case("propose_out: ids and tickets overlap", "propose_out", _propose_out(_ids_tickets_overlap), ValueError,
         "out.tickets: shares memory with out.ids"),
    Case("propose_out: status views seed", "propose_out",
         _propose_out(lambda i, o: [i[2].view(torch.int8)[:B], *o[1:]]), ValueError,
         "out.status: shares memory with seed"),
    Case("propose_out: token views the logits", "propose_out",
         _propose_out(lambda i, o: [o[0], i[0].view(torch.int32)[1, :B], *o[2:]]), ValueError,
         "out.token: shares memory with logits"),
    Case("propose_out: token on meta", "propose_out",
         _propose_out(lambda i, o: [o[0], o[1].to("meta"), *o[2:]]), ValueError, "out.token: on meta"),
    Case("propose_out: token int64", "propose_out",
         _propose_out(lambda i, o: [o[0], o[1].long(), *o[2:]]), TypeError, "out.token"),
    Case("propose_out: ids of 16 slots", "propose_out",
         _propose_out(lambda i, o: [*o[:2], o[2][:, :16].contiguous(), o[3]]), ValueError, "out.ids"),
    Case("propose: seed on meta", "propose", lambda: _with([_logits(), *_keys()], 2, _keys()[1].to("meta")),
         ValueError, "seed: on meta"),
    Case("propose: every tensor on meta", "propose", lambda: [a.to("meta") for a in [_logits(), *_keys()]],
         ValueError, "logits: on meta"),
    Case("propose: V = 0", "propose", lambda: [torch.empty(B, 0, device=DEV), *_keys()], ValueError, "logits"),
    Case("propose: position int32", "propose", lambda: _with([_logits(), *_keys()], 4, _keys()[3].int()),
         TypeError, "position"),
    Case("greedy_out: token over the strided logits (which the launcher copies)", "greedy_out",
         lambda: (lambda base, o: [base[:, ::2], o[0], base.view(torch.int32)[1, :B], *o[2:]])(
             torch.randn(B, 2 * V, device=DEV), _proposal()), ValueError, "out.token: shares memory with logits"),
    Case("greedy_out: status is token's first bytes", "greedy_out",
         lambda: (lambda o: [_logits(), o[1].view(torch.int8)[:B], *o[1:]])(_proposal()), ValueError,
         "out.token: shares memory with out.status"),
    Case("tile_candidates: logits on meta", "tile_candidates", lambda: [_logits().to("meta"), 0, 32], ValueError,
         "logits: on meta"),
    Case("finalize: flags on meta", "finalize",
         lambda: (lambda c: [c[0], c[1].to("meta"), *_keys(), V])(_candidates()), ValueError,
         "cands.flags: on meta"),
    Case("finalize: keys int32", "finalize",
         lambda: (lambda c: [c[0].int(), c[1], *_keys(), V])(_candidates()), TypeError, "cands"),
    Case("finalize: seed on meta", "finalize",
         lambda: (lambda c: [*c, *_with(_keys(), 1, _keys()[1].to("meta")), V])(_candidates()), ValueError,
         "seed: on meta"),
    Case("verify_out: tokens overlap accepted", "verify_out", _verify_out(_accepted_tokens_overlap), ValueError,
         "out.tokens: shares memory with out.accepted"),
    Case("verify_out: status views draft_status", "verify_out",
         _verify_out(lambda i, o: [i[3].view(-1)[:B], *o[1:]]), ValueError,
         "out.status: shares memory with draft_status"),
    Case("verify_out: tokens on meta", "verify_out", _verify_out(lambda i, o: [*o[:2], o[2].to("meta")]),
         ValueError, "out.tokens: on meta"),
    Case("verify: draft_ids on meta", "verify", lambda: _with(_verify_inputs(), 4, _verify_inputs()[4].to("meta")),
         ValueError, "draft_ids: on meta"),
]


def _launcher(op: str, a: list[Any]) -> Any:
    """The launcher call that ``torch.ops.pp3.<op>(*a)`` is."""
    if op == "propose":
        return select.propose(*a)
    if op == "propose_out":
        return select.propose(*a[:5], out=Proposal(*a[5:9]))
    if op == "greedy_out":
        return select.greedy(a[0], out=Proposal(*a[1:5]))
    if op == "tile_candidates":
        return select.tile_candidates(a[0], id_offset=a[1], tile=a[2])
    if op == "finalize":
        return select.finalize(Candidates(a[0], a[1]), *a[2:6], vocab_size=a[6])
    if op == "verify":
        return accept.verify(*a)
    assert op == "verify_out"
    return accept.verify(*a[:9], out=Verdict(*a[9:12]))


class _NoLaunch:
    def __getitem__(self, grid: Any) -> Any:
        raise AssertionError("a kernel was launched")


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Triton kernel fails if launched (the checks must refuse first)."""
    monkeypatch.setattr(JITFunction, "__getitem__", lambda self, grid: _NoLaunch()[grid])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_op_its_fake_and_the_launcher_refuse_alike(case: Case, no_launch: None) -> None:
    with pytest.raises(case.error, match=case.match):
        _launcher(case.op, case.args())
    with pytest.raises(case.error):
        getattr(OPS, case.op)(*case.args())
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in case.args()]
    with mode, pytest.raises(case.error):
        getattr(OPS, case.op)(*args)


def test_the_fakes_accept_what_the_launchers_accept() -> None:
    """The fake implementations pass good calls (the cases' buffers made right): each check refuses only a bad
    call."""
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) for a in (_logits(), *_keys(), *_proposal())]
        OPS.propose_out(*fake)
        OPS.greedy_out(fake[0], *fake[5:])
        keys, flags = OPS.tile_candidates(fake[0], 0, 32)
        assert tuple(OPS.finalize(keys, flags, *fake[1:5], V)[2].shape) == (B, 32)
        vin = [mode.from_tensor(a) for a in (*_verify_inputs(), *_verdict())]
        OPS.verify_out(*vin)


def _sharded_out_views_shard() -> Any:
    base = torch.randn(B * 50, device=DEV)
    out = _proposal()
    out[1] = base.view(torch.int32)[B : 2 * B]
    return select.greedy_sharded([_logits()[:, :50], base.view(B, 50)], out=Proposal(*out))


def _tile_candidates_flags_in_keys() -> Any:
    keys = torch.zeros(B, 4, 32, dtype=torch.int64, device=DEV)
    flags = keys.view(-1).view(torch.int32)[100 : 100 + B * 4].view(B, 4)
    return select.tile_candidates(_logits(), tile=32, out=Candidates(keys, flags))


def _tile_candidates_keys_view_logits() -> Any:
    x = torch.randn(B, 4 * 32 * 2 + 1, device=DEV)
    keys = x.view(-1)[: B * 4 * 32 * 2].view(torch.int64).view(B, 4, 32)
    flags = torch.zeros(B, 4, dtype=torch.int32, device=DEV)
    return select.tile_candidates(x[:, :V], tile=32, out=Candidates(keys, flags))


LAUNCHER_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("propose_sharded: tickets is ids",
     lambda: select.propose_sharded([_logits()[:, :50], _logits()[:, 50:]], *_keys(),
                                    out=Proposal(*(lambda o: [*o[:3], o[2]])(_proposal()))),
     "out.tickets: shares memory with out.ids"),
    ("greedy_sharded: token views shards[1]", _sharded_out_views_shard, r"out.token: shares memory with shards\[1\]"),
    ("tile_candidates: flags inside keys", _tile_candidates_flags_in_keys, "out.flags: shares memory with out.keys"),
    ("tile_candidates: keys view the logits", _tile_candidates_keys_view_logits, "out.keys: shares memory with logits"),
    ("finalize: out.ids views cands.keys",
     lambda: (lambda c, o: select.finalize(Candidates(*c), *_keys(), vocab_size=V, out=Proposal(
         o[0], o[1], c[0].view(torch.int32).view(-1)[: B * 32].view(B, 32), o[3])))(_candidates(), _proposal()),
     "out.ids: shares memory with cands.keys"),
    ("verify: out.status views target_temperature",
     lambda: (lambda a, o: accept.verify(*a, out=Verdict(a[1].view(torch.int8)[:B], *o[1:])))(
         _verify_inputs(), _verdict()), "out.status: shares memory with target_temperature"),
]


@pytest.mark.parametrize(("name", "call", "match"), LAUNCHER_CASES, ids=[c[0] for c in LAUNCHER_CASES])
def test_every_out_launcher_refuses_shared_memory(name: str, call: Callable[[], Any], match: str,
                                                    no_launch: None) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def _twin(t: Any, how: str) -> Any:
    """A second tensor over ``t``'s memory with a storage object of its own: ``torch.from_numpy`` of the array
    under ``t`` (the CPU), or ``torch.from_dlpack(t)`` (any device)."""
    if how == "numpy":
        if t.device.type != "cpu":
            pytest.skip("torch.from_numpy makes CPU tensors")
        return torch.from_numpy(t.numpy())
    return torch.from_dlpack(t)


def _greedy_ids_tickets(how: str) -> list[Any]:
    """The issue's reproducer: ids and tickets over one array (the ids would hold the tickets)."""
    out = _proposal()
    return [_logits(), out[0], out[1], out[2], _twin(out[2], how)]


def _verify_accepted_tokens(how: str) -> list[Any]:
    """accepted over the first row of tokens (an OK row would read accepted = -1)."""
    out = _verdict()
    return [*_verify_inputs(), out[0], _twin(out[2], how).view(-1)[:B], out[2]]


def _propose_status_seed(how: str) -> list[Any]:
    inputs = [_logits(), *_keys()]
    out = _proposal()
    return [*inputs, _twin(inputs[2], how).view(torch.int8)[:B], *out[1:]]


FOREIGN: list[tuple[str, str, Callable[[str], list[Any]], str]] = [
    ("greedy_out: tickets over ids", "greedy_out", _greedy_ids_tickets, "out.tickets: shares memory with out.ids"),
    ("verify_out: accepted over tokens", "verify_out", _verify_accepted_tokens,
     "out.tokens: shares memory with out.accepted"),
    ("propose_out: status over seed", "propose_out", _propose_status_seed, "out.status: shares memory with seed"),
]


@pytest.mark.parametrize("how", ["numpy", "dlpack"])
@pytest.mark.parametrize(("name", "op", "args", "match"), FOREIGN, ids=[c[0] for c in FOREIGN])
def test_outputs_over_one_memory_through_two_storages_are_refused(
    name: str, op: str, args: Callable[[str], list[Any]], match: str, how: str, no_launch: None
) -> None:
    """Tensors over one memory through two storage objects (``torch.from_numpy`` of one array twice, DLPack) share
    memory: the launcher and the op refuse them as they refuse two views of one storage. (A fake tensor has no
    memory, so its storage object is all a fake implementation can compare: the views of test_the_op_its_fake_and_
    the_launcher_refuse_alike; the op's own check runs on the real tensors, also in a compiled graph.)"""
    with pytest.raises(ValueError, match=match):
        _launcher(op, args(how))
    with pytest.raises(ValueError, match=match):
        getattr(OPS, op)(*args(how))


def _strided_logits_under_token() -> Any:
    """logits a strided view (every other entry: the launcher reads a contiguous copy), out.token over its
    entries: the call would overwrite the caller's logits."""
    base = torch.randn(B, 2 * V, device=DEV)
    out = _proposal()
    out[1] = torch.from_dlpack(base).view(torch.int32)[1, :B]
    return select.greedy(base[:, ::2], out=Proposal(*out))


def _strided_draft_under_tokens() -> Any:
    """draft_tokens a strided view (the launcher copies it), out.tokens over the same memory."""
    a = _verify_inputs()
    wide = torch.zeros(B, 2 * D, dtype=torch.int32, device=DEV)
    wide[:, ::2] = a[2]
    out = _verdict()
    return accept.verify(*_with(a, 2, wide[:, ::2]), out=Verdict(out[0], out[1], wide.view(-1)[: B * (D + 1)].view(
        B, D + 1)))


def _finalize_ids_over_keys() -> Any:
    c, o = _candidates(), _proposal()
    ids = torch.from_dlpack(c[0]).view(torch.int32).view(-1)[: B * 32].view(B, 32)
    return select.finalize(Candidates(*c), *_keys(), vocab_size=V, out=Proposal(o[0], o[1], ids, o[3]))


def _tile_candidates_flags_over_keys() -> Any:
    keys = torch.zeros(B, 4, 32, dtype=torch.int64, device=DEV)
    flags = torch.from_dlpack(keys).view(-1).view(torch.int32)[: B * 4].view(B, 4)
    return select.tile_candidates(_logits(), tile=32, out=Candidates(keys, flags))


def _greedy_sharded_token_over_shard() -> Any:
    shard = torch.randn(B, 50, device=DEV)
    out = _proposal()
    out[1] = torch.from_dlpack(shard).view(torch.int32)[0, :B]
    return select.greedy_sharded([_logits()[:, :50], shard], out=Proposal(*out))


def _propose_sharded_ids_tickets() -> Any:
    out = _proposal()
    out[3] = torch.from_dlpack(out[2])
    return select.propose_sharded([_logits()[:, :50], _logits()[:, 50:]], *_keys(), out=Proposal(*out))


MEMORY_CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("greedy: token over strided logits", _strided_logits_under_token, "out.token: shares memory with logits"),
    ("verify: tokens over strided draft_tokens", _strided_draft_under_tokens,
     "out.tokens: shares memory with draft_tokens"),
    ("finalize: ids over cands.keys", _finalize_ids_over_keys, "out.ids: shares memory with cands.keys"),
    ("tile_candidates: flags over keys", _tile_candidates_flags_over_keys, "out.flags: shares memory with out.keys"),
    ("greedy_sharded: token over shards[1]", _greedy_sharded_token_over_shard,
     r"out.token: shares memory with shards\[1\]"),
    ("propose_sharded: tickets over ids", _propose_sharded_ids_tickets, "out.tickets: shares memory with out.ids"),
]


@pytest.mark.parametrize(("name", "call", "match"), MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_every_out_launcher_judges_memory_not_storage_objects(name: str, call: Callable[[], Any], match: str,
                                                              no_launch: None) -> None:
    """Every out= launcher compares memory (two storage objects over one buffer) and the caller's own input
    tensors (a strided input that the launcher copies still may not be overwritten)."""
    with pytest.raises(ValueError, match=match):
        call()


def test_disjoint_views_of_one_storage_are_accepted() -> None:
    """Outputs cut from one buffer without overlap (adjacent byte ranges) are accepted and written."""
    x = _logits()
    buf = torch.empty(B * 32 * 2 + 2 * B, dtype=torch.int32, device=DEV)
    ids, tickets = buf[: B * 32].view(B, 32), buf[B * 32 : B * 64].view(B, 32)
    token = buf[B * 64 : B * 64 + B]
    status = buf[B * 64 + B :].view(torch.int8)[:B]
    want = select.propose(x, *_keys())
    got = select.propose(x, *_keys(), out=Proposal(status, token, ids, tickets))
    for f in ("status", "token", "ids", "tickets"):
        assert torch.equal(getattr(got, f), getattr(want, f)), f


@pytest.mark.parametrize(
    "call",
    [lambda x: select.greedy_sharded(x), lambda x: select.propose_sharded(x, *_keys())],
    ids=["greedy_sharded", "propose_sharded"],
)
def test_sharded_calls_refuse_a_tensor_for_shards(call: Callable[[Any], Any], no_launch: None) -> None:
    """One [B, V] tensor where a list of shards is expected is a TypeError naming ``shards`` (its truth value, which
    the empty-list check took, is ambiguous)."""
    with pytest.raises(TypeError, match=r"^shards: expected a sequence"):
        call(_logits())


def test_propose_refuses_a_tile_its_selector_would_not_use(no_launch: None) -> None:
    """``tile`` is the tile selector's: propose on one tensor runs the segment selector unless told otherwise, and
    refuses a tile it would not use (it used to ignore it) rather than switching selectors behind the caller's back."""
    from pp3.kernels import LaunchConfig

    for selector, runs in (("auto", "segment"), ("segments", "segment"), ("onelaunch", "one-launch"), ("rows", "row")):
        with pytest.raises(ValueError, match=rf"^tile: propose on one tensor runs the {runs} selector"):
            select.propose(_logits(), *_keys(), tile=64, launch=LaunchConfig(selector=selector))
    with pytest.raises(ValueError, match=r"^tile: propose_sharded on one tensor"):
        select.propose_sharded([_logits()], *_keys(), tile=64)


def test_propose_uses_a_tile_where_its_selector_has_one() -> None:
    """A tile with the tile selector, or over shards, is used (the same bits as the default: SPEC.md §9)."""
    from pp3.kernels import LaunchConfig

    x, keys = _logits(), _keys()
    want = select.propose(x, *keys)
    for got in (select.propose(x, *keys, tile=32, launch=LaunchConfig(selector="tiles")),
                select.propose_sharded([x[:, :50], x[:, 50:]], *keys, tile=32)):
        for f in ("status", "token", "ids", "tickets"):
            assert torch.equal(getattr(got, f), getattr(want, f)), f
