"""pp3's own implementations, through the same seam as anyone else's: the Triton kernels (``pp3-kernels``, torch
API) and the NumPy reference (``pp3-reference``, NumPy API).

Every function here looks its target up when it is called (``pp3.kernels.propose``, ``pp3.reference.select.propose``,
...), never at import, so a bug planted by replacing a module attribute (a test's monkeypatch, a mutant of
``pp3.testing.mutants``) is what runs. ``kernels()`` returns the selector's five variants (the segment selector of
``propose``, with its sharded form through ``tile_candidates`` and ``finalize``; launch C's gather; the tile
selector; the greedy selector both ways, ``LaunchConfig.greedy``) and the verifier at its default launch; each takes
the case's ``tile``. ``next_selectors()`` returns the one-launch and row selectors of #53, not yet shipped, which run
only where asked for (``pp3 verify --selectors onelaunch rows``). ``verifier(launch)`` is the verifier with another
launch (its screen and handover variants, as ``AcceptCall.run_kernel(launch=...)`` runs them).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pp3.harness.protocol import Capabilities, Implementation, NotExported

KERNELS = "pp3-kernels"
REFERENCE = "pp3-reference"
# The selector's variants of pp3's kernels, in the order ``pp3 verify`` runs them (``--selectors``): the name of
# each (``Call.kernel``) and its variant label ("" for propose).
SELECTOR_KERNELS = ("propose", "gather", "tiles", "greedy", "rescan")
# The selectors not yet shipped (LaunchConfig(selector="onelaunch"), "rows"; #53): on request only, never in kernels().
NEXT_SELECTOR_KERNELS = ("onelaunch", "rows")


def _kernel(name: str) -> Any:
    """``pp3.kernels.<name>``, looked up now (``NotExported`` where the installed kernels have none)."""
    from pp3 import kernels

    try:
        return getattr(kernels, name)
    except (AttributeError, ImportError) as e:
        raise NotExported(f"pp3.kernels exports no {name}") from e


def _launch(**kw: Any) -> Any:
    return _kernel("LaunchConfig")(**kw)


def _segments(gather: bool) -> Callable[..., Any]:
    """The segment selector. With a case's tile: that tile as the segment, launch C gathering or not as the variant
    says; without one (an engine's call, the bulk rows): the launcher's own choices, as anyone gets them (the
    gather variant still gathers)."""

    def propose(logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, tau: float, *,
                tile: int | None = None) -> Any:
        how = gather if gather or tile is not None else None
        launch = _launch(selector="segments", segment=tile, segment_gather=how)  # the segment size is the launch's
        return _kernel("propose")(logits, target_temperature, seed, round, position, tau, launch=launch)

    return propose


def _tiles(logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, tau: float, *,
           tile: int | None = None) -> Any:
    return _kernel("propose")(logits, target_temperature, seed, round, position, tau, tile=tile,
                              launch=_launch(selector="tiles"))


def _propose_shards(shards: Sequence[Any], target_temperature: Any, seed: Any, round: Any, position: Any,
                    tau: float, *, tile: int | None = None) -> Any:
    """The segment selector over shards as a tensor-parallel caller runs it: one ``tile_candidates`` per shard
    (global IDs), their tiles side by side as an exchange gives them, one ``finalize`` (which checks what it is
    given)."""
    import torch

    edges = [0, *itertools.accumulate(int(x.shape[1]) for x in shards)]
    parts = [_kernel("tile_candidates")(x, id_offset=a, tile=tile) for x, a in zip(shards, edges, strict=False)]
    cands = dataclasses.replace(parts[0], keys=torch.cat([p.keys for p in parts], 1).contiguous(),
                                flags=torch.cat([p.flags for p in parts], 1).contiguous(), spans={})
    return _kernel("finalize")(cands, target_temperature, seed, round, position, tau, vocab_size=edges[-1])


def _next(selector: str) -> Callable[..., Any]:
    """The one-launch or row selector (``LaunchConfig(selector=selector)``). With a case's tile: that tile as its
    segment (the row selector's step); without one: the launcher's own choice."""

    def propose(logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, tau: float, *,
                tile: int | None = None) -> Any:
        launch = _launch(selector=selector, segment=tile)
        return _kernel("propose")(logits, target_temperature, seed, round, position, tau, launch=launch)

    return propose


def _greedy(how: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The greedy selector (``LaunchConfig(greedy=how)``) with the selector's protocol: it reads no temperature,
    key or tau (its calls are T0 rows), one row as one shard or split."""

    def shards(parts: Sequence[Any], target_temperature: Any, seed: Any, round: Any, position: Any, tau: float, *,
               tile: int | None = None) -> Any:
        return _kernel("greedy_sharded")(list(parts), tile=tile, launch=_launch(greedy=how))

    def one(logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, tau: float, *,
            tile: int | None = None) -> Any:
        return shards([logits], target_temperature, seed, round, position, tau, tile=tile)

    return one, shards


def _verify(launch: Any) -> Callable[..., Any]:
    """The verifier with ``launch`` (a ``LaunchConfig``: its ``screen`` and ``handover`` pick the variants), or with
    the launcher's default (None: what any caller gets)."""
    how = {} if launch is None else {"launch": launch}

    def verify(target_logits: Any, target_temperature: Any, draft_tokens: Any, draft_status: Any, draft_ids: Any,
               draft_tickets: Any, seed: Any, round: Any, position: Any, *, tile: int | None = None) -> Any:
        return _kernel("verify")(target_logits, target_temperature, draft_tokens, draft_status, draft_ids,
                                 draft_tickets, seed, round, position, tile=tile, **how)

    return verify


def _philox(ctr: Any, key: Any) -> Any:
    return _kernel("philox")(ctr, key)


def _expf(z: Any) -> Any:
    return _kernel("expf")(z)


CAPS = Capabilities(api="torch", tile=True)  # pp3's kernels: torch tensors, each case's tile
PRIMITIVES: dict[str, Callable[..., Any]] = {"philox": _philox, "expf": _expf}


def verifier(launch: Any = None) -> Implementation:
    """pp3's Triton verifier as an implementation; ``launch``: a ``LaunchConfig`` picking its variants (its
    ``screen`` and ``handover``: ``pp3.kernels.verify``), None the launcher's default (what ``kernels()`` runs)."""
    return Implementation("verifier", KERNELS, _verify(launch), CAPS, primitives=PRIMITIVES)


def kernels() -> list[Implementation]:
    """pp3's Triton kernels: the selector's variants (``SELECTOR_KERNELS``) and the verifier (its default launch),
    on the CUDA GPU if torch sees one, else on the CPU (Triton's interpreter, TRITON_INTERPRET=1)."""
    caps, prims = CAPS, PRIMITIVES
    greedy, greedy_shards = _greedy("keys")
    rescan, rescan_shards = _greedy("rescan")
    return [
        Implementation("selector", KERNELS, _segments(False), caps, sharded=_propose_shards, primitives=prims),
        # launch C's gather: the segment selector's path from 16 rows per call, which the bulk rows' batches take
        # through propose anyway
        Implementation("selector", KERNELS, _segments(True), caps, variant="gather", bulk=False),
        Implementation("selector", KERNELS, _tiles, caps, variant="tiles"),
        Implementation("selector", KERNELS, greedy, caps, sharded=greedy_shards, t0_only=True, variant="greedy"),
        Implementation("selector", KERNELS, rescan, caps, sharded=rescan_shards, t0_only=True, variant="rescan"),
        verifier(),
    ]


def next_selectors() -> list[Implementation]:
    """The selectors not yet shipped (``NEXT_SELECTOR_KERNELS``: the one-launch and row selectors of #53), each on
    one tensor (no sharded form: a sharded call is skipped)."""
    return [Implementation("selector", KERNELS, _next(name), CAPS, variant=name)
            for name in NEXT_SELECTOR_KERNELS]


def kernel(variant: str) -> Implementation:
    """The selector variant of pp3's kernels named ``variant`` (``SELECTOR_KERNELS``, ``NEXT_SELECTOR_KERNELS``;
    "propose": the main one), or the verifier ("verifier")."""
    for impl in kernels() + next_selectors():
        if (impl.role == "verifier" and variant == "verifier") or (
                impl.role == "selector" and (impl.variant or "propose") == variant):
            return impl
    raise KeyError(f"pp3's kernels have no {variant!r} (selectors: "
                   f"{', '.join(SELECTOR_KERNELS + NEXT_SELECTOR_KERNELS)}; verifier)")


# ------------------------------------------------------------------------------------------------- the reference


def _ref_propose(logits: Any, target_temperature: Any, seed: Any, round: Any, position: Any, tau: float) -> Any:
    from pp3.reference import select

    return select.propose(logits, target_temperature, seed, round, position, tau)


def _ref_propose_shards(shards: Sequence[Any], target_temperature: Any, seed: Any, round: Any, position: Any,
                        tau: float) -> Any:
    """The reference has no split: it reads the shards joined in ID order."""
    return _ref_propose(np.concatenate(list(shards), axis=1), target_temperature, seed, round, position, tau)


def _ref_verify(target_logits: Any, target_temperature: Any, draft_tokens: Any, draft_status: Any, draft_ids: Any,
                draft_tickets: Any, seed: Any, round: Any, position: Any) -> Any:
    from pp3.reference import accept

    return accept.verify(target_logits, target_temperature, draft_tokens, draft_status, draft_ids, draft_tickets,
                         seed, round, position)


def _ref_philox(ctr: Any, key: Any) -> Any:
    from pp3.reference import philox

    return philox.philox4x64_10(ctr, key)


def _ref_expf(z: Any) -> Any:
    from pp3.reference import exponential

    return exponential.expf(z)


def reference() -> list[Implementation]:
    """The NumPy reference (the definition) as an implementation: comparing it with itself checks the harness, and a
    planted bug in it (``pp3.testing.planted``) checks that the harness catches one."""
    caps = Capabilities(api="numpy")
    prims: dict[str, Callable[..., Any]] = {"philox": _ref_philox, "expf": _ref_expf}
    return [Implementation("selector", REFERENCE, _ref_propose, caps, sharded=_ref_propose_shards, primitives=prims),
            Implementation("verifier", REFERENCE, _ref_verify, caps, primitives=prims)]
