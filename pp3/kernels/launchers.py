"""The launchers that trust their arguments: one per kernel entry, and every launch of pp3's kernels goes through
one of them. The public entry points (``select``, ``accept``, ``pp3.adapters``) and pp3's own callers
(``pp3.pair``, ``pp3.drafter``, the benchmarks) check each argument once (``checks``) and then call these.

Nothing here checks an argument or reads device memory on the host, so a call can be captured in a CUDA graph. What
a launcher is given must be what ``checks`` returns: contiguous along V, of the kernels' dtypes, on one device, with
outputs that do not overlap each other or an input; a tile that fits; keys as ``buffers.RowKeys``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import triton

from pp3.kernels import _accept, _common, _greedy, _rows, _select, _tree, _workspace, buffers
from pp3.kernels.buffers import (
    BAD_CANDIDATES,
    GATHER_BITS,
    KIND,
    RAW,
    Candidates,
    Proposal,
    RowKeys,
    TreeProposal,
    TreeVerdict,
    Verdict,
    new_candidates,
)
from pp3.kernels.config import (
    COUNT_CHUNK,
    EXACT,
    FINALIZE_CAP,
    ONELAUNCH_BUCKETS,
    ONELAUNCH_CAP,
    ONELAUNCH_CHUNK,
    ONELAUNCH_FEW,
    ONELAUNCH_GROUPS,
    ONELAUNCH_POLLS,
    ROWS_STEP,
    ROWS_WARPS,
    SCAN_CAP,
    SCAN_CHUNK,
    SEGMENT_BLOCK,
    SEGMENT_BUCKETS,
    SEGMENT_CAP,
    SEGMENT_GATHER,
    SEGMENT_SELECT,
    VERIFY_WARPS,
    LaunchConfig,
    onelaunch_publish,
    onelaunch_segment,
    onelaunch_warps,
    segment_gathers,
    segment_size,
    segment_warps,
    tile_cap,
    use_pdl,
    verify_handover,
    verify_screen,
)
from pp3.reference._constants import DOMAIN_ACCEPT, DOMAIN_PROPOSAL, DOMAIN_RESIDUAL, DOMAIN_TREE, K
from pp3.reference.exponential import C2, C3, C4, C5, INV, L1, L2, ONE, SHIFT, TH, TL

_CHECK_TILES = 16  # tiles per step of the candidates check
_GATHER_BLOCK = 4096  # elements per program and row of the row gather (a smaller row gets its next power of two)
_MAX_PROGRAMS_PER_ROW = 65535  # CUDA's grid limit in y; longer rows are walked in strides

_CONSTS: dict[torch.device, torch.Tensor] = {}


def exp_constants(device: torch.device) -> torch.Tensor:
    """The fp64 constants of SPEC.md §6, laid out as ``_common.C_*``, taken from the reference (one source)."""
    cached = _CONSTS.get(device)
    if cached is None:
        table = np.zeros(_common.C_TL.value + 64, dtype=np.float64)
        for slot, val in (
            (_common.C_INV, INV),
            (_common.C_SHIFT, SHIFT),
            (_common.C_L1, L1),
            (_common.C_L2, L2),
            (_common.C_C2, C2),
            (_common.C_C3, C3),
            (_common.C_C4, C4),
            (_common.C_C5, C5),
            (_common.C_ONE, ONE),
        ):
            table[slot.value] = val
        table[_common.C_TH.value : _common.C_TH.value + 64] = TH
        table[_common.C_TL.value : _common.C_TL.value + 64] = TL
        cached = torch.from_numpy(table).to(device)
        _CONSTS[device] = cached
    return cached


@dataclass(frozen=True)
class Plan:
    """What every launch of one call shares, decided once per call (``plan``), not again in each launch: the call's
    ``LaunchConfig``, whether its launches use programmatic dependent launch (``config.use_pdl``, which reads PP3_PDL
    and the device's capability), their compile options (``config.EXACT``, with PDL or not), and SPEC.md §6's
    constants on the device."""

    launch: LaunchConfig
    pdl: bool
    options: dict[str, Any]
    consts: torch.Tensor


def plan(device: torch.device, launch: LaunchConfig) -> Plan:
    """The plan of one call on ``device`` with options ``launch``."""
    pdl = use_pdl(device, launch)
    return Plan(launch, pdl, {**EXACT, "launch_pdl": True} if pdl else dict(EXACT), exp_constants(device))


def _registers(launch: LaunchConfig) -> dict[str, Any]:
    """ptxas's register cap per thread (``LaunchConfig.max_registers``), where one is set."""
    return {} if launch.max_registers is None else {"maxnreg": launch.max_registers}


# ------------------------------------------------------------------------------------------------------ selector


def tiles(x: torch.Tensor, id_offset: int, tile: int, out: Candidates, tile_base: int, launch: LaunchConfig) -> None:
    """Launch 1 on a shard ``x`` [B, V_shard] of global IDs ``id_offset ..``: per tile its first K keys and its
    flags, into tiles ``tile_base ..`` of ``out``."""
    _tiles(x, id_offset, tile, out, tile_base, plan(x.device, launch))


def _tiles(x: torch.Tensor, id_offset: int, tile: int, out: Candidates, tile_base: int, p: Plan) -> None:
    b, v = x.shape
    total = out.flags.shape[1]
    cap = tile_cap(tile)
    scratch = torch.empty((b, total, cap), dtype=torch.int64, device=x.device)
    _select._tile_candidates_kernel[(b, triton.cdiv(v, tile))](
        # inputs
        x.view(RAW[x.dtype]),
        x.stride(0),
        v,
        id_offset,
        # outputs: this shard's tiles of the candidates
        out.keys,
        out.flags,
        tile_base,
        total,
        scratch,
        # compile-time
        KIND=KIND[x.dtype],
        TILE=tile,
        K=K,
        CAP=cap,
        PDL=p.pdl,
        num_warps=p.launch.warps[0],
        **p.options,
    )


def finalize(
    cands: Candidates, keys: RowKeys, tau: float, launch: LaunchConfig, out: Proposal, *, vocab_size: int | None = None
) -> Proposal:
    """Launch 2: merge every tile's candidates per row and apply SPEC.md §3-§8, into ``out``. ``vocab_size`` None:
    launch 1 wrote the candidates in this call (or an exchange of its outputs did). An int: a caller made them, so
    one launch first checks each row's candidates against what launch 1 guarantees (``_check_candidates_kernel``;
    IDs below ``vocab_size``) and fails a row that breaks it with status ``buffers.BAD_CANDIDATES`` and the
    failed-row outputs, and launch 2 then reads none of that row's candidates."""
    return _finalize(cands, keys, tau, plan(cands.keys.device, launch), out, vocab_size)


def _finalize(cands: Candidates, keys: RowKeys, tau: float, p: Plan, out: Proposal, vocab_size: int | None) -> Proposal:
    b, n_tiles = cands.flags.shape
    dev = cands.keys.device
    checked = vocab_size is not None
    if checked:
        _select._check_candidates_kernel[(b,)](
            cands.keys, cands.flags, n_tiles, vocab_size, out.status, out.token, out.ids, out.tickets,
            CT=_CHECK_TILES, K=K, BAD=BAD_CANDIDATES, num_warps=4, **EXACT,
        )
    # One spare row: launch 2 relies on every tile's keys being in descending order with 0-padding last (launch 1's
    # contract, which the check enforces on a caller's candidates); the spare row keeps even the compaction stores (at
    # most K - 1 slots past a row's CAP) inside this buffer should a row break it. A caller's candidates get a zeroed
    # scratch (defined reads whatever the data).
    scratch = (torch.zeros if checked else torch.empty)((b + 1, FINALIZE_CAP), dtype=torch.int64, device=dev)
    _select._finalize_kernel[(b,)](
        # inputs
        cands.keys,
        cands.flags,
        n_tiles,
        keys.temperature,
        keys.seed,
        keys.round,
        keys.position,
        tau,
        p.consts,
        DOMAIN_PROPOSAL,  # < 2^63: Triton passes it as an int64 with the same bits
        # outputs
        out.status,
        out.token,
        out.ids,
        out.tickets,
        scratch,
        # compile-time
        NC=triton.next_power_of_2(n_tiles * K),
        NT=triton.next_power_of_2(n_tiles),
        K=K,
        CAP=FINALIZE_CAP,
        PDL=p.pdl,
        CHECKED=checked,
        BAD=BAD_CANDIDATES,
        num_warps=p.launch.warps[1],
        **p.options,
    )
    return out


def propose(
    xs: Sequence[torch.Tensor], tile: int, keys: RowKeys, tau: float, launch: LaunchConfig, out: Proposal
) -> Proposal:
    """The selector over contiguous shards of one batch (in ID order) whose tiles fit launch 2, into ``out``: on one
    shard the segment selector, the one-launch selector or the row selector (as ``launch.selector`` says), else both
    launches of the tile selector."""
    p = plan(xs[0].device, launch)
    if len(xs) == 1 and launch.selector == "onelaunch":
        return _onelaunch(xs[0], keys, tau, p, out)
    if len(xs) == 1 and launch.selector == "rows":
        return _row_select(xs[0], keys, tau, p, out)
    if len(xs) == 1 and launch.selector != "tiles":
        return _segments(xs[0], keys, tau, p, out)
    n = [triton.cdiv(s.shape[1], tile) for s in xs]
    cands = new_candidates(xs[0].shape[0], sum(n), xs[0].device)
    offset = base = 0
    for s, nt in zip(xs, n, strict=True):
        _tiles(s, offset, tile, cands, base, p)
        offset += s.shape[1]
        base += nt
    return _finalize(cands, keys, tau, p, out, None)


def _segments(x: torch.Tensor, keys: RowKeys, tau: float, p: Plan, out: Proposal) -> Proposal:
    """The segment selector (``_select.py``: launches A and B, one program per segment of a row, and C, one per row;
    without B when C gathers, ``segment_gathers``) on ``x`` [B, V], into ``out``. Its buckets and survivor counters
    (``_workspace``) are left as found."""
    b, v = x.shape
    dev = x.device
    launch = p.launch
    gather = segment_gathers(b, launch)
    seg = launch.segment or segment_size(v, b, gather)
    n_seg = triton.cdiv(v, seg)
    blk = min(SEGMENT_BLOCK, seg)
    n_blk = n_seg * (seg // blk)
    nb, nbp = SEGMENT_BUCKETS, triton.next_power_of_2(SEGMENT_BUCKETS)
    buckets = _workspace.buckets(dev, b, nb)
    nsurv = _workspace.survivor_counts(dev, b)
    surv = _workspace.survivor_slots(dev, b, SEGMENT_CAP)
    blocks = torch.empty((b, n_blk if gather else 1), dtype=torch.float32, device=dev)
    scratch = torch.empty((b, 2 * SEGMENT_CAP + SCAN_CAP), dtype=torch.int64, device=dev)
    pdl, options = p.pdl, p.options
    raw, kind = x.view(RAW[x.dtype]), KIND[x.dtype]
    wa, wb, wc = segment_warps(gather, launch)
    _select._segment_max_kernel[(b, n_seg)](
        raw, x.stride(0), v, buckets, blocks,
        KIND=kind, L=seg, NB=nb, BLK=blk, BLOCKS=gather, PDL=pdl, num_warps=wa, **options,
    )
    if not gather:
        _select._segment_filter_kernel[(b, n_seg)](
            raw, x.stride(0), v, n_seg, buckets, surv, nsurv, keys.temperature,
            KIND=kind, L=seg, NB=nb, NBP=nbp, CAP=SEGMENT_CAP, K=K, PDL=pdl, num_warps=wb, **options,
        )
    _select._segment_merge_kernel[(b,)](
        # inputs
        raw, x.stride(0), v, n_seg, buckets, blocks, n_blk, surv, nsurv,
        keys.temperature, keys.seed, keys.round, keys.position, tau, p.consts, DOMAIN_PROPOSAL,
        # outputs
        out.status, out.token, out.ids, out.tickets, scratch,
        # compile-time
        KIND=kind, NB=nb, NBP=nbp, GATHERED=gather, BLK=blk, BC=min(SEGMENT_SELECT, triton.next_power_of_2(n_blk)),
        GATHER=SEGMENT_GATHER * wc, CAP=SEGMENT_CAP, C=SCAN_CHUNK, CAPS=SCAN_CAP, K=K, PDL=pdl, num_warps=wc,
        **options,
    )
    return out


def _onelaunch(x: torch.Tensor, keys: RowKeys, tau: float, p: Plan, out: Proposal) -> Proposal:
    """The one-launch selector (``_select._onelaunch_kernel``: one program per segment of a row, the row's last
    program to arrive selects) on ``x`` [B, V], into ``out``. Its buckets, counters and survivor count
    (``_workspace``) are left as found. Sizes from ``config`` (ONELAUNCH_*), read here at each call (tests set them)."""
    b, v = x.shape
    dev = x.device
    launch = p.launch
    seg = launch.segment or onelaunch_segment(v, b)
    n_seg = triton.cdiv(v, seg)
    cap = ONELAUNCH_CAP
    counts = _workspace.counters(dev, 2 * b)  # arrivals, then publications
    _select._onelaunch_kernel[(b * n_seg,)](
        # inputs
        x.view(RAW[x.dtype]), x.stride(0), v, n_seg,
        _workspace.value_buckets(dev, b, ONELAUNCH_BUCKETS), counts[:b], counts[b:],
        _workspace.survivor_slots(dev, b, cap), _workspace.survivor_counts(dev, b),
        keys.temperature, keys.seed, keys.round, keys.position, tau, p.consts, DOMAIN_PROPOSAL,
        # outputs
        out.status, out.token, out.ids, out.tickets,
        # compile-time
        KIND=KIND[x.dtype], L=seg, G=ONELAUNCH_GROUPS, PUB=onelaunch_publish(seg), NB=ONELAUNCH_BUCKETS, CAP=cap,
        FEW=min(ONELAUNCH_FEW, cap), CHUNK=ONELAUNCH_CHUNK, POLLS=launch.polls or ONELAUNCH_POLLS,
        RANK=launch.top_rank, K=K, PDL=p.pdl, num_warps=onelaunch_warps(seg, launch),
        **_registers(launch), **p.options,
    )
    return out


def _row_select(x: torch.Tensor, keys: RowKeys, tau: float, p: Plan, out: Proposal) -> Proposal:
    """The row selector (``_select._row_select_kernel``: one program per row, a running bound) on ``x`` [B, V], into
    ``out``; ``launch.segment`` entries per step (None: ROWS_STEP)."""
    b, v = x.shape
    dev = x.device
    launch = p.launch
    step = launch.segment or ROWS_STEP
    cap = ONELAUNCH_CAP
    _select._row_select_kernel[(b,)](
        # inputs
        x.view(RAW[x.dtype]), x.stride(0), v, _workspace.survivor_slots(dev, b, cap),
        keys.temperature, keys.seed, keys.round, keys.position, tau, p.consts, DOMAIN_PROPOSAL,
        # outputs
        out.status, out.token, out.ids, out.tickets,
        # compile-time
        KIND=KIND[x.dtype], L=step, NB=min(ONELAUNCH_BUCKETS, step), CAP=cap, FEW=min(ONELAUNCH_FEW, cap),
        CHUNK=ONELAUNCH_CHUNK, RANK=launch.top_rank, K=K, PDL=p.pdl,
        num_warps=launch.onelaunch_warps or ROWS_WARPS, **_registers(launch), **p.options,
    )
    return out


def greedy_rescans(xs: Sequence[torch.Tensor], launch: LaunchConfig) -> bool:
    """Whether the greedy selector's tiles keep their maxima only (RESCAN, ``_greedy.py``) rather than their largest
    keys: ``launch.greedy`` "rescan", or "auto" on fp16/bf16 logits (where the keys' per-entry work shows: the H200,
    bench/NOTES.md), and one shard either way (launch 2 reads a tile of the row again from its tensor)."""
    return len(xs) == 1 and (launch.greedy == "rescan" or (launch.greedy == "auto" and xs[0].dtype != torch.float32))


def greedy(xs: Sequence[torch.Tensor], tile: int, launch: LaunchConfig, out: Proposal) -> Proposal:
    """The greedy selector (SPEC.md §3, §4.2, §7 for T0 rows) over contiguous shards of one batch (in ID order), into
    ``out``: each row's outputs as a T0 row of ``propose`` gets them. Launch 1 per shard, one program per (row, tile)
    (``launch.warps[0]`` warps), writes the tiles' partials (keys, or maxima: ``greedy_rescans``); launch 2, one
    program per row (as many warps), reduces them and writes the outputs."""
    b, dev = xs[0].shape[0], xs[0].device
    n = [triton.cdiv(s.shape[1], tile) for s in xs]
    total = sum(n)
    part = torch.empty((b, total), dtype=torch.int64, device=dev)
    p = plan(dev, launch)
    pdl, options = p.pdl, p.options
    rescan = greedy_rescans(xs, launch)
    offset = base = 0
    for s, nt in zip(xs, n, strict=True):
        _greedy._tiles_kernel[(b, nt)](
            # inputs
            s.view(RAW[s.dtype]),
            s.stride(0),
            s.shape[1],
            offset,
            # outputs: the row's tiles
            part,
            base,
            total,
            # compile-time
            KIND=KIND[s.dtype],
            TILE=tile,
            PDL=pdl,
            RESCAN=rescan,
            num_warps=launch.warps[0],
            **options,
        )
        offset += s.shape[1]
        base += nt
    s = xs[0]  # read again with RESCAN (one shard), else only its dtype counts
    _greedy._rows_kernel[(b,)](
        # inputs
        s.view(RAW[s.dtype]),
        s.stride(0),
        s.shape[1],
        part,
        total,
        # outputs
        out.status,
        out.token,
        out.ids,
        out.tickets,
        # compile-time
        KIND=KIND[s.dtype],
        TILE=tile,
        NT=triton.next_power_of_2(total),
        K=K,
        PDL=pdl,
        RESCAN=rescan,
        num_warps=launch.warps[0],
        **options,
    )
    return out


# ------------------------------------------------------------------------------------------------------ verifier


def verify(
    x: torch.Tensor,
    tile: int,
    draft_tokens: torch.Tensor,
    draft_status: torch.Tensor,
    draft_ids: torch.Tensor,
    draft_tickets: torch.Tensor,
    keys: RowKeys,
    r_bound: int,
    margin: float,
    near: float,
    launch: LaunchConfig,
    out: Verdict,
) -> Verdict:
    """The verifier's seven launches (``_accept.py``) on target logits ``x`` [B, D+1, V] and the drafts [B, D] /
    [B, D, K], into ``out``. ``r_bound``: an upper bound on every remainder R (``accept.remainder_bound``);
    ``margin``: S lies within S~ (1 +- margin) (``accept.screen_margin``; 1 +- margin must be fp32 numbers);
    ``near``: launch 6's margin for its fast floor counts (``accept.count_margin``); ``launch``: the variants
    (``config.verify_screen``, ``config.verify_handover``), never the result. The last program of a row in
    launches 1, 3 and 4 reduces the row's partials once, counted in with the row counters of ``_workspace``, into
    per-row buffers the later launches read (launch 3 only for marked requests with the handover); launch 7 reduces
    launch 6's. Launch 1's screen sums and S~ go to buffers of their own, which only launch 2 reads (S~): no other
    launch reads a value of the screen (SPEC.md §11.12)."""
    b, d1, v = x.shape
    d = d1 - 1
    dev = x.device
    n_tiles = triton.cdiv(v, tile)
    ntp = max(2, triton.next_power_of_2(n_tiles))
    n_prog = triton.cdiv(n_tiles, COUNT_CHUNK)
    rows = b * d1
    counters = _workspace.counters(dev, rows)  # launches 1, 3 and 4 leave them all 0 again
    peaks = torch.empty((rows, n_tiles), dtype=torch.float32, device=dev)
    cls = torch.empty(rows, dtype=torch.int32, device=dev)
    argmax = torch.empty(rows, dtype=torch.int32, device=dev)
    maxima = torch.empty(rows, dtype=torch.float32, device=dev)
    screened = torch.empty((rows, n_tiles), dtype=torch.float64, device=dev)  # launch 1's screen sums
    approx = torch.empty(rows, dtype=torch.float64, device=dev)  # S~, launch 1 for launch 2
    sums = torch.empty((rows, n_tiles), dtype=torch.float64, device=dev)  # launch 3's P4 tile sums
    total = torch.empty(rows, dtype=torch.float64, device=dev)
    counts = torch.empty((rows, n_tiles), dtype=torch.int64, device=dev)
    remainder = torch.empty(rows, dtype=torch.int64, device=dev)
    screen = _common.SCREEN_EX2.value if verify_screen(launch) == "ex2" else _common.SCREEN_PINNED.value
    handover = verify_handover(launch)
    sw = (_accept.STATE_HANDOVER if handover else _accept.STATE).value
    # Zeroed: launch 2 writes it, and its own read of the marked flag (taken only in launch 5) is still issued.
    state = torch.zeros((b, sw), dtype=torch.int32, device=dev)
    plain = torch.empty((b, n_tiles), dtype=torch.int64, device=dev)
    corr = torch.empty((b, n_tiles), dtype=torch.int64, device=dev)
    weights = torch.empty((b, v), dtype=torch.float32, device=dev)  # launch 3's row a, read by launches 6 and 7
    status, accepted, tokens = out.status, out.accepted, out.tokens
    tok, dst, ids, tix = draft_tokens, draft_status, draft_ids, draft_tickets
    consts = plan(dev, launch).consts
    raw = x.view(RAW[x.dtype])
    logits = (raw, x.stride(0), x.stride(1), v)
    row = (*logits, n_tiles)  # the target logits and their tiles
    weigh = (cls, maxima, keys.temperature, consts)  # what launches 3 and 4 read to weigh a row
    kind = KIND[x.dtype]
    dp = max(2, triton.next_power_of_2(d1))
    ntp_log = ntp.bit_length() - 1
    grid = (rows * n_tiles,)
    trees = {"TILE": tile, "TILE_LOG": tile.bit_length() - 1, "NTP": ntp, "NTP_LOG": ntp_log}
    _accept._verify_tiles_kernel[grid](
        *row, counters, peaks, keys.temperature, screened, cls, argmax, maxima, approx,
        D=d, KIND=kind, **trees, SCREEN=screen, num_warps=VERIFY_WARPS, **EXACT,
    )
    chain = (
        *logits, cls, argmax, maxima, approx, total, remainder, keys.temperature, tok, dst, ids, tix, keys.seed,
        keys.round, keys.position, consts, DOMAIN_ACCEPT, status, accepted, tokens, state,
    )
    sizes = {"D": d, "DP": dp, "K": K, "KIND": kind, "SW": sw, "HANDOVER": handover}
    _accept._verify_rows_kernel[(b,)](*chain, 0, r_bound, 1.0 + margin, 1.0 - margin, **sizes, **EXACT)
    _accept._verify_sums_kernel[(b * n_tiles,)](
        *row, counters, *weigh, state, sums, total, weights, D=d, KIND=kind, **trees, SW=sw, HANDOVER=handover,
        num_warps=VERIFY_WARPS, **EXACT,
    )
    _accept._verify_counts_kernel[(rows * n_prog,)](
        *row, counters, *weigh, total, state, counts, remainder, n_prog,
        D=d, KIND=kind, TILE=tile, CHUNK=COUNT_CHUNK, NTP=ntp, SW=sw, num_warps=VERIFY_WARPS, **EXACT,
    )
    _accept._verify_rows_kernel[(b,)](*chain, 1, r_bound, 1.0 + margin, 1.0 - margin, **sizes, **EXACT)
    # What launches 6 and 7 read of row a; with the handover its S as launch 3's tile sums (they form the tree).
    slots = (argmax, maxima, sums if handover else total, weights, keys.temperature, ids, tix)
    row_s = {"NTP": ntp, "NTP_LOG": ntp_log, "SW": sw, "HANDOVER": handover}
    _accept._verify_residual_kernel[(b * n_tiles,)](
        *row, *slots, consts, near, state, plain, corr, D=d, K=K, KIND=kind, TILE=tile, **row_s,
        num_warps=VERIFY_WARPS, **EXACT,
    )
    _accept._verify_draw_kernel[(b,)](
        *row, *slots, keys.seed, keys.round, keys.position, consts, DOMAIN_RESIDUAL, state, plain, corr, tokens,
        D=d, K=K, KIND=kind, TILE=tile, **row_s, **EXACT,
    )
    return out


# ------------------------------------------------------------------------------------------ one-function entries


def expf(z: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """SPEC.md §6 ``expf`` of a contiguous 1-D fp32 ``z`` (z <= 0) into ``out``, the kernels' own device code."""
    block = 1024
    _common._expf_kernel[(triton.cdiv(z.numel(), block),)](
        z, out, exp_constants(z.device), z.numel(), BLOCK=block, **EXACT
    )
    return out


def expf_screen(z: torch.Tensor, screen: str, out: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """The verifier's screening exponential ``screen`` ("pinned" or "ex2", ``pp3.kernels.screen``) of a contiguous
    1-D fp32 ``z`` into ``out``, ``block`` inputs per program (a power of two)."""
    which = _common.SCREEN_EX2.value if screen == "ex2" else _common.SCREEN_PINNED.value
    _common._expf_screen_kernel[(triton.cdiv(z.numel(), block),)](
        z, out, z.numel(), BLOCK=block, SCREEN=which, **EXACT
    )
    return out


def philox(ctr: torch.Tensor, key: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Philox4x64-10 of contiguous [n, 4] counters and [n, 2] keys (int64 tensors of uint64 bits, n >= 1) into
    ``out`` [n, 4]: the kernels' own device code."""
    _common._philox_kernel[(ctr.shape[0],)](ctr, key, out, **EXACT)
    return out


def uniform_below(
    seed: torch.Tensor, round: torch.Tensor, position: torch.Tensor, domain: int, s: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """§11.5 of [n] int64 tensors of uint64 bits (1 <= s <= 2^40) into ``out`` [n]: the kernels' ``_uniform_below``.
    ``domain``: a uint64 (passed to the kernel as the int64 of the same bits)."""
    dom = domain - (1 << 64) if domain >= 1 << 63 else domain
    _accept._uniform_below_kernel[(seed.numel(),)](seed, round, position, s, out, dom, **EXACT)
    return out


def gather_rows(source: torch.Tensor, index: torch.Tensor, valid: torch.Tensor, fill_bits: int) -> torch.Tensor:
    """Rows ``index`` of ``source`` [R, ...] (a dtype of ``buffers.GATHER_BITS``) where ``valid``, every element the
    value with bits ``fill_bits`` elsewhere: a fresh [len(index), ...] tensor of ``source``'s dtype in one launch
    that reads only the valid rows. ``index``: [n] int64, each valid entry in 0 .. R-1 (nothing is read for an invalid
    one); ``valid``: [n] bool; ``fill_bits``: a signed integer of the element's width. A non-contiguous ``source``
    is copied first."""
    bits = GATHER_BITS[source.dtype]
    n, rest = index.shape[0], source.shape[1:]
    out = torch.empty((n, *rest), dtype=source.dtype, device=source.device)
    row_len = 1
    for size in rest:
        row_len *= size
    if n == 0 or row_len == 0:
        return out
    block = min(_GATHER_BLOCK, triton.next_power_of_2(row_len))
    grid = (n, min(triton.cdiv(row_len, block), _MAX_PROGRAMS_PER_ROW))
    _rows._gather_rows_kernel[grid](
        source.contiguous().view(bits), out.view(bits), index, valid.view(torch.int8), fill_bits, row_len,
        BLOCK=block, num_warps=4 if block >= 1024 else 1, **EXACT,
    )
    return out


# ------------------------------------------------------------------------------------------ draft trees (§12)


def propose_tree(
    x: torch.Tensor, tile: int, keys: RowKeys, tau: float, table: torch.Tensor, nodes: torch.Tensor, sampled: bool,
    launch: LaunchConfig, out: TreeProposal,
) -> TreeProposal:
    """SPEC.md §12.4 on node rows ``x`` [B M, V] (row (b, m): request b at node ``nodes[m]``), into ``out``: the tile
    selector's two launches (its candidates and its status and slots, D1), then one program per node row
    (``_tree._tree_draw_kernel``: D2-D5). ``table``: the tree (``tree.tree_table``); ``keys``: per request [B]."""
    r, v = x.shape
    m = nodes.shape[0]
    n_tiles = triton.cdiv(v, tile)
    cands = new_candidates(r, n_tiles, x.device)
    tiles(x, 0, tile, cands, 0, launch)
    rows = RowKeys(*(t.repeat_interleave(m) for t in (keys.temperature, keys.seed, keys.round, keys.position)))
    sel = finalize(cands, rows, tau, launch, buffers.new_proposal(r, x.device))
    out.tokens.fill_(-1)
    _tree._tree_draw_kernel[(r,)](
        cands.keys, n_tiles, sel.status, sel.ids, sel.tickets, keys.temperature, keys.seed, keys.round, keys.position,
        table, nodes, table.shape[1], m, DOMAIN_TREE, out.status.view(r), out.ids.view(r, K), out.tickets.view(r, K),
        out.tokens, K=K, NC=triton.next_power_of_2(n_tiles * K), SAMPLED=int(sampled), num_warps=4, **EXACT,
    )
    return out


def verify_tree(
    x: torch.Tensor, tile: int, table: torch.Tensor, height: int, draft_tokens: torch.Tensor,
    draft_status: torch.Tensor, draft_ids: torch.Tensor | None, draft_tickets: torch.Tensor | None, keys: RowKeys,
    out: TreeVerdict,
) -> TreeVerdict:
    """SPEC.md §12.5-§12.6 (``draft_ids`` and ``draft_tickets`` given) or §12.9 (None: the walk) on target logits
    ``x`` [B, N+1, V], into ``out``: six launches (``_tree.py``; docs/TREE_KERNELS.md)."""
    b, n1, v = x.shape
    dev = x.device
    n_tiles = triton.cdiv(v, tile)
    ntp = max(2, triton.next_power_of_2(n_tiles))
    rows = b * n1
    peaks = torch.empty((rows, n_tiles), dtype=torch.float32, device=dev)
    cls = torch.empty(rows, dtype=torch.int32, device=dev)
    argmax = torch.empty(rows, dtype=torch.int32, device=dev)
    maxima = torch.empty(rows, dtype=torch.float32, device=dev)
    sums = torch.empty((rows, n_tiles), dtype=torch.float64, device=dev)
    counts = torch.empty((rows, n_tiles), dtype=torch.int64, device=dev)
    valid = torch.empty(rows, dtype=torch.int32, device=dev)
    child = torch.empty(rows, dtype=torch.int32, device=dev)
    final = torch.empty(rows, dtype=torch.int32, device=dev)
    walk = draft_ids is None or draft_tickets is None
    ids = draft_tokens if walk else draft_ids  # the walk reads no slots: any int32 tensor stands in
    tix = draft_tokens if walk else draft_tickets
    consts = exp_constants(dev)
    kind = KIND[x.dtype]
    row = (x.view(RAW[x.dtype]), x.stride(0), x.stride(1), v, n_tiles, n1)
    weigh = (cls, maxima, keys.temperature, consts)
    opts = {"num_warps": VERIFY_WARPS, **EXACT}
    _tree._tree_peaks_kernel[(rows * n_tiles,)](*row, peaks, KIND=kind, TILE=tile, **opts)
    _tree._tree_rows_kernel[(rows,)](*row, peaks, cls, argmax, maxima, KIND=kind, TILE=tile, NTP=ntp, **opts)
    _tree._tree_sums_kernel[(rows * n_tiles,)](
        *row, *weigh, sums, KIND=kind, TILE=tile, TILE_LOG=tile.bit_length() - 1, **opts,
    )
    _tree._tree_counts_kernel[(rows * n_tiles,)](
        *row, *weigh, sums, counts, KIND=kind, TILE=tile, NTP=ntp, NTP_LOG=ntp.bit_length() - 1, **opts,
    )
    _tree._tree_node_kernel[(rows,)](
        *row, cls, argmax, maxima, sums, counts, keys.temperature, table, draft_tokens, draft_status, ids, tix,
        keys.seed, keys.round, keys.position, consts, DOMAIN_ACCEPT, DOMAIN_RESIDUAL, valid, child, final,
        K=K, KIND=kind, TILE=tile, NTP=ntp, NTP_LOG=ntp.bit_length() - 1, WALK=int(walk), **opts,
    )
    _tree._tree_walk_kernel[(b,)](
        table, n1, height, draft_tokens, draft_status, keys.temperature, cls, valid, child, final,
        out.status, out.accepted, out.path, out.tokens,
        NP=max(2, triton.next_power_of_2(n1)), HP=max(2, triton.next_power_of_2(height + 1)), **EXACT,
    )
    return out
