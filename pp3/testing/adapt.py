"""How the seam (``pp3.harness``) calls an implementation: one case (``pp3.testing.call.Call`` / ``AcceptCall``, raw
bits) as the arguments of the implementation's API, and its result read back as the reference's NumPy record, every
field checked for type, dtype and shape (``WrongOutput`` names the first that is wrong). NumPy only at import.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from pp3.harness.builtin import KERNELS
from pp3.harness.protocol import PARAMETERS, Implementation
from pp3.reference import K, Proposal, Verdict
from pp3.testing.call import AcceptCall, Call

# Every output field's dtype (SPEC.md §7, §11.8) and shape in terms of the call (B rows, depth D).
SELECTOR_OUT = {"status": (np.int8, ("B",)), "token": (np.int32, ("B",)), "ids": (np.int32, ("B", "K")),
                "tickets": (np.int32, ("B", "K"))}
VERIFIER_OUT = {"status": (np.int8, ("B",)), "accepted": (np.int32, ("B",)), "tokens": (np.int32, ("B", "D+1"))}


class WrongOutput(Exception):
    """A result that is not what the role returns (the message names the field and what is wrong with it)."""


@dataclasses.dataclass(frozen=True)
class Invocation:
    """One call of an implementation, ready to run: the callable, its arguments, and how to read its result."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    read: Callable[[Any], Any]  # the result -> the reference's NumPy record (raises WrongOutput)
    names: tuple[str, ...]  # the arguments' names, in reports

    def __call__(self) -> Any:
        return self.read(self.fn(*self.args, **self.kwargs))


def _u64_tensor(a: npt.NDArray[np.uint64], device: Any) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(a).view(np.int64).copy()).to(device)


def selector(impl: Implementation, call: Call, device: Any) -> Invocation:
    """``impl`` on ``call``: its sharded form over ``call.cuts`` (column views of one row tensor, in ID order), its
    ``fn`` otherwise; the case's tile where the implementation takes one. The caller has checked the declaration
    admits the call (``pp3.harness.suites.admits``)."""
    edges = [0, *call.cuts, call.v]
    fn = impl.sharded if call.cuts else impl.fn
    assert fn is not None, f"{impl.label}: a sharded call without a sharded form"
    if impl.caps.api == "torch":
        x = call.torch_logits(device)
        rest: tuple[Any, ...] = call.kernel_row_args(device)
    else:
        x = call.reference_logits().copy()
        rest = (call.temperature.copy(), *call.seeds())
    first = [x[:, a:c] for a, c in itertools.pairwise(edges)] if call.cuts else x
    kwargs = {"tile": call.tile} if impl.caps.tile else {}
    return Invocation(fn, (first, *rest, call.tau), kwargs, lambda out: read(out, "selector", impl, call.b, 0),
                      PARAMETERS["selector"])


def verifier(impl: Implementation, call: AcceptCall, device: Any) -> Invocation:
    """``impl`` on ``call`` (the temperatures in the type they were given in, where the API has it)."""
    if impl.caps.api == "torch":
        import torch

        from pp3.testing.call import bits_tensor

        def t(a: npt.NDArray[Any]) -> Any:
            if a.dtype == np.uint64:
                return _u64_tensor(a, device)
            return torch.from_numpy(np.ascontiguousarray(a).copy()).to(device)

        args: tuple[Any, ...] = (bits_tensor(call.fmt, call.bits, device), call.torch_temperature(device),
                                 *(t(a) for a in call.draft().values()), t(call.seed), t(call.round), t(call.position))
    else:
        args = (call.reference_logits().copy(), call.reference_temperature().copy(),
                *(a.copy() for a in call.draft().values()), call.seed.copy(), call.round.copy(), call.position.copy())
    kwargs = {"tile": call.tile} if impl.caps.tile else {}
    return Invocation(impl.fn, args, kwargs, lambda out: read(out, "verifier", impl, call.b, call.depth),
                      PARAMETERS["verifier"])


def read(out: Any, role: str, impl: Implementation, b: int, d: int) -> Proposal | Verdict:
    """A result as the reference's record of NumPy arrays (copies on the host), after checking that it has every
    field of the role as an array of the implementation's API with the field's dtype and shape."""
    spec = SELECTOR_OUT if role == "selector" else VERIFIER_OUT
    dims = {"B": b, "K": K, "D+1": d + 1}
    missing = [f for f in spec if not hasattr(out, f)]
    if missing:
        raise WrongOutput(f"returned a {type(out).__name__} without {', '.join(missing)} (the {role} returns "
                          f"{', '.join(spec)})")
    fields: dict[str, npt.NDArray[Any]] = {}
    for f, (dtype, shape) in spec.items():
        a = getattr(out, f)
        want_shape = tuple(dims[s] for s in shape)
        if impl.caps.api == "torch":
            import torch

            if not isinstance(a, torch.Tensor):
                raise WrongOutput(f"{f} is a {type(a).__name__}, not a torch.Tensor")
            want_dtype = getattr(torch, np.dtype(dtype).name)
            if a.dtype != want_dtype or tuple(a.shape) != want_shape:
                raise WrongOutput(f"{f} is {a.dtype} {list(a.shape)}, not {want_dtype} {list(want_shape)}")
            fields[f] = a.detach().cpu().numpy().copy()
        else:
            if not isinstance(a, np.ndarray):
                raise WrongOutput(f"{f} is a {type(a).__name__}, not a numpy.ndarray")
            if a.dtype != dtype or a.shape != want_shape:
                raise WrongOutput(f"{f} is {a.dtype} {list(a.shape)}, not {np.dtype(dtype)} {list(want_shape)}")
            fields[f] = a.copy()
    return Proposal(**fields) if role == "selector" else Verdict(**fields)


# ------------------------------------------------------------------------------------------ the inputs, unchanged


def snapshot(value: Any) -> Any:
    """A copy of every array in ``value`` (tensors, NumPy arrays, in lists and tuples), to compare after a call."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list | tuple):
        return type(value)(snapshot(v) for v in value)
    if type(value).__module__.startswith("torch") and hasattr(value, "clone"):
        return value.clone()
    return value


def _bits(a: Any) -> Any:
    """An array's elements as unsigned integers of their width (so NaN == NaN and -0.0 != +0.0)."""
    if isinstance(a, np.ndarray):
        return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])
    import torch

    return a.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()])


def changed(before: Any, after: Any, names: tuple[str, ...]) -> list[str]:
    """The names of the arguments whose arrays differ from their snapshot, bit for bit."""
    out = []
    for name, b, a in zip(names, before, after, strict=True):
        if isinstance(a, list | tuple):
            if any(changed(b, a, tuple(f"{name}[{i}]" for i in range(len(a))))):
                out.append(name)
        elif isinstance(a, np.ndarray):
            if not np.array_equal(_bits(a), _bits(b)):
                out.append(name)
        elif type(a).__module__.startswith("torch") and hasattr(a, "clone"):
            import torch

            if not torch.equal(_bits(a), _bits(b)):
                out.append(name)
    return out


# ------------------------------------------------------------------------------------------ what a declaration admits


def admits(impl: Implementation, call: Call | AcceptCall) -> str | None:
    """None if ``impl``'s declaration admits ``call``, else why not (the reason the suite lists it as skipped)."""
    if call.fmt.name not in impl.caps.formats:
        return f"declares no {call.fmt.name} logits (formats {', '.join(impl.caps.formats)})"
    if call.v > impl.caps.max_vocab:
        return f"declares V <= {impl.caps.max_vocab}"
    if isinstance(call, Call) and call.cuts and impl.sharded is None:
        return "declares no sharded form"
    return None


def prepare(impl: Implementation, call: Call) -> Call:
    """The selector call as ``impl`` runs it: every target temperature +0.0 for a selector of T0 rows only, and a
    variant's name after the case's; for pp3's kernels the variant is also the call's ``kernel`` (``Call.kernel``
    names pp3's kernel variants, which a written case records for its replay; see ``Call.as_greedy``)."""
    if impl.t0_only:
        call = call.replace(temperature=np.zeros_like(call.temperature))
    if impl.variant:
        call = call.replace(name=f"{call.name} {impl.variant}")
        if impl.name == KERNELS:
            call = call.replace(kernel=impl.variant)
    return call


def selector_rows(impl: Implementation, x: Any, temperature: Any, seed: Any, round: Any, position: Any,
                  tau: float) -> Invocation:
    """``impl`` on rows built on a device (``pp3.audit.parity``'s bulk rows): torch tensors as they are for the
    torch API (uint64 keys as int64 bit patterns), NumPy copies on the host for the NumPy API; no tile."""
    if impl.caps.api == "torch":
        args: tuple[Any, ...] = (x, temperature, seed, round, position, tau)
    else:
        keys = (k.cpu().numpy().view(np.uint64) for k in (seed, round, position))
        args = (x.cpu().numpy(), temperature.cpu().numpy(), *keys, tau)
    kwargs = {"tile": None} if impl.caps.tile else {}
    return Invocation(impl.fn, args, kwargs, lambda out: read(out, "selector", impl, int(x.shape[0]), 0),
                      PARAMETERS["selector"])


# The primitives' arguments (``Implementation.primitives``), by name.
PRIMITIVE_ARGS = {"philox": ("ctr", "key"), "expf": ("z",)}


def primitive(impl: Implementation, name: str, inputs: tuple[npt.NDArray[Any], ...]) -> Invocation:
    """``impl``'s primitive ``name`` on host ``inputs`` (uint64 words, fp32 z), given in its API; the result read
    back as a host array of the inputs' first dtype (uint64 words, fp32 values) and shape, checked."""
    if impl.caps.api == "torch":
        import torch

        args: tuple[Any, ...] = tuple(
            torch.from_numpy(a.view(np.int64) if a.dtype == np.uint64 else a.copy()).to(impl.device) for a in inputs)
    else:
        args = tuple(a.copy() for a in inputs)
    want = inputs[0]

    def host(out: Any) -> npt.NDArray[Any]:
        a = out if isinstance(out, np.ndarray) else out.detach().cpu().numpy() if hasattr(out, "detach") else None
        if a is None or a.shape != want.shape or a.dtype.itemsize != want.dtype.itemsize:
            raise WrongOutput(f"{name} returned {type(out).__name__} {getattr(out, 'dtype', '')} "
                              f"{list(getattr(out, 'shape', []))}, not {want.dtype} {list(want.shape)}")
        return a.view(want.dtype).copy()

    return Invocation(impl.primitives[name], args, {}, host, PRIMITIVE_ARGS[name])
