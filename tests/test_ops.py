"""pp3's kernels as torch custom operators (pp3.ops) and the launchers' caller-owned outputs (``out=``).

Runs under TRITON_INTERPRET=1 on the CPU (small sizes) or on a CUDA GPU; skipped otherwise. Every comparison is exact.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
    pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU", allow_module_level=True)

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import pp3.ops  # noqa: E402, F401  (registers torch.ops.pp3.*)
from pp3.kernels import Proposal, Verdict, finalize, propose, tile_candidates, verify  # noqa: E402
from pp3.testing.drafts import random_case  # noqa: E402

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning"),
]
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
OPS = torch.ops.pp3


def _keys(b: int) -> tuple[Any, ...]:
    temp = torch.tensor([1.0, 0.0, 0.7][:b] + [1.0] * max(0, b - 3), device=DEV)
    seed = torch.arange(b, dtype=torch.int64, device=DEV) * 7 - 3  # -3: a uint64 near 2^64
    rnd = torch.full((b,), 2, dtype=torch.int64, device=DEV)
    pos = torch.arange(b, dtype=torch.int64, device=DEV) + 11
    return temp, seed, rnd, pos


def _same(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and torch.equal(g, w)


def _verify_case(b: int = 3, d: int = 2, v: int = 40) -> tuple[Any, ...]:
    case = random_case(np.random.default_rng(5), b, d, v, 1.0)

    def t(a: Any) -> Any:
        return torch.as_tensor(np.ascontiguousarray(a)).to(DEV)

    return (
        t(case["target_logits"]), torch.ones(b, device=DEV), t(case["draft_tokens"]), t(case["draft_status"]),
        t(case["draft_ids"]), t(case["draft_tickets"]), t(case["seed"].view(np.int64)),
        torch.full((b,), 3, dtype=torch.int64, device=DEV), t(case["position"].view(np.int64)),
    )


def test_selector_ops_equal_the_launchers() -> None:
    x = torch.randn(3, 2500, device=DEV)
    keys = _keys(3)
    p = propose(x, *keys)
    want = (p.status, p.token, p.ids, p.tickets)
    _same(OPS.propose(x, *keys), want)
    kf = OPS.tile_candidates(x, 0, None)
    c = tile_candidates(x)
    _same(kf, (c.keys, c.flags))
    _same(OPS.finalize(*kf, *keys, 2500), want)
    out = tuple(torch.full_like(t, 99) for t in want)
    OPS.propose_out(x, *keys, *out)
    _same(out, want)


def test_verifier_ops_equal_the_launcher() -> None:
    args = _verify_case()
    v = verify(*args)
    want = (v.status, v.accepted, v.tokens)
    _same(OPS.verify(*args), want)
    out = tuple(torch.full_like(t, 99) for t in want)
    OPS.verify_out(*args, *out)
    _same(out, want)


def test_fake_implementations_give_shapes_and_dtypes_without_running() -> None:
    """Under FakeTensorMode nothing runs (V = 163840 costs nothing); every output has the launcher's shape and dtype."""
    with FakeTensorMode():
        x = torch.empty(4, 163840)
        temp, i64 = torch.empty(4), torch.empty(4, dtype=torch.int64)
        got = OPS.propose(x, temp, i64, i64, i64)
        assert [(tuple(t.shape), t.dtype) for t in got] == [((4,), torch.int8), ((4,), torch.int32),
                                                            ((4, 32), torch.int32), ((4, 32), torch.int32)]
        keys, flags = OPS.tile_candidates(x, 0, None)
        assert tuple(keys.shape) == (4, 40, 32) and tuple(flags.shape) == (4, 40)  # auto tile 4096: 40 tiles
        assert tuple(OPS.finalize(keys, flags, temp, i64, i64, i64, 163840)[2].shape) == (4, 32)
        logits = torch.empty(4, 6, 163840)
        st, acc, tok = OPS.verify(logits, temp, torch.empty(4, 5, dtype=torch.int32),
                                  torch.empty(4, 5, dtype=torch.int8), torch.empty(4, 5, 32, dtype=torch.int32),
                                  torch.empty(4, 5, 32, dtype=torch.int32), i64, i64, i64)
        assert (tuple(st.shape), st.dtype, tuple(acc.shape), tuple(tok.shape)) == ((4,), torch.int8, (4,), (4, 6))


def test_opcheck() -> None:
    """torch.library.opcheck: schema, fake against real, dispatch under AOT tracing."""
    x = torch.randn(2, 300, device=DEV)
    torch.library.opcheck(OPS.propose.default, (x, *_keys(2)))
    torch.library.opcheck(OPS.verify.default, _verify_case(2, 1, 20))


def test_a_compiled_speculative_step_equals_eager() -> None:
    """A depth-3 draft loop with device-tensor keys and the verifier, under torch.compile(fullgraph=True): one graph,
    no graph break (fullgraph raises on one), the same bits as the eager calls."""
    b, d, v = 2, 3, 300
    drafts = torch.randn(d, b, v, device=DEV)
    target = torch.randn(b, d + 1, v, device=DEV)
    temp, seed, rnd, pos = _keys(b)
    temp = torch.ones(b, device=DEV)

    def step(drafts: Any, target: Any, temp: Any, seed: Any, rnd: Any, pos: Any) -> Any:
        outs = [OPS.propose(drafts[j], temp, seed, rnd, pos + j) for j in range(d)]
        status, token, ids, tickets = (torch.stack([o[f] for o in outs], 1) for f in range(4))
        return OPS.verify(target, temp, token, status, ids, tickets, seed, rnd, pos)

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    _same(compiled(drafts, target, temp, seed, rnd, pos), step(drafts, target, temp, seed, rnd, pos))


def test_a_refusal_under_torch_compile_arrives_wrapped_with_the_original_in_its_chain() -> None:
    """docs/INTEGRATION.md: a refusal found while tracing arrives as Dynamo's TorchRuntimeError (a RuntimeError),
    its message quoting the original and its exception chain holding it; one found when the graph runs arrives as
    itself (outputs over one buffer through two storages, which no fake tensor can see: Inductor, torch.compile's
    default backend, runs the operator on the caller's buffers)."""
    temp, seed, rnd, pos = _keys(2)
    x = torch.randn(2, 300, device=DEV)
    with pytest.raises(RuntimeError, match=r"got TypeError\('seed: ") as e:
        compiled = torch.compile(lambda x, s: OPS.propose(x, temp, s, rnd, pos), fullgraph=True, backend="aot_eager")
        compiled(x, seed.int())
    chain: list[BaseException] = []
    link: BaseException | None = e.value
    while link is not None:
        chain.append(link)
        link = link.__cause__ or link.__context__
    assert any(isinstance(c, TypeError) and str(c).startswith("seed: ") for c in chain), chain
    out = [torch.empty(2, dtype=torch.int8, device=DEV), torch.empty(2, dtype=torch.int32, device=DEV),
           torch.empty(2, 32, dtype=torch.int32, device=DEV)]
    tickets = torch.from_dlpack(out[2])
    with pytest.raises(ValueError, match=r"^out\.tickets: shares memory with out\.ids"):
        torch.compile(lambda x: OPS.greedy_out(x, *out, tickets))(x)


@pytest.mark.parametrize(
    ("field", "bad", "error"),
    [
        ("token", lambda t: t.to(torch.int64), TypeError),
        ("ids", lambda t: t[:, :16], ValueError),
        ("tickets", lambda t: t.t().contiguous().t(), ValueError),  # not contiguous
        ("status", lambda t: t.to("meta"), ValueError),
    ],
)
def test_bad_out_buffers_raise_naming_the_field(field: str, bad: Any, error: type[Exception]) -> None:
    x = torch.randn(3, 500, device=DEV)
    good = propose(x, *_keys(3))
    out = Proposal(**{f: getattr(good, f).clone() for f in ("status", "token", "ids", "tickets")})
    broken = Proposal(**{f: bad(getattr(out, f)) if f == field else getattr(out, f)
                         for f in ("status", "token", "ids", "tickets")})
    with pytest.raises(error, match=f"out.{field}"):
        propose(x, *_keys(3), out=broken)
    with pytest.raises(TypeError, match="out"):
        propose(x, *_keys(3), out=(good.status, good.token))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="out"):
        verify(*_verify_case(), out=good)  # type: ignore[arg-type]


def test_out_buffers_are_written_in_place() -> None:
    x = torch.randn(3, 500, device=DEV)
    want = propose(x, *_keys(3))
    out = Proposal(*(torch.zeros_like(getattr(want, f)) for f in ("status", "token", "ids", "tickets")))
    got = propose(x, *_keys(3), out=out)
    assert got is out and all(torch.equal(getattr(out, f), getattr(want, f)) for f in ("token", "ids", "tickets"))
    got2 = finalize(tile_candidates(x), *_keys(3), vocab_size=500, out=out)
    assert got2 is out and torch.equal(out.tickets, want.tickets)
    args = _verify_case()
    v = verify(*args)
    vout = Verdict(*(torch.full_like(getattr(v, f), 7) for f in ("status", "accepted", "tokens")))
    assert verify(*args, out=vout) is vout and torch.equal(vout.tokens, v.tokens)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA-graph capture needs a CUDA GPU")
def test_compiled_step_captures_in_a_cuda_graph() -> None:
    b, v = 2, 5000
    x = torch.randn(b, v, device=DEV)
    temp, seed, rnd, pos = _keys(b)
    out = Proposal(*(t.clone() for t in OPS.propose(x, temp, seed, rnd, pos)))
    compiled = torch.compile(lambda x, p: OPS.propose_out(x, temp, seed, rnd, p, *[
        out.status, out.token, out.ids, out.tickets]), fullgraph=True, backend="aot_eager")
    compiled(x, pos)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        compiled(x, pos)
    x.copy_(torch.randn(b, v, device=DEV))
    pos.add_(5)
    graph.replay()
    want = propose(x, temp, seed, rnd, pos)
    assert torch.equal(out.token, want.token) and torch.equal(out.tickets, want.tickets)
