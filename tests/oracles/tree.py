"""A second, deliberately naive reading of SPEC.md §12 (draft trees) for one row, in plain Python with exact rationals.

The verifier's node step (§12.6) is carried as a law ``pi`` (Fractions summing to 1) and a scale Σ; every integer of
the SPEC is derived from them (A = pi Σ, E = floor(q Σ), the test's threshold t = β s from the acceptance probability
β) and asserted to be an integer. ``node_law`` enumerates every draw of a node's children and every test outcome to
give the node's exact output law, which §12.8 says is p.

It shares no code with pp3: Philox is numpy.random.Philox, a node's slots and the target tickets come from the oracles
of §2-§8 and §11.4 (``tests.oracles.select``, ``tests.oracles.accept``), the order is Python's sort on (-value, id),
the tree is read from its parent array by plain loops. Slow (mpmath per logit): tests use it on small rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tests.oracles import accept as accept_oracle
from tests.oracles import select as select_oracle

K = 32
Q_TOTAL = 1 << 24
P_TOTAL = 1 << 40
M64 = (1 << 64) - 1
DOMAIN_TREE = int.from_bytes(b"pp3_tree", "big")
DOMAIN_ACCEPT = int.from_bytes(b"pp3_acpt", "big")
DOMAIN_RESIDUAL = int.from_bytes(b"pp3_resd", "big")
SMALL_SUPPORT = 6


class Stream:
    """The words W_0, W_1, ... of Philox4x64-10(counter = (rnd, pos, i, column), key = (seed, domain)), taken in
    order; numpy's Philox increments its 256-bit counter before each block."""

    def __init__(self, seed: int, domain: int, rnd: int, pos: int, column: int) -> None:
        c = (rnd + (pos << 64) + (column << 192) - 1) % (1 << 256)
        self._bg = np.random.Philox(counter=np.array([(c >> (64 * i)) & M64 for i in range(4)], dtype=np.uint64),
                                    key=np.array([seed, domain], dtype=np.uint64))
        self._words: Iterator[int] = iter(())

    def word(self) -> int:
        for w in self._words:
            return w
        self._words = iter(int(w) for w in self._bg.random_raw(4))
        return next(self._words)

    def uniform_below(self, s: int) -> int:
        """Lemire's exact method on the next words: the first W with W s mod 2^64 >= 2^64 mod s gives W s >> 64."""
        assert 1 <= s <= M64, s
        t = (1 << 64) % s
        while True:
            w = self.word()
            if (w * s) & M64 >= t:
                return (w * s) >> 64


class Tree:
    """A parent array read naively (it is assumed canonical: the reference's caller errors are its own tests)."""

    def __init__(self, parents: list[int]) -> None:
        self.parents = parents
        self.kids: list[list[int]] = [[] for _ in parents]
        self.depth = [0] * len(parents)
        for i in range(1, len(parents)):
            self.kids[parents[i]].append(i)
            self.depth[i] = self.depth[parents[i]] + 1
        self.column = [sum(1 for j in range(i) if self.depth[j] == self.depth[i]) for i in range(len(parents))]
        self.height = max(self.depth)


# --------------------------------------------------------------------------------------------------- §12.4 draws


def order_of(x: list[float]) -> list[int]:
    return sorted(range(len(x)), key=lambda i: (-x[i], i))


def draw_node(x: npt.NDArray[np.float32], temp: float, tau: float, k: int, children: str, seed: int, rnd: int,
              pos: int, column: int) -> tuple[int, list[int], list[int], list[int]]:
    """(status, ids, tickets, children) of one node: §3 and §5 by the selector's oracle, then D2-D4."""
    row = select_oracle.propose_row(x, temp, seed, rnd, pos, tau)  # its token (proposal domain) is not used
    fail: tuple[int, list[int], list[int], list[int]] = (row.status, [-1] * K, [0] * K, [])
    if row.status:
        return fail
    vals = [float(v) for v in np.asarray(x, dtype=np.float32)]
    finite = sum(1 for v in vals if math.isfinite(v))
    greedy = float(np.float32(temp)) == 0.0
    drawn = children == "sampled" and not greedy
    if drawn:
        pool = {i: t for i, t in zip(row.ids, row.tickets, strict=True) if i >= 0 and t >= 1}
        if k > len(pool):
            return (SMALL_SUPPORT, *fail[1:])
        stream = Stream(seed, DOMAIN_TREE, rnd, pos, column)
        left = dict(zip(row.ids, row.tickets, strict=True))
        left.pop(-1, None)
        kids = []
        for _ in range(k):
            u = stream.uniform_below(sum(left.values()))
            acc = 0
            for i in sorted(left):
                acc += left[i]
                if u < acc:
                    kids.append(i)
                    del left[i]
                    break
        return 0, row.ids, row.tickets, kids
    if k > min(K, finite):
        return (SMALL_SUPPORT, *fail[1:])
    first = order_of(vals)[: max(k, 1)]
    kids = first[:k]
    if greedy:
        members = sorted(first)
        ids = members + [-1] * (K - len(members))
        tix = [Q_TOTAL if i == first[0] else 0 for i in members] + [0] * (K - len(members))
        return 0, ids, tix, kids
    return 0, row.ids, row.tickets, kids


def propose_tree_row(logits: npt.NDArray[np.float32], temp: float, seed: int, rnd: int, pos: int, parents: list[int],
                     nodes: list[int], tau: float, children: str) -> tuple[list[int], list[list[int]],
                                                                            list[list[int]], list[int]]:
    """(status per node, ids per node, tickets per node, tokens [N+1]) of one request."""
    tree = Tree(parents)
    tokens = [-1] * len(parents)
    out = ([], [], [])  # type: tuple[list[int], list[list[int]], list[list[int]]]
    for m, u in enumerate(nodes):
        st, ids, tix, kids = draw_node(logits[m], temp, tau, len(tree.kids[u]), children, seed, rnd,
                                       (pos + tree.depth[u]) & M64, tree.column[u])
        out[0].append(st)
        out[1].append(ids)
        out[2].append(tix)
        for i, c in zip(tree.kids[u], kids, strict=False):
            tokens[i] = c
    return out[0], out[1], out[2], tokens


# ------------------------------------------------------------------------------------------------ §12.6 the rule


def scaled(sigma: int) -> int:
    """N1: Σ doubled until 2^39 < Σ <= 2^40."""
    while 2 * sigma <= P_TOTAL:
        sigma *= 2
    return sigma


def test_of(pi: list[Fraction], sigma: int, qp: dict[int, int], s: int, c: int
            ) -> tuple[Fraction, int, int, int, list[int], list[int]]:
    """N1-N3 at child c: (β the acceptance probability, the bound, the threshold t = β bound, the scaled Σ, A, E)."""
    sig = scaled(sigma)
    a = [p * sig for p in pi]
    assert all(v.denominator == 1 for v in a), "A = pi Σ must be integers"
    e = [math.floor(Fraction(qp.get(y, 0), s) * sig) for y in range(len(pi))]
    beta = Fraction(min(int(a[c]), e[c]), sig) / Fraction(qp[c], s)
    assert 0 <= beta <= 1
    bound = e[c] if sig % s == 0 else qp[c] * sig
    t = beta * bound
    assert t.denominator == 1, "the threshold must be an integer"
    return beta, bound, int(t), sig, [int(v) for v in a], e


def after_rejection(pi: list[Fraction], sig: int, a: list[int], e: list[int]) -> tuple[list[Fraction], int]:
    """N4: the law and scale left after a rejection: pi' proportional to pi - min(A, E) / Σ."""
    m = [Fraction(min(av, ev), sig) for av, ev in zip(a, e, strict=True)]
    rest = 1 - sum(m)
    scale = sig * rest
    assert rest > 0 and scale.denominator == 1
    return [(p - mm) / rest for p, mm in zip(pi, m, strict=True)], int(scale)


def node_law(p: list[int], q: dict[int, int], k: int) -> list[Fraction]:
    """§12.8: the exact law of the token a sampled node emits (an accepted child or the correction), over every draw
    of its k children without replacement from Q and every test outcome; P sums to 2^40, Q to 2^24."""
    law = [Fraction(0)] * len(p)

    def rec(pi: list[Fraction], sigma: int, qp: dict[int, int], s: int, j: int, weight: Fraction) -> None:
        if j == k:
            for y, py in enumerate(pi):
                law[y] += weight * py
            return
        for c in sorted(qp):
            if qp[c] == 0:
                continue
            w = weight * Fraction(qp[c], s)
            beta, _, _, sig, a, e = test_of(pi, sigma, qp, s, c)
            law[c] += w * beta
            if beta < 1:
                pi2, sigma2 = after_rejection(pi, sig, a, e)
                rec(pi2, sigma2, {y: t for y, t in qp.items() if y != c}, s - qp[c], j + 1, w * (1 - beta))

    rec([Fraction(v, P_TOTAL) for v in p], P_TOTAL, dict(q), Q_TOTAL, 0, Fraction(1))
    return law


# --------------------------------------------------------------------------------------------- §12.5 the status


def slots_ok(ids: list[int], tix: list[int], v: int) -> bool:
    full = [0 <= i < v and t >= 0 for i, t in zip(ids, tix, strict=True)]
    empty = [i == -1 and t == 0 for i, t in zip(ids, tix, strict=True)]
    if not all(f or e for f, e in zip(full, empty, strict=True)):
        return False
    n = sum(full)
    return all(full[:n]) and all(ids[j] < ids[j + 1] for j in range(n - 1)) and sum(tix) == Q_TOTAL


def row_status(x: list[list[float]], temp: float, tree: Tree, stats: list[int], valid: list[bool]
               ) -> tuple[int, list[bool]]:
    """(status, expands per node) by V1-V4."""
    live = [False] * len(tree.parents)
    live[0] = True
    for i in range(1, len(live)):
        live[i] = live[tree.parents[i]] and stats[tree.parents[i]] == 0
    expands = [live[u] and bool(tree.kids[u]) and stats[u] == 0 for u in range(len(live))]
    for u in range(len(live)):
        if live[u]:
            cls = accept_oracle.row_class(x[u])
            if cls:
                return cls, expands
    if math.isnan(temp) or temp < 0:
        return 4, expands
    if any(expands[u] and not valid[u] for u in range(len(live))):
        return 5, expands
    return 0, expands


def _q_of(ids: list[int], tix: list[int], y: int) -> int:
    return sum(t for i, t in zip(ids, tix, strict=True) if i == y)


def verify_tree_row(logits: npt.NDArray[np.float32], temp: float, parents: list[int], toks: list[int],
                    stats: list[int], ids: list[list[int]], tix: list[list[int]], seed: int, rnd: int, pos: int,
                    walk: bool = False) -> tuple[int, int, list[int], list[int]]:
    """(status, accepted, path, tokens) of one row by §12.5-§12.6, or by the walk (§12.9)."""
    tree = Tree(parents)
    v = logits.shape[1]
    x = [[float(a) for a in np.asarray(row, dtype=np.float32)] for row in logits]
    t32 = float(np.float32(temp))
    valid = []
    for u in range(len(parents)):
        kids = [toks[i] for i in tree.kids[u]]
        distinct = len(set(kids)) == len(kids)
        if walk:
            valid.append(distinct and all(0 <= c < v for c in kids))
            continue
        in_slots = all(any(i == c and i >= 0 for i in ids[u]) for c in kids)
        qs = [_q_of(ids[u], tix[u], c) for c in kids]
        drawable = (not qs or qs[0] >= 1) and (t32 == 0.0 or all(qv >= 1 for qv in qs))
        valid.append(slots_ok(ids[u], tix[u], v) and distinct and in_slots and drawable)
    status, expands = row_status(x, t32, tree, stats, valid)
    h = tree.height
    if status:
        return status, -1, [-1] * h, [-1] * (h + 1)
    path: list[int] = []
    out: list[int] = []
    u = 0
    while True:
        kids = tree.kids[u] if expands[u] else []
        upos = (pos + tree.depth[u]) & M64
        if t32 == 0.0:
            y = order_of(x[u])[0]
            child = next((i for i in kids if toks[i] == y), None)
        elif walk:
            y = draw(accept_oracle.tickets(x[u], t32), Stream(seed, DOMAIN_RESIDUAL, rnd, upos, tree.column[u]))
            child = next((i for i in kids if toks[i] == y), None)
        else:
            child, y = sampled_node(accept_oracle.tickets(x[u], t32), ids[u], tix[u], [toks[i] for i in kids], kids,
                                    seed, rnd, upos, tree.column[u])
        if child is None:
            out.append(y)
            break
        path.append(child)
        out.append(toks[child])
        u = child
    a = len(path)
    return 0, a, path + [-1] * (h - a), out + [-1] * (h - a)


def draw(weights: list[int], stream: Stream) -> int:
    """The smallest y with U < w(0) + ... + w(y), U uniform below the sum."""
    u = stream.uniform_below(sum(weights))
    acc = 0
    for y, w in enumerate(weights):
        acc += w
        if u < acc:
            return y
    raise AssertionError("unreachable: U < the sum")


def sampled_node(p: list[int], ids: list[int], tix: list[int], kid_tokens: list[int], kids: list[int], seed: int,
                 rnd: int, pos: int, column: int) -> tuple[int | None, int]:
    """N1-N5 at one node: (the accepted child node, its token) or (None, the correction or bonus)."""
    pi = [Fraction(v, P_TOTAL) for v in p]
    sigma = P_TOTAL
    qp = {i: t for i, t in zip(ids, tix, strict=True) if i >= 0} if kids else {}
    s = Q_TOTAL
    tests = Stream(seed, DOMAIN_ACCEPT, rnd, pos, column)
    for node, c in zip(kids, kid_tokens, strict=True):
        _, bound, t, sig, a, e = test_of(pi, sigma, qp, s, c)
        if tests.uniform_below(bound) < t:
            return node, c
        pi, sigma = after_rejection(pi, sig, a, e)
        s -= qp.pop(c)
    weights = [v * sigma for v in pi]
    assert all(w.denominator == 1 for w in weights)
    return None, draw([int(w) for w in weights], Stream(seed, DOMAIN_RESIDUAL, rnd, pos, column))
