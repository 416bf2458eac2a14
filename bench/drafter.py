"""``make bench-drafter``: the depth-5 draft loop captured in one CUDA graph at V = 163840 (greedy and sampled, 1 and 2
vocabulary shards, B = 1, 8, 32); the Triton verifier's bit parity with the reference and its latency (one CUDA
graph) at V = 163840, fp32 and bf16, depths 5 and 1, beside a read-only pass and FlashInfer's softmax +
chain_speculative_sampling in the same process; and one speculative step (draft + verify) in one CUDA graph.
Writes DIR/bench_drafter.json (default $OUT, else results/), stamped.

    python -m bench.drafter [--out DIR] [--verify-only] [--no-step] [--batch 1 4 ...] [--dtype float32 ...]
                            [--depth 5 1] [--variants pp3 "pp3 screen ex2" ...] [--flashinfer-max-batch N]
                            [--rotate-mb MB] [--markdown FILE] [--audit-ptx]
    (GPU only; admits sampled drafting itself, DSPARK_SAMPLED_TOP32=1)

``--variants`` times the verifier's variants (``VARIANTS``: its screen and launch 3, ``LaunchConfig``) side by
side, each checked against the reference; ``--rotate-mb`` rotates copies of each call's inputs so that at least that
many MB are read between two replays of one copy (L2 cannot hold them); ``--markdown`` writes the verifier's table;
``--audit-ptx`` then runs the launched PTX audit over every binary this process ran (into the JSON, ``ptx_audit``).
Exits 1 if a verifier (any variant) differs from the reference on a row, or the audit fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pp3.audit import fast_accept
from pp3.drafter import SAMPLED_ENV, Draft, TPDrafter
from pp3.kernels import LaunchConfig
from pp3.kernels import verify as verify_dev
from pp3.testing.call import to_numpy
from pp3.testing.compare import row_mismatch
from pp3.testing.markov import MarkovDrafter
from pp3.testing.stamp import environment
from pp3.testing.timing import cuda_graph, time_calls, time_graph

V, RANK, DEPTH = 163840, 64, 5
FIELDS = ("tokens", "status", "ids", "tickets")
# The verifier's variants (SPEC.md §11.12, bench/NOTES.md "Verifier: the screen by MUFU.EX2, and launch 3 by one
# handed-over word"): "pp3" is the shipped one.
VARIANTS = {
    "pp3": LaunchConfig(screen="pinned", handover=False),
    "pp3 screen ex2": LaunchConfig(screen="ex2", handover=False),
    "pp3 handover": LaunchConfig(screen="pinned", handover=True),
    "pp3 ex2+handover": LaunchConfig(screen="ex2", handover=True),
}


def draft_latency() -> list[dict[str, Any]]:
    rows = []
    for shards in (1, 2):
        drafter = TPDrafter(MarkovDrafter.random(V, RANK, seed=1, shards=shards, gain=2, device="cuda"), DEPTH)
        for b in (1, 8, 32):
            ctx = torch.randint(0, V, (b, 1), device="cuda")
            seed = torch.arange(b, dtype=torch.int64, device="cuda")
            rnd = torch.zeros(b, dtype=torch.int64, device="cuda")
            pos = torch.ones(b, dtype=torch.int64, device="cuda")
            temp = torch.ones(b, dtype=torch.float32, device="cuda")

            def greedy(d: TPDrafter = drafter, c: torch.Tensor = ctx) -> Any:
                return d.draft(c)

            def sampled(
                d: TPDrafter = drafter,
                c: torch.Tensor = ctx,
                t: torch.Tensor = temp,
                s: torch.Tensor = seed,
                r: torch.Tensor = rnd,
                p: torch.Tensor = pos,
            ) -> Any:
                return d.draft_sampled(c, t, s, r, p)

            modes: dict[str, Callable[[], Any]] = {"greedy": greedy, "sampled": sampled}
            for mode, fn in modes.items():
                stats = time_calls(fn, 200)
                replay, graphed = cuda_graph(fn)
                replay()  # capture runs nothing: the graph's outputs hold its results only after a replay
                eager = fn()
                same = all(torch.equal(getattr(graphed, f), getattr(eager, f)) for f in FIELDS)
                rows.append({"draft": mode, "V": V, "depth": DEPTH, "shards": shards, "B": b, **stats,
                             "how": "one CUDA graph replay, CUDA events", "graph_equals_eager": same})
                print(rows[-1], flush=True)
    return rows


def _flashinfer() -> tuple[Callable[..., Any] | None, str]:
    """FlashInfer's chain_speculative_sampling (the dense peer), or None and why not."""
    try:
        from flashinfer.sampling import chain_speculative_sampling  # type: ignore[import-not-found]
    except Exception as e:
        return None, f"flashinfer not importable: {e.__class__.__name__}: {e}"
    return chain_speculative_sampling, "ok"


def _baseline() -> tuple[Callable[..., Any] | None, str]:
    """The verifier of an older copy of pp3 (package ``pp3_baseline`` in the folder PP3_BENCH_BASELINE, named by
    PP3_BENCH_BASELINE_NAME), timed beside this one: or None."""
    folder = os.environ.get("PP3_BENCH_BASELINE")
    if not folder:
        return None, ""
    sys.path.insert(0, folder)
    from pp3_baseline.kernels import accept as base  # type: ignore[import-not-found]

    return base.verify, f"pp3_baseline {os.environ.get('PP3_BENCH_BASELINE_NAME', '')}".strip()


def _reference(logits: torch.Tensor, temp: float, draft: Draft, seed: torch.Tensor) -> Any:
    """The reference's verdict (``pp3.audit.fast_accept``: its bits, faster; bf16 from its bit patterns)."""
    if logits.dtype == torch.bfloat16:
        x = logits.view(torch.int16).cpu().numpy().view(np.uint16)
    else:
        x = logits.float().cpu().numpy()
    return fast_accept.verify(x, np.float32(temp), **draft.numpy(), seed=seed.cpu().numpy().view(np.uint64),
                              round=0, position=1, bf16_bits=logits.dtype == torch.bfloat16)


def _timed(step: Callable[[torch.Tensor], Any], copies: list[torch.Tensor]) -> dict[str, float]:
    """``step`` on each copy of the target logits captured in its own CUDA graph, the graphs replayed in turn."""
    if len(copies) == 1:
        return time_calls(lambda: step(copies[0]), 100)
    return time_graph(lambda k: (lambda: step(copies[k])), len(copies), 100)


def verifier(batches: list[int], dtypes: list[str], depths: list[int], variants: list[str] | None = None,
             fi_max_batch: int = 1 << 30, rotate_mb: float = 0.0) -> list[dict[str, Any]]:
    """Per (dtype, depth, B): pp3's verifier in each of ``variants`` (``VARIANTS``; parity with the reference, then
    one CUDA graph), a read-only pass over the same target logits, and FlashInfer's softmax +
    chain_speculative_sampling on dense fp32 q and p (q exported exactly by pp3.adapters.dense_probs, outside the
    graph; up to ``fi_max_batch`` rows), all in this process, each on enough copies of the inputs that
    ``rotate_mb`` MB are read between two replays of one (one copy for 0). Plus parity-only rows for T0 and T = 2."""
    from pp3.adapters import dense_probs

    rng = np.random.default_rng(0)
    model = MarkovDrafter.random(V, RANK, seed=1, shards=2, gain=2, device="cuda")
    drafter = TPDrafter(model, DEPTH, tau=1.0)
    delta = torch.from_numpy(rng.integers(-1, 2, size=tuple(model.embedding.shape)) / 32).to(model.embedding)
    target = MarkovDrafter(model.embedding + delta, torch.cat(model.shards, 1))
    chain, fi_note = _flashinfer()
    base, base_name = _baseline()
    names = variants or ["pp3"]
    rows = []
    cases = [(dt, d, b, 1.0) for dt in dtypes for d in depths for b in batches]
    cases += [("float32", DEPTH, 4, 0.0), ("float32", DEPTH, 4, 2.0)]
    for dtype_name, depth, b, temp in cases:
        ctx = torch.randint(0, V, (b, 1), device="cuda")
        seed = torch.arange(b, dtype=torch.int64, device="cuda") + 7
        full = drafter.draft_sampled(ctx, 1.0, seed, 0, 1)
        draft = Draft(*(getattr(full, f)[:, :depth].contiguous() for f in FIELDS))
        before = torch.cat([ctx, draft.tokens.clamp_min(0).long()], 1)
        logits = torch.stack([torch.cat(target(before[:, j : j + 1]), 1) for j in range(depth + 1)], 1)
        logits = logits.to(getattr(torch, dtype_name)).contiguous()
        # Device-tensor keys: a call with Python scalars copies them host-to-device, which a CUDA graph cannot hold.
        temps = torch.full((b,), temp, dtype=torch.float32, device="cuda")
        zeros, ones = torch.zeros_like(seed), torch.ones_like(seed)
        args = (logits, temps, draft.tokens, draft.status, draft.ids, draft.tickets, seed, zeros, ones)
        want = _reference(logits, temp, draft, seed)
        parity, first = {}, {}
        for name in names:
            t0 = time.perf_counter()
            got = verify_dev(*args, launch=VARIANTS[name])
            torch.cuda.synchronize()
            first[name] = round(time.perf_counter() - t0, 1)
            parity[name] = not row_mismatch(to_numpy(got), want).any()
        row: dict[str, Any] = {"verify": "pp3 Triton verifier, one CUDA graph", "V": V, "dtype": dtype_name,
                               "depth": depth, "B": b, "T": temp, "parity": all(parity.values()),
                               "parity_by_variant": parity, "accepted": want.accepted.tolist()[:8],
                               "first_call_s": first}
        if temp == 1.0:
            copies = [logits] + [logits.clone() for _ in range(_copies(logits, rotate_mb) - 1)]
            row["input_copies"] = len(copies)
            for name in names:

                def run(x: torch.Tensor, a: tuple[Any, ...] = args[1:], how: LaunchConfig = VARIANTS[name]) -> Any:
                    return verify_dev(x, *a, launch=how)

                row[name] = _timed(run, copies)

            def read(x: torch.Tensor) -> Any:  # the floor: one read-only pass over the same target logits
                return x.amax(dim=-1)

            row["read_only_pass"] = _timed(read, copies)
            if base is not None:

                def run_base(a: tuple[Any, ...] = args) -> Any:
                    return base(*a)

                row["baseline"] = base_name
                row["baseline_parity"] = not row_mismatch(to_numpy(run_base()), want).any()
                row["pp3_baseline"] = time_calls(run_base, 100)
            if chain is not None and b <= fi_max_batch:
                q = dense_probs(draft.ids, draft.tickets, V)  # [B, depth, V] fp32, exact
                tok = draft.tokens.clamp_min(0)

                def peer(x: torch.Tensor, q: torch.Tensor = q, tok: torch.Tensor = tok) -> Any:
                    return chain(q, tok, torch.softmax(x.float(), dim=-1), deterministic=True)

                try:
                    row["flashinfer_softmax_chain"] = _timed(peer, copies)
                    p = torch.softmax(logits.float(), dim=-1)

                    def chain_only(q: torch.Tensor = q, tok: torch.Tensor = tok, p: torch.Tensor = p) -> Any:
                        return chain(q, tok, p, deterministic=True)

                    row["flashinfer_chain_only"] = time_calls(chain_only, 100)
                except Exception as e:  # the row says why
                    row["flashinfer"] = f"{e.__class__.__name__}: {e}"[:300]
            else:
                row["flashinfer"] = fi_note if chain is None else f"not run above B = {fi_max_batch}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def _copies(x: torch.Tensor, rotate_mb: float) -> int:
    """How many copies of ``x`` make at least ``rotate_mb`` MB between two reads of one (1 to 64)."""
    return max(1, min(64, -(-int(rotate_mb * 2**20) // (x.numel() * x.element_size()))))


def markdown(rows: list[dict[str, Any]], names: list[str]) -> str:
    """The verifier's timed rows as one table per (dtype, depth): median µs per call by B, then FlashInfer's time and
    a read-only pass's as multiples of each variant's (the issue's goals: >= 2 and <= 2.5 at fp32, 3.5 at bf16)."""
    timed = [r for r in rows if "read_only_pass" in r]
    out = []
    for dtype, depth in dict.fromkeys((r["dtype"], r["depth"]) for r in timed):
        cells = sorted((r for r in timed if (r["dtype"], r["depth"]) == (dtype, depth)), key=lambda r: r["B"])
        head = "| µs, median | " + " | ".join(f"B={r['B']}" for r in cells) + " |"
        lines = [f"### {dtype}, depth {depth} (V = {V}, T = 1, one CUDA graph per call)", "", head,
                 "|---|" + "---:|" * len(cells), _line("read-only pass", [_us(r, "read_only_pass") for r in cells])]
        for name in names:
            ok = all(r["parity_by_variant"][name] for r in cells)
            lines.append(_line(name + ("" if ok else " (PARITY FAILED)"), [_us(r, name) for r in cells]))
        lines.append(_line("FlashInfer softmax + chain", [_us(r, "flashinfer_softmax_chain") for r in cells]))
        lines += [_line(f"FlashInfer / {name}", [_ratio(r, "flashinfer_softmax_chain", name) for r in cells])
                  for name in names]
        lines += [_line(f"{name} / read-only", [_ratio(r, name, "read_only_pass") for r in cells]) for name in names]
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _line(label: str, values: list[str]) -> str:
    return f"| {label} | " + " | ".join(values) + " |"


def _median(row: dict[str, Any], key: str) -> float | None:
    v = row.get(key)
    return float(v["median_us"]) if isinstance(v, dict) else None


def _us(row: dict[str, Any], key: str) -> str:
    v = _median(row, key)
    return "—" if v is None else f"{v:.1f}"


def _ratio(row: dict[str, Any], top: str, bottom: str) -> str:
    a, b = _median(row, top), _median(row, bottom)
    return "—" if a is None or b is None else f"{a / b:.2f}"


def speculative_step(batches: list[int]) -> list[dict[str, Any]]:
    """One speculative step in one CUDA graph: the depth-5 draft (sampled, or greedy) of the
    Markov drafter at V = 163840 plus pp3's verifier on fixed target logits, captured together with device-tensor
    keys; beside the draft alone."""
    model = MarkovDrafter.random(V, RANK, seed=1, shards=1, gain=2, device="cuda")
    drafter = TPDrafter(model, DEPTH)
    rows = [_step_row(drafter, b) for b in batches]
    return rows


def _step_row(drafter: TPDrafter, b: int) -> dict[str, Any]:
    ctx = torch.randint(0, V, (b, 1), device="cuda")
    seed = torch.arange(b, dtype=torch.int64, device="cuda") + 3
    zeros, ones = torch.zeros_like(seed), torch.ones_like(seed)
    temps = torch.ones(b, dtype=torch.float32, device="cuda")
    logits = torch.randn((b, DEPTH + 1, V), device="cuda") * 4

    def sampled() -> Any:
        return drafter.draft_sampled(ctx, temps, seed, zeros, ones)

    def greedy() -> Any:
        return drafter.draft(ctx)

    def step(draft: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            d = draft()
            return verify_dev(logits, temps, d.tokens, d.status, d.ids, d.tickets, seed, zeros, ones)

        return run

    timed = {"draft_sampled": sampled, "draft_greedy": greedy, "draft_sampled+verify": step(sampled),
             "draft_greedy+verify": step(greedy)}
    row: dict[str, Any] = {"step": "one CUDA graph", "V": V, "depth": DEPTH, "B": b}
    for name, fn in timed.items():
        row[name] = time_calls(fn, 100)
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.drafter")
    ap.add_argument("--out", default=os.environ.get("OUT") or "results")
    ap.add_argument("--verify-only", action="store_true", help="skip the draft-loop latency")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 4, 16, 64], help="verifier batch sizes")
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"], help="target logit formats")
    ap.add_argument("--depth", type=int, nargs="+", default=[DEPTH, 1], help="verifier depths (1 .. 5)")
    ap.add_argument("--no-step", action="store_true", help="skip the speculative step (draft + verify)")
    ap.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["pp3"],
                    help="the verifier's variants to time side by side (pp3: the shipped one)")
    ap.add_argument("--flashinfer-max-batch", type=int, default=1 << 30, help="FlashInfer's rows up to this B")
    ap.add_argument("--rotate-mb", type=float, default=0.0,
                    help="copies of the inputs so that this many MB are read between two replays of one (0: one)")
    ap.add_argument("--markdown", default=None, help="write the verifier's table here")
    ap.add_argument("--audit-ptx", action="store_true",
                    help="then the launched PTX audit of every binary this process ran (into the JSON; exit 1 if it "
                    "fails)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.drafter: needs a CUDA GPU")
        return 0
    os.environ[SAMPLED_ENV] = "1"
    doc: dict[str, Any] = {"environment": environment(), "draft": [] if args.verify_only else draft_latency(),
           "verify": verifier(args.batch, args.dtype, args.depth, args.variants, args.flashinfer_max_batch,
                              args.rotate_mb),
           "step": [] if args.no_step else speculative_step([1, 4, 64])}
    rc = 0 if all(r["parity"] for r in doc["verify"]) else 1  # a verifier (any variant) that differs fails the run
    if args.audit_ptx:
        from pp3.audit import ptx

        doc["ptx_audit"] = audit = ptx.audit_launched(digests=True, run_exercise=False)
        print(f"launched PTX audit of every binary this process ran: {audit['verdict']}, {audit['variants']} "
              f"variants, {len(audit['screen'])} with the screen's instructions "
              f"({sum(c.get('ex2.approx.f32', 0) for c in audit['screen'].values())} ex2.approx.f32), forbidden in "
              f"{len(audit['forbidden'])}: {sorted(audit['forbidden'])[:3]}")
        rc = rc if audit["verdict"] == "PASS" else 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_drafter.json").write_text(json.dumps(doc, indent=1))
    print(f"wrote {out / 'bench_drafter.json'}")
    if args.markdown:
        Path(args.markdown).write_text(markdown(doc["verify"], args.variants))
        print(Path(args.markdown).read_text())
    return rc


if __name__ == "__main__":
    sys.exit(main())
