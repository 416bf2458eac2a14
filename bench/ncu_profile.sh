#!/usr/bin/env bash
# Where a selector launch spends its time, by Nsight Compute: warp stall reasons, issue rate, instruction mix, at
# V=163840, fp32, B in NCU_BATCHES (default 1 and 4; bench/NOTES.md uses it): the tile selector's launch 1 (tile
# candidates) and launch 2 (finalize), or with NCU_SELECTOR=segments the segment selector's launches A, B and C (A and
# C alone where C gathers: config.segment_gathers, from 16 rows); with NCU_SELECTOR=verify the verifier's seven
# launches at depth 5, B = 16 and 64.
# NCU_DTYPE (float32, bfloat16, float16) the logits' type; NCU_GATHER=1 or 0 forces C's gather on or off
# (LaunchConfig.segment_gather) at every batch; NCU_SOURCE=1 also writes, per batch, launch C's SASS with its
# executed counts and sampled stall reasons per instruction ($OUT/ncu_*_sass.csv) and copies launch C's cubins from
# Triton's cache ($OUT/cubins): `python bench/sass_lines.py CSV CUBIN` sums the counts per source line.
# usage (device machine, nvidia-h200): make ncu-gpu [NCU_SELECTOR=segments|verify] [NCU_BATCHES="16 64"]
#   [NCU_DTYPE=bfloat16] [NCU_GATHER=1|0] [NCU_SOURCE=1]   (logs in $OUT/ncu_*.txt; ~1 min per batch size)
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-results}"
mkdir -p "$OUT"
cat > /tmp/ncu_target.py <<'PY'
import sys
import torch
from pp3.kernels import LaunchConfig, propose
b, selector = int(sys.argv[1]), sys.argv[2]
gather = {"1": True, "0": False}.get(sys.argv[3]) if len(sys.argv) > 3 else None  # "-": the default path
g = torch.Generator(device="cuda").manual_seed(5)
dtype = getattr(torch, sys.argv[4]) if len(sys.argv) > 4 else torch.float32
xs = [(torch.randn((b, 163840), generator=g, device="cuda") * 4.0).to(dtype) for _ in range(6)]
t = torch.ones(b, device="cuda")
launch = LaunchConfig(pdl=False, selector=selector, segment_gather=gather)  # PDL off, as in bench/NOTES.md
for i, x in enumerate(xs):  # the first 4 positions compile and warm up; ncu profiles the last 2 (4 launches)
    propose(x, t, 1, 2, 100 + i, launch=launch)
torch.cuda.synchronize()
PY
cat > /tmp/ncu_verify.py <<'PY'
import sys
import torch
from pp3.kernels import propose, verify
b, d, v = int(sys.argv[1]), 5, 163840
g = torch.Generator(device="cuda").manual_seed(5)
x = torch.randn((b, d + 1, v), generator=g, device="cuda") * 4.0
t = torch.ones(b, device="cuda")
p = propose(x[:, 0].contiguous() + torch.randn((b, v), generator=g, device="cuda"), t, 1, 2, 3)
tok, st, ids, tix = (a[:, None].expand(-1, d, *a.shape[1:]).contiguous() for a in (p.token, p.status, p.ids, p.tickets))
for i in range(3):  # the first 2 calls compile and warm up; ncu profiles the last (7 launches)
    verify(x, t, tok, st, ids, tix, 1, 2, 3 + i)
torch.cuda.synchronize()
PY
# Per issued instruction, how many warps were stalled for each reason (the cycles a launch spends, by cause).
METRICS=gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_elapsed.max
for r in barrier no_instruction long_scoreboard short_scoreboard wait math_pipe_throttle membar branch_resolving \
    dispatch_stall mio_throttle lg_throttle selected not_selected drain imc_miss tex_throttle; do
  METRICS="$METRICS,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
SELECTOR="${NCU_SELECTOR:-tiles}"
if [ "$SELECTOR" = verify ]; then
  for b in 16 64; do
    timeout 240 ncu --target-processes all --kernel-name regex:"_verify_" --launch-skip 14 --launch-count 7 \
      --section SpeedOfLight --section LaunchStats --section Occupancy --metrics "$METRICS" \
      python3 /tmp/ncu_verify.py "$b" > "$OUT/ncu_verify_b$b.txt" 2>&1
    echo "B=$b: exit $?"
    grep -E "_kernel|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|==ERR" \
      "$OUT/ncu_verify_b$b.txt" | head -60
  done
  exit 0
fi
if [ "$SELECTOR" = segments ]; then
  KERNELS="_segment_max_kernel|_segment_filter_kernel|_segment_merge_kernel"
else
  KERNELS="_tile_candidates_kernel|_finalize_kernel"
fi
GATHER="${NCU_GATHER:-}"
DTYPE="${NCU_DTYPE:-float32}"
for b in ${NCU_BATCHES:-1 4}; do
  PER=2  # launches per position: three for the segment selector with launch B (forced, or below 16 rows)
  if [ "$SELECTOR" = segments ] && { [ "$GATHER" = 0 ] || { [ -z "$GATHER" ] && [ "$(python3 -c \
      "from pp3.kernels.config import segment_gathers as g; print(g($b))")" = False ]; }; }; then
    PER=3
  fi
  NAME="ncu_${SELECTOR}_b$b${GATHER:+_g$GATHER}${NCU_DTYPE:+_$NCU_DTYPE}"
  timeout 240 ncu --target-processes all --kernel-name regex:"$KERNELS" \
    --launch-skip $((4 * PER)) --launch-count $((2 * PER)) --section SpeedOfLight --section LaunchStats --section SchedulerStats \
    --section WarpStateStats ${NCU_SOURCE:+--section SourceCounters --import-source no -f -o "/tmp/$NAME"} \
    --metrics "$METRICS" python3 /tmp/ncu_target.py "$b" "$SELECTOR" "${GATHER:--}" "$DTYPE" > "$OUT/$NAME.txt" 2>&1
  echo "B=$b${GATHER:+ (gather $GATHER)}: exit $?"
  if [ -n "${NCU_SOURCE:-}" ]; then  # the report's details as text, then launch C's SASS with its stall samples
    ncu -i "/tmp/$NAME.ncu-rep" --print-details all >> "$OUT/$NAME.txt" 2>&1
    ncu -i "/tmp/$NAME.ncu-rep" --kernel-name regex:_segment_merge_kernel --launch-count 1 --page source --csv \
      --print-source sass > "$OUT/${NAME}_sass.csv" 2>&1
    echo "$(wc -l < "$OUT/${NAME}_sass.csv") lines of launch C's SASS"
    # the profiled binaries (Triton's cubins carry line info: nvdisasm -gi maps each SASS line to its source line)
    mkdir -p "$OUT/cubins"
    for f in "${TRITON_CACHE_DIR:-$HOME/.triton/cache}"/*/_segment_merge_kernel.cubin; do
      [ -f "$f" ] && cp "$f" "$OUT/cubins/$(basename "$(dirname "$f")").cubin"
    done
  fi
  grep -E "_kernel|Duration|stalled|Warp Cycles Per Issued|Issued Ipc|inst_executed|==PROF==|==ERR|==WARN|Registers" \
    "$OUT/$NAME.txt" | head -80
done
