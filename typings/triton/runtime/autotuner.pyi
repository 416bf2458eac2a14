from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from .jit import KernelInterface

_P = ParamSpec("_P")
_R = TypeVar("_R")

class Config:
    kwargs: dict[str, Any]
    num_warps: int
    num_stages: int
    num_ctas: int
    maxnreg: int | None
    pre_hook: Callable[..., Any] | None
    def __init__(
        self,
        kwargs: dict[str, Any],
        num_warps: int = 4,
        num_stages: int = 3,
        num_ctas: int = 1,
        maxnreg: int | None = None,
        pre_hook: Callable[..., Any] | None = None,
        ir_override: str | None = None,
    ) -> None: ...
    def all_kwargs(self) -> dict[str, Any]: ...

class Autotuner(KernelInterface[_P, _R]):
    configs: list[Config]
    best_config: Config
    fn: KernelInterface[_P, _R]

class Heuristics(KernelInterface[_P, _R]):
    fn: KernelInterface[_P, _R]
    values: dict[str, Callable[[dict[str, Any]], Any]]

def autotune(
    configs: list[Config],
    key: list[str],
    prune_configs_by: dict[str, Any] | None = None,
    reset_to_zero: list[str] | None = None,
    restore_value: list[str] | None = None,
    pre_hook: Callable[..., Any] | None = None,
    post_hook: Callable[..., Any] | None = None,
    warmup: int | None = None,
    rep: int | None = None,
    use_cuda_graph: bool = False,
    do_bench: Callable[..., Any] | None = None,
    cache_results: bool = False,
) -> Callable[[KernelInterface[_P, _R]], Autotuner[_P, _R]]: ...
def heuristics(
    values: dict[str, Callable[[dict[str, Any]], Any]],
) -> Callable[[KernelInterface[_P, _R]], Heuristics[_P, _R]]: ...
def __getattr__(name: str) -> Any: ...
