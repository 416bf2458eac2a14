"""Launch configuration of the Triton kernels: sizes, caps and options as data. Imports neither torch nor triton
(the property strategies and the benchmark read it without them).

No setting here changes a bit of any result: every float reduction of the kernels is in a fixed order (SPEC.md §5
step 4, §11.4), so tiles, warps, caps and programmatic dependent launch only change the speed.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MAX_TILE = 4096  # the selector's largest tile: 16 KiB of fp32 per program; smaller rows get smaller tiles
# The verifier's tile: VERIFY_TILE for calls of more than VERIFY_SMALL_ENTRIES target entries, VERIFY_TILE_SMALL for
# smaller ones (more programs per row); the H200 sweeps are in bench/NOTES.md, "Verifier: the chain without the
# remainders".
VERIFY_TILE = 2048
VERIFY_TILE_SMALL = 1024
VERIFY_SMALL_ENTRIES = 1 << 22  # B * (D + 1) * V: B <= 4 at depth 5 and V = 163840
MAX_VERIFY_TILES = 1024  # tiles per target row whose partials one program of the verifier reduces
VERIFY_WARPS = 4  # warps per program of the verifier's per-tile launches (1, 3, 4 and 6)
COUNT_CHUNK = 8  # tiles per program of the verifier's launch 4 (the floor counts of the rare marked requests)
MAX_TILES = 512  # tiles per row that launch 2 merges in one program (512 * 32 keys = 128 KiB)
FINALIZE_CAP = 128  # compaction slots in launch 2 (_top_k); more survivors fall back to rounds of max
# Launch 2 thresholds by the tiles' second candidates up to this many tiles, by their maxima above (_finalize_kernel).
SECOND_CANDIDATE_TILES = 45
# The segment selector (``propose`` on one tensor, _select.py): buckets of segment maxima per row, entries per block
# whose maximum launch A stores, block maxima per step of C's selection, blocks per step of its gather per warp of C
# (16 entries per thread: C at 4 warps spills with 32), survivor slots per row (more survivors: the fallback scan),
# and the chunk and compaction slots of the scan. C gathers (no launch B) from SEGMENT_GATHER_ROWS rows on.
SEGMENT_GATHER_ROWS = 16
SEGMENT_BUCKETS = 64
SEGMENT_BLOCK = 64
SEGMENT_SELECT = 4096
SEGMENT_GATHER = 8
SEGMENT_CAP = 128
SEGMENT_PROGRAMS = 1280  # segment_size: programs per launch below which small batches get shorter segments
SCAN_CHUNK = 1024
SCAN_CAP = 128
# The one-launch selector (``selector="onelaunch"``, _select.py): buckets per row; the groups of a segment whose least
# maximum is its own bound (at least K); a segment publishes one group maximum per ONELAUNCH_PUBLISH entries (at least
# one, at most ONELAUNCH_GROUPS: about 320 publications per row at V = 163840 whatever the segment); survivor slots per
# row (more: the fallback scan), the last program's one batched load of them, and its steps over more; polls of the
# buckets per program at most; programs per launch below which small batches get shorter segments.
ONELAUNCH_BUCKETS = 64
ONELAUNCH_GROUPS = 32
ONELAUNCH_PUBLISH = 512
ONELAUNCH_CAP = 1024
ONELAUNCH_FEW = 64
ONELAUNCH_CHUNK = 256
ONELAUNCH_POLLS = 3
ONELAUNCH_PROGRAMS = 256
# The row selector (``selector="rows"``): one program per row, entries per step, warps (8 entries per thread, the next
# step's 8 loaded beside: 128 registers, two programs per SM; static, sm_90).
ROWS_STEP = 2048
ROWS_WARPS = 8
# Exact arithmetic (SPEC.md "Keywords"): no FMA contraction, no flush to zero. The interpreter ignores both.
EXACT: dict[str, Any] = {"enable_fp_fusion": False, "enable_reflect_ftz": False}
SCREENS = ("pinned", "ex2")  # the verifier's screening exponentials (LaunchConfig.screen)


_WARPS = (1, 2, 4, 8, 16, 32)  # warps per program that a LaunchConfig may name
SELECTORS = ("auto", "segments", "tiles", "onelaunch", "rows")  # the selectors that LaunchConfig.selector may name


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """How the selector's launches, and the verifier's, run (never what they compute).

    ``warps``: warps per program of the tile selector's launch 1 and launch 2 (tuned on the H200, bench/NOTES.md; the
    greedy selector's programs take the first). ``segment_warps``: the same for the segment selector's launches A, B
    and C (None: ``segment_warps``, as measured; B's entry is unused when C gathers). ``segment_gather``: whether C
    gathers the blocks that reach the bound itself instead of launch B's survivors (None: ``segment_gathers``).
    ``selector``: which selector ``propose`` runs on one [B, V] tensor: "segments", "tiles" (the two launches of
    ``tile_candidates`` and ``finalize``, which every sharded call runs), "onelaunch" (one launch per position: segment
    programs that publish their bounds while they read, the last program of a row selects; not yet measured), "rows"
    (one program per row with a running bound; not yet measured), or "auto" (the default: the segment selector,
    measured faster at every batch size since its selections became bitonic networks: bench/NOTES.md). ``pdl``:
    programmatic dependent launch where the device has it (CUDA, compute capability >= 9; never in the interpreter):
    ``True`` always there, ``False`` never, ``None`` (the default) unless the environment sets PP3_PDL=0
    (``use_pdl``)."""

    warps: tuple[int, int] = (8, 8)
    pdl: bool | None = None
    segment_warps: tuple[int, int, int] | None = None
    segment_gather: bool | None = None
    selector: str = "auto"
    segment: int | None = None  # the segment selector's entries per program (None: segment_size; a power of two)
    # How the greedy selector's tiles reduce: "keys" (each tile to its largest §4.1 key), "rescan" (each tile to its
    # maximum alone; launch 2 reads the first tile holding the row's maximum again; one shard per call, a sharded call
    # keeps the keys) or "auto" (the default: rescan for fp16/bf16, keys for fp32, as measured: bench/NOTES.md).
    greedy: str = "auto"
    # The verifier's variants (``accept.verify``; neither changes an output bit: SPEC.md §11.12 for the screen).
    # ``screen``: launch 1's screening exponential, "pinned" (fourteen fp32 operations, each one IEEE operation: the
    # shipped one) or "ex2" (the hardware's, ``ex2.approx.f32`` = MUFU.EX2, under the bound ``pp3.kernels.screen``
    # derives from its documented error); None reads PP3_VERIFY_SCREEN (``verify_screen``).
    screen: str | None = None
    # ``handover``: launch 2 hands launch 3 one word per request (whether it draws or is marked, its row a, and that
    # row's maximum), so a drawing request's tile waits on one load before its logits instead of four, and launches
    # 6 and 7 form row a's S from launch 3's tile sums themselves (launch 3 counts rows in for marked requests only);
    # None reads PP3_VERIFY_HANDOVER (``verify_handover``).
    handover: bool | None = None
    # The one-launch and row selectors: warps per program (None: ``onelaunch_warps`` for the one-launch selector,
    # ROWS_WARPS for the row selector); the survivors' first K by a compare-and-count rank instead of a bitonic
    # network (``top_rank``); polls of the row's buckets per one-launch program at most (None: ONELAUNCH_POLLS);
    # registers per thread at most (``max_registers``, ptxas's maxnreg; None: ptxas's choice).
    onelaunch_warps: int | None = None
    top_rank: bool = False
    polls: int | None = None
    max_registers: int | None = None

    def __post_init__(self) -> None:
        """Every field checked when the configuration is made (a launch trusts it): ``TypeError`` for a wrong type
        (``pdl=0`` is not ``False``: ``use_pdl`` tells the three settings apart by identity), ``ValueError`` for a
        wrong value, each naming the field."""
        for name, w, n in (("warps", self.warps, 2), ("segment_warps", self.segment_warps, 3)):
            if w is None and name == "segment_warps":  # the defaults of the path taken
                continue
            if not isinstance(w, tuple) or not all(type(c) is int for c in w):
                raise TypeError(f"{name}: expected a tuple of {n} ints, got {w!r}")
            if len(w) != n or any(c not in _WARPS for c in w):
                raise ValueError(f"{name}: expected {n} of {', '.join(map(str, _WARPS))}, got {w!r}")
        for name, flag in (("pdl", self.pdl), ("segment_gather", self.segment_gather)):
            if flag is not None and not isinstance(flag, bool):
                raise TypeError(f"{name}: expected None, True or False, got {flag!r}")
        for name, text, allowed in (("selector", self.selector, SELECTORS),
                                    ("greedy", self.greedy, ("auto", "keys", "rescan"))):
            if not isinstance(text, str):
                raise TypeError(f"{name}: expected one of {', '.join(map(repr, allowed))}, got {text!r}")
            if text not in allowed:
                raise ValueError(f"{name}: expected one of {', '.join(map(repr, allowed))}, got {text!r}")
        if self.screen is not None and not isinstance(self.screen, str):
            raise TypeError(f"screen: expected None, 'pinned' or 'ex2', got {self.screen!r}")
        if self.screen is not None and self.screen not in SCREENS:
            raise ValueError(f"screen: expected None, 'pinned' or 'ex2', got {self.screen!r}")
        if self.handover is not None and not isinstance(self.handover, bool):
            raise TypeError(f"handover: expected None, True or False, got {self.handover!r}")
        s = self.segment
        if s is not None and type(s) is not int:
            raise TypeError(f"segment: expected None or an int, got {s!r}")
        if s is not None and (s < 32 or s > 1 << 16 or s & (s - 1)):
            raise ValueError(f"segment: expected None or a power of two in 32 .. 65536, got {s!r}")
        ow = self.onelaunch_warps
        if ow is not None and type(ow) is not int:
            raise TypeError(f"onelaunch_warps: expected None or an int, got {ow!r}")
        if ow is not None and ow not in _WARPS:
            raise ValueError(f"onelaunch_warps: expected None or one of {', '.join(map(str, _WARPS))}, got {ow!r}")
        if not isinstance(self.top_rank, bool):
            raise TypeError(f"top_rank: expected True or False, got {self.top_rank!r}")
        for name, count, low, high in (("polls", self.polls, 1, 64), ("max_registers", self.max_registers, 24, 255)):
            if count is not None and type(count) is not int:
                raise TypeError(f"{name}: expected None or an int, got {count!r}")
            if count is not None and not low <= count <= high:
                raise ValueError(f"{name}: expected None or an int in {low} .. {high}, got {count!r}")


DEFAULT_LAUNCH = LaunchConfig()


def auto_tile(v: int) -> int:
    """The selector's tile for a row of ``v`` entries: >= 32 tiles where possible (a good launch-2 threshold),
    between 1024 and MAX_TILE entries, a power of two."""
    t = 1024
    while t < MAX_TILE and v >= 64 * t:
        t *= 2
    return t


def segment_size(v: int, b: int, gather: bool = False) -> int:
    """The segment selector's entries per program for ``b`` rows of ``v`` entries: the largest power of two in
    32 .. 1024 (2048 when C gathers, ``segment_gathers``) that cuts a row into at least SEGMENT_BUCKETS segments
    (every bucket filled: then each holds the maximum of about v / SEGMENT_BUCKETS entries, and the bound is as tight
    as with more segments; 32 for shorter rows), halved down to 256 while a launch has fewer than SEGMENT_PROGRAMS
    programs (small batches: shorter chains per program). Measured on the H200 (bench/NOTES.md, "Selector: bitonic
    networks in the segment selector"; 2048 when C gathers: "Selector: the blocks' top two, and launch A's segments
    when C gathers"): launch B's one-warp programs hold 32 entries per lane at 1024, while when C gathers only launch
    A reads segments, and 2048 halves its programs and bucket atomics."""
    s = 2048 if gather else 1024
    while s > 32 and -(-v // s) < SEGMENT_BUCKETS:
        s //= 2
    while s > 256 and b * -(-v // s) < SEGMENT_PROGRAMS:
        s //= 2
    return s


def segment_gathers(b: int, config: LaunchConfig = DEFAULT_LAUNCH) -> bool:
    """Whether the segment selector's launch C gathers the survivors itself (two launches) for ``b`` rows: as
    ``config.segment_gather`` says, by default from SEGMENT_GATHER_ROWS rows on. Measured on the H200 (bench/NOTES.md,
    "Selector: C gathers"): the gather reads ~2 % of each row again where launch B reads all of it and computes the
    bound once per row, -40 % at B = 64; at B <= 4 its one program per row is the longer chain (+57 % at B = 1)."""
    if config.segment_gather is not None:
        return config.segment_gather
    return b >= SEGMENT_GATHER_ROWS


def segment_warps(gather: bool, config: LaunchConfig = DEFAULT_LAUNCH) -> tuple[int, int, int]:
    """Warps per program of launches A, B and C: ``config.segment_warps``, by default (4, 1, 4) with launch B (C at 4
    warps: -7 % at B = 1 against 8, records/2026-12-03/h200-b) and (4, 1, 8) when C gathers (its gather then holds 16
    entries per thread; 4 warps at 32 spill: records/2026-12-03/h200-c)."""
    if config.segment_warps is not None:
        return config.segment_warps
    return (4, 1, 8) if gather else (4, 1, 4)


def onelaunch_segment(v: int, b: int) -> int:
    """The one-launch selector's entries per program for ``b`` rows of ``v`` entries: 4096 (fewer programs, fewer
    atomics and arrivals per row), halved down to 256 while a launch has fewer than ONELAUNCH_PROGRAMS programs (small
    batches: shorter chains per program, about two co-resident programs per SM at 4 warps), never below the row's
    next power of two when that is smaller (one segment), nor below 32. A first choice, not yet measured."""
    s = 4096
    while s > 256 and b * -(-v // s) < ONELAUNCH_PROGRAMS:
        s //= 2
    while s > 32 and s // 2 >= v:
        s //= 2
    return s


def onelaunch_warps(segment: int, config: LaunchConfig = DEFAULT_LAUNCH) -> int:
    """Warps per one-launch program: ``config.onelaunch_warps``, by default 4, 8 from 4096 entries on (at most 16
    entries per thread, 8 at 4096: 128 registers; 4 warps at 4096 take 168; static, sm_90, 107 at 512 entries)."""
    if config.onelaunch_warps is not None:
        return config.onelaunch_warps
    return 8 if segment >= 4096 else 4


def onelaunch_publish(segment: int) -> int:
    """Group maxima a one-launch program of ``segment`` entries publishes: one per ONELAUNCH_PUBLISH entries, 1 to
    ONELAUNCH_GROUPS (so a row publishes about v / ONELAUNCH_PUBLISH of them, at any segment size)."""
    return max(1, min(ONELAUNCH_GROUPS, segment // ONELAUNCH_PUBLISH))


def tile_cap(tile: int) -> int:
    """Compaction slots in launch 1: groups of 32 leave ~40 survivors at 2048+ entries, ~120 at 1024."""
    return 128 if tile <= 1024 else 64


def use_pdl(device: torch.device, config: LaunchConfig = DEFAULT_LAUNCH) -> bool:
    """Whether a launch on ``device`` uses programmatic dependent launch. PDL only lets a launch start early: both
    kernels wait (griddepcontrol.wait) for the previous kernel and its memory before they read anything, so no
    result changes (GPU parity was run both ways, VERIFY.md). ``config.pdl = None`` reads PP3_PDL at every launch."""
    if device.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1" or config.pdl is False:
        return False
    if config.pdl is None and os.environ.get("PP3_PDL") == "0":
        return False
    import torch

    return torch.cuda.get_device_capability(device)[0] >= 9


def verify_screen(config: LaunchConfig = DEFAULT_LAUNCH) -> str:
    """The verifier's screening exponential: ``config.screen``, else PP3_VERIFY_SCREEN ("pinned" or "ex2"), else
    "pinned" (read at every call, as PP3_PDL is)."""
    if config.screen is not None:
        return config.screen
    value = os.environ.get("PP3_VERIFY_SCREEN", "pinned")
    if value not in SCREENS:
        raise ValueError(f"PP3_VERIFY_SCREEN: expected 'pinned' or 'ex2', got {value!r}")
    return value


def verify_handover(config: LaunchConfig = DEFAULT_LAUNCH) -> bool:
    """Whether the verifier's launch 2 hands launch 3 one word per request: ``config.handover``, else
    PP3_VERIFY_HANDOVER ("1" or "0"), else False (read at every call)."""
    if config.handover is not None:
        return config.handover
    value = os.environ.get("PP3_VERIFY_HANDOVER", "0")
    if value not in ("0", "1"):
        raise ValueError(f"PP3_VERIFY_HANDOVER: expected '0' or '1', got {value!r}")
    return value == "1"
