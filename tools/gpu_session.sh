#!/usr/bin/env bash
# GPU work in named steps, so one device call runs several and the next session knows what is left.
# usage (device tool, repository root): bash tools/gpu_session.sh STEP [STEP ...]
#   env       versions, driver, packages
#   verify    python -m pp3.verify --full (104 cases) and the PTX audit of the kernels actually launched
#   bulk N S  N bulk rows at V=163840 with --bulk-seed S (rows copied to shared memory, reference in a process pool)
#   expf      exhaustive device exponential (≈20 s)
#   props     Hypothesis proptests that run kernels (parity, invariances), profile gpu, -v with durations
#   stats     python -m stats --device cuda (≥ 10^7 draws per vector)
#   stages    python -m bench.stages: per-stage latency of the selector's helpers (≈1 min)
#   bench     python -m bench (BENCH_B, BENCH_D, BENCH_TILES, BENCH_WARPS, BENCH_TIMEOUT)
#   accept    tools/accept_gpu.py and the end-to-end audit with the Triton verifier
#   benchv    python -m bench at V = 32000, 128256, 151936, 262144 (fp32, depth 5, B = 1, 4, 64) into $OUT/vocab
#   flashinfer  install carried FlashInfer wheels (.whl) and warm its JIT; on failure the bench records why
#   propsbulk N S  props and bulk N S at the same time (neither is timed)
#   pack      tar everything under $OUT into one file (the device tool brings back at most 8 files)
# Logs go to $OUT (the device tool brings them back). Each step has its own timeout.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-results}"
mkdir -p "$OUT"
# Compiled kernels (Triton), FlashInfer's JIT build and its installed wheels live in the repository's ignored
# .gpucache/, which the device tool keeps between calls on a machine that is still warm: the next call skips them.
export TRITON_CACHE_DIR="$PWD/.gpucache/triton" FLASHINFER_WORKSPACE_BASE="$PWD/.gpucache"
FI_SITE="$PWD/.gpucache/site"
# FlashInfer installed by an earlier `flashinfer` step (this call or a previous one on a warm machine) stays importable
# for every later step, bench included.
if [ -d "$FI_SITE/flashinfer" ]; then export PYTHONPATH="$PYTHONPATH:$FI_SITE"; fi
# The kernel-facing property tests first (the parity tests, then the invariances); test_catches_bugs.py checks the
# reference's mutants only, needs no GPU and runs in CI. -v and --durations name where the time goes.
# -n: the tests run in PROPS_WORKERS processes (pytest-xdist; each test function stays in one process).
PROPS_ARGS="-v --durations=25 -p no:cacheprovider -n ${PROPS_WORKERS:-6} proptests/test_kernel_vs_reference.py \
proptests/test_invariance.py"
run_props() {  # $1: the timeout when PROPS_TIMEOUT is unset
  HYPOTHESIS_PROFILE=gpu timeout "${PROPS_TIMEOUT:-$1}" python3 -m pytest $PROPS_ARGS > "$OUT/props.log" 2>&1
}
run_bulk() {  # N rows with --bulk-seed S; the process pool's shutdown warnings are dropped from the log
  timeout "${BULK_TIMEOUT:-560}" python3 -m pp3.verify --full --bulk-only --bulk-rows "$1" --bulk-seed "$2" 2>&1 \
    | grep -v -E 'resource_tracker|warnings.warn' | tee "$OUT/bulk_$2.log" | tail -4
}
while [ $# -gt 0 ]; do
  s="$1"; shift
  echo "=== $s ($(date +%T))"
  case "$s" in
    env)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
      python3 -c "import torch, triton, numpy, sys; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)" ;;
    verify)
      timeout "${VERIFY_TIMEOUT:-300}" python3 -m pp3.verify --full --bulk-rows 0 2>&1 | tee "$OUT/verify.log" | tail -8
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
    bulk)
      n="$1"; seed="$2"; shift 2
      run_bulk "$n" "$seed" ;;
    expf) timeout 200 python3 tools/gpu_expf_audit.py 2>&1 | tee "$OUT/expf_audit.log" | tail -4 ;;
    props)
      run_props 560; echo "proptests exit $?"; tail -25 "$OUT/props.log" ;;
    stats) timeout "${STATS_TIMEOUT:-500}" python3 -m stats --quick --device cuda --out "$OUT" 2>&1 | tee "$OUT/stats.log" | tail -40 ;;
    bench)
      timeout "${BENCH_TIMEOUT:-420}" python3 -m bench --batch ${BENCH_B:-1 2 4} --depth ${BENCH_D:-5 10} \
        --vocab ${BENCH_V:-163840} --dtype ${BENCH_DTYPE:-float32 bfloat16} --tiles ${BENCH_TILES:-} \
        --warps ${BENCH_WARPS:-} --replays 200 --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -30 ;;
    benchv)
      # The other vocabularies (issue 5): fp32, depth 5, B = 1, 4, 64, the main implementations only.
      mkdir -p "$OUT/vocab"
      timeout "${BENCHV_TIMEOUT:-200}" python3 -m bench --vocab 32000 128256 151936 262144 --batch ${BENCHV_B:-1 4 64} \
        --depth 5 --dtype float32 --replays 200 --out "$OUT/vocab" --impl "pp3 sampled" "pp3 sampled, no PDL" \
        "pp3 greedy (T0)" "pp3 launch 1 only" "pp3 launch 2 only" "torch argmax" "torch topk+softmax+sample" \
        "flashinfer" 2>&1 | tee "$OUT/vocab/bench.log" | tail -14 ;;
    flashinfer)
      # FlashInfer from wheels carried in .whl (device README); its JIT build is warmed here, under a timeout, so
      # a failure or a slow build costs this step only: the bench then records why it has no FlashInfer row.
      if [ -d "$FI_SITE/flashinfer" ] || { ls .whl/*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index \
          --no-deps --no-compile --no-cache-dir --target "$FI_SITE" .whl/*.whl > "$OUT/flashinfer.log" 2>&1; }; then
        case ":$PYTHONPATH:" in *":$FI_SITE:"*) ;; *) export PYTHONPATH="$PYTHONPATH:$FI_SITE" ;; esac
        if timeout "${FI_TIMEOUT:-120}" python3 -c "
import torch, flashinfer, flashinfer.sampling as s
x = torch.randn(4, 163840, device='cuda')
f = getattr(s, 'top_k_sampling_from_logits', None)
out = f(x, 32, deterministic=True) if f else s.top_k_sampling_from_probs(torch.softmax(x, -1), 32, deterministic=True)
torch.cuda.synchronize(); print('flashinfer', flashinfer.__version__, 'ok', out.shape)" >> "$OUT/flashinfer.log" 2>&1; then
          echo "flashinfer ready"
        else
          export PP3_BENCH_NO_FLASHINFER=1
          export PP3_BENCH_FLASHINFER_NOTE="flashinfer wheels installed but the warm-up failed or ran past its timeout: \
$(grep -v '^\s*$' "$OUT/flashinfer.log" | tail -1 | cut -c1-300)"
        fi
      else
        export PP3_BENCH_NO_FLASHINFER=1
        export PP3_BENCH_FLASHINFER_NOTE="no flashinfer wheels could be installed (see flashinfer.log)"
      fi
      tail -3 "$OUT/flashinfer.log" ;;
    propsbulk)
      # Hypothesis (gpu profile) and the bulk rows at once: neither is timed, and they share the GPU and CPUs well.
      n="$1"; seed="$2"; shift 2
      run_props 400 &
      props_pid=$!
      run_bulk "$n" "$seed"
      wait "$props_pid"; echo "proptests exit $?"; tail -4 "$OUT/props.log" ;;
    stages) timeout "${STAGES_TIMEOUT:-300}" python3 -m bench.stages 2>&1 | tee "$OUT/stages.log" | tail -30 ;;
    accept)
      timeout "${ACCEPT_TIMEOUT:-300}" python3 tools/accept_gpu.py 2>&1 | tee "$OUT/accept_gpu.log" | tail -20
      DSPARK_SAMPLED_TOP32=1 timeout "${E2E_TIMEOUT:-250}" python3 -m pp3 audit-e2e --device cuda --verifier triton --n 1000000 \
        --mutant-n 100000 2>&1 | tee "$OUT/e2e_gpu.log" | tail -20 ;;
    pack) (cd "$OUT" && tar czf "results_$(date +%H%M%S).tgz" --remove-files --exclude='*.tgz' -- * 2>/dev/null; ls -la) ;;
    *) echo "unknown step $s"; exit 2 ;;
  esac
done
