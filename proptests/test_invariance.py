"""SPEC.md §9: a row's outputs depend on that row's inputs and tau only. Zero-tolerance metamorphic properties of
the kernels (kernel against kernel, every field equal): batch position, batch size, tile size, vocabulary sharding,
replay, CUDA-graph capture and replay.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import pp3.kernels
from pp3.reference import Proposal
from pp3.testing.call import Call, default_device, make_case, to_numpy
from pp3.testing.compare import assert_same, take_rows
from proptests.strategies import any_format_cases, prop_settings, sharded_cases

pytestmark = [
    pytest.mark.interpreter,  # without a GPU, the kernels run through TRITON_INTERPRET=1
    # the interpreter's NumPy warnings on IEEE overflow / invalid operations (expected: d = -inf, z = -inf)
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
]
DEVICE = default_device()

NINF = float("-inf")


@prop_settings()
@given(data=st.data())
def test_batch_permutation(data: st.DataObject) -> None:
    """Permuting the rows (with their temperatures, seeds, rounds, positions) permutes the outputs."""
    case = data.draw(any_format_cases(tiles=(32, 128, None), max_v=200, min_b=2, max_b=3, max_programs=8), label="case")
    perm = data.draw(st.permutations(range(case.b)), label="perm")
    permuted = case.take(perm)
    want = take_rows(case.run_kernel(), perm)
    assert_same(permuted, permuted.run_kernel(), want, "permuted batch vs batch, permuted")


@prop_settings()
@given(data=st.data())
def test_row_alone_equals_row_in_batch(data: st.DataObject) -> None:
    """Batch size and the other rows (failed ones included) do not matter: each row alone equals its batch row."""
    case = data.draw(any_format_cases(tiles=(32, 128, None), max_v=200, min_b=2, max_b=3, max_programs=8), label="case")
    batch = case.run_kernel()
    r = data.draw(st.integers(0, case.b - 1), label="row")
    alone = case.take([r])
    assert_same(alone, alone.run_kernel(), take_rows(batch, [r]), f"row alone vs row {r} of a batch of {case.b}")


# Candidates tied across tiles: 48 equal maxima over V = 70 (tiles of 32: three; of 64: two; of 128: one).
TILED_TIES = make_case("fp32", [[2.0, -1.0] * 5 + [3.0] * 48 + [NINF] * 12], temperature=[1.0], seed=42, tile=32)


@prop_settings()
@given(case=any_format_cases(tiles=(64,), max_v=1100, max_b=2, max_programs=20))
@example(case=TILED_TIES)
def test_tile_size_invariance(case: Call) -> None:
    """Tiles of 32 .. 4096 entries and the automatic tile give identical outputs (the candidates' merge is exact)."""
    want = case.replace(tile=32).run_kernel()
    for tile in (64, 128, 256, 1024, 4096, None):
        retiled = case.replace(tile=tile)
        assert_same(retiled, retiled.run_kernel(), want, f"tile {tile} vs tile 32")


# Equal maxima on both sides of a shard boundary: ID 40 | 41 (sampled and T0 rows); the maximum alone in a
# 1-entry shard [41, 42) tied with ID 40 in the shard before it; and V = 2 split into two 1-entry shards.
_TIE = [0.0] * 70
_TIE[40] = _TIE[41] = 5.0
BOUNDARY_TIE = make_case("fp32", [_TIE, _TIE], temperature=[1.0, 0.0], seed=[3, 4], tile=32)
ONE_ENTRY_TIE = make_case("bf16", [_TIE], temperature=[0.5], seed=[9], tile=32)
TWO_SINGLES = make_case("fp16", [[1.0, 1.0], [-0.0, 0.0]], temperature=[1.0, -0.0], tile=32)


@prop_settings()
@given(sc=sharded_cases(tiles=(32, 64, None), max_v=600, max_b=2, max_programs=12))
@example(sc=(BOUNDARY_TIE, (41,)))
@example(sc=(BOUNDARY_TIE, (13, 41, 69)))
@example(sc=(ONE_ENTRY_TIE, (41, 42)))
@example(sc=(TWO_SINGLES, (1,)))
def test_shard_split_invariance(sc: tuple[Call, tuple[int, ...]]) -> None:
    """propose_sharded over 1 .. 4 contiguous shards (uneven, 1-entry ones included) equals the unsharded call."""
    case, cuts = sc
    assert_same(case, case.replace(cuts=cuts).run_kernel(), case.run_kernel(), f"sharded at {list(cuts)} vs unsharded")


@prop_settings()
@given(case=any_format_cases(tiles=(32, 64), max_v=200, max_b=3, max_programs=8))
def test_replay_is_identical_and_inputs_untouched(case: Call) -> None:
    """Calling twice on the same tensors gives the same outputs, and no call writes to its inputs."""
    x = case.torch_logits(DEVICE)
    args = case.kernel_row_args(DEVICE)
    before = [_bytes(a) for a in (x, *args)]
    launch = pp3.kernels.LaunchConfig(segment=case.tile)  # the case's tile as the segment selector's size
    first = to_numpy(pp3.kernels.propose(x, *args, case.tau, launch=launch))
    second = to_numpy(pp3.kernels.propose(x, *args, case.tau, launch=launch))
    assert_same(case, second, first, "second call vs first call")
    for name, a, b in zip(("logits", "target_temperature", "seed", "round", "position"), (x, *args), before,
                          strict=True):
        assert _bytes(a) == b, f"propose wrote to its argument {name}"


def _bytes(a: torch.Tensor | list[float] | list[int]) -> bytes:
    """An argument's exact content (NaN payloads and -0.0 included)."""
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
    return repr([v.hex() if isinstance(v, float) else v for v in a]).encode()


# ----------------------------------------------------------------------------------------------- CUDA graphs

_GRAPH_B, _GRAPH_V, _GRAPH_TILE = 4, 300, 128


class _Graph:
    """propose captured once on static buffers; replays read new inputs copied into them."""

    def __init__(self, fmt: str) -> None:
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[fmt]
        dev = torch.device("cuda")
        self.logits = torch.zeros((_GRAPH_B, _GRAPH_V), dtype=dtype, device=dev)
        self.temp = torch.ones(_GRAPH_B, dtype=torch.float32, device=dev)
        self.seed, self.round, self.position = (torch.zeros(_GRAPH_B, dtype=torch.int64, device=dev) for _ in "srp")

        def call() -> pp3.kernels.Proposal:
            return pp3.kernels.propose(
                self.logits, self.temp, self.seed, self.round, self.position, tile=_GRAPH_TILE
            )

        side = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: compile the kernels, build the constant table
            for _ in range(2):
                call()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = call()

    def replay(self, case: Call) -> Proposal:
        self.logits.copy_(case.torch_logits(self.logits.device))
        temp, seed, rnd, pos = case.replace(tensor_args=True).kernel_row_args(self.logits.device)
        self.temp.copy_(temp)
        self.seed.copy_(seed)
        self.round.copy_(rnd)
        self.position.copy_(pos)
        self.graph.replay()
        torch.cuda.synchronize()
        out: Proposal = to_numpy(self.out)
        return out


_GRAPHS: dict[str, _Graph] = {}


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA-graph capture and replay need a CUDA GPU")
@prop_settings()
@given(case=any_format_cases(tiles=(_GRAPH_TILE,), b=_GRAPH_B, v=_GRAPH_V, tau=0.7))
def test_cuda_graph_replay_matches_reference(case: Call) -> None:
    """One capture per format; every replay with new inputs in the static buffers equals the reference."""
    graph = _GRAPHS.get(case.fmt.name)
    if graph is None:
        graph = _GRAPHS[case.fmt.name] = _Graph(case.fmt.name)
    assert_same(case, graph.replay(case), case.run_reference(), "CUDA-graph replay vs reference")
