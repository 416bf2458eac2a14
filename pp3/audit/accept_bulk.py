"""Bulk parity of the Triton verifier with the NumPy reference (SPEC.md §11): request rows at
V = 163840, every status, T0 and sampled rows, failed and truncated drafts, fp32/fp16/bf16, depths 1-8 and uint64
edge keys, checked by equality of status, accepted and tokens.

    python -m pp3.audit.accept_bulk --rows N [--seed S] [--start R] [--vocab 163840] [--batch 64] [--workers W]
                                    [--max-seconds T] [--json] [--out DIR] [--replay FILE] [--no-warm] [--pageable]

Row r of seed S is defined by (S, r, --vocab, --batch): batch k holds rows [k B, (k + 1) B), one depth
D = 1 + k mod 8 and one logit format (fp32, fp16, bf16 for k mod 3 = 0, 1, 2) per batch; the row's plan (its
temperature, keys and corruption) comes from NumPy's generator seeded with (S, r), its logits from torch's generator
on the run's device (a CUDA and a CPU run make different logits). A run checks rows [R, R + N); ``--max-seconds``
stops it after the batch in progress, and every progress line, the summary and the JSON say which rows were
checked and the ``--seed S --start R`` that continues them. 10^6 rows are split over runs by seed or by start.

Per batch: target logits [B, D+1, V] (normal, scale 2-4; some rows flat, some with -inf entries); drafts proposed by
``pp3.kernels.propose`` from the target logits plus noise, draft d keyed by (seed, round, position + d) as
``pp3.drafter``'s ``draft_sampled`` keys it; then per row one plan: plain, a target row with NaN / +inf / all -inf,
a draft the selector fails (its logits corrupted), a truncation (a draft status != 0 with garbage after it), an
invalid draft (``break_draft``), point-mass drafts on the target argmax (x_j = g_j, the tests launch 3 may leave
open), or an *open* request: flat target rows and two-slot drafts on g = 0 whose tests U_j fall in launch 3's open
window c .. c + V - 1 with probability ~1.5 % at V = 163840 (so launches 4 and 5 decide them, with the remainder R).
The kernels verify the batch in one ``pp3.kernels.verify`` call; a process pool runs ``pp3.audit.fast_accept.verify``
(``pp3.reference.verify``'s bits, faster; tests/test_fast_accept.py checks them equal) on the same bits (a
shared-memory copy; fp16 and bf16 widened as the reference widens them, SPEC.md §2.1), a few rows per task (§11.11:
rows are independent). A mismatching batch is written to ``--out`` (inputs and both outputs, ``.npz``, with a
``.json`` of the first rows) and the run stops with exit status 1; ``--replay FILE`` re-runs it against the plain
reference ``pp3.reference.verify`` itself.

On a GPU the run first compiles every kernel variant it will launch, in a pool of processes (``warm``; ``--no-warm``
skips it), and page-locks its shared buffers (``--pageable`` leaves them as they are; a registration that fails
exits with status 3, nothing checked). ``--max-seconds`` counts from after the warm-up.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pp3.audit import fast_accept
from pp3.audit._parser import Parser
from pp3.audit._pipeline import pipeline, read_rows
from pp3.harness.protocol import PARAMETERS, Implementation
from pp3.reference import DOMAIN_ACCEPT, P_TICKETS, Q_SHIFT, TICKETS, Verdict, uniform_below
from pp3.reference._constants import MAX_VOCAB
from pp3.testing.call import (
    FORMATS,
    U64_EDGES,
    U64_MAX,
    AcceptCall,
    DamagedRecord,
    read_accept_call,
    read_record,
    recorded_reference,
)
from pp3.testing.compare import row_mismatch, rows_per_field
from pp3.testing.drafts import BROKEN_DRAFTS, break_draft, point_drafts, two_slot_draft

if TYPE_CHECKING:
    from multiprocessing import shared_memory

    import torch

FIELDS = ("status", "accepted", "tokens")
MAX_DEPTH = 8
FORMAT_CYCLE = ("fp32", "fp16", "bf16")  # batch k: FORMAT_CYCLE[k % 3]
TORCH_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
_ROW_TAG = 0x61636370  # mixed into every row's NumPy seed, so that no other tool's generator repeats these rows

# Target temperatures (§11.3): T0 (+-0.0), sampled (> 0, +inf included), BAD_TEMPERATURE (NaN, < 0); with weights.
TEMPS = np.array([0.0, -0.0, 0.3, 0.7, 1.0, 2.0, np.inf, np.nan, -1.0], dtype=np.float32)
TEMP_WEIGHTS = np.array([12, 8, 12, 14, 18, 12, 10, 7, 7], dtype=np.float64) / 100
SAMPLED_TEMPS = TEMPS[2:7]  # the plans that need an OK sampled row (an invalid draft, an open request)

# One plan per row, with weights; ``aux`` picks the variant (see ``_plan_row``).
PLANS = ("plain", "target_class", "draft_failed", "truncated", "bad_draft", "argmax", "open")
PLAN_WEIGHTS = np.array([34, 18, 8, 8, 10, 12, 10], dtype=np.float64) / 100
(PLAIN, TARGET_CLASS, DRAFT_FAILED, TRUNCATED, BAD_DRAFT, ARGMAX, OPEN) = range(len(PLANS))
# Draft statuses a truncation writes (anything != 0 ends the draft, §11.3 step 1).
TRUNCATE_STATUS = np.array([1, 2, 3, 4, 5, -1, 127, -128], dtype=np.int8)


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def batch_layout(k: int) -> tuple[int, str]:
    """Batch k's depth and logit format."""
    return 1 + k % MAX_DEPTH, FORMAT_CYCLE[k % len(FORMAT_CYCLE)]


def open_q(v: int) -> int | None:
    """Q(0) of an open request's drafts at vocabulary V, or None where none exists. A flat target row has floor
    counts c = floor(2^40 / V) and P(0) = c + R with R = 2^40 - V c; a draft x = 0 with Q(0) tickets draws U below
    s = Q 2^16. The smallest Q with s > c + R makes every U >= c open (s <= c + V - 1) and both outcomes possible;
    it exists only where 2^16 < V roughly (V = 163840: Q = 104, 1.5 % of the tests open)."""
    c = P_TICKETS // v
    r = P_TICKETS - v * c
    q = (c + r) // (1 << Q_SHIFT) + 1
    return q if v >= 2 and q < TICKETS and (q << Q_SHIFT) < c + v else None


# ------------------------------------------------------------------------------------------------------ the plan


@dataclasses.dataclass
class Plan:
    """A batch's per-row choices (NumPy, [n] each), made before any logit exists."""

    rows: npt.NDArray[np.int64]  # global row indices
    temperature: npt.NDArray[np.float32]
    plan: npt.NDArray[np.int8]  # index into PLANS
    j: npt.NDArray[np.int32]  # the depth (or target row) the plan acts on
    aux: npt.NDArray[np.int32]  # the plan's variant
    col: npt.NDArray[np.int64]  # the column a NaN / +inf goes to
    seed: npt.NDArray[np.uint64]
    round: npt.NDArray[np.uint64]
    position: npt.NDArray[np.uint64]
    extreme: npt.NDArray[np.bool_]  # keys taken from the uint64 edges
    flat_j: npt.NDArray[np.int32]  # a target row made flat (-1: none; open requests: all of them)
    flat_value: npt.NDArray[np.float32]  # [n, D+1]: the values of flat rows (before scaling)
    mask_frac: npt.NDArray[np.float32]  # fraction of entries set to -inf (0: none)
    scale: npt.NDArray[np.float32]
    noise: npt.NDArray[np.float32]  # scale of the draft logits' noise
    torch_seed: npt.NDArray[np.int64]
    garbage_seed: npt.NDArray[np.int64]  # what a truncation writes after the failed draft


def _plan_row(seed: int, r: int, d: int, v: int) -> dict[str, Any]:
    rng = np.random.default_rng([_ROW_TAG, seed, r])
    plan = int(rng.choice(len(PLANS), p=PLAN_WEIGHTS))
    if plan in (BAD_DRAFT, OPEN):
        temp = SAMPLED_TEMPS[rng.integers(SAMPLED_TEMPS.size)]
    else:
        temp = TEMPS[rng.choice(TEMPS.size, p=TEMP_WEIGHTS)]
    extreme = bool(rng.random() < 0.15)
    if extreme:  # the uint64 edges; positions near 2^64 - 1 wrap inside the request (position + j mod 2^64)
        s, rd = (int(U64_EDGES[rng.integers(len(U64_EDGES))]) for _ in range(2))
        pos = U64_MAX - int(rng.integers(0, MAX_DEPTH + 1)) if rng.random() < 0.7 else int(
            U64_EDGES[rng.integers(len(U64_EDGES))])
    else:
        s, rd, pos = (int(x) for x in rng.integers(0, 1 << 64, size=3, dtype=np.uint64))
    j = int(rng.integers(0, d + 1)) if plan == TARGET_CLASS else int(rng.integers(0, d))
    aux = {TARGET_CLASS: 3, DRAFT_FAILED: 3, TRUNCATED: TRUNCATE_STATUS.size, BAD_DRAFT: len(BROKEN_DRAFTS)}
    clean = plan in (BAD_DRAFT, OPEN)  # break_draft wants full sampled drafts; an open request flat rows
    return {
        "temperature": temp,
        "plan": plan,
        "j": j,
        "aux": int(rng.integers(0, aux.get(plan, 1))),
        "col": int(rng.integers(0, v)),
        "seed": s,
        "round": rd,
        "position": pos,
        "extreme": extreme,
        "flat_j": d + 1 if plan == OPEN else (int(rng.integers(0, d + 1)) if rng.random() < 0.08 else -1),
        "flat_value": rng.standard_normal(d + 1),
        "mask_frac": 0.0 if clean or rng.random() >= 0.25 else float(rng.choice([0.5, 1 / 16, 1 / 1024])),
        "scale": float(rng.choice([2.0, 3.0, 4.0])),
        "noise": float(rng.choice([0.5, 1.0, 2.0])),
        "torch_seed": int(rng.integers(0, 1 << 62)),
        "garbage_seed": int(rng.integers(0, 1 << 62)),
    }


def plan_batch(seed: int, rows: npt.NDArray[np.int64], d: int, v: int) -> Plan:
    """The plans of ``rows`` (one batch, depth ``d``): each row's from its own generator, so a row does not depend
    on which other rows its run checks."""
    per_row = [_plan_row(seed, int(r), d, v) for r in rows]
    col = {f.name: [p[f.name] for p in per_row] for f in dataclasses.fields(Plan) if f.name != "rows"}
    dt = {"temperature": np.float32, "plan": np.int8, "j": np.int32, "aux": np.int32, "col": np.int64,
          "seed": np.uint64, "round": np.uint64, "position": np.uint64, "extreme": np.bool_, "flat_j": np.int32,
          "flat_value": np.float32, "mask_frac": np.float32, "scale": np.float32, "noise": np.float32,
          "torch_seed": np.int64, "garbage_seed": np.int64}
    return Plan(rows=rows, **{k: np.array(val, dtype=dt[k]) for k, val in col.items()})


# ------------------------------------------------------------------------------------------------------ one batch


@dataclasses.dataclass
class Batch:
    """One checked batch: its inputs on the host (the target logits as raw bits in shared memory) and the kernels'
    verdict."""

    k: int
    depth: int
    fmt: str
    plan: Plan
    draft: dict[str, npt.NDArray[Any]]  # draft_tokens, draft_status, draft_ids, draft_tickets, as verified
    got: Verdict
    failure: str | None = None  # a call that failed by name (pp3.harness.guard): no verdict, every row counted


def _u64_tensor(a: npt.NDArray[np.uint64], dev: Any) -> torch.Tensor:
    import torch

    return torch.from_numpy(np.ascontiguousarray(a).view(np.int64).copy()).to(dev)


def build_logits(plan: Plan, d: int, fmt: str, v: int, dev: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Target logits [n, D+1, V] and draft logits [n, D, V] of the batch's format on ``dev``, each row from its own
    torch generator. The draft logits are the target's plus noise (masked entries stay -inf), computed before the
    target's corruptions, so a corrupted target row has a clean draft."""
    import torch

    n = plan.rows.size
    dtype = getattr(torch, TORCH_DTYPE[fmt])
    target = torch.empty((n, d + 1, v), dtype=dtype, device=dev)
    draft = torch.empty((n, d, v), dtype=dtype, device=dev)
    for i in range(n):
        gen = torch.Generator(device=dev)
        gen.manual_seed(int(plan.torch_seed[i]))
        t = torch.randn((d + 1, v), generator=gen, device=dev)
        if plan.mask_frac[i] > 0:
            t.masked_fill_(torch.rand((d + 1, v), generator=gen, device=dev) < float(plan.mask_frac[i]), -np.inf)
        flat = int(plan.flat_j[i])
        if flat > d:  # an open request: every target row flat
            t = torch.from_numpy(plan.flat_value[i]).to(dev)[:, None].expand(d + 1, v).clone()
        elif flat >= 0:
            t[flat] = float(plan.flat_value[i, flat])
        target[i] = t * float(plan.scale[i])
        noise = torch.randn((d, v), generator=gen, device=dev) * float(plan.noise[i])
        draft[i] = target[i, :d].float() + noise
        if plan.plan[i] == DRAFT_FAILED:  # the selector fails draft j: NaN, +inf or no finite logit
            j, col = int(plan.j[i]), int(plan.col[i])
            if plan.aux[i] == 2:
                draft[i, j] = -np.inf
            else:
                draft[i, j, col] = np.nan if plan.aux[i] == 0 else np.inf
    return target, draft


def propose_drafts(draft_logits: torch.Tensor, plan: Plan, dev: Any) -> dict[str, npt.NDArray[Any]]:
    """The selector's proposals at every depth (``pp3.kernels.propose``), draft d keyed at position + d (as
    ``pp3.drafter.TPDrafter.draft_sampled`` keys them), brought to the host."""
    import torch

    from pp3 import kernels

    temp = torch.from_numpy(plan.temperature.copy()).to(dev)
    seed, rnd = _u64_tensor(plan.seed, dev), _u64_tensor(plan.round, dev)
    props = [kernels.propose(draft_logits[:, j], temp, seed, rnd, _u64_tensor(plan.position + np.uint64(j), dev))
             for j in range(draft_logits.shape[1])]
    return {
        "draft_tokens": torch.stack([p.token for p in props], 1).cpu().numpy(),
        "draft_status": torch.stack([p.status for p in props], 1).cpu().numpy(),
        "draft_ids": torch.stack([p.ids for p in props], 1).cpu().numpy(),
        "draft_tickets": torch.stack([p.tickets for p in props], 1).cpu().numpy(),
    }


def corrupt(target: torch.Tensor, draft: dict[str, npt.NDArray[Any]], plan: Plan, v: int) -> None:
    """The plans that act after the proposals: the target rows' classes, truncations, invalid drafts, argmax and
    open drafts (``target`` on the device, ``draft`` on the host, both in place)."""
    import torch

    tok, st, ids, tix = (draft[k] for k in ("draft_tokens", "draft_status", "draft_ids", "draft_tickets"))
    d = tok.shape[1]
    q_open = open_q(v)
    for i in range(plan.rows.size):
        kind, j, aux, col = int(plan.plan[i]), int(plan.j[i]), int(plan.aux[i]), int(plan.col[i])
        if kind == TARGET_CLASS:  # NAN_LOGIT, POS_INF_LOGIT or ZERO_MASS at target row j (status iff j <= n)
            if aux == 2:
                target[i, j] = -np.inf
            else:
                target[i, j, col] = np.nan if aux == 0 else np.inf
        elif kind == TRUNCATED:  # n = j: drafts j .. D-1 and target rows j+1 .. D are ignored, whatever they hold
            rng = np.random.default_rng(int(plan.garbage_seed[i]))
            st[i, j] = TRUNCATE_STATUS[aux]
            st[i, j + 1 :] = rng.integers(-128, 128, size=d - j - 1)
            tok[i, j:] = rng.integers(-2, v + 2, size=d - j)  # the failed draft j's own fields too
            ids[i, j:] = rng.integers(-2, v + 2, size=ids[i, j:].shape)
            tix[i, j:] = rng.integers(-(1 << 31), 1 << 31, size=tix[i, j:].shape)
            target[i, j + 1, col] = np.nan
        elif kind == BAD_DRAFT and st[i, j] == 0:  # one way of §11.3 step 3 (break_draft's rows are V = 40)
            name = BROKEN_DRAFTS[aux]
            break_draft(name, ids[i:, j:], tix[i:, j:], tok[i:, j:])
            if name == "id_out_of_range":
                ids[i, j, -1] = v  # break_draft writes 40, out of range only at V = 40
        elif kind == ARGMAX:  # x_j = g_j, q_j the point mass (torch.argmax: the lowest ID among equal maxima)
            g = torch.argmax(target[i, :d], dim=-1).cpu().numpy()
            for key, val in point_drafts(g[None]).items():
                draft[key][i] = val[0]
        elif kind == OPEN:
            zeros = np.zeros((1, d), dtype=np.int32)
            two = two_slot_draft(1, d, 0, q_open, 1) if q_open is not None else point_drafts(zeros)
            for key, val in two.items():
                draft[key][i] = val[0]


def run_batch(k: int, plan: Plan, v: int, dev: Any, impl: Implementation | None = None,
              time_limit: float = 300.0) -> tuple[Batch, torch.Tensor]:
    """Build batch ``k`` (of ``plan``'s rows) and verify it on the device through the seam (``impl``, default pp3's
    kernels; the torch API's tensors on ``dev``, or NumPy copies), guarded (``pp3.harness.guard``): a call that
    fails by name gives no verdict (every row counts as mismatching, the failure named). Returns the batch and its
    target logits."""
    import torch

    from pp3.harness import builtin
    from pp3.harness.guard import Guard
    from pp3.testing import adapt

    d, fmt = batch_layout(k)
    target, draft_logits = build_logits(plan, d, fmt, v, dev)
    draft = propose_drafts(draft_logits, plan, dev)
    del draft_logits
    corrupt(target, draft, plan, v)
    verifier = impl or builtin.kernel("verifier")
    args: tuple[Any, ...] = (target, torch.from_numpy(plan.temperature.copy()).to(dev),
                             *(torch.from_numpy(a.copy()).to(dev) for a in draft.values()),
                             _u64_tensor(plan.seed, dev), _u64_tensor(plan.round, dev), _u64_tensor(plan.position, dev))
    if verifier.caps.api == "numpy":  # the reference's arguments: bf16 widened from its bits, uint64 keys
        from pp3.testing.call import host_logits

        args = (host_logits(target), *(a.cpu().numpy() for a in args[1:6]),
                *(a.copy() for a in (plan.seed, plan.round, plan.position)))

    def read(out: Any) -> Any:
        return adapt.read(out, "verifier", verifier, plan.rows.size, d)

    inv = adapt.Invocation(verifier.fn, args, {"tile": None} if verifier.caps.tile else {}, read,
                           PARAMETERS["verifier"])
    got, failure, detail = Guard(verifier, dev, time_limit).run(inv)
    if got is None:  # no verdict: an impossible one, so that every row counts
        n = plan.rows.size
        got = Verdict(np.full(n, -128, np.int8), np.full(n, -2, np.int32), np.full((n, d + 1), -2, np.int32))
    assert isinstance(got, Verdict)
    return Batch(k, d, fmt, plan, draft, got, None if failure is None else f"{failure}: {detail}"), target


# ------------------------------------------------------------------------------------------------------ reference


def _reference_rows(args: tuple[Any, ...]) -> Verdict:
    """Worker: the reference's bits (``fast_accept.verify``) on rows [lo, hi) of a batch whose raw target bits the
    parent put in shared memory (as ``AcceptCall.run_reference`` passes them: fp16 as fp16, bf16 widened from its
    bits)."""
    name, fmt, shape, lo, hi, inputs = args
    return fast_reference(AcceptCall(FORMATS[fmt], read_rows(name, shape, FORMATS[fmt].dtype, lo, hi), **inputs))


def fast_reference(call: AcceptCall) -> Verdict:
    """``AcceptCall.run_reference`` by ``pp3.audit.fast_accept.verify`` (the same bits, faster)."""
    name = call.fmt.name  # 16-bit rows stay so: fast_accept widens the rows it reads
    bits = np.asarray(call.bits, dtype=call.fmt.dtype)
    x = bits.view({"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}[name])
    return fast_accept.verify(target_logits=x, target_temperature=call.temperature, **call.draft(), seed=call.seed,
                              round=call.round, position=call.position, bf16_bits=name == "bf16")


def row_inputs(b: Batch, lo: int, hi: int) -> dict[str, npt.NDArray[Any]]:
    """Every per-row input of rows [lo, hi) but the target logits, as AcceptCall's fields."""
    p = b.plan
    return {"temperature": p.temperature[lo:hi], **{k: a[lo:hi] for k, a in b.draft.items()},
            "seed": p.seed[lo:hi], "round": p.round[lo:hi], "position": p.position[lo:hi]}


def concat(parts: list[Verdict]) -> Verdict:
    return Verdict(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))


# ------------------------------------------------------------------------------------------------------ counting


class Counts:
    """What the checked rows covered, by category (every status and plan listed, seen or not)."""

    def __init__(self) -> None:
        self.rows = 0
        self.mismatching_rows = 0
        self.mismatches = dict.fromkeys(FIELDS, 0)
        self.c: dict[str, Counter[str]] = {k: Counter() for k in (
            "status", "temperature", "ok", "depth", "dtype", "plan", "accepted")}
        self.c["status"].update(dict.fromkeys([str(s) for s in range(6)], 0))
        self.c["plan"].update(dict.fromkeys(PLANS, 0))
        self.flags: Counter[str] = Counter(dict.fromkeys(
            ("truncated", "argmax_drafts", "extreme_keys", "position_wraps", "flat_rows", "masked_rows", "bonus",
             "open_tests", "open_rejected"), 0))

    def add(self, b: Batch, ref: Verdict, v: int) -> None:
        p = b.plan
        n = p.rows.size
        self.rows += n
        bad = row_mismatch(b.got, ref)
        self.mismatching_rows += int(bad.sum())
        for f, m in rows_per_field(b.got, ref).items():
            self.mismatches[f] += m
        temp = p.temperature
        tclass = np.where(np.isnan(temp) | (temp < 0), "bad", np.where(temp == 0, "t0", "sampled"))
        ok = ref.status == 0
        self.c["status"].update(str(int(s)) for s in ref.status)
        self.c["temperature"].update(tclass.tolist())
        self.c["ok"].update(tclass[ok].tolist())
        self.c["depth"][str(b.depth)] += n
        self.c["dtype"][b.fmt] += n
        self.c["plan"].update(PLANS[int(k)] for k in p.plan)
        self.c["accepted"].update(str(int(a)) for a in ref.accepted)
        failed = b.draft["draft_status"] != 0
        n_len = np.where(failed.any(axis=1), failed.argmax(axis=1), b.depth)  # §11.3 step 1
        self.flags["truncated"] += int((n_len < b.depth).sum())
        self.flags["argmax_drafts"] += int((p.plan == ARGMAX).sum())
        self.flags["extreme_keys"] += int(p.extreme.sum())
        self.flags["position_wraps"] += int((p.position > np.uint64(U64_MAX - b.depth)).sum())
        self.flags["flat_rows"] += int((p.flat_j >= 0).sum())
        self.flags["masked_rows"] += int((p.mask_frac > 0).sum())
        self.flags["bonus"] += int((ok & (ref.accepted == n_len)).sum())
        self._open_tests(b, ref, v, ok & (tclass == "sampled"))

    def _open_tests(self, b: Batch, ref: Verdict, v: int, ok_sampled: npt.NDArray[np.bool_]) -> None:
        """The open requests' tests that fell in launch 3's open window c .. c + V - 1 (decided by launches 4 and 5):
        tests j = 0 .. min(a, D - 1), each with U_j below Q(0) 2^16; accepted iff U_j < c + R."""
        q = open_q(v)
        rows = np.flatnonzero((b.plan.plan == OPEN) & ok_sampled)
        if q is None or rows.size == 0:
            return
        c = P_TICKETS // v
        r = P_TICKETS - v * c
        for j in range(b.depth):
            t = rows[ref.accepted[rows] >= j]
            if t.size == 0:
                break
            p = b.plan
            u = uniform_below(p.seed[t], p.round[t], p.position[t] + np.uint64(j), DOMAIN_ACCEPT,
                              np.full(t.size, q << Q_SHIFT, dtype=np.uint64))
            opened = (u >= np.uint64(c)) & (u < np.uint64(c + v))
            self.flags["open_tests"] += int(opened.sum())
            self.flags["open_rejected"] += int((opened & (u >= np.uint64(c + r))).sum())

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "mismatching_rows": self.mismatching_rows, "mismatches_per_field": self.mismatches,
                **{k: dict(sorted(c.items())) for k, c in self.c.items()}, **dict(self.flags)}


# ------------------------------------------------------------------------------------------------------ failures


def dump_failure(out: Path, seed: int, v: int, batch: int, b: Batch, bits: npt.NDArray[Any], ref: Verdict) -> Path:
    """The failing batch (inputs, both outputs) as ``.npz`` for ``--replay``, and a ``.json`` of its first
    mismatching rows; returns the .npz path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"accept_bulk_seed{seed}_batch{b.k}.npz"
    p = b.plan
    arrays: dict[str, Any] = {
        "fmt": b.fmt, "bits": bits, "temperature": p.temperature, **b.draft, "seed": p.seed, "round": p.round,
        "position": p.position, "rows": p.rows, "run_seed": seed, "vocab": v, "batch": batch, "batch_index": b.k,
        **{f"reference_{f}": getattr(ref, f) for f in FIELDS}, **{f"kernel_{f}": getattr(b.got, f) for f in FIELDS},
    }
    np.savez(path, **arrays)
    bad = np.flatnonzero(row_mismatch(b.got, ref))
    report = {
        "replay": f"python -m pp3.audit.accept_bulk --replay {path}",
        "failure": b.failure,
        "seed": seed, "vocab": v, "batch": batch, "batch_index": b.k, "depth": b.depth, "format": b.fmt,
        "mismatching_rows": [int(p.rows[i]) for i in bad],
        "rows": [
            {
                "row": int(p.rows[i]),
                "plan": PLANS[int(p.plan[i])], "j": int(p.j[i]), "aux": int(p.aux[i]),
                "temperature": f"0x{int(p.temperature[i:i + 1].view(np.uint32)[0]):08x} ({float(p.temperature[i])!r})",
                "seed": f"0x{int(p.seed[i]):016x}", "round": f"0x{int(p.round[i]):016x}",
                "position": f"0x{int(p.position[i]):016x}",
                "reference": {f: np.asarray(getattr(ref, f)[i]).tolist() for f in FIELDS},
                "kernel": {f: np.asarray(getattr(b.got, f)[i]).tolist() for f in FIELDS},
            }
            for i in bad[:4]
        ],
    }
    path.with_suffix(".json").write_text(json.dumps(report, indent=1))
    return path


def _batch_file(path: str) -> tuple[str, AcceptCall]:
    """An argparse type: a batch that ``dump_failure`` wrote, loaded (``--replay``); any other file is refused."""
    try:
        return path, read_record(path, read_accept_call)
    except DamagedRecord as e:
        raise argparse.ArgumentTypeError(f"{path!r} is not a batch written by accept_bulk: {e}") from None


def replay(path: str, call: AcceptCall, dev: Any) -> int:
    """Re-run a written batch on the kernels and the reference: exit status 1 if they differ. A call the reference
    refuses raises ``DamagedRecord`` (no written batch holds one)."""
    ref = recorded_reference(call)
    got = call.run_kernel(dev)
    bad = np.flatnonzero(row_mismatch(got, ref))
    print(f"{path}: {bad.size} of {call.b} rows differ ({call.fmt.name}, D = {call.bits.shape[1] - 1}, "
          f"V = {call.bits.shape[2]}): rows {bad[:16].tolist()}")
    for i in bad[:4]:
        for f in FIELDS:
            print(f"  row {i} {f}: reference {np.asarray(getattr(ref, f)[i]).tolist()} "
                  f"kernel {np.asarray(getattr(got, f)[i]).tolist()}")
    return 1 if bad.size else 0


# ------------------------------------------------------------------------------------------------------ the run


@dataclasses.dataclass
class Run:
    seed: int
    start: int
    rows: int
    vocab: int
    batch: int
    workers: int
    max_seconds: float | None
    out: Path
    pageable: bool = False
    impl: Implementation | None = None  # the verifier under test (None: pp3's kernels)


@dataclasses.dataclass
class Outcome:
    counts: Counts
    end: int  # rows [start, end) were checked
    batches: int
    seconds: float
    stopped: str | None  # None (all rows), "time limit" or "mismatch"
    failure: Path | None


def _line(run: Run, end: int, counts: Counts, t0: float) -> str:
    el = time.perf_counter() - t0
    return (f"  accept_bulk: rows [{run.start}, {end}) of seed {run.seed} checked ({end - run.start}/{run.rows}), "
            f"{counts.mismatching_rows} mismatching, {el:.0f} s ({(end - run.start) / max(el, 1e-9):.1f} rows/s)")


PLANS_AHEAD = 3
PIN_FAILED = 3  # main's exit status when the host buffers could not be page-locked: nothing was checked


class PinError(RuntimeError):
    """The host buffers could not be page-locked; the process's CUDA runtime keeps the failure as its last error,
    which the next kernel launch would report, so a run with ``--pageable`` starts afresh."""


@contextmanager
def pinned(ring: tuple[shared_memory.SharedMemory, ...], pageable: bool) -> Iterator[str]:
    """The ring's buffers page-locked for the device's copies into them (``cudaHostRegister``; pageable memory is
    copied through a staging buffer, several times slower), unregistered on exit; yields how they are held. Without
    CUDA, or with ``pageable``, they stay as they are; a registration that fails raises (a failed runtime call would
    be reported again by the next kernel launch: ``PinError``)."""
    import torch

    if pageable or not torch.cuda.is_available():
        yield "pageable"
        return
    cudart = torch.cuda.cudart()  # type: ignore[no-untyped-call]
    held: list[int] = []
    try:
        for shm in ring:
            view = np.ndarray((shm.size,), dtype=np.uint8, buffer=shm.buf)
            ptr = int(view.ctypes.data)
            del view  # no export of the buffer may outlive this line: close() refuses while one exists
            err = cudart.cudaHostRegister(ptr, shm.size, 0)
            if int(err) != 0:
                raise PinError(f"cudaHostRegister of a shared buffer of {shm.size} bytes failed ({err}); "
                               "run again with --pageable")
            held.append(ptr)
        yield f"page-locked ({len(held)} x {ring[0].size} bytes)"
    finally:
        for ptr in held:
            cudart.cudaHostUnregister(ptr)


WARM_LAYOUTS = MAX_DEPTH * len(FORMAT_CYCLE)  # batches k and k + 24 share their depth and format


def _warm_batch(args: tuple[int, int, npt.NDArray[np.int64], int]) -> int:
    """Warm-up worker: batch ``k`` (of ``rows``) through the kernels on the GPU, its verdict unused."""
    import torch

    seed, k, rows, v = args
    dev = torch.device("cuda")
    run_batch(k, plan_batch(seed, rows, batch_layout(k)[0], v), v, dev)
    torch.cuda.synchronize(dev)
    return k


def batch_rows(run: Run, it: int) -> npt.NDArray[np.int64]:
    """The rows of the run's batch ``it`` (batch k = start / batch + it of the seed)."""
    lo = run.start + it * run.batch
    return np.arange(lo, min(lo + run.batch, run.start + run.rows), dtype=np.int64)


def warm_batches(run: Run) -> list[tuple[int, npt.NDArray[np.int64]]]:
    """(k, rows) of the batches that meet every kernel variant of the run: its first ``WARM_LAYOUTS`` (each depth
    with each format) and a last batch with fewer rows (another batch size)."""
    n_batches = -(-run.rows // run.batch)
    its = set(range(min(n_batches, WARM_LAYOUTS))) | ({n_batches - 1} if run.rows % run.batch else set())
    return [(run.start // run.batch + it, batch_rows(run, it)) for it in sorted(its)]


def warm(run: Run) -> str:
    """Every kernel variant the run launches compiled before it starts, many at a time. Triton compiles a variant on
    its first launch, in the launching process, one after another (the verifier's launches per depth and format, the
    selector's per format: ~95 s of the first 1,408 rows on one H100); here a pool of spawned processes runs one batch
    of each layout the run meets (its first 24 batches, and a shorter last one), and the binaries they compile land
    in Triton's cache, where this process loads them. Returns what happened, for the log; a warm-up that fails
    leaves the run to compile as it goes."""
    tasks = [(run.seed, k, rows, run.vocab) for k, rows in warm_batches(run)]
    procs = max(1, min(len(tasks), (os.cpu_count() or 2) * 3 // 4))
    t0 = time.perf_counter()
    try:
        with concurrent.futures.ProcessPoolExecutor(procs, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_warm_batch, tasks))
    except Exception as e:  # any failure here only costs the compile time it would have saved
        return f"failed after {time.perf_counter() - t0:.0f} s ({type(e).__name__}: {e}); compiling as it goes"
    return f"{len(tasks)} batches in {procs} processes, {time.perf_counter() - t0:.0f} s"


def bulk(run: Run, dev: Any) -> Outcome:
    """Batches of rows [start, start + rows) through the kernels (in this process, on ``dev``) and the reference (a
    spawned process pool over a ring of shared-memory buffers, a few batches in flight)."""

    import torch

    counts = Counts()
    first_k = run.start // run.batch
    n_batches = -(-run.rows // run.batch)
    chunk = max(1, -(-run.batch // (2 * run.workers)))  # rows per task: ~2 tasks per worker and batch
    size = run.batch * (MAX_DEPTH + 1) * run.vocab * 4
    t0 = time.perf_counter()
    end = run.start
    done = 0
    stopped: str | None = None
    failure: Path | None = None
    last = t0

    def settle(item: tuple[Batch, shared_memory.SharedMemory], parts: list[Verdict]) -> None:
        nonlocal end, stopped, failure, last
        b, shm = item
        ref = concat(parts)
        counts.add(b, ref, run.vocab)
        if row_mismatch(b.got, ref).any() and failure is None:
            shape = (b.plan.rows.size, b.depth + 1, run.vocab)
            bits = np.ndarray(shape, dtype=FORMATS[b.fmt].dtype, buffer=shm.buf).copy()
            failure = dump_failure(run.out, run.seed, run.vocab, run.batch, b, bits, ref)
            stopped = "mismatch"
        end = int(b.plan.rows[-1]) + 1
        now = time.perf_counter()
        if now - last >= 10:
            last = now
            progress(_line(run, end, counts, t0))

    def plan_of(it: int) -> concurrent.futures.Future[Plan]:
        return planner.submit(plan_batch, run.seed, batch_rows(run, it), batch_layout(first_k + it)[0], run.vocab)

    # 3 batches in flight over a ring of 4 buffers, each reused only after its batch settled; the plans of the next
    # PLANS_AHEAD batches made meanwhile in a process of their own (a batch's plan costs ~10 ms of Python)
    with (pipeline(run.workers, size, settle) as pipe, pinned(pipe.ring, run.pageable) as how,
          concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as planner):
        progress(f"  accept_bulk: host buffers {how}")
        plans = [plan_of(it) for it in range(min(PLANS_AHEAD, n_batches))]
        for it in range(n_batches):
            if stopped is not None:
                break
            if run.max_seconds is not None and it > 0 and time.perf_counter() - t0 >= run.max_seconds:
                stopped = "time limit"
                break
            if it + PLANS_AHEAD < n_batches:
                plans.append(plan_of(it + PLANS_AHEAD))
            b, target = run_batch(first_k + it, plans.pop(0).result(), run.vocab, dev, run.impl)
            shm = pipe.buffer()  # settles the batch that last used it
            raw = target.view(torch.int32 if b.fmt == "fp32" else torch.int16)
            host = np.ndarray(tuple(target.shape), dtype=np.int32 if b.fmt == "fp32" else np.int16, buffer=shm.buf)
            torch.from_numpy(host).copy_(raw)
            del target, raw
            n = b.plan.rows.size
            tasks = [(_reference_rows, ((shm.name, b.fmt, host.shape, r, min(n, r + chunk),
                                         row_inputs(b, r, min(n, r + chunk))),))
                     for r in range(0, n, chunk)]
            pipe.submit((b, shm), tasks)
            done += 1
    progress(_line(run, end, counts, t0))  # every batch settled
    return Outcome(counts, end, done, time.perf_counter() - t0, stopped, failure)


# ------------------------------------------------------------------------------------------------------ the CLI


def _check_out(out: Path) -> str | None:
    """None if a failing batch could be written under ``out`` (created for the check, removed again if it was not
    there and is still empty at the end: see ``main``), else why not."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".accept_bulk_probe_{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return f"--out: cannot write a failing batch under {out}: {e}"
    return None


def parse(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    ap = Parser(prog="python -m pp3.audit.accept_bulk", description=__doc__.splitlines()[0])  # one-line refusals
    ap.add_argument("--rows", type=int, help="request rows to check (>= 1)")
    ap.add_argument("--seed", type=int, default=0, help="the rows' seed (>= 0); a new seed gives new rows")
    ap.add_argument("--start", type=int, default=0, help="first row, a multiple of --batch (resumes a seed's rows)")
    ap.add_argument("--vocab", type=int, default=163840, help="vocabulary V (1 .. 2^31 - 1)")
    ap.add_argument("--batch", type=int, default=64, help="requests per kernel call (>= 1)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="reference processes (>= 1)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no batch after this many seconds (> 0); the rows checked so far are reported")
    ap.add_argument("--json", action="store_true", help="print one JSON document (stamp, rows, counts) on stdout")
    ap.add_argument("--out", type=Path, default=Path("verify-failures"), help="where a failing batch is written")
    ap.add_argument("--replay", type=_batch_file, metavar="FILE",
                    help="re-run a written batch on the kernels and the reference")
    ap.add_argument("--no-warm", action="store_true",
                    help="compile each kernel variant at its first launch (no parallel warm-up on the GPU first)")
    ap.add_argument("--pageable", action="store_true",
                    help="leave the host buffers pageable (no cudaHostRegister; slower copies, the same rows)")
    ap.add_argument("--impl", metavar="NAME", default=None,
                    help="the verifier to check instead of pp3's kernels: PKG.MOD:CALLABLE or an entry point of the "
                    "group pp3.implementations (pp3.harness; its replays run on pp3's kernels)")
    return ap, ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ap, args = parse(argv)
    out_existed = args.out.exists()
    if args.replay is None:
        # A run that would check nothing, or rows nobody could name again, refuses to run.
        if args.rows is None or args.rows < 1:
            ap.error(f"--rows: expected >= 1 (a run must check at least one row), got {args.rows}")
        for flag, value, low in (("--seed", args.seed, 0), ("--start", args.start, 0), ("--batch", args.batch, 1),
                                 ("--workers", args.workers, 1), ("--vocab", args.vocab, 1)):
            if value < low:
                ap.error(f"{flag}: expected >= {low}, got {value}")
        if args.vocab > MAX_VOCAB:
            ap.error(f"--vocab: expected <= 2^31 - 1, got {args.vocab}")
        if args.start % args.batch:
            ap.error(f"--start: expected a multiple of --batch ({args.batch}), got {args.start}")
        if args.max_seconds is not None and not args.max_seconds > 0:  # NaN too
            ap.error(f"--max-seconds: expected > 0, got {args.max_seconds}")
        why = _check_out(args.out)
        if why is not None:
            ap.error(why)
    elif args.impl is not None:
        ap.error("--impl: does not apply to --replay, which re-runs the batch's rows on pp3's kernels")
    impl = None
    if args.impl is not None:
        from pp3.harness.protocol import ImplementationError, load

        try:
            impl = load(args.impl, "verifier")[0]
        except ImplementationError as e:
            ap.error(f"--impl: {e}")

    import warnings

    import torch

    # The interpreter evaluates uint64 Philox and key arithmetic in NumPy, which warns on intended wrap-around.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("no CUDA GPU: set TRITON_INTERPRET=1 to run the kernels through Triton's interpreter", file=sys.stderr)
        return 2
    if args.replay is not None:
        path, call = args.replay
        try:
            return replay(path, call, dev)
        except DamagedRecord as e:
            ap.error(f"--replay: {path!r}: {e}")

    from pp3.testing.stamp import environment

    stamp = environment()
    run = Run(args.seed, args.start, args.rows, args.vocab, args.batch, args.workers, args.max_seconds, args.out,
              args.pageable, impl)
    progress(f"accept_bulk: device={stamp['gpu'] or 'cpu (interpreter)'}, seed {run.seed}, rows [{run.start}, "
             f"{run.start + run.rows}), V = {run.vocab}, batch {run.batch}, {run.workers} workers, "
             f"commit={stamp['commit']}{' (dirty)' if stamp['dirty'] else ''}")
    warmed = warm(run) if dev.type == "cuda" and not args.no_warm else "not run"
    progress(f"  accept_bulk: warm-up {warmed}")
    try:
        res = bulk(run, dev)
    except PinError as e:
        progress(f"accept_bulk: {e}")
        return PIN_FAILED
    if not out_existed and res.failure is None:
        try:
            args.out.rmdir()  # made only to check that it can be written; empty
        except OSError:
            pass
    verdict = "MISMATCH" if res.failure is not None else "PASS"
    doc = {
        "tool": "pp3.audit.accept_bulk",
        "environment": stamp,
        "seed": run.seed,
        "vocab": run.vocab,
        "batch": run.batch,
        "workers": run.workers,
        "rows_requested": [run.start, run.start + run.rows],
        "rows_checked": [run.start, res.end],
        "batches_checked": [run.start // run.batch, run.start // run.batch + res.batches],
        "complete": res.end == run.start + run.rows,
        "stopped": res.stopped,
        "resume": None if res.end == run.start + run.rows else f"--seed {run.seed} --start {res.end}",
        "warm_up": warmed,
        "time_s": round(res.seconds, 1),
        "rows_per_s": round((res.end - run.start) / max(res.seconds, 1e-9), 2),
        "counts": res.counts.as_dict(),
        "verdict": verdict,
        "failure": None if res.failure is None else str(res.failure),
    }
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"environment: {json.dumps(stamp)}")
        print(json.dumps({k: doc[k] for k in doc if k not in ("environment", "tool")}, indent=1))
    if res.failure is not None:
        progress(f"MISMATCH: batch written to {res.failure}; replay: python -m pp3.audit.accept_bulk --replay "
                 f"{res.failure}")
        return 1
    progress(f"accept_bulk: rows [{run.start}, {res.end}) of seed {run.seed}: 0 mismatches"
             + ("" if doc["complete"] else f" (stopped: {res.stopped}; resume with {doc['resume']})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
