"""CPU time of the bulk audit's verifier (``pp3.audit.fast_accept``) per request row, on ``pp3.audit.accept_bulk``'s
batch layouts: what bounds ``make bulk-verify-gpu``, whose process pool runs it on every row.

    python -m bench.fast_accept [--layouts 12] [--rows 16] [--vocab 163840] [--json]

Batch k of the bulk run (depth 1 + k mod 8; fp32, fp16, bf16 for k mod 3 = 0, 1, 2; every plan) with ``--rows`` of
its rows, built on the CPU: the target logits from torch's CPU generator (the bulk run draws them on its device, so
the values differ, the distribution does not) and the drafts from the reference selector ``pp3.propose`` (the
kernels' bits), then ``accept_bulk.corrupt``; each batch is timed once (process CPU time of ``fast_accept.verify``
through ``accept_bulk.fast_reference``, as a worker runs it) after one untimed call on batch 0, and its verdict is
checked against the plain reference ``pp3.reference.verify`` (untimed) so that the rows timed are rows that pass.
Prints one line per layout and the mean over all rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from pp3.audit import accept_bulk
from pp3.reference import DEFAULT_TAU
from pp3.testing.call import FORMATS, AcceptCall
from pp3.testing.compare import row_mismatch
from pp3.testing.drafts import drafts


def layout_call(k: int, rows: int, v: int) -> AcceptCall:
    """Batch ``k``'s first ``rows`` rows of seed 0, built on the CPU."""
    import torch

    d, fmt = accept_bulk.batch_layout(k)
    plan = accept_bulk.plan_batch(0, np.arange(k * 64, k * 64 + rows, dtype=np.int64), d, v)
    target, draft_logits = accept_bulk.build_logits(plan, d, fmt, v, torch.device("cpu"))
    # the reference selector's proposals, as accept_bulk.propose_drafts makes the kernels' (exact widening to fp32)
    draft = drafts(draft_logits.float().numpy(), plan.temperature, plan.seed, plan.round, plan.position, DEFAULT_TAU)
    accept_bulk.corrupt(target, draft, plan, v)
    bits = target.view(torch.int32 if fmt == "fp32" else torch.int16).numpy().view(FORMATS[fmt].dtype).copy()
    return AcceptCall(FORMATS[fmt], bits, plan.temperature, draft["draft_tokens"], draft["draft_status"],
                      draft["draft_ids"], draft["draft_tickets"], plan.seed, plan.round, plan.position)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fast_accept", description=__doc__.splitlines()[0])
    ap.add_argument("--layouts", type=int, default=12, help="batch layouts k = 0 .. N-1 (>= 1)")
    ap.add_argument("--rows", type=int, default=16, help="request rows per layout (1 .. 64)")
    ap.add_argument("--vocab", type=int, default=163840, help="vocabulary V (>= 40)")
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    args = ap.parse_args(argv)
    for flag, value, lo, hi in (("--layouts", args.layouts, 1, None), ("--rows", args.rows, 1, 64),
                                ("--vocab", args.vocab, 40, None)):
        if value < lo or (hi is not None and value > hi):
            ap.error(f"{flag}: expected {lo} .. {hi if hi is not None else 'any'}, got {value}")
    accept_bulk.fast_reference(layout_call(0, args.rows, args.vocab))  # untimed: first-call costs
    per_layout = []
    for k in range(args.layouts):
        call = layout_call(k, args.rows, args.vocab)
        t0 = time.process_time()
        got = accept_bulk.fast_reference(call)
        ms = (time.process_time() - t0) * 1e3 / args.rows
        if row_mismatch(got, call.run_reference()).any():
            print(f"layout {k}: fast_accept differs from the reference", file=sys.stderr)
            return 1
        d, fmt = accept_bulk.batch_layout(k)
        ok = got.status == 0
        per_layout.append({"k": k, "depth": d, "format": fmt, "ms_per_row": round(ms, 2),
                           "accepted_mean": round(float(got.accepted[ok].mean()), 2) if ok.any() else None})
        if not args.json:
            print(f"layout {k}: D = {d}, {fmt}: {ms:.2f} ms per request row", flush=True)
    mean = sum(p["ms_per_row"] for p in per_layout) / len(per_layout)
    if args.json:
        print(json.dumps({"vocab": args.vocab, "rows": args.rows, "layouts": per_layout,
                          "mean_ms_per_row": round(mean, 2)}, indent=1))
    else:
        print(f"mean: {mean:.2f} ms per request row ({args.layouts} layouts x {args.rows} rows, V = {args.vocab})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
