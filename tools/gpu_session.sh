#!/usr/bin/env bash
# One device call: environment, PTX audit of the launched kernels, full parity, exhaustive expf audit, benchmark.
# usage (device tool): bash tools/gpu_session.sh [steps...]   steps: env verify expf bench props  (default: all)
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-results}"
mkdir -p "$OUT"
steps="${*:-env verify expf props bench}"
for s in $steps; do
  echo "=== $s ($(date +%T))"
  case "$s" in
    env)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      python3 -c "import torch, triton, numpy, sys; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)"
      python3 -m pip list 2>/dev/null | grep -i -E "flashinfer|hypothesis|pytest|scipy" ;;
    verify)
      python3 -m pp3.verify --full --bulk-rows "${BULK_ROWS:-1000000}" 2>&1 | tee "$OUT/verify.log" | tail -25
      python3 - <<'PY' 2>&1 | tee "$OUT/ptx_audit.log"
import torch
from pp3.kernels import propose, expf
from pp3.kernels.ptx_audit import launched_ptx, find_forbidden
for dt in (torch.float32, torch.float16, torch.bfloat16):
    propose(torch.randn(2, 5000, device="cuda").to(dt), 1.0, 1, 2, 3)
expf(-torch.rand(10, device="cuda"))
p = launched_ptx()
bad = {k: find_forbidden(v) for k, v in p.items() if find_forbidden(v)}
print(f"launched exact-path kernels: {len(p)}; with forbidden instructions: {len(bad)} {bad}")
PY
      ;;
    expf) python3 tools/gpu_expf_audit.py 2>&1 | tee "$OUT/expf_audit.log" | tail -8 ;;
    props)
      if [ -d proptests ]; then
        HYPOTHESIS_PROFILE=gpu timeout 300 python3 -m pytest -q -x proptests -p no:cacheprovider 2>&1 | tee "$OUT/props.log" | tail -8
      fi ;;
    bench) timeout ${BENCH_TIMEOUT:-420} python3 -m bench --batch ${BENCH_B:-1 2 4} --depth ${BENCH_D:-5 10} --tiles ${BENCH_TILES:-} --replays 200 --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -30 ;;
  esac
done
