"""The seam's contract: what an implementation of a pp3 semantic ID is (``Implementation``), what it declares
(``Capabilities``), the calling protocol of each role, and how one is named and loaded (``load``).

Two roles, each with the arguments and results of pp3's own entry points, called by position:

- ``selector`` (``dyadic24-floor-first-v1``, SPEC.md §2-§8): ``fn(logits, target_temperature, seed, round, position,
  tau)`` -> a record with ``status`` [B] int8, ``token`` [B] int32, ``ids`` [B, 32] int32, ``tickets`` [B, 32] int32
  (``pp3.kernels.propose`` on torch tensors, ``pp3.propose`` on NumPy arrays);
- ``verifier`` (``accept-dyadic24-v1``, SPEC.md §11): ``fn(target_logits, target_temperature, draft_tokens,
  draft_status, draft_ids, draft_tickets, seed, round, position)`` -> ``status`` [B] int8, ``accepted`` [B] int32,
  ``tokens`` [B, D+1] int32 (``pp3.kernels.verify``, ``pp3.verify``).

On the torch API every argument is a tensor on the declared device (uint64 keys as int64 bit patterns, logits in
their own format: fp32, fp16 or bf16; drafts int32 / int8); on the NumPy API they are NumPy arrays (fp32 or fp16
logits, bf16 widened to fp32 as SPEC.md §2.1 does, uint64 keys). ``tau`` is a Python float.

A name given to the seam (``pp3 verify --impl ROLE=NAME``, ``pytest --pp3-impl ROLE=NAME``) is ``PKG.MOD:ATTR`` (an
attribute path after the colon), or the name of an entry point of the group ``pp3.implementations``, or one of pp3's
own (``pp3-kernels``, ``pp3-reference``). What it names is an ``Implementation``, a sequence of them (an
implementation with variants, as pp3's kernels have), a function of no arguments that returns either, or a bare
function of the role's protocol (torch API, every capability at its default). A callable that does not take the
role's arguments is refused at load (``ImplementationError``, naming the parameters that do not match).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any, Literal, Protocol

from pp3.reference._constants import MAX_VOCAB

Role = Literal["selector", "verifier"]
Api = Literal["torch", "numpy"]
ROLES: tuple[Role, ...] = ("selector", "verifier")
APIS: tuple[Api, ...] = ("torch", "numpy")
FORMATS = ("fp32", "fp16", "bf16")
ENTRY_POINT_GROUP = "pp3.implementations"
# The arguments each role's callable is given, by position, in this order.
PARAMETERS: dict[Role, tuple[str, ...]] = {
    "selector": ("logits", "target_temperature", "seed", "round", "position", "tau"),
    "verifier": ("target_logits", "target_temperature", "draft_tokens", "draft_status", "draft_ids", "draft_tickets",
                 "seed", "round", "position"),
}
SEMANTIC_IDS: dict[Role, str] = {"selector": "dyadic24-floor-first-v1", "verifier": "accept-dyadic24-v1"}


class ImplementationError(ValueError):
    """An implementation that cannot be loaded or does not match its role's protocol (the message says why)."""


class NotExported(Exception):
    """An implementation has no entry for what was asked of it (a primitive: its conformance row is skipped)."""


class ProposalLike(Protocol):
    """What a selector returns (``pp3.kernels.Proposal``, ``pp3.Proposal`` or any record with these fields)."""

    @property
    def status(self) -> Any: ...
    @property
    def token(self) -> Any: ...
    @property
    def ids(self) -> Any: ...
    @property
    def tickets(self) -> Any: ...


class VerdictLike(Protocol):
    """What a verifier returns (``pp3.kernels.Verdict``, ``pp3.Verdict`` or any record with these fields)."""

    @property
    def status(self) -> Any: ...
    @property
    def accepted(self) -> Any: ...
    @property
    def tokens(self) -> Any: ...


class Selector(Protocol):
    """The selector's protocol (tensors or NumPy arrays by the declared API)."""

    def __call__(self, logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, tau: float,
                  /) -> ProposalLike: ...


class Verifier(Protocol):
    """The verifier's protocol (tensors or NumPy arrays by the declared API)."""

    def __call__(self, target_logits: Any, target_temperature: Any, draft_tokens: Any, draft_status: Any,
                  draft_ids: Any, draft_tickets: Any, seed: Any, round: Any, position: Any, /) -> VerdictLike: ...


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an implementation declares; the harness runs exactly the suites these admit and lists the others as
    skipped, with the declaration that excludes them."""

    api: Api = "torch"  # torch tensors (pp3.kernels' convention) or NumPy arrays (pp3.reference's)
    device: str | None = None  # torch API: where its inputs go ("cuda", "cpu"); None: cuda if torch sees one, else cpu
    formats: tuple[str, ...] = FORMATS  # the logit formats it takes (fp32, fp16, bf16)
    max_vocab: int = MAX_VOCAB  # the largest V it takes
    exact: bool = True  # it claims bit-exactness with the semantic ID; False: it is judged in law only
    tile: bool = False  # it takes a keyword ``tile`` (pp3's kernels: each case's tile, so the suites cut V into tiles)

    def __post_init__(self) -> None:
        if self.api not in APIS:
            raise ImplementationError(f"capabilities: api must be one of {APIS}, got {self.api!r}")
        bad = [f for f in self.formats if f not in FORMATS]
        if bad or not self.formats:
            raise ImplementationError(f"capabilities: formats must be a non-empty subset of {FORMATS}, got "
                                      f"{self.formats!r}")
        if not 1 <= self.max_vocab <= MAX_VOCAB:
            raise ImplementationError(f"capabilities: max_vocab must be in 1 .. {MAX_VOCAB}, got {self.max_vocab}")
        if self.api == "numpy" and self.device not in (None, "cpu"):
            raise ImplementationError(f"capabilities: a NumPy-API implementation runs on the host, not {self.device!r}")


@dataclasses.dataclass(frozen=True)
class Implementation:
    """An implementation of one role of a semantic ID, as the seam calls it.

    ``fn``: the role's callable. ``sharded``: the selector over a row split by vocabulary into contiguous shards (a
    list of them in ID order in place of ``logits``, as ``pp3.kernels.propose_sharded``), or None if it has none.
    ``t0_only``: a selector of T0 rows only (every target temperature ±0, as ``pp3.kernels.greedy``): it is
    checked on every call's rows as T0 rows. ``variant``: a name among the variants of one implementation
    (pp3's kernels: gather, tiles, greedy, rescan); its suites' names end with it. ``bulk``: whether the bulk rows
    run through it. ``primitives``: the §8 / §6 building blocks it exports for the conformance files, ``philox``
    (counters [N, 4], keys [N, 2] -> words [N, 4], uint64 bit patterns) and ``expf`` (fp32 z -> fp32 e^z), in its
    API's arrays."""

    role: Role
    name: str
    fn: Callable[..., Any]
    caps: Capabilities = Capabilities()
    sharded: Callable[..., Any] | None = None
    t0_only: bool = False
    variant: str = ""
    bulk: bool = True
    primitives: Mapping[str, Callable[..., Any]] = dataclasses.field(default_factory=dict)
    spec: str = ""  # the name it was loaded by (set by ``load``), for the replay lines

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ImplementationError(f"{self.name}: role must be one of {ROLES}, got {self.role!r}")
        if self.role == "verifier" and (self.sharded is not None or self.t0_only):
            raise ImplementationError(f"{self.name}: sharded and t0_only are selector declarations")
        unknown = set(self.primitives) - {"philox", "expf"}
        if unknown:
            raise ImplementationError(f"{self.name}: unknown primitives {sorted(unknown)} (philox, expf)")
        check_signature(self.role, self.fn, self.caps, self.label)
        if self.sharded is not None:
            check_signature(self.role, self.sharded, self.caps, f"{self.label} (sharded)")

    @property
    def label(self) -> str:
        """The implementation and its variant, in reports."""
        return f"{self.name}:{self.variant}" if self.variant else self.name

    @property
    def device(self) -> str:
        """Where its inputs go: the declared device, else cuda if torch sees one, else cpu (NumPy: cpu)."""
        if self.caps.api == "numpy":
            return "cpu"
        if self.caps.device is not None:
            return self.caps.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def declaration(self) -> dict[str, Any]:
        """What it declares, for the JSON report."""
        return {"role": self.role, "name": self.name, "variant": self.variant, "spec": self.spec,
                "semantic_id": SEMANTIC_IDS[self.role], **dataclasses.asdict(self.caps),
                "device": self.device, "sharded": self.sharded is not None, "t0_only": self.t0_only,
                "bulk": self.bulk, "primitives": sorted(self.primitives)}


def _described(params: Sequence[inspect.Parameter]) -> str:
    return "(" + ", ".join(str(p) for p in params) + ")"


def check_signature(role: Role, fn: Any, caps: Capabilities, what: str) -> None:
    """Refuse (``ImplementationError``) a callable that cannot take the role's arguments by position (and ``tile=``
    where ``caps.tile`` says it takes it), naming what does not match. A callable whose signature cannot be read
    (some C extensions) is accepted: its calls are checked as they run."""
    if not callable(fn):
        raise ImplementationError(f"{what}: not callable (a {type(fn).__name__})")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    names = PARAMETERS[role]
    params = list(sig.parameters.values())
    problems: list[str] = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_rest = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(positional) < len(names) and not takes_rest:
        missing = names[len(positional):]
        problems.append(f"takes {len(positional)} positional arguments, the {role} protocol passes {len(names)}: "
                        f"no parameter for {', '.join(missing)}")
    extra = [p.name for p in positional[len(names):] if p.default is p.empty]
    if extra:
        problems.append(f"parameter(s) {', '.join(extra)} beyond the protocol's {len(names)} have no default")
    required_kw = [p.name for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    if required_kw:
        problems.append(f"keyword-only parameter(s) {', '.join(required_kw)} have no default")
    if caps.tile and "tile" not in sig.parameters and not any(p.kind == p.VAR_KEYWORD for p in params):
        problems.append("declares tile=True but takes no keyword 'tile'")
    if problems:
        raise ImplementationError(f"{what} does not match the {role} protocol {_described_names(names)}: its "
                                  f"signature is {_described(params)}; " + "; ".join(problems))


def _described_names(names: Sequence[str]) -> str:
    return "(" + ", ".join(names) + ")"


# ------------------------------------------------------------------------------------------------------- loading

# pp3's own implementations, by name (the entry point group is for everyone else's).
BUILTIN = {"pp3-kernels": "pp3.harness.builtin:kernels", "pp3-reference": "pp3.harness.builtin:reference"}


def _resolve(target: str) -> Any:
    """The object ``PKG.MOD:ATTR[.ATTR...]`` names."""
    module_name, _, path = target.partition(":")
    if not module_name or not path:
        raise ImplementationError(f"{target!r}: expected PKG.MOD:CALLABLE")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ImplementationError(f"{target!r}: cannot import {module_name!r}: {e}") from e
    for attr in path.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise ImplementationError(f"{target!r}: {type(obj).__name__} {getattr(obj, '__name__', obj)!r} has no "
                                      f"attribute {attr!r}") from None
    return obj


def entry_points() -> dict[str, str]:
    """The installed entry points of the group ``pp3.implementations``: name -> ``PKG.MOD:ATTR``."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _target(spec: str) -> str:
    if ":" in spec:
        return spec
    if spec in BUILTIN:
        return BUILTIN[spec]
    eps = entry_points()
    if spec in eps:
        return eps[spec]
    known = sorted({*BUILTIN, *eps})
    raise ImplementationError(f"{spec!r}: neither PKG.MOD:CALLABLE nor the name of an implementation (those "
                              f"installed: {', '.join(known)}; entry point group {ENTRY_POINT_GROUP!r})")


def _is_factory(fn: Any, role: Role) -> bool:
    """A callable that takes no arguments and not the role's: a factory (one that takes both is a protocol
    function with defaults everywhere)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        sig.bind(*PARAMETERS[role])
        return False
    except TypeError:
        pass
    try:
        sig.bind()
    except TypeError:
        return False
    return True


def load(spec: str, role: Role) -> list[Implementation]:
    """The implementations of ``role`` that ``spec`` names (see the module docstring), each with ``spec`` set.
    Raises ``ImplementationError`` naming what is wrong: a name that resolves to nothing, an object of the other
    role only, a callable that does not match the protocol."""
    if role not in ROLES:
        raise ImplementationError(f"role: expected one of {ROLES}, got {role!r}")
    obj = _resolve(_target(spec))
    if not isinstance(obj, Implementation | Sequence) and callable(obj) and _is_factory(obj, role):
        try:
            obj = obj()  # a factory
        except ImplementationError:
            raise
        except Exception as e:
            raise ImplementationError(f"{spec!r}: its factory raised {type(e).__name__}: {e}") from e
    if isinstance(obj, Implementation):
        found = [obj]
    elif isinstance(obj, Sequence) and not isinstance(obj, str):
        found = [o for o in obj if isinstance(o, Implementation)]
        if len(found) != len(obj):
            raise ImplementationError(f"{spec!r}: a sequence of something other than Implementation objects")
    elif callable(obj):
        found = [Implementation(role, spec, obj)]  # a bare protocol function: checked here, default capabilities
    else:
        raise ImplementationError(f"{spec!r}: a {type(obj).__name__}, not an Implementation or a callable")
    mine = [dataclasses.replace(i, spec=spec) for i in found if i.role == role]
    if not mine:
        roles = sorted({i.role for i in found})
        raise ImplementationError(f"{spec!r}: implements {', '.join(roles)}, not the {role}")
    return mine
