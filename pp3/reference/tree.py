"""The reference of SPEC.md §12 (draft trees) in NumPy, clause by clause: ``tree-draw-dyadic24-v1`` (a node's
children, §12.4), ``accept-tree-dyadic24-v1`` (verifying a sampled tree, §12.5-§12.6) and ``walk-tree-dyadic24-v1``
(verifying any tree by the walk, §12.5 and §12.9). Imports neither torch nor triton.

Every integer of §12.6 fits 64 bits unsigned (§12.7), so the state is held in uint64 arrays and the only wider value
is the 128-bit product of Lemire's method (``philox.mulhilo64``). The rows of a batch are independent (§12.12): every
step works on all of them at once, each row at its own node. Names are SPEC's: P (the node's target tickets), Q (its
draft tickets), Q' and S (the draft tickets not yet drawn and their sum), A and Σ (the target state and its sum), b
(the normalising shift), E (the remaining draft in target units), c_j (the j-th child in draw order).

Sections: §12.2 ``Tree``, ``as_tree``; §12.3 ``Keys``, ``stream_block``, ``uniform_below_at``; §12.4
``draw_without_replacement``, ``draw_children``, ``propose_tree``; §12.5 ``live_nodes``, ``slots_valid``,
``children_valid``, ``walk_children_valid``, ``tree_row_status``; §12.6 ``normalise``, ``draft_in_target_units``,
``child_test``, ``residual``, ``remove_child``, ``verify_node``, ``final_draw``, ``verify_tree``; §12.9
``verify_walk``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pp3.reference import _args, accept, order, philox, select
from pp3.reference._constants import (
    DEFAULT_TAU,
    DOMAIN_ACCEPT,
    DOMAIN_RESIDUAL,
    DOMAIN_TREE,
    EMPTY_ID,
    MAX_CHILDREN,
    P_BITS,
    P_TICKETS,
    TICKETS,
    AcceptStatus,
    K,
    TreeStatus,
)

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Bool = npt.NDArray[np.bool_]

Children = Literal["sampled", "top-k"]
CHILDREN: tuple[Children, ...] = ("sampled", "top-k")
_I32 = (-(1 << 31), (1 << 31) - 1)
_I8 = (-(1 << 7), (1 << 7) - 1)


# ----------------------------------------------------------------------------------------------------------- §12.2


@dataclasses.dataclass(frozen=True)
class Tree:
    """§12.2: a draft tree in the canonical layout. Node 0 is the root (the last emitted token, no draft); node
    i >= 1 is a draft token whose parent is ``parents[i] < i``; parents never decrease, so the nodes are numbered
    level by level and each node's children are contiguous, in draw order."""

    parents: I64  # [N+1], parents[0] = -1
    depth: I64  # [N+1], depth[0] = 0
    column: I64  # [N+1], the node's index within its level
    first_child: I64  # [N+1], the index of the node's first child (its children are first_child .. + branching - 1)
    branching: I64  # [N+1], the number of children

    @property
    def size(self) -> int:
        """N + 1, the number of nodes, the root included."""
        return int(self.parents.size)

    @property
    def height(self) -> int:
        """H, the largest depth (>= 1)."""
        return int(self.depth.max())

    def children(self, u: int) -> I64:
        """The children of node ``u`` in draw order."""
        return np.arange(self.first_child[u], self.first_child[u] + self.branching[u], dtype=np.int64)

    def level(self, d: int) -> I64:
        """The nodes at depth ``d``, in index order."""
        return np.flatnonzero(self.depth == d).astype(np.int64)


def as_tree(name: str, value: Any) -> Tree:
    """§12.2: the tree of a parent array, or TypeError / ValueError naming the argument: not a 1-D integer array,
    fewer than 2 nodes, a root whose parent is not -1, a parent out of range or not before its child (which also
    rules out cycles), parents that decrease (not the canonical order), or a node with more than 32 children."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array of parent indices, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(f"{name}: expected a 1-D array of N + 1 >= 2 parent indices, got shape {arr.shape}")
    if arr.size > _I32[1]:
        raise ValueError(f"{name}: {arr.size} nodes exceed 2^31 - 1")
    p = arr.astype(np.int64)
    if p[0] != -1:
        raise ValueError(f"{name}: node 0 is the root, its parent must be -1, got {int(p[0])}")
    i = np.arange(p.size)
    bad = np.flatnonzero((p[1:] < 0) | (p[1:] >= i[1:])) + 1
    if bad.size:
        raise ValueError(f"{name}: node {int(bad[0])} has parent {int(p[bad[0]])}; every node i >= 1 needs a parent "
                         "in 0 .. i-1 (a parent before its child: no cycles, nothing out of range)")
    down = np.flatnonzero(p[2:] < p[1:-1]) + 2
    if down.size:
        raise ValueError(f"{name}: parents decrease at node {int(down[0])} ({int(p[down[0] - 1])} then "
                         f"{int(p[down[0]])}): the canonical order numbers the nodes level by level, each node's "
                         "children contiguous (SPEC.md §12.2)")
    lo = np.searchsorted(p[1:], i, side="left") + 1
    hi = np.searchsorted(p[1:], i, side="right") + 1
    branching = (hi - lo).astype(np.int64)
    wide = np.flatnonzero(branching > MAX_CHILDREN)
    if wide.size:
        raise ValueError(f"{name}: node {int(wide[0])} has {int(branching[wide[0]])} children, more than "
                         f"{MAX_CHILDREN}")
    depth = np.zeros(p.size, dtype=np.int64)
    for j in range(1, p.size):
        depth[j] = depth[p[j]] + 1
    level_start = np.searchsorted(depth, np.arange(int(depth.max()) + 1), side="left")  # levels are contiguous
    column = i - level_start[depth]
    return Tree(parents=p, depth=depth, column=column.astype(np.int64), first_child=lo.astype(np.int64),
                branching=branching)


def _as_nodes(name: str, value: Any, tree: Tree, m: int) -> I64:
    """§12.4: the distinct nodes, one per row of logits, whose children a call draws."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer array of node indices, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.size != m:
        raise ValueError(f"{name}: expected {m} node indices (one per row of logits [B, M, V]), got shape {arr.shape}")
    nodes = arr.astype(np.int64)
    if nodes.size and (int(nodes.min()) < 0 or int(nodes.max()) >= tree.size):
        raise ValueError(f"{name}: node indices must lie in 0 .. {tree.size - 1} (the tree of parents), got "
                         f"{int(nodes.min())} .. {int(nodes.max())}")
    if np.unique(nodes).size != nodes.size:
        raise ValueError(f"{name}: node indices must be distinct, got {nodes.tolist()}")
    return nodes


# ----------------------------------------------------------------------------------------------------------- §12.3


@dataclasses.dataclass(frozen=True)
class Keys:
    """§12.3: what names each row's streams at one node: the request's seed and round, the position of the node's
    children (position + depth(u), mod 2^64) and the node's column."""

    seed: U64
    round: U64
    position: U64
    column: U64

    def take(self, rows: I64) -> Keys:
        return Keys(self.seed[rows], self.round[rows], self.position[rows], self.column[rows])


def stream_block(keys: Keys, domain: int, index: I64) -> U64:
    """§12.3: block ``index`` [R] of each row's stream, Philox4x64-10(counter = (round, position, index, column),
    key = (seed, domain)) -> [R, 4], words W_{4 index} .. W_{4 index + 3}. With column 0 it is §11.5's stream."""
    n = keys.seed.size
    ctr = np.stack([keys.round, keys.position, index.astype(np.uint64), keys.column], axis=-1)
    key = np.stack([keys.seed, np.full(n, domain, dtype=np.uint64)], axis=-1)
    return philox.philox4x64_10(ctr, key)


def uniform_below_at(keys: Keys, domain: int, s: U64, offset: I64) -> tuple[U64, I64]:
    """§12.3: per row an integer exactly uniform on 0 .. s-1 (1 <= s <= 2^64 - 1) by §11.5's method, taking the
    row's stream words from W_offset on: the first word W with (W s mod 2^64) >= 2^64 mod s gives floor(W s / 2^64).
    Also returns the offset after the last word taken (the next use of the stream starts there)."""
    s = np.asarray(s, dtype=np.uint64)
    if s.size and int(s.min()) < 1:
        raise ValueError("uniform_below_at: s must be >= 1")
    t = philox.lemire_threshold(s)
    out = np.zeros(s.shape, dtype=np.uint64)
    nxt = np.asarray(offset, dtype=np.int64).copy()
    pending = np.arange(s.size)
    while pending.size:  # for s <= 2^40 a word is rejected with probability < 2^-24, for any s with < 1/2
        w = nxt[pending]
        words = stream_block(keys.take(pending), domain, w // 4)[np.arange(pending.size), w % 4]
        hi, lo = philox.mulhilo64(words, s[pending])
        take = lo >= t[pending]
        out[pending[take]] = hi[take]
        nxt[pending] += 1
        pending = pending[~take]
    return out, nxt


# ----------------------------------------------------------------------------------------------------------- §12.4


@dataclasses.dataclass(frozen=True)
class TreeProposal:
    """The outputs of ``propose_tree`` for M nodes (§12.4 D5): per node its status, its K slots (its q, §7) and, in
    the tree layout, the tokens of its children."""

    status: npt.NDArray[np.int8]  # [B, M] TreeStatus values
    ids: npt.NDArray[np.int32]  # [B, M, K] slot IDs, -1 for empty slots
    tickets: npt.NDArray[np.int32]  # [B, M, K] slot tickets (0 for failed nodes)
    tokens: npt.NDArray[np.int32]  # [B, N+1] the drawn children of the M nodes at their indices, -1 elsewhere


def draw_without_replacement(ids: I64, tix: I64, k: I64, keys: Keys) -> I64:
    """§12.4 D4, sampled: per row k children drawn without replacement from the slots (``ids``, ``tix`` [R, K]):
    draw j takes U_j = uniform_below(the node's tree stream, S_j), S_j = 2^24 minus the tickets already drawn, and
    maps it through the slots not yet drawn in ascending ID order (the first with U_j < its cumulative count).
    Returns [R, K] tokens, -1 after k."""
    r = ids.shape[0]
    kids = np.full((r, K), EMPTY_ID, dtype=np.int64)
    qp = tix.astype(np.uint64)  # Q': tickets not yet drawn
    s = np.full(r, TICKETS, dtype=np.uint64)  # S_j
    offset = np.zeros(r, dtype=np.int64)
    for j in range(int(k.max()) if r else 0):
        a = np.flatnonzero(j < k)
        u, offset[a] = uniform_below_at(keys.take(a), DOMAIN_TREE, s[a], offset[a])  # 0 <= U_j < S_j
        slot = (np.cumsum(qp[a], axis=1) <= u[:, None]).sum(axis=1)  # drawn slots own no ticket any more
        kids[a, j] = ids[a, slot]
        s[a] -= qp[a, slot]
        qp[a, slot] = 0
    return kids


def draw_children(
    x: F32, temperature: F32, keys: Keys, k: I64, tau: np.float32, children: Children
) -> tuple[npt.NDArray[np.int8], I64, I64, I64]:
    """§12.4 D1-D4 for R node rows (``x`` [R, V] drafter logits, ``k`` [R] children each): status [R], the slots
    ids / tickets [R, K] and the children [R, K] in draw order (-1 after k and for failed rows)."""
    r = x.shape[0]
    # D1-D2: §3's status and §5's slots, the selector's (its token is not used)
    prop = select.propose(x, temperature, keys.seed, keys.round, keys.position, float(tau))
    status = prop.status.astype(np.int8)
    ok = status == TreeStatus.OK
    greedy = ok & (temperature == 0)
    sampled = ok & ~greedy
    drawn = sampled if children == "sampled" else np.zeros(r, dtype=bool)  # D4: children drawn from q
    ranked_rows = np.flatnonzero(ok & ~drawn)  # D4: children are the first k in the §4.1 order
    ids = np.where(sampled[:, None], prop.ids, EMPTY_ID).astype(np.int64)
    tix = np.where(sampled[:, None], prop.tickets, 0).astype(np.int64)

    # D2: the support must hold k children: drawable slots (>= 1 ticket) for drawn children, else min(K, F) entries
    drawable = ((ids >= 0) & (tix >= 1)).sum(axis=1)
    entries = np.minimum(np.isfinite(x).sum(axis=1), K)
    small = ok & (k > np.where(drawn, drawable, entries))
    status[small] = TreeStatus.SMALL_SUPPORT
    drawn &= ~small
    ranked_rows = ranked_rows[~small[ranked_rows]]
    greedy &= ~small
    ids[small], tix[small] = EMPTY_ID, 0

    kids = np.full((r, K), EMPTY_ID, dtype=np.int64)
    if ranked_rows.size:  # D4: the first k entries in the §4.1 order; no random numbers
        first = order.first_k(x[ranked_rows], K)
        take = np.arange(first.shape[1])[None, :] < k[ranked_rows, None]
        kids[ranked_rows, : first.shape[1]] = np.where(take, first, EMPTY_ID)
        g_rows = np.flatnonzero(greedy[ranked_rows])  # D3, T0: slots = the first max(k, 1) entries, 2^24 on g
        for i in g_rows:
            row = ranked_rows[i]
            members = first[i, : max(int(k[row]), 1)]
            slots = np.sort(members)
            ids[row, : slots.size] = slots
            tix[row, : slots.size] = np.where(slots == members[0], TICKETS, 0)
    rows = np.flatnonzero(drawn)
    if rows.size:
        kids[rows] = draw_without_replacement(ids[rows], tix[rows], k[rows], keys.take(rows))
    return status, ids, tix, kids


def propose_tree(
    logits: Any,
    target_temperature: Any,
    seed: Any,
    round: Any,
    position: Any,
    parents: Any,
    nodes: Any,
    tau: float = DEFAULT_TAU,
    children: Children = "sampled",
) -> TreeProposal:
    """Draw the children of M nodes of a draft tree per row, exactly as SPEC.md §12.4 defines
    (``tree-draw-dyadic24-v1``).

    ``logits`` [B, M, V] fp32/fp16: row m is the drafter's logits at node ``nodes[m]`` (after the path to it);
    ``target_temperature`` fp32 [B] (or a scalar); ``seed``, ``round``, ``position`` uint64 [B] (or scalars),
    ``position`` being that of the depth-1 nodes (draft 0); ``parents`` the tree (§12.2); ``nodes`` [M] distinct node
    indices (leaves allowed: their slots are computed, nothing is drawn); ``tau`` the drafter temperature;
    ``children`` "sampled" (drawn without replacement from q) or "top-k" (the first k in the §4.1 order). Caller
    errors raise TypeError / ValueError naming the argument before any work; bad row data fails its node.
    """
    x = _args.as_logits("logits", logits, min_shape=(1, 1, 1), dims="[B, M, V]")
    b, m, v = x.shape
    temperature = _args.as_temperature_rows("target_temperature", target_temperature, b)
    seed64 = _args.as_uint64_rows("seed", seed, b)
    round64 = _args.as_uint64_rows("round", round, b)
    pos64 = _args.as_uint64_rows("position", position, b)
    tree = as_tree("parents", parents)
    node = _as_nodes("nodes", nodes, tree, m)
    tau32 = _args.as_tau(tau)
    if children not in CHILDREN:
        raise ValueError(f"children: expected one of {CHILDREN}, got {children!r}")

    u = np.tile(node, b)  # row (i, m) of the flat batch is request i at node nodes[m]
    keys = Keys(np.repeat(seed64, m), np.repeat(round64, m),
                np.repeat(pos64, m) + tree.depth[u].astype(np.uint64),  # §12.3: the children's position, mod 2^64
                tree.column[u].astype(np.uint64))
    status, ids, tix, kids = draw_children(x.reshape(b * m, v), np.repeat(temperature, m), keys, tree.branching[u],
                                           tau32, children)
    tokens = np.full((b, tree.size), EMPTY_ID, dtype=np.int32)
    kids3 = kids.reshape(b, m, K)
    for mi, ui in enumerate(node):  # D5: node u's children at their indices
        tokens[:, tree.children(int(ui))] = kids3[:, mi, : tree.branching[ui]]
    return TreeProposal(status=status.reshape(b, m), ids=ids.reshape(b, m, K).astype(np.int32),
                        tickets=tix.reshape(b, m, K).astype(np.int32), tokens=tokens)


# ----------------------------------------------------------------------------------------------------------- §12.5


@dataclasses.dataclass(frozen=True)
class TreeVerdict:
    """Per-row outputs of a tree verification (§12.5 V5): an OK row emits ``accepted + 1`` tokens, the tokens of the
    accepted nodes ``path[:accepted]`` and then the correction or the bonus; a failed row has ``accepted = -1``."""

    status: npt.NDArray[np.int8]  # [B] AcceptStatus values
    accepted: npt.NDArray[np.int32]  # [B] a, the number of accepted nodes (the depth of the last), -1 if failed
    path: npt.NDArray[np.int32]  # [B, H] the accepted nodes in order, then -1
    tokens: npt.NDArray[np.int32]  # [B, H+1] their tokens, the correction or bonus, then -1


def live_nodes(tree: Tree, draft_status: I64) -> tuple[Bool, Bool]:
    """§12.5 V1: (live, expands) [B, N+1]. Node 0 is live; node i >= 1 is live iff its parent is live and the
    parent's draft_status is 0. A live node expands iff it has children and its own draft_status is 0; every other
    live node is final (its children and their subtrees are ignored, whatever their values)."""
    b, n1 = draft_status.shape
    live = np.zeros((b, n1), dtype=bool)
    live[:, 0] = True
    for i in range(1, n1):
        p = tree.parents[i]
        live[:, i] = live[:, p] & (draft_status[:, p] == 0)
    expands = live & (tree.branching > 0)[None, :] & (draft_status == 0)
    return live, expands


def slots_valid(ids: I64, tix: I64, v: int) -> Bool:
    """§12.5 V3 (i): every slot is empty (id -1, tickets 0) or non-empty (0 <= id < V, tickets >= 0), the non-empty
    slots come first in strictly ascending ID order, and the tickets sum to exactly 2^24 (in 64-bit integers)."""
    empty = (ids == EMPTY_ID) & (tix == 0)
    non_empty = (ids >= 0) & (ids < v) & (tix >= 0)
    every_slot = (empty | non_empty).all(axis=-1)
    non_empty_first = (non_empty[..., :-1] | ~non_empty[..., 1:]).all(axis=-1)
    ascending = (~(non_empty[..., :-1] & non_empty[..., 1:]) | (ids[..., :-1] < ids[..., 1:])).all(axis=-1)
    return np.asarray(every_slot & non_empty_first & ascending & (tix.sum(axis=-1) == TICKETS), dtype=np.bool_)


def _distinct(kids: I64) -> Bool:
    s = np.sort(kids, axis=-1)
    return np.asarray((s[..., 1:] != s[..., :-1]).all(axis=-1), dtype=np.bool_)


def children_valid(tree: Tree, tokens: I64, ids: I64, tix: I64, sampled: Bool) -> Bool:
    """§12.5 V3 (ii)-(iii) per node [B, N+1] (True for nodes without children): the children's tokens are pairwise
    distinct, each is the ID of a non-empty slot of the node, Q(c_1) >= 1, and on a sampled row Q(c_j) >= 1 for
    every j."""
    b, n1 = tokens.shape
    valid = np.ones((b, n1), dtype=bool)
    non_empty = ids >= 0
    for u in np.flatnonzero(tree.branching > 0):
        kids = tokens[:, tree.children(int(u))]  # [B, k]
        hit = (ids[:, u, None, :] == kids[:, :, None]) & non_empty[:, u, None, :]  # [B, k, K]
        q = np.where(hit, tix[:, u, None, :], 0).sum(axis=-1)  # Q_u(c_j)
        drawable = (q >= 1) | (~sampled[:, None] & (np.arange(kids.shape[1]) > 0)[None, :])
        valid[:, u] = _distinct(kids) & hit.any(axis=-1).all(axis=-1) & drawable.all(axis=-1)
    return valid


def walk_children_valid(tree: Tree, tokens: I64, v: int) -> Bool:
    """§12.9 V3: the children's tokens of each node are pairwise distinct and in 0 .. V-1 ([B, N+1])."""
    b, n1 = tokens.shape
    valid = np.ones((b, n1), dtype=bool)
    for u in np.flatnonzero(tree.branching > 0):
        kids = tokens[:, tree.children(int(u))]
        valid[:, u] = _distinct(kids) & ((kids >= 0) & (kids < v)).all(axis=-1)
    return valid


def tree_row_status(target: F32, temperature: F32, live: Bool, expands: Bool, valid: Bool) -> npt.NDArray[np.int8]:
    """§12.5 V2-V4: the status of each row, the first that applies: the class (§11.3 step 2) of its lowest live node
    whose target row is not OK, BAD_TEMPERATURE, BAD_DRAFT (some expanding node is not ``valid``), else OK."""
    b = target.shape[0]
    cls = np.where(live, accept.target_class(target), AcceptStatus.OK)
    target_status = cls[np.arange(b), np.argmax(cls != AcceptStatus.OK, axis=1)]
    bad_temperature = np.isnan(temperature) | (temperature < 0)
    bad_draft = (expands & ~valid).any(axis=1)
    status = np.select(
        [target_status != AcceptStatus.OK, bad_temperature, bad_draft],
        [target_status, AcceptStatus.BAD_TEMPERATURE, AcceptStatus.BAD_DRAFT],
        AcceptStatus.OK,
    )
    return np.asarray(status, dtype=np.int8)


# ----------------------------------------------------------------------------------------------------------- §12.6


def _bit_length(x: U64) -> U64:
    """bitlength(x) for 0 <= x < 2^53 (exact through fp64: frexp gives x = m 2^e with m in [0.5, 1), e = bitlength)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.uint64)


def normalise(a: U64, sigma: U64) -> tuple[U64, U64]:
    """§12.6 N1: A 2^b and Σ 2^b with b = 40 - bitlength(Σ - 1), so that 2^39 < Σ 2^b <= 2^40; the law A / Σ is
    unchanged (b = 0 at the first child, where Σ = 2^40)."""
    b = np.uint64(P_BITS) - _bit_length(sigma - np.uint64(1))
    return a << b[:, None], sigma << b


def draft_in_target_units(qp: U64, s: U64, sigma: U64) -> U64:
    """§12.6 N2: E(y) = Q'(y) (Σ / S) if S divides Σ, else floor(Q'(y) Σ / S), where Q'(y) Σ < 2^64 (§12.7):
    the draft not yet drawn, q_j = Q' / S, in the target's units of 1 / Σ, rounded down."""
    div = sigma % s == 0
    e = np.empty_like(qp)
    e[div] = qp[div] * (sigma[div] // s[div])[:, None]
    e[~div] = (qp[~div] * sigma[~div, None]) // s[~div, None]
    return e


def child_test(ac: U64, ec: U64, qc: U64, s: U64, sigma: U64, keys: Keys, offset: I64) -> tuple[Bool, I64]:
    """§12.6 N3: accept child c with probability min(A(c), E(c)) S / (Q'(c) Σ). If S divides Σ (always at the first
    child), U = uniform_below(E(c)) and accept iff U < A(c); else U = uniform_below(Q'(c) Σ) and accept iff
    U < min(A(c), E(c)) S. U comes from the node's acceptance stream, continuing at ``offset``."""
    div = sigma % s == 0
    bound = ec.copy()
    threshold = ac.copy()
    nd = ~div
    bound[nd] = qc[nd] * sigma[nd]  # < 2^64: S < 2^24 after the first child
    threshold[nd] = np.minimum(ac[nd], ec[nd]) * s[nd]  # <= E(c) S <= Q'(c) Σ
    u, offset = uniform_below_at(keys, DOMAIN_ACCEPT, bound, offset)
    return np.asarray(u < threshold, dtype=np.bool_), offset


def residual(a: U64, e: U64) -> tuple[U64, U64]:
    """§12.6 N4: after a rejection, A(y) <- max(A(y) - E(y), 0) over the whole vocabulary and Σ <- Σ_y A(y)
    (>= 1, §12.7)."""
    a2 = np.where(a > e, a - e, np.uint64(0)).astype(np.uint64)
    return a2, a2.sum(axis=1, dtype=np.uint64)


def remove_child(qp: U64, s: U64, c: I64) -> tuple[U64, U64]:
    """§12.6 N4: the rejected child leaves the draft: S <- S - Q'(c), Q'(c) <- 0."""
    rows = np.arange(qp.shape[0])
    qc = qp[rows, c]
    out = qp.copy()
    out[rows, c] = 0
    return out, s - qc


def slots_to_vocab(ids: I64, tix: I64, v: int) -> U64:
    """Q(y) over the vocabulary from valid slots (``ids``, ``tix`` [R, K]): a slot's tickets at its ID, 0 elsewhere."""
    q = np.zeros((ids.shape[0], v), dtype=np.uint64)
    r, k = np.nonzero(ids >= 0)
    q[r, ids[r, k]] = tix[r, k]
    return q


def verify_node(p: I64, ids: I64, tix: I64, kids: I64, k: I64, keys: Keys) -> tuple[I64, U64, U64]:
    """§12.6 N1-N4 at one node per row: ``p`` [R, V] the node's target tickets P; ``ids``, ``tix`` [R, K] its slots
    (read where k > 0); ``kids`` [R, >= max k] its children's tokens in draw order, ``k`` [R] how many (0 at a final
    node). Returns j, the index of the accepted child (-1 if none: every child rejected, or a final node), and the
    state (A, Σ) the correction or bonus is drawn from (N5): A = P, Σ = 2^40 at a final node."""
    r, v = p.shape
    a = p.astype(np.uint64)  # A_1 = P
    sigma = np.full(r, P_TICKETS, dtype=np.uint64)  # Σ_1 = 2^40
    s = np.full(r, TICKETS, dtype=np.uint64)  # S_1 = 2^24
    qp = np.zeros((r, v), dtype=np.uint64)
    expand = np.flatnonzero(k > 0)
    qp[expand] = slots_to_vocab(ids[expand], tix[expand], v)  # Q'_1 = Q
    accepted = np.full(r, -1, dtype=np.int64)
    testing = k > 0
    offset = np.zeros(r, dtype=np.int64)
    for j in range(int(k.max()) if r else 0):
        t = np.flatnonzero(testing & (j < k))
        if not t.size:
            break
        a[t], sigma[t] = normalise(a[t], sigma[t])  # N1
        e = draft_in_target_units(qp[t], s[t], sigma[t])  # N2
        c = kids[t, j]
        rt = np.arange(t.size)
        ok, offset[t] = child_test(a[t, c], e[rt, c], qp[t, c], s[t], sigma[t], keys.take(t), offset[t])  # N3
        accepted[t[ok]] = j
        testing[t[ok]] = False
        rej = ~ok
        a[t[rej]], sigma[t[rej]] = residual(a[t[rej]], e[rej])  # N4
        qp[t[rej]], s[t[rej]] = remove_child(qp[t[rej]], s[t[rej]], c[rej])  # N4
    return accepted, a, sigma


def final_draw(a: U64, sigma: U64, keys: Keys) -> I64:
    """§12.6 N5 (the correction, or the bonus at a final node): U = uniform_below(the node's residual stream, Σ) from
    W_0, and the token is the smallest y with U < C(y), C the cumulative sum of A in ID order (exact)."""
    u, _ = uniform_below_at(keys, DOMAIN_RESIDUAL, sigma, np.zeros(sigma.size, dtype=np.int64))
    c = np.cumsum(a, axis=1, dtype=np.uint64)
    return np.asarray((c <= u[:, None]).sum(axis=1), dtype=np.int64)


# The rule of a sampled row at its node: (rows, their nodes, their target tickets, their keys) -> (the accepted child
# node or -1, the final token where there is none).
NodeRule = Callable[[I64, I64, I64, Keys], tuple[I64, I64]]


def _kids_of(tree: Tree, tokens: I64, rows: I64, cur: I64, expands: Bool) -> tuple[I64, I64]:
    """The children's tokens [R, max k] of each row's node (draw order, -1 padded) and k [R] (0 if it is final)."""
    k = np.where(expands[rows, cur], tree.branching[cur], 0)
    width = max(int(k.max()) if k.size else 0, 1)
    col = np.arange(width)[None, :]
    idx = np.minimum(tree.first_child[cur][:, None] + col, tree.size - 1)
    kids = np.where(col < k[:, None], tokens[rows[:, None], idx], EMPTY_ID)
    return kids, k


def _descend(
    tree: Tree, target: F32, temperature: F32, tokens: I64, expands: Bool, status: npt.NDArray[np.int8], keys: Keys,
    rule: NodeRule,
) -> TreeVerdict:
    """§12.6 (and §12.9): from the root, each OK row at node u either accepts a child and descends into it or emits
    the final token and stops. T0 rows accept the child whose token is g_u (the target's argmax, §11.4 P1) and
    otherwise emit g_u; sampled rows follow ``rule``. §12.5 V5: the outputs."""
    b = target.shape[0]
    h = tree.height
    ok = status == AcceptStatus.OK
    greedy = ok & (temperature == 0)
    cur = np.zeros(b, dtype=np.int64)
    going = ok.copy()
    accepted = np.where(ok, 0, -1).astype(np.int32)
    path = np.full((b, h), EMPTY_ID, dtype=np.int32)
    out = np.full((b, h + 1), EMPTY_ID, dtype=np.int32)
    for d in range(h + 1):
        rows = np.flatnonzero(going)
        if not rows.size:
            break
        u = cur[rows]
        child = np.full(rows.size, -1, dtype=np.int64)
        final = np.full(rows.size, EMPTY_ID, dtype=np.int64)
        gr = np.flatnonzero(greedy[rows])
        if gr.size:  # T0: no random numbers
            g = accept.argmax(target[rows[gr], u[gr]])
            kids, _ = _kids_of(tree, tokens, rows[gr], u[gr], expands)
            match = kids == g[:, None]
            child[gr] = np.where(match.any(axis=1), tree.first_child[u[gr]] + match.argmax(axis=1), -1)
            final[gr] = g
        sr = np.flatnonzero(~greedy[rows])
        if sr.size:
            p = accept.target_tickets(target[rows[sr], u[sr]], temperature[rows[sr]])[1]  # §11.4 P1-P6
            child[sr], final[sr] = rule(rows[sr], u[sr], p, keys.take(rows[sr]))
        acc = child >= 0
        ra = rows[acc]
        if ra.size:  # never at d = H: a node at depth H has no children
            path[ra, d] = child[acc]
            out[ra, d] = tokens[ra, child[acc]]
            cur[ra] = child[acc]
        rf = rows[~acc]
        out[rf, d] = final[~acc]
        accepted[rf] = d
        going[rf] = False
    return TreeVerdict(status=status, accepted=accepted, path=path, tokens=out)


@dataclasses.dataclass(frozen=True)
class _Call:
    """A verification call's checked arguments (§12.5)."""

    target: F32
    temperature: F32
    tree: Tree
    tokens: I64
    status_in: I64
    keys: Keys  # per row, at the root: position of the depth-1 nodes, column 0

    def at(self, cur: I64, keys: Keys) -> Keys:
        """The keys of each row's node: position + depth(u) (mod 2^64) and column(u)."""
        return Keys(keys.seed, keys.round, keys.position + self.tree.depth[cur].astype(np.uint64),
                    self.tree.column[cur].astype(np.uint64))


def _check(target_logits: Any, target_temperature: Any, parents: Any, draft_tokens: Any, draft_status: Any, seed: Any,
           round: Any, position: Any) -> _Call:
    """§12.5: the caller errors of a verification, before any work (the draft slots are checked by the caller)."""
    target = _args.as_logits("target_logits", target_logits, min_shape=(1, 2, 1), dims="[B, N+1, V]")
    b, n1, _ = target.shape
    temperature = _args.as_temperature_rows("target_temperature", target_temperature, b)
    tree = as_tree("parents", parents)
    if tree.size != n1:
        raise ValueError(f"parents: a tree of {tree.size} nodes, but target_logits has {n1} rows per request (one per "
                         "node, the root first)")
    tokens = _args.as_int_array("draft_tokens", draft_tokens, (b, n1), *_I32)
    status_in = _args.as_int_array("draft_status", draft_status, (b, n1), *_I8)
    keys = Keys(_args.as_uint64_rows("seed", seed, b), _args.as_uint64_rows("round", round, b),
                _args.as_uint64_rows("position", position, b), np.zeros(b, dtype=np.uint64))
    return _Call(target, temperature, tree, tokens, status_in, keys)


def verify_tree(
    target_logits: Any,
    target_temperature: Any,
    parents: Any,
    draft_tokens: Any,
    draft_status: Any,
    draft_ids: Any,
    draft_tickets: Any,
    seed: Any,
    round: Any,
    position: Any,
) -> TreeVerdict:
    """Verify one sampled draft tree per row, exactly as SPEC.md §12.5-§12.6 define (``accept-tree-dyadic24-v1``).

    ``target_logits`` [B, N+1, V] fp32/fp16: row u is the target's logits after the path to node u (the root
    first); ``target_temperature`` fp32 [B] (or a scalar); ``parents`` [N+1] the tree (§12.2); per node, as
    ``propose_tree`` returned them: ``draft_tokens`` [B, N+1] (node i's token; entry 0 is ignored),
    ``draft_status`` [B, N+1] (the status of node u's draw), ``draft_ids`` / ``draft_tickets`` [B, N+1, K] (node
    u's slots, its q); ``seed``, ``round``, ``position`` uint64 [B] (or scalars), ``position`` being that of the
    depth-1 nodes. Caller errors raise TypeError / ValueError naming the argument; bad row data fails its row.
    """
    call = _check(target_logits, target_temperature, parents, draft_tokens, draft_status, seed, round, position)
    b, n1, v = call.target.shape
    ids = _args.as_int_array("draft_ids", draft_ids, (b, n1, K), *_I32)
    tix = _args.as_int_array("draft_tickets", draft_tickets, (b, n1, K), *_I32)

    live, expands = live_nodes(call.tree, call.status_in)  # V1
    valid = slots_valid(ids, tix, v) & children_valid(call.tree, call.tokens, ids, tix, call.temperature != 0)  # V3
    status = tree_row_status(call.target, call.temperature, live, expands, valid)  # V2-V4

    def rule(rows: I64, cur: I64, p: I64, keys: Keys) -> tuple[I64, I64]:  # N1-N5 at each row's node
        kids, k = _kids_of(call.tree, call.tokens, rows, cur, expands)
        at = call.at(cur, keys)
        j, a, sigma = verify_node(p, ids[rows, cur], tix[rows, cur], kids, k, at)
        child = np.where(j >= 0, call.tree.first_child[cur] + j, -1)
        return child, np.where(j >= 0, EMPTY_ID, final_draw(a, sigma, at))

    return _descend(call.tree, call.target, call.temperature, call.tokens, expands, status, call.keys, rule)


# ----------------------------------------------------------------------------------------------------------- §12.9


def verify_walk(
    target_logits: Any,
    target_temperature: Any,
    parents: Any,
    draft_tokens: Any,
    draft_status: Any,
    seed: Any,
    round: Any,
    position: Any,
) -> TreeVerdict:
    """Verify one draft tree per row by the walk, exactly as SPEC.md §12.9 defines (``walk-tree-dyadic24-v1``): at
    each node draw y from the target's p (the node's residual stream, as the bonus of §11.7) and descend while y is a
    child. Lossless for any children, deterministic (top-k) or sampled; q is not read. Arguments as ``verify_tree``
    without the slots."""
    call = _check(target_logits, target_temperature, parents, draft_tokens, draft_status, seed, round, position)
    v = call.target.shape[2]
    live, expands = live_nodes(call.tree, call.status_in)  # V1
    valid = walk_children_valid(call.tree, call.tokens, v)  # V3
    status = tree_row_status(call.target, call.temperature, live, expands, valid)  # V2-V4

    def rule(rows: I64, cur: I64, p: I64, keys: Keys) -> tuple[I64, I64]:  # W1-W2
        kids, _ = _kids_of(call.tree, call.tokens, rows, cur, expands)
        at = call.at(cur, keys)
        y = final_draw(p.astype(np.uint64), np.full(rows.size, P_TICKETS, dtype=np.uint64), at)  # W1: y from p
        match = kids == y[:, None]
        child = np.where(match.any(axis=1), call.tree.first_child[cur] + match.argmax(axis=1), -1)  # W2
        return child, y

    return _descend(call.tree, call.target, call.temperature, call.tokens, expands, status, call.keys, rule)
