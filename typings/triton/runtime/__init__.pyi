from typing import Any

from .autotuner import Autotuner as Autotuner
from .autotuner import Config as Config
from .autotuner import Heuristics as Heuristics
from .autotuner import autotune as autotune
from .autotuner import heuristics as heuristics
from .jit import JITFunction as JITFunction
from .jit import KernelInterface as KernelInterface

driver: Any

class OutOfResources(Exception): ...
class InterpreterError(Exception): ...

def __getattr__(name: str) -> Any: ...
