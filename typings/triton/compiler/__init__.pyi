from collections.abc import Callable
from typing import Any

from ..backends.compiler import GPUTarget

class CompilationError(Exception): ...

class ASTSource:
    fn: Any
    name: str
    signature: dict[str, str]
    constants: dict[Any, Any]
    attrs: dict[Any, Any]
    def __init__(
        self,
        fn: Any,
        signature: dict[str, str],
        constexprs: dict[Any, Any] | None = None,
        attrs: dict[Any, Any] | None = None,
    ) -> None: ...

class IRSource:
    def __init__(self, path: str, context: Any, backend: Any) -> None: ...

class CompiledKernel:
    asm: dict[str, Any]
    metadata: Any
    name: str
    def __getitem__(self, grid: Any) -> Callable[..., Any]: ...
    def __getattr__(self, name: str) -> Any: ...

def compile(
    src: ASTSource | IRSource | str,
    target: GPUTarget | None = None,
    options: dict[str, Any] | None = None,
) -> CompiledKernel: ...
def __getattr__(name: str) -> Any: ...
