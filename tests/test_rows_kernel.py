"""``pp3.kernels.launchers.gather_rows``, the adapters' one-pass masked row gather on the GPU: equal, bit for bit, to
torch's two passes (``index_select``, ``masked_fill_``) for every element width, NaN payloads and -0.0 included;
invalid rows hold the fill whatever their index says; rows longer than one block and walked in grid strides; and on
a CUDA GPU every ragged adapter equal to its CPU run (the torch path).

Runs through Triton's interpreter on the CPU or natively on a CUDA GPU (where compute-sanitizer runs it too:
``tools/sanitize_cases.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from pp3 import adapters  # noqa: E402
from pp3.drafter import Draft  # noqa: E402
from pp3.kernels import launchers  # noqa: E402
from pp3.kernels.buffers import GATHER_BITS  # noqa: E402
from pp3.reference._constants import K  # noqa: E402

pytestmark = pytest.mark.interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64, torch.bool)


def _torch_path(source: Any, index: Any, valid: Any, fill: Any) -> Any:
    out = torch.index_select(source.cpu(), 0, index.cpu())
    return out.masked_fill_(~valid.cpu().reshape(-1, *([1] * (out.dim() - 1))), fill)


def _bits(x: Any) -> Any:
    """The raw bits as integers (equality of bits: NaN == NaN, -0.0 != +0.0)."""
    return x.cpu().contiguous().view(GATHER_BITS[x.dtype])


def _source(dtype: Any, shape: tuple[int, ...], seed: int) -> Any:
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(-(2**62), 2**62, shape, generator=g, dtype=torch.int64)
    width = torch.empty((), dtype=dtype).element_size()
    # Random bit patterns of the element's width: NaNs with payloads, infinities, subnormals, -0.0 all occur.
    return raw.view(torch.int8).reshape(*shape, 8)[..., :width].contiguous().view(
        GATHER_BITS[dtype]).reshape(shape).view(dtype) if dtype != torch.bool else raw > 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rest", [(), (3,), (2, 5), (4100,)])  # 4100: two blocks of 4096, the second partial
def test_equals_the_torch_passes_bit_for_bit(dtype: Any, rest: tuple[int, ...]) -> None:
    src = _source(dtype, (6, *rest), seed=len(rest))
    index = torch.tensor([5, 0, 0, 3, 2, 4, 1], dtype=torch.int64)
    valid = torch.tensor([True, False, True, True, False, True, True])
    fill = True if dtype == torch.bool else 1  # 1: an integer argument Triton could have specialised
    got = launchers.gather_rows(src.to(DEVICE), index.to(DEVICE), valid.to(DEVICE), adapters._fill_bits(fill, dtype))
    want = _torch_path(src, index, valid, fill)
    assert got.dtype == dtype and tuple(got.shape) == (7, *rest)
    assert torch.equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("fill", [0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"), -float("nan"), -2.0**-14])
def test_float_fills_have_torchs_bits(dtype: Any, fill: float) -> None:
    """The fill's bits from the host (``adapters._fill_bits``) equal what torch's ``masked_fill_`` writes: signed
    zeros, infinities, NaNs of either sign (bfloat16 writes the positive quiet NaN), a subnormal of float16."""
    src = _source(dtype, (2, 3), seed=1)
    index, valid = torch.tensor([1, 0], dtype=torch.int64), torch.tensor([False, True])
    got = launchers.gather_rows(src.to(DEVICE), index.to(DEVICE), valid.to(DEVICE), adapters._fill_bits(fill, dtype))
    assert torch.equal(_bits(got), _bits(_torch_path(src, index, valid, fill)))


def test_fills_a_dtype_does_not_hold_are_refused() -> None:
    for dtype, fill in ((torch.float16, 0.1), (torch.float16, 1e5), (torch.bfloat16, 1.0 + 2.0**-10),
                        (torch.float32, 0.1)):
        with pytest.raises(ValueError, match="fill"):
            adapters.to_ragged(torch.zeros(2, 2, dtype=dtype), torch.tensor([1, 2]), 3, fill=fill)


def test_invalid_rows_hold_the_fill_whatever_their_index() -> None:
    """An invalid row's index is never an address: one past the end and a huge one give the fill."""
    src = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    index = torch.tensor([2, 3, 2**40, 0], dtype=torch.int64)
    valid = torch.tensor([True, False, False, True])
    got = launchers.gather_rows(src.to(DEVICE), index.to(DEVICE), valid.to(DEVICE), -(1 << 31)).cpu()  # -0.0's bits
    assert torch.equal(_bits(got[0]), _bits(src[2])) and torch.equal(_bits(got[3]), _bits(src[0]))
    assert torch.equal(_bits(got[1:3]), _bits(torch.full((2, 4), -0.0)))


def test_long_rows_walk_in_grid_strides(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 4 elements and at most 2 programs per row: a row of 37 takes 5 strides per program."""
    monkeypatch.setattr(launchers, "_GATHER_BLOCK", 4)
    monkeypatch.setattr(launchers, "_MAX_PROGRAMS_PER_ROW", 2)
    src = _source(torch.int32, (3, 37), seed=9)
    index = torch.tensor([1, 2, 0, 1], dtype=torch.int64)
    valid = torch.tensor([True, True, False, True])
    got = launchers.gather_rows(src.to(DEVICE), index.to(DEVICE), valid.to(DEVICE), 7)
    assert torch.equal(got.cpu(), _torch_path(src, index, valid, 7))


def test_empty_shapes_launch_nothing() -> None:
    src = torch.ones(3, 0)
    assert tuple(launchers.gather_rows(src.to(DEVICE), torch.zeros(2, dtype=torch.int64, device=DEVICE),
                                       torch.ones(2, dtype=torch.bool, device=DEVICE), 0).shape) == (2, 0)
    assert tuple(launchers.gather_rows(torch.ones(3, 4, device=DEVICE),
                                       torch.zeros(0, dtype=torch.int64, device=DEVICE),
                                       torch.ones(0, dtype=torch.bool, device=DEVICE), 0).shape) == (0, 4)


def _cuda(obj: Any) -> Any:
    return dataclasses.replace(obj, **{f.name: getattr(obj, f.name).cuda() for f in dataclasses.fields(obj)})


def _tensors(obj: Any) -> list[Any]:
    if dataclasses.is_dataclass(obj):
        return [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    return list(obj)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the adapters take the kernel on a CUDA device only")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_ragged_adapters_on_the_gpu_equal_their_cpu_run(dtype: Any) -> None:
    """Every ragged adapter on CUDA tensors (the kernel) against the same call on the CPU (torch's two passes)."""
    lengths = torch.tensor([5, 3, 0, 2, 5, 1], dtype=torch.int32)
    x = _source(dtype, (6, 6, 300), seed=4)  # [B, D+1, V] target logits
    n = int(lengths.sum())
    g = torch.Generator().manual_seed(5)
    draft = Draft(
        tokens=torch.randint(-1, 300, (6, 5), generator=g, dtype=torch.int32),
        status=torch.tensor([[0] * 5, [0, 0, 0, 1, 0], [2, 0, 0, 0, 0], [0, 0, 4, 4, 4], [0] * 5, [0, 3, 3, 3, 3]],
                            dtype=torch.int8),
        ids=torch.randint(-1, 300, (6, 5, K), generator=g, dtype=torch.int32),
        tickets=torch.randint(0, 2**24, (6, 5, K), generator=g, dtype=torch.int32),
    )
    flat, cu = adapters.target_logits_to_ragged(x, lengths, n)
    ragged = adapters.draft_to_ragged(draft, n + 2)  # 2 rows past the drafts
    verdict = (torch.randint(-1, 300, (6, 6), generator=g, dtype=torch.int32),
               torch.tensor([-1, 0, 5, 2, 3, 1], dtype=torch.int32))
    packed = adapters.verdict_to_ragged(*verdict)
    pairs: list[tuple[Any, Any]] = [
        (adapters.target_logits_to_ragged(x, lengths, n + 3),  # 3 fill rows after the draft rows
         adapters.target_logits_to_ragged(x.cuda(), lengths.cuda(), n + 3)),
        (adapters.target_logits_from_ragged(flat, cu, 5),
         adapters.target_logits_from_ragged(flat.cuda(), cu.cuda(), 5)),
        (adapters.to_ragged(x[:, :5], lengths, n + 2, fill=1),  # a strided view
         adapters.to_ragged(x[:, :5].cuda(), lengths.cuda(), n + 2, fill=1)),
        (adapters.draft_to_ragged(draft, n + 2), adapters.draft_to_ragged(_cuda(draft), n + 2)),
        (adapters.draft_from_ragged(ragged, 5), adapters.draft_from_ragged(_cuda(ragged), 5)),
        (packed, adapters.verdict_to_ragged(*(v.cuda() for v in verdict))),
    ]
    for cpu, gpu in pairs:
        for c, d in zip(_tensors(cpu), _tensors(gpu), strict=True):
            assert d.is_cuda and torch.equal(_bits(d), _bits(c))


def test_the_ragged_adapters_compile_in_one_graph() -> None:
    """``torch.compile(fullgraph=True)`` over the target-logit conversions (on a GPU through the row gather, whose fill
    is a device scalar, not a host read) gives the eager results."""
    x = _source(torch.float32, (4, 6, 50), seed=8).to(DEVICE)
    lens = torch.tensor([5, 0, 2, 3], dtype=torch.int32, device=DEVICE)
    to = torch.compile(adapters.target_logits_to_ragged, fullgraph=True, backend="aot_eager")
    back = torch.compile(adapters.target_logits_from_ragged, fullgraph=True, backend="aot_eager")
    flat, cu = adapters.target_logits_to_ragged(x, lens, 13)
    for got, want in zip(to(x, lens, 13), (flat, cu), strict=True):
        assert torch.equal(_bits(got), _bits(want))
    assert torch.equal(_bits(back(flat, cu, 5)), _bits(adapters.target_logits_from_ragged(flat, cu, 5)))
