#!/usr/bin/env bash
# Reproduce (or clear) the illegal memory access seen on the H200 on 2026-11-30 with programmatic dependent launch
# on: bench at V=163840, fp32, B=64, depth 10, "pp3 launch 1 only" then "pp3 launch 2 only" (bench/NOTES.md,
# attempt 4). Runs the sequence with PDL off, then on, then on under CUDA_LAUNCH_BLOCKING=1, then on under
# compute-sanitizer (memcheck names the kernel and the address). Logs in $OUT. About 3 minutes of device time.
# usage (device tool, nvidia-h200): bash tools/pdl_repro.sh
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-results}"
mkdir -p "$OUT"
args=(--vocab 163840 --dtype float32 --batch 32 64 --depth 10 --replays 50
      --impl "pp3 launch 1 only" "pp3 launch 2 only" "pp3 sampled")
for mode in off on blocking sanitizer; do
  echo "=== PDL $mode ($(date +%T))"
  case "$mode" in
    off) PP3_PDL=0 timeout 120 python3 -m bench "${args[@]}" --out "$OUT/$mode" ;;
    on) PP3_PDL=1 timeout 120 python3 -m bench "${args[@]}" --out "$OUT/$mode" ;;
    blocking) CUDA_LAUNCH_BLOCKING=1 PP3_PDL=1 timeout 150 python3 -m bench "${args[@]}" --out "$OUT/$mode" ;;
    sanitizer) PP3_PDL=1 timeout 300 compute-sanitizer --tool memcheck --print-limit 5 \
      python3 -m bench "${args[@]}" --out "$OUT/$mode" ;;
  esac 2>&1 | grep -v -E '^\{"impl"|CUDAEvent.h' | tee "$OUT/pdl_$mode.log" | tail -12
done
