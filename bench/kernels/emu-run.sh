#!/usr/bin/env bash
# emu-run.sh NAME — builds bench/kernels/NAME.cpp (an emulator including emu.h) with the host C++
# compiler against the CUDA headers and the kernel templates of codegen/kernels, and runs it.
# attention-emu.sh, gemm-emu.sh and norm-emu.sh call it; the exit status is the emulator's.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ampc"
cp "$root"/codegen/kernels/*.cuh "$work/ampc/"
# -fno-strict-aliasing: the kernels read vectors through a pointer of another type (ld_vec),
# which device compilers take as written and host g++ at -O2 may not.
"${CXX:-g++}" -std=c++17 -O2 -fno-strict-aliasing -ffp-contract=off -Wall -Wno-unknown-pragmas -I"$work" -I"$cuda/include" \
  "$root/bench/kernels/$1.cpp" -o "$work/$1" -lpthread
"$work/$1"
