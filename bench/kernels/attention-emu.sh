#!/usr/bin/env bash
# attention-emu.sh — builds bench/kernels/attention_emu.cpp with the host C++ compiler against
# the CUDA headers and runs it: the FusedAttention kernels of codegen/kernels/attention.cuh
# emulated on the CPU (128 threads a block) against a double-precision reference. No GPU needed;
# a few minutes on two cores. Exit status 0 when every case matches.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ampc"
cp "$root"/codegen/kernels/*.cuh "$work/ampc/"
"${CXX:-g++}" -std=c++17 -O2 -Wall -Wno-unknown-pragmas -I"$work" -I"$cuda/include" \
  "$root/bench/kernels/attention_emu.cpp" -o "$work/attention_emu" -lpthread
"$work/attention_emu"
