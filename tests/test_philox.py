"""SPEC.md §8: Philox4x64-10 (Random123 known answers on the reference and on the kernels' device code, NumPy's
independent Philox), mulhilo64, the keyed uniform."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pp3.reference import DOMAIN_ACCEPT, DOMAIN_PROPOSAL, DOMAIN_RESIDUAL, philox
from pp3.reference.philox import PHILOX_M0, PHILOX_M1, mulhilo64, philox4x64_10, proposal_uniform
from pp3.testing.compare import assert_equal
from pp3.testing.golden import load_kat

KAT_VECTORS = load_kat()
U64 = (1 << 64) - 1
U256 = 1 << 256


def numpy_philox(ctr: int, key: tuple[int, int]) -> list[int]:
    """Philox4x64-10(ctr, key) via numpy.random.Philox, an independent implementation.

    NumPy increments its 256-bit counter (word 0 least significant) before producing each block, so we set it to
    ctr - 1 mod 2^256 and read one block of 4 words.
    """
    c = (ctr - 1) % U256
    words = [(c >> (64 * i)) & U64 for i in range(4)]
    bg = np.random.Philox(counter=np.array(words, dtype=np.uint64), key=np.array(key, dtype=np.uint64))
    return [int(v) for v in bg.random_raw(4)]


def _ctr_int(words: list[int]) -> int:
    return sum(w << (64 * i) for i, w in enumerate(words))


def test_kat_file_has_the_three_random123_vectors() -> None:
    assert len(KAT_VECTORS) == 3
    assert KAT_VECTORS[0][0] == [0] * 4 and KAT_VECTORS[1][0] == [U64] * 4  # all zeros, all ones
    assert KAT_VECTORS[2][0][0] == 0x243F6A8885A308D3  # pi digits


@pytest.mark.parametrize("ctr,key,want", KAT_VECTORS, ids=["zeros", "ones", "pi"])
def test_reference_matches_random123_kat(ctr: list[int], key: list[int], want: list[int]) -> None:
    got = philox4x64_10(np.array(ctr, dtype=np.uint64), np.array(key, dtype=np.uint64))
    assert_equal(got, np.array(want, dtype=np.uint64), f"philox4x64_10(ctr={[hex(c) for c in ctr]})")


@pytest.mark.parametrize("ctr,key,want", KAT_VECTORS, ids=["zeros", "ones", "pi"])
def test_numpy_philox_word_order_matches_kat(ctr: list[int], key: list[int], want: list[int]) -> None:
    """Establishes the oracle used below: counter = ctr - 1, words come out as v[0..3] in order."""
    assert numpy_philox(_ctr_int(ctr), (key[0], key[1])) == want


def _random_pairs(n: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    rng = np.random.default_rng(20240817)
    ctr = rng.integers(0, U64, size=(n, 4), dtype=np.uint64, endpoint=True)
    key = rng.integers(0, U64, size=(n, 2), dtype=np.uint64, endpoint=True)
    # Counters at and near the 2^256 wrap-around (NumPy's ctr - 1 borrows through all four words), and near the
    # 64-bit word boundaries where a carry crosses words.
    edges = [0, 1, 2, U64 - 1, U64, 1 << 63]
    special = [[0, 0, 0, 0], [1, 0, 0, 0], [U64] * 4, [U64 - 1, U64, U64, U64], [0, 0, 0, U64], [0, 1, 0, 0]]
    special += [[edges[(7 * i + j) % 6] for j in range(4)] for i in range(30)]
    m = min(n, len(special))
    ctr[:m] = np.array(special[:m], dtype=np.uint64)
    key[:6] = [[0, 0], [U64, U64], [0, U64], [U64, 0], [1 << 63, 1], [DOMAIN_PROPOSAL, DOMAIN_ACCEPT]]
    return ctr, key


def test_reference_matches_numpy_philox_on_1200_pairs() -> None:
    ctr, key = _random_pairs(1200)
    got = philox4x64_10(ctr, key)
    want = np.array(
        [numpy_philox(_ctr_int([int(w) for w in c]), (int(k[0]), int(k[1]))) for c, k in zip(ctr, key, strict=True)],
        dtype=np.uint64,
    )
    assert_equal(got, want, "philox4x64_10 vs numpy.random.Philox", inputs=ctr)


def test_batch_shapes_are_elementwise() -> None:
    ctr, key = _random_pairs(40)
    flat = philox4x64_10(ctr, key)
    assert_equal(philox4x64_10(ctr.reshape(2, 4, 5, 4), key.reshape(2, 4, 5, 2)).reshape(40, 4), flat, "[2,4,5] batch")
    one = np.stack([philox4x64_10(ctr[i], key[i]) for i in range(40)])
    assert_equal(one, flat, "row by row")


def test_philox_rejects_wrong_word_counts() -> None:
    with pytest.raises(ValueError, match="ctr"):
        philox4x64_10(np.zeros(3, np.uint64), np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="key"):
        philox4x64_10(np.zeros(4, np.uint64), np.zeros(3, np.uint64))


# --- mulhilo64 against Python integers ---------------------------------------------------------------------------

EXTREMES = [0, 1, 2, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, U64 - 1, U64]


def _check_mulhilo(a: int, bs: list[int]) -> None:
    hi, lo = mulhilo64(np.uint64(a), np.array(bs, dtype=np.uint64))
    want_hi = np.array([(a * b) >> 64 for b in bs], dtype=np.uint64)
    want_lo = np.array([(a * b) & U64 for b in bs], dtype=np.uint64)
    assert_equal(hi, want_hi, f"mulhilo64({a:#x}, b).hi", inputs=np.array(bs, dtype=np.uint64))
    assert_equal(lo, want_lo, f"mulhilo64({a:#x}, b).lo", inputs=np.array(bs, dtype=np.uint64))


@pytest.mark.parametrize("a", [*EXTREMES, int(PHILOX_M0), int(PHILOX_M1)])
def test_mulhilo64_extremes(a: int) -> None:
    rng = np.random.default_rng(a % 1000)
    _check_mulhilo(a, EXTREMES + [int(x) for x in rng.integers(0, U64, 200, dtype=np.uint64, endpoint=True)])


@given(st.integers(0, U64), st.lists(st.integers(0, U64), min_size=1, max_size=64))
@example(U64, [U64])
@example(0, [U64])
@example(1 << 32, [1 << 32])  # the 2^64 carry boundary of the cross terms
def test_mulhilo64_property(a: int, bs: list[int]) -> None:
    _check_mulhilo(a, bs)


# --- the keyed uniform of the proposal domain ---------------------------------------------------------------------

def _u64(xs: list[int]) -> npt.NDArray[np.uint64]:
    return np.array(xs, dtype=np.uint64)


def _random_triples(n: int, seed: int) -> tuple[npt.NDArray[np.uint64], ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(0, U64, n, dtype=np.uint64, endpoint=True) for _ in range(3))


def test_proposal_uniform_is_top_24_bits_of_word0() -> None:
    s, r, p = _random_triples(2000, 1)
    u = proposal_uniform(s, r, p)
    w0 = philox.block(s, r, p, DOMAIN_PROPOSAL)[:, 0]
    assert u.dtype == np.uint64
    assert int(u.max()) < 1 << 24, f"u out of range: max {int(u.max()):#x}"
    assert_equal(u, w0 >> np.uint64(40), "proposal_uniform vs block()[:,0] >> 40")
    assert int(u.max()) >= (1 << 24) - (1 << 16), "the top bits are never set: not the top 24 bits?"


def test_proposal_keying_matches_numpy_philox() -> None:
    """§8 keying, checked against an independent Philox: counter (round, position, 0, 0), key (seed, domain)."""
    s, r, p = _random_triples(300, 2)
    s[:3], r[:3], p[:3] = _u64([0, 1 << 63, U64]), _u64([U64, 0, 1 << 63]), _u64([1 << 63, U64, 0])
    u = proposal_uniform(s, r, p)
    want = _u64([numpy_philox(int(ri) + (int(pi) << 64), (int(si), DOMAIN_PROPOSAL))[0] >> 40
                 for si, ri, pi in zip(s, r, p, strict=True)])
    assert_equal(u, want, "proposal_uniform vs numpy Philox((round, position, 0, 0), (seed, DOMAIN_PROPOSAL))")


@pytest.mark.parametrize("which", ["seed", "round", "position"])
def test_proposal_uniform_depends_on_each_input(which: str) -> None:
    s, r, p = _random_triples(1000, 3)
    base = proposal_uniform(s, r, p)
    flip = np.uint64(1) << np.random.default_rng(4).integers(0, 64, 1000).astype(np.uint64)
    args = {"seed": s, "round": r, "position": p}
    args[which] = args[which] ^ flip
    moved = proposal_uniform(args["seed"], args["round"], args["position"])
    same = np.flatnonzero(moved == base)
    assert same.size == 0, f"flipping one bit of {which} left u unchanged in {same.size} of 1000 rows, first {same[:5]}"


def test_domains_give_different_blocks() -> None:
    s, r, p = _random_triples(1000, 5)
    blocks = [philox.block(s, r, p, d) for d in (DOMAIN_PROPOSAL, DOMAIN_ACCEPT, DOMAIN_RESIDUAL)]
    for i in range(3):
        for j in range(i + 1, 3):
            eq = (blocks[i][:, 0] >> np.uint64(40)) == (blocks[j][:, 0] >> np.uint64(40))
            assert int(eq.sum()) == 0, f"domains {i} and {j} share the 24-bit uniform in {int(eq.sum())} rows"


@pytest.mark.parametrize("value", [0, 1 << 63, U64])
def test_uint64_extremes_accepted(value: int) -> None:
    s, r, p = _random_triples(3, 6)
    for k, arr in enumerate((s, r, p)):
        arr[k] = value
    u = proposal_uniform(s, r, p)
    want = _u64([numpy_philox(int(ri) + (int(pi) << 64), (int(si), DOMAIN_PROPOSAL))[0] >> 40
                 for si, ri, pi in zip(s, r, p, strict=True)])
    assert_equal(u, want, f"proposal_uniform with {value:#x} in seed/round/position")


# --- the kernels' Philox on the known answers --------------------------------------------------------------------


@pytest.mark.interpreter
@pytest.mark.parametrize("ctr,key,want", KAT_VECTORS, ids=["zeros", "ones", "pi"])
def test_kernel_philox_matches_random123_kat(ctr: list[int], key: list[int], want: list[int]) -> None:
    """Triton's philox_impl, as the selector and the verifier call it, on pp3/conformance/philox4x64_10.kat."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    import os

    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        pytest.skip("needs TRITON_INTERPRET=1 or a CUDA GPU")
    from pp3.kernels import philox as kernel_philox
    from pp3.testing.call import default_device

    dev = default_device()

    def t(words: list[int]) -> object:
        return torch.from_numpy(np.array([words], dtype=np.uint64).view(np.int64)).to(dev)

    got = kernel_philox(t(ctr), t(key)).cpu().numpy().view(np.uint64)[0]  # type: ignore[arg-type]
    assert_equal(got, np.array(want, dtype=np.uint64), f"kernel philox4x64_10(ctr={[hex(c) for c in ctr]})")
