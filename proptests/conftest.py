"""Property-suite configuration: the Triton interpreter without a GPU, the Hypothesis profiles, the device."""

import os


def _nvidia_gpu_listed() -> bool:
    """An NVIDIA driver that lists a GPU (checked without importing anything)."""
    try:
        return bool(os.listdir("/proc/driver/nvidia/gpus")) or os.path.exists("/dev/nvidia0")
    except OSError:
        return os.path.exists("/dev/nvidia0")


# Triton reads TRITON_INTERPRET when pp3.kernels is imported (at @triton.jit time): set it before anything imports
# triton. setdefault: an explicit TRITON_INTERPRET=0/1 from the caller wins.
if not _nvidia_gpu_listed():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402  (torch does not import triton)
from hypothesis import errors, settings  # noqa: E402

if not torch.cuda.is_available():  # a driver without a CUDA build of torch: interpret as well
    os.environ.setdefault("TRITON_INTERPRET", "1")

from proptests.profiles import PROFILE_NAME, PROFILES  # noqa: E402

# Register the profiles under their plain names unless another conftest (tests/) already did: this suite applies
# its own profile to each test explicitly (proptests.profiles.prop_settings), and must not resize tests/.
for _name, _profile in PROFILES.items():
    try:
        settings.get_profile(_name)
    except errors.InvalidArgument:
        settings.register_profile(_name, _profile)
settings.load_profile(PROFILE_NAME)


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where the kernels run: the CUDA GPU if torch sees one, else the CPU (Triton interpreter)."""
    from proptests._harness import DEVICE

    return DEVICE
