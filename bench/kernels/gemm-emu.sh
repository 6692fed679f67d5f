#!/usr/bin/env bash
# gemm-emu.sh — builds bench/kernels/gemm_emu.cpp with the host C++ compiler against the CUDA
# headers and runs it: the dense GEMM of codegen/kernels/gemm.cuh emulated on the CPU (128 and
# 256 threads a block) against a double-precision reference. No GPU needed; a few minutes on two
# cores. Exit status 0 when every case matches.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ampc"
cp "$root"/codegen/kernels/*.cuh "$work/ampc/"
"${CXX:-g++}" -std=c++17 -O2 -Wall -Wno-unknown-pragmas -I"$work" -I"$cuda/include" \
  "$root/bench/kernels/gemm_emu.cpp" -o "$work/gemm_emu" -lpthread
"$work/gemm_emu"
