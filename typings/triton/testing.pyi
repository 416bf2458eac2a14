from collections.abc import Callable
from typing import Any

def do_bench(
    fn: Callable[[], Any],
    warmup: int = 25,
    rep: int = 100,
    grad_to_none: Any = None,
    quantiles: list[float] | None = None,
    return_mode: str = "mean",
) -> Any: ...
def do_bench_cudagraph(
    fn: Callable[[], Any],
    rep: int = 20,
    grad_to_none: Any = None,
    quantiles: list[float] | None = None,
    return_mode: str = "mean",
) -> Any: ...
def assert_close(x: Any, y: Any, atol: float | None = None, rtol: float | None = None, err_msg: str = "") -> None: ...
def __getattr__(name: str) -> Any: ...
