#!/usr/bin/env bash
# The GPU pair session for issue 6 (device kind nvidia-h200-x2): environment, topology, then bench/pair.py
# (parity of pp3.pair with the reference on the real pair, the depth-5 speed table, link measurements).
# usage (device tool): bash tools/pair_gpu.sh [bench.pair options, e.g. --quick or --steps parity]
# Results land in $OUT (pair.json, pair_rank*.json, pair.log). Everything runs under `timeout`, and the bench's
# own parent kills its ranks after --timeout seconds, so a hung collective cannot eat the session.
set -u
# NVLink multicast stays off in every process started from here (the ranks inherit this environment).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PP3_COMMIT="${PP3_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
unset TRITON_INTERPRET
OUT="${OUT:-results}"
mkdir -p "$OUT"
PY="${PY:-python3}"

echo "=== env ($(date +%T))"
timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
timeout 30 nvidia-smi topo -m | tee "$OUT/topo.txt"
timeout 60 "$PY" -c "import sys, torch, triton, numpy; print(sys.version.split()[0], 'torch', torch.__version__, \
'triton', triton.__version__, 'numpy', numpy.__version__, 'cuda', torch.version.cuda, 'nccl', \
torch.cuda.nccl.version(), 'gpus', torch.cuda.device_count())"
env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort

echo "=== bench.pair ($(date +%T))"
# The device tool allows 600 s per command: the ranks get 470 s, the whole bench 530 s.
timeout -k 10 "${PAIR_TIMEOUT:-530}" "$PY" -m bench.pair --out "$OUT" --timeout "${RANK_TIMEOUT:-470}" "$@" \
  2>&1 | tee "$OUT/pair.log" | grep -v -E '^\[rank [0-9]+ [0-9:]+\] \{' | tail -150
rc=${PIPESTATUS[0]}
echo "=== done ($(date +%T)), bench.pair exit $rc"
exit "$rc"
