#!/usr/bin/env bash
# gemm-emu.sh — builds bench/kernels/gemm_emu.cpp with the host C++ compiler against the CUDA
# headers and runs it: the dense GEMM of codegen/kernels/gemm.cuh emulated on the CPU (128 and
# 256 threads a block) against a double-precision reference. No GPU needed; a few minutes on two
# cores. Exit status 0 when every case matches.
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/emu-run.sh" gemm_emu
