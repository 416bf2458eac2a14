"""The launchers on ordinary and adversarial inputs, for compute-sanitizer: ``make sanitize-gpu`` runs
this module under memcheck, initcheck and racecheck on a CUDA GPU; each tool must report 0 errors.

    python -m tools.sanitize_cases [--device cpu]     (cpu: Triton's interpreter, TRITON_INTERPRET=1, V <= 2100)

Every launched kernel of the selector and the verifier is in it: ``propose`` (fp32/fp16/bf16; V = 1, 31, 33, 5000,
163840; NaN, +inf, all -inf rows and bad temperatures beside ordinary ones; T0 rows), ``greedy`` both ways
(``LaunchConfig.greedy``), the one-launch and row selectors (group "next": their handshake and paths on ordinary,
adversarial and bound-defeating rows), ``propose_sharded``,
``tile_candidates`` into one buffer, ``finalize`` on malformed candidates (``pp3.testing.candidates.corpus``: keys
swapped or repeated in a tile, unknown flag bits, keys the flags deny, tiles out of ID order, all-zero, all -1 and
random keys, empty tiles; IDs past the vocabulary, overlapping shards), and ``verify``
(depths 1, 3, 5; fp32/bf16; real drafts, failed and invalid drafts, point masses on the target's argmax, NaN and
+inf target rows; V = 163840 at B = 2 on the GPU; as shipped, and at depth 5 in its other variants too,
``VERIFY_NEXT``), and the adapters' row gather (``pp3.kernels.launchers.gather_rows``:
every element width, rows of 1 … 163840 elements, invalid rows whose index points past the source, fill rows after
the drafts, offsets past the flattened rows; through the ragged adapters on the GPU). Sizes are small where they can
be: a sanitizer runs kernels 10-100x slower.
Exits 0 after a device synchronisation; the sanitizer's own exit code carries its findings.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

from pp3 import adapters
from pp3.drafter import Draft
from pp3.kernels import LaunchConfig, accept, launchers, select
from pp3.kernels.select import BAD_CANDIDATES, Candidates
from pp3.testing import candidates


def _keys(
    b: int, dev: torch.device, temps: tuple[float, ...] = (1.0, 0.0, 0.7, 2.0)
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    temp = torch.tensor([temps[i % len(temps)] for i in range(b)], dtype=torch.float32, device=dev)
    seed = torch.arange(b, dtype=torch.int64, device=dev) - 1  # -1: the uint64 maximum
    return temp, seed, seed + 7, seed * 3


def _adversarial(x: torch.Tensor) -> torch.Tensor:
    """Row 0 NaN, row 1 +inf at the last entry, row 2 all -inf, row 3 -inf but one entry; the rest unchanged."""
    x = x.clone()
    v = x.shape[1]
    x[0, v // 2] = float("nan")
    if x.shape[0] > 1:
        x[1, v - 1] = float("inf")
    if x.shape[0] > 2:
        x[2] = float("-inf")
    if x.shape[0] > 3:
        x[3] = float("-inf")
        x[3, min(v - 1, 40)] = 1.0
    return x


# In the interpreter (``--device cpu``) a case only has to run, so that a broken one is found here and not on the
# device (the parity suites check the interpreter's results): there the vocabularies are as small as still reach
# every launch of each case (several tiles, segments and blocks), and the middle one is taken in fp32 alone.


def _big(dev: torch.device) -> int:
    """The large vocabulary: 163840 on the GPU, 2100 in the interpreter (three tiles of 1024, the last ragged)."""
    return 163840 if dev.type == "cuda" else 2100


def _mid(dev: torch.device) -> int:
    """The middle vocabulary: 5000 on the GPU; 1100 in the interpreter (two tiles of 1024, a ragged last)."""
    return 5000 if dev.type == "cuda" else 1100


def _vocabs(dev: torch.device, dt: torch.dtype) -> tuple[int, ...]:
    """The selector's row lengths in format ``dt``: 1, 31, 33 and the middle one (in the interpreter, fp32 alone)."""
    return (1, 31, 33, _mid(dev)) if dev.type == "cuda" or dt == torch.float32 else (1, 31, 33)


def selector_cases(dev: torch.device, g: torch.Generator) -> None:
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for v in _vocabs(dev, dt):
            x = (torch.randn(6, v, device=dev, generator=g) * 4).to(dt)
            select.propose(x, *_keys(6, dev))
            select.propose(_adversarial(x), *_keys(6, dev, (1.0, float("nan"), -1.0, 0.0)))
            select.propose(x, *_keys(6, dev), launch=LaunchConfig(selector="tiles"))
            select.propose(x, *_keys(6, dev), launch=LaunchConfig(segment=32))
            select.propose(_adversarial(x), *_keys(6, dev, (1.0, float("nan"), -1.0, 0.0)),
                           launch=LaunchConfig(segment_gather=True))  # C gathers the blocks (16 rows on by default)
            select.greedy(x)
            select.greedy(_adversarial(x), tile=32, launch=LaunchConfig(greedy="keys"))
            select.greedy(_adversarial(x), tile=32, launch=LaunchConfig(greedy="rescan"))
    x = torch.randn(2, _big(dev), device=dev, generator=g)
    select.propose(x, *_keys(2, dev))  # two rows: the short segments of small batches (config.segment_size)
    select.propose(torch.randn(8, _big(dev), device=dev, generator=g), *_keys(8, dev))  # the long ones
    select.propose_sharded([x[:, :1000], x[:, 1000:]], *_keys(2, dev))
    select.greedy(x)  # "auto": the keys (fp32)
    select.greedy(x, launch=LaunchConfig(greedy="rescan"))
    select.greedy_sharded([x[:, :1000], x[:, 1000:]])
    ramp = torch.arange(_big(dev), device=dev, dtype=torch.float32).expand(2, -1).contiguous()
    select.propose(ramp, *_keys(2, dev))  # sorted rows: the segment selector's fallback scan
    select.propose(torch.ones_like(ramp), *_keys(2, dev))  # all equal: the fallback too
    gathered = LaunchConfig(segment_gather=True)
    select.propose(ramp, *_keys(2, dev), launch=gathered)  # sorted rows through C's gather: more than 128 blocks
    select.propose(torch.randn(16, _big(dev), device=dev, generator=g), *_keys(16, dev))  # 16 rows: C gathers
    buf = Candidates(keys=torch.zeros((2, 4, 32), dtype=torch.int64, device=dev),
                     flags=torch.zeros((2, 4), dtype=torch.int32, device=dev))
    small = torch.randn(2, 200, device=dev, generator=g)
    select.tile_candidates(small[:, :128], tile=64, out=buf)
    select.tile_candidates(small[:, 128:], id_offset=128, tile=64, out=buf, tile_base=2)
    select.finalize(buf, *_keys(2, dev), vocab_size=200)


def next_selector_cases(dev: torch.device, g: torch.Generator) -> None:
    """The one-launch and row selectors (not yet shipped: ``LaunchConfig(selector="onelaunch")``, ``"rows"``): the
    one-launch selector's handshake (publications, polls, slot counter, arrival, the last program's reads and resets)
    on ordinary, adversarial and bound-defeating rows (``pp3.audit.suites.bound_rows``: all equal, the 32nd and 33rd
    tied across segments, few finite, early segments small), which take its three paths (one batched load, steps,
    the fallback scan), at small and large batches (short and long segments), by network and by rank."""
    from pp3.audit.suites import bound_rows

    big = _big(dev)
    for how in ("onelaunch", "rows"):
        cfg = LaunchConfig(selector=how)
        for dt in (torch.float32, torch.bfloat16):
            x = (torch.randn(6, 33, device=dev, generator=g) * 4).to(dt)
            select.propose(x, *_keys(6, dev), launch=cfg)
            select.propose(_adversarial(x), *_keys(6, dev, (1.0, float("nan"), -1.0, 0.0)), launch=cfg)
        x = torch.randn(4, big, device=dev, generator=g)
        select.propose(_adversarial(x), *_keys(4, dev, (1.0, float("nan"), -1.0, 0.0)), launch=cfg)
        rows = torch.from_numpy(np.stack([r for _, r in bound_rows(big)])).to(dev)
        select.propose(rows, *_keys(rows.shape[0], dev), launch=cfg)
        ties = torch.full((1, big), float("-inf"), device=dev)
        ties[0, ::big // 100] = 2.5  # 100 equal survivors: the steps past the one batched load
        select.propose(ties, *_keys(1, dev), launch=cfg)
        select.propose(torch.randn(2, big, device=dev, generator=g), *_keys(2, dev),
                       launch=LaunchConfig(selector=how, top_rank=True))
    if dev.type == "cuda":  # 16 rows: the long segments of 8 warps (in the interpreter, too slow for its worth)
        select.propose(torch.randn(16, big, device=dev, generator=g), *_keys(16, dev),
                       launch=LaunchConfig(selector="onelaunch"))


def malformed_candidates(dev: torch.device, g: torch.Generator) -> None:
    """finalize on candidates that break launch 1's contract (``pp3.testing.candidates.corpus``, IDs past the
    vocabulary, overlapping shards): each row gets the status the contract gives it (BAD_CANDIDATES where broken)."""
    x = torch.randn(3, 200, device=dev, generator=g) * 3
    c = select.tile_candidates(x, tile=64)
    lo = select.tile_candidates(x[:, :128], tile=64)
    hi = select.tile_candidates(x[:, 118:], id_offset=118, tile=64)
    cases = [(k, f, 200) for _, k, f in candidates.corpus(c.keys, c.flags)]
    cases.append((c.keys, c.flags, 150))  # IDs past the vocabulary
    cases.append((torch.cat([lo.keys, hi.keys], 1).contiguous(), torch.cat([lo.flags, hi.flags], 1).contiguous(), 200))
    for k, f, v in cases:
        p = select.finalize(Candidates(keys=k, flags=f), *_keys(3, dev), vocab_size=v)
        broken = candidates.broken_rows(k.cpu().numpy(), f.cpu().numpy(), v)
        if not np.array_equal(p.status.cpu().numpy() == BAD_CANDIDATES, broken):
            raise AssertionError("finalize failed other rows than the candidates' contract says")


# The verifier's other variants (its screen by ex2.approx.f32, launch 3 by the handed-over word): the ordinary,
# failed-row and marked-request calls of the depth-5 shape again in them.
VERIFY_NEXT = LaunchConfig(screen="ex2", handover=True)


def verifier_cases(dev: torch.device, g: torch.Generator) -> None:
    shapes = ((torch.float32, 1, 4, _mid(dev)), (torch.bfloat16, 3, 4, _mid(dev)), (torch.float32, 5, 2, _big(dev)))
    for dt, depth, b, v in shapes:
        hows = (LaunchConfig(screen="pinned", handover=False),) + ((VERIFY_NEXT,) if depth == 5 else ())
        target = (torch.randn(b, depth + 1, v, device=dev, generator=g) * 3).to(dt)
        temp, seed, rnd, pos = _keys(b, dev)
        props = [select.propose(target[:, j].float() + 0.1, temp, seed, rnd, pos + j) for j in range(depth)]
        tok = torch.stack([p.token for p in props], 1)
        st = torch.stack([p.status for p in props], 1)
        ids = torch.stack([p.ids for p in props], 1)
        tix = torch.stack([p.tickets for p in props], 1)
        for how in hows:
            accept.verify(target, temp, tok, st, ids, tix, seed, rnd, pos, launch=how)
        bad = target.clone()
        bad[0, 0, 3] = float("nan")
        if b > 1:
            bad[1, depth, v - 1] = float("inf")
        st_bad = st.clone()
        st_bad[-1, 0] = 3  # a failed first draft: the row truncates to depth 0
        odd_temp = _keys(b, dev, (1.0, float("nan"), 0.0, -1.0))[0]
        for how in hows:
            accept.verify(bad, odd_temp, tok, st_bad, ids, tix, seed, rnd, pos, launch=how)
        tix_bad = tix.clone()
        tix_bad[0, 0, 0] += 1  # an invalid draft: its tickets no longer sum to 2^24
        accept.verify(target, temp, tok, st, ids, tix_bad, seed, rnd, pos)
        # Point masses on the argmax (launch 3's window), found on the host: racecheck flags torch's own argmax
        # kernel (its warp-level shared-memory reduction), which is not what this run checks.
        g_tok = torch.from_numpy(target[:, :depth].float().cpu().numpy().argmax(-1)).to(dev, torch.int32)
        pid = torch.full_like(ids, -1)
        pid[..., 0] = g_tok
        ptx = torch.zeros_like(tix)
        ptx[..., 0] = 1 << 24
        for how in hows:
            accept.verify(target, temp, g_tok, torch.zeros_like(st), pid, ptx, seed, rnd, pos, launch=how)


def row_gather_cases(dev: torch.device, g: torch.Generator) -> None:
    for dt, length in ((torch.float32, 4100), (torch.bfloat16, 1), (torch.bool, 33), (torch.int64, 7)):
        src = (torch.randn(5, length, device=dev, generator=g) > 0).to(dt)
        index = torch.tensor([4, 2**40, -1, 5, 0], dtype=torch.int64, device=dev)  # rows 1-3 invalid and out of range
        valid = torch.tensor([True, False, False, False, True], device=dev)
        launchers.gather_rows(src, index, valid, 1)
    b, d, v = 4, 5, _big(dev)
    target = torch.randn(b, d + 1, v, device=dev, generator=g)
    lengths = torch.tensor([5, 0, 2, 3], dtype=torch.int32, device=dev)
    flat, cu = adapters.target_logits_to_ragged(target, lengths, 10 + 3)  # 3 fill rows after the 10 drafts
    adapters.target_logits_from_ragged(flat, cu, d)
    adapters.from_ragged(flat, cu + 7, d + 1)  # offsets past the rows: clamped, never read outside
    temp, seed, rnd, pos = _keys(b, dev)
    p = select.propose(target[:, 0], temp, seed, rnd, pos)
    draft = Draft(p.token[:, None].repeat(1, d), p.status[:, None].repeat(1, d),
                           p.ids[:, None].repeat(1, d, 1), p.tickets[:, None].repeat(1, d, 1))
    adapters.draft_from_ragged(adapters.draft_to_ragged(draft, 12, lengths), d)


CASES = {"selector": selector_cases, "next": next_selector_cases, "candidates": malformed_candidates,
         "verifier": verifier_cases, "gather": row_gather_cases}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.sanitize_cases")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: needs TRITON_INTERPRET=1")
    ap.add_argument("--cases", nargs="+", choices=tuple(CASES), default=list(CASES),
                    help="which groups of cases to run (default: all)")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("tools.sanitize_cases: no CUDA GPU (run under compute-sanitizer on one, or pass --device cpu)",
              file=sys.stderr)
        return 2
    if args.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        print("tools.sanitize_cases: --device cpu needs TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    dev = torch.device(args.device)
    g = torch.Generator(device=dev).manual_seed(16)
    for name in args.cases:
        CASES[name](dev, g)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    print("sanitize cases: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
