# Minimal local stubs for Triton 3.6 (the real package ships no type information).
# Key signatures are spelled out; anything else resolves to Any via __getattr__.
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

from . import backends as backends
from . import compiler as compiler
from . import language as language
from . import runtime as runtime
from . import testing as testing
from .compiler import CompilationError as CompilationError
from .compiler import compile as compile
from .runtime import Autotuner as Autotuner
from .runtime import Config as Config
from .runtime import Heuristics as Heuristics
from .runtime import InterpreterError as InterpreterError
from .runtime import JITFunction as JITFunction
from .runtime import KernelInterface as KernelInterface
from .runtime import OutOfResources as OutOfResources
from .runtime import autotune as autotune
from .runtime import heuristics as heuristics
from .runtime.jit import jit as jit

__version__: str

class TritonError(Exception): ...

def cdiv(x: int, y: int) -> int: ...
def constexpr_function(fn: _F) -> _F: ...
def next_power_of_2(n: int) -> int: ...
def __getattr__(name: str) -> Any: ...
