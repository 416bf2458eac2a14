"""Every planted bug of the catalogue (``pp3.testing.mutants``) as an implementation the seam can be given: the NumPy
reference with that one bug swapped in while it runs, as a selector and as a verifier (a bug in Philox, the order,
the exponential or the pairwise sum reaches both roles).

    pp3 verify --impl selector=pp3.testing.planted:draw_off_by_one --impl verifier=pp3.testing.planted:draw_off_by_one

A name is the bug's with ``-`` written ``_`` (``ALL``: every one of the chain's; the draft trees' bugs, SPEC.md §12,
reach neither role, and the seam has no role of the trees). The bug is swapped in for the duration of each call
only, so the harness's reference, run between the calls, stays the definition. NumPy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pp3.harness import builtin
from pp3.harness.protocol import Implementation
from pp3.testing.mutants import CATALOGUE, patched

CHAIN = tuple(name for name, m in CATALOGUE.items() if not m.clause.startswith("§12"))  # the selector's, verifier's
ALL = tuple(name.replace("-", "_") for name in CHAIN)


def _with_bug(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        with patched(name):
            return fn(*args)

    call.__name__ = call.__qualname__ = f"{getattr(fn, '__name__', 'call')}_with_{name.replace('-', '_')}"
    return call


def implementations(name: str) -> list[Implementation]:
    """The reference with the planted bug ``name`` (the catalogue's name), both roles."""
    if name not in CHAIN:
        raise KeyError(f"no planted bug {name!r} of the selector or the verifier; the catalogue's are {sorted(CHAIN)}")
    out = []
    for impl in builtin.reference():
        assert impl.sharded is not None or impl.role == "verifier"
        out.append(Implementation(
            impl.role, f"planted:{name}", _with_bug(name, impl.fn), impl.caps,
            sharded=None if impl.sharded is None else _with_bug(name, impl.sharded),
            primitives={k: _with_bug(name, f) for k, f in impl.primitives.items()}))
    return out


def __getattr__(attr: str) -> Callable[[], list[Implementation]]:
    """``pp3.testing.planted:<bug>``: a factory of the implementations of that bug (``-`` written ``_``)."""
    name = attr.replace("_", "-")
    if name not in CHAIN:
        raise AttributeError(f"module 'pp3.testing.planted' has no attribute {attr!r} (the catalogue's bugs: "
                             f"{', '.join(ALL)})")
    return lambda: implementations(name)
