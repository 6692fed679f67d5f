#!/usr/bin/env bash
# bench/compile-time/run.sh — how long `ampc resnet50.onnx -o r50.so` takes on this machine:
# cold (an empty kernel cache: every kernel through NVRTC, PTX for compute_80 and an sm_80
# cubin when no GPU is present) and warm (the cache filled by the cold run), each the median of
# three. ResNet-50 comes from make_resnet50.py (random weights, the onnx package of the
# project's .venv). Prints one markdown table row per measurement, for docs/benchmarks.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ampc=${AMPC:-$root/build/bin/ampc}
py=${PYTHON:-$root/.venv/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/ampc-compile-time-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" "$root/bench/compile-time/make_resnet50.py" "$work/resnet50.onnx"
ms() { local s=$(date +%s%N); "$@" > /dev/null; echo $(( ($(date +%s%N) - s) / 1000000 )); }
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
cold=() warm=()
for i in 1 2 3; do
  rm -rf "$work/cache" "$work/r50.so"
  cold+=("$(AMPC_CACHE_DIR=$work/cache ms "$ampc" "$work/resnet50.onnx" -o "$work/r50.so")")
  warm+=("$(AMPC_CACHE_DIR=$work/cache ms "$ampc" "$work/resnet50.onnx" -o "$work/r50.so")")
done
cpus=$(nproc)
size=$(du -h "$work/r50.so" | cut -f1)
echo "| ResNet-50 (b1, fp32/TF32), $cpus CPUs | cold kernel cache | $(median "${cold[@]}") ms | ${cold[*]} |"
echo "| ResNet-50 (b1, fp32/TF32), $cpus CPUs | warm kernel cache | $(median "${warm[@]}") ms | ${warm[*]} |"
echo "library size: $size"
