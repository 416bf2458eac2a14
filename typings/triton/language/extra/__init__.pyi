from typing import Any

from . import libdevice as libdevice

def __getattr__(name: str) -> Any: ...
