#!/usr/bin/env bash
# Where a selector launch spends its time, by Nsight Compute: warp stall reasons, issue rate, instruction mix, for
# launch 1 (tile candidates) and launch 2 (finalize) at V=163840, fp32, B=1 and B=4 (bench/NOTES.md uses it).
# usage (device machine, nvidia-h200): make ncu-gpu    (logs in $OUT/ncu_*.txt; ~1 minute)
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-results}"
mkdir -p "$OUT"
cat > /tmp/ncu_target.py <<'PY'
import sys
import torch
from pp3.kernels import LaunchConfig, propose
b = int(sys.argv[1])
g = torch.Generator(device="cuda").manual_seed(5)
xs = [torch.randn((b, 163840), generator=g, device="cuda") * 4.0 for _ in range(6)]
t = torch.ones(b, device="cuda")
for i, x in enumerate(xs):  # the first 4 positions compile and warm up; ncu profiles the last 2 (4 launches)
    propose(x, t, 1, 2, 100 + i, launch=LaunchConfig(pdl=False))  # PDL off, as in bench/NOTES.md
torch.cuda.synchronize()
PY
# Per issued instruction, how many warps were stalled for each reason (the cycles a launch spends, by cause).
METRICS=gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_elapsed.max
for r in barrier no_instruction long_scoreboard short_scoreboard wait math_pipe_throttle membar branch_resolving \
    dispatch_stall mio_throttle lg_throttle selected not_selected drain imc_miss tex_throttle; do
  METRICS="$METRICS,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for b in 1 4; do
  timeout 240 ncu --target-processes all --kernel-name regex:"_tile_candidates_kernel|_finalize_kernel" \
    --launch-skip 8 --launch-count 4 --section SpeedOfLight --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --metrics "$METRICS" \
    python3 /tmp/ncu_target.py "$b" > "$OUT/ncu_b$b.txt" 2>&1
  echo "B=$b: exit $?"
  grep -E "_kernel|Duration|stalled|Warp Cycles Per Issued|Issued Ipc|inst_executed|==PROF==|==ERR|==WARN|Registers" \
    "$OUT/ncu_b$b.txt" | head -80
done
