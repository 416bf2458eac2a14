from typing import Any

class GPUTarget:
    backend: str
    arch: int | str
    warp_size: int
    def __init__(self, backend: str, arch: int | str, warp_size: int) -> None: ...

class BaseBackend:
    target: GPUTarget
    def __getattr__(self, name: str) -> Any: ...

def __getattr__(name: str) -> Any: ...
