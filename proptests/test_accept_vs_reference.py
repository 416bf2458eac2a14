"""SPEC.md §11: the Triton verifier returns the reference's status, accepted and tokens bit for bit, in each of its
variants (``LaunchConfig.screen`` and ``handover``, drawn per example), and a row's outputs depend on that row's
inputs only (zero-tolerance metamorphic properties, kernel against kernel: batch order, sub-batches, tile size,
CUDA-graph replay).

Calls come from ``strategies.accept_calls``: target rows of every format with ties, masks, NaN and +inf; drafts the
reference selector proposed, some failed, greedy, forbidden or broken; every temperature class; uint64-extreme keys.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pp3.kernels.config import SCREENS, LaunchConfig
from pp3.testing.call import AcceptCall, default_device, to_numpy
from pp3.testing.compare import assert_same_verdict, take_rows
from proptests.strategies import accept_calls, prop_settings

pytestmark = [
    pytest.mark.interpreter,  # without a GPU, the kernels run through TRITON_INTERPRET=1
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
    # the interpreter's runtime-bound loops (the tile loops) convert 1-element arrays to ints (NumPy 2.3 warns)
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning"),
]
DEVICE = default_device()


VARIANTS = st.builds(LaunchConfig, screen=st.sampled_from(SCREENS), handover=st.booleans())


@prop_settings()
@given(call=accept_calls(), launch=VARIANTS)
def test_kernel_equals_reference(call: AcceptCall, launch: LaunchConfig) -> None:
    assert_same_verdict(call.run_kernel(DEVICE, launch), call.run_reference(),
                        f"kernel ({launch.screen} screen, handover {launch.handover}) vs reference, {call.fmt.name}")


@prop_settings(0.5)
@given(call=accept_calls(max_b=3), data=st.data())
def test_batch_order_and_sub_batches(call: AcceptCall, data: st.DataObject) -> None:
    """Permuting the rows permutes the outputs; any row alone equals its row in the batch."""
    batch = call.run_kernel(DEVICE)
    perm = data.draw(st.permutations(range(call.b)), label="perm")
    assert_same_verdict(call.take(perm).run_kernel(DEVICE), take_rows(batch, perm), "permuted batch")
    r = data.draw(st.integers(0, call.b - 1), label="row")
    assert_same_verdict(call.take([r]).run_kernel(DEVICE), take_rows(batch, [r]), f"row {r} alone")


@prop_settings(0.25)
@given(call=accept_calls(max_v=70, max_b=2, max_d=2))
def test_tile_size_invariance(call: AcceptCall) -> None:
    """Tiles of 2 .. 128 entries and the default tile give identical outputs (the §11.4 tree is tile-independent)."""
    want = call.run_kernel(DEVICE)
    for tile in (2, 16, 128):
        assert_same_verdict(call.replace(tile=tile).run_kernel(DEVICE), want, f"tile {tile} vs the default")


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA-graph capture and replay need a CUDA GPU")
@prop_settings(0.25)
@given(call=accept_calls(max_b=1))
def test_cuda_graph_replay(call: AcceptCall) -> None:
    """One verification captured in a CUDA graph on device tensors (keys included): replays equal the eager call,
    also after the inputs are overwritten in place with a second call's."""
    import torch

    from pp3 import kernels
    from pp3.testing.call import bits_tensor
    from pp3.testing.timing import cuda_graph

    def tensors(c: AcceptCall) -> list[torch.Tensor]:
        def t(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a.view(np.int64) if a.dtype == np.uint64 else a)).to(DEVICE)

        return [bits_tensor(c.fmt, c.bits, DEVICE), t(c.temperature), t(c.draft_tokens), t(c.draft_status),
                t(c.draft_ids), t(c.draft_tickets), t(c.seed), t(c.round), t(c.position)]

    static = tensors(call)
    replay, out = cuda_graph(lambda: kernels.verify(*static))
    replay()
    torch.cuda.synchronize()
    assert_same_verdict(to_numpy(out), call.run_reference(), "graph replay vs reference")
    other = call.replace(seed=call.seed ^ np.uint64(1), position=call.position + np.uint64(3))
    for dst, src in zip(static, tensors(other), strict=True):
        dst.copy_(src)
    replay()
    torch.cuda.synchronize()
    assert_same_verdict(to_numpy(out), other.run_reference(), "replay with new inputs vs reference")
