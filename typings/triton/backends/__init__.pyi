from typing import Any

from . import compiler as compiler

backends: dict[str, Any]

def __getattr__(name: str) -> Any: ...
