from collections.abc import Callable, Iterable
from typing import Any, Generic, ParamSpec, TypeVar, overload

_P = ParamSpec("_P")
_R = TypeVar("_R")

class KernelInterface(Generic[_P, _R]):
    # kernel[grid](*args, num_warps=..., ...) launches the kernel.
    def __getitem__(self, grid: Any) -> Callable[..., Any]: ...
    def run(self, *args: Any, **kwargs: Any) -> Any: ...
    def __getattr__(self, name: str) -> Any: ...

class JITFunction(KernelInterface[_P, _R]):
    fn: Callable[_P, _R]
    src: str
    arg_names: list[str]
    __name__: str
    # Calling a @triton.jit function from inside another one (device function).
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any: ...

@overload
def jit(fn: Callable[_P, _R]) -> JITFunction[_P, _R]: ...
@overload
def jit(
    *,
    version: Any = None,
    repr: Callable[..., Any] | None = None,
    launch_metadata: Callable[..., Any] | None = None,
    do_not_specialize: Iterable[int | str] | None = None,
    do_not_specialize_on_alignment: Iterable[int | str] | None = None,
    debug: bool | None = None,
    noinline: bool | None = None,
) -> Callable[[Callable[_P, _R]], JITFunction[_P, _R]]: ...
def __getattr__(name: str) -> Any: ...
