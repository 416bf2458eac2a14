"""``pp3.kernels.finalize`` on any candidates buffer a caller can build: no exception inside a launch, each row a
status; BAD_CANDIDATES exactly on the rows whose candidates break launch 1's contract (``pp3.testing.candidates``'s
second reading of it); every other row as launch 2 computes it on candidates it trusts; no token or slot ID outside
-1 .. V - 1.

Buffers: well-formed candidates of random logits (fp32 values with NaN, +inf, -inf and ties), then a random number
of edits (a key set to 0, -1, random bits, another key of the buffer, a shifted ID or another value class; a tile's
keys all 0; a flag set to random bits or to any of the three), or random bits throughout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from pp3.kernels import BAD_CANDIDATES, Candidates, launchers, select
from pp3.kernels.buffers import new_proposal
from pp3.kernels.checks import row_keys
from pp3.kernels.config import DEFAULT_LAUNCH
from pp3.reference import DEFAULT_TAU
from pp3.testing.call import default_device
from pp3.testing.candidates import broken_rows
from proptests.strategies import prop_settings

# Found by the gpu profile on the H200 (2,000 examples): an ID twice in one tile with two values, which launch 2 put
# into one slot (token 17 = 8 + 8 + 1 of V = 9); the contract had no rule against it.
SAME_ID_TWICE = (
    np.array([[[-4598786487880777733, -4603311940301750274, -4620932649223979017, -4635496591266938886,
                -4644338292546863113, -4646390659849125889, -4648340901419024387, 4625706273445249017,
                4577288033375617020] + [0] * 23]], dtype=np.int64),
    np.array([[4]], dtype=np.int32), 9, np.array([1.0], dtype=np.float32))

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
]
DEVICE = default_device()
FIELDS = ("status", "token", "ids", "tickets")
U64 = st.integers(0, 2**64 - 1)


def _signed(u: int) -> int:
    return u - 2**64 if u >= 2**63 else u


@st.composite
def buffers(draw: Any) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(keys [B, T, 32] int64, flags [B, T] int32, V, temperatures [B] fp32)."""
    b = draw(st.integers(1, 3))
    tile = draw(st.sampled_from([32, 64]))
    v = draw(st.integers(1, 4 * tile))
    temps = np.array(draw(st.lists(st.sampled_from([1.0, 0.0, 0.7]), min_size=b, max_size=b)), dtype=np.float32)
    if draw(st.booleans()):
        n_tiles = draw(st.integers(1, 4))
        keys = np.array(draw(st.lists(U64, min_size=b * n_tiles * 32, max_size=b * n_tiles * 32)), dtype=np.uint64)
        flags = np.array(draw(st.lists(st.integers(0, 15), min_size=b * n_tiles, max_size=b * n_tiles)),
                         dtype=np.int32)
        return keys.view(np.int64).reshape(b, n_tiles, 32), flags.reshape(b, n_tiles), v, temps
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = (rng.standard_normal((b, v)) * 3).astype(np.float32)
    for value in draw(st.lists(st.sampled_from([np.nan, np.inf, -np.inf, 1.0]), max_size=4)):
        x[rng.integers(b), rng.integers(v)] = value
    c = select.tile_candidates(torch.from_numpy(x).to(DEVICE), tile=tile)
    keys, flags = c.keys.cpu().numpy().copy(), c.flags.cpu().numpy().copy()
    for _ in range(draw(st.integers(0, 3))):
        r, t, k = rng.integers(keys.shape[0]), rng.integers(keys.shape[1]), rng.integers(32)
        what = draw(st.sampled_from(["zero", "ones", "random", "copy", "shift", "flags", "flag bits", "class",
                                     "empty"]))
        if what == "flags":
            flags[r, t] = draw(st.integers(-(2**31), 2**31 - 1))
        elif what == "empty":  # the tile's keys all 0, its flags kept
            keys[r, t] = 0
        elif what == "flag bits":
            flags[r, t] = draw(st.integers(0, 7))
        elif what == "class":  # the first key's value made NaN or +inf, or the last real key's -inf: order kept
            real = np.flatnonzero(keys[r, t])
            j = 0 if draw(st.booleans()) or not real.size else int(real[-1])
            okey = draw(st.sampled_from([0xFFFFFFFF, 0xFF800000] if j == 0 else [0x007FFFFF, 0x00000001]))
            keys[r, t, j] = _signed((okey << 32) | (int(keys[r, t, j]) & 0xFFFFFFFF))
        elif what == "copy":
            keys[r, t, k] = keys[rng.integers(keys.shape[0]), rng.integers(keys.shape[1]), rng.integers(32)]
        elif what == "shift":
            keys[r, t, k] -= draw(st.integers(-3, 3))
        else:
            keys[r, t, k] = {"zero": 0, "ones": -1, "random": _signed(draw(U64))}[what]
    return keys, flags, v, temps


@prop_settings()
@given(buf=buffers())
@example(buf=SAME_ID_TWICE)
def test_any_candidates_get_a_status_never_an_exception(buf: tuple[np.ndarray, np.ndarray, int, np.ndarray]) -> None:
    keys, flags, v, temps = buf
    b = keys.shape[0]
    k, f = torch.from_numpy(keys).to(DEVICE), torch.from_numpy(flags).to(DEVICE)
    t = torch.from_numpy(temps).to(DEVICE)
    seed, rnd, pos = (torch.full((b,), s, dtype=torch.int64, device=DEVICE) for s in (5, 6, 7))
    got = select.finalize(Candidates(keys=k, flags=f), t, seed, rnd, pos, vocab_size=v)
    status = got.status.cpu().numpy()
    broken = broken_rows(keys, flags, v)
    assert np.array_equal(status == BAD_CANDIDATES, broken)
    for name in ("token", "ids"):
        a = getattr(got, name).cpu().numpy()
        assert ((a >= -1) & (a < v)).all(), name
    if broken.all():
        return
    # The rows that keep the contract: as launch 2 computes them on candidates it trusts (no check launch; the
    # broken rows emptied, since rows are independent and launch 2 relies on the contract).
    keep = torch.from_numpy(~broken).to(DEVICE)
    k, f = k * keep[:, None, None], f * keep[:, None]
    trusted = launchers.finalize(Candidates(keys=k, flags=f), row_keys(t, seed, rnd, pos, b, k.device), DEFAULT_TAU,
                                 DEFAULT_LAUNCH, new_proposal(b, k.device))
    for name in FIELDS:
        a, w = getattr(got, name).cpu().numpy(), getattr(trusted, name).cpu().numpy()
        assert np.array_equal(a[~broken], w[~broken]), name
