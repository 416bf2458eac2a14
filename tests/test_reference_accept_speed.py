"""The shortcuts of the NumPy reference verifier (``pp3.reference.accept``) give the bits of SPEC.md §11.4 as written:
the table of distinct values for fp16 / bf16 rows (P2-P3), rows in blocks (P1-P6), and §11.4 evaluated only for
the target rows that ``verify`` reads."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from pp3.reference import P_TICKETS, accept, bf16_bits_to_float32, float32_to_bf16_bits, tickets, verify
from pp3.reference.exponential import expf
from pp3.testing.compare import assert_equal
from pp3.testing.drafts import drafts

F32 = npt.NDArray[np.float32]
TEMPS = [1.0, 0.3, 2.0, 1e-30, 1e30, 1e-45, np.inf]


def _narrow_row(fmt: str, v: int, seed: int) -> F32:
    """A row of fp16 or bf16 values widened to fp32: normal logits, -inf, +-0.0, the format's extremes."""
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=4.0, size=v).astype(np.float32)
    x[rng.integers(0, v, size=v // 8)] = -np.inf
    x[rng.integers(0, v, size=min(v, 32))] = np.float32(-0.0)
    x[rng.integers(0, v, size=min(v, 32))] = np.float32(0.0)
    if fmt == "fp16":
        if v >= 8:
            x[:4] = [6e-8, -6e-8, -65504.0, 1e-5]  # fp16 subnormals and its largest magnitude
        return x.astype(np.float16).astype(np.float32)
    if v >= 8:
        x[:4] = [1e-40, -3e38, -1e-38, 3e38]  # an fp32 subnormal, differences that overflow to -inf
    return bf16_bits_to_float32(float32_to_bf16_bits(x))


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("t", TEMPS)
def test_the_table_of_distinct_values_gives_the_entrywise_weights(fmt: str, t: float) -> None:
    x = _narrow_row(fmt, 1 << 15, 7)
    m = x[int(accept._argmax(x))]
    got = accept._row_weights(x, m, np.float32(t))
    assert not (x.view(np.uint32) & accept._NARROW_MASK).any()  # the table path is the one taken
    assert_equal(got.view(np.uint32), accept._weights(x, m, np.float32(t)).view(np.uint32), f"{fmt} e, T = {t}")


def test_the_weights_are_p2_p3_as_written() -> None:
    x = _narrow_row("bf16", 1000, 3)
    m = x.max()
    with np.errstate(all="ignore"):
        z = np.where(x - m == -np.inf, np.float32(-np.inf), ((x - m) / np.float32(np.inf)).astype(np.float32))
    assert_equal(accept._weights(x, m, np.float32(np.inf)).view(np.uint32), expf(z).view(np.uint32), "e at T = inf")


@pytest.mark.parametrize("v", [1, 2, 37, 4097, 1 << 15, 163840])
def test_tickets_in_blocks_are_the_tickets_of_each_row(v: int) -> None:
    rng = np.random.default_rng(v)
    n = 5
    x = np.stack([_narrow_row(("fp16", "bf16")[i % 2], v, i) for i in range(n)])
    x[0] = rng.normal(scale=3.0, size=v).astype(np.float32)  # an fp32 row
    x[:, rng.integers(0, v)] = np.float32(5e3)  # a finite entry in every row
    temp = np.array(TEMPS[:n], dtype=np.float32)
    g, c = accept._tickets(x, temp)
    for i in range(n):  # §11.4 P1-P6 on the row alone, as SPEC.md writes them
        gi = int(np.flatnonzero(x[i] == x[i].max())[0])
        with np.errstate(all="ignore"):
            d = x[i] - x[i, gi]
            z = np.where(d == -np.inf, np.float32(-np.inf), d / temp[i]).astype(np.float32)
        w = np.zeros(1 << max(v - 1, 0).bit_length())
        w[:v] = expf(z)
        ci = np.floor((w[:v] * float(P_TICKETS)) / tickets.pairwise_sum(w)).astype(np.int64)
        ci[gi] += P_TICKETS - ci.sum()
        assert g[i] == gi
        assert_equal(c[i], ci, f"row {i} of V = {v}")


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
def test_rows_verify_does_not_read_do_not_change_the_verdict(fmt: str) -> None:
    """Target rows after the first rejection (or the bonus row) are never read: any OK values there give the same
    verdict, and so do rows j > n, whatever their class."""
    rng = np.random.default_rng(11)
    b, d, v = 4, 5, 1 << 15
    x = rng.normal(scale=2.0, size=(b, d + 1, v)).astype(np.float32)
    x[np.arange(b)[:, None], np.arange(d + 1), rng.integers(0, v, size=(b, d + 1))] = np.float32(12.0)
    if fmt == "bf16":
        x = bf16_bits_to_float32(float32_to_bf16_bits(x))
    elif fmt == "fp16":
        x = x.astype(np.float16).astype(np.float32)
    seed = rng.integers(0, 1 << 63, size=b, dtype=np.uint64)
    pos = rng.integers(0, 1 << 40, size=b, dtype=np.uint64)
    temp = np.array([1.0, 0.0, 0.7, 1.0], dtype=np.float32)
    draft = drafts((x[:, :d] + rng.normal(scale=0.5, size=(b, d, v))).astype(np.float32), temp, seed, 2, pos)
    first = verify(x, temp, **draft, seed=seed, round=2, position=pos)
    assert (first.status == 0).all() and (first.accepted < d).any()
    y = x.copy()
    for i in range(b):  # rows after the token row a: other OK values
        y[i, first.accepted[i] + 1 :] = rng.normal(scale=2.0, size=(d - first.accepted[i], v)).astype(np.float32)
    again = verify(y, temp, **draft, seed=seed, round=2, position=pos)
    for f in ("status", "accepted", "tokens"):
        assert_equal(getattr(again, f), getattr(first, f), f)
