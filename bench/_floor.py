"""An empty Triton kernel: the launch floor of a CUDA-graph kernel node."""

import triton
import triton.language as tl


@triton.jit
def empty_kernel(x_ptr: tl.tensor) -> None:
    pass
