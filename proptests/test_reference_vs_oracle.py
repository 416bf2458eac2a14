"""Property tests: pp3.reference.propose equals the independent reading of the SPEC (tests/oracles/select.py) on rows
drawn by Hypothesis, with every known edge case pinned as an @example."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import example, given, settings

from pp3.reference import propose
from pp3.testing.call import FLT_MAX as FMAX
from pp3.testing.call import U64_MAX as U64
from proptests import strategies
from tests.oracles import select as spec_oracle

INF, NAN = float("inf"), float("nan")

TAU07 = float(np.float32(0.7))


@settings(max_examples=int(os.environ.get("PP3_PROPERTY_EXAMPLES", "150")))  # more: a longer hunt
@given(row=strategies.oracle_rows(), temp=strategies.row_temperature, seed=strategies.row_uint64,
       rnd=strategies.row_uint64, pos=strategies.row_uint64, tau=strategies.row_tau)
@example(row=[-0.0, 0.0], temp=1.0, seed=0, rnd=0, pos=0, tau=TAU07)  # signed zeros tie
@example(row=[0.0, -0.0], temp=0.0, seed=0, rnd=0, pos=0, tau=TAU07)  # T0 on a signed-zero tie
@example(row=[1.0, NAN, INF], temp=NAN, seed=1, rnd=2, pos=3, tau=TAU07)  # NaN beats +inf and a bad temperature
@example(row=[INF, -INF], temp=1.0, seed=1, rnd=2, pos=3, tau=TAU07)  # +inf beats zero mass
@example(row=[-INF, -INF], temp=-1.0, seed=1, rnd=2, pos=3, tau=TAU07)  # zero mass beats a bad temperature
@example(row=[1.0] * 33, temp=1.0, seed=U64, rnd=U64, pos=U64, tau=TAU07)  # 33-way tie, uint64 maxima
@example(row=[-FMAX, FMAX], temp=1.0, seed=0, rnd=1 << 63, pos=0, tau=TAU07)  # d overflows to -inf
@example(row=[1.0, 1.0, 0.5], temp=1.0, seed=5, rnd=0, pos=0, tau=1e-45)  # tau = smallest subnormal
@example(row=[3.0, -3.0, 0.0], temp=INF, seed=5, rnd=0, pos=0, tau=FMAX)  # tau = FLT_MAX, +inf temperature
@example(row=[0.0, -200.0, -100.0], temp=1.0, seed=5, rnd=0, pos=0, tau=1.0)  # zero and subnormal weights
@example(row=[0.0, -14.567090034484863], temp=1.0, seed=9, rnd=0, pos=0, tau=1.0)  # hardest expf input
def test_propose_matches_the_spec_oracle(row: list[float], temp: float, seed: int, rnd: int, pos: int,
                                         tau: float) -> None:
    x = np.array([row], dtype=np.float32)
    with np.errstate(all="ignore"):
        t = np.array([temp], dtype=np.float32)
    p = propose(x, t, np.array([seed], np.uint64), np.array([rnd], np.uint64), np.array([pos], np.uint64), tau=tau)
    got = (int(p.status[0]), int(p.token[0]), p.ids[0].tolist(), p.tickets[0].tolist())
    w = spec_oracle.propose_row(x[0], float(t[0]), seed, rnd, pos, tau)
    assert got == (w.status, w.token, w.ids, w.tickets), (
        f"seed={seed} round={rnd} position={pos} tau={tau!r} temp={temp!r} V={len(row)}\n"
        f"logits bits {[f'{b:08x}' for b in x[0].view(np.uint32).tolist()]}\n got {got}\nwant {w}")
