#!/usr/bin/env bash
# Reproduce (or clear) the illegal memory access seen on the H200 on 2026-11-30 with programmatic dependent launch
# on: bench at V=163840, fp32, B=64, depth 10, "pp3 launch 1 only" then "pp3 launch 2 only" (bench/NOTES.md,
# attempt 4). Runs the sequence with PDL on; if it faults again, with PDL off, on under CUDA_LAUNCH_BLOCKING=1 and on
# under compute-sanitizer (memcheck names the kernel and the address).
# Logs in $OUT. About 1 minute of device time, 10 if it faults.
# usage (device tool, nvidia-h200): bash tools/pdl_repro.sh
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-results}"
mkdir -p "$OUT"
args=(--vocab 163840 --dtype float32 --batch 32 64 --depth 10 --replays 50
      --impl "pp3 launch 1 only" "pp3 launch 2 only" "pp3 sampled")
# PDL on first, exactly the failing setup; the slow diagnostic modes run only if it faults again.
run_mode() {
  echo "=== PDL $1 ($(date +%T))"
  case "$1" in
    off) PP3_PDL=0 timeout 120 python3 -m bench "${args[@]}" --out "$OUT/$1" ;;
    on) PP3_PDL=1 timeout "${PDL_ON_TIMEOUT:-150}" python3 -m bench "${args[@]}" --out "$OUT/$1" ;;
    blocking) CUDA_LAUNCH_BLOCKING=1 PP3_PDL=1 timeout 150 python3 -m bench "${args[@]}" --out "$OUT/$1" ;;
    sanitizer) PP3_PDL=1 timeout 300 compute-sanitizer --tool memcheck --print-limit 5 \
      python3 -m bench "${args[@]}" --out "$OUT/$1" ;;
  esac 2>&1 | grep -v -E '^\{"impl"|CUDAEvent.h' | tee "$OUT/pdl_$1.log" | tail -12
}
run_mode on
if grep -q -i -E "illegal|poisoned|CUDA error" "$OUT/pdl_on.log"; then
  for mode in off blocking sanitizer; do run_mode "$mode"; done
else
  echo "PDL on: no fault in this sequence"
fi
