"""``pp3.kernels.finalize`` on candidates a caller made. What the host can see (the tiles and IDs
``tile_candidates`` recorded) is refused before any launch; what only the data shows (a tile's order, an ID >= V,
tiles out of ID order or overlapping, unknown flag bits, keys the flags deny) fails the row with ``BAD_CANDIDATES``
and the failed-row outputs before launch 2 reads it, never an out-of-range token, and the other rows stay equal to
the reference. Each test fails on the entry point without its check (removing ``checks.candidates``' spans check or
the check launch from ``launchers.finalize``): the malformed rows then come back with status 0, or launch 2 raises
on them in the interpreter. Any buffer at all: ``proptests/test_candidates_contract.py``.

Runs through Triton's interpreter on the CPU or natively on a CUDA GPU (where compute-sanitizer runs it too:
``tools/sanitize_cases.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from pp3 import reference as ref  # noqa: E402
from pp3.kernels import BAD_CANDIDATES, Candidates, _select, select  # noqa: E402
from pp3.testing import candidates  # noqa: E402

pytestmark = pytest.mark.interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FIELDS = ("status", "token", "ids", "tickets")
B, V, TILE = 3, 200, 64  # 4 tiles per row, the last partial
KEYS = (np.float32(1.0), np.uint64(5), np.uint64(6), np.uint64(7))


def _logits() -> Any:
    g = torch.Generator().manual_seed(16)
    return (torch.randn(B, V, generator=g) * 3).to(DEVICE)


def _run(cands: Candidates, v: int = V) -> dict[str, np.ndarray]:
    temp, seed, rnd, pos = (torch.tensor([k] * B, device=DEVICE) for k in (1.0, 5, 6, 7))
    p = select.finalize(cands, temp, seed, rnd, pos, vocab_size=v)
    return {f: getattr(p, f).cpu().numpy() for f in FIELDS}


def _want(x: Any) -> dict[str, np.ndarray]:
    r = ref.propose(x.cpu().numpy(), *KEYS)
    return {f: np.asarray(getattr(r, f)) for f in FIELDS}


def _raw(c: Candidates, keys: Any = None, flags: Any = None) -> Candidates:
    """The same buffers (or changed copies) as a caller would hand them over: no record of what wrote them."""
    return Candidates(keys=(c.keys if keys is None else keys).contiguous(),
                      flags=(c.flags if flags is None else flags).contiguous())


def _assert_bad_row(got: dict[str, np.ndarray], want: dict[str, np.ndarray], bad: int) -> None:
    assert got["status"][bad] == BAD_CANDIDATES and got["token"][bad] == -1
    assert (got["ids"][bad] == -1).all() and (got["tickets"][bad] == 0).all()
    for r in range(B):
        if r != bad:
            for f in FIELDS:
                assert np.array_equal(got[f][r], want[f][r]), f"row {r}: {f}"


def test_well_formed_candidates_equal_the_reference() -> None:
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    assert c.spans == {0: (0, 64), 1: (64, 128), 2: (128, 192), 3: (192, V)}
    want = _want(x)
    for cands in (c, _raw(c)):  # with the record and without it
        got = _run(cands)
        for f in FIELDS:
            assert np.array_equal(got[f], want[f]), f


def test_unsorted_tile_fails_its_row() -> None:
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    keys = c.keys.clone()
    keys[1, 2, [0, 5]] = keys[1, 2, [5, 0]]  # row 1, tile 2: two keys swapped
    _assert_bad_row(_run(_raw(c, keys=keys)), _want(x), 1)


def test_repeated_key_fails_its_row() -> None:
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    keys = c.keys.clone()
    keys[2, 0, 1] = keys[2, 0, 0]  # a key twice in one tile: not strictly descending
    _assert_bad_row(_run(_raw(c, keys=keys)), _want(x), 2)


def test_id_past_the_vocabulary_fails_its_row_never_a_token_past_it() -> None:
    """Candidates of IDs 0 .. V-1 given as a vocabulary of V - 10: the rows whose candidates hold an ID >= V - 10
    fail; no row returns a token or slot ID >= V - 10."""
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    got = _run(_raw(c), v=V - 10)
    ids = (0xFFFFFFFF - (c.keys.cpu().numpy() & 0xFFFFFFFF))[c.keys.cpu().numpy() != 0]
    assert ids.max() >= V - 10  # the case tests something
    assert (got["status"] == BAD_CANDIDATES).any()
    ok = got["status"] == 0
    assert (got["token"][ok] < V - 10).all() and (got["ids"][ok] < V - 10).all()
    # the same candidates from a shard at offset 7 (IDs up to V + 6) over a vocabulary of V
    shifted = select.tile_candidates(x, id_offset=7, tile=TILE)
    got = _run(_raw(shifted))
    assert (got["status"] == BAD_CANDIDATES).all() and (got["token"] == -1).all()


def test_overlapping_shards_fail_their_rows() -> None:
    """Two shards whose IDs overlap (the second starts 10 IDs early), concatenated: the rows fail."""
    x = _logits()
    a = select.tile_candidates(x[:, :128], tile=TILE)
    b = select.tile_candidates(x[:, 118:], id_offset=118, tile=TILE)
    keys = torch.cat([a.keys, b.keys], dim=1)
    flags = torch.cat([a.flags, b.flags], dim=1)
    got = _run(Candidates(keys=keys.contiguous(), flags=flags.contiguous()), v=V)
    assert (got["status"] == BAD_CANDIDATES).all()


def test_tiles_out_of_id_order_fail_their_rows() -> None:
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    got = _run(_raw(c, keys=c.keys.flip(1), flags=c.flags.flip(1)))
    assert (got["status"] == BAD_CANDIDATES).all()


def test_unknown_flag_bits_fail_their_row() -> None:
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    flags = c.flags.clone()
    flags[0, 3] |= 8
    _assert_bad_row(_run(_raw(c, flags=flags)), _want(x), 0)


def test_empty_tiles_stay_neutral() -> None:
    """All-zero tiles (an exchange's padding) anywhere are not a malformed candidate."""
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    z = torch.zeros((B, 1, 32), dtype=torch.int64, device=DEVICE)
    zf = torch.zeros((B, 1), dtype=torch.int32, device=DEVICE)
    keys = torch.cat([z, c.keys[:, :2], z, c.keys[:, 2:], z], dim=1)
    flags = torch.cat([zf, c.flags[:, :2], zf, c.flags[:, 2:], zf], dim=1)
    got = _run(Candidates(keys=keys.contiguous(), flags=flags.contiguous()))
    want = _want(x)
    for f in FIELDS:
        assert np.array_equal(got[f], want[f]), f


@pytest.mark.parametrize("case", range(12))
def test_the_corpus_fails_exactly_its_broken_rows(case: int) -> None:
    """The malformed buffers compute-sanitizer runs on the GPU (``pp3.testing.candidates.corpus``: all-zero, all -1
    and random keys under the real flags included, which launch 2 once met unchecked): BAD_CANDIDATES on exactly the
    rows the contract's second reading calls broken, the other rows equal to the reference."""
    x = _logits()
    c = select.tile_candidates(x, tile=TILE)
    variants = candidates.corpus(c.keys, c.flags)
    assert len(variants) == 12
    name, keys, flags = variants[case]
    got = _run(Candidates(keys=keys, flags=flags))
    broken = candidates.broken_rows(keys.cpu().numpy(), flags.cpu().numpy(), V)
    assert broken.any() != name.startswith("empty tiles"), name
    assert np.array_equal(got["status"] == BAD_CANDIDATES, broken), name
    assert (got["token"][broken] == -1).all() and (got["ids"][broken] == -1).all()
    assert (got["tickets"][broken] == 0).all()
    want = _want(x)
    for f in FIELDS:
        assert np.array_equal(got[f][~broken], want[f][~broken]), f"{name}: {f}"


def test_garbage_candidates_give_the_same_result_every_run() -> None:
    """Random bits as candidates: every row fails, and two runs agree (no uninitialised scratch is read)."""
    g = torch.Generator().manual_seed(3)
    keys = torch.randint(-(2**62), 2**62, (B, 4, 32), generator=g, dtype=torch.int64).to(DEVICE)
    flags = torch.randint(0, 8, (B, 4), generator=g, dtype=torch.int32).to(DEVICE)
    first = _run(Candidates(keys=keys, flags=flags))
    second = _run(Candidates(keys=keys.clone(), flags=flags.clone()))
    assert (first["status"] == BAD_CANDIDATES).all()
    for f in FIELDS:
        assert np.array_equal(first[f], second[f]), f


def _buffer(tiles: int) -> Candidates:
    return Candidates(keys=torch.zeros((B, tiles, 32), dtype=torch.int64, device=DEVICE),
                      flags=torch.zeros((B, tiles), dtype=torch.int32, device=DEVICE))


class _NoLaunch:
    def __getitem__(self, grid: Any) -> Any:
        raise AssertionError("a kernel was launched")


def test_shards_into_one_buffer_are_recorded_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two shards written into one buffer with tile_base: a full cover equals the reference; a tile never
    written, a tile rewritten with other IDs, an ID range skipped or the wrong vocabulary raise ValueError before
    launch 2."""
    x = _logits()
    out = _buffer(4)
    select.tile_candidates(x[:, :128], tile=TILE, out=out)
    select.tile_candidates(x[:, 128:], id_offset=128, tile=TILE, out=out, tile_base=2)
    assert out.spans == {0: (0, 64), 1: (64, 128), 2: (128, 192), 3: (192, V)}
    want = _want(x)
    got = _run(out)
    for f in FIELDS:
        assert np.array_equal(got[f], want[f]), f
    gap = _buffer(5)
    select.tile_candidates(x[:, :128], tile=TILE, out=gap)
    select.tile_candidates(x[:, 128:], id_offset=128, tile=TILE, out=gap, tile_base=3)
    twice = _buffer(4)
    select.tile_candidates(x[:, :128], tile=TILE, out=twice)
    select.tile_candidates(x[:, 128:], id_offset=128, tile=TILE, out=twice, tile_base=1)
    skipped = _buffer(4)
    select.tile_candidates(x[:, :128], tile=TILE, out=skipped)
    select.tile_candidates(x[:, 128:], id_offset=130, tile=TILE, out=skipped, tile_base=2)
    short = _buffer(4)
    select.tile_candidates(x[:, :128], tile=TILE, out=short)
    monkeypatch.setattr(_select, "_finalize_kernel", _NoLaunch())
    monkeypatch.setattr(_select, "_check_candidates_kernel", _NoLaunch())
    for cands, v, text in (
        (gap, V, "tiles 2 .. 2 were never written"),
        (twice, V, "tile 1 starts at ID 128; the tiles before it end at 64"),  # tile 1 rewritten by the second shard
        (skipped, V + 2, "tile 2 starts at ID 130; the tiles before it end at 128"),
        (short, V, "tiles 2 .. 3 were never written"),
        (out, V + 1, "the tiles cover IDs 0 .. 199, not the vocabulary 0 .. 200"),
    ):
        with pytest.raises(ValueError, match=f"cands: {text}"):
            _run(cands, v)
    with pytest.raises(ValueError, match="vocab_size"):
        _run(out, 0)


def test_a_tile_written_again_holds_the_last_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tile 0 written again with the same IDs: the record still covers the buffer, and the result equals the
    reference. Written again with another tiling (IDs 0 .. 31 instead of 0 .. 63), the gap it leaves is named."""
    x = _logits()
    out = _buffer(4)
    select.tile_candidates(x, tile=TILE, out=out)
    select.tile_candidates(x[:, :TILE], tile=TILE, out=out)
    assert out.spans == {0: (0, 64), 1: (64, 128), 2: (128, 192), 3: (192, V)}
    got, want = _run(out), _want(x)
    for f in FIELDS:
        assert np.array_equal(got[f], want[f]), f
    select.tile_candidates(x[:, :32], tile=32, out=out)
    monkeypatch.setattr(_select, "_finalize_kernel", _NoLaunch())
    monkeypatch.setattr(_select, "_check_candidates_kernel", _NoLaunch())
    with pytest.raises(ValueError, match="cands: tile 1 starts at ID 64; the tiles before it end at 32"):
        _run(out)


def test_candidates_must_be_a_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    c = select.tile_candidates(_logits(), tile=TILE)
    monkeypatch.setattr(_select, "_finalize_kernel", _NoLaunch())
    with pytest.raises(TypeError, match=r"cands: expected a pp3\.kernels\.Candidates, got tuple"):
        _run((c.keys, c.flags))  # type: ignore[arg-type]


def test_propose_launches_no_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused path's candidates come from its own launch 1: propose runs launches 1 and 2 only."""
    monkeypatch.setattr(_select, "_check_candidates_kernel", _NoLaunch())
    x = _logits()
    p = select.propose(x, *KEYS)
    assert np.array_equal(p.token.cpu().numpy(), _want(x)["token"])
