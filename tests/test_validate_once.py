"""Each public entry point checks each of its arguments exactly once (``pp3.kernels.checks``), then hands them to the
launchers that trust them (``pp3.kernels.launchers``): the selector's and the verifier's entry points, the custom
operators, the vocabulary-parallel selector, the sampled drafter (keys once per call, the model's shards once per
depth) and the adapters.

Every checker is wrapped to count which arguments it was given; a checker called from inside another one (``shards``
calls ``logits``, ``row_keys`` calls ``u64_rows``) is counted as its outermost caller, so the counts say how often the
entry point asked for each argument to be checked. A planted second check (``test_a_second_check_is_seen``) shows
that the counting sees one.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from pp3 import adapters, drafter, ops, pair  # noqa: E402
from pp3.kernels import accept, checks, launchers, select  # noqa: E402

pytestmark = pytest.mark.interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
B, V, D = 2, 64, 2
KEYS = ("target_temperature", "seed", "round", "position")


def _named(arg: int) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[str, ...]]:
    return lambda a, kw: (a[arg],) if len(a) > arg and isinstance(a[arg], str) else ()


def _fixed(*names: str) -> Callable[[tuple[Any, ...], dict[str, Any]], tuple[str, ...]]:
    return lambda a, kw: names


# checker -> the arguments a call of it checks
CHECKERS: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], tuple[str, ...]]] = {
    "logits": _named(0),
    "integer": _named(0),
    "tensor": _named(0),
    "u64_rows": _named(0),
    "temperature_rows": _fixed("target_temperature"),
    "row_keys": _fixed(*KEYS),
    "tile": _fixed("tile"),
    "verify_tile": _fixed("tile"),
    "tau": _fixed("tau"),
    "launch_config": _fixed("launch"),
    "proposal_out": _fixed("out"),
    "verdict_out": _fixed("out"),
    "candidates_out": _fixed("out", "tile_base"),
    "candidates": _fixed("cands", "vocab_size"),
    "shards": lambda a, kw: (a[2] if len(a) > 2 else kw.get("name", "shards"), "tile"),
}


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[str]]:
    """Every checker of ``pp3.kernels.checks`` wrapped: the arguments checked, counted by their outermost check."""
    seen: collections.Counter[str] = collections.Counter()
    depth = [0]

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def counted(*a: Any, **kw: Any) -> Any:
            if depth[0] == 0:
                seen.update(CHECKERS[name](a, kw))
            depth[0] += 1
            try:
                return fn(*a, **kw)
            finally:
                depth[0] -= 1

        return counted

    for name in CHECKERS:
        monkeypatch.setattr(checks, name, wrap(name, getattr(checks, name)))
    yield seen


def _inputs() -> tuple[Any, Any, Any]:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(B, V, generator=g).to(DEVICE)
    target = torch.randn(B, D + 1, V, generator=g).to(DEVICE)
    temp = torch.tensor([1.0, 0.0], device=DEVICE)
    return x, target, temp


def _keys(temp: Any) -> tuple[Any, ...]:
    u = torch.tensor([1, 2], dtype=torch.int64, device=DEVICE)
    return temp, u, u, u


def _once(seen: collections.Counter[str], *names: str) -> None:
    assert dict(seen) == dict.fromkeys(names, 1), dict(seen)


def test_propose_and_propose_sharded(counts: collections.Counter[str]) -> None:
    x, _, temp = _inputs()
    select.propose(x, *_keys(temp))
    _once(counts, "logits", "tile", *KEYS, "out", "tau", "launch")
    counts.clear()
    select.propose_sharded([x[:, :40], x[:, 40:]], *_keys(temp), tile=32)
    _once(counts, "shards", "tile", *KEYS, "out", "tau", "launch")


def test_greedy_and_greedy_sharded(counts: collections.Counter[str]) -> None:
    x, _, _ = _inputs()
    select.greedy(x)
    _once(counts, "logits", "tile", "out", "launch")
    counts.clear()
    select.greedy_sharded([x[:, :40], x[:, 40:]], tile=32)
    _once(counts, "shards", "tile", "out", "launch")
    counts.clear()
    ops.greedy(x)
    _once(counts, "logits", "tile", "out", "launch")


def test_greedy_drafter(counts: collections.Counter[str]) -> None:
    """The greedy path on the kernels: the model's logits once per depth, nothing else to check."""
    d = drafter.TPDrafter(_Model(), 3, backend="triton")
    d.draft(torch.zeros(B, 1, dtype=torch.int64, device=DEVICE))
    assert dict(counts) == {"shards": 3, "tile": 3}, dict(counts)


def test_tile_candidates_and_finalize(counts: collections.Counter[str]) -> None:
    x, _, temp = _inputs()
    c = select.tile_candidates(x, tile=32)
    _once(counts, "logits", "tile", "id_offset", "out", "tile_base", "launch")
    counts.clear()
    select.finalize(c, *_keys(temp), vocab_size=V)
    _once(counts, "cands", "vocab_size", *KEYS, "out", "tau", "launch")


def _drafts(x: Any, temp: Any) -> tuple[Any, ...]:
    p = select.propose(x, *_keys(temp))
    return tuple(t[:, None].expand(-1, D, *t.shape[1:]).contiguous() for t in (p.token, p.status, p.ids, p.tickets))


def test_verify(counts: collections.Counter[str]) -> None:
    x, target, temp = _inputs()
    drafts = _drafts(x, temp)
    counts.clear()
    accept.verify(target, temp, *drafts, *_keys(temp)[1:])
    _once(
        counts,
        "target_logits",
        "tile",
        "draft_tokens",
        "draft_status",
        "draft_ids",
        "draft_tickets",
        *KEYS,
        "out",
        "launch",
    )


def test_custom_operators(counts: collections.Counter[str]) -> None:
    x, target, temp = _inputs()
    ops.propose(x, *_keys(temp))
    _once(counts, "logits", "tile", *KEYS, "out", "tau", "launch")
    counts.clear()
    keys, flags = ops.tile_candidates(x, 0, 32)
    _once(counts, "logits", "tile", "id_offset", "out", "tile_base", "launch")
    counts.clear()
    ops.finalize(keys, flags, *_keys(temp), V)
    _once(counts, "cands", "vocab_size", *KEYS, "out", "tau", "launch")
    drafts = _drafts(x, temp)
    counts.clear()
    ops.verify(target, temp, *drafts, *_keys(temp)[1:])
    _once(
        counts,
        "target_logits",
        "tile",
        "draft_tokens",
        "draft_status",
        "draft_ids",
        "draft_tickets",
        *KEYS,
        "out",
        "launch",
    )


@pytest.fixture
def group() -> Iterator[None]:
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a default process group already exists in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,  # type: ignore[attr-defined]
                            timeout=timedelta(seconds=30))
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_vocabulary_parallel_selector(counts: collections.Counter[str], group: None) -> None:
    x, _, temp = _inputs()
    x = x.cpu()
    plan = pair.check_shards(x, 0, V, tau=0.7, tile=32)
    counts.clear()
    t, seed, rnd, pos = (k.cpu() for k in _keys(temp))
    pair.propose_vocab_parallel(x, 0, V, t, seed, rnd, pos, 0.7, tile=32, plan=plan)
    _once(counts, "logits_shard", "vocab_offset", "vocab_size", "tile", *KEYS, "tau", "launch")


class _Model:
    vocab_size = V

    def __call__(self, tokens: Any) -> Any:
        g = torch.Generator().manual_seed(int(tokens.shape[1]))
        return torch.randn(tokens.shape[0], V, generator=g).to(DEVICE)


def test_sampled_drafter(counts: collections.Counter[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys once per call, the model's logits once per depth (they are new data at every depth)."""
    monkeypatch.setenv(drafter.SAMPLED_ENV, "1")
    _, _, temp = _inputs()
    d = drafter.TPDrafter(_Model(), 3, backend="triton")
    d.draft_sampled(torch.zeros(B, 1, dtype=torch.int64, device=DEVICE), *_keys(temp))
    assert dict(counts) == {**dict.fromkeys(KEYS, 1), "shards": 3, "tile": 3}, dict(counts)


def test_the_adapters_check_through_the_same_checkers(counts: collections.Counter[str]) -> None:
    _, target, _ = _inputs()
    lengths = torch.tensor([1, 2], device=DEVICE)
    adapters.target_logits_to_ragged(target, lengths, 5)
    assert counts["num_tokens"] == 1 and max(counts.values()) == 1, dict(counts)


def test_a_second_check_is_seen(counts: collections.Counter[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The counting catches an entry point that checks an argument twice (a planted second ``tau`` check)."""
    launch_propose = launchers.propose

    def twice(*a: Any) -> Any:
        checks.tau(a[3])
        return launch_propose(*a)

    monkeypatch.setattr(launchers, "propose", twice)
    x, _, temp = _inputs()
    select.propose(x, *_keys(temp))
    assert counts["tau"] == 2
