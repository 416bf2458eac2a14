#!/usr/bin/env bash
# A Triton wheel trimmed to what pp3's kernels need on an NVIDIA GPU, small enough to travel to a GPU machine
# (the 3.9.0 wheel is 286 MB; the device tool carries at most 64 MiB with the tree). usage:
#   tools/triton_kit.sh VERSION OUTDIR [PYTHON_TAG]      e.g. tools/triton_kit.sh 3.9.0 .kits 3.12
# Kept: the Python package, libtriton.so (stripped: 477 -> ~190 MB), the NVIDIA backend's Python, headers and
# libdevice. Removed: the AMD backend, CUPTI, proton (the profiler), the instrumentation library, the plugins and
# FileCheck, and the bundled ptxas/cuobjdump/nvdisasm: on the GPU the machine's own CUDA tools stand in for them
# (TRITON_PTXAS_PATH and friends; tools/triton_kit_env.sh). Writes OUTDIR/triton-VERSION-kit.tar.xz and prints its
# sha256. pip downloads the wheel (PyPI); nothing is installed.
set -euo pipefail
v=${1:?version}; out=${2:?outdir}; py=${3:-3.12}
pyexe=${PYTHON:-python3}
mkdir -p "$out"; out=$(cd "$out" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$pyexe" -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$work/dl" "triton==$v"
mkdir "$work/site"
"$pyexe" -m zipfile -e "$work"/dl/triton-*.whl "$work/site"
t="$work/site/triton"
rm -rf "$t/backends/amd" "$t/backends/nvidia/lib/cupti" "$t/backends/nvidia/lib/cupti-blackwell" \
  "$t/instrumentation" "$t/plugins" "$t/FileCheck" "$t/_C/libproton.so" "$t/backends/nvidia/bin"
strip --strip-unneeded "$t/_C/libtriton.so"
# Backends are found by entry point: the kit's own metadata comes first on the path and must not name the AMD one.
sed -i '/^amd = /d' "$work"/site/triton-*.dist-info/entry_points.txt
echo "triton $v kit: $(du -sm "$work/site" | cut -f1) MB unpacked"
tar -C "$work/site" -cf - . | xz -6 -T0 > "$out/triton-$v-kit.tar.xz"
ls -la "$out/triton-$v-kit.tar.xz"
sha256sum "$out/triton-$v-kit.tar.xz"
